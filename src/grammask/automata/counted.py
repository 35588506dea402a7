"""Counted terminals: a length bound kept beside the lexer state instead of unrolled into it.

A terminal with a :class:`~grammask.grammar.ir.Count` has as lexemes the strings of its pattern (its
*relaxed* language) whose length, in the count's unit, lies within the bound. Unrolled, a bound of
10,000 characters would take 10,000 copies of the pattern's states, each walked over the whole
vocabulary at compile time. Instead the lexer keeps one DFA of the relaxed languages, and:

* every transition says whether it adds a counted unit: a code point's first byte, or the first
  byte of a JSON string character (a raw character, or the backslash of an escape; the second half
  of a surrogate pair adds nothing), read off a small side automaton of the unit. The count kept is
  the lexeme's units *plus the fewest units it needs to end* (``x[ab]*y`` counts its ``y`` from the
  start), so that ``inc``, the transitions that add to it, mark where the lexeme can grow;
* the counts are cut into *levels* at every bound of every counted terminal (level ``k`` holds the
  counts ``bounds[k]..bounds[k+1]-1``), and each state of the *counted region* (a lexeme some
  counted terminal can still complete) has one copy per level. A copy's transitions stay within its
  level; its winning terminal is the lexing rule's among the terminals whose relaxed language holds
  the lexeme and whose bound holds the level's counts; its Prod also holds what the copies of later
  levels produce (a pending lexeme only grows);
* the lexeme's count is kept by whoever lexes (the matcher, beside its lexer state), and at the
  count ``up_at[q]`` the lexer moves to the next level's copy, ``lift[q]``.

So the walks, classes and masks of a copy are exact for every count of its level from which no token
can reach the next level; :mod:`grammask.counting` finishes the counts nearer a level's end. This is
exact where the relaxed language of every counted terminal is *free*: wherever a lexeme can grow it
can grow by any number of units and still end at every count (``[a-z]+``, ``x[ab]*y``, any JSON
string; not ``a(bc)*``, whose lengths skip), which :func:`check_free` tests; the front ends count only
such terminals and unroll (or refuse) the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from grammask.automata.dfa import components
from grammask.automata.patterns import regex_to_dfa
from grammask.errors import NO_DEADLINE, Deadline, GrammarError

if TYPE_CHECKING:
    from grammask.grammar.ir import Count

NEVER = np.int64(1) << 62
"""``up_at`` of a state that never moves up a level."""


@dataclass(frozen=True, eq=False)
class CountTables:
    """How a lexer with counted terminals keeps the count (see the module docstring).

    ``inc[q, b]`` is 1 where the transition from ``q`` on byte ``b`` adds to the count (from state 0: the
    first byte of a lexeme); ``fixed[q]`` the count every lexeme in ``q`` has, where they all have one (-1
    elsewhere; ``fixed[0]``: the count of a lexeme that has not begun). ``level[q]`` is the level of
    a state of the counted region (-1 elsewhere, and for state 0); ``bounds[k]`` the first count of level ``k``;
    ``up_at[q]`` the count at which a lexeme in ``q`` moves up a level, to ``lift[q]`` (:data:`NEVER`, -1
    outside the region and in the last level).
    """

    inc: np.ndarray
    fixed: np.ndarray
    level: np.ndarray
    bounds: np.ndarray
    up_at: np.ndarray
    lift: np.ndarray

    FIELDS = ("inc", "fixed", "level", "bounds", "up_at", "lift")

    def crossings(self, trans: np.ndarray) -> np.ndarray:
        """Per state and byte, the next level's copy of the transition's target where the transition adds a unit
        (-1 elsewhere): where a pending lexeme's count may cross into the next level (for Prod)."""
        targets = np.maximum(trans, 0)
        return np.where((trans >= 0) & (self.inc > 0), self.lift[targets], -1).astype(np.int32)

    def copies(self, state: int) -> list[int]:
        """``state`` and its copies in the levels above it."""
        out = [state]
        while self.lift[out[-1]] >= 0:
            out.append(int(self.lift[out[-1]]))
        return out


# --- units ---------------------------------------------------------------------------------------


def _codepoint_unit() -> tuple[np.ndarray, np.ndarray]:
    trans = np.zeros((1, 256), dtype=np.int32)
    inc = np.ones((1, 256), dtype=np.uint8)
    inc[0, 0x80:0xC0] = 0  # UTF-8 continuation bytes
    return trans, inc


