"""Completion costs at decoding time, and budgeted masks (TruncProof §4.1.1 on LR stacks).

The cost of a matcher state (lexer state ``q``, LR stack ``S``) is

    C(q, S) = min over terminals X the pending lexeme can become and S accepts:
              lex_cost[q, X] + Cp(S after X)         (or lex_cost[q, ignored] + Cp(S))

where ``Cp`` is the cheapest completion of a stack, terminals counted at their witness costs.
``Cp`` of a real stack node is kept in a :class:`NodeTable` row per node: ``cost[row(N), g]``
is ``Cp`` of the stack ``g`` pushed on ``N``, from the exits of ``g`` above ``top(N)`` and the
rows of deeper nodes. Stacks a token would build (a few states over an untouched node) are
costed in compiled code from those rows. ``C`` is a realisable upper bound of the true minimum
and consistent: along the completion it counts, every token lowers it by at least one, so a
matcher that only takes tokens with ``used + 1 + C(after) + 1 <= N`` (the last 1 is EOS) can
always finish, EOS included, within ``N`` tokens.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from grammask.budget.bounds import token_bound
from grammask.budget.costs import INF, add
from grammask.budget.lexical import completes
from grammask.budget.readings import ModeReadings
from grammask.budget.tables import UNBOUNDED, BudgetTables
from grammask.classes import class_words
from grammask.indentation import IndentRuntime, byte_widths
from grammask.parser.kernels import ALWAYS, NEVER, feed_terminal
from grammask.parser.stack import unseen_nodes
from grammask.spanner import NewlineWidths, SequenceTable, TrieWalk, walk_alive

if TYPE_CHECKING:
    from grammask.engine import Engine

REJECTED = -1
"""Cost of a token the grammar does not allow at all."""


# ---- real stacks: one row of completion costs per node --------------------------------------


@nb.njit(cache=True)
def _fill_rows(lo, hi, state, parent, cost, landed, level, flat, goto, trans_ptr, trans_to, exit_ptr, exit_cost,
               exit_depth, exit_nt, trans_of, acc_sym, land_ptr, land_states, start_cost, flat_ptr, flat_cost,
               flat_depth, flat_nt, flat_start):
    """Rows ``lo..hi-1`` of the node table (their parents' rows are already filled); a row with ``flat[r]`` set
    takes the exits of completions that open no block (``flat_*``, see :mod:`.tables`).

    Also what bounds a token's cost from the stack (see :mod:`.bounds`): ``landed[r]`` is the
    largest completion of a state a reduction can leave on a node of the stack ``r`` (above
    ``r``'s parent once ``r`` is popped, and so on down), ``level[r]`` the largest completion of
    any stack a token can leave over an untouched part of ``r``: ``landed[r]``, any state pushed on
    ``r``, or the stack ``r`` as it is (``start_cost`` for the bottom node alone).
    """
    for r in range(lo, hi):
        u = state[r]
        cost[r, :] = INF
        pushed = -1
        e_ptr, e_cost, e_depth, e_nt = (flat_ptr, flat_cost, flat_depth, flat_nt) if flat[r] else \
            (exit_ptr, exit_cost, exit_depth, exit_nt)
        for k in range(trans_ptr[u], trans_ptr[u + 1]):
            best = INF
            for e in range(e_ptr[k], e_ptr[k + 1]):
                d = e_depth[e]
                if d == 0:
                    v = e_cost[e] if parent[r] < 0 else INF
                else:
                    a = r
                    for _ in range(d):
                        a = parent[a]
                        if a < 0:
                            break
                    if a < 0:
                        continue
                    x = goto[state[a], e_nt[e]]
                    if x < 0:
                        continue
                    v = add(e_cost[e], cost[a, x])
                best = min(best, v)
            cost[r, trans_to[k]] = best
            pushed = max(pushed, best)
        p = parent[r]
        if p < 0:
            landed[r] = -1
            itself = flat_start if flat[r] else start_cost
        else:
            k = trans_of[state[p], acc_sym[u]]
            lands = -1
            for i in range(land_ptr[k], land_ptr[k + 1]):
                lands = max(lands, cost[p, land_states[i]])
            landed[r] = max(lands, landed[p])
            itself = cost[p, u]
        level[r] = max(landed[r], pushed, itself)


_LEVELS = 128  # the most states a probe can push (the overlay's capacity in parser/kernels.py)
CONTEXT_VIEW = 8
"""Stack states the cached context bounds look at (see :meth:`BudgetRuntime.fill_context_bounds`)."""
_UNKNOWN = -2  # a context bound not computed yet
_CONTEXT_CACHE = 4096  # contexts kept before the cache of per-context bounds starts over


class NodeTable:
    """Completion-cost rows of the LR stack nodes a matcher and its forks have seen.

    Nodes are the matcher's persistent ``(state, parent)`` tuples; each is kept alive here with
    its row, so its ``id`` stays unique. Shared by forks, so changes happen under ``lock``. Also
    holds the scratch of :func:`_stack_cost` (allocating it per call costs more than the work).
    """

    def __init__(self, n_states: int):
        self.state = np.empty(64, dtype=np.int32)
        self.parent = np.empty(64, dtype=np.int32)
        self.cost = np.empty((64, n_states), dtype=np.int32)
        self.landed = np.empty(64, dtype=np.int32)
        self.level = np.empty(64, dtype=np.int32)
        self.flat = np.zeros(64, dtype=np.bool_)
        self.size = 0
        self.scratch = (
            np.empty((_LEVELS, n_states), dtype=np.int32),
            np.zeros((_LEVELS, n_states), dtype=np.int64),
            np.empty((_LEVELS, n_states), dtype=np.int32),
            np.zeros(_LEVELS, dtype=np.int64),
        )
        self.serial = 0
        self.lock = threading.RLock()
        self._rows: dict[int, tuple[tuple, int]] = {}

    def row(self, stack: tuple, rt: BudgetRuntime, levels: tuple[int, ...] = (0,)) -> int:
        """The row of ``stack``'s top node, registering it and any unseen nodes below (``levels``: an indenter's
        levels for that stack, which tell where completions may open blocks)."""
        hit = self._rows.get(id(stack))
        if hit is not None:
            return hit[1]
        with self.lock:
            chain, hit = unseen_nodes(stack, self._rows)
            parent = -1 if hit is None else hit[1]
            flats = rt.flat_nodes(chain, levels)
            lo = self.size
            self._grow(lo + len(chain))
            for node, flat in zip(reversed(chain), reversed(flats)):
                self.state[self.size] = node[0]
                self.parent[self.size] = parent
                self.flat[self.size] = flat
                self._rows[id(node)] = (node, self.size)
                parent = self.size
                self.size += 1
            _fill_rows(lo, self.size, self.state, self.parent, self.cost, self.landed, self.level, self.flat,
                       rt.goto, *rt.exits, *rt.landings, rt.tables.parser.start_cost, *rt.flat_exits)
            return parent

    def _grow(self, need: int) -> None:
        cap = len(self.state)
        if need <= cap:
            return
        while cap < need:
            cap *= 2
        for name in ("state", "parent", "landed", "level", "flat"):
            setattr(self, name, np.resize(getattr(self, name), cap))
        cost = np.empty((cap, self.cost.shape[1]), dtype=np.int32)
        cost[: self.size] = self.cost[: self.size]
        self.cost = cost


# ---- stacks built on top of a real one ---------------------------------------------------------


@nb.njit(cache=True)
def _stack_cost(view_states, view_rows, real, chain, n_chain, cost, goto, trans_of, acc_sym, exit_ptr, exit_cost,
                exit_depth, exit_nt, start_cost, cap, best, mark, frontier, counts, serial):
    """``Cp`` of the stack ``chain[:n_chain]`` (bottom first) pushed on the real view's first ``real`` states,
    exact up to ``cap`` (a larger answer only says "more than ``cap``"). A whole stack never pops
    below its view; a one-state view with zero costs (a *symbolic* view) counts what lies under it as 0.

    Configurations are (level ``k``, top ``g``): ``g`` above ``chain[:k]``. Every exit pops at
    least one level, so levels are settled top-down; ``best``/``mark``/``frontier``/``counts``
    are scratch, ``serial`` tells this call's marks from older ones.
    """
    if n_chain == 0:
        return cost[view_rows[real - 2], view_states[real - 1]] if real >= 2 else start_cost
    answer = INF
    for k in range(n_chain):
        counts[k] = 0
    top = n_chain - 1
    best[top, chain[top]] = 0
    mark[top, chain[top]] = serial
    frontier[top, 0] = chain[top]
    counts[top] = 1
    for k in range(top, -1, -1):
        for i in range(counts[k]):
            g = frontier[k, i]
            acc = best[k, g]
            if k == 0:
                answer = min(answer, add(acc, cost[view_rows[real - 1], g]))
                continue
            t = trans_of[chain[k - 1], acc_sym[g]]
            if t < 0:
                continue
            for e in range(exit_ptr[t], exit_ptr[t + 1]):
                c = add(acc, exit_cost[e])
                if c > cap:
                    continue
                d = exit_depth[e]
                if d == 0:
                    answer = min(answer, c)
                elif d <= k:
                    nk = k - d
                    below = chain[nk - 1] if nk >= 1 else view_states[real - 1]
                    x = goto[below, exit_nt[e]]
                    if x < 0:
                        continue
                    if mark[nk, x] != serial:
                        mark[nk, x] = serial
                        best[nk, x] = c
                        frontier[nk, counts[nk]] = x
                        counts[nk] += 1
                    elif c < best[nk, x]:
                        best[nk, x] = c
                else:
                    r2 = real - (d - k)
                    if r2 < 1:  # below the view: only a symbolic view (see fill_context_bounds) ends
                        answer = min(answer, c)
                        continue
                    x = goto[view_states[r2 - 1], exit_nt[e]]
                    if x >= 0:
                        answer = min(answer, add(c, cost[view_rows[r2 - 1], x]))
    return answer


@nb.njit(cache=True)
def _ends_here(action, goto, rule_len, rule_lhs, view_states, real, chain, n, q, eof_term, eof_extra, eof_newline,
               after_newline, dedent, n_dedents, end, probe):
    """Whether the input may end with the lexeme pending in lexer state ``q`` (the stack: the view's first
    ``real`` states and ``chain[:n]``): ``eof_term[q]`` is its parser terminal (-1: none to feed, -2: it cannot
    end there), ``eof_extra[q]`` a terminal the postlex then inserts (-1: none); with indentation, a newline
    ``eof_newline`` unless the top was entered by one (``after_newline``), then ``n_dedents`` dedents."""
    t = eof_term[q]
    if t == -2:
        return False
    probe[:n] = chain[:n]
    m = n
    r = real
    for k in range(-3, n_dedents + 1):
        if k == -3:
            x = t
        elif k == -2:
            x = eof_extra[q]
        elif k == -1:
            x = -1
            if eof_newline >= 0:
                top = probe[m - 1] if m > 0 else view_states[r - 1]
                if not after_newline[top]:
                    x = eof_newline
        else:
            x = dedent if k < n_dedents else end
        if x < 0:
            continue
        st, r, m = feed_terminal(action, goto, rule_len, rule_lhs, view_states, r, probe, m, x)
        if st != ALWAYS:
            return False
    return True


@nb.njit(cache=True)
def _less(cost, discount):
    """A stack's completion cost with the last newline taken off where the end of input writes it (see
    ``BudgetTables.end_discount``: every completion of a stack counts that newline, or costs 0)."""
    return cost if cost >= INF else max(cost - discount, 0)


@nb.njit(cache=True)
def _terms_cost(q, cheapest, cap, view_states, view_rows, real, chain, n, probe, node_cost, action, goto, rule_len,
                rule_lhs, lex_cost, state_follow, follow_ptr, follow_terms, trans_of, acc_sym, exit_ptr, exit_cost,
                exit_depth, exit_nt, start_cost, discount, best, mark, frontier, counts, serial):
    """The cheapest way on by finishing the lexeme pending in lexer state ``q`` as one of its follow terminals, fed
    on the stack (the view's first ``real`` states and ``chain[:n]``), if below ``cheapest``: (cost, whether the
    stack takes some follow terminal, the last mark used)."""
    taken = False
    f = state_follow[q]
    for k in range(follow_ptr[f], follow_ptr[f + 1]):
        x = follow_terms[k]
        probe[:n] = chain[:n]
        st, r2, n2 = feed_terminal(action, goto, rule_len, rule_lhs, view_states, real, probe, n, x)
        if st == NEVER:
            continue
        taken = True
        if st == ALWAYS and lex_cost[q, x] < cheapest and lex_cost[q, x] <= cap:
            serial += 1
            cheapest = min(cheapest, add(lex_cost[q, x], _less(_stack_cost(
                view_states, view_rows, r2, probe, n2, node_cost, goto, trans_of, acc_sym, exit_ptr,
                exit_cost, exit_depth, exit_nt, start_cost, min(cap, cheapest - 1) - lex_cost[q, x] + discount,
                best, mark, frontier, counts, serial), discount)))
    return cheapest, taken, serial


@nb.njit(cache=True)
def _finish_cost(q, cheapest, cap, fixed, virtual, view_states, view_rows, real, chain, n, probe, node_cost, action,
                 goto, rule_len, rule_lhs, lex_cost, state_follow, follow_ptr, follow_terms, follow_any, trans_of,
                 acc_sym, exit_ptr, exit_cost, exit_depth, exit_nt, start_cost, discount, best, mark, frontier, counts,
                 serial):
    """The cheapest way on by finishing the lexeme pending in lexer state ``q`` (as an ignored terminal, or as a
    follow terminal fed on the stack), if below ``cheapest``; ``fixed``: an indenter fed the top's newline, so a real
    terminal comes next. Returns (cost, whether some way is allowed, the last mark used)."""
    ign = lex_cost.shape[1] - 1
    allowed = follow_any[state_follow[q]]
    if allowed and lex_cost[q, ign] <= min(cap, cheapest - 1):
        if fixed:
            rest, _, serial = _terms_cost(virtual, INF, cap - lex_cost[q, ign], view_states, view_rows, real, chain, n,
                                          probe, node_cost, action, goto, rule_len, rule_lhs, lex_cost, state_follow,
                                          follow_ptr, follow_terms, trans_of, acc_sym, exit_ptr, exit_cost, exit_depth,
                                          exit_nt, start_cost, discount, best, mark, frontier, counts, serial)
        else:
            serial += 1
            rest = _less(_stack_cost(view_states, view_rows, real, chain, n, node_cost, goto, trans_of, acc_sym,
                                     exit_ptr, exit_cost, exit_depth, exit_nt, start_cost,
                                     cap - lex_cost[q, ign] + discount, best, mark, frontier, counts, serial), discount)
        cheapest = min(cheapest, add(lex_cost[q, ign], rest))
    cheapest, taken, serial = _terms_cost(q, cheapest, cap, view_states, view_rows, real, chain, n, probe, node_cost,
                                          action, goto, rule_len, rule_lhs, lex_cost, state_follow, follow_ptr,
                                          follow_terms, trans_of, acc_sym, exit_ptr, exit_cost, exit_depth, exit_nt,
                                          start_cost, discount, best, mark, frontier, counts, serial)
    return cheapest, allowed or taken, serial


@nb.njit(cache=True)
def _probe_costs(which, seq_ptr, seq_terms, ends, top_row, node_state, node_parent, node_cost, action, goto,
                 rule_len, rule_lhs, lex_cost, state_follow, follow_ptr, follow_terms, follow_any, trans_of,
                 acc_sym, exit_ptr, exit_cost, exit_depth, exit_nt, start_cost, eof_term, eof_extra, eof_newline,
                 after_newline, dedent, end, discount, newline_top, virtual, fall_at, fall_ptr, fall_terms, n_dedents, cap, best, mark,
                 frontier, counts, serial, out):
    """``out[i]``: the cost ``C`` after probe ``which[i]`` (emit ``seq_terms[seq_ptr[p]:seq_ptr[p+1]]`` on the
    real stack of ``top_row``, leave lexer state ``ends[p]``), or REJECTED if the grammar forbids it; 0 where
    the input may end right there (see :func:`_ends_here`); a stack's completion ``discount`` less (:func:`_less`).
    Where the stack's top was entered by an indenter's newline, indent or dedent (``newline_top``), what follows
    starts with a real terminal: costed from the lexer state ``virtual`` (see :func:`_lexical`).

    A probe that leaves a fallback of Lark's backing up pending is costed both ways: its long lexeme goes on, or it dies
    on the next token (``fall_at[q]``: the row of ``lex_cost`` that counts that, -1 where it is not counted, -2 where
    ``q`` is no fallback state; ``fall_terms[fall_ptr[q]:fall_ptr[q+1]]``: the parser terminals it then emits). A
    fallback's probe is never REJECTED (INF where neither way is counted): its other readings may be allowed.

    Costs above ``cap`` are not worked out: any value above ``cap`` stands for them. ``best``,
    ``mark``, ``frontier``, ``counts`` are scratch kept between calls (see :func:`_stack_cost`);
    ``serial`` is the last mark used, and the new last one is returned.
    """
    depth = 0
    r = top_row
    while r >= 0:
        depth += 1
        r = node_parent[r]
    view_states = np.empty(depth, dtype=np.int32)
    view_rows = np.empty(depth, dtype=np.int32)
    r = top_row
    for i in range(depth - 1, -1, -1):
        view_states[i] = node_state[r]
        view_rows[i] = r
        r = node_parent[r]
    chain = np.empty(128, dtype=np.int32)
    probe = np.empty(128, dtype=np.int32)
    fell = np.empty(128, dtype=np.int32)
    for i in range(len(which)):
        p = which[i]
        real = depth
        n = 0
        status = ALWAYS
        for j in range(seq_ptr[p], seq_ptr[p + 1]):
            status, real, n = feed_terminal(action, goto, rule_len, rule_lhs, view_states, real, chain, n, seq_terms[j])
            if status != ALWAYS:
                break
        if status != ALWAYS:
            out[i] = REJECTED if status == NEVER else INF
            continue
        q = ends[p]
        if _ends_here(action, goto, rule_len, rule_lhs, view_states, real, chain, n, q, eof_term, eof_extra,
                      eof_newline, after_newline, dedent, n_dedents, end, probe):
            out[i] = 0
            continue
        top = chain[n - 1] if n > 0 else view_states[real - 1]
        fixed = newline_top[top]  # an indenter fed this newline's indent or dedents: a real terminal comes next
        if q == 0:
            if fixed:
                out[i], _, serial = _terms_cost(virtual, INF, cap, view_states, view_rows, real, chain, n, probe, node_cost,
                                                action, goto, rule_len, rule_lhs, lex_cost, state_follow, follow_ptr,
                                                follow_terms, trans_of, acc_sym, exit_ptr, exit_cost, exit_depth,
                                                exit_nt, start_cost, discount, best, mark, frontier, counts, serial)
                continue
            serial += 1
            out[i] = _less(_stack_cost(view_states, view_rows, real, chain, n, node_cost, goto, trans_of, acc_sym,
                                       exit_ptr, exit_cost, exit_depth, exit_nt, start_cost, cap + discount, best, mark,
                                       frontier, counts, serial), discount)
            continue
        cheapest, taken, serial = _finish_cost(q, INF, cap, fixed, virtual, view_states, view_rows, real, chain, n,
                                               probe, node_cost, action, goto, rule_len, rule_lhs, lex_cost,
                                               state_follow, follow_ptr, follow_terms, follow_any, trans_of, acc_sym,
                                               exit_ptr, exit_cost, exit_depth, exit_nt, start_cost, discount, best,
                                               mark, frontier, counts, serial)
        v = fall_at[q]
        if v >= 0:  # a fallback: also where its long lexeme dies on the next token (its emissions fed first)
            fell[:n] = chain[:n]
            real2, n2 = real, n
            for j in range(fall_ptr[q], fall_ptr[q + 1]):
                status, real2, n2 = feed_terminal(action, goto, rule_len, rule_lhs, view_states, real2, fell, n2,
                                                  fall_terms[j])
                if status != ALWAYS:
                    break
            if status == ALWAYS:
                top = fell[n2 - 1] if n2 > 0 else view_states[real2 - 1]
                cheapest, _, serial = _finish_cost(v, cheapest, cap, newline_top[top], virtual, view_states, view_rows,
                                                   real2, fell, n2, probe, node_cost, action, goto, rule_len, rule_lhs,
                                                   lex_cost, state_follow, follow_ptr, follow_terms, follow_any,
                                                   trans_of, acc_sym, exit_ptr, exit_cost, exit_depth, exit_nt,
                                                   start_cost, discount, best, mark, frontier, counts, serial)
        out[i] = cheapest if taken or v >= -1 else REJECTED
    return serial


@nb.njit(cache=True)
def select_groups(row, neg_bounds, threshold, first_word, first_bit, known):
    """The groups whose static bound exceeds ``threshold`` and whose tokens the mask ``row`` allows (a
    group's tokens share one verdict: its first token's bit tells): ``(out, k)`` where ``out[:k]``
    have no context bound in ``known`` yet and ``out[k:]`` have one that exceeds ``threshold`` too."""
    n = np.searchsorted(neg_bounds, -threshold)
    out = np.empty(n, dtype=np.int64)
    a = 0
    b = n
    for i in range(n):
        if row[first_word[i]] & first_bit[i]:
            if known[i] == _UNKNOWN:
                out[a] = i
                a += 1
            elif known[i] > threshold:
                b -= 1
                out[b] = i
    out[a:a + n - b] = out[b:].copy()
    return out[:a + n - b], a


@nb.njit(cache=True)
def remove_over(row, which, costs, slack, tok_ptr, tok_words, tok_bits):
    """Clear from ``row`` the tokens of group ``which[i]`` wherever ``costs[i]`` exceeds ``slack``."""
    for i in range(len(which)):
        if costs[i] > slack:
            g = which[i]
            for w in range(tok_ptr[g], tok_ptr[g + 1]):
                row[tok_words[w]] &= ~tok_bits[w]


@nb.njit(cache=True)
def spread_costs(costs, tok_ptr, tok_words, tok_bits, out):
    """``out[t] = costs[i]`` for every token ``t`` of group ``i`` (groups with a negative cost are skipped)."""
    for i in range(len(costs)):
        if costs[i] < 0:
            continue
        for w in range(tok_ptr[i], tok_ptr[i + 1]):
            bits = np.uint32(tok_bits[w])
            base = np.int64(tok_words[w]) * 32
            for b in range(32):
                if bits & (np.uint32(1) << np.uint32(b)):
                    out[base + b] = costs[i]


# ---- per lexer state: its tokens grouped by what they do, costliest first --------------------


@dataclass(frozen=True)
class StateTokens:
    """The tokens that lex from one lexer state, grouped by (emitted terminals, lexer state left).

    Groups are sorted by their static bound (:func:`token_bound`), largest first; group ``i``
    emits ``seq_terms[seq_ptr[i]:seq_ptr[i+1]]``, leaves ``ends[i]`` and holds the tokens
    ``tok_words/tok_bits[tok_ptr[i]:tok_ptr[i+1]]`` (bitmask word and bits); ``first_word[i]`` and
    ``first_bit[i]`` locate one of them.
    """

    seq_ptr: np.ndarray
    seq_terms: np.ndarray
    ends: np.ndarray
    neg_bounds: np.ndarray
    tok_ptr: np.ndarray
    tok_words: np.ndarray
    tok_bits: np.ndarray
    first_word: np.ndarray
    first_bit: np.ndarray
    context: np.ndarray | None = None
    """Under an indenter: the groups whose cost depends on the indentation context (a newline emitted or
    pending), costed in Python (:mod:`.indented`); None otherwise."""
    end_width: np.ndarray | None = None
    """Under an indenter, for a group that leaves a newline pending: its line's width (:func:`width_key`)."""


