"""The common shape of decoding strategies: a prompt, an optional matcher and a token limit in, tokens and stats out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import ClassVar

import numpy as np

from grammask.decoding.run import Forward, Guide, Read, Run, Search, TokenMatcher
from grammask.decoding.stats import GenerationStats
from grammask.errors import DecodingError
from grammask.kernel_timing import KernelReadying
from grammask.models.protocol import LanguageModel, ModelState, ReadingModel


@dataclass(frozen=True)
class Decoded:
    """The output of one decoding: token ids (EOS not included) and what they cost."""

    tokens: list[int]
    stats: GenerationStats


class Strategy(ABC):
    """A decoding strategy; mask-aware (given a matcher) and EOS-aware, with a seedable RNG."""

    name: ClassVar[str]
    jumps_forward: ClassVar[bool] = False
    """Whether the strategy can jump forward over text the grammar forces (``jump_forward=True``)."""

    def decode(
        self,
        model: LanguageModel,
        prompt_ids: Sequence[int],
        matcher: TokenMatcher | None = None,
        *,
        max_tokens: int,
        seed: int | None = None,
        jump_forward: bool = False,
    ) -> Decoded:
        """Generate at most ``max_tokens`` tokens after ``prompt_ids``; stops early at EOS.

        With a matcher, every token follows its masks (EOS only once the output is a whole sentence);
        the matcher is used up (advanced or forked from). Without one, decoding is unconstrained.
        ``jump_forward``: after each token, append the tokens the grammar forces next
        (:meth:`~grammask.matcher.Matcher.forced_tokens`) without asking the model, read in one forward pass.
        Raises what :meth:`decode_many` raises.
        """
        return self.decode_many(model, [prompt_ids], [matcher], max_tokens=max_tokens, seed=seed,
                                jump_forward=jump_forward)[0]

    def decode_many(
        self,
        model: LanguageModel,
        prompts: Sequence[Sequence[int]],
        matchers: Sequence[TokenMatcher | None] | None = None,
        *,
        max_tokens: int | Sequence[int],
        seed: int | None = None,
        jump_forward: bool = False,
    ) -> list[Decoded]:
        """:meth:`decode` for several prompts at once, one output each, in order. ``matchers`` and
        ``max_tokens`` give one per prompt (``max_tokens`` may be one limit for all).

        The searches run side by side and every forward pass serves the pending requests of all of them,
        so the model reads one batch per round instead of one sequence: several times the throughput on a
        CPU, where a pass is bound by reading the weights. Each search is the one :meth:`decode` runs (its
        own RNG seeded with ``seed``); batched passes may round logits differently in the last bits. Each
        output's stats book its own work and its share of every pass it took part in, by sequences.

        Raises :class:`~grammask.errors.DecodingError` when ``matchers`` or ``max_tokens`` do not give one
        per prompt, a limit is below 1, a prompt is empty or ``jump_forward`` is asked of a strategy that
        cannot (beam search, MCTS), and :class:`~grammask.errors.MatcherStateError` when a matcher allows no
        next token (a dead end).
        """
        if jump_forward and not self.jumps_forward:
            raise DecodingError(f"the {self.name} strategy does not jump forward; use greedy or sample")
        limits = [max_tokens] * len(prompts) if isinstance(max_tokens, int) else list(max_tokens)
        if matchers is None:
            matchers = [None] * len(prompts)
        for name, given in (("matchers", matchers), ("max_tokens limits", limits)):
            if len(given) != len(prompts):
                raise DecodingError(f"got {len(prompts)} prompts but {len(given)} {name}; give one per prompt")
        for limit in limits:
            if limit < 1:
                raise DecodingError(f"max_tokens must be at least 1, got {limit}")
        if any(len(p) == 0 for p in prompts):
            raise DecodingError("a prompt has no tokens; give at least one")
        searches = []
        for prompt_ids, matcher, limit in zip(prompts, matchers, limits):
            run = Run(model, GenerationStats(), jump_forward)
            rng = np.random.default_rng(seed)
            searches.append(_Driven(run, self._search(run, prompt_ids, run.guide(matcher), limit, rng)))
        pending = {i: req for i, s in enumerate(searches) if (req := s.resume(None)) is not None}
        while pending:
            answers = {i: [_read(model, req, searches[i].run.stats)] for i, req in pending.items() if isinstance(req, Read)}
            batched = {i: req for i, req in pending.items() if i not in answers}
            states = [state for req in batched.values() for state in req.states]
            tokens = [token for req in batched.values() for token in req.token_ids]
            t0 = perf_counter()
            out = model.extend(states, tokens) if states else []
            seconds = perf_counter() - t0
            given = 0
            for i, req in batched.items():
                n = len(req.states)
                searches[i].run.stats.model_seconds += seconds * n / len(states) if states else 0.0
                answers[i] = out[given : given + n]
                given += n
            following = {}
            for i in pending:
                nxt = searches[i].resume(answers[i])
                if nxt is not None:
                    following[i] = nxt
            pending = following
        return [s.decoded() for s in searches]

    @abstractmethod
    def _search(
        self, run: Run, prompt_ids: Sequence[int], guide: Guide, max_tokens: int, rng: np.random.Generator
    ) -> Search:
        """A generator (see :mod:`grammask.decoding.run`) returning the output tokens and the stop reason
        (``"eos"`` or ``"max_tokens"``)."""


def _read(model: LanguageModel, request: Read, stats: GenerationStats) -> ModelState:
    """Serve a :class:`Read`: one pass where the model can read several tokens at once, else one per token."""
    t0 = perf_counter()
    if isinstance(model, ReadingModel):
        state = model.read(request.state, request.token_ids)
    else:
        state = request.state
        for token in request.token_ids:
            state = model.extend([state], [token])[0]
    stats.model_seconds += perf_counter() - t0
    return state


class _Driven:
    """A search being driven: its run, its generator, the time it spent itself, and its result once done."""

    __slots__ = ("own_seconds", "result", "run", "search")

    def __init__(self, run: Run, search: Search):
        self.run = run
        self.search = search
        self.own_seconds = 0.0
        self.result: tuple[list[int], str] | None = None

    def resume(self, states: list[ModelState] | None) -> Forward | None:
        """Send the states it asked for (None to start it); its next request, or None once it has finished."""
        t0 = perf_counter()
        readying = KernelReadying()
        try:
            with readying:
                return self.search.send(states)
        except StopIteration as done:
            self.result = done.value
            return None
        finally:
            self.own_seconds += perf_counter() - t0
            # Kernels compile, or load from numba's cache, inside matcher calls, which the guide books as mask time.
            self.run.stats.compile_seconds += readying.seconds
            self.run.stats.mask_seconds -= readying.seconds

    def decoded(self) -> Decoded:
        tokens, reason = self.result
        stats = self.run.stats
        stats.seconds = self.own_seconds + stats.model_seconds
        stats.tokens = len(tokens)
        stats.steps = len(tokens) + (reason == "eos")
        stats.stop_reason = reason
        return Decoded(tokens, stats)


class LinearStrategy(Strategy):
    """One sequence, one token per step: the strategies that differ only in how a token is chosen.

    When :meth:`checks_first` holds, a step first tries the token chosen from the *unmasked* logits and
    computes the full mask only if the grammar rejects it. That gives the same greedy choice, and the
    same distribution for plain sampling (a rejected draw is redrawn from the masked distribution:
    ``p(t) + (1 - p(A)) p(t) / p(A) = p(t) / p(A)`` for an allowed ``t``), at the cost of one
    ``advance`` when the model already follows the grammar.
    """

    jumps_forward = True

    @abstractmethod
    def choose(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        """A token id from masked logits (disallowed tokens at -inf)."""

    def checks_first(self) -> bool:
        """Whether choosing from unmasked logits and checking the choice is exact for this strategy."""
        return False

    def _search(
        self, run: Run, prompt_ids: Sequence[int], guide: Guide, max_tokens: int, rng: np.random.Generator
    ) -> Search:
        state = run.start(prompt_ids)
        tokens: list[int] = []
        check_first = self.checks_first()
        while True:
            token = self.choose(state.logits, rng) if check_first else -1
            if token < 0 or not guide.try_advance(token):
                token = self.choose(guide.masked(state.logits), rng)
                guide.advance(token)
            if guide.is_end(token):
                return tokens, "eos"
            tokens.append(token)
            forced = guide.forced_tokens(max_tokens - len(tokens))
            tokens.extend(forced)
            if len(tokens) == max_tokens:
                return tokens, "max_tokens"
            if forced:
                state = yield from run.read(state, [token, *forced])
            else:
                state = (yield from run.extend([state], [token]))[0]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities (float64) of logits; -inf entries stay -inf."""
    x = logits.astype(np.float64)
    top = np.max(x)
    return x - (top + np.log(np.sum(np.exp(x - top))))
