"""The common shape of decoding strategies: a prompt, an optional matcher and a token limit in, tokens and stats out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import ClassVar

import numpy as np

from grammask.decoding.model import LanguageModel, TokenMatcher
from grammask.decoding.run import Guide, Run
from grammask.decoding.stats import GenerationStats
from grammask.errors import DecodingError


@dataclass(frozen=True)
class Decoded:
    """The output of one decoding: token ids (EOS not included) and what they cost."""

    tokens: list[int]
    stats: GenerationStats


class Strategy(ABC):
    """A decoding strategy; mask-aware (given a matcher) and EOS-aware, with a seedable RNG."""

    name: ClassVar[str]

    def decode(
        self,
        model: LanguageModel,
        prompt_ids: Sequence[int],
        matcher: TokenMatcher | None = None,
        *,
        max_tokens: int,
        seed: int | None = None,
    ) -> Decoded:
        """Generate at most ``max_tokens`` tokens after ``prompt_ids``; stops early at EOS.

        With a matcher, every token follows its masks (EOS only once the output is a whole sentence);
        the matcher is used up (advanced or forked from). Without one, decoding is unconstrained.
        """
        if max_tokens < 1:
            raise DecodingError(f"max_tokens must be at least 1, got {max_tokens}")
        if not prompt_ids:
            raise DecodingError("the prompt has no tokens; give at least one")
        stats = GenerationStats()
        run = Run(model, stats)
        t0 = perf_counter()
        tokens, reason = self._search(run, prompt_ids, run.guide(matcher), max_tokens, np.random.default_rng(seed))
        stats.seconds = perf_counter() - t0
        stats.tokens = len(tokens)
        stats.steps = len(tokens) + (reason == "eos")
        stats.stop_reason = reason
        return Decoded(tokens, stats)

    @abstractmethod
    def _search(
        self, run: Run, prompt_ids: Sequence[int], guide: Guide, max_tokens: int, rng: np.random.Generator
    ) -> tuple[list[int], str]:
        """The output tokens and the stop reason (``"eos"`` or ``"max_tokens"``)."""


class LinearStrategy(Strategy):
    """One sequence, one token per step: the strategies that differ only in how a token is chosen.

    When :meth:`checks_first` holds, a step first tries the token chosen from the *unmasked* logits and
    computes the full mask only if the grammar rejects it. That gives the same greedy choice, and the
    same distribution for plain sampling (a rejected draw is redrawn from the masked distribution:
    ``p(t) + (1 - p(A)) p(t) / p(A) = p(t) / p(A)`` for an allowed ``t``), at the cost of one
    ``advance`` when the model already follows the grammar.
    """

    @abstractmethod
    def choose(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        """A token id from masked logits (disallowed tokens at -inf)."""

    def checks_first(self) -> bool:
        """Whether choosing from unmasked logits and checking the choice is exact for this strategy."""
        return False

    def _search(
        self, run: Run, prompt_ids: Sequence[int], guide: Guide, max_tokens: int, rng: np.random.Generator
    ) -> tuple[list[int], str]:
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
            if len(tokens) == max_tokens:
                return tokens, "max_tokens"
            state = run.extend([state], [token])[0]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities (float64) of logits; -inf entries stay -inf."""
    x = logits.astype(np.float64)
    top = np.max(x)
    return x - (top + np.log(np.sum(np.exp(x - top))))