def _json_unit() -> tuple[np.ndarray, np.ndarray]:
    """The side automaton of a JSON string literal's characters: (next state, adds a unit) per state and byte.

    A raw character counts at its first byte, an escape at its backslash; the escape after a high
    surrogate's (``\\uD83D\\uDE00``) is the pair's second half and adds nothing. The bytes are not
    checked: the lexer's own automaton does that.
    """
    out, body, esc, closed, high, low_esc = 0, 1, 2, 3, 4, 5
    hex1, hex2_d, hex2, hex3_high, hex3, hex4_high, hex4 = 6, 7, 8, 9, 10, 11, 12
    low = (13, 14)  # the second half's first two digits; its last two are read as any escape's
    trans = np.zeros((15, 256), dtype=np.int32)
    inc = np.zeros((15, 256), dtype=np.uint8)
    trans[out, :] = out
    trans[out, ord('"')] = body
    for s in (body, high):
        trans[s, :] = body
        inc[s, :] = 1
        inc[s, 0x80:0xC0] = 0
        trans[s, ord('"')] = closed
        inc[s, ord('"')] = 0
    trans[body, ord("\\")] = esc
    trans[high, ord("\\")] = low_esc
    inc[high, ord("\\")] = 0
    trans[esc, :] = body
    trans[esc, ord("u")] = hex1
    trans[low_esc, :] = body
    trans[low_esc, ord("u")] = low[0]
    trans[hex1, :] = hex2
    trans[hex1, [ord("d"), ord("D")]] = hex2_d
    trans[hex2_d, :] = hex3
    trans[hex2_d, [ord(c) for c in "89abAB"]] = hex3_high
    trans[hex2, :] = hex3
    trans[hex3_high, :] = hex4_high
    trans[hex3, :] = hex4
    trans[hex4_high, :] = high
    trans[hex4, :] = body
    trans[low[0], :] = low[1]
    trans[low[1], :] = hex3
    trans[closed, :] = closed
    return trans, inc


_UNITS = {"codepoints": _codepoint_unit, "json": _json_unit}


def unit_automaton(unit: str) -> tuple[np.ndarray, np.ndarray]:
    """The side automaton of ``unit``: next state and whether a unit is added, per (state, byte); start 0."""
    return _UNITS[unit]()


def side_states(trans: np.ndarray, unit: str, states: np.ndarray) -> np.ndarray:
    """The unit's side state of each of ``states`` (a bool row over ``trans``'s states, closed under predecessors
    from state 0), -1 for the others.

    Raises :class:`~grammask.errors.GrammarError` if two texts lead to one state with different side
    states: the automaton would not say where a unit starts.
    """
    side_trans, _ = unit_automaton(unit)
    side = np.full(trans.shape[0], -1, dtype=np.int32)
    if not states[0]:
        return side
    side[0] = 0
    if not _spread_sides(np.ascontiguousarray(trans, dtype=np.int32), np.ascontiguousarray(states, dtype=np.bool_),
                         side_trans, side):
        raise GrammarError(
            f"counted terminals: the lexer cannot tell where a {unit} unit starts (two texts reach one state "
            f"in different places of a unit); write the counted terminals so that their units do not overlap"
        )
    return side


@nb.njit(cache=True)
def _spread_sides(trans, states, side_trans, side):  # pragma: no cover - compiled
    """Fill ``side`` (state 0's set) over the transitions into ``states``; False where two texts reach one state in
    different side states."""
    todo = np.empty(trans.shape[0], dtype=np.int64)
    todo[0] = 0
    top = 1
    while top:
        top -= 1
        q = todo[top]
        for b in range(256):
            t = trans[q, b]
            if t < 0 or not states[t]:
                continue
            s = side_trans[side[q], b]
            if side[t] < 0:
                side[t] = s
                todo[top] = t
                top += 1
            elif side[t] != s:
                return False
    return True


