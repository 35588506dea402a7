"""The vocabulary walk under a contextual lexer: the next lexeme's possible modes lexed side by side.

After a terminal whose shift targets lie in several modes (a *branch*, see
:mod:`grammask.automata.contextual`), the walk cannot know which mode the next lexeme is lexed in. Walking
the rest of every token once per mode multiplies the work at every such boundary; instead the modes are
*superposed*: one pending configuration holds the terminal just ended and, per possible mode, the lexer
state of the next lexeme. The terminal is written into the sequence only once the modes part ways or meet:

* when every surviving mode reaches the same lexer state (merged states behave alike), or ends its lexeme
  as the same parser terminal, the terminal is written as an *alias* ``(terminal, set of modes)`` and the
  walk goes on as usual; an ignored lexeme keeps each mode, so it keeps the superposition;
* where the modes disagree (some go on, some end a lexeme, with different terminals), the subtree below is
  walked once per group of modes that agree, like a branch;
* a token that ends while modes are superposed is reported once per lexer state they are in, each with
  the alias of the modes in that state.

Each alias becomes a parser column (the terminal's, with shifts into other modes removed), so the parser
keeps exactly the modes its stack allows. Aliases and superpositions are interned in arrays the compiled
walk extends, like the emitted sequences (:class:`~grammask.spanner.SequenceTable`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from grammask.errors import GrammarError
from grammask.spanner import (
    CHAIN,
    NO_BREAK_YET,
    NO_NEWLINE,
    NewlineWidths,
    SequenceTable,
    TrieWalk,
    VocabTrie,
    copy_stored,
    intern,
    next_width,
    report,
    store_subtree,
    width_slot,
)

_DONE, _FULL, _OUT_FULL, _TOO_DEEP = 0, 1, 2, 3
_NO_PARSE = -2  # a sequence id meaning: no parser state takes this reading of the token
# Pending superpositions kept at once (per compile) and aliases; more raise (a grammar with very many modes).
_MAX_PENDING = 1 << 20
MAX_ALIASES = 1 << 16
_MAX_OPTIONS = 63  # modes a terminal's next lexeme may start in: one bit each in an alias's int64 set
_MAX_DEPTH = 4096  # splits open at once: at most one per byte of a token
_FALLS = np.int64(1) << 40  # a mode's kind where it enters fallback state q: _FALLS + q (its own group)
_MODES, _PARTS = 0, 1  # kinds of split: modes that part ways, a parting state's members


class Superpositions:
    """Interned pending superpositions and mode-set aliases of one compile.

    Pending ``p`` is (terminal ``term[p]``, per branch option ``k`` of it the state ``comp[p, k]``, -1 where
    that mode died). Alias ``a`` is (terminal ``alias_term[a]``, bit set ``alias_mask[a]`` over the
    terminal's branch options); its parser terminal is ``base + a``.
    """

    def __init__(self, max_options: int, base: int):
        """Raises :class:`~grammask.errors.GrammarError` for a terminal with more branch options than a bit set holds."""
        if max_options > _MAX_OPTIONS:
            raise GrammarError(
                f"the contextual lexer's next lexeme may start in {max_options} modes after one terminal; grammask's walk "
                f"handles at most {_MAX_OPTIONS}; try lexer='basic'"
            )
        self.base = base
        self.term = np.full(1024, -1, dtype=np.int32)
        self.comp = np.full((1024, max(max_options, 1)), -1, dtype=np.int32)
        self.slots = np.full(4096, -1, dtype=np.int64)
        self.alias_term = np.full(MAX_ALIASES, -1, dtype=np.int32)
        self.alias_mask = np.zeros(MAX_ALIASES, dtype=np.int64)
        self.alias_slots = np.full(2 * MAX_ALIASES, -1, dtype=np.int64)
        self.counts = np.zeros(2, dtype=np.int64)  # pending, aliases
        self.frames = np.empty((_MAX_DEPTH, 4), dtype=np.int64)  # open splits: node, option, options, kind

    def grow(self) -> None:
        """Double the pending table (rehashing its index); raises :class:`~grammask.errors.GrammarError` past its bound."""
        n = len(self.term)
        if 2 * n > _MAX_PENDING:
            raise GrammarError("the contextual lexer's walk holds too many superposed modes; try lexer='basic'")
        self.term = np.concatenate([self.term, np.full(n, -1, dtype=np.int32)])
        self.comp = np.vstack([self.comp, np.full_like(self.comp, -1)])
        self.slots = _rehash_pending(self.term, self.comp, int(self.counts[0]), 8 * n)

    @property
    def aliases(self) -> list[tuple[int, int]]:
        """The interned aliases as (terminal, bit set over its branch options)."""
        n = int(self.counts[1])
        return list(zip(self.alias_term[:n].tolist(), self.alias_mask[:n].tolist()))

    def arrays(self) -> tuple:
        return (self.term, self.comp, self.slots, self.alias_term, self.alias_mask, self.alias_slots, self.counts,
                np.int64(self.base))


def walk_contextual(
    trie: VocabTrie, trans: np.ndarray, accept: np.ndarray, restart: np.ndarray, ignored: np.ndarray,
    parser_term: np.ndarray, branch_ptr: np.ndarray, branch_start: np.ndarray, start: int, seqs: SequenceTable,
    sup: Superpositions, work: TrieWalk, may: tuple[np.ndarray, np.ndarray], newline: NewlineWidths | None = None,
    bans: tuple[np.ndarray, np.ndarray] | None = None, alt: np.ndarray | None = None,
    parting: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lex every token from lexer state ``start`` of a contextual lexer: ``(entries, seq, end)`` as
    :func:`~grammask.spanner.walk_alive` reports them, an entry possibly several times (once per lexer state
    its superposed modes end in). Sequences hold aliases (ids ``sup.base + a``) for branch terminals.

    ``may`` says which parser terminal an item may be followed by: ``may[0][x, y]`` for parser terminal ``x``, and
    ``may[1][t, k, y]`` for lexer terminal ``t`` read with the mode of its branch option ``k`` (some LR state the item
    shifts into has an action on ``y``). A reading of a token with two items that may not follow each other is never
    parsed, so it is dropped: without that, runs such as ``'.' * 32`` (``...`` one lexeme where the parser takes an
    ellipsis, three dots elsewhere) split into exponentially many readings.

    With ``newline`` (the indenter's), that terminal is written as a context id carrying its last line's width and,
    where the modes after it part, the alias of those whose reading the token follows (see
    :mod:`grammask.indentation`). ``bans`` are the lexer's ``(ban_row, ban)`` (lexemes that may not end before
    some bytes), None if it has none. ``alt`` (Lark's fallbacks, ``LexerAutomaton.alt``; None: none): a token that
    leaves a fallback pending is reported twice, the second time as the reading where its long lexeme dies right
    after it (see :func:`~grammask.spanner.walk_alive`); fallback states are never superposed (a mode entering one
    is split off). ``parting`` (the lexer's ``(part_row, parts, part_bits)``; None: no parting states): the walk splits
    at a parting state, once per member, and a member's fallback emits its terminal as the alias of the branch
    options it serves. Raises :class:`~grammask.errors.GrammarError` when a table outgrows its bound
    (a grammar with very many modes)."""
    newline = newline or NO_NEWLINE
    ctx_base = newline.base if newline.terminal >= 0 else np.iinfo(np.int64).max
    ctx = np.array([newline.terminal, len(ignored), ctx_base, newline.stride], dtype=np.int64)
    ban_row, ban = bans or (np.full(trans.shape[0], -1, dtype=np.int32), np.zeros((1, 257), dtype=np.bool_))
    if alt is None:
        alt = np.full(trans.shape[0], -1, dtype=np.int32)
    if parting is None:
        parting = (np.full(trans.shape[0], -1, dtype=np.int32), np.zeros((1, 1), dtype=np.int32),
                   np.zeros(trans.shape[0], dtype=np.int64))
    room = len(trie.token_ids) + 1
    while True:
        seqs.ensure_room(room)
        entries, seq, end, status = _walk(
            trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, trans, accept, restart, ignored,
            parser_term, branch_ptr, branch_start, np.int32(start), seqs.slots, seqs.parent, seqs.last,
            seqs.count, np.int64(seqs.n_terms), work.state, work.seq, *work.out, *work.cache(), sup.frames,
            *sup.arrays(), ctx, newline.byte_width, work.width, ban_row, ban, may, alt, *parting,
        )
        if status == _DONE:
            return entries, seq, end
        if status == _OUT_FULL:
            work.out = tuple(np.empty(2 * len(a), dtype=a.dtype) for a in work.out)
        elif status == _TOO_DEEP:
            raise GrammarError("a token splits the contextual lexer's modes more often than the walk has room for")
        elif int(sup.counts[1]) >= MAX_ALIASES:
            raise GrammarError("the contextual lexer's walk made too many mode-set aliases; try lexer='basic'")
        elif 2 * (int(sup.counts[0]) + 1) > len(sup.term):
            sup.grow()
        else:
            room = 2 * room + len(seqs)


@nb.njit(cache=True)
def _rehash_pending(term, comp, count, size):
    slots = np.full(size, -1, dtype=np.int64)
    for p in range(count):
        h = _pending_hash(term[p], comp[p]) & (size - 1)
        while slots[h] >= 0:
            h = (h + 1) & (size - 1)
        slots[h] = p
    return slots


@nb.njit(cache=True, inline="always")
def _pending_hash(t, comps):
    h = np.int64(t) * 0x9E3779B97F4A7C15
    for k in range(len(comps)):
        h = (h ^ np.int64(comps[k] + 1)) * 0x9E3779B97F4A7C15
    return h


@nb.njit(cache=True)
def _pending_id(t, comps, p_term, p_comp, p_slots, counts):
    """The id of superposition (t, comps); -1 when the table must grow first."""
    mask = len(p_slots) - 1
    h = _pending_hash(t, comps) & mask
    while p_slots[h] >= 0:
        p = p_slots[h]
        if p_term[p] == t:
            same = True
            for k in range(len(comps)):
                if p_comp[p, k] != comps[k]:
                    same = False
                    break
            if same:
                return p
        h = (h + 1) & mask
    p = counts[0]
    if 2 * (p + 1) > len(p_term) or 2 * (p + 1) > len(p_slots) // 2:
        return np.int64(-1)
    p_slots[h] = p
    p_term[p] = t
    p_comp[p, :] = comps
    counts[0] = p + 1
    return p


@nb.njit(cache=True)
def _alias_pt(t, bits, a_term, a_mask, a_slots, counts, base):
    """The parser terminal of alias (t, bits); -1 when the alias table is full."""
    mask = len(a_slots) - 1
    h = ((np.int64(t) * 0x9E3779B97F4A7C15) ^ bits) * 0x9E3779B97F4A7C15 & mask
    while a_slots[h] >= 0:
        a = a_slots[h]
        if a_term[a] == t and a_mask[a] == bits:
            return base + a
        h = (h + 1) & mask
    a = counts[1]
    if a >= len(a_term):
        return np.int64(-1)
    a_slots[h] = a
    a_term[a] = t
    a_mask[a] = bits
    counts[1] = a + 1
    return base + a


@nb.njit(cache=True, inline="always")
def _first_of_kind(values, k):
    """Whether ``values[k]`` is a live value (>= 0) that no earlier entry has (the first member of its group)."""
    if values[k] < 0:
        return False
    for j in range(k):
        if values[j] == values[k]:
            return False
    return True


@nb.njit(cache=True, inline="always")
def _members(values, value):
    """The bit set of the entries equal to ``value``."""
    bits = np.int64(0)
    for k in range(len(values)):
        if values[k] == value:
            bits |= np.int64(1) << k
    return bits


@nb.njit(cache=True, inline="always")
def _ended(term, width, ctx):
    """The pending terminal of a lexeme of lexer terminal ``term`` ended on a line ``width`` wide (the walk's width
    code): the terminal itself, or for the indenter's newline ``n_lex`` plus the width code."""
    return ctx[1] + width if term == ctx[0] else np.int64(term)


@nb.njit(cache=True, inline="always")
def _lexer_term(t, ctx):
    """The lexer terminal of pending terminal ``t`` (see :func:`_ended`)."""
    return ctx[0] if t >= ctx[1] else t


@nb.njit(cache=True, inline="always")
def _item(t, parser_term, ctx):
    """The sequence item of pending terminal ``t`` read in any mode: its parser terminal, or a newline's context id
    (see :mod:`grammask.indentation`); -1 for an ignored one."""
    if t >= ctx[1]:
        return ctx[2] + 1 + ctx[3] * (t - ctx[1])
    return np.int64(parser_term[t])


@nb.njit(cache=True, inline="always")
def _may_follow(x, y, may, a_term, a_mask, base, ctx, parser_term):
    """Whether sequence item ``y`` can be accepted right after item ``x`` (some LR state ``x`` shifts into has an action
    on ``y``): a necessary condition, so a sequence where it fails is never accepted. Context ids pass."""
    plain, by_option = may
    if x >= ctx[2] or y >= ctx[2]:
        return True
    if y >= base:
        y = parser_term[a_term[y - base]]
    if x < base:
        return plain[x, y]
    t = a_term[x - base]
    bits = a_mask[x - base]
    for k in range(by_option.shape[1]):
        if bits >> k & 1 and by_option[t, k, y]:
            return True
    return False


@nb.njit(cache=True, inline="always")
def _append(seq, pt, slots, parent, last, count, n_terms, capacity, may, a_term, a_mask, base, ctx, parser_term):
    """Sequence ``seq`` followed by item ``pt``, interned: -1 when the table must grow first, :data:`_NO_PARSE` when
    ``pt`` can never follow ``seq``'s last item (the token's reading dies)."""
    if seq > 0 and not _may_follow(last[seq], pt, may, a_term, a_mask, base, ctx, parser_term):
        return np.int64(_NO_PARSE)
    return intern(seq, pt, slots, parent, last, count, n_terms, capacity)


@nb.njit(cache=True, inline="always")
def _with_alias(t, bits, seq, slots, parent, last, count, n_terms, capacity, a_term, a_mask, a_slots, counts, base,
                ctx, may, parser_term):
    """Sequence ``seq`` followed by alias (t, bits) (for a newline, its context id with the alias's modes), as
    :func:`_append` gives it; -1 also when the alias table is full."""
    pt = _alias_pt(_lexer_term(t, ctx), bits, a_term, a_mask, a_slots, counts, base)
    if pt < 0:
        return np.int64(-1)
    if t >= ctx[1]:
        pt = ctx[2] + 1 + (pt - base + 1) + ctx[3] * (t - ctx[1])
    return _append(seq, pt, slots, parent, last, count, n_terms, capacity, may, a_term, a_mask, base, ctx, parser_term)


@nb.njit(cache=True, inline="always")
def _banned(s, b, ban_row, ban):
    """Whether a lexeme ending in state ``s`` may not end before byte ``b`` (a trailing-context ban)."""
    return ban_row[s] >= 0 and ban[ban_row[s], b]


@nb.njit(cache=True)
def _emit_fallen(state, ended, seq, slots, parent, last, count, n_terms, capacity, may, a_term, a_mask, a_slots,
                 counts, base, ctx, parser_term, part_bits):
    """Sequence ``seq`` followed by pending terminal ``ended`` of fallback or chain ``state`` (the alias of the branch
    options a parting state's member serves), as :func:`_append` gives it; ``seq`` for an ignored one."""
    if part_bits[state] != 0:
        return _with_alias(ended, part_bits[state], seq, slots, parent, last, count, n_terms, capacity, a_term, a_mask,
                           a_slots, counts, base, ctx, may, parser_term)
    pt = _item(ended, parser_term, ctx)
    if pt < 0:
        return seq
    return _append(seq, pt, slots, parent, last, count, n_terms, capacity, may, a_term, a_mask, base, ctx, parser_term)


@nb.njit(cache=True)
def _fallen(state, seq, width, accept, restart, alt, parser_term, ctx, slots, parent, last, count, n_terms, capacity,
            may, a_term, a_mask, a_slots, counts, base, part_bits):
    """The sequence emitted, after ``seq``, where fallback ``state``'s long lexeme dies (its earlier match, then the
    lexemes its chain completed; their restarts never branch): -1 when a table must grow first, :data:`_NO_PARSE`
    where no parser state or Lark's indenter takes it."""
    while True:
        term = accept[state]
        if term == ctx[0] and width == NO_BREAK_YET:
            return np.int64(_NO_PARSE)
        seq = _emit_fallen(state, _ended(term, width, ctx), seq, slots, parent, last, count, n_terms, capacity, may,
                           a_term, a_mask, a_slots, counts, base, ctx, parser_term, part_bits)
        width = NO_BREAK_YET
        if seq < 0:
            return seq
        state = restart[state]
        if alt[state] != CHAIN:
            return seq


@nb.njit(cache=True, inline="always")
def _split(frames, sp, n, kind, n_groups):
    """The option node ``n`` takes at a split of ``kind`` into ``n_groups`` (its frame pushed on the first visit;
    a parting state's frame sits above the modes' one of the same node) and the new stack height; option -1 when
    the stack is full."""
    i = sp - 1
    if i >= 0 and frames[i, 0] == n and frames[i, 3] != kind:
        i -= 1
    if i >= 0 and frames[i, 0] == n and frames[i, 3] == kind:
        return frames[i, 1], sp
    if sp == len(frames):
        return np.int64(-1), sp
    frames[sp, 0] = n
    frames[sp, 1] = 0
    frames[sp, 2] = n_groups
    frames[sp, 3] = kind
    return np.int64(0), sp + 1


@nb.njit(cache=True, inline="always")
def _open_branch(term, b, comps, trans, branch_ptr, branch_start):
    """Superpose the modes the lexeme after ``term`` may start in, each after byte ``b`` (-1: dead)."""
    comps[:] = -1
    lo = branch_ptr[term]
    for k in range(branch_ptr[term + 1] - lo):
        comps[k] = trans[branch_start[lo + k], b]


@nb.njit(cache=True)
def _settle(t, comps, seq, slots, parent, last, count, n_terms, capacity, p_term, p_comp, p_slots, a_term, a_mask,
            a_slots, counts, base, ctx, may, parser_term):
    """A superposition after a byte: (state, seq) resolved where every live mode is in one state, else
    (-1 - pending id, seq); (-2**62, -1) if every mode died; seq -1 when a table must grow, :data:`_NO_PARSE` when
    the resolved alias can never be parsed there."""
    one = -1
    bits = np.int64(0)
    for k in range(len(comps)):
        if comps[k] >= 0:
            bits |= np.int64(1) << k
            if one == -1:
                one = comps[k]
            elif one != comps[k]:
                one = -2
    if one == -1:
        return np.int64(-(1 << 62)), np.int64(-1)
    if one >= 0:
        return np.int64(one), _with_alias(t, bits, seq, slots, parent, last, count, n_terms, capacity, a_term, a_mask,
                                          a_slots, counts, base, ctx, may, parser_term)
    p = _pending_id(t, comps, p_term, p_comp, p_slots, counts)
    if p < 0:
        return np.int64(0), np.int64(-1)
    return -1 - p, seq


@nb.njit(cache=True)
def _walk(node_byte, node_parent, node_end, node_tok_ptr, trans, accept, restart, ignored, parser_term,
          branch_ptr, branch_start, start, slots, parent, last, count, n_terms, node_state, node_seq, entries,
          seq_out, end_out, cache_keys, cache_span, arena_entries, arena_seq, arena_end, used, frames,
          p_term, p_comp, p_slots, a_term, a_mask, a_slots, counts, base, ctx, byte_width, node_width, ban_row, ban,
          may, alt, part_row, parts, part_bits):
    capacity = min(len(parent), len(slots) // 2)
    out_capacity = len(entries)
    cache_mask = len(cache_keys) - 1
    n_states = trans.shape[0]
    n_nodes = len(node_byte)
    width = p_comp.shape[1]
    widths = ctx[0] >= 0
    comps = np.empty(width, dtype=np.int32)
    kinds = np.empty(width, dtype=np.int64)  # per mode: -2 dead, -1 goes on, else the terminal it ends
    n_out = 0
    node_state[0] = start
    node_seq[0] = 0
    node_width[0] = 1  # width 0, relative to the line's width before the token (see grammask.spanner.next_width)
    recording = -1
    record_from = 0
    record_end = 0
    sp = 0
    n = 1
    while True:
        while sp > 0 and n >= node_end[frames[sp - 1, 0]]:
            frames[sp - 1, 1] += 1
            if frames[sp - 1, 1] < frames[sp - 1, 2]:
                n = frames[sp - 1, 0]
                break
            sp -= 1
        if n >= n_nodes:
            break
        if recording >= 0 and n >= record_end:
            store_subtree(recording, record_from, n_out, entries, seq_out, end_out, cache_span, arena_entries,
                          arena_seq, arena_end, used)
            recording = -1
        up = node_parent[n]
        state = node_state[up]
        seq = node_seq[up]
        b = node_byte[n]
        width_before = node_width[up] if widths else 0
        boundary = False  # whether a lexeme ends before this byte (on this node's option)
        if state >= 0:
            nxt = trans[state, b]
            dead = False
            came = state
            width_ended = width_before
            while nxt < 0:  # emit; a fallback's restart may emit in turn (a chain), until a state takes the byte
                term = accept[came]
                boundary = True
                if term < 0 or _banned(came, b, ban_row, ban) or (term == ctx[0] and width_ended == NO_BREAK_YET):
                    dead = True
                    break
                ended = _ended(term, width_ended, ctx)
                width_ended = NO_BREAK_YET
                again = restart[came]
                if again < 0:
                    _open_branch(term, b, comps, trans, branch_ptr, branch_start)
                    nxt, seq = _settle(ended, comps, seq, slots, parent, last, count, n_terms, capacity, p_term,
                                       p_comp, p_slots, a_term, a_mask, a_slots, counts, base, ctx, may, parser_term)
                    break
                seq = _emit_fallen(came, ended, seq, slots, parent, last, count, n_terms, capacity, may, a_term, a_mask,
                                   a_slots, counts, base, ctx, parser_term, part_bits)
                if seq == _NO_PARSE:
                    dead = True
                    break
                if seq < 0:
                    return entries, seq_out, end_out, _FULL
                came = again
                nxt = trans[again, b]
            if dead:
                n = node_end[n]
                continue
        else:
            p = -1 - state
            t = p_term[p]
            # what each live mode does with byte b; the groups that agree are this node's options
            n_groups = 0
            go_on = False
            for k in range(width):
                s = p_comp[p, k]
                if s < 0:
                    kinds[k] = -2
                elif trans[s, b] >= 0 and (alt[trans[s, b]] >= 0 or part_row[trans[s, b]] >= 0):
                    kinds[k] = _FALLS + trans[s, b]
                elif trans[s, b] >= 0:
                    kinds[k] = -1
                    go_on = True
                elif accept[s] >= 0 and not _banned(s, b, ban_row, ban):
                    kinds[k] = accept[s]
                else:
                    kinds[k] = -2
            n_groups = 1 if go_on else 0
            for k in range(width):
                if _first_of_kind(kinds, k):
                    n_groups += 1
            if n_groups == 0:
                n = node_end[n]
                continue
            option = 0
            if n_groups > 1:
                option, sp = _split(frames, sp, n, _MODES, n_groups)
                if option < 0:
                    return entries, seq_out, end_out, _TOO_DEEP
            # the group of this option: -1 (modes that go on) or the terminal its modes end
            group = np.int64(-1)
            if not (go_on and option == 0):
                seen = 1 if go_on else 0
                for k in range(width):
                    if _first_of_kind(kinds, k):
                        if seen == option:
                            group = kinds[k]
                            break
                        seen += 1
            comps[:] = -1
            if group == -1:
                for k in range(width):
                    if kinds[k] == -1:
                        comps[k] = trans[p_comp[p, k], b]
                nxt, seq = _settle(t, comps, seq, slots, parent, last, count, n_terms, capacity, p_term, p_comp,
                                   p_slots, a_term, a_mask, a_slots, counts, base, ctx, may, parser_term)
            elif group >= _FALLS:  # these modes enter a fallback (or parting) state: resolved here
                nxt = group - _FALLS
                seq = _with_alias(t, _members(kinds, group), seq, slots, parent, last, count, n_terms, capacity, a_term,
                                  a_mask, a_slots, counts, base, ctx, may, parser_term)
            elif ignored[group]:
                boundary = True
                for k in range(width):  # an ignored lexeme keeps each mode
                    if kinds[k] == group:
                        comps[k] = trans[restart[p_comp[p, k]], b]
                nxt, seq = _settle(t, comps, seq, slots, parent, last, count, n_terms, capacity, p_term, p_comp,
                                   p_slots, a_term, a_mask, a_slots, counts, base, ctx, may, parser_term)
            else:
                boundary = True
                if group == ctx[0] and width_before == NO_BREAK_YET:
                    n = node_end[n]
                    continue
                one = -1  # a state of the group: all its states restart alike after a non-ignored terminal
                for k in range(width):
                    if kinds[k] == group:
                        one = p_comp[p, k]
                        break
                seq = _with_alias(t, _members(kinds, group), seq, slots, parent, last, count, n_terms, capacity, a_term,
                                  a_mask, a_slots, counts, base, ctx, may, parser_term)
                if seq == _NO_PARSE:
                    n = node_end[n]
                    continue
                if seq < 0:
                    return entries, seq_out, end_out, _FULL
                ended = _ended(group, width_before, ctx)
                again = restart[one]
                if again >= 0:
                    nxt = trans[again, b]
                    seq = _append(seq, _item(ended, parser_term, ctx), slots, parent, last, count, n_terms, capacity,
                                  may, a_term, a_mask, base, ctx, parser_term)
                    if nxt < 0:
                        n = node_end[n]
                        continue
                else:
                    _open_branch(group, b, comps, trans, branch_ptr, branch_start)
                    nxt, seq = _settle(ended, comps, seq, slots, parent, last, count, n_terms, capacity, p_term,
                                       p_comp, p_slots, a_term, a_mask, a_slots, counts, base, ctx, may, parser_term)
        if seq < 0:  # every mode died, no parser state takes the reading, or a table must grow first
            if nxt == -(1 << 62) or seq == _NO_PARSE:
                n = node_end[n]
                continue
            return entries, seq_out, end_out, _FULL
        parted = nxt >= 0 and part_row[nxt] >= 0
        if parted:  # the mode after the pending match picks the member: one option per member
            members = parts[part_row[nxt], 1:]
            n_members = 0
            for k in range(len(members)):
                if _first_of_kind(members, k):
                    n_members += 1
            option, sp = _split(frames, sp, n, _PARTS, n_members)
            if option < 0:
                return entries, seq_out, end_out, _TOO_DEEP
            for k in range(len(members)):
                if _first_of_kind(members, k):
                    if option == 0:
                        nxt = members[k]
                        break
                    option -= 1
        width_here = next_width(NO_BREAK_YET if boundary else width_before, byte_width[b]) if widths else 0
        if up == 0 and nxt >= 0 and not parted:  # a first-byte subtree: copy it if stored, record it on its second visit
            key = (seq * n_states + nxt) * n_nodes + n
            if widths:
                key = key * 1024 + width_slot(width_here)
            h = (key * 0x9E3779B97F4A7C15) & cache_mask
            while cache_keys[h] >= 0 and cache_keys[h] != key:
                h = (h + 1) & cache_mask
            if cache_keys[h] == key:
                if cache_span[h, 0] >= 0 and n_out + cache_span[h, 1] <= out_capacity:
                    n_out = copy_stored(h, n_out, cache_span, arena_entries, arena_seq, arena_end, entries, seq_out,
                                        end_out)
                    n = node_end[n]
                    continue
                if recording < 0:
                    recording = h
                    record_from = n_out
                    record_end = node_end[n]
            elif 2 * used[1] < len(cache_keys):
                cache_keys[h] = key
                used[1] += 1
        node_state[n] = nxt
        node_seq[n] = seq
        node_width[n] = width_here
        n_tok = node_tok_ptr[n + 1] - node_tok_ptr[n]
        if n_tok:
            if nxt >= 0:
                if n_out + n_tok > out_capacity:
                    return entries, seq_out, end_out, _OUT_FULL
                n_out = report(node_tok_ptr[n], node_tok_ptr[n + 1], seq, nxt, n_out, entries, seq_out, end_out)
                if alt[nxt] >= 0:  # a fallback pending: also the reading where its long lexeme dies right here
                    fell = _fallen(nxt, seq, width_here, accept, restart, alt, parser_term, ctx, slots, parent, last,
                                   count, n_terms, capacity, may, a_term, a_mask, a_slots, counts, base, part_bits)
                    if fell == -1:
                        return entries, seq_out, end_out, _FULL
                    if fell >= 0:
                        if n_out + n_tok > out_capacity:
                            return entries, seq_out, end_out, _OUT_FULL
                        n_out = report(node_tok_ptr[n], node_tok_ptr[n + 1], fell, alt[nxt], n_out, entries, seq_out,
                                       end_out)
            else:  # superposed modes: one report per lexer state they are in
                p = -1 - nxt
                t = p_term[p]
                states = p_comp[p]
                for k in range(width):
                    if not _first_of_kind(states, k):
                        continue
                    s = states[k]
                    tail = _with_alias(t, _members(states, s), seq, slots, parent, last, count, n_terms, capacity,
                                       a_term, a_mask, a_slots, counts, base, ctx, may, parser_term)
                    if tail == _NO_PARSE:
                        continue
                    if tail < 0:
                        return entries, seq_out, end_out, _FULL
                    if n_out + n_tok > out_capacity:
                        return entries, seq_out, end_out, _OUT_FULL
                    n_out = report(node_tok_ptr[n], node_tok_ptr[n + 1], tail, s, n_out, entries, seq_out, end_out)
        n += 1
    if recording >= 0:
        store_subtree(recording, record_from, n_out, entries, seq_out, end_out, cache_span, arena_entries, arena_seq,
                      arena_end, used)
    return entries[:n_out].copy(), seq_out[:n_out].copy(), end_out[:n_out].copy(), _DONE
