"""Token-level lexing: what each vocabulary token does from each lexer state (GreatGramma §3.1-3.2).

For a lexer state ``q`` and a token ``t``, lexing t's bytes from q under the lexing rule either
fails or emits a sequence of parser terminals ``E`` (ignored terminals dropped) and leaves the
lexer in state ``q'``. The vocabulary is stored as a byte trie in preorder, so the walk from one
lexer state visits each trie node once, and skips the whole subtree of a node whose prefix is
already rejected: a state that few tokens can continue costs little.

Emitted sequences are interned in a trie over terminals: sequence id 0 is the empty sequence,
and ``(parent id, terminal)`` names each longer one. A realizable sequence (Def. 3.3) is an
emitted sequence followed by a terminal of ``Prod(q')``; ``T_inv(q, E·X)`` (Def. 3.4) is read off
the arrays returned here by grouping tokens on ``(E, Prod(q'))``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

if TYPE_CHECKING:
    from grammask.automata.counted import CountTables
    from grammask.vocab import Vocabulary


DEAD = -1
CHAIN = -2
"""``LexerAutomaton.alt`` of a chain state (as :data:`grammask.automata.fallback.CHAIN`; this layer imports no
automata)."""


@dataclass(frozen=True)
class VocabTrie:
    """The text tokens of a vocabulary as a byte trie numbered in preorder.

    Node 0 is the root (empty prefix); node ``n`` adds byte ``node_byte[n]`` to its parent's
    prefix, and its subtree is the node range ``[n, node_end[n])``. Entry ``i`` (tokens in
    sorted byte order) is token ``token_ids[i]``, whose bytes end at node ``token_node[i]``; the
    entries ending at node ``n`` are ``node_tok_ptr[n]:node_tok_ptr[n+1]`` (entries and nodes are
    in the same order).
    """

    token_ids: np.ndarray
    token_node: np.ndarray
    node_byte: np.ndarray
    node_parent: np.ndarray
    node_end: np.ndarray
    node_tok_ptr: np.ndarray

    @classmethod
    def from_vocab(cls, vocab: Vocabulary) -> VocabTrie:
        ids = [i for i, b in enumerate(vocab.tokens) if b]
        ids.sort(key=vocab.tokens.__getitem__)
        texts = [vocab.tokens[i] for i in ids]
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
        data = np.frombuffer(b"".join(texts), dtype=np.uint8)
        token_node, node_byte, node_parent, node_end = _build_trie(data, offsets)
        node_tok_ptr = np.zeros(len(node_byte) + 1, dtype=np.int64)
        np.cumsum(np.bincount(token_node, minlength=len(node_byte)), out=node_tok_ptr[1:])
        return cls(np.array(ids, dtype=np.int32), token_node, node_byte, node_parent, node_end, node_tok_ptr)

    @property
    def n_nodes(self) -> int:
        return len(self.node_byte)

    @cached_property
    def first_spans(self) -> np.ndarray:
        """Per byte ``b``, the entries ``[lo, hi)`` whose token starts with ``b``."""
        spans = np.zeros((256, 2), dtype=np.int64)
        for child in np.flatnonzero(self.node_parent == 0).tolist():
            spans[self.node_byte[child]] = self.node_tok_ptr[child], self.node_tok_ptr[self.node_end[child]]
        return spans

    @cached_property
    def entry_first(self) -> np.ndarray:
        """The first byte of each entry's token."""
        return np.repeat(np.arange(256, dtype=np.uint8), self.first_spans[:, 1] - self.first_spans[:, 0])


