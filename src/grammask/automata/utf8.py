"""Sets of Unicode scalar values as sorted ranges, and their UTF-8 encodings as byte-range automata.

A code point set is a tuple of disjoint, sorted, non-adjacent inclusive ranges ``(lo, hi)``.
:func:`utf8_trie` turns one into a small deterministic automaton over bytes that accepts
exactly the UTF-8 encodings of its members: no surrogates, no overlong forms, nothing that is
not valid UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

CodeRanges = tuple[tuple[int, int], ...]

MAX_CODE_POINT = 0x10FFFF
SURROGATES: CodeRanges = ((0xD800, 0xDFFF),)
SCALARS: CodeRanges = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))

# Trie target meaning "the character is complete".
EXIT = -1

Utf8Trie = tuple[tuple[tuple[int, int, int], ...], ...]


def normalize(ranges: Iterable[tuple[int, int]]) -> CodeRanges:
    """Sort and merge overlapping or adjacent ranges."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def ranges_of(code_points: Iterable[int]) -> CodeRanges:
    """The code point set holding exactly ``code_points``."""
    return normalize((c, c) for c in code_points)


def union(*sets: CodeRanges) -> CodeRanges:
    """The union of code point sets."""
    return normalize(r for s in sets for r in s)


def difference(a: CodeRanges, b: CodeRanges) -> CodeRanges:
    """The members of ``a`` that are not in ``b`` (both normalized)."""
    out: list[tuple[int, int]] = []
    j = 0
    for lo, hi in a:
        while j < len(b) and b[j][1] < lo:
            j += 1
        k = j
        while lo <= hi and k < len(b) and b[k][0] <= hi:
            if b[k][0] > lo:
                out.append((lo, b[k][0] - 1))
            lo = max(lo, b[k][1] + 1)
            k += 1
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def complement(ranges: CodeRanges) -> CodeRanges:
    """All Unicode scalar values (surrogates excluded) that are not in ``ranges``."""
    return difference(SCALARS, ranges)


def scalars_only(ranges: CodeRanges) -> CodeRanges:
    """``ranges`` without the surrogates, which have no UTF-8 encoding."""
    return difference(ranges, SURROGATES)


def utf8_sequences(ranges: CodeRanges) -> list[tuple[tuple[int, int], ...]]:
    """The UTF-8 encodings of a set of scalar values, as sorted byte-range sequences.

    Each sequence is a tuple of inclusive byte ranges, one per byte of the encoding; the
    byte strings it spells are exactly the encodings of one sub-range of code points.
    """
    out: list[tuple[tuple[int, int], ...]] = []
    for lo, hi in scalars_only(normalize(ranges)):
        _split(lo, hi, out)
    return out


def _split(lo: int, hi: int, out: list[tuple[tuple[int, int], ...]]) -> None:
    # First split at the encoded-length boundaries, then wherever the range does not cover whole
    # blocks of continuation bytes, so that every piece is a product of byte ranges.
    for length_max in (0x7F, 0x7FF, 0xFFFF):
        if lo <= length_max < hi:
            _split(lo, length_max, out)
            _split(length_max + 1, hi, out)
            return
    n_bytes = len(chr(lo).encode("utf-8", "surrogatepass"))
    for i in range(1, n_bytes):
        mask = (1 << (6 * i)) - 1
        if lo & ~mask != hi & ~mask:
            if lo & mask:
                _split(lo, lo | mask, out)
                _split((lo | mask) + 1, hi, out)
                return
            if hi & mask != mask:
                _split(lo, (hi & ~mask) - 1, out)
                _split(hi & ~mask, hi, out)
                return
    first = chr(lo).encode("utf-8")
    last = chr(hi).encode("utf-8")
    out.append(tuple(zip(first, last)))


@lru_cache(maxsize=1024)
def utf8_trie(ranges: CodeRanges) -> Utf8Trie:
    """A deterministic byte automaton for the UTF-8 encodings of ``ranges``.

    Node 0 is the entry; each node is a tuple of edges ``(lo, hi, target)`` over disjoint byte
    ranges, where ``target`` is another node's index or :data:`EXIT` (a whole character has been
    read). Prefixes are shared as in a trie and equal suffixes are shared too, so the automaton
    stays small for large Unicode classes.
    """
    nodes: list[tuple[tuple[int, int, int], ...]] = [()]
    shared: dict[tuple[tuple[int, int, int], ...], int] = {}

    def build(seqs: list[tuple[tuple[int, int], ...]], depth: int) -> tuple[tuple[int, int, int], ...]:
        edges = []
        i = 0
        while i < len(seqs):
            byte_range = seqs[i][depth]
            j = i + 1
            while j < len(seqs) and seqs[j][depth] == byte_range:
                j += 1
            # The lead byte fixes the encoded length, so a group's sequences all end together.
            if len(seqs[i]) == depth + 1:
                target = EXIT
            else:
                child = build(seqs[i:j], depth + 1)
                target = shared.get(child, -2)
                if target == -2:
                    target = shared[child] = len(nodes)
                    nodes.append(child)
            edges.append((byte_range[0], byte_range[1], target))
            i = j
        return tuple(edges)

    nodes[0] = build(utf8_sequences(ranges), 0)
    return tuple(nodes)
