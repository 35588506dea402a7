"""The lexer automaton of a grammar and the one lexing rule grammask uses everywhere.

**The lexing rule** (GreatGramma Def. 3.1, 1-lookahead maximal munch). The lexer reads bytes
and keeps the current lexeme as a state of one DFA over all terminals:

1. If the next byte extends the lexeme to a prefix of some terminal's language, the lexeme
   grows (even if that later leads nowhere: there is no backtracking; a Lark grammar's lexer backs up as Lark's
   does through states :func:`with_fallbacks` adds, see :mod:`grammask.automata.fallback`).
2. Otherwise the lexeme so far must be a complete terminal: that terminal is emitted and the
   byte starts the next lexeme from the initial state. If the lexeme is not complete, or the
   byte cannot start any terminal, the input is rejected.
3. At end of input the pending lexeme (if any) must be complete and is emitted.

When one lexeme matches several terminals, the winner is the one with the highest priority;
among equals a string literal beats a regex (Lark's keyword rule) unless that regex is ignored (Lark
then drops the lexeme: the literal is never emitted); after that Lark's own order decides (longer
maximal width, longer pattern, then name). Ignored terminals are lexed like
the others and then dropped before the parser. Zero-width terminals are not allowed.

A terminal whose lookahead reaches past its lexeme (``[?](?![a-z])``) is a match only before some
next bytes (:class:`~grammask.automata.regex.TrailingContext`). The rule above emits a lexeme only
before a byte that cannot extend it, so such a terminal is exact as long as, wherever it wins,
every byte it forbids next extends the lexeme (or starts no lexeme) and the end of input is
allowed if it forbids that. :func:`build_lexer` checks this and raises otherwise: emitting by the
next byte would need accepts per (state, byte) throughout the engine.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from grammask.automata.counted import CountTables, add_levels, check_free, free_pattern
from grammask.automata.dfa import ByteDFA, build_dfa, components, successors, union_dfa
from grammask.automata.fallback import (
    CHAIN,
    FallbackLimit,
    Fallbacks,
    Joins,
    add_fallbacks,
    ends_allowed,
)
from grammask.automata.first_match import cut_variant, restrict_preempted
from grammask.automata.patterns import regex_to_dfa, terminal_nfa
from grammask.automata.regex import ByteNFA, TrailingContext
from grammask.errors import NO_DEADLINE, Deadline, GrammarError, UnsupportedRegexError
from grammask.grammar.ir import Grammar, Semicolons, Terminal

try:
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_parse  # type: ignore[no-redef]

NO_TERMINAL = -1
BRANCH = -2
"""``restart[q]`` of a contextual lexer's state whose next lexeme's mode the parser decides (see :mod:`grammask.automata.contextual`)."""


@dataclass(frozen=True)
class LexerAutomaton:
    """One DFA over bytes for all terminals of a grammar, with the lexing rule's winners.

    ``trans[q, b]`` is the next state or -1; ``accept[q]`` the terminal index a lexeme ending in
    ``q`` is emitted as (or -1); ``produce[q]`` the set of terminals some lexeme continuing
    from ``q`` can be emitted as (GreatGramma's Prod(q)), as a bool row over terminals.
    State 0 is the initial state (empty lexeme).

    With semicolon insertion the automaton has two *modes* (two copies of the DFA): ``restart[q]`` is
    the state the next lexeme starts from after a lexeme ending in ``q`` (0, or the armed copy's
    start), ``aliases`` names the terminals that stand for another one (a newline read as the
    semicolon), and ``end_terminal`` is emitted at the end of input when the last lexeme arms.
    Without, ``restart`` is None: every lexeme starts from state 0.

    A contextual lexer (:mod:`grammask.automata.contextual`) has a mode per set of competing terminals,
    ``lr_mode[s]`` being LR state ``s``'s; where ``restart[q]`` is :data:`BRANCH`, the lexeme after one
    ending in ``q`` with terminal ``t`` starts in the mode of the LR state the parser reaches: one of
    ``branch_mode[branch_ptr[t]:branch_ptr[t+1]]``, from the matching ``branch_start``; ``mode_start[m]`` is the
    state where mode ``m``'s lexemes start.

    A contextual lexer's mode may also *ban* a lexeme before some next bytes (its terminal's trailing context
    forbids them and no kept terminal extends it there): ``ban_row[q]`` (-1: none) is the row of ``ban`` (257
    columns, the last one the end of input) listing them; see :meth:`ends_before`.

    With Lark's fallbacks (:mod:`grammask.automata.fallback`), a state may restart in the middle of a lexeme:
    where ``restart[q]`` has no transition on the byte either, it emits its own terminal and restarts in turn,
    until a state takes the byte (a state with an empty lexeme never emits: the byte is rejected there).
    ``alt[q]`` is a fallback state's *reading state* (its ``produce`` row is the follow set of the reading where
    the long lexeme dies right there), :data:`CHAIN` for a chain state, -1 otherwise; None without fallbacks.
    Under a contextual lexer, where the modes after the earlier match lex the text after it differently, the
    transition out of the match leads to a *parting* state: ``part_row[q]`` (-1 elsewhere) is its row of ``parts``
    (the match's terminal, then per branch option of it the state to go on in), which the reader replaces at once by
    the one of the mode the parser reaches after the terminal (:meth:`member`); ``part_bits[q]`` is the set of branch
    options a fallback state serves (0: all), for which its terminal is emitted. None without parting states.
    ``late[q]`` (-1 elsewhere; None without) is, for a *late* state, the terminal of an earlier match only the end of
    input could fall back to (:class:`~grammask.automata.fallback.Fallbacks`): the state lexes as the plain one
    it copies, and a reader keeps that reading beside it.

    With counted terminals (:mod:`grammask.automata.counted`), ``counter`` holds how the lexeme's count is kept:
    the states of the counted region have a copy per level of the count, and :meth:`step` takes the count.

    ``matches`` (each state's set of terminals whose language holds the lexeme, as a bool row), ``rank``
    (each terminal's place in the winner order) and ``trailing`` (terminals with trailing context) serve
    building a contextual lexer; a lexer loaded from the cache has them as None. So do ``cutters`` (per terminal that
    Lark's first match cuts, its cutting terminals, see :func:`~grammask.automata.first_match.restrict_preempted`)
    and ``uncut`` (then every terminal's automaton before the cuts; see :func:`variant_rows`).
    """

    terminals: tuple[str, ...]
    ignored: np.ndarray
    trans: np.ndarray
    accept: np.ndarray
    produce: np.ndarray
    restart: np.ndarray | None = None
    aliases: tuple[tuple[str, str], ...] = ()
    end_terminal: int = NO_TERMINAL
    branch_ptr: np.ndarray | None = None
    branch_start: np.ndarray | None = None
    branch_mode: np.ndarray | None = None
    lr_mode: np.ndarray | None = None
    mode_start: np.ndarray | None = None
    ban_row: np.ndarray | None = None
    ban: np.ndarray | None = None
    alt: np.ndarray | None = None
    part_row: np.ndarray | None = None
    parts: np.ndarray | None = None
    part_bits: np.ndarray | None = None
    late: np.ndarray | None = None
    counter: CountTables | None = field(default=None, compare=False, repr=False)
    matches: np.ndarray | None = field(default=None, compare=False, repr=False)
    rank: np.ndarray | None = field(default=None, compare=False, repr=False)
    trailing: tuple[tuple[int, TrailingContext], ...] = field(default=(), compare=False, repr=False)
    cutters: tuple[tuple[int, tuple[tuple[int, bool], ...]], ...] = field(default=(), compare=False, repr=False)
    uncut: tuple[ByteNFA, ...] = field(default=(), compare=False, repr=False)

    @property
    def n_states(self) -> int:
        return self.trans.shape[0]

    @property
    def contextual(self) -> bool:
        """True for a contextual lexer (modes chosen by the parser's state)."""
        return self.branch_ptr is not None

    @cached_property
    def restarts(self) -> np.ndarray:
        """Per state, the state the next lexeme starts from (all 0 without modes)."""
        return self.restart if self.restart is not None else np.zeros(self.n_states, dtype=np.int32)

    @cached_property
    def branch_options(self) -> list[dict[int, int]]:
        """Per terminal, the modes the next lexeme may start in after it, each with its start state ({} without)."""
        if self.branch_ptr is None:
            return [{} for _ in self.terminals]
        ptr, mode, start = self.branch_ptr.tolist(), self.branch_mode.tolist(), self.branch_start.tolist()
        return [dict(zip(mode[ptr[t]: ptr[t + 1]], start[ptr[t]: ptr[t + 1]])) for t in range(len(ptr) - 1)]

    @cached_property
    def _option_of(self) -> list[dict[int, int]]:
        """Per terminal, each mode after it as its branch option's index."""
        ptr, mode = self.branch_ptr.tolist(), self.branch_mode.tolist()
        return [{m: k for k, m in enumerate(mode[ptr[t]: ptr[t + 1]])} for t in range(len(ptr) - 1)]

    @cached_property
    def parting(self) -> list[int] | None:
        """Per state, the terminal whose next mode picks the way on from a parting state (-1 elsewhere); None
        without parting states."""
        if self.part_row is None:
            return None
        return np.where(self.part_row >= 0, self.parts[np.maximum(self.part_row, 0), 0], -1).tolist()

    def member(self, state: int, mode: int) -> int:
        """The state parting state ``state`` goes on in where the parser reaches ``mode`` after its terminal (its
        first member where the parser rejects the terminal, ``mode`` -1: the match can never be emitted then)."""
        row = self.parts[self.part_row[state]]
        k = self._option_of[int(row[0])].get(mode, 0)
        return int(row[1 + k])

    def restart_after(self, state: int, lr_state: int) -> int:
        """The state the next lexeme starts from after a lexeme ending in ``state`` when the parser has reached LR
        state ``lr_state`` after it (-1 where the terminal's branches have no mode of that state)."""
        again = int(self.restarts[state])
        if again != BRANCH:
            return again
        return self.branch_options[int(self.accept[state])].get(int(self.lr_mode[lr_state]), -1)

    def next_starts(self, state: int) -> list[int]:
        """The states the next lexeme may start from after a lexeme ending in ``state`` (several at a branch)."""
        again = int(self.restarts[state])
        if again != BRANCH:
            return [again]
        return list(self.branch_options[int(self.accept[state])].values())

    @cached_property
    def _lists(self) -> tuple[list[list[int]], list[int], list[int]]:
        return self.trans.tolist(), self.accept.tolist(), self.restarts.tolist()

    @cached_property
    def bans(self) -> list[frozenset[int]] | None:
        """Per state, the next bytes (256: the end of input) before which its lexeme may not end (see ``ban``); None
        for a lexer without bans."""
        if self.ban is None:
            return None
        rows = [frozenset(np.flatnonzero(row).tolist()) for row in self.ban]
        return [rows[r] if r >= 0 else frozenset() for r in self.ban_row.tolist()]

    def ends_before(self, state: int, byte: int) -> int:
        """The terminal a lexeme ending in ``state`` is emitted as before ``byte`` (256: at the end of input), or
        -1 where it is incomplete or banned there."""
        term = self._lists[1][state]
        bans = self.bans
        return -1 if term < 0 or (bans is not None and byte in bans[state]) else term

    def step(self, state: int, data: bytes) -> tuple[list[int], int] | None:
        """Lex ``data`` from ``state``: the terminals it completes (ignored ones included) and the state left.

        Returns None if the bytes are rejected under the lexing rule. A contextual lexer's branches need the
        parser: this raises :class:`~grammask.errors.GrammarError` on reaching one (the matcher lexes those).
        With counted terminals the lexeme pending in ``state`` is taken to have the count of one that has not begun
        (exact from state 0: :meth:`step_counted` takes the count).
        """
        stepped = self.step_counted(state, self.start_count, data)
        return None if stepped is None else stepped[:2]

    def step_counted(self, state: int, count: int, data: bytes) -> tuple[list[int], int, int] | None:
        """:meth:`step` with the count of the lexeme pending in ``state`` (see :mod:`grammask.automata.counted`):
        (terminals completed, state left, count of the lexeme pending there); None if rejected.

        Raises :class:`~grammask.errors.GrammarError` at a contextual lexer's branch, as :meth:`step` does.
        """
        trans, accept, restart = self._lists
        bans = self.bans
        counter = self._counter_lists
        emitted: list[int] = []
        for b in data:
            nxt = trans[state][b]
            while nxt < 0:
                term = accept[state]
                if term < 0 or (bans is not None and b in bans[state]):
                    return None
                if restart[state] == BRANCH:
                    raise GrammarError("internal error: a contextual lexer's branch lexed without the parser")
                state = restart[state]
                count = 0 if counter is None else counter[3]
                nxt = trans[state][b]
                emitted.append(term)
            if counter is not None:
                inc, up_at, lift, _ = counter
                count += inc[state][b]
                while count >= up_at[nxt]:
                    nxt = lift[nxt]
            state = nxt
        return emitted, state, count

    def fallen(self, state: int) -> list[int]:
        """The terminals fallback ``state`` emits where its long lexeme dies right now (its earlier match, then what
        its chain completed); the lexeme left pending is in ``restart`` of the last of them."""
        emitted = [int(self.accept[state])]
        state = int(self.restart[state])
        while self.alt[state] == CHAIN:
            emitted.append(int(self.accept[state]))
            state = int(self.restart[state])
        return emitted

    @cached_property
    def _counter_lists(self) -> tuple[list[list[int]], list[int], list[int], int] | None:
        c = self.counter
        return None if c is None else (c.inc.tolist(), c.up_at.tolist(), c.lift.tolist(), int(c.fixed[0]))

    @property
    def start_count(self) -> int:
        """The count of a lexeme that has not begun (0 without counted terminals)."""
        return 0 if self.counter is None else int(self.counter.fixed[0])

    def finish(self, state: int) -> list[int] | None:
        """The terminals emitted at end of input from ``state`` ([] from the initial state), None if incomplete."""
        if state == 0:
            return []
        term = self.ends_before(state, 256)
        if term < 0:
            return None
        if self.end_terminal >= 0 and self.restarts[state] != 0:
            return [term, self.end_terminal]
        if self.alt is not None and self.alt[state] != -1:  # a fallback or chain: the text after the match lexes on
            rest = self.finish(int(self.restarts[state]))
            return None if rest is None else [term, *rest]
        return [term]


def build_lexer(grammar: Grammar, deadline: Deadline | None = None) -> LexerAutomaton:
    """The lexer automaton of ``grammar``'s terminals (ignored terminals included).

    Raises :class:`~grammask.errors.UnsupportedRegexError` for a terminal regex without a finite-automaton
    meaning, :class:`~grammask.errors.GrammarError` for a terminal that matches the empty string, and
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed.
    """
    terminals = grammar.terminals
    deadline = deadline or NO_DEADLINE
    nfas = []
    for t in terminals:
        deadline.check("the terminals' automata")
        nfas.append(terminal_nfa(t.pattern, t.flags, t.literal, t.name, deadline))
    dfa = union_dfa(nfas, deadline)
    cutters: dict[int, tuple[tuple[int, bool], ...]] = {}
    if grammar.first_match:
        dfa_matches = _match_rows(dfa, len(terminals))
        restricted, cutters = restrict_preempted(terminals, nfas, dfa_matches,
                                                 alive(dfa.trans, dfa_matches, strict=True))
        if cutters:
            dfa = build_dfa(restricted, deadline)
    if dfa.accepts[dfa.start]:
        names = ", ".join(terminals[i].name for i in sorted(dfa.accepts[dfa.start]))
        raise GrammarError(f"terminal(s) {names} match the empty string; the lexer needs every terminal to consume input")
    keys = [_tie_key(t, nfa, deadline) for t, nfa in zip(terminals, nfas, strict=True)]
    order = _swallowed_after(sorted(range(len(terminals)), key=keys.__getitem__), grammar)
    deadline.check("the terminals' order")
    rank = np.empty(len(terminals), dtype=np.int64)
    rank[order] = np.arange(len(terminals))
    accept = np.array(
        [min(tags, key=rank.__getitem__) if tags else NO_TERMINAL for tags in dfa.accepts], dtype=np.int32
    )
    trans, matches = _dfa_rows(dfa, len(terminals))
    if len(trans) > len(accept):
        accept = np.append(accept, accept[0])
    trailing = tuple((index, nfa.trailing) for index, nfa in enumerate(nfas) if nfa.trailing is not None)
    for index, context in trailing:
        check_trailing_context(trans, accept, index, context, nfas[index].name)
    counter = None
    reach = trans
    if any(t.count is not None for t in terminals):
        made = _with_counts(grammar, trans, matches, rank, bool(trailing), deadline)
        trans, accept, matches, counter = made.trans, made.accept, made.matches, made.tables
        deadline.check("the lexer's tables")
        reach = np.hstack([trans, counter.crossings(trans)])  # a pending lexeme may move up a level
    deadline.check("the lexer's tables")
    produce = producible(reach, accept, len(terminals), deadline)
    deadline.check("the lexer's tables")
    lexer = LexerAutomaton(
        terminals=tuple(t.name for t in terminals),
        ignored=np.array([t.name in grammar.ignore for t in terminals], dtype=bool),
        trans=trans,
        accept=accept,
        produce=produce,
        counter=counter,
        matches=matches,
        rank=rank,
        trailing=trailing,
        cutters=tuple(sorted(cutters.items())),
        uncut=tuple(nfas) if cutters else (),
    )
    return lexer if grammar.semicolons is None else _with_semicolons(lexer, grammar.semicolons)


def variant_rows(lexer: LexerAutomaton, variants: list[tuple[int, frozenset[int]]], deadline: Deadline | None = None,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The DFA (``trans``, ``matches``) of ``lexer``'s terminals with their languages not cut by Lark's first match
    (:mod:`grammask.automata.first_match`), one column each, and after them a column per ``(terminal, cutters)`` of
    ``variants``: that terminal cut by those of its ``cutters`` only.

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed.
    """
    cut_by = dict(lexer.cutters)
    extra = [cut_variant(lexer.uncut, k, [c for c in cut_by[k] if c[0] in kept]) for k, kept in variants]
    return _dfa_rows(build_dfa([*lexer.uncut, *extra], deadline), len(lexer.uncut) + len(extra))


def _dfa_rows(dfa: ByteDFA, n_columns: int) -> tuple[np.ndarray, np.ndarray]:
    """A lexer's ``trans`` (state 0 detached, :func:`_detach_start`) and ``matches`` from its DFA."""
    matches = _match_rows(dfa, n_columns)
    trans = _detach_start(np.ascontiguousarray(dfa.trans, dtype=np.int32))
    if len(trans) > len(matches):
        matches = np.vstack([matches, matches[:1]])
    return trans, matches


def with_fallbacks(lexer: LexerAutomaton, joins: Joins | None = None, late: bool = False,
                   ) -> tuple[LexerAutomaton, Fallbacks | None, str | None]:
    """``lexer`` with Lark's fallbacks (:mod:`grammask.automata.fallback`; ``joins`` and ``late`` as in
    :func:`~grammask.automata.fallback.add_fallbacks`): the lexer (itself where no text can take a fallback), the
    fallbacks found (None where there are none) and why they were not added where they would be needed (None).

    For a lexer without counted terminals or semicolon insertion: the basic lexer, or a contextual one (its modes'
    bans are the places a lexeme may not end, and each mode backs up as Lark's scanner of that state does)."""
    if lexer.ban is None:
        allowed = ends_allowed(lexer.trans, lexer.accept, lexer.trailing)
    else:
        allowed = np.vstack([~lexer.ban, np.ones((1, 257), dtype=bool)])[lexer.ban_row]
    branches = [list(options.values()) for options in lexer.branch_options]
    try:
        looks_past = frozenset() if lexer.ban is None else frozenset(lexer.accept[lexer.ban_row >= 0].tolist())
        made = add_fallbacks(lexer.trans, lexer.accept, lexer.restarts, allowed, lexer.produce, branches, looks_past,
                             joins, late)
    except FallbackLimit as e:
        return lexer, None, str(e)
    if made is None or not made.added:
        return lexer, made, None
    real = made.origin >= 0
    produce = np.zeros((len(made.origin), len(lexer.terminals)), dtype=bool)
    produce[real] = lexer.produce[made.origin[real]]
    produce[made.alt[made.alt >= 0]] = made.first_after
    extra = len(made.origin) - lexer.n_states
    ban_row = None if lexer.ban_row is None else np.concatenate([lexer.ban_row, np.full(extra, -1, dtype=np.int32)])
    return dataclasses.replace(
        lexer, trans=made.trans, accept=made.accept, produce=produce, restart=made.restart, alt=made.alt,
        ban_row=ban_row, part_row=made.part_row, parts=made.parts, part_bits=made.bits, late=made.late, matches=None,
        rank=None
    ), made, None


def _match_rows(dfa: ByteDFA, n_terminals: int) -> np.ndarray:
    """Per DFA state, the terminals whose language holds the lexeme read to reach it (a bool row)."""
    matches = np.zeros((dfa.n_states, n_terminals), dtype=bool)
    for q, tags in enumerate(dfa.accepts):
        matches[q, list(tags)] = True
    return matches


def _with_counts(grammar: Grammar, trans: np.ndarray, matches: np.ndarray, rank: np.ndarray, trailing: bool,
                 deadline: Deadline):
    """The lexer's DFA with the counted region copied per level (:func:`~grammask.automata.counted.add_levels`);
    GrammarError where counting is not exact (a postlex, trailing context, a counted language not free)."""
    terminals = grammar.terminals
    if grammar.semicolons is not None or grammar.indentation is not None or trailing:
        raise GrammarError(
            f"grammar {grammar.name!r}: counted terminals (a length bound kept beside the lexer state) do not go with "
            f"a postlex or a lookahead past the lexeme yet"
        )
    for t in terminals:
        if t.count is not None and not free_pattern(t.pattern, t.flags, t.count.unit):
            deadline.check("the counted terminals' levels")
            own = regex_to_dfa(t.pattern, t.flags, t.name)
            check_free(own.trans, np.array([bool(tags) for tags in own.accepts], dtype=bool), t.count.unit, t.name)
    return add_levels(trans, matches, rank, [t.count for t in terminals], reach_union(trans, matches, deadline),
                      deadline)


def _with_semicolons(lexer: LexerAutomaton, rules: Semicolons) -> LexerAutomaton:
    """The lexer in two modes: *armed* after a trigger terminal (ignored ones keep the mode), where a
    newline terminal is emitted as an alias of the semicolon; unarmed, where newlines are ignored."""
    n, names = lexer.n_states, lexer.terminals
    newlines = [names.index(x) for x in rules.newlines]
    aliases = tuple((f"{names[t]}:{rules.semicolon}", rules.semicolon) for t in newlines)
    alias_of = {t: len(names) + i for i, t in enumerate(newlines)}
    trans = np.vstack([lexer.trans, np.where(lexer.trans >= 0, lexer.trans + n, -1)]).astype(np.int32)
    armed_accept = np.array([alias_of.get(int(t), int(t)) for t in lexer.accept], dtype=np.int32)
    accept = np.concatenate([lexer.accept, armed_accept])
    pad = np.zeros((n, len(newlines)), dtype=bool)
    armed_produce = np.hstack([lexer.produce, lexer.produce[:, newlines]])
    armed_produce[:, newlines] = False
    produce = np.vstack([np.hstack([lexer.produce, pad]), armed_produce])
    ignored = np.concatenate([lexer.ignored, np.zeros(len(newlines), dtype=bool)])
    ignored[newlines] = True
    triggers = {names.index(x) for x in rules.triggers}
    restart = np.zeros(2 * n, dtype=np.int32)
    for q in range(2 * n):
        term = int(accept[q])
        if term < 0 or term >= len(names):
            continue
        if ignored[term]:
            restart[q] = n if q >= n else 0
        elif term in triggers:
            restart[q] = n
    return LexerAutomaton(
        terminals=names + tuple(a for a, _ in aliases), ignored=ignored, trans=trans, accept=accept,
        produce=produce, restart=restart, aliases=aliases,
        end_terminal=len(names) if rules.at_end and newlines else NO_TERMINAL,
    )


def _detach_start(trans: np.ndarray) -> np.ndarray:
    """Make state 0 mean "empty lexeme" only: a minimal DFA may loop back into its start state
    (e.g. for ``(a|b)*abb``); such transitions go to a copy of it instead."""
    if not (trans == 0).any():
        return trans
    copy = len(trans)
    trans = np.where(trans == 0, copy, trans)
    return np.vstack([trans, trans[0]])


def check_trailing_context(trans: np.ndarray, accept: np.ndarray, terminal: int, context: TrailingContext, name: str,
                           ) -> None:
    """Raise :class:`UnsupportedRegexError` if the lexer could emit ``terminal`` before a byte (or at
    the end of input) its trailing context forbids.

    Walks the lexer DFA and the terminal's own DFA side by side from the empty lexeme.
    """
    starts_lexeme = trans[0] >= 0
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {(0, 0): None}
    todo = list(parent)
    while todo:
        q, t = pair = todo.pop()
        if accept[q] == terminal:
            emits_before = (trans[q] < 0) & starts_lexeme & ~context.allowed[t, :256]
            at_end = not context.allowed[t, 256]
            if emits_before.any() or at_end:
                lexeme = bytearray()
                step = parent[pair]
                while step is not None:
                    lexeme.append(step[1])
                    step = parent[step[0]]
                after = f"before byte {bytes([int(np.argmax(emits_before))])!r}" if emits_before.any() else "at the end of input"
                raise UnsupportedRegexError(
                    f"terminal {name}: its lookahead forbids what may follow the lexeme {bytes(lexeme[::-1])!r}, "
                    f"but the lexer would emit it {after}; grammask's lexer cannot make a lexeme's end depend "
                    f"on the next byte (the lookahead is exact only where the grammar's other terminals "
                    f"extend the lexeme on the bytes it forbids)"
                )
        for byte in np.flatnonzero((trans[q] >= 0) & (context.trans[t] >= 0)).tolist():
            nxt = (int(trans[q, byte]), int(context.trans[t, byte]))
            if nxt not in parent:
                parent[nxt] = (pair, byte)
                todo.append(nxt)


def _swallowed_after(order: list[int], grammar: Grammar) -> list[int]:
    """The winner order with each literal an ignored regex terminal of its priority matches whole moved just
    after that terminal: Lark lexes such a literal as the ignored terminal (its keyword rule retypes the
    lexeme, but the ignored type is dropped first), so it is never emitted."""
    terminals = grammar.terminals
    ignored = [j for j in order if terminals[j].literal is None and terminals[j].name in grammar.ignore]
    if not ignored:
        return order
    for i in [i for i in order if terminals[i].literal is not None]:
        lit = terminals[i]
        for j in ignored:  # moving literals leaves these in the order they have in ``order``
            other = terminals[j]
            if other.priority == lit.priority:
                try:
                    m = re.match(other.pattern, lit.literal)
                except re.error:
                    continue
                if m is not None and m.group(0) == lit.literal:
                    order.remove(i)
                    order.insert(order.index(j) + 1, i)
                    break
    return order


_PARSED_WIDTH = 4096
"""Patterns up to this long are measured as Lark measures them (``sre_parse``); longer ones on their automaton, which
gives the same width for the patterns grammask accepts without parsing their source again (seconds for a
megabyte-long alternation a JSON schema's ``enum`` makes)."""


def _tie_key(t: Terminal, nfa: ByteNFA, deadline: Deadline) -> tuple:
    """Lark's order of terminals: priority, literals first, then the widest, the longest pattern, the name."""
    plain = t.literal is not None and t.pattern == re.escape(t.literal)  # its width is its length: no parse
    if plain:
        width = len(t.literal)
    elif len(t.pattern) <= _PARSED_WIDTH:
        width = _max_width(t.pattern)
    else:
        width = _nfa_width(nfa, deadline)
    return (-t.priority, t.literal is None, -width, -len(t.pattern), t.name)


def _nfa_width(nfa: ByteNFA, deadline: Deadline) -> int:
    """The most characters a string of ``nfa``'s language has (``sre_parse.MAXREPEAT`` if unbounded), counting the
    bytes that begin a UTF-8 character."""
    arcs = [[(target, int(lo < 0x80 or hi >= 0xC0)) for lo, hi, target in edges] + [(target, 0) for target in eps]
            for edges, eps in zip(nfa.edges, nfa.eps, strict=True)]
    back: list[list[int]] = [[] for _ in arcs]
    for q, out in enumerate(arcs):
        for target, _ in out:
            back[target].append(q)
    live, todo = {nfa.final}, [nfa.final]  # the states the final state is reachable from
    while todo:
        for q in back[todo.pop()]:
            if q not in live:
                live.add(q)
                todo.append(q)
    if nfa.start not in live:
        return 0
    longest: dict[int, int] = {}  # per live state done: the widest string from it to the final state
    on_path: set[int] = set()
    stack = [(nfa.start, 0)]
    while stack:
        q, k = stack.pop()
        if k == 0:
            if len(longest) % 4096 == 0:
                deadline.check("the terminals' order")
            on_path.add(q)
        out = arcs[q]
        while k < len(out) and out[k][0] not in live:
            k += 1
        if k < len(out):
            stack.append((q, k + 1))
            target = out[k][0]
            if target in on_path:  # a cycle on the way to the final state
                return int(sre_parse.MAXREPEAT)
            if target not in longest:
                stack.append((target, 0))
            continue
        on_path.discard(q)
        longest[q] = max((longest[t] + w for t, w in out if t in live), default=0)
    return longest[nfa.start]


@lru_cache(maxsize=4096)
def _max_width(pattern: str) -> int:
    try:
        return int(min(sre_parse.parse(pattern).getwidth()[1], sre_parse.MAXREPEAT))
    except (re.error, OverflowError, RecursionError):
        return 0


def producible(trans: np.ndarray, accept: np.ndarray, n_terminals: int, deadline: Deadline) -> np.ndarray:
    """Prod(q) for every state: winners of accepting states reachable from q (q included)."""
    produce = np.zeros((trans.shape[0], n_terminals), dtype=bool)
    has = accept >= 0
    produce[np.nonzero(has)[0], accept[has]] = True
    return reach_union(trans, produce, deadline)


def reach_union(trans: np.ndarray, rows: np.ndarray, deadline: Deadline = NO_DEADLINE) -> np.ndarray:
    """Per state, the union (OR) of ``rows`` over the states reachable from it, itself included.

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
    """
    if rows.size == 0:
        return rows.copy()
    bits = _pack(rows, deadline)
    succ = successors(trans, deadline)
    return _unpack(_reach_bits(trans, succ, bits, deadline), rows.shape[1], deadline)


def alive(trans: np.ndarray, matches: np.ndarray, strict: bool) -> np.ndarray:
    """Per state and terminal: some continuation (non-empty if ``strict``) is a lexeme of that terminal."""
    if matches.size == 0:
        return matches.copy()
    succ = successors(trans)
    reach = _reach_bits(trans, succ, _pack(matches), NO_DEADLINE)
    if strict:
        after = []
        for nexts in succ:
            union = 0
            for r in nexts:
                union |= reach[r]
            after.append(union)
        reach = after
    return _unpack(reach, matches.shape[1])


def _pack(rows: np.ndarray, deadline: Deadline = NO_DEADLINE) -> list[int]:
    """Each bool row as a Python integer bit set (bit ``t`` for column ``t``); ``deadline`` checked every 4,096
    rows."""
    out: list[int] = []
    for lo in range(0, len(rows), 4096):
        deadline.check("the lexer's tables")
        packed = np.packbits(rows[lo : lo + 4096], axis=1, bitorder="little")
        out.extend(int.from_bytes(r.tobytes(), "little") for r in packed)
    return out


def _unpack(bits: list[int], width: int, deadline: Deadline = NO_DEADLINE) -> np.ndarray:
    """The bit sets as a bool matrix, ``width`` columns; ``deadline`` checked every 4,096 rows (states x terminals
    can pass 10^8 cells)."""
    nbytes = (width + 7) // 8
    out = np.empty((len(bits), width), dtype=bool)
    for lo in range(0, len(bits), 4096):
        deadline.check("the lexer's tables")
        part = bits[lo : lo + 4096]
        data = np.frombuffer(b"".join(v.to_bytes(nbytes, "little") for v in part), dtype=np.uint8)
        out[lo : lo + len(part)] = np.unpackbits(data.reshape(len(part), nbytes), axis=1, count=width,
                                                 bitorder="little")
    return out


def _reach_bits(trans: np.ndarray, succ: list[list[int]], bits: list[int], deadline: Deadline) -> list[int]:
    """Per state, the OR of ``bits`` over the states reachable from it (``succ``: :func:`successors` of ``trans``):
    one pass over the strongly connected components, each after those its edges lead to."""
    comp = components(trans, deadline).tolist()
    members: list[list[int]] = [[] for _ in range(max(comp, default=-1) + 1)]
    for q, c in enumerate(comp):
        members[c].append(q)
    reach = [0] * len(members)
    for c, states in enumerate(members):
        if c % 4096 == 0:
            deadline.check("the lexer's tables")
        union = 0
        for q in states:
            union |= bits[q]
            for r in succ[q]:
                union |= reach[comp[r]]
        reach[c] = union
    return [reach[c] for c in comp]