@nb.njit(cache=True)
def _build_trie(data, offsets):
    n = len(offsets) - 1
    size = offsets[-1] + 1
    node_byte = np.zeros(size, dtype=np.uint8)
    node_parent = np.full(size, -1, dtype=np.int32)
    node_end = np.zeros(size, dtype=np.int32)
    token_node = np.empty(n, dtype=np.int32)
    max_len = 0
    for i in range(n):
        max_len = max(max_len, offsets[i + 1] - offsets[i])
    path = np.zeros(max_len + 1, dtype=np.int32)  # node at each depth of the current token
    count = 1
    depth = 0  # length of the path currently open
    for i in range(n):
        base = offsets[i]
        length = offsets[i + 1] - base
        shared = 0
        if i > 0:
            prev = offsets[i - 1]
            while shared < length and shared < depth and data[prev + shared] == data[base + shared]:
                shared += 1
        for d in range(depth, shared, -1):  # leave the nodes below the shared prefix
            node_end[path[d]] = count
        for d in range(shared, length):
            node_byte[count] = data[base + d]
            node_parent[count] = path[d]
            path[d + 1] = count
            count += 1
        depth = length
        token_node[i] = path[length]
    for d in range(depth, -1, -1):
        node_end[path[d]] = count
    return token_node, node_byte[:count].copy(), node_parent[:count].copy(), node_end[:count].copy()


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


class TrieWalk:
    """Scratch arrays reused by the walks of one compile (one lexer, one sequence table), and a
    cache of whole first-byte subtrees.

    The walk below a root child depends only on the lexer state and emitted sequence reached
    after that first byte; many lexer states reach the same ones (a key literal and a generic
    string both go on as the generic string after most bytes), so the second walk that reaches
    a (child, state, sequence) triple records its tokens, and later walks copy them.
    """

    _SLOTS = 1 << 16

    def __init__(self, trie: VocabTrie):
        self.state = np.empty(trie.n_nodes, dtype=np.int32)
        self.seq = np.empty(trie.n_nodes, dtype=np.int64)
        # The current line's width at each node, times 2, plus 1 while relative to the width before the token.
        self.width = np.empty(trie.n_nodes, dtype=np.int64)
        # The pending lexeme's count at each node (counted terminals), -1 while it is the lexeme the walk began in.
        self.count = np.empty(trie.n_nodes, dtype=np.int64)
        n = len(trie.token_ids)
        # a token is reported twice where it leaves a fallback pending (LexerAutomaton.alt)
        self.out = (np.empty(2 * n, dtype=np.int32), np.empty(2 * n, dtype=np.int32), np.empty(2 * n, dtype=np.int32))
        self.cache_keys = np.full(self._SLOTS, -1, dtype=np.int64)
        self.cache_span = np.full((self._SLOTS, 2), -1, dtype=np.int64)  # start and length in the arena, once stored
        self.arena = (np.empty(4 * n, dtype=np.int32), np.empty(4 * n, dtype=np.int32), np.empty(4 * n, dtype=np.int32))
        self.used = np.zeros(2, dtype=np.int64)  # arena entries, cache slots

    def cache(self) -> tuple:
        return (self.cache_keys, self.cache_span, *self.arena, self.used)

    def forget(self) -> None:
        """Empty the subtree cache (its entries hold one lexer's states and one sequence table's ids)."""
        self.cache_keys.fill(-1)
        self.cache_span.fill(-1)
        self.used[:] = 0


class TrieWalkPool:
    """Scratch arrays for walks over one trie, lent to one walker at a time.

    A compiler keeps one per vocabulary, so grammars whose tables are built lazily hold no scratch of
    their own. The subtree cache is kept while the same walker borrows the scratch again, and emptied
    when another one does.
    """

    def __init__(self, trie: VocabTrie):
        self.trie = trie
        self._free: list[tuple[TrieWalk, object]] = []
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self, walker: object) -> Iterator[TrieWalk]:
        """Scratch for ``walker`` (any object naming it: its subtree cache is kept for it) until the block ends."""
        with self._lock:
            mine = [i for i, (_, w) in enumerate(self._free) if w is walker]
            work, last = self._free.pop(mine[0] if mine else -1) if self._free else (TrieWalk(self.trie), walker)
        if last is not walker:
            work.forget()
        try:
            yield work
        finally:
            with self._lock:
                self._free.append((work, walker))


