"""Lark's contextual lexer as lexer *modes*: which terminals compete for a lexeme depends on the LR state.

Lark's contextual lexer (its default for LALR) lets only the terminals the current LR state accepts, and
the ignored ones, compete for the next lexeme. grammask runs the same rule with one lexer DFA per *mode*
and the lexing rule of :mod:`grammask.automata.lexer` inside each.

**Modes.** Say terminal ``T`` *shadows* ``B`` when some lexeme of ``B`` is a proper prefix of a string of
``T`` (``T`` can make the lexer grow past a ``B`` lexeme) or a lexeme of both that ``T`` wins. In LR state
``s`` the mode keeps every terminal except ``R(s)``: those ``s`` does not accept that shadow one it does
(or an ignored one). Keeping the others changes no verdict: where the mode's DFA emits a terminal ``s``
does not accept, the parser rejects it, and Lark's lexer over the accepted terminals alone finds no
lexeme there either; where it emits an accepted one, both lexers emit the same lexeme. So LR states that
differ only in terminals that shadow nothing share a mode, and a grammar where no state needs to drop a
terminal has one mode that keeps all: it is lexed as with the basic lexer, at no cost.

**One automaton.** The modes' DFAs (the basic DFA with transitions into states where no kept terminal is
alive cut, and each state's winner among the kept terminals) are stacked and minimized together, so the
states where modes agree (inside a string, a number) are shared. ``restart`` gives the mode the next
lexeme starts in: after an ignored lexeme the same mode; after a terminal whose shift targets all lie in
one mode, that mode. Otherwise the next mode depends on the stack, and the lexer *branches*: the
next lexeme may start in any of the modes of its shift targets (``branch_start``/``branch_mode``): the
matcher picks the one of the LR state it reaches, and the vocabulary walk lexes them side by side
(:mod:`grammask.contextual_walk`).

**First match.** Lark's lexer cuts from a terminal the strings an earlier regex preempts
(:mod:`grammask.automata.first_match`), but each of Lark's per-state scanners does so only by the cutters it has
(those the state accepts, and ignored ones). Where some state lacks one, the modes are cut from the DFA of the uncut
terminals with, as extra match columns standing for the cut terminal, one variant of it per set of its cutters some
state has (:func:`~grammask.automata.lexer.variant_rows`); each mode keeps its own set's column. Shadows are taken on
the uncut languages: a variant shadows no more than its uncut terminal, so a terminal a mode keeps shadows nothing its
state accepts.

**Trailing context.** A terminal whose lookahead reaches past its lexeme (``'(?!'')``) is a match only
before some bytes. The basic lexer is built so that those bytes always extend the lexeme
(:func:`~grammask.automata.lexer.check_trailing_context`); a mode that drops the terminal that extends it
(python.lark's ``LONG_STRING`` where only ``STRING`` may stand) cannot be. There the lexeme's state gets a
*ban*: the next bytes (column 256: the end of input) before which it is not a match, so the lexeme is
rejected there, as Lark's regex rejects it (``ban_row``/``ban`` of the lexer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grammask.automata.dfa import coarsest_partition
from grammask.automata.fallback import trailing_pairs
from grammask.automata.lexer import (
    BRANCH,
    NO_TERMINAL,
    LexerAutomaton,
    alive,
    producible,
    variant_rows,
)
from grammask.errors import NO_DEADLINE, Deadline, GrammarError, UnsupportedRegexError


def shadows(lexer: LexerAutomaton) -> np.ndarray:
    """``shadow[T, B]``: terminal ``T`` shadows ``B`` (see the module docstring), from the lexer's match sets.

    Raises :class:`~grammask.errors.GrammarError` for a lexer without them (one loaded from the cache).
    """
    if lexer.matches is None:
        raise GrammarError("the lexer was loaded without its match sets; build it with build_lexer")
    return _shadows(lexer.trans, lexer.matches, lexer.rank)


def _shadows(trans: np.ndarray, matches: np.ndarray, rank: np.ndarray) -> np.ndarray:
    alive_after = alive(trans, matches, strict=True)
    shadow = alive_after.T.astype(np.int64) @ matches.astype(np.int64) > 0
    better = rank[:, None] < rank[None, :]
    both = matches.T.astype(np.int64) @ matches.astype(np.int64) > 0
    shadow |= both & better
    np.fill_diagonal(shadow, False)
    return shadow


@dataclass(frozen=True)
class _Base:
    """The DFA the modes are cut from: ``matches`` has a column per terminal, then one per variant of a terminal cut
    by only some of its first-match cutters; ``terminal[c]`` is column ``c``'s terminal, ``rank`` its winner rank;
    ``choose[s]`` the columns LR state ``s`` may keep (each cut terminal's variant for the cutters it accepts)."""

    trans: np.ndarray
    matches: np.ndarray
    rank: np.ndarray
    terminal: np.ndarray
    choose: np.ndarray

    @property
    def n_states(self) -> int:
        return self.trans.shape[0]


def _base(lexer: LexerAutomaton, accepts: np.ndarray, deadline: Deadline) -> _Base | None:
    """The modes' DFA (see the module docstring, *First match*); None where every LR state cuts each cut terminal
    by all of its cutters, as the basic lexer does."""
    n_terms = len(lexer.terminals)
    columns: dict[tuple[int, frozenset[int]], int] = {}
    chosen = np.ones((len(accepts), n_terms), dtype=bool)
    picks: list[tuple[int, np.ndarray]] = []
    basic = True
    for k, cuts in lexer.cutters:
        everyone = frozenset(j for j, _ in cuts)
        kept = [frozenset(j for j in everyone if accepts[s, j]) for s in range(len(accepts))]
        basic &= all(c == everyone for c in kept)
        col = np.array([k if not c else columns.setdefault((k, c), n_terms + len(columns)) for c in kept])
        chosen[:, k] = col == k
        picks.append((k, col))
    if basic:
        return None
    deadline.check("the contextual lexer's modes")
    variants = sorted(columns, key=columns.__getitem__)
    trans, matches = variant_rows(lexer, variants, deadline)
    choose = np.hstack([chosen, np.zeros((len(accepts), len(variants)), dtype=bool)])
    for _, col in picks:
        extra = np.flatnonzero(col >= n_terms)
        choose[extra, col[extra]] = True
    terminal = np.concatenate([np.arange(n_terms), [k for k, _ in variants]]).astype(np.int64)
    return _Base(trans, matches, lexer.rank[terminal], terminal, choose)


def contextual_lexer(
    lexer: LexerAutomaton, accepts: np.ndarray, on_top: np.ndarray, shift_targets: list[np.ndarray],
    start_state: int, deadline: Deadline | None = None,
) -> tuple[LexerAutomaton, np.ndarray] | None:
    """The contextual lexer built from the basic one, with ``state_modes`` (per lexer state, a bool row: the modes
    whose lexemes pass through it; each LR state's mode is the lexer's ``lr_mode``), or None where it lexes every
    sentence the same way.

    ``accepts[s, t]``: LR state ``s`` accepts lexer terminal ``t`` (ignored ones count as accepted);
    ``on_top[s]``: a lexeme can start with ``s`` on top (the start state, shift targets);
    ``shift_targets[t]``: the LR states a shift of terminal ``t`` leads to; ``start_state``: the LR state a
    sentence starts in (its mode's empty lexeme is state 0). Raises
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed.
    """
    deadline = deadline or NO_DEADLINE
    n_terms = len(lexer.terminals)
    accepts = accepts | lexer.ignored[None, :]
    tops = np.flatnonzero(on_top)
    base = _base(lexer, accepts[tops], deadline) if lexer.cutters else None
    cut = base is not None
    if base is None:
        if lexer.matches is None:
            raise GrammarError("the lexer was loaded without its match sets; build it with build_lexer")
        base = _Base(lexer.trans, lexer.matches, lexer.rank, np.arange(n_terms), np.ones((len(tops), n_terms), bool))
    shadow = _shadows(base.trans, base.matches[:, :n_terms], lexer.rank)
    # removed[s, T]: T is not accepted in s and shadows a terminal that is
    removed = ~accepts & ((accepts.astype(np.int64) @ shadow.T.astype(np.int64)) > 0)
    # A terminal with trailing context is dropped where it is not accepted, shadowing or not: where it is
    # accepted, the lexer's check of what may follow it holds for the modes that keep it.
    looks_past = np.zeros(n_terms, dtype=bool)
    looks_past[[index for index, _ in lexer.trailing]] = True
    removed |= ~accepts & looks_past[None, :]
    mode_keys: dict[bytes, int] = {}
    lr_mode = np.full(len(accepts), -1, dtype=np.int32)
    keeps: list[np.ndarray] = []
    for row, s in enumerate(tops.tolist()):
        keep = base.choose[row] & ~removed[s][base.terminal]
        key = np.packbits(keep).tobytes()
        mode = mode_keys.get(key)
        if mode is None:
            mode = mode_keys[key] = len(keeps)
            keeps.append(keep)
        lr_mode[s] = mode
    if len(keeps) <= 1 and not removed[tops].any() and not cut:
        return None
    deadline.check("the contextual lexer's modes")
    next_modes = [sorted({int(lr_mode[t]) for t in targets.tolist() if lr_mode[t] >= 0}) for targets in shift_targets]
    return _stack_modes(lexer, base, keeps, next_modes, int(lr_mode[start_state]), lr_mode, n_terms, deadline)


def _stack_modes(
    lexer: LexerAutomaton, base: _Base, keeps: list[np.ndarray], next_modes: list[list[int]], first_mode: int,
    lr_mode: np.ndarray, n_terms: int, deadline: Deadline,
) -> tuple[LexerAutomaton, np.ndarray]:
    """One DFA per mode, stacked and minimized together, with restarts and branch aliases."""
    n = base.n_states
    matches = base.matches
    viable = alive(base.trans, matches, strict=False)
    rank = base.rank
    n_modes = len(keeps)
    offsets = np.arange(n_modes, dtype=np.int64) * n
    trans = np.empty((n_modes * n, 256), dtype=np.int32)
    accept = np.empty(n_modes * n, dtype=np.int32)
    lives = np.empty((n_modes, n), dtype=bool)
    for m, keep in enumerate(keeps):
        live = lives[m] = (viable & keep[None, :]).any(axis=1)
        target_ok = np.where(base.trans >= 0, live[np.maximum(base.trans, 0)], False)
        trans[m * n : (m + 1) * n] = np.where(target_ok, base.trans + m * n, -1)
        kept = matches & keep[None, :]
        ranked = np.where(kept, rank[None, :], np.iinfo(np.int64).max)
        accept[m * n : (m + 1) * n] = np.where(kept.any(axis=1), base.terminal[ranked.argmin(axis=1)], NO_TERMINAL)
    mode_of_row = np.repeat(np.arange(n_modes), n)
    starts = offsets.copy()
    restart = np.full(len(accept), -1, dtype=np.int64)
    for q, term in enumerate(accept.tolist()):
        if term < 0:
            continue
        if lexer.ignored[term]:
            restart[q] = starts[mode_of_row[q]]
        elif len(next_modes[term]) == 1:
            restart[q] = starts[next_modes[term][0]]
        else:
            restart[q] = BRANCH
    keep_rows = _modes_reaching(base.trans, np.zeros(n_modes, dtype=np.int64), lives).T.reshape(-1)
    deadline.check("the contextual lexer's modes")
    # Minimize: same winner, same restart block, same successors; mode starts apart from inner states.
    sink = len(accept)
    restart_col = np.where(restart >= 0, restart, sink)
    columns = np.column_stack([trans, restart_col])[keep_rows]
    new_row = np.full(sink + 1, -1, dtype=np.int64)
    new_row[np.flatnonzero(keep_rows)] = np.arange(int(keep_rows.sum()))
    new_row[sink] = -1
    columns = np.where(columns >= 0, new_row[np.where(columns >= 0, columns, sink)], columns)
    is_start = np.zeros(sink, dtype=bool)
    is_start[starts] = True
    bans, ban_of = _bans(lexer, base, trans, accept, starts)
    labels = np.unique(np.column_stack([accept[keep_rows], is_start[keep_rows], restart[keep_rows] == BRANCH,
                                        ban_of[keep_rows]]), axis=0, return_inverse=True)[1].reshape(-1)
    block = coarsest_partition(columns, labels, deadline)
    # Number blocks with the first mode's start as 0.
    first_block = block[new_row[starts[first_mode]]]
    order = np.unique(block)
    order = np.concatenate([[first_block], order[order != first_block]])
    renumber = np.empty(int(block.max()) + 1, dtype=np.int64)
    renumber[order] = np.arange(len(order))
    state = renumber[block]
    n_new = len(order)
    rep = np.empty(n_new, dtype=np.int64)
    rep[state] = np.arange(len(state))
    rows = columns[rep]
    new_trans = np.where(rows[:, :256] >= 0, state[np.maximum(rows[:, :256], 0)], -1).astype(np.int32)
    kept_rows = np.flatnonzero(keep_rows)
    new_accept = accept[kept_rows[rep]].astype(np.int32)
    new_restart = np.where(rows[:, 256] >= 0, state[np.maximum(rows[:, 256], 0)], BRANCH).astype(np.int32)
    new_restart[new_accept < 0] = 0
    start_state = state[new_row[starts]]
    state_modes = _modes_reaching(new_trans, start_state)
    branches = [(t, m) for t in range(n_terms) if len(next_modes[t]) > 1 and not lexer.ignored[t]
                for m in next_modes[t]]
    branch_ptr = np.zeros(n_terms + 1, dtype=np.int32)
    for t, _ in branches:
        branch_ptr[t + 1] += 1
    contextual = LexerAutomaton(
        terminals=lexer.terminals,
        ignored=lexer.ignored,
        trans=new_trans,
        accept=new_accept,
        produce=producible(new_trans, new_accept, n_terms, deadline),
        restart=new_restart,
        branch_ptr=np.cumsum(branch_ptr).astype(np.int32),
        branch_start=np.array([start_state[m] for _, m in branches], dtype=np.int32),
        branch_mode=np.array([m for _, m in branches], dtype=np.int32),
        lr_mode=lr_mode,
        mode_start=start_state.astype(np.int32),
        ban_row=None if bans is None else ban_of[kept_rows[rep]].astype(np.int32),
        ban=bans,
    )
    return contextual, state_modes


def _bans(lexer: LexerAutomaton, base: _Base, trans: np.ndarray, accept: np.ndarray, starts: np.ndarray,
          ) -> tuple[np.ndarray | None, np.ndarray]:
    """The stacked modes' bans (see the module docstring): the distinct ban rows (None if no state needs one) and
    each stacked state's row (-1: none). A lexeme is banned before a byte its terminal's trailing context forbids
    where the byte cannot extend it but starts a lexeme; at the end of input where the context forbids that."""
    n = base.n_states
    ban_of = np.full(len(accept), -1, dtype=np.int64)
    rows: dict[bytes, int] = {}
    starts_any = (trans[starts] >= 0).any(axis=0)
    for index, context in lexer.trailing:
        allowed = _allowed_after(lexer, base, index, context)
        for q in np.flatnonzero(accept == index).tolist():
            banned = ~allowed[q % n]
            banned[:256] &= (trans[q] < 0) & starts_any
            if banned.any():
                ban_of[q] = rows.setdefault(banned.tobytes(), len(rows))
    if not rows:
        return None, ban_of
    return np.frombuffer(b"".join(rows), dtype=bool).reshape(len(rows), 257).copy(), ban_of


def _allowed_after(lexer: LexerAutomaton, base: _Base, index: int, context) -> np.ndarray:
    """Per state of the basic lexer where terminal ``index`` (with trailing context ``context``) matches, what may
    follow the lexeme (257 columns, the last one the end of input). Raises
    :class:`~grammask.errors.UnsupportedRegexError` where two lexemes of one state differ in that."""
    allowed = np.ones((base.n_states, 257), dtype=bool)
    known = np.zeros(base.n_states, dtype=bool)
    for q, t in trailing_pairs(base.trans, context):
        if base.matches[q, index]:
            if known[q] and not np.array_equal(allowed[q], context.allowed[t]):
                raise UnsupportedRegexError(
                    f"terminal {lexer.terminals[index]}: its lookahead past the lexeme allows different next bytes for "
                    f"lexemes the contextual lexer cannot tell apart; grammask cannot lex it with lexer='contextual'"
                )
            allowed[q], known[q] = context.allowed[t], True
    return allowed


def _modes_reaching(trans: np.ndarray, starts: np.ndarray, lives: np.ndarray | None = None) -> np.ndarray:
    """Per state of ``trans``, the modes (a bool row) whose start ``starts[m]`` reaches it, moving only into states
    alive in the mode (``lives[m]``; None: all), as bit sets spread along the edges until nothing changes."""
    n, n_modes = trans.shape[0], len(starts)
    words = (n_modes + 63) // 64
    src, byte = np.nonzero(trans >= 0)
    edges = np.unique(src.astype(np.int64) * n + trans[src, byte])
    src, dst = edges // n, edges % n
    bit = np.left_shift(np.uint64(1), (np.arange(n_modes) % 64).astype(np.uint64))
    reach = np.zeros((n, words), dtype=np.uint64)
    np.bitwise_or.at(reach, (starts, np.arange(n_modes) // 64), bit)
    gate = None
    if lives is not None:
        gate = np.zeros((n, words), dtype=np.uint64)
        for m in range(n_modes):
            gate[lives[m], m // 64] |= bit[m]
    while True:
        carried = reach[src]
        if gate is not None:
            carried &= gate[dst]
        grown = reach.copy()
        np.bitwise_or.at(grown, dst, carried)
        if np.array_equal(grown, reach):
            break
        reach = grown
    return (reach[:, np.arange(n_modes) // 64] & bit[None, :]) != 0
