"""Hugging Face transformers: a ``LogitsProcessor`` that constrains ``model.generate`` to a compiled grammar.

The model itself, as a grammask :class:`~grammask.models.protocol.TextModel`, is
:class:`grammask.models.hf.HFModel`.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING

import numpy as np
import torch
import transformers

from grammask.adapters.torch_bitmask import apply_token_bitmask_
from grammask.batch import fill_masks
from grammask.bitmask import allocate_bitmask
from grammask.compiled import CompiledGrammar
from grammask.errors import (
    DecodingError,
    MatcherStateError,
    TokenRejectedError,
)
from grammask.matcher import Matcher

if TYPE_CHECKING:
    from grammask.canonical_matcher import CanonicalMatcher


class GrammarLogitsProcessor(transformers.LogitsProcessor):
    """Constrains ``model.generate`` to a compiled grammar: one matcher per row of the batch.

    With ``num_beams > 1`` rows are reordered between steps; each row's matcher is found from the
    tokens the row holds after the prompt (its prefix names the sequence it continues). Rows whose
    sequence has ended (EOS accepted) are left unmasked, since ``generate`` pads them. Use one
    processor per ``generate`` call. ``mask_seconds`` totals the time spent here.

    Pass the ``max_new_tokens`` given to ``generate`` to make the masks keep a complete output within
    it (EOS included, see :mod:`grammask.budget`): the output then ends with EOS, never cut off.

    ``canonical``: allow only token sequences the tokenizer itself would write for their text
    (``compiled.matcher(canonical=True)``); with ``max_new_tokens`` the budget counts canonical tokens
    (:mod:`grammask.canonical_budget`).

    Raises :class:`~grammask.errors.DecodingError` for ``batch_size`` or ``num_beams`` below 1,
    :class:`~grammask.errors.CanonicalError` for ``canonical`` on a vocabulary without a canonical relation, and, when
    called, for a batch of another number of rows; :class:`~grammask.errors.MatcherStateError` when reused
    for another ``generate`` call; :class:`~grammask.errors.BudgetError` (at the first step) when no output
    of the grammar fits in ``max_new_tokens``.
    """

    def __init__(self, compiled: CompiledGrammar, batch_size: int, num_beams: int = 1,
                 max_new_tokens: int | None = None, *, canonical: bool = False):
        if batch_size < 1 or num_beams < 1:
            raise DecodingError(f"batch_size and num_beams must be at least 1, got {batch_size} and {num_beams}")
        self.compiled = compiled
        self.max_new_tokens = max_new_tokens
        self._canonical = canonical
        self._first: CanonicalMatcher | None = None
        if canonical:
            compiled.matcher(canonical=True)  # a vocabulary without a canonical relation fails here
        self.rows = batch_size * num_beams
        self.bitmask = allocate_bitmask(self.rows, compiled.vocab.n_logits)
        self.mask_seconds = 0.0
        self._prompt_len: int | None = None
        self._seen = -1
        self._matchers: dict[bytes, Matcher | CanonicalMatcher | None] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        start = perf_counter()
        rows, length = input_ids.shape
        if rows != self.rows:
            raise DecodingError(
                f"GrammarLogitsProcessor was made for {self.rows} rows (batch_size x num_beams), got {rows}"
            )
        if self._prompt_len is None:
            self._prompt_len = length
        elif length != self._seen + 1:
            raise MatcherStateError(
                "this GrammarLogitsProcessor already served another generate() call; make a new one"
            )
        self._seen = length
        generated = input_ids[:, self._prompt_len :].cpu().numpy()
        matchers: dict[bytes, Matcher | CanonicalMatcher | None] = {}
        batched: list[Matcher | CanonicalMatcher] = []
        batched_rows: list[int] = []
        for r in range(rows):
            key = generated[r].tobytes()
            if key not in matchers:
                matchers[key] = self._continue(generated[r])
            m = matchers[key]
            if m is None:
                self.bitmask[r] = 0
            elif m.is_terminated():
                self.bitmask[r] = -1
            else:
                batched.append(m)
                batched_rows.append(r)
        fill_masks(batched, self.bitmask, batched_rows)  # the rows in one call (canonical ones by their fill_mask)
        self._matchers = matchers
        apply_token_bitmask_(scores, torch.from_numpy(self.bitmask))
        self.mask_seconds += perf_counter() - start
        return scores

    def _continue(self, history: np.ndarray) -> Matcher | CanonicalMatcher | None:
        """The matcher after ``history``: the previous step's matcher of its prefix, advanced by its last token.
        None for a row that took a token its mask did not allow (only a dead beam can)."""
        if len(history) == 0:
            if not self._canonical:
                return self.compiled.limited_matcher(self.max_new_tokens)
            if self._first is None:
                self._first = (self.compiled.matcher(canonical=True) if self.max_new_tokens is None else
                               self.compiled.limited_matcher(self.max_new_tokens, canonical=True))
            return self._first.fork()
        prefix = history[:-1].tobytes()
        if prefix not in self._matchers:
            raise MatcherStateError(
                "a row continues a sequence this processor has not seen; use one per generate() call"
            )
        parent = self._matchers[prefix]
        if parent is None:
            return None
        m = parent.fork()
        if not m.is_terminated():
            try:
                m.advance(int(history[-1]))
            except TokenRejectedError:
                return None
        return m