def walk_tokens(
    trie: VocabTrie, trans: np.ndarray, accept: np.ndarray, parser_term: np.ndarray, start: int,
    seqs: SequenceTable, work: TrieWalk | None = None, newline: NewlineWidths | None = None,
    restart: np.ndarray | None = None, counter: CountTables | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Lex every token from lexer state ``start``: ``(seq, end)`` over all the trie's entries, ``DEAD`` where rejected."""
    entries, seq, end = walk_alive(trie, trans, accept, parser_term, start, seqs, work, newline, restart, counter)
    seq_all = np.full(len(trie.token_ids), DEAD, dtype=np.int32)
    end_all = np.full(len(trie.token_ids), DEAD, dtype=np.int32)
    seq_all[entries] = seq
    end_all[entries] = end
    return seq_all, end_all


@dataclass(frozen=True)
class NewlineWidths:
    """How a walk writes the indentation's newline terminal (see :mod:`grammask.indentation`).

    ``terminal`` is the newline's lexer terminal, ``base`` the first context id, ``byte_width`` what
    each byte adds to the current line's width (-1: a line break), ``stride`` the ids per width code (1 but under
    a contextual lexer, whose walk writes the modes in between).
    """

    terminal: int
    base: int
    byte_width: np.ndarray
    stride: int = 1


NO_NEWLINE = NewlineWidths(-1, 0, np.zeros(256, dtype=np.int32))
_NO_COUNT = (np.zeros((1, 256), dtype=np.uint8), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32))
_ALL_BYTES = np.ones(256, dtype=np.bool_)


