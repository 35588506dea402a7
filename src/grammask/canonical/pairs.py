"""Which adjacent pairs of whole tokens BPE keeps apart, decided from the merge table alone.

Facts this rests on (the ``tokenizers`` library's BPE, ``BpeModel.run``):

1. A token is *whole* when BPE of its own initial symbols gives the token itself. Only whole tokens
   appear in BPE's output: the merges inside one output token's span are never influenced by
   symbols outside it unless a merge crosses the span's edge, which would make the span no token.
2. BPE of ``a`` followed by ``b`` (both whole) pops merges from one heap keyed by (rank, position).
   Until a merge crosses the boundary, the left part pops exactly the merges it pops alone, in the
   same order, and so does the right part: their merges never touch each other's symbols. So the
   run is a walk through the *stages* of ``a`` (after k of its own merges: its rightmost symbol, and
   the rank of its next merge) and those of ``b`` (leftmost symbol, rank of next merge): at each
   point the smallest key pops, the left part winning ties (its positions are smaller), then the
   boundary pair, then the right part.
3. The pair ``(a, b)`` is kept (``encode(a + b) == [a, b]``) iff along that walk the boundary pair
   (rightmost symbol of ``a``'s stage, leftmost of ``b``'s) never is a merge whose key is below both
   parts' next keys. A merge across the boundary makes a symbol neither token contains; without
   one, each part ends as itself.

The walk needs neither monotone merge ranks nor the tokenizer: it is checked against
``encode`` on sampled pairs in the tests. Stored compactly: per token its stages (one per merge in
its own BPE run), never a pair table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grammask.canonical.model import BpeModel

NO_MERGE = int(np.iinfo(np.int32).max)


@dataclass(frozen=True)
class PairTable:
    """Per token: whether it is whole, and its left-edge and right-edge stages (CSR arrays).

    ``right_sym[right_start[t]:right_start[t+1]]`` are token ``t``'s rightmost symbols after 0, 1, ...
    of its merges and ``right_next`` the rank of the merge that comes next (``NO_MERGE`` after the
    last); ``left_*`` the same for its leftmost symbol. Tokens that are not whole have no stages.
    """

    whole: np.ndarray
    right_start: np.ndarray
    right_sym: np.ndarray
    right_next: np.ndarray
    left_start: np.ndarray
    left_sym: np.ndarray
    left_next: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return sum(a.nbytes for a in self.arrays().values())

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by field name (for the disk cache)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def stages(self, token: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Token ``token``'s right-edge and left-edge stages as ``(symbol, next rank)`` lists."""
        r0, r1 = self.right_start[token], self.right_start[token + 1]
        l0, l1 = self.left_start[token], self.left_start[token + 1]
        right = list(zip(self.right_sym[r0:r1].tolist(), self.right_next[r0:r1].tolist()))
        left = list(zip(self.left_sym[l0:l1].tolist(), self.left_next[l0:l1].tolist()))
        return right, left


def build_pair_table(model: BpeModel, symbols: Sequence[Sequence[int] | None]) -> PairTable:
    """Runs BPE on every token's initial symbols (``None``: not a model piece) and records its stages."""
    n = len(symbols)
    whole = np.zeros(n, dtype=bool)
    right: list[tuple[int, int]] = []
    left: list[tuple[int, int]] = []
    right_start = np.zeros(n + 1, dtype=np.int64)
    left_start = np.zeros(n + 1, dtype=np.int64)
    for token, syms in enumerate(symbols):
        if syms:
            out, done = model.run(syms)
            if out == [token]:
                whole[token] = True
                _record_stages(list(syms), done, right, left)
        right_start[token + 1] = len(right)
        left_start[token + 1] = len(left)
    r = np.array(right, dtype=np.int64).reshape(-1, 2)
    l_ = np.array(left, dtype=np.int64).reshape(-1, 2)
    return PairTable(
        whole=whole,
        right_start=right_start,
        right_sym=r[:, 0].astype(np.int32),
        right_next=r[:, 1].astype(np.int32),
        left_start=left_start,
        left_sym=l_[:, 0].astype(np.int32),
        left_next=l_[:, 1].astype(np.int32),
    )


def _record_stages(
    syms: list[int], done: list[tuple[int, int, int]], right: list[tuple[int, int]], left: list[tuple[int, int]]
) -> None:
    """Appends a whole token's stages, replaying its merges ``done`` over its initial symbols ``syms``."""
    n = len(syms)
    nxt = list(range(1, n + 1))
    last = n - 1
    for rank, i, merged in done:
        right.append((syms[last], rank))
        left.append((syms[0], rank))
        j = nxt[i]
        syms[i] = merged
        nxt[i] = nxt[j]
        if j == last:
            last = i
    right.append((syms[last], NO_MERGE))
    left.append((syms[0], NO_MERGE))


def pair_kept(
    merges: Mapping[tuple[int, int], tuple[int, int]],
    right: Sequence[tuple[int, int]],
    left: Sequence[tuple[int, int]],
) -> bool:
    """Whether BPE keeps two whole tokens apart.

    ``right``: the left token's right-edge stages; ``left``: the right token's left-edge stages.

    Keys compare as ``3 * rank + side`` (left part 0, boundary 1, right part 2): ties at one rank
    pop by position.
    """
    k = l = 0
    nk, nl = len(right) - 1, len(left) - 1
    while True:
        r_sym, r_next = right[k]
        l_sym, l_next = left[l]
        left_key = 3 * r_next if r_next != NO_MERGE else NO_MERGE
        right_key = 3 * l_next + 2 if l_next != NO_MERGE else NO_MERGE
        cross = merges.get((r_sym, l_sym))
        if cross is not None and 3 * cross[0] + 1 < min(left_key, right_key):
            return False
        if k == nk and l == nl:
            return True
        if left_key < right_key:
            k += 1
        else:
            l += 1
