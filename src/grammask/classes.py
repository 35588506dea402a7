"""Token classes: the vocabulary walk of each lexer state, grouped by what the parser sees.

Two tokens are in the same class of lexer state ``q`` when, lexed from ``q``, they emit the
same terminal sequence and leave a pending lexeme with the same follow set (the terminals it
can still become). The parser cannot tell such tokens apart, so masks are decided per class.
Classes of all lexer states are numbered together; each state lists its classes in sorted order of
their sequences, so that checking them walks a trie (see :func:`grammask.parser.kernels.check_classes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from grammask.growing import Growing
from grammask.spanner import SequenceTable


@dataclass
class StateClasses:
    """One walk's alive tokens (in vocabulary-trie order), their first bytes and the local class of each."""

    token_ids: np.ndarray
    first: np.ndarray
    token_class: np.ndarray
    classes: np.ndarray  # local class -> class key (sequence id * n_follow + follow id)
    sizes: np.ndarray  # local class -> number of tokens


class GroupScratch:
    """A hash table of class keys for :func:`group_walk`, reused by the walks of one compile (each leaves it empty):
    its size follows the tokens of a walk, not the number of possible keys (sequences x follow sets)."""

    def __init__(self) -> None:
        self.keys = np.full(1024, -1, dtype=np.int64)
        self.classes = np.empty(1024, dtype=np.int32)

    def room(self, n: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The table's arrays and hash shift, with room for ``n`` keys at most half full."""
        if 2 * n > len(self.keys):
            size = 1 << (2 * n - 1).bit_length()
            self.keys = np.full(size, -1, dtype=np.int64)
            self.classes = np.empty(size, dtype=np.int32)
        return self.keys, self.classes, 64 - (len(self.keys).bit_length() - 1)


def group_walk(token_ids: np.ndarray, first: np.ndarray, seq: np.ndarray, ends: np.ndarray, state_follow: np.ndarray,
               n_follow: int, scratch: GroupScratch, seen: np.ndarray) -> tuple[StateClasses, np.ndarray]:
    """Group one walk's alive tokens by class key (emitted sequence, follow set of the state left).

    Returns the classes and the lexer states left that ``seen`` did not hold yet (marked in ``seen`` now).
    """
    keys, classes, shift = scratch.room(len(seq))
    token_class, class_keys, sizes, fresh = _group(seq, ends, state_follow, n_follow, keys, classes, shift, seen)
    return StateClasses(token_ids, first, token_class, class_keys, sizes), fresh


_MIX = np.int64(-0x61C8864680B583EB)  # 0x9E3779B97F4A7C15 (Fibonacci hashing) as a signed 64-bit integer


@nb.njit(cache=True)
def _group(seq, ends, state_follow, n_follow, keys, classes, shift, seen):
    n = len(seq)
    mask = len(keys) - 1
    token_class = np.empty(n, dtype=np.int32)
    class_keys = np.empty(n, dtype=np.int64)
    class_slot = np.empty(n, dtype=np.int64)
    sizes = np.zeros(n, dtype=np.int64)
    fresh = np.empty(n, dtype=np.int64)
    n_classes = 0
    n_fresh = 0
    for i in range(n):
        end = ends[i]
        if not seen[end]:
            seen[end] = True
            fresh[n_fresh] = end
            n_fresh += 1
        k = np.int64(seq[i]) * n_follow + state_follow[end]
        h = ((k * _MIX) >> shift) & mask
        while keys[h] >= 0 and keys[h] != k:
            h = (h + 1) & mask
        if keys[h] < 0:
            keys[h] = k
            classes[h] = n_classes
            class_keys[n_classes] = k
            class_slot[n_classes] = h
            n_classes += 1
        c = classes[h]
        token_class[i] = c
        sizes[c] += 1
    for c in range(n_classes):
        keys[class_slot[c]] = -1
    return token_class, class_keys[:n_classes].copy(), sizes[:n_classes].copy(), fresh[:n_fresh].copy()


class ClassIndex:
    """All classes met so far, numbered in the order met: class ``c`` emits the parser terminals
    ``seq_terms[seq_ptr[c]:seq_ptr[c+1]]`` and then needs a terminal of follow set ``follow[c]``.

    The arrays only grow (:class:`~grammask.growing.Growing`), so tables built from earlier states stay valid.
    """

    def __init__(self, seqs: SequenceTable, n_follow: int):
        self.seqs = seqs
        self.n_follow = n_follow
        self._ids_of: dict[int, int] = {}
        self.seq_ptr = Growing.of(np.zeros(1, dtype=np.int64))
        self.seq_terms = Growing(np.int32)
        self.follow = Growing(np.int32)

    def __len__(self) -> int:
        return len(self.follow)

    def _ids(self, keys: list[int]) -> list[int]:
        """The class numbers of class keys (sequence id * n_follow + follow id), new ones numbered now."""
        ids = list(map(self._ids_of.get, keys))
        new = [k for k, c in zip(keys, ids, strict=True) if c is None]
        if new:
            for key in new:
                self._ids_of[key] = len(self._ids_of)
            added = [self.seqs.sequence(key // self.n_follow) for key in new]
            self.seq_terms.extend([t for seq in added for t in seq])
            self.seq_ptr.extend(np.cumsum([len(seq) for seq in added]) + self.seq_ptr.values[-1])
            self.follow.extend([key % self.n_follow for key in new])
            ids = list(map(self._ids_of.get, keys))
        return ids

    def number(self, keys: np.ndarray) -> np.ndarray:
        """The class numbers of class keys (sequence id * n_follow + follow id), new ones numbered now."""
        return np.array(self._ids(keys.tolist()), dtype=np.int32)

    def order(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions that sort class numbers ``ids`` by their sequences (then follow sets), and the sequence
        prefix each sorted class shares with the one before it (0 for the first): the order and prefixes
        :func:`grammask.parser.kernels.check_classes` takes."""
        ptr = self.seq_ptr.data
        starts, lengths = ptr[ids], ptr[ids + 1] - ptr[ids]
        column = np.arange(int(lengths.max(initial=0)))
        inside = column[None, :] < lengths[:, None]
        grid = np.full(inside.shape, -1, dtype=np.int64)  # a shorter sequence sorts before its extensions
        grid[inside] = self.seq_terms.data[(starts[:, None] + column[None, :])[inside]]
        order = np.lexsort((self.follow.data[ids], *grid.T[::-1]))
        grid, lengths = grid[order], lengths[order]
        same = (grid[1:] == grid[:-1]) & (column[None, :] < np.minimum(lengths[1:], lengths[:-1])[:, None])
        lcp = np.zeros(len(order), dtype=np.int64)
        if same.shape[1]:
            lcp[1:] = np.where(same.all(axis=1), same.shape[1], same.argmin(axis=1))
        return order, lcp


@dataclass(frozen=True)
class ClassGroups:
    """One walk's tokens grouped by its local classes: class ``c``'s tokens are ``tokens[ptr[c]:ptr[c+1]]`` (their
    first bytes ``first[...]``), and a class with more tokens than a quarter of a mask's words also has its
    bitmask, ``rows[row_of[c]]`` (``row_of`` -1 for the others)."""

    ptr: np.ndarray
    tokens: np.ndarray
    first: np.ndarray
    rows: np.ndarray
    row_of: np.ndarray

    def byte_counts(self) -> np.ndarray:
        """Per class, its number of tokens per first byte."""
        return _byte_counts(self.ptr, self.first)

    @classmethod
    def of(cls, walk: StateClasses, token_class: np.ndarray, n_classes: int, n_words: int) -> ClassGroups:
        """``walk``'s tokens grouped by ``token_class`` (their classes numbered ``0..n_classes-1``)."""
        return cls(*_group_tokens(walk.token_ids, walk.first, token_class, n_classes, n_words))


NO_EXCLUSION = np.zeros(256, dtype=np.bool_)


@dataclass
class StateTokens:
    """A lexer state's classes (class numbers in sorted order, ``lcp`` as :meth:`ClassIndex.order` gives it, the
    number of tokens of each) and where their tokens are: in each part ``(groups, local, excluded, excluded_row)``,
    group class ``c`` is the state's class ``local[c]`` (-1: none of the state's), less its tokens whose first
    byte ``b`` has ``excluded[b]`` (``excluded_row``: the bitmask of all tokens starting so)."""

    classes: np.ndarray
    lcp: np.ndarray
    sizes: np.ndarray
    parts: list[tuple[ClassGroups, np.ndarray, np.ndarray, np.ndarray]]

    def masks(self, sets: np.ndarray, n_words: int) -> np.ndarray:
        """Per row of ``sets`` (a bool per class of the state), the mask of the tokens of the classes it holds."""
        out = np.zeros((len(sets), n_words), dtype=np.int32)
        for groups, local, excluded, excluded_row in self.parts:
            _part_masks(out, sets, groups.ptr, groups.tokens, groups.first, groups.rows, groups.row_of, local,
                        excluded, excluded_row)
        return out

    def tokens_of(self, marked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tokens of the classes ``marked`` (a bool per class of the state) and the class of each."""
        found = [_part_tokens(marked, g.ptr, g.tokens, g.first, local, excluded)
                 for g, local, excluded, _ in self.parts]
        return np.concatenate([t for t, _ in found]), np.concatenate([c for _, c in found])


@nb.njit(cache=True)
def token_row(n_words, token_ids):
    """The bitmask of ``token_ids``."""
    row = np.zeros(n_words, dtype=np.int32)
    for t in token_ids:
        row[t >> 5] |= np.int32(1) << np.int32(t & 31)
    return row


@nb.njit(cache=True)
def _group_tokens(token_ids, first, token_class, n_classes, n_words):
    ptr = np.zeros(n_classes + 1, dtype=np.int64)
    for i in range(len(token_ids)):
        ptr[token_class[i] + 1] += 1
    for c in range(n_classes):
        ptr[c + 1] += ptr[c]
    fill = ptr[:-1].copy()
    tokens = np.empty(len(token_ids), dtype=np.int64)
    firsts = np.empty(len(token_ids), dtype=np.uint8)
    for i in range(len(token_ids)):
        c = token_class[i]
        tokens[fill[c]] = token_ids[i]
        firsts[fill[c]] = first[i]
        fill[c] += 1
    row_of = np.full(n_classes, -1, dtype=np.int64)
    n_rows = 0
    for c in range(n_classes):
        if 4 * (ptr[c + 1] - ptr[c]) > n_words:
            row_of[c] = n_rows
            n_rows += 1
    rows = np.zeros((n_rows, n_words), dtype=np.int32)
    for c in range(n_classes):
        if row_of[c] >= 0:
            row = rows[row_of[c]]
            for i in range(ptr[c], ptr[c + 1]):
                t = tokens[i]
                row[t >> 5] |= np.int32(1) << np.int32(t & 31)
    return ptr, tokens, firsts, rows, row_of


@nb.njit(cache=True)
def _part_masks(out, sets, ptr, tokens, first, rows, row_of, local, excluded, excluded_row):
    """OR into ``out[s]`` the tokens of the part's classes that set ``s`` holds (see :meth:`StateTokens.masks`)."""
    n_words = out.shape[1]
    for c in range(len(local)):
        k = local[c]
        if k < 0:
            continue
        r = row_of[c]
        for s in range(len(sets)):
            if not sets[s, k]:
                continue
            target = out[s]
            if r >= 0:
                row = rows[r]
                for w in range(n_words):
                    target[w] |= row[w] & ~excluded_row[w]
            else:
                for i in range(ptr[c], ptr[c + 1]):
                    if not excluded[first[i]]:
                        t = tokens[i]
                        target[t >> 5] |= np.int32(1) << np.int32(t & 31)


@nb.njit(cache=True)
def _part_tokens(marked, ptr, tokens, first, local, excluded):
    """The part's tokens of the state's classes ``marked`` and their classes (see :meth:`StateTokens.tokens_of`)."""
    n = 0
    for c in range(len(local)):
        if local[c] >= 0 and marked[local[c]]:
            for i in range(ptr[c], ptr[c + 1]):
                if not excluded[first[i]]:
                    n += 1
    out = np.empty(n, dtype=np.int64)
    out_class = np.empty(n, dtype=np.int64)
    n = 0
    for c in range(len(local)):
        if local[c] >= 0 and marked[local[c]]:
            for i in range(ptr[c], ptr[c + 1]):
                if not excluded[first[i]]:
                    out[n] = tokens[i]
                    out_class[n] = local[c]
                    n += 1
    return out, out_class


@nb.njit(cache=True)
def _byte_counts(ptr, first):
    out = np.zeros((len(ptr) - 1, 256), dtype=np.int64)
    for c in range(len(ptr) - 1):
        for i in range(ptr[c], ptr[c + 1]):
            out[c, first[i]] += 1
    return out


class ClassTokens:
    """Token bitmask words of the classes whose fate depends on the stack, shared between equal ones: class list
    ``d`` sets ``bits[i]`` in word ``words[i]`` for ``i`` in ``word_ptr[d]:word_ptr[d+1]`` (growing arrays)."""

    def __init__(self, n_words: int):
        self.n_words = n_words
        self.ids: dict[bytes, int] = {}
        self.word_ptr = Growing.of(np.zeros(1, dtype=np.int64))
        self.words = Growing(np.int32)
        self.bits = Growing(np.int32)

    def add_state(self, state: StateTokens, marked: np.ndarray) -> np.ndarray:
        """Register the marked classes of one lexer state; returns each local class's id (-1 if unmarked)."""
        out = np.full(len(marked), -1, dtype=np.int32)
        if not marked.any():
            return out
        ptr, words, bits = class_words(*state.tokens_of(marked), marked, self.n_words)
        for c in np.flatnonzero(marked).tolist():
            w, b = words[ptr[c] : ptr[c + 1]], bits[ptr[c] : ptr[c + 1]]
            key = w.tobytes() + b.tobytes()
            d = self.ids.get(key)
            if d is None:
                d = self.ids[key] = len(self.word_ptr) - 1
                self.words.extend(w)
                self.bits.extend(b)
                self.word_ptr.append(len(self.words))
            out[c] = d
        return out


@nb.njit(cache=True)
def class_words(token_ids, token_class, marked, n_words):
    """Per marked class, its tokens as (word, bits) pairs in first-token order; unmarked classes get none."""
    n_classes = len(marked)
    counts = np.zeros(n_classes + 1, dtype=np.int64)
    for i in range(len(token_ids)):
        c = token_class[i]
        if marked[c]:
            counts[c + 1] += 1
    starts = np.cumsum(counts)
    fill = starts[:-1].copy()
    grouped = np.empty(starts[-1], dtype=np.int64)
    for i in range(len(token_ids)):
        c = token_class[i]
        if marked[c]:
            grouped[fill[c]] = token_ids[i]
            fill[c] += 1
    ptr = np.zeros(n_classes + 1, dtype=np.int64)
    words = np.empty(starts[-1], dtype=np.int32)
    bits = np.empty(starts[-1], dtype=np.int32)
    acc = np.zeros(n_words, dtype=np.uint32)
    n = 0
    for c in range(n_classes):
        first = n
        for i in range(starts[c], starts[c + 1]):
            t = grouped[i]
            w = t >> 5
            if acc[w] == 0:
                words[n] = w
                n += 1
            acc[w] |= np.uint32(1) << np.uint32(t & 31)
        for i in range(first, n):
            bits[i] = np.int32(acc[words[i]])
            acc[words[i]] = 0
        ptr[c + 1] = n
    return ptr, words[:n].copy(), bits[:n].copy()
