"""Stack-independent upper bounds on the completion cost after a token: what lets most masks skip the budget.

After a token that emits ``k`` parser terminals ``E`` and leaves the lexer in state ``q'``, with
``X`` the terminal the pending lexeme becomes, the stack holds at most ``m = 1 + (k + 1)(1 + ε)``
states above the part of the old stack the token did not touch (``ε``: how far reductions by
empty rules can raise the stack before one shift). Taking the top state's cheapest exit pops at
least one of them for at most ``exit_bound[X]`` tokens; the new top is entered by a goto, and so
are all later tops, each popped for at most ``goto_exit_max`` (the largest ``exit_bound`` of a
nonterminal), until one state sits on an untouched node ``N`` of the stack: a state a reduction
left there (one that same-level moves reach from the popped node's state), or any state if ``N``
is the top node. The matcher keeps, per stack, the *level*: the largest completion of such a
state on any of its nodes, and of the stack itself (when the token leaves it as it is). So

    cost after the token <= lex_cost[q', X] + exit_bound[X] + (m - 2) * goto_exit_max + level

for some acceptable ``X`` (and similarly when the pending lexeme ends as an ignored terminal);
:func:`token_bound` takes the maximum over the candidates, so it holds for whichever is acceptable.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from grammask.budget.costs import INF, add
from grammask.budget.lexical import node_depths


@nb.njit(cache=True)
def _times(n, cost):
    if n <= 0:
        return 0
    return INF if cost >= INF else min(INF, n * cost)


@nb.njit(cache=True)
def token_bound(n_emitted, last, end, finish_bound, ignore_cost, exit_bound, goto_exit_max, eps1):
    """Bound (without the stack's level) on the cost after a token emitting ``n_emitted`` terminals (the last
    one ``last``) and leaving lexer state ``end``; -1 if no pending terminal is possible."""
    out = -1
    shifted = n_emitted * eps1
    if end == 0 or ignore_cost[end] >= 0:
        base = 0 if end == 0 else ignore_cost[end]
        if n_emitted > 0:
            base = add(base, add(exit_bound[last], _times(shifted - 1, goto_exit_max)))
        out = base
    if end != 0 and finish_bound[end] >= 0:
        out = max(out, add(finish_bound[end], _times(shifted + eps1 - 1, goto_exit_max)))
    return out


def finish_bounds(lex_cost: np.ndarray, follow_sets: list[tuple[np.ndarray, bool]], state_follow: np.ndarray,
                  exit_bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per lexer state: max over its pending parser terminals X of ``lex_cost + exit_bound[X]`` (-1: none),
    and the cost of finishing it as an ignored terminal (-1: it cannot be one)."""
    n = lex_cost.shape[0]
    finish = np.full(n, -1, dtype=np.int64)
    ignore = np.full(n, -1, dtype=np.int64)
    for q in range(n):
        terms, any_ignored = follow_sets[state_follow[q]]
        terms = terms[terms < lex_cost.shape[1] - 1]  # an indenter's pending newline: see budget.tables
        if len(terms):
            finish[q] = min(INF, int((lex_cost[q, terms].astype(np.int64) + exit_bound[terms]).max()))
        if any_ignored:
            ignore[q] = lex_cost[q, -1]
    return finish, ignore


@nb.njit(cache=True)
def state_bounds(node_byte, node_parent, node_end, node_tok_ptr, trans, accept, restart, parser_term, weight,
                 finish_bound, ignore_cost, exit_bound, goto_exit_max, eps1):
    """Per lexer state ``q``: the largest :func:`token_bound` over the tokens that lex from ``q``.

    All states are walked at once down the vocabulary trie, as in the inside-move walk, but with
    the full lexing rule (lexemes are emitted, tokens die only where the rule rejects them; the
    next lexeme starts in ``restart[q]``, which may emit in turn). A lexeme of lexer terminal ``t`` counts as ``weight[t]``
    parser terminals (0: ignored), the last one ``parser_term[t]``.
    """
    n_states = trans.shape[0]
    depth = node_depths(node_parent)
    levels = depth.max() + 1
    out = np.full(n_states, -1, dtype=np.int64)
    state = np.empty((levels, n_states), dtype=np.int32)
    origin = np.empty((levels, n_states), dtype=np.int32)
    emitted = np.empty((levels, n_states), dtype=np.int32)
    last = np.empty((levels, n_states), dtype=np.int32)
    alive = np.zeros(levels, dtype=np.int64)
    for q in range(n_states):
        state[0, q] = q
        origin[0, q] = q
        emitted[0, q] = 0
        last[0, q] = 0
    alive[0] = n_states
    n = 1
    while n < len(node_byte):
        d = depth[n]
        b = node_byte[n]
        m = 0
        for k in range(alive[d - 1]):
            s = state[d - 1, k]
            e = emitted[d - 1, k]
            t_last = last[d - 1, k]
            nxt = trans[s, b]
            while nxt < 0:  # emit; a fallback's restart may emit in turn (a chain of Lark's backing up)
                term = accept[s]
                if term < 0:
                    break
                if weight[term] > 0:
                    e += weight[term]
                    t_last = parser_term[term]
                s = restart[s]
                nxt = trans[s, b]
            if nxt < 0:
                continue
            state[d, m] = nxt
            origin[d, m] = origin[d - 1, k]
            emitted[d, m] = e
            last[d, m] = t_last
            m += 1
        alive[d] = m
        if m == 0:
            n = node_end[n]
            continue
        if node_tok_ptr[n + 1] > node_tok_ptr[n]:
            for k in range(m):
                bound = token_bound(emitted[d, k], last[d, k], state[d, k], finish_bound, ignore_cost, exit_bound,
                                    goto_exit_max, eps1)
                q = origin[d, k]
                out[q] = max(out[q], bound)
        n += 1
    return out
