"""Beam search over masked continuations, one forked matcher per beam, with length normalisation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grammask.decoding.run import Guide, Run, Search
from grammask.decoding.strategy import Strategy, log_softmax
from grammask.errors import DecodingError
from grammask.models.protocol import ModelState


@dataclass
class _Beam:
    state: ModelState
    guide: Guide
    tokens: tuple[int, ...]
    logp: float


@dataclass(frozen=True)
class _Hypothesis:
    score: float
    tokens: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class BeamSearch(Strategy):
    """Keeps the ``width`` best partial outputs by the model's log-probability (of the unmasked distribution).

    Each step takes the ``2 * width`` best allowed continuations of every beam; one ending in EOS among the
    ``width`` best candidates becomes a finished hypothesis, scored ``logp / steps ** length_penalty`` (steps
    count EOS); the rest, best first, become the next beams. Search stops when no beam is left, when
    ``width`` hypotheses are finished and no beam's current normalised score beats the worst of them, or at
    ``max_tokens`` (beams whose output is then a whole sentence are finished). The best hypothesis wins;
    if none finished, the best beam is returned cut at ``max_tokens``.
    Raises :class:`~grammask.errors.DecodingError` for ``width < 1``.
    """

    width: int = 4
    length_penalty: float = 1.0

    name = "beam"

    def __post_init__(self) -> None:
        if self.width < 1:
            raise DecodingError(f"beam width must be at least 1, got {self.width}")

    def _norm(self, logp: float, steps: int) -> float:
        return logp / steps**self.length_penalty

    def _search(
        self, run: Run, prompt_ids: Sequence[int], guide: Guide, max_tokens: int, rng: np.random.Generator
    ) -> Search:
        beams = [_Beam(run.start(prompt_ids), guide, (), 0.0)]
        finished: list[_Hypothesis] = []
        while beams:
            candidates = self._candidates(beams)
            chosen: list[tuple[float, _Beam, int]] = []
            for rank, (logp, beam, token) in enumerate(candidates):
                if beam.guide.is_end(token):
                    if rank < self.width:
                        finished.append(_Hypothesis(self._norm(logp, len(beam.tokens) + 1), beam.tokens, "eos"))
                elif len(chosen) < self.width:
                    chosen.append((logp, beam, token))
            if not chosen or self._done(finished, chosen):
                break
            children = [self._child(beam, token, logp) for logp, beam, token in chosen]
            if len(children[0].tokens) == max_tokens:
                finished.extend(
                    _Hypothesis(self._norm(c.logp, max_tokens), c.tokens, "max_tokens")
                    for c in children
                    if c.guide.is_accepting()
                )
                if not finished:
                    return list(children[0].tokens), "max_tokens"
                break
            states = yield from run.extend([c.state for c in children], [c.tokens[-1] for c in children])
            for child, state in zip(children, states):
                child.state = state
            beams = children
        best = max(finished, key=lambda h: h.score)
        return list(best.tokens), best.reason

    def _candidates(self, beams: list[_Beam]) -> list[tuple[float, _Beam, int]]:
        """The ``2 * width`` best allowed continuations of each beam, best first."""
        out = []
        k = 2 * self.width
        for beam in beams:
            scores = beam.guide.masked(log_softmax(beam.state.logits))
            top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
            out.extend((beam.logp + float(scores[t]), beam, int(t)) for t in top if np.isfinite(scores[t]))
        out.sort(key=lambda c: -c[0])
        return out

    def _done(self, finished: list[_Hypothesis], chosen: list[tuple[float, _Beam, int]]) -> bool:
        if len(finished) < self.width:
            return False
        worst = sorted(h.score for h in finished)[-self.width]
        logp, beam, _ = chosen[0]
        return self._norm(logp, len(beam.tokens) + 1) < worst

    def _child(self, beam: _Beam, token: int, logp: float) -> _Beam:
        guide = beam.guide.fork()
        guide.advance(token)
        return _Beam(beam.state, guide, beam.tokens + (token,), logp)