def check_free(trans: np.ndarray, accepting: np.ndarray, unit: str, name: str) -> None:
    """Raise :class:`~grammask.errors.GrammarError` unless one terminal's byte DFA is free for counting in ``unit``
    (:func:`is_free`; the bytes' units read off the unit's side automaton)."""
    _, side_inc = unit_automaton(unit)
    side = side_states(trans, unit, np.ones(trans.shape[0], dtype=bool))
    raw = np.where((side >= 0)[:, None], side_inc[np.maximum(side, 0)], 0)
    if not is_free(trans, raw, accepting):
        raise GrammarError(
            f"terminal {name}: its length cannot be counted beside the lexer state (some of its lexemes can grow only "
            f"by some numbers of units); the front end should have unrolled its bound"
        )


@lru_cache(maxsize=256)
def free_pattern(pattern: str, flags: str, unit: str) -> bool:
    """Whether a terminal's pattern is free for counting in ``unit`` (:func:`check_free`; remembered)."""
    own = regex_to_dfa(pattern, flags)
    try:
        check_free(own.trans, np.array([bool(tags) for tags in own.accepts], dtype=bool), unit, "")
    except GrammarError:
        return False
    return True


def is_free(trans: np.ndarray, raw: np.ndarray, accepting: np.ndarray) -> bool:
    """Whether an automaton is *free* for counting: counted with the fewest units each state needs to end
    (:func:`growth`), every transition adds at most one, and a state reached by growing the count that can grow
    it again lies on a cycle that grows it.

    ``trans[q, s]``: the next state on symbol ``s`` (-1: none); ``raw[q, s]``: the units that symbol adds. Then
    from every count a pending lexeme can end at that count and, where it can grow at all, at every larger one,
    which is what the levels' Prod assumes (module docstring).
    """
    try:
        grows_by, _ = growth(trans, raw, accepting, "")
    except GrammarError:
        return False
    edges = (trans >= 0) & (grows_by > 0)
    can_grow = _backward(trans, trans >= 0, edges.any(axis=1))
    grown = np.zeros(trans.shape[0], dtype=bool)
    grown[trans[edges]] = True
    return not (_forward(trans, trans >= 0, grown) & can_grow & ~_on_unit_cycle(trans, edges)).any()