def walk_alive(
    trie: VocabTrie, trans: np.ndarray, accept: np.ndarray, parser_term: np.ndarray, start: int,
    seqs: SequenceTable, work: TrieWalk | None = None, newline: NewlineWidths | None = None,
    restart: np.ndarray | None = None, counter: CountTables | None = None, first_bytes: np.ndarray | None = None,
    alt: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lex every token from lexer state ``start``; only the tokens that survive are reported.

    Returns ``(entries, seq, end)``: the trie entries that lex, each one's interned emitted
    sequence and the lexer state it leaves. ``parser_term[lexer terminal]`` is its parser
    terminal index, or -1 for ignored terminals (not recorded in sequences). Pass the same
    ``work`` to many walks over one trie to reuse its scratch arrays. With ``newline``, that
    terminal is recorded as a context id carrying its last line's width. ``restart[q]`` is the state a
    lexeme starts from after one ending in ``q`` (None: always 0; see ``LexerAutomaton.restart``). With
    ``counter`` (counted terminals, :mod:`grammask.automata.counted`), the lexemes that begin inside a token are
    counted and move up their levels; so is the lexeme pending in ``start`` where its count is known
    (``counter.fixed``), else it keeps its level: the walk is then exact for the counts of ``start``'s level from
    which no token reaches the next.
    ``first_bytes``: only the tokens whose first byte ``b`` has ``first_bytes[b]`` (None: all). ``alt`` (Lark's
    fallbacks, ``LexerAutomaton.alt``): a token that leaves a fallback pending is reported twice, the second time
    as the reading where the long lexeme dies right after it (the fallback's emissions, ending in its reading state).
    """
    work = work or TrieWalk(trie)
    newline = newline or NO_NEWLINE
    counting = counter is not None
    inc, up_at, lift = (counter.inc, counter.up_at, counter.lift) if counting else _NO_COUNT
    start_units = np.int64(counter.fixed[0]) if counting else np.int64(0)
    known = np.int64(counter.fixed[start]) if counting else np.int64(-1)
    if restart is None:
        restart = np.zeros(trans.shape[0], dtype=np.int32)
    if alt is None:
        alt = np.full(trans.shape[0], -1, dtype=np.int32)
    if first_bytes is None:
        first_bytes = _ALL_BYTES
    while True:
        seqs.ensure_room(len(trie.token_ids) + 1)
        entries, seq, end, full = _walk(
            trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, trans, accept, parser_term,
            np.int32(start), seqs.slots, seqs.parent, seqs.last, seqs.count, np.int64(seqs.n_terms),
            work.state, work.seq, *work.out, *work.cache(), np.int32(newline.terminal), np.int64(newline.base),
            newline.byte_width, work.width, restart, counting, inc, start_units, known, up_at, lift, work.count,
            first_bytes, alt,
        )
        if not full:
            return entries, seq, end


@nb.njit(cache=True, inline="always")
def intern(seq, pt, slots, parent, last, count, n_terms, capacity):
    """The id of sequence ``seq`` + terminal ``pt`` in a :class:`SequenceTable`'s arrays, added if new; -1 when full."""
    mask = len(slots) - 1
    key = seq * n_terms + pt
    h = (key * 0x9E3779B97F4A7C15) & mask
    while slots[h] >= 0:
        s = slots[h]
        if np.int64(parent[s]) * n_terms + last[s] == key:
            return s
        h = (h + 1) & mask
    found = count[0]
    if found >= capacity:
        return np.int64(-1)
    slots[h] = found
    parent[found] = seq
    last[found] = pt
    count[0] = found + 1
    return found


FULL = -2
"""What :func:`fallen` returns when the sequence table is full."""


@nb.njit(cache=True)
def fallen(state, seq, width, accept, restart, alt, parser_term, nl_term, nl_base, slots, parent, last, count,
           n_terms, capacity):
    """The sequence emitted, after ``seq``, where fallback ``state``'s long lexeme dies (its earlier match, then
    the lexemes its chain completed); -1 where Lark's indenter would fail on it, :data:`FULL` if the table is full."""
    while True:
        term = accept[state]
        if term == nl_term and width == NO_BREAK_YET:
            return np.int64(-1)
        pt = parser_term[term]
        if term == nl_term:
            pt = nl_base + 1 + width
        width = NO_BREAK_YET
        if pt >= 0:
            seq = intern(seq, pt, slots, parent, last, count, n_terms, capacity)
            if seq < 0:
                return np.int64(FULL)
        state = restart[state]
        if alt[state] != CHAIN:
            return seq


NO_BREAK_YET = -2
"""A walk's width code inside a lexeme that began in the token and has no line break yet: a newline lexeme ending
so is rejected (Lark's ``Indenter`` measures the text after its last line break, and fails without one)."""


@nb.njit(cache=True, inline="always")
def next_width(width, step):
    """The width code after a byte adding ``step`` (-1: a line break): ``2 * w`` for a line ``w`` wide since a line
    break in the token, ``2 * w + 1`` for ``w`` more than before the token, :data:`NO_BREAK_YET` kept."""
    if step < 0:
        return np.int64(0)
    return width if width == NO_BREAK_YET else width + 2 * step


@nb.njit(cache=True, inline="always")
def width_slot(width):
    """A width code folded into 1,024 slots for a cache key (wide lines share one)."""
    if width == NO_BREAK_YET:
        return np.int64(0)
    return 1 + (width & 1) + 2 * min(width >> 1, 510)


@nb.njit(cache=True, inline="always")
def report(lo, hi, seq, end, n_out, entries, seq_out, end_out):
    """Write trie entries ``lo..hi`` with sequence ``seq`` and end state ``end`` at ``n_out``; the new count."""
    for e in range(lo, hi):
        entries[n_out] = e
        seq_out[n_out] = seq
        end_out[n_out] = end
        n_out += 1
    return n_out


@nb.njit(cache=True, inline="always")
def copy_stored(slot, n_out, cache_span, arena_entries, arena_seq, arena_end, entries, seq_out, end_out):
    """Copy the first-byte subtree stored in cache ``slot`` to ``n_out``; the new count."""
    a, length = cache_span[slot, 0], cache_span[slot, 1]
    entries[n_out : n_out + length] = arena_entries[a : a + length]
    seq_out[n_out : n_out + length] = arena_seq[a : a + length]
    end_out[n_out : n_out + length] = arena_end[a : a + length]
    return n_out + length


@nb.njit(cache=True, inline="always")
def store_subtree(slot, lo, hi, entries, seq_out, end_out, cache_span, arena_entries, arena_seq, arena_end, used):
    length = hi - lo
    a = used[0]
    if a + length <= len(arena_entries):
        arena_entries[a : a + length] = entries[lo:hi]
        arena_seq[a : a + length] = seq_out[lo:hi]
        arena_end[a : a + length] = end_out[lo:hi]
        cache_span[slot, 0] = a
        cache_span[slot, 1] = length
        used[0] = a + length


@nb.njit(cache=True)
def _walk(node_byte, node_parent, node_end, node_tok_ptr, trans, accept, parser_term, start, slots, parent, last,
          count, n_terms, node_state, node_seq, entries, seq_out, end_out, cache_keys, cache_span,
          arena_entries, arena_seq, arena_end, used, nl_term, nl_base, byte_width, node_width, restart,
          counting, inc, start_units, known, up_at, lift, node_count, first_bytes, alt):
    capacity = min(len(parent), len(slots) // 2)
    cache_mask = len(cache_keys) - 1
    n_states = trans.shape[0]
    n_nodes = len(node_byte)
    n_out = 0
    node_state[0] = start
    node_seq[0] = 0
    node_width[0] = 1  # width 0, relative
    node_count[0] = known
    recording = -1  # cache slot of the first-byte subtree being recorded
    record_from = 0
    record_end = 0
    n = 1
    while n < n_nodes:
        if recording >= 0 and n >= record_end:
            store_subtree(recording, record_from, n_out, entries, seq_out, end_out, cache_span, arena_entries, arena_seq,
                   arena_end, used)
            recording = -1
        up = node_parent[n]
        b = node_byte[n]
        if up == 0 and not first_bytes[b]:
            n = node_end[n]
            continue
        state = node_state[up]
        seq = node_seq[up]
        width = node_width[up]
        units = node_count[up]
        nxt = trans[state, b]
        came_from = state
        rejected = False
        while nxt < 0:  # emit; a fallback's restart may emit in turn (a chain), until a state takes the byte
            term = accept[came_from]
            if term < 0 or (term == nl_term and width == NO_BREAK_YET):
                rejected = True
                break
            units = start_units
            pt = parser_term[term]
            if term == nl_term:
                pt = nl_base + 1 + width  # the context id of grammask.indentation
            width = NO_BREAK_YET
            if pt >= 0:
                seq = intern(seq, pt, slots, parent, last, count, n_terms, capacity)
                if seq < 0:
                    return entries, seq_out, end_out, True
            came_from = restart[came_from]
            nxt = trans[came_from, b]
        if rejected:
            n = node_end[n]  # this prefix is rejected, and so is every token below it
            continue
        if counting and units >= 0:
            units += inc[came_from, b]
            while units >= up_at[nxt]:
                nxt = lift[nxt]
        width = next_width(width, byte_width[b])
        if up == 0 and units < 4095:  # a first-byte subtree: copy it if stored, record it on its second visit
            key = (seq * n_states + nxt) * n_nodes + n
            if nl_term >= 0:
                key = key * 1024 + width_slot(width)
            if counting:
                key = key * 4096 + units + 1
            h = (key * 0x9E3779B97F4A7C15) & cache_mask
            while cache_keys[h] >= 0 and cache_keys[h] != key:
                h = (h + 1) & cache_mask
            if cache_keys[h] == key:
                if cache_span[h, 0] >= 0:
                    n_out = copy_stored(h, n_out, cache_span, arena_entries, arena_seq, arena_end, entries, seq_out,
                                        end_out)
                    n = node_end[n]
                    continue
                recording = h
                record_from = n_out
                record_end = node_end[n]
            elif 2 * used[1] < len(cache_keys):
                cache_keys[h] = key
                used[1] += 1
        node_state[n] = nxt
        node_seq[n] = seq
        node_width[n] = width
        node_count[n] = units
        n_out = report(node_tok_ptr[n], node_tok_ptr[n + 1], seq, nxt, n_out, entries, seq_out, end_out)
        if alt[nxt] >= 0:  # a fallback pending: also the reading where its long lexeme dies right here
            fell = fallen(nxt, seq, width, accept, restart, alt, parser_term, nl_term, nl_base, slots, parent, last,
                          count, n_terms, capacity)
            if fell == FULL:
                return entries, seq_out, end_out, True
            if fell >= 0:
                n_out = report(node_tok_ptr[n], node_tok_ptr[n + 1], fell, alt[nxt], n_out, entries, seq_out,
                               end_out)
        n += 1
    if recording >= 0:
        store_subtree(recording, record_from, n_out, entries, seq_out, end_out, cache_span, arena_entries, arena_seq,
               arena_end, used)
    return entries[:n_out].copy(), seq_out[:n_out].copy(), end_out[:n_out].copy(), False
