"""The masks of counted terminals near a level's end (see :mod:`grammask.automata.counted`).

A lexer state of a counted lexeme has a copy per level of the count, and its precomputed masks are
exact for the counts of its level from which no token can reach the next level: every token adds
at most ``L`` units, ``L`` the vocabulary's longest token in bytes. Nearer the end of the level, a
token's fate depends on the level its units take the lexeme to, and nothing else: the walk from
the copy of that level decides it exactly. So the mask at count ``c`` in state ``q`` is, over the
levels ``k`` that ``c + L`` reaches, the copy of level ``k``'s mask restricted to the tokens that
add between ``bounds[k] - c`` and ``bounds[k+1] - 1 - c`` units to the pending lexeme
(:func:`first_lexeme_units`, one walk of the vocabulary per state, on first need).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

if TYPE_CHECKING:
    from grammask.automata.lexer import LexerAutomaton
    from grammask.spanner import VocabTrie


class CountRuntime:
    """What the matchers of one compiled grammar with counted terminals share: the units each token adds from a
    lexer state (computed on first need, kept) and the levels a count reaches."""

    def __init__(self, lexer: LexerAutomaton, trie_of, n_logits: int, longest: int):
        self.lexer = lexer
        self.tables = lexer.counter
        self.longest = longest
        """``L``: the most units one token can add (its length in bytes)."""
        self._trie_of = trie_of
        self._n_logits = n_logits
        self._units: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._up_at = self.tables.up_at.tolist()
        self._fixed = self.tables.fixed.tolist()

    def near(self, state: int, count: int) -> bool:
        """Whether some token can take the lexeme pending in ``state`` with ``count`` units to a later level (where
        every lexeme in ``state`` has one count, the walks counted it: never)."""
        return self._up_at[state] <= count + self.longest and self._fixed[state] < 0

    def levels(self, state: int, count: int) -> list[tuple[int, int, int]]:
        """The copies of ``state`` in the levels ``count`` reaches with one token, each with the fewest and most
        units (inclusive) a token must add to land in that level."""
        bounds = self.tables.bounds
        out = []
        for copy in self.tables.copies(state):
            k = int(self.tables.level[copy])
            if bounds[k] > count + self.longest:
                break
            top = int(bounds[k + 1]) - 1 - count if k + 1 < len(bounds) else self.longest
            out.append((copy, max(int(bounds[k]) - count, 0), min(top, self.longest)))
        return out

    def tokens_adding(self, state: int, lo: int, hi: int) -> np.ndarray:
        """The bitmask row of the tokens that add ``lo..hi`` units to the lexeme pending in ``state``."""
        units = self._units_from(state)
        bits = np.zeros(-(-self._n_logits // 32) * 32, dtype=bool)
        bits[: self._n_logits] = (units >= lo) & (units <= hi)
        return np.packbits(bits, bitorder="little").view(np.int32)

    def _units_from(self, state: int) -> np.ndarray:
        found = self._units.get(state)
        if found is None:
            with self._lock:
                found = self._units.get(state)
                if found is None:
                    trie = self._trie_of()
                    per_entry = first_lexeme_units(trie, self.lexer.trans, self.tables.inc, state)
                    found = np.full(self._n_logits, -1, dtype=np.int32)
                    found[trie.token_ids] = per_entry
                    self._units[state] = found
        return found


def first_lexeme_units(trie: VocabTrie, trans: np.ndarray, inc: np.ndarray, state: int) -> np.ndarray:
    """Per trie entry, the units its bytes add to the lexeme pending in ``state`` before a byte ends that lexeme
    (whether or not it may end there: the walks decide that)."""
    return _units(trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, trans, inc, np.int32(state))


@nb.njit(cache=True)
def _units(node_byte, node_parent, node_end, node_tok_ptr, trans, inc, start):
    n_nodes = len(node_byte)
    out = np.empty(node_tok_ptr[-1], dtype=np.int32)
    node_state = np.empty(n_nodes, dtype=np.int32)
    node_units = np.empty(n_nodes, dtype=np.int32)
    node_state[0] = start
    node_units[0] = 0
    n = 1
    while n < n_nodes:
        up = node_parent[n]
        state = node_state[up]
        nxt = trans[state, node_byte[n]]
        if nxt < 0:  # the lexeme ends before this byte: every token below adds what the prefix added
            out[node_tok_ptr[n] : node_tok_ptr[node_end[n]]] = node_units[up]
            n = node_end[n]
            continue
        node_state[n] = nxt
        node_units[n] = node_units[up] + inc[state, node_byte[n]]
        out[node_tok_ptr[n] : node_tok_ptr[n + 1]] = node_units[n]
        n += 1
    return out
