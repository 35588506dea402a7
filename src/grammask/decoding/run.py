"""The shared plumbing of every strategy: model calls, what a matcher must offer, and per-sequence guides that
mask logits.

A search is a generator: it reads its prompt itself, then yields a :class:`Forward` for each batch of
extensions it needs and is sent back the new states. Whoever drives it decides how forward passes are
batched (one search alone, or many searches sharing each pass) and books their time.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from time import perf_counter
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from grammask.bitmask import bitmask_words
from grammask.decoding.stats import GenerationStats
from grammask.errors import MatcherStateError, TokenRejectedError
from grammask.models.protocol import LanguageModel, ModelState


@runtime_checkable
class TokenMatcher(Protocol):
    """The part of :class:`grammask.matcher.Matcher` decoding uses (a budgeted matcher is one too)."""

    def fill_mask(self, row: np.ndarray) -> None: ...

    def advance(self, token_id: int) -> None: ...

    def is_accepting(self) -> bool: ...

    def is_terminated(self) -> bool: ...

    def fork(self) -> TokenMatcher: ...


class Forward(NamedTuple):
    """A search's request: append ``token_ids[i]`` to ``states[i]``, in one forward pass."""

    states: Sequence[ModelState]
    token_ids: Sequence[int]


class Read(NamedTuple):
    """A search's request to append several tokens to one state in one pass (text the grammar forces).

    The driver answers it with a one-element list, like a :class:`Forward` of one state.
    """

    state: ModelState
    token_ids: Sequence[int]


Search = Generator[Forward | Read, list[ModelState], tuple[list[int], str]]
"""A running search: yields forward requests, is sent their states, returns tokens and the stop reason."""


class Run:
    """One decoding run: the model, its statistics, the mask buffer its guides share, and whether it jumps
    forward over text the grammar forces."""

    def __init__(self, model: LanguageModel, stats: GenerationStats, jump_forward: bool = False):
        self.model = model
        self.stats = stats
        self.jump_forward = jump_forward
        self.eos_ids = model.eos_ids
        self.n_logits = model.n_logits
        self.row = np.zeros(bitmask_words(model.n_logits), dtype=np.int32)

    def start(self, prompt_ids: Sequence[int]) -> ModelState:
        t0 = perf_counter()
        state = self.model.start(prompt_ids)
        self.stats.prefill_seconds += perf_counter() - t0
        self.stats.prompt_tokens = len(prompt_ids)
        return state

    def extend(
        self, states: Sequence[ModelState], token_ids: Sequence[int]
    ) -> Generator[Forward, list[ModelState], list[ModelState]]:
        """The new states, from the driver (``states = yield from run.extend(...)``)."""
        out = yield Forward(states, token_ids)
        self.stats.forward_passes += len(states)
        return out

    def read(self, state: ModelState, token_ids: Sequence[int]) -> Generator[Forward | Read, list[ModelState], ModelState]:
        """The state after several tokens read in one pass, from the driver (``state = yield from run.read(...)``)."""
        out = yield Read(state, token_ids)
        self.stats.forward_passes += 1
        return out[0]

    def guide(self, matcher: TokenMatcher | None) -> Guide:
        return Guide(self, matcher)


class Guide:
    """One sequence's grammar side: its matcher (None: unconstrained) and the timing of its mask work."""

    __slots__ = ("matcher", "run")

    def __init__(self, run: Run, matcher: TokenMatcher | None):
        self.run = run
        self.matcher = matcher

    def masked(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` with disallowed tokens at -inf: a new array, or ``logits`` itself when unconstrained.

        Raises :class:`~grammask.errors.MatcherStateError` when the matcher allows no token (a dead end).
        """
        if self.matcher is None:
            return logits
        t0 = perf_counter()
        run = self.run
        self.matcher.fill_mask(run.row)
        allowed = np.unpackbits(run.row.view(np.uint8), count=run.n_logits, bitorder="little").view(bool)
        if not allowed.any():
            raise MatcherStateError("the grammar allows no next token here (a dead end in the grammar's masks)")
        out = np.where(allowed, logits, np.float32(-np.inf))
        run.stats.mask_seconds += perf_counter() - t0
        return out

    def advance(self, token_id: int) -> None:
        if self.matcher is None:
            return
        t0 = perf_counter()
        self.matcher.advance(token_id)
        self.run.stats.mask_seconds += perf_counter() - t0

    def try_advance(self, token_id: int) -> bool:
        """Advance if the grammar allows ``token_id`` here; False (state unchanged) if not."""
        if self.matcher is None:
            return True
        t0 = perf_counter()
        try:
            self.matcher.advance(token_id)
            return True
        except TokenRejectedError:
            return False
        finally:
            self.run.stats.mask_seconds += perf_counter() - t0

    def allows(self, token_id: int) -> bool:
        """Whether the grammar allows ``token_id`` here (checked on a fork; this guide is unchanged)."""
        return self.matcher is None or self.fork().try_advance(token_id)

    def forced_tokens(self, limit: int) -> list[int]:
        """At most ``limit`` tokens the grammar forces next (jump-forward), accepted into the matcher; [] where the
        run does not jump forward or the matcher cannot tell (no ``forced_tokens``: stop strings, canonical mode)."""
        forced = getattr(self.matcher, "forced_tokens", None)
        if not self.run.jump_forward or forced is None or limit < 1:
            return []
        t0 = perf_counter()
        tokens = forced()[:limit]
        taken = self.matcher.accept_tokens(tokens)
        self.run.stats.mask_seconds += perf_counter() - t0
        self.run.stats.forced_tokens += taken
        return tokens[:taken]

    def fork(self) -> Guide:
        if self.matcher is None:
            return self
        t0 = perf_counter()
        other = Guide(self.run, self.matcher.fork())
        self.run.stats.mask_seconds += perf_counter() - t0
        return other

    def is_accepting(self) -> bool:
        """True when the output so far is complete: a whole sentence, or anything when unconstrained."""
        return self.matcher is None or self.matcher.is_accepting()

    def is_end(self, token_id: int) -> bool:
        return token_id in self.run.eos_ids
