"""Parser-side completion costs: nonterminal costs (TruncProof Alg. 2) and LR exits, for LALR(1) tables.

Costs count LLM tokens. Given the cost of every parser terminal (its cheapest standalone token
witness, see :mod:`grammask.budget.lexical`), a nonterminal's cost is its cheapest derivation,
computed by a fixpoint over the rules (left recursion included, since the iteration never
expands a derivation, it only improves each rule's sum).

The completion cost of an LR stack follows from its top state's *kernel items* ``A -> α·β``: all
of them are valid for the stack (the LR(0) automaton's defining property), so finishing ``β``
and reducing ``A`` (popping ``|α|`` states, then taking the goto) is always a real continuation,
and every completion ends the top state's rule that way. Reductions with ``|α| = 1`` keep the
stack's depth ("same level"); closing those over gives, for every LR state ``u`` and successor
``g = δ(u, s)``, the *exits* of ``g`` above ``u``: ``(cost, d, A)`` = finish the same-level chain
for ``cost`` tokens, then pop ``g``'s level and ``d >= 1`` states below and push ``goto(·, A)``.
An exit with ``d = 0`` is acceptance (only above the start state).

Tables with resolved conflicts (a shift chosen over a reduction, or one reduction over another
by priority) refuse some reductions the items promise: where a resolution dropped rule ``r`` in
state ``x`` on some lookahead, a completion that reduces ``r`` in ``x`` may not be what the parser
does. Costs therefore count only *safe* completions: nonterminal costs use no rule a resolution
touched anywhere, and an item of such a rule is finished only where its reduction state keeps every
lookahead. The parser follows every counted completion (a reduction untouched by resolutions
happens on every lookahead a continuation can start with, since LALR(1) lookaheads cover them),
and the completions stay closed under taking their first terminal, so costs stay consistent.
Where every completion of a stack goes through a dropped reduction (``expr: expr "+" expr`` with
the shift on ``+`` chosen), that stack costs INF: budgets then never enter it, and ``uncounted``
names the rules responsible so the caller can warn.

A postlex's inserted terminals (an indenter's INDENT) may cost differently inside nonterminal
derivations than in the items of a real stack: ``inner_cost`` is their cost there (see
:mod:`grammask.budget.tables`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from grammask.budget.costs import INF, add
from grammask.parser.tables import ParseTables


@dataclass(frozen=True)
class ParserCosts:
    """Per-symbol and per-transition completion costs of one grammar's LR automaton.

    Symbols are numbered as in ``ParseTables.rule_rhs``: parser terminals ``0..T-1``, the end
    marker ``T``, nonterminal ``n`` as ``T + 1 + n``. Transition ``k`` of state ``u`` (``k`` in
    ``trans_ptr[u]:trans_ptr[u+1]``) goes to ``trans_to[k]``; its exits are the entries
    ``exit_cost/exit_depth/exit_nt[exit_ptr[k]:exit_ptr[k+1]]``. ``trans_of[u, s]`` is the
    transition on symbol ``s`` (or -1), ``acc_sym[g]`` the symbol every transition into ``g`` reads.
    ``exit_bound[s]`` is the largest, over states ``u``, cheapest exit cost after reading ``s``.
    ``land_states[land_ptr[k]:land_ptr[k+1]]`` are the states same-level moves reach from
    transition ``k``'s target (by at least one move): what a reduction can leave above ``u``
    once the target's node is popped.
    ``eps_pushes`` is how far reductions by empty rules can raise a stack above its lowest point
    before one shift (0 without empty rules).
    """

    nt_cost: np.ndarray
    start_cost: int
    trans_ptr: np.ndarray
    trans_to: np.ndarray
    trans_of: np.ndarray
    acc_sym: np.ndarray
    exit_ptr: np.ndarray
    exit_cost: np.ndarray
    exit_depth: np.ndarray
    exit_nt: np.ndarray
    exit_bound: np.ndarray
    land_ptr: np.ndarray
    land_states: np.ndarray
    eps_pushes: int
    uncounted: tuple[int, ...] = ()


def follow_terminals(tables: ParseTables) -> np.ndarray:
    """``follows[x, y]``: parser terminal ``y`` can come right after terminal ``x`` (LALR lookaheads; a superset)."""
    n_terms = tables.end
    shift = tables.action[:, :n_terms]
    live = tables.action[:, :n_terms] != -1
    follows = np.zeros((n_terms, n_terms), dtype=bool)
    for x in range(n_terms):
        targets = np.unique(shift[:, x][shift[:, x] >= 0])
        if len(targets):
            follows[x] = live[targets].any(axis=0)
    return follows


def build_parser_costs(tables: ParseTables, term_cost: np.ndarray, inner_cost: np.ndarray | None = None) -> ParserCosts:
    """Nonterminal costs and the exits of every LR transition, with terminal ``t`` costing ``term_cost[t]`` in the
    items of a stack and ``inner_cost[t]`` (default: the same) inside nonterminal derivations."""
    n_terms = tables.end
    n_nts = len(tables.nonterminals)
    n_sym = n_terms + 1 + n_nts
    rhs = tables.right_hand_sides()
    touched = {int(r) for r in tables.dropped[:, 1]}
    inner = term_cost if inner_cost is None else inner_cost
    nt_cost = _nonterminal_costs(rhs, tables.rule_lhs.tolist(), inner, n_terms, n_nts, touched)
    sym_cost = np.concatenate([term_cost.astype(np.int64), [0], nt_cost.astype(np.int64)])
    suffix = [_suffix_costs(r, sym_cost) for r in rhs]

    step = _transitions(tables)
    n_states = tables.n_states
    acc_sym = np.full(n_states, -1, dtype=np.int32)
    for u in range(n_states):
        for s, g in step[u]:
            acc_sym[g] = s
    end_state = int(np.nonzero(tables.action[:, n_terms] == tables.accept_state)[0][0])
    start_nt = int(np.nonzero(tables.goto[tables.start_state] == end_state)[0][0])
    kernels = _kernel_items(tables, step, n_sym)
    safe = _safe_items(tables, kernels, step, n_sym)

    trans_ptr = [0]
    trans_to: list[int] = []
    trans_of = np.full((n_states, n_sym), -1, dtype=np.int32)
    exit_ptr = [0]
    exits: list[tuple[int, int, int]] = []
    land_ptr = [0]
    lands: list[int] = []
    exit_bound = np.zeros(n_sym, dtype=np.int64)
    uncounted: set[int] = set()
    goto = tables.goto
    lhs = tables.rule_lhs.tolist()
    for u in range(n_states):
        for s, g in step[u]:
            trans_of[u, s] = len(trans_to)
            trans_to.append(g)
            found, reached = _exits_above(u, g, kernels, safe, goto, lhs, suffix, end_state)
            if not found:
                uncounted |= _blocking_rules(u, g, kernels, safe, goto, lhs, suffix, end_state, reached)
            exits.extend(found)
            exit_ptr.append(len(exits))
            lands.extend(sorted(reached))
            land_ptr.append(len(lands))
            cheapest = min((c for c, _, _ in found), default=INF)
            exit_bound[s] = max(exit_bound[s], cheapest)
        trans_ptr.append(len(trans_to))
    triples = np.array(exits, dtype=np.int64).reshape(-1, 3)
    return ParserCosts(
        nt_cost=nt_cost,
        start_cost=int(nt_cost[start_nt]),
        trans_ptr=np.array(trans_ptr, dtype=np.int64),
        trans_to=np.array(trans_to, dtype=np.int32),
        trans_of=trans_of,
        acc_sym=acc_sym,
        exit_ptr=np.array(exit_ptr, dtype=np.int64),
        exit_cost=triples[:, 0].astype(np.int32),
        exit_depth=triples[:, 1].astype(np.int32),
        exit_nt=triples[:, 2].astype(np.int32),
        exit_bound=np.minimum(exit_bound, INF).astype(np.int32),
        land_ptr=np.array(land_ptr, dtype=np.int64),
        land_states=np.array(lands, dtype=np.int32),
        eps_pushes=_epsilon_pushes(tables),
        uncounted=tuple(sorted(uncounted)),
    )


def _nonterminal_costs(rhs: list[tuple[int, ...]], lhs: list[int], term_cost: np.ndarray, n_terms: int,
                       n_nts: int, skip: set[int]) -> np.ndarray:
    """Cheapest derivation of every nonterminal without the rules ``skip`` (INF if it derives nothing affordable):
    a Bellman-Ford fixpoint."""
    cost = [INF] * n_nts
    terms = [int(c) for c in term_cost]

    def sym(code: int) -> int:
        if code < n_terms:
            return terms[code]
        return 0 if code == n_terms else cost[code - n_terms - 1]

    changed = True
    while changed:
        changed = False
        for r, (a, body) in enumerate(zip(lhs, rhs)):
            if r in skip:
                continue
            total = 0
            for code in body:
                total = add(total, sym(code))
            if total < cost[a]:
                cost[a] = total
                changed = True
    return np.array(cost, dtype=np.int32)


def _suffix_costs(body: tuple[int, ...], sym_cost: np.ndarray) -> list[int]:
    """``out[j]``: the cost of ``body[j:]``."""
    out = [0] * (len(body) + 1)
    for j in range(len(body) - 1, -1, -1):
        out[j] = add(out[j + 1], int(sym_cost[body[j]]))
    return out


def _transitions(tables: ParseTables) -> list[list[tuple[int, int]]]:
    """Per state, its (symbol, target) transitions: shifts of parser terminals and gotos (not the end marker)."""
    n_terms = tables.end
    out = []
    for u in range(tables.n_states):
        row = tables.action[u, :n_terms]
        shifts = [(int(t), int(row[t])) for t in np.nonzero(row >= 0)[0]]
        gotos = [(n_terms + 1 + int(a), int(tables.goto[u, a])) for a in np.nonzero(tables.goto[u] >= 0)[0]]
        out.append(shifts + gotos)
    return out


def _kernel_items(tables: ParseTables, step: list[list[tuple[int, int]]], n_sym: int) -> list[list[tuple[int, int]]]:
    """Per state, its kernel items as (rule, dot) with dot >= 1.

    Item ``(r, j)`` is in ``δ*(u, rhs_r[:j])`` for every state ``u`` with a goto on ``r``'s
    left-hand side (``u``'s closure holds ``r`` at dot 0), and every kernel item arises so.
    """
    n_states = tables.n_states
    delta = np.full((n_states, n_sym), -1, dtype=np.int64)
    for u in range(n_states):
        for s, g in step[u]:
            delta[u, s] = g
    items: list[set[tuple[int, int]]] = [set() for _ in range(n_states)]
    for r, body in enumerate(tables.right_hand_sides()):
        cur = np.unique(np.nonzero(tables.goto[:, tables.rule_lhs[r]] >= 0)[0])
        for j, code in enumerate(body, start=1):
            cur = delta[cur, code]
            cur = np.unique(cur[cur >= 0])
            for p in cur.tolist():
                items[p].add((r, j))
    return [sorted(s) for s in items]


def _safe_items(tables: ParseTables, kernels, step: list[list[tuple[int, int]]], n_sym: int) -> list[list[bool]]:
    """Per state and kernel item: whether finishing it is a safe completion (its rule reduces, in the state
    reached after the rest of its body, on every lookahead: no conflict resolution dropped it there)."""
    dropped = {(int(x), int(r)) for x, r in tables.dropped[:, :2]}
    if not dropped:
        return [[True] * len(items) for items in kernels]
    delta = np.full((tables.n_states, n_sym), -1, dtype=np.int64)
    for u in range(tables.n_states):
        for s, g in step[u]:
            delta[u, s] = g
    rhs = tables.right_hand_sides()
    out = []
    for p, items in enumerate(kernels):
        flags = []
        for r, j in items:
            x = p
            for code in rhs[r][j:]:
                x = int(delta[x, code]) if x >= 0 else -1
            flags.append(x >= 0 and (x, r) not in dropped)
        out.append(flags)
    return out


_ROOT = -1


def _exits_above(u: int, g: int, kernels, safe, goto: np.ndarray, lhs: list[int], suffix, end_state: int
                 ) -> tuple[list[tuple[int, int, int]], set[int]]:
    """The cheapest exit per (depth, nonterminal) of ``g`` directly above ``u`` (Dijkstra over same-level
    moves through safe items), and the states same-level moves reach (through any item)."""
    dist = {g: 0}
    heap = [(0, g)]
    best: dict[tuple[int, int], int] = {}
    while heap:
        d0, x = heapq.heappop(heap)
        if d0 > dist[x]:
            continue
        if x == end_state and d0 < best.get((0, _ROOT), INF):
            best[(0, _ROOT)] = d0  # the root item: shift the end marker, accept
        for (r, j), ok in zip(kernels[x], safe[x]):
            c = add(d0, suffix[r][j]) if ok else INF
            if c >= INF:
                continue
            if j == 1:
                y = int(goto[u, lhs[r]])
                if y >= 0 and c < dist.get(y, INF):
                    dist[y] = c
                    heapq.heappush(heap, (c, y))
            elif c < best.get((j - 1, lhs[r]), INF):
                best[(j - 1, lhs[r])] = c
    reached: set[int] = set()  # every same-level move counts here, affordable or not
    todo = [g]
    while todo:
        x = todo.pop()
        for r, j in kernels[x]:
            y = int(goto[u, lhs[r]]) if j == 1 else -1
            if y >= 0 and y not in reached:
                reached.add(y)
                todo.append(y)
    return [(c, d, max(a, 0)) for (d, a), c in sorted(best.items())], reached


def _blocking_rules(u: int, g: int, kernels, safe, goto: np.ndarray, lhs: list[int], suffix, end_state: int,
                    reached: set[int]) -> set[int]:
    """The rules of the unsafe items above ``u`` whose exclusion alone leaves ``g`` without an exit."""
    trusting = [[True] * len(items) for items in kernels]
    if not _exits_above(u, g, kernels, trusting, goto, lhs, suffix, end_state)[0]:
        return set()
    return {r for x in reached | {g} for (r, _), ok in zip(kernels[x], safe[x]) if not ok}


_MAX_REDUCTIONS = 10_000


def _epsilon_pushes(tables: ParseTables) -> int:
    """The most a stack can grow above its lowest point while reducing before one shift (0 without empty rules).

    Reductions before a shift all see the same lookahead, so from each top state ``t`` and
    lookahead ``a`` they are one deterministic sequence; it is followed while it stays above
    ``t`` (a reduction that pops ``t`` starts a new lowest point, covered by another ``t``).
    """
    if not (tables.rule_len == 0).any():
        return 0
    action = tables.action.tolist()
    goto = tables.goto.tolist()
    rule_len = tables.rule_len.tolist()
    rule_lhs = tables.rule_lhs.tolist()
    rise = 0
    for t in range(tables.n_states):
        for a in range(tables.end + 1):
            above = [t]
            for _ in range(_MAX_REDUCTIONS):
                code = action[above[-1]][a]
                if code >= -1:
                    break
                n = rule_len[-code - 2]
                if n >= len(above):
                    break
                del above[len(above) - n:]
                above.append(goto[above[-1]][rule_lhs[-code - 2]])
                rise = max(rise, len(above) - 1)
            else:
                return INF
    return rise
