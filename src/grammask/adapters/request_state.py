"""One serving-engine request's grammar state, as SGLang's and vLLM's grammar objects need it.

:class:`RequestMatcher` wraps a :class:`~grammask.matcher.Matcher` with what engines do around it:
extra stop tokens per request (allowed only where the output may end, and ending it), mask rows
wider or narrower than the vocabulary, out-of-range draft tokens, and jump-forward text; :func:`fill_rows` fills
many requests' rows in one batched call. It works on NumPy rows (a CPU torch tensor's ``.numpy()`` shares its
memory), so it needs no torch and no engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from grammask.batch import fill_masks
from grammask.bitmask import bitmask_words
from grammask.compiled import CompiledGrammar
from grammask.errors import TokenOutOfRangeError


class RequestMatcher:
    """The grammar state of one request: accept, validate, roll back, fill a mask row, jump forward.

    ``stop_ids`` are the request's stop tokens beyond the vocabulary's EOS ids: like EOS, each is
    allowed only where the output is a whole sentence, and accepting one ends the output.
    ``max_tokens``: the request's output limit (EOS included); the masks then keep a complete output
    within it (see :mod:`grammask.budget`). Where the grammar cannot have a budget, or no output fits
    it, the request is constrained without one and a warning says so (the output may then be cut).
    """

    __slots__ = ("_eos", "_scratch", "_stops", "_words", "compiled", "matcher", "max_tokens")

    def __init__(self, compiled: CompiledGrammar, stop_ids: Iterable[int] = (), max_tokens: int | None = None):
        vocab = compiled.vocab
        self.compiled = compiled
        self.max_tokens = max_tokens
        self.matcher = compiled.matcher() if max_tokens is None else compiled.limited_matcher(max_tokens, lenient=True)
        self._eos = vocab.eos_ids[0]
        self._stops = frozenset(int(t) for t in stop_ids if 0 <= int(t) < vocab.n_logits) - set(vocab.eos_ids)
        self._words = bitmask_words(vocab.n_logits)
        self._scratch: np.ndarray | None = None

    def fresh(self) -> RequestMatcher:
        """A new request of the same grammar and stop tokens, at the start of its output."""
        return RequestMatcher(self.compiled, self._stops, self.max_tokens)

    @property
    def num_tokens(self) -> int:
        """Tokens accepted so far (a stop token included)."""
        return self.matcher.num_tokens

    def is_terminated(self) -> bool:
        """True once EOS or a stop token has been accepted."""
        return self.matcher.is_terminated()

    def accept(self, token_id: int) -> bool:
        """Accept one token if the grammar allows it; False (state unchanged) if not, after the end of
        the output, or for an id outside the vocabulary (a draft model may propose one)."""
        if self.matcher.is_terminated():
            return False
        if token_id in self._stops:
            if not self.matcher.is_accepting():
                return False
            token_id = self._eos
        try:
            return self.matcher.accept_token(int(token_id))
        except TokenOutOfRangeError:
            return False

    def accept_many(self, token_ids: Sequence[int]) -> int:
        """Accept tokens in order up to the first refused one or the end of the output; how many were taken."""
        for n, token_id in enumerate(token_ids):
            if self.matcher.is_terminated() or not self.accept(int(token_id)):
                return n
        return len(token_ids)

    def validate(self, token_ids: Sequence[int]) -> int:
        """How many leading tokens :meth:`accept_many` would take; the state is unchanged."""
        n = self.accept_many(token_ids)
        self.matcher.rollback(n)
        return n

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens.

        Raises :class:`~grammask.errors.MatcherStateError` if fewer were accepted (state unchanged).
        """
        self.matcher.rollback(k)

    def fill(self, row: np.ndarray) -> None:
        """Write the allowed tokens into one int32 bitmask row (xgrammar/vLLM layout) of any width: words
        past the vocabulary are cleared, and a narrower row gets the mask's first words."""
        if row.shape[-1] == self._words:
            self.matcher.fill_mask(row)
        else:
            if self._scratch is None:
                self._scratch = np.zeros(self._words, dtype=np.int32)
            self.matcher.fill_mask(self._scratch)
            n = min(self._words, row.shape[-1])
            row[:n] = self._scratch[:n]
            row[n:] = 0
        if self._stops:
            self._mark_stops(row)

    def _mark_stops(self, row: np.ndarray) -> None:
        """Allow the request's stop tokens in ``row`` where the output may end, forbid them elsewhere."""
        accepting = self.matcher.is_accepting()
        bits = row.view(np.uint32)
        for t in self._stops:
            if t // 32 < len(bits):
                if accepting:
                    bits[t // 32] |= np.uint32(1 << (t % 32))
                else:
                    bits[t // 32] &= ~np.uint32(1 << (t % 32))

    def jump_forward_text(self) -> str:
        """The text every continuation starts with, cut after its last whole UTF-8 character ('' if none)."""
        return _whole_chars(self.matcher.forced_text())

    def jump_forward_tokens(self) -> list[int]:
        """The tokenizer's tokens for the start of the jump-forward text, safe to accept at once."""
        return self.matcher.forced_tokens()


def fill_rows(states: Sequence[RequestMatcher], bitmask: np.ndarray, rows: Sequence[int], threads: int = 1) -> None:
    """Fill row ``rows[i]`` of ``bitmask`` (2-D int32) as ``states[i].fill`` would: the requests whose rows are as
    wide as their vocabulary's masks in one :func:`~grammask.batch.fill_masks` call on ``threads`` threads, the others
    one by one."""
    batched: list[RequestMatcher] = []
    batched_rows: list[int] = []
    for state, row in zip(states, rows, strict=True):
        if state._words == bitmask.shape[1]:
            batched.append(state)
            batched_rows.append(row)
        else:
            state.fill(bitmask[row])
    fill_masks([state.matcher for state in batched], bitmask, batched_rows, threads=threads)
    for state, row in zip(batched, batched_rows, strict=True):
        if state._stops:
            state._mark_stops(bitmask[row])


def _whole_chars(data: bytes) -> str:
    """``data`` up to its last whole UTF-8 character, decoded ('' if it is not UTF-8)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""