def growth(trans: np.ndarray, raw: np.ndarray, target: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per transition, what it adds to the count that includes the fewest units to reach a ``target`` state,
    and that fewest number per state (-1 where no target is reachable; those transitions add 0).

    ``raw[q, b]``: the units transition (q, b) adds. Raises :class:`~grammask.errors.GrammarError` if a
    transition would add more than one (``name`` names the terminals).
    """
    inf = np.int64(1) << 40
    need = np.where(target, 0, inf).astype(np.int64)
    targets = np.maximum(trans, 0)
    while True:
        via = np.where(trans >= 0, raw + need[targets], inf).min(axis=1, initial=inf)
        better = np.minimum(need, via)
        if np.array_equal(better, need):
            break
        need = better
    known = need < inf
    adds = np.where((trans >= 0) & known[:, None] & known[targets], raw + need[targets] - need[:, None], 0)
    if (adds > 1).any() or (adds < 0).any():
        raise GrammarError(
            f"terminal(s) {name}: a length bound cannot be counted beside the lexer state (a byte would add more "
            f"than one unit to it); the front end should have unrolled it"
        )
    return adds.astype(np.uint8), np.where(known, need, -1)


def _on_unit_cycle(trans: np.ndarray, unit_edges: np.ndarray) -> np.ndarray:
    """States on a cycle that adds a unit: in a strongly connected component holding both ends of a unit edge."""
    comp = components(trans)
    sources, symbols = np.nonzero(unit_edges)
    inner = comp[sources] == comp[trans[sources, symbols]]
    return np.isin(comp, comp[sources[inner]])


def _forward(trans: np.ndarray, edges: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """States reachable from ``seed`` over ``edges`` (seed included)."""
    reach = seed.copy()
    todo = np.flatnonzero(reach).tolist()
    while todo:
        q = todo.pop()
        for t in np.unique(trans[q][edges[q]]).tolist():
            if not reach[t]:
                reach[t] = True
                todo.append(t)
    return reach


def _backward(trans: np.ndarray, edges: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """States that reach ``seed`` over ``edges`` (seed included)."""
    reach = seed.copy()
    while True:
        more = reach | (edges & reach[np.maximum(trans, 0)]).any(axis=1)
        if np.array_equal(more, reach):
            return reach
        reach = more


@dataclass(frozen=True, eq=False)
class CountedLexer:
    """What :func:`add_levels` makes of a lexer's DFA: the states with their level copies, and the count's tables."""

    trans: np.ndarray
    accept: np.ndarray
    matches: np.ndarray
    tables: CountTables


def add_levels(trans: np.ndarray, matches: np.ndarray, rank: np.ndarray, counts: list[Count | None],
               reach: np.ndarray, deadline: Deadline = NO_DEADLINE) -> CountedLexer:
    """Copy the counted region (the states from which a counted terminal can still be matched) once per level its
    count can reach and some terminal can still win at, and decide every copy's winner (module docstring).

    ``matches[q, t]``: the lexeme in ``q`` is in terminal ``t``'s relaxed language; ``reach[q, t]``: some state
    reachable from ``q`` matches ``t``; ``rank[t]``: its place in the winner order. A lexeme whose count leaves
    every level where something can still win goes to a last, dead state. Raises
    :class:`~grammask.errors.GrammarError` where the unit's place is ambiguous (:func:`side_states`) or a byte
    would add two units, and :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
    """
    counted = [c for c in counts if c is not None]
    is_counted = np.array([c is not None for c in counts], dtype=bool)
    region = reach[:, is_counted].any(axis=1)
    points = sorted({c.lo for c in counted if c.lo > 0} | {c.hi + 1 for c in counted if c.hi is not None})
    bounds = np.array([0, *points], dtype=np.int64)
    n, levels = trans.shape[0], len(bounds)
    side = side_states(trans, counted[0].unit, region)
    _, side_inc = unit_automaton(counted[0].unit)
    raw = np.where((side >= 0)[:, None], side_inc[np.maximum(side, 0)], 0)
    inc, need = growth(trans, raw, matches[:, is_counted].any(axis=1), "with a length bound")
    deadline.check("the counted terminals' levels")
    inside = np.where(region[np.maximum(trans, 0)], trans, -1)
    most = _most_counts(inside, inc, int(need[0]))
    least = _least_counts(inside, inc, int(need[0]))
    one_count = (least == most) & (most < NEVER)  # the walks count these exactly: one level is enough
    copy_of = np.full((n, levels), -1, dtype=np.int64)
    copy_of[:, 0] = np.arange(n)
    level = np.where(region, 0, -1).astype(np.int32)
    level[0] = -1
    base, levels_of, total = [np.arange(n)], [level], n
    alive = np.ones((n, levels), dtype=bool)
    for k in range(1, levels):
        top = bounds[k + 1] - 1 if k + 1 < levels else NEVER
        wanted = np.where(one_count, (most >= bounds[k]) & (most <= top), least <= top)
        winnable = np.array([c is None or c.hi is None or c.hi >= bounds[k] for c in counts], dtype=bool)
        alive[:, k] = (reach & winnable).any(axis=1)
        members = np.flatnonzero((level[:n] == 0) & wanted & alive[:, k])
        copy_of[members, k] = total + np.arange(len(members))
        total += len(members)
        base.append(members)
        levels_of.append(np.full(len(members), k, dtype=np.int32))
    dead = total
    base = np.concatenate([*base, [0]])
    level = np.concatenate([*levels_of, [-1]])
    out_trans = np.full((total + 1, 256), -1, dtype=np.int32)
    out_trans[:n] = trans
    for k in range(1, levels):
        deadline.check("the counted terminals' levels")
        members = np.flatnonzero(copy_of[:, k] >= 0)
        rows = trans[members]
        targets = np.maximum(rows, 0)
        # a target without a copy here: its own levels' chain places it (where a lexeme's count is kept), unless
        # nothing can win from it at this level any more
        moved = np.where(copy_of[targets, k] >= 0, copy_of[targets, k], np.where(alive[targets, k], rows, dead))
        out_trans[copy_of[members, k]] = np.where(rows >= 0, moved, -1)
    out_matches = matches[base]
    out_matches[dead] = False
    holds = np.array([[c is None or c.contains(int(b)) for c in counts] for b in bounds], dtype=bool)
    order = np.argsort(rank)
    allowed = np.where((level >= 0)[:, None], holds[np.maximum(level, 0)], True)
    ranked = (out_matches & allowed)[:, order]
    accept = np.where(ranked.any(axis=1), order[ranked.argmax(axis=1)], -1).astype(np.int32)
    up_at = np.full(total + 1, NEVER, dtype=np.int64)
    lift = np.full(total + 1, -1, dtype=np.int32)
    below = np.where(region, copy_of[:, 0], -1)  # each state's copy in the highest level so far
    below[0] = -1
    for k in range(1, levels):  # levels a state cannot be in are skipped; the first one nothing can win at is dead
        dying = (below >= 0) & ~alive[:, k]
        up_at[below[dying]] = bounds[k]
        lift[below[dying]] = dead
        below[dying] = -1
        moving = (below >= 0) & (copy_of[:, k] >= 0)
        up_at[below[moving]] = bounds[k]
        lift[below[moving]] = copy_of[moving, k]
        below[moving] = copy_of[moving, k]
    fixed = np.concatenate([np.where(region & one_count, most, -1)[base[:-1]], [-1]])
    inc_rows = inc[base]
    inc_rows[dead] = 0
    tables = CountTables(inc_rows.astype(np.uint8), fixed, level, bounds, up_at, lift)
    return CountedLexer(out_trans, accept, out_matches, tables)


def _least_counts(trans: np.ndarray, inc: np.ndarray, start: int) -> np.ndarray:
    """Per state, the smallest count a lexeme reaching it can have (:data:`NEVER` where unreachable)."""
    best = np.full(trans.shape[0], NEVER, dtype=np.int64)
    _fewest(np.ascontiguousarray(trans, dtype=np.int32), np.ascontiguousarray(inc, dtype=np.uint8), start, best)
    return best


@nb.njit(cache=True)
def _fewest(trans, inc, start, best):  # pragma: no cover - compiled
    """Shortest paths from state 0 (at ``start``) over edges of weight ``inc`` (0 or 1) into ``best``, a count at a
    time: the states of one count (closed over edges that add nothing) before those of the next."""
    n = trans.shape[0]
    done = np.zeros(n, dtype=np.bool_)
    now = np.empty(2 * n + 1, dtype=np.int64)  # a state is put at most twice: at one count, then at one less
    later = np.empty(2 * n + 1, dtype=np.int64)
    best[0] = start
    now[0] = 0
    n_now = 1
    count = start
    while n_now:
        n_later = 0
        while n_now:
            n_now -= 1
            q = now[n_now]
            if done[q] or best[q] != count:
                continue
            done[q] = True
            for b in range(256):
                t = trans[q, b]
                if t < 0:
                    continue
                cost = count + inc[q, b]
                if cost < best[t]:
                    best[t] = cost
                    if cost == count:
                        now[n_now] = t
                        n_now += 1
                    else:
                        later[n_later] = t
                        n_later += 1
        now, later = later, now
        n_now = n_later
        count += 1


def _most_counts(trans: np.ndarray, inc: np.ndarray, start: int) -> np.ndarray:
    """Per state, the largest count a lexeme reaching it can have (:data:`NEVER` past a cycle that adds units; -1
    where unreachable), over the transitions ``trans`` (-1: none)."""
    comp = components(trans)
    n_comps = int(comp.max(initial=-1)) + 1
    sources, symbols = np.nonzero(trans >= 0)
    targets = trans[sources, symbols]
    adds = inc[sources, symbols].astype(np.int64)
    inside = comp[sources] == comp[targets]
    growing = np.zeros(n_comps, dtype=bool)
    growing[comp[sources[inside & (adds > 0)]]] = True
    best = np.full(n_comps, -1, dtype=np.int64)
    best[comp[0]] = start
    order = np.argsort(comp[sources])[::-1]  # Tarjan numbers components sinks first: sources of edges first
    order = order[~inside[order]]
    _longest(comp[sources[order]], comp[targets[order]], adds[order], growing, best)
    best[growing & (best >= 0)] = NEVER
    return best[comp]


@nb.njit(cache=True)
def _longest(froms, tos, adds, growing, best):  # pragma: no cover - compiled
    """Longest counts along the edges between components (``froms[e]`` to ``tos[e]``, adding ``adds[e]``), taken in
    an order where every edge into a component comes before the edges out of it; :data:`NEVER` past a component
    that grows the count."""
    for e in range(froms.shape[0]):
        a, b = froms[e], tos[e]
        if best[a] < 0:
            continue
        if growing[a] or best[a] >= NEVER:
            best[b] = NEVER
        elif best[b] < NEVER:
            best[b] = max(best[b], best[a] + adds[e])
