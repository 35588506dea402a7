"""Stop sequences: an output ends at the first stop string before which it is a whole sentence.

With a grammar, a stop string ends the output only where the text before it is a sentence of the
grammar (so what is returned still parses); elsewhere it is ordinary text. Unconstrained, the first
stop string ends it. The stop string itself is not part of the returned text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grammask.compiled import CompiledGrammar
from grammask.decoding.run import TokenMatcher
from grammask.errors import DecodingError, TokenRejectedError
from grammask.vocab import Vocabulary


class StopRule:
    """Where an output ends, given stop strings and the grammar (None: unconstrained).

    Raises :class:`~grammask.errors.DecodingError` for an empty list or an empty stop string.
    """

    def __init__(self, stops: Sequence[str], compiled: CompiledGrammar | None):
        if not stops or any(not s for s in stops):
            raise DecodingError(f"stop sequences must be non-empty strings, got {list(stops)!r}")
        self._stops = [s.encode() for s in stops]
        self._compiled = compiled

    def cut(self, data: bytes, since: int = 0) -> int | None:
        """The byte offset where the output ends, if a stop string ending after byte ``since`` ends it."""
        starts: set[int] = set()
        for stop in self._stops:
            i = data.find(stop, max(0, since - len(stop) + 1))
            while i >= 0:
                starts.add(i)
                i = data.find(stop, i + 1)
        for i in sorted(starts):
            if self._compiled is None or self._compiled.matcher(prefix=data[:i]).is_accepting():
                return i
        return None


class StopMatcher:
    """A :class:`~grammask.decoding.run.TokenMatcher` that ends the output at a stop sequence.

    It follows ``inner`` (None: any token) and tracks the output's bytes; once a stop string ends
    the output (see :class:`StopRule`), only EOS is allowed, so every strategy finishes there.
    """

    __slots__ = ("_cut", "_data", "_ended", "_eos", "_inner", "_rule", "_vocab")

    def __init__(self, inner: TokenMatcher | None, rule: StopRule, vocab: Vocabulary):
        self._inner = inner
        self._rule = rule
        self._vocab = vocab
        self._eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        self._data = b""
        self._cut: int | None = None
        self._ended = False

    def fill_mask(self, row: np.ndarray) -> None:
        if self._cut is None and self._inner is not None:
            self._inner.fill_mask(row)
            return
        row[:] = 0 if self._cut is not None else -1
        if self._cut is not None:
            np.bitwise_or.at(row, self._eos // 32, np.left_shift(1, self._eos % 32).astype(np.uint32).view(np.int32))

    def advance(self, token_id: int) -> None:
        """Accept a token; raises :class:`TokenRejectedError` for anything but EOS after a stop sequence,
        and what the inner matcher raises."""
        if self._cut is not None:
            if token_id not in self._vocab.eos_ids:
                raise TokenRejectedError(token_id, "is not allowed: the output ended at a stop sequence")
            self._ended = True
            return
        if self._inner is not None:
            self._inner.advance(token_id)
        if token_id in self._vocab.eos_ids:
            self._ended = True
            return
        since = len(self._data)
        self._data += self._vocab.tokens[token_id] or b""
        self._cut = self._rule.cut(self._data, since)

    def is_accepting(self) -> bool:
        return self._cut is not None or self._inner is None or self._inner.is_accepting()

    def is_terminated(self) -> bool:
        return self._ended or (self._inner is not None and self._inner.is_terminated())

    def fork(self) -> StopMatcher:
        other = StopMatcher.__new__(StopMatcher)
        for name in StopMatcher.__slots__:
            setattr(other, name, getattr(self, name))
        if self._inner is not None:
            other._inner = self._inner.fork()
        return other
