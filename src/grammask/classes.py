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
    """One lexer state's alive tokens (in vocabulary-trie order) and the local class of each."""

    token_ids: np.ndarray
    token_class: np.ndarray
    classes: np.ndarray  # local class -> class key (sequence id * n_follow + follow id), later its class number
    sizes: np.ndarray  # local class -> number of tokens


def group_walk(token_ids: np.ndarray, seq: np.ndarray, ends: np.ndarray, state_follow: np.ndarray, n_follow: int,
               scratch: np.ndarray, seen: np.ndarray) -> tuple[StateClasses, np.ndarray]:
    """Group one walk's alive tokens by class key (emitted sequence, follow set of the state left).

    ``scratch`` is an int32 array over all keys, all -1 (left so). Returns the classes and the
    lexer states left that ``seen`` did not hold yet (marked in ``seen`` now).
    """
    token_class, class_keys, sizes, fresh = _group(seq, ends, state_follow, n_follow, scratch, seen)
    return StateClasses(token_ids, token_class, class_keys, sizes), fresh


@nb.njit(cache=True)
def _group(seq, ends, state_follow, n_follow, slot, seen):
    n = len(seq)
    token_class = np.empty(n, dtype=np.int32)
    class_keys = np.empty(n, dtype=np.int64)
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
        c = slot[k]
        if c < 0:
            c = n_classes
            slot[k] = c
            class_keys[c] = k
            n_classes += 1
        token_class[i] = c
        sizes[c] += 1
    for c in range(n_classes):
        slot[class_keys[c]] = -1
    return token_class, class_keys[:n_classes].copy(), sizes[:n_classes].copy(), fresh[:n_fresh].copy()


class ClassIndex:
    """All classes met so far, numbered in the order met: class ``c`` emits the parser terminals
    ``seq_terms[seq_ptr[c]:seq_ptr[c+1]]`` and then needs a terminal of follow set ``follow[c]``.

    The arrays only grow (:class:`~grammask.growing.Growing`), so tables built from earlier states stay valid.
    """

    def __init__(self, seqs: SequenceTable, n_follow: int):
        self.seqs = seqs
        self.n_follow = n_follow
        self._ids: dict[int, int] = {}
        self._order: list[tuple[tuple[int, ...], int]] = []  # per class: its sort key (sequence, follow set)
        self.seq_ptr = Growing(np.int64)
        self.seq_ptr.append(0)
        self.seq_terms = Growing(np.int32)
        self.follow = Growing(np.int32)

    def __len__(self) -> int:
        return len(self.follow)

    def _id(self, key: int) -> int:
        c = self._ids.get(key)
        if c is None:
            c = self._ids[key] = len(self._order)
            seq, follow = self.seqs.sequence(key // self.n_follow), key % self.n_follow
            self._order.append((seq, follow))
            self.seq_terms.extend(seq)
            self.seq_ptr.append(len(self.seq_terms))
            self.follow.append(follow)
        return c

    def sequence(self, c: int) -> tuple[int, ...]:
        """Class ``c``'s emitted parser terminals."""
        return self._order[c][0]

    def add_state(self, state: StateClasses) -> np.ndarray:
        """Number a state's local classes in sorted order of their sequences, make ``state.classes`` their
        class numbers, and return the sequence prefix each shares with the one before it (0 for the first):
        the order and prefixes :func:`grammask.parser.kernels.check_classes` takes."""
        ids = [self._id(k) for k in state.classes.tolist()]
        order = sorted(range(len(ids)), key=lambda i: self._order[ids[i]])
        renumber = np.empty(len(order), dtype=np.int32)
        renumber[order] = np.arange(len(order), dtype=np.int32)
        state.token_class = renumber[state.token_class]
        state.classes = np.array([ids[i] for i in order], dtype=np.int32)
        state.sizes = state.sizes[order]
        lcp = np.zeros(len(order), dtype=np.int64)
        for k in range(1, len(order)):
            a, b = self._order[state.classes[k - 1]][0], self._order[state.classes[k]][0]
            n = 0
            while n < len(a) and n < len(b) and a[n] == b[n]:
                n += 1
            lcp[k] = n
        return lcp


class ClassTokens:
    """Token bitmask words of the classes whose fate depends on the stack, shared between equal ones: class list
    ``d`` sets ``bits[i]`` in word ``words[i]`` for ``i`` in ``word_ptr[d]:word_ptr[d+1]`` (growing arrays)."""

    def __init__(self, n_words: int):
        self.n_words = n_words
        self.ids: dict[bytes, int] = {}
        self.word_ptr = Growing(np.int64)
        self.word_ptr.append(0)
        self.words = Growing(np.int32)
        self.bits = Growing(np.int32)

    def add_state(self, state: StateClasses, marked: np.ndarray) -> np.ndarray:
        """Register the marked classes of one lexer state; returns each local class's id (-1 if unmarked)."""
        out = np.full(len(marked), -1, dtype=np.int32)
        if not marked.any():
            return out
        ptr, words, bits = class_words(state.token_ids, state.token_class, marked, self.n_words)
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


@nb.njit(cache=True)
def class_masks(n_words, token_ids, token_class, sets):
    """``out[i]``: the mask row of the tokens whose class ``c`` has ``sets[i, c]`` (one row per set of classes).

    A class with more tokens than a quarter of the row's words gets its own row, OR-ed in word by word
    (made on first use); the tokens of smaller ones are set one by one.
    """
    n_sets, n_classes = sets.shape
    ptr = np.zeros(n_classes + 1, dtype=np.int64)
    for i in range(len(token_ids)):
        ptr[token_class[i] + 1] += 1
    for c in range(n_classes):
        ptr[c + 1] += ptr[c]
    fill = ptr[:-1].copy()
    grouped = np.empty(len(token_ids), dtype=np.int64)
    for i in range(len(token_ids)):
        c = token_class[i]
        grouped[fill[c]] = token_ids[i]
        fill[c] += 1
    row_of = np.full(n_classes, -1, dtype=np.int64)
    rows = np.zeros((0, n_words), dtype=np.int32)
    n_rows = 0
    out = np.zeros((n_sets, n_words), dtype=np.int32)
    for s in range(n_sets):
        target = out[s]
        for c in range(n_classes):
            if not sets[s, c]:
                continue
            if 4 * (ptr[c + 1] - ptr[c]) <= n_words:
                for i in range(ptr[c], ptr[c + 1]):
                    t = grouped[i]
                    target[t >> 5] |= np.int32(1) << np.int32(t & 31)
                continue
            if row_of[c] < 0:
                if n_rows == len(rows):
                    bigger = np.zeros((max(4, 2 * n_rows), n_words), dtype=np.int32)
                    bigger[:n_rows] = rows[:n_rows]
                    rows = bigger
                row = rows[n_rows]
                for i in range(ptr[c], ptr[c + 1]):
                    t = grouped[i]
                    row[t >> 5] |= np.int32(1) << np.int32(t & 31)
                row_of[c] = n_rows
                n_rows += 1
            row = rows[row_of[c]]
            for w in range(n_words):
                target[w] |= row[w]
    return out
