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
from numba import types
from numba.typed import Dict as NumbaDict

if TYPE_CHECKING:
    from grammask.vocab import Vocabulary


DEAD = -1


@dataclass(frozen=True)
class VocabTrie:
    """The text tokens of a vocabulary in sorted byte order, flattened for the trie walk."""

    token_ids: np.ndarray  # int32, token id of each sorted entry
    data: np.ndarray  # uint8, concatenated bytes
    offsets: np.ndarray  # int64, entry i is data[offsets[i]:offsets[i+1]]
    lcp: np.ndarray  # int32, common prefix length with the previous entry
    max_len: int

    @classmethod
    def from_vocab(cls, vocab: Vocabulary) -> "VocabTrie":
        items = sorted((b, i) for i, b in enumerate(vocab.tokens) if b)
        token_ids = np.fromiter((i for _, i in items), dtype=np.int32, count=len(items))
        lengths = np.fromiter((len(b) for b, _ in items), dtype=np.int64, count=len(items))
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.frombuffer(b"".join(b for b, _ in items), dtype=np.uint8)
        return cls(token_ids, data, offsets, _common_prefixes(data, offsets), int(lengths.max(initial=0)))


@nb.njit(cache=True)
def _common_prefixes(data, offsets):
    n = len(offsets) - 1
    lcp = np.zeros(n, dtype=np.int32)
    for i in range(1, n):
        a, b = offsets[i - 1], offsets[i]
        la, lb = offsets[i] - a, offsets[i + 1] - b
        k = 0
        while k < la and k < lb and data[a + k] == data[b + k]:
            k += 1
        lcp[i] = k
    return lcp


class SequenceTable:
    """Interned emitted-terminal sequences: id 0 is empty, every other id is (parent, terminal)."""

    def __init__(self) -> None:
        self.index = NumbaDict.empty(key_type=types.int64, value_type=types.int64)
        self.parent = np.zeros(1024, dtype=np.int32)
        self.last = np.full(1024, -1, dtype=np.int32)
        self.count = np.ones(1, dtype=np.int64)
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
        need = int(self.count[0]) + extra
        if need > len(self.parent):
            size = max(need, 2 * len(self.parent))
            self.parent = np.resize(self.parent, size)
            self.last = np.resize(self.last, size)

    def __len__(self) -> int:
        return int(self.count[0])


def walk_tokens(
    trie: VocabTrie, trans: np.ndarray, accept: np.ndarray, parser_term: np.ndarray, start: int, seqs: SequenceTable
) -> tuple[np.ndarray, np.ndarray]:
    """Lex every token from lexer state ``start``.

    Returns ``(seq, end)`` over the trie's sorted entries: the interned emitted sequence (or
    ``DEAD``) and the lexer state left. ``parser_term[lexer terminal]`` is its parser terminal
    index, or -1 for ignored terminals (not recorded in sequences).
    """
    n_terms = np.int64(parser_term.max() + 2)
    while True:
        seqs.ensure_room(len(trie.token_ids) + 1)
        seq, end, full = _walk(
            trie.data, trie.offsets, trie.lcp, trie.max_len, trans, accept, parser_term, np.int32(start),
            seqs.index, seqs.parent, seqs.last, seqs.count, n_terms,
        )
        if not full:
            return seq, end


@nb.njit(cache=True)
def _walk(data, offsets, lcp, max_len, trans, accept, parser_term, start, index, parent, last, count, n_terms):
    n = len(offsets) - 1
    seq_out = np.empty(n, dtype=np.int32)
    end_out = np.empty(n, dtype=np.int32)
    states = np.empty(max_len + 1, dtype=np.int32)
    seqs = np.zeros(max_len + 1, dtype=np.int64)
    states[0] = start
    capacity = len(parent)
    dead_at = max_len + 1  # prefixes at least this long (of the current path) are rejected
    for i in range(n):
        depth = lcp[i]
        length = offsets[i + 1] - offsets[i]
        if dead_at <= depth:
            seq_out[i] = -1
            end_out[i] = -1
            continue
        dead_at = max_len + 1
        state = states[depth]
        seq = seqs[depth]
        base = offsets[i]
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
                    found = index.get(key, np.int64(-1))
                    if found < 0:
                        found = count[0]
                        if found >= capacity:
                            return seq_out, end_out, True
                        index[key] = found
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
