"""The BPE model of a tokenizer.json, as token ids: merge ranks, the initial symbols of every piece, and BPE itself.

BPE here is the ``tokenizers`` library's (``Word::merge_all``): the pair of adjacent symbols with the
lowest merge rank is merged first, the leftmost one among equal ranks; a merge's result is a piece
of the vocabulary, so every symbol is a token id. A text's initial symbols are its characters: for
byte-level BPE the GPT-2 alphabet characters of its bytes; for SentencePiece-style BPE the characters
of the normalized text, with ``<0xNN>`` byte pieces for a character the vocabulary lacks (byte fallback).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grammask.errors import CanonicalError

_BYTE_LEVEL_CHARS = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]


def _byte_to_char() -> dict[int, str]:
    """The GPT-2 byte-to-unicode alphabet."""
    shifted = sorted(set(range(256)) - set(_BYTE_LEVEL_CHARS))
    table = {b: chr(b) for b in _BYTE_LEVEL_CHARS}
    table.update({b: chr(256 + rank) for rank, b in enumerate(shifted)})
    return table


BYTE_TO_CHAR = _byte_to_char()


@dataclass(frozen=True)
class BpeModel:
    """Merge ranks over token ids and the initial symbols of text.

    ``merges[(left, right)] = (rank, merged)``; ``pieces`` maps a piece string to its id;
    ``byte_level`` says how text becomes initial symbols; ``byte_pieces[b]`` is the id of the
    ``<0xNN>`` piece of byte ``b`` (byte fallback), or -1.
    """

    merges: Mapping[tuple[int, int], tuple[int, int]]
    pieces: Mapping[str, int]
    byte_level: bool
    byte_fallback: bool
    byte_pieces: tuple[int, ...]
    ignore_merges: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any], byte_level: bool) -> BpeModel:
        """Reads the ``model`` section of a parsed tokenizer.json.

        Raises :class:`~grammask.errors.CanonicalError` when the model is not BPE, has dropout, or a
        merge names a piece the vocabulary lacks.
        """
        model = data.get("model") or {}
        if model.get("type", "BPE") != "BPE" or "merges" not in model:
            raise CanonicalError("the canonical relation needs a BPE tokenizer with a merge table")
        if model.get("dropout"):
            raise CanonicalError("BPE with dropout has no canonical tokenization")
        pieces: dict[str, int] = dict(model["vocab"])
        merges: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, merge in enumerate(model["merges"]):
            left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
            try:
                key = (pieces[left], pieces[right])
                merged = pieces[left + right]
            except KeyError as exc:
                raise CanonicalError(f"merge {rank} ({left!r}, {right!r}) names a piece the vocabulary lacks") from exc
            merges.setdefault(key, (rank, merged))
        byte_fallback = bool(model.get("byte_fallback"))
        byte_pieces = tuple(pieces.get(f"<0x{b:02X}>", -1) if byte_fallback else -1 for b in range(256))
        return cls(merges, pieces, byte_level, byte_fallback, byte_pieces, bool(model.get("ignore_merges")))

    def symbols(self, text: str) -> list[int] | None:
        """The initial symbols of a (normalized) text; None when a character cannot be encoded.

        For byte-level BPE ``text`` is already in the GPT-2 alphabet (a piece of the vocabulary).
        """
        out: list[int] = []
        for ch in text:
            i = self.pieces.get(ch)
            if i is not None:
                out.append(i)
            elif self.byte_fallback:
                ids = [self.byte_pieces[b] for b in ch.encode("utf-8")]
                if min(ids) < 0:
                    return None
                out.extend(ids)
            else:
                return None
        return out

    def merge(self, symbols: Sequence[int]) -> list[int]:
        """BPE of initial symbols, merges applied as the ``tokenizers`` library applies them."""
        return self.run(symbols)[0]

    def run(self, symbols: Sequence[int]) -> tuple[list[int], list[tuple[int, int, int]]]:
        """BPE of initial symbols and its merges in the order they happen: ``(rank, position, merged)``.

        A position is the index, among the initial symbols, of the merge's left symbol.
        """
        syms = list(symbols)
        n = len(syms)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap: list[tuple[int, int, int, int, int]] = []
        for i in range(n - 1):
            m = self.merges.get((syms[i], syms[i + 1]))
            if m is not None:
                heap.append((m[0], i, syms[i], syms[i + 1], m[1]))
        heapq.heapify(heap)
        done: list[tuple[int, int, int]] = []
        while heap:
            rank, i, left, right, merged = heapq.heappop(heap)
            j = nxt[i] if alive[i] else n
            if j >= n or syms[i] != left or syms[j] != right:
                continue
            done.append((rank, i, merged))
            syms[i] = merged
            alive[j] = False
            nxt[i] = nxt[j]
            if nxt[j] < n:
                prv[nxt[j]] = i
            if prv[i] >= 0:
                m = self.merges.get((syms[prv[i]], merged))
                if m is not None:
                    heapq.heappush(heap, (m[0], prv[i], syms[prv[i]], merged, m[1]))
            if nxt[i] < n:
                m = self.merges.get((merged, syms[nxt[i]]))
                if m is not None:
                    heapq.heappush(heap, (m[0], i, merged, syms[nxt[i]], m[1]))
        return [s for s, a in zip(syms, alive) if a], done
