"""Token classes: the vocabulary walk of each lexer state, grouped by what the parser sees.

Two tokens are in the same class of lexer state ``q`` when, lexed from ``q``, they emit the
same terminal sequence and leave a pending lexeme with the same follow set (the terminals it
can still become). The parser cannot tell such tokens apart, so masks are decided per class.
Classes of all lexer states are numbered together in sorted order of their sequences, so that
checking many classes walks a trie (see :func:`grammask.parser.kernels.check_classes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from grammask.spanner import SequenceTable


@dataclass
class StateClasses:
    """One lexer state's alive tokens (in vocabulary-trie order) and the local class of each."""

    token_ids: np.ndarray
    token_class: np.ndarray
    classes: np.ndarray  # local class -> class key (sequence id * n_follow + follow id), later its rank
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


class ClassTable:
    """All classes seen in any lexer state, numbered (ranked) in sorted order of their terminal sequences."""

    def __init__(self, keys: np.ndarray, seqs: SequenceTable, n_follow: int):
        keys = np.unique(keys)
        sequences = [seqs.sequence(int(k)) for k in keys // n_follow]
        follow = (keys % n_follow).tolist()
        order = sorted(range(len(keys)), key=lambda i: (sequences[i], follow[i]))
        self.keys = keys
        self.rank = np.empty(len(keys), dtype=np.int32)
        self.rank[order] = np.arange(len(keys), dtype=np.int32)
        sequences = [sequences[i] for i in order]
        self.follow = np.array([follow[i] for i in order], dtype=np.int32)
        self.seq_ptr = np.cumsum([0] + [len(e) for e in sequences]).astype(np.int64)
        self.seq_terms = np.array([t for e in sequences for t in e], dtype=np.int32)
        self.lcp = _adjacent_lcp(self.seq_ptr, self.seq_terms)

    def __len__(self) -> int:
        return len(self.follow)

    def rerank(self, state: StateClasses) -> None:
        """Renumber a state's local classes in class order and make ``state.classes`` their ranks."""
        ranks = self.rank[np.searchsorted(self.keys, state.classes)]
        order = np.argsort(ranks, kind="stable")
        renumber = np.empty(len(order), dtype=np.int32)
        renumber[order] = np.arange(len(order), dtype=np.int32)
        state.token_class = renumber[state.token_class]
        state.classes = ranks[order]
        state.sizes = state.sizes[order]

    def lcp_between(self, ranks: np.ndarray) -> np.ndarray:
        """Common sequence prefix of each class in sorted ``ranks`` with the one before it."""
        out = np.zeros(len(ranks), dtype=np.int64)
        if len(ranks) > 1:
            # The LCP of two entries of a sorted list is the minimum adjacent LCP between them.
            padded = np.append(self.lcp, 0)
            out[1:] = np.minimum.reduceat(padded, ranks.astype(np.int64) + 1)[:-1]
        return out


@nb.njit(cache=True)
def _adjacent_lcp(ptr, terms):
    n = len(ptr) - 1
    lcp = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        a, b = ptr[i - 1], ptr[i]
        la, lb = ptr[i] - a, ptr[i + 1] - b
        k = 0
        while k < la and k < lb and terms[a + k] == terms[b + k]:
            k += 1
        lcp[i] = k
    return lcp


class ClassTokens:
    """Token bitmask words of the classes whose fate depends on the stack, shared between equal ones."""

    def __init__(self, n_words: int):
        self.n_words = n_words
        self.ids: dict[bytes, int] = {}
        self.words: list[np.ndarray] = []
        self.bits: list[np.ndarray] = []

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
                d = self.ids[key] = len(self.words)
                self.words.append(w)
                self.bits.append(b)
            out[c] = d
        return out

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pointer, words, bits): class ``d`` sets ``bits[i]`` in word ``words[i]`` for ``i`` in ``ptr[d]:ptr[d+1]``."""
        ptr = np.cumsum([0] + [len(w) for w in self.words]).astype(np.int64)
        if not self.words:
            return ptr, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
        return ptr, np.concatenate(self.words), np.concatenate(self.bits)


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
