"""Token-level lexing: what each vocabulary token does from each lexer state (GreatGramma §3.1-3.2).

For a lexer state ``q`` and a token ``t``, lexing t's bytes from q under the lexing rule either
fails or emits a sequence of parser terminals ``E`` (ignored terminals dropped) and leaves the
lexer in state ``q'``. Tokens are walked in sorted byte order, so a token reuses the walk of the
prefix it shares with the previous token: the vocabulary is walked as an implicit byte trie and
every trie node costs one DFA step per lexer state.

Emitted sequences are interned in a trie over terminals: sequence id 0 is the empty sequence,
and ``(parent id, terminal)`` names each longer one. A realizable sequence (Def. 3.3) is an
emitted sequence followed by a terminal of ``Prod(q')``; ``T_inv(q, E·X)`` (Def. 3.4) is read off
the arrays returned here by grouping tokens on ``(E, Prod(q'))``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import dataclass

import numba as nb
import numpy as np

if TYPE_CHECKING:
    from grammask.vocab import Vocabulary


DEAD = -1


@dataclass(frozen=True)
class VocabTrie:
    """The text tokens of a vocabulary in sorted byte order, flattened for the trie walk."""

    token_ids: np.ndarray  # int32, token id of each sorted entry
    data: np.ndarray  # uint8, concatenated bytes
    offsets: np.ndarray  # int64, entry i is data[offsets[i]:offsets[i+1]]
    max_len: int

    @classmethod
    def from_vocab(cls, vocab: Vocabulary) -> "VocabTrie":
        ids = np.array([i for i, b in enumerate(vocab.tokens) if b], dtype=np.int32)
        texts = [vocab.tokens[i] for i in ids.tolist()]
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        starts = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        raw = np.frombuffer(b"".join(texts), dtype=np.uint8)
        # Sort on the first 8 bytes, then length: trie order up to 8 bytes. The order only decides
        # how much work the walk shares between neighbours, never its results.
        pos = starts[:-1, None] + np.arange(8)
        heads = np.where(np.arange(8) < lengths[:, None], raw[np.minimum(pos, len(raw) - 1)], 0).astype(np.uint64)
        key = (heads << (np.uint64(8) * np.arange(7, -1, -1, dtype=np.uint64))).sum(axis=1, dtype=np.uint64)
        order = np.lexsort((lengths, key))
        token_ids = ids[order]
        lengths = lengths[order]
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = raw[np.repeat(starts[:-1][order] - offsets[:-1], lengths) + np.arange(offsets[-1])]
        return cls(token_ids, data, offsets, int(lengths.max(initial=0)))


class SequenceTable:
    """Interned emitted-terminal sequences: id 0 is empty, every other id is (parent, terminal).

    The index is an open-addressing hash table in arrays (keys ``parent * n_terms + terminal``),
    so the compiled walk can extend it.
    """

    def __init__(self, n_terms: int) -> None:
        self.n_terms = n_terms
        self.parent = np.zeros(1024, dtype=np.int32)
        self.last = np.full(1024, -1, dtype=np.int32)
        self.count = np.ones(1, dtype=np.int64)
        self.slots = np.full(4096, -1, dtype=np.int64)  # hash slot -> sequence id
        self._tuples: dict[int, tuple[int, ...]] = {0: ()}

    def sequence(self, seq_id: int) -> tuple[int, ...]:
        """The parser terminals of sequence ``seq_id``."""
        known = self._tuples.get(seq_id)
        if known is not None:
            return known
        chain = []
        while seq_id not in self._tuples:
            chain.append(seq_id)
            seq_id = int(self.parent[seq_id])
        seq = self._tuples[seq_id]
        for s in reversed(chain):
            seq = seq + (int(self.last[s]),)
            self._tuples[s] = seq
        return seq

    def ensure_room(self, extra: int) -> None:
        """Make room for ``extra`` more sequences (arrays doubled, hash table kept under half full)."""
        need = int(self.count[0]) + extra
        if need > len(self.parent):
            size = max(need, 2 * len(self.parent))
            self.parent = np.resize(self.parent, size)
            self.last = np.resize(self.last, size)
        if 2 * need > len(self.slots):
            size = len(self.slots)
            while 2 * need > size:
                size *= 2
            self.slots = _rehash(self.parent, self.last, int(self.count[0]), self.n_terms, size)

    def __len__(self) -> int:
        return int(self.count[0])


@nb.njit(cache=True)
def _rehash(parent, last, count, n_terms, size):
    slots = np.full(size, -1, dtype=np.int64)
    for s in range(1, count):
        key = np.int64(parent[s]) * n_terms + last[s]
        h = (key * 0x9E3779B97F4A7C15) & (size - 1)
        while slots[h] >= 0:
            h = (h + 1) & (size - 1)
        slots[h] = s
    return slots


def walk_tokens(
    trie: VocabTrie, trans: np.ndarray, accept: np.ndarray, parser_term: np.ndarray, start: int, seqs: SequenceTable
) -> tuple[np.ndarray, np.ndarray]:
    """Lex every token from lexer state ``start``.

    Returns ``(seq, end)`` over the trie's sorted entries: the interned emitted sequence (or
    ``DEAD``) and the lexer state left. ``parser_term[lexer terminal]`` is its parser terminal
    index, or -1 for ignored terminals (not recorded in sequences).
    """
    while True:
        seqs.ensure_room(len(trie.token_ids) + 1)
        seq, end, full = _walk(
            trie.data, trie.offsets, trie.max_len, trans, accept, parser_term, np.int32(start),
            seqs.slots, seqs.parent, seqs.last, seqs.count, np.int64(seqs.n_terms),
        )
        if not full:
            return seq, end


@nb.njit(cache=True)
def _walk(data, offsets, max_len, trans, accept, parser_term, start, slots, parent, last, count, n_terms):
    n = len(offsets) - 1
    seq_out = np.empty(n, dtype=np.int32)
    end_out = np.empty(n, dtype=np.int32)
    states = np.empty(max_len + 1, dtype=np.int32)
    seqs = np.zeros(max_len + 1, dtype=np.int64)
    states[0] = start
    capacity = min(len(parent), len(slots) // 2)
    mask = len(slots) - 1
    dead_at = max_len + 1  # prefixes at least this long (of the current path) are rejected
    for i in range(n):
        base = offsets[i]
        length = offsets[i + 1] - base
        depth = 0
        if i > 0:  # bytes shared with the previous token (sorted order: the trie path so far)
            prev = offsets[i - 1]
            prev_len = base - prev
            while depth < length and depth < prev_len and data[prev + depth] == data[base + depth]:
                depth += 1
        if dead_at <= depth:
            seq_out[i] = -1
            end_out[i] = -1
            continue
        dead_at = max_len + 1
        state = states[depth]
        seq = seqs[depth]
        while depth < length:
            b = data[base + depth]
            nxt = trans[state, b]
            if nxt < 0:
                term = accept[state]
                nxt = trans[0, b]
                if term < 0 or nxt < 0:
                    dead_at = depth + 1
                    break
                pt = parser_term[term]
                if pt >= 0:
                    key = seq * n_terms + pt
                    h = (key * 0x9E3779B97F4A7C15) & mask
                    found = np.int64(-1)
                    while slots[h] >= 0:
                        s = slots[h]
                        if np.int64(parent[s]) * n_terms + last[s] == key:
                            found = s
                            break
                        h = (h + 1) & mask
                    if found < 0:
                        found = count[0]
                        if found >= capacity:
                            return seq_out, end_out, True
                        slots[h] = found
                        parent[found] = seq
                        last[found] = pt
                        count[0] = found + 1
                    seq = found
            state = nxt
            depth += 1
            states[depth] = state
            seqs[depth] = seq
        if dead_at <= length:
            seq_out[i] = -1
            end_out[i] = -1
        else:
            seq_out[i] = seq
            end_out[i] = state
    return seq_out, end_out, False