def width_key(absolute: bool, width: int) -> int:
    """A pending newline's line width as one int: ``1 + (width + 1)`` if the token sets it (-1: no break),
    ``-(1 + width)`` if the token adds ``width`` to the width its line had (0: no newline pending)."""
    return 2 + width if absolute else -(1 + width)


class BudgetRuntime:
    """A compiled grammar's budget tables in the shapes decoding reads, and its per-state token groups."""

    def __init__(self, engine: Engine, tables: BudgetTables):
        self.engine = engine
        self.tables = tables
        t, p = tables, tables.parser
        m = engine.masks
        lr = engine.parse
        self.lr = (lr.action, lr.goto, lr.rule_len, lr.rule_lhs)
        self.goto = lr.goto
        self.exits = (p.trans_ptr, p.trans_to, p.exit_ptr, p.exit_cost, p.exit_depth, p.exit_nt)
        self.landings = (p.trans_of, p.acc_sym, p.land_ptr, p.land_states)
        self.parser = (p.trans_of, p.acc_sym, p.exit_ptr, p.exit_cost, p.exit_depth, p.exit_nt, p.start_cost)
        f = p if t.flat is None else t.flat
        self.flat_exits = (f.exit_ptr, f.exit_cost, f.exit_depth, f.exit_nt, f.start_cost)
        self.flat_parser = (f.trans_of, f.acc_sym, f.exit_ptr, f.exit_cost, f.exit_depth, f.exit_nt, f.start_cost)
        self.lexical, falls = _lexical(engine, tables)
        self.ending = (*_ending(engine), np.int64(tables.end_discount), *_fixed_tops(engine), *falls)
        self.after_newline_state = engine.lexer.n_states
        """A lexer state past the lexer's: a newline just ended, the next lexeme is no newline (see :func:`_lexical`)."""
        self._state_bound = t.state_bound.tolist()
        self.n_words = m.masks.shape[1]
        self._bound_args = (t.finish_bound, t.ignore_cost, t.bound_exit, t.goto_exit_max, t.eps1)
        self._groups: dict[int, StateTokens] = {}
        self._newline = None
        n_ids = int(engine.parser_term.max(initial=-1)) + 2
        if engine.indent is not None:
            widths = byte_widths(engine.indent.tab_len, engine.indent.line_breaks)
            self._newline = NewlineWidths(engine.indent.newline_lexer, engine.indent.base, widths)
            longest = max((len(b) for b in engine.vocab.tokens if b), default=1)
            n_ids = engine.indent.max_id(longest * int(widths.max())) + 1
        self._readings = None
        if engine.lexer.contextual:
            self._readings = ModeReadings(engine)
            self.lr = (self._readings.action, *self.lr[1:])
            n_ids = max(n_ids, self._readings.n_ids)
        self._seqs = SequenceTable(n_ids)
        self._walk: TrieWalk | None = None  # scratch of the vocabulary walks, made on the first one
        self._lock = threading.Lock()
        self._contexts: dict[tuple[int, ...], np.ndarray] = {}
        self._symbolic = NodeTable(lr.n_states)
        self._symbolic.size = CONTEXT_VIEW
        self._symbolic.parent[:CONTEXT_VIEW] = np.arange(-1, CONTEXT_VIEW - 1)
        self._symbolic.cost[:CONTEXT_VIEW] = 0
        self._symbolic_parser = self.parser[:-1] + (0,)

    def new_nodes(self) -> NodeTable:
        return NodeTable(self.engine.parse.n_states)

    def flat_nodes(self, chain: list[tuple], levels: tuple[int, ...]) -> list[bool]:
        """Per stack node of ``chain`` (top first, the top of a stack whose indentation levels are ``levels``):
        whether completions working on its level may not open a block (its level is at the width cap, or it lies
        inside a block a dedent already closed). All False without an indenter."""
        indent = self.engine.indent
        if indent is None:
            return [False] * len(chain)
        cap = self.tables.newlines.width_cap
        acc = self.tables.parser.acc_sym
        out = []
        k, closed = len(levels) - 1, 0
        for node in chain:
            out.append(closed > 0 or levels[k] + 1 > cap)
            symbol = acc[node[0]]
            if symbol == indent.dedent:
                closed += 1
            elif symbol == indent.indent:
                if closed:
                    closed -= 1
                else:
                    k = max(k - 1, 0)
        return out

    def probe_costs(self, nodes: NodeTable, top_row: int, which: np.ndarray, seq_ptr: np.ndarray,
                    seq_terms: np.ndarray, ends: np.ndarray, cap: int = INF, n_dedents: int = 0,
                    flat: bool = False) -> np.ndarray:
        """Costs after the probes ``which`` (see :func:`_probe_costs`), exact up to ``cap``; ``n_dedents``: the
        dedents an indenter adds at the end of input; ``flat``: the states a probe pushes may not open blocks."""
        out = np.empty(len(which), dtype=np.int64)
        parser = self.flat_parser if flat else self.parser
        with nodes.lock:
            nodes.serial = _probe_costs(which, seq_ptr, seq_terms, ends, top_row, nodes.state, nodes.parent, nodes.cost,
                                        *self.lr, *self.lexical, *parser, *self.ending, n_dedents, cap,
                                        *nodes.scratch, nodes.serial, out)
        return out

    def context_bounds(self, lexstate: int, stack: tuple, n_groups: int, n_dedents: int = 0
                       ) -> tuple[list[int], np.ndarray]:
        """The top :data:`CONTEXT_VIEW` states of ``stack`` (top first) and the cached *context bounds* of
        ``lexstate``'s groups under them (-2 where not computed yet, see :meth:`fill_context_bounds`)."""
        top = []
        node = stack
        while node is not None and len(top) < CONTEXT_VIEW:
            top.append(node[0])
            node = node[1]
        key = (lexstate, n_dedents, *top)
        known = self._contexts.get(key)
        if known is None:
            with self._lock:
                if len(self._contexts) >= _CONTEXT_CACHE:
                    self._contexts.clear()
                known = self._contexts.setdefault(key, np.full(n_groups, _UNKNOWN, dtype=np.int32))
        return top, known

    def fill_context_bounds(self, top: list[int], groups: StateTokens, todo: np.ndarray, known: np.ndarray,
                            n_dedents: int = 0) -> None:
        """Compute the context bounds of the groups ``todo`` into ``known``.

        A group is costed on a *symbolic* view of the stack's top states ``top``: whatever lies
        below and every completion above a real node count 0, so adding the stack's level bounds
        the real cost (see :mod:`.bounds`). INF where the group's terminals reach below the view.
        """
        out = np.empty(len(todo), dtype=np.int64)
        with self._lock:
            sym = self._symbolic
            sym.state[: len(top)] = top[::-1]
            sym.serial = _probe_costs(todo, groups.seq_ptr, groups.seq_terms, groups.ends, len(top) - 1, sym.state,
                                      sym.parent, sym.cost, *self.lr, *self.lexical, *self._symbolic_parser,
                                      *self.ending, n_dedents, INF, *sym.scratch, sym.serial, out)
        known[todo] = np.minimum(out, INF)

    def state_cost(self, nodes: NodeTable, lexstate: int, stack: tuple, levels: tuple[int, ...] = (0,)) -> int:
        """``C`` of a matcher state (REJECTED if its pending lexeme has no acceptable terminal), its pending lexeme
        costed as a whole terminal (an indenter's pending newline: see :mod:`.indented`)."""
        row = nodes.row(stack, self, levels)
        return int(self.probe_costs(nodes, row, _ONE, _EMPTY_PTR, _EMPTY_TERMS, np.array([lexstate]),
                                    n_dedents=len(levels) - 1, flat=bool(nodes.flat[row]))[0])

    def state_bound(self, lexstate: int) -> int:
        """The largest :func:`token_bound` over the tokens read from ``lexstate`` (-1: none): precomputed, or under a
        contextual lexer the largest of the state's groups (built on first use)."""
        bound = self._state_bound[lexstate]
        if bound == UNBOUNDED:
            neg = self.groups(lexstate).neg_bounds
            bound = self._state_bound[lexstate] = int(-neg[0]) if len(neg) else -1
        return bound

    def groups(self, lexstate: int) -> StateTokens:
        """The token groups of a lexer state (built on first use: one vocabulary walk, milliseconds)."""
        hit = self._groups.get(lexstate)
        if hit is None:
            with self._lock:
                hit = self._groups.get(lexstate)
                if hit is None:
                    hit = self._groups[lexstate] = self._build_groups(lexstate)
        return hit

    def _build_groups(self, q: int) -> StateTokens:
        c = self.engine
        trie = c.trie
        if self._walk is None:
            self._walk = TrieWalk(trie)
        if self._readings is None:
            entries, seq, end = walk_alive(trie, c.lexer.trans, c.lexer.accept, c.parser_term, q, self._seqs,
                                           self._walk, newline=self._newline, restart=c.lexer.restarts)
        else:
            entries, seq, end = self._readings.walk(trie, q, self._seqs, self._walk)
            self.lr = (self._readings.action, *self.lr[1:])
        n_lex = c.lexer.n_states
        width = self._end_widths(q, trie.token_ids[entries], end)
        keys, token_group = _unique_columns(seq.astype(np.int64) * n_lex + end, width)
        sequences = [self._seqs.sequence(int(s)) for s in (keys[0] // n_lex).tolist()]
        ends = (keys[0] % n_lex).astype(np.int32)
        bounds = np.array([self._bound(e, int(x)) for e, x in zip(sequences, ends.tolist())], dtype=np.int64)
        order = np.argsort(-bounds, kind="stable")
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        sequences = [sequences[i] for i in order.tolist()]
        tok_ptr, tok_words, tok_bits = class_words(trie.token_ids[entries], rank[token_group],
                                                    np.ones(len(order), dtype=np.bool_), self.n_words)
        context = end_width = None
        if c.indent is not None:
            base = c.indent.base
            pending = self.tables.newlines.row[ends[order]] >= 0
            context = np.array([any(x >= base for x in e) for e in sequences], dtype=np.bool_) | pending
            end_width = keys[1][order].astype(np.int64)
        return StateTokens(
            seq_ptr=np.cumsum([0] + [len(e) for e in sequences]).astype(np.int64),
            seq_terms=np.array([t for e in sequences for t in e], dtype=np.int32),
            ends=ends[order],
            neg_bounds=-bounds[order],
            tok_ptr=tok_ptr,
            tok_words=tok_words,
            tok_bits=tok_bits,
            first_word=tok_words[tok_ptr[:-1]],
            first_bit=tok_bits[tok_ptr[:-1]] & -tok_bits[tok_ptr[:-1]],
            context=context,
            end_width=end_width,
        )

    @property
    def several_readings(self) -> bool:
        """Whether a token may be in several groups of a state (a contextual lexer's readings, of which a stack
        parses one: the others cost REJECTED)."""
        return self._readings is not None

    @property
    def indenter(self) -> IndentRuntime | None:
        """The indenter the budget feeds its token groups through (under a contextual lexer, one that reads the
        budget's own aliases); None without an indenter."""
        return self.engine.indenter if self._readings is None else self._readings.indenter

    def _bound(self, seq: tuple[int, ...], end: int) -> int:
        """:func:`token_bound` of a group (an indenter's newline counts as the terminals it may feed)."""
        indent = self.engine.indent
        if indent is None:
            last = 0 if not seq else seq[-1] if self._readings is None else self._readings.parser_terminal(seq[-1])
            return token_bound(len(seq), last, end, *self._bound_args)
        weight = self.tables.bound_weight[indent.newline_lexer]
        n = sum(int(weight) if x >= indent.base else 1 for x in seq)
        last = 0 if not seq else indent.newline if seq[-1] >= indent.base else seq[-1] if self._readings is None else \
            self._readings.parser_terminal(seq[-1])
        return token_bound(n, last, end, *self._bound_args)

    def _end_widths(self, q: int, token_ids: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per token: the :func:`width_key` of the newline it leaves pending (0 where none, or without an indenter)."""
        out = np.zeros(len(token_ids), dtype=np.int64)
        if self.engine.indent is None:
            return out
        width_after = self.indenter.width_after
        tokens = self.engine.vocab.tokens
        for i in np.flatnonzero(self.tables.newlines.row[end] >= 0).tolist():
            data = tokens[int(token_ids[i])]
            low, high = width_after(q, 0, data, int(end[i])), width_after(q, _FAR, data, int(end[i]))
            out[i] = width_key(low == high, low)
        return out


def _unique_columns(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(np.stack([first, second]), axis=1, return_inverse=True)`` (int64 keys; the pairs sorted by
    ``first`` then ``second``), without the structured sort that makes it slow on a large vocabulary."""
    order = np.lexsort((second, first))
    a, b = first[order], second[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return np.stack([a[new], b[new]]).astype(np.int64), inverse


_FAR = 1 << 20  # a carried width no token reaches: tells a width the token sets from one it adds to


def _lexical(engine: Engine, tables: BudgetTables) -> tuple[tuple, tuple]:
    """What probes read of the lexer: ``lex_cost`` and per state the follow set of its pending lexeme, with rows past
    the lexer's states; and the ``fall_at``, ``fall_ptr``, ``fall_terms`` of :func:`_probe_costs`.

    The first row past the lexer's (see :attr:`BudgetRuntime.after_newline_state`) serves an indenter: a newline has
    just ended and the next terminal is no newline (a newline would have run on into it), each terminal at its own
    cost (INF everywhere without an indenter). Then one row per counted fallback of Lark's backing up: its
    ``LexicalCosts.fall_cost``.
    """
    m = engine.masks
    lexer, lexical = engine.lexer, tables.lexical
    n = lexer.n_states
    row = np.full(lexical.lex_cost.shape[1], INF, dtype=lexical.lex_cost.dtype)
    indent = engine.indent
    if indent is not None:
        row[: len(lexical.term_cost)] = lexical.term_cost
        row[[indent.newline, indent.indent, indent.dedent]] = INF
    rows = [row]
    fall_at = np.full(n + 1, -2, dtype=np.int64)
    fall_terms: list[list[int]] = [[] for _ in range(n + 1)]
    if lexer.alt is not None:
        fall_at[:n][lexer.alt >= 0] = -1
        for q in np.flatnonzero(lexical.fall_row >= 0).tolist():
            fall_at[q] = n + len(rows)
            rows.append(lexical.fall_cost[lexical.fall_row[q]])
            fall_terms[q] = [int(engine.parser_term[t]) for t in lexer.fallen(q) if engine.parser_term[t] >= 0]
    extra = np.array(rows, dtype=lexical.lex_cost.dtype)
    terms = [np.flatnonzero(r[:-1] < INF) for r in extra]
    follow_ptr = np.append(m.follow_ptr, m.follow_ptr[-1] + np.cumsum([len(t) for t in terms]))
    lexed = (np.vstack([lexical.lex_cost, extra]),
             np.append(m.state_follow, len(m.follow_any) + np.arange(len(extra))).astype(m.state_follow.dtype),
             follow_ptr.astype(m.follow_ptr.dtype),
             np.concatenate([m.follow_terms, *terms]).astype(m.follow_terms.dtype),
             np.concatenate([m.follow_any, [False], extra[1:, -1] < INF]).astype(m.follow_any.dtype))
    ptr = np.cumsum([0] + [len(t) for t in fall_terms]).astype(np.int64)
    return lexed, (fall_at, ptr, np.array([t for ts in fall_terms for t in ts], dtype=np.int32))


def _fixed_tops(engine: Engine) -> tuple[np.ndarray, np.int64]:
    """The LR states entered by an indenter's newline, indent or dedent (after them the indenter has fed what the
    newline's width brings, so no completion starts with an indent or dedent), and the lexer state past the
    lexer's that costs a real terminal next (:func:`_lexical`); none and -1 without an indenter."""
    tables = engine.parse
    tops = np.zeros(tables.n_states, dtype=np.bool_)
    indent = engine.indent
    if indent is None:
        return tops, np.int64(-1)
    shifted = tables.action[:, [indent.newline, indent.indent, indent.dedent]]
    tops[shifted[shifted >= 0]] = True
    return tops, np.int64(engine.lexer.n_states)


def _ending(engine: Engine) -> tuple:
    """What :func:`_ends_here` reads: per lexer state the terminal its lexeme ends as and the one a postlex inserts
    after it at the end of input; an indenter's newline, the LR states a newline enters, its dedent; the end."""
    lexer, tables = engine.lexer, engine.parse
    accept = lexer.accept
    parser_term = engine.parser_term
    ends = completes(lexer)  # a fallback's chain, and a lexeme banned at the end, are not counted as ending the input
    if lexer.ban is not None:
        ends &= ~((lexer.ban_row >= 0) & lexer.ban[np.maximum(lexer.ban_row, 0), 256])
    term_of = parser_term[np.maximum(accept, 0)] if len(parser_term) else np.full(len(accept), -2)  # no terminals
    eof_term = np.where(ends, term_of, -2).astype(np.int32)
    eof_term[0] = -1
    after_newline = np.zeros(tables.n_states, dtype=np.bool_)
    newline = dedent = -1
    indent = engine.indent
    if indent is not None:
        eof_term[eof_term >= indent.base] = -2  # a pending newline: its width decides (the matcher's own check)
        if indent.eof_newline:
            newline = indent.newline
            after_newline[list(engine.indenter.after_newline)] = True
        dedent = indent.dedent
    eof_extra = np.full(lexer.n_states, -1, dtype=np.int32)
    if lexer.end_terminal >= 0:
        eof_extra[(lexer.restarts != 0) & (accept >= 0)] = parser_term[lexer.end_terminal]
    if indent is not None:  # the state past the lexer's (see _lexical): the matcher's own check decides
        eof_term, eof_extra = np.append(eof_term, -2).astype(np.int32), np.append(eof_extra, -1).astype(np.int32)
    return eof_term, eof_extra, np.int64(newline), after_newline, np.int64(dedent), np.int64(tables.end)


_ONE = np.zeros(1, dtype=np.int64)
_EMPTY_PTR = np.zeros(2, dtype=np.int64)
_EMPTY_TERMS = np.zeros(0, dtype=np.int32)
