"""Lexical completion costs: how many LLM tokens finish the pending lexeme (TruncProof Alg. 1).

A token *stays inside* the lexeme from lexer state ``q`` when the lexer DFA reads all its bytes
from ``q`` without dying: no lexeme is emitted, and the token leaves the lexer in ``δ*(q, t)``.
Those moves form a graph over lexer states; its shortest paths count the tokens that take a
pending lexeme to a state where it is complete as terminal ``X``.

A completion also has to *end* the lexeme: the next token's first byte must not extend it
(maximal munch). Each terminal gets one standalone witness (a shortest token path from the
initial state to a state accepting it; its first byte and end state are recorded), and each
state ``s`` where a lexeme can end gets a *trail*: 0 if no witness of a terminal that may follow
``s``'s terminal starts with a byte that extends ``s``, else the cost of the cheapest ignored
terminal (a separator) that ends ``s``'s lexeme and is itself ended by every such witness. A
terminal's cost is its witness plus its end state's trail; ``lex_cost[q, X]`` is the cheapest
way to finish the lexeme pending in ``q`` as ``X`` (last column: as an ignored terminal),
trail included. Every count here is realised by an actual token sequence.

Under a contextual lexer a lexeme starts in its mode's state, not in state 0: witnesses are kept per mode, a
trail covers every mode the next lexeme may start in, and ``term_cost[X]`` is the costliest over the modes ``X``
may be lexed in (so it is realised whichever mode a completion meets ``X`` in).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from grammask.automata.fallback import CHAIN
from grammask.automata.lexer import LexerAutomaton
from grammask.budget.costs import INF
from grammask.spanner import VocabTrie


@dataclass(frozen=True)
class LexicalCosts:
    """``lex_cost[q, X]`` (``X`` a parser terminal, or the last column: an ignored one), ``term_cost[X]`` and
    ``trail[s]`` (the separator a lexeme ending in state ``s`` needs, INF where none works)."""

    lex_cost: np.ndarray
    term_cost: np.ndarray
    trail: np.ndarray
    fall_row: np.ndarray
    """Per lexer state: its row of ``fall_cost`` (-1 where none: not a fallback state, or one whose emissions an
    indenter would have to measure)."""
    fall_cost: np.ndarray
    """``fall_cost[fall_row[q], X]``: the cheapest way on, as ``lex_cost``, where fallback ``q``'s long lexeme dies on
    the next token's first byte (after ``LexerAutomaton.fallen(q)`` is emitted): that token stays inside the lexeme
    then pending and counts one, the rest as ``lex_cost`` from where it ends."""


def build_lexical_costs(lexer: LexerAutomaton, parser_term: np.ndarray, trie: VocabTrie, follows: np.ndarray,
                        lexable: np.ndarray | None = None, skip: np.ndarray | None = None) -> LexicalCosts:
    """Lexical costs for ``lexer`` over the vocabulary ``trie``; ``follows[x, y]``: parser terminal ``y`` may follow ``x``.

    Parser terminals no lexer terminal stands for (a postlex's declared ones) cost INF here. A parser
    terminal several lexer terminals stand for (a semicolon and the newline read as one) takes the
    cheapest; a lexer terminal whose meaning depends on the lexer's mode (that newline) separates only
    in the mode where it is ignored.

    A contextual lexer's lexemes start in the state of their mode (``lexer.mode_start``): witnesses are kept per
    mode, ``lexable[m, y]`` says whether parser terminal ``y`` may be lexed in mode ``m`` (some LR state of the
    mode takes it), a trail covers every mode the next lexeme may start in, and ``term_cost[y]`` is the costliest
    of ``y``'s witnesses over the modes it may be lexed in (whichever mode a completion meets, it pays no more).
    """
    n = lexer.n_states
    starts, mode_of = _starts(lexer)
    n_starts = len(starts)
    origin = np.full(n, -1, dtype=np.int64)
    origin[starts] = np.arange(n_starts)
    adj, first = _inside_moves(trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, lexer.trans, n,
                               origin, n_starts)
    succ_ptr, succ = _csr(adj)
    pred_ptr, pred = _csr(adj.T)
    n_lex = len(lexer.terminals)
    accept = lexer.accept
    ignored = lexer.ignored
    n_parser = follows.shape[0]
    may_lex = np.ones((n_starts, n_parser), dtype=bool)
    if lexable is not None:
        may_lex[:] = False
        for m, k in enumerate(mode_of.tolist()):
            may_lex[k] |= lexable[m]
    banned = np.zeros((n, 257), dtype=bool)  # a contextual lexer's bans: bytes (256: the end) before which a lexeme may not end
    if lexer.ban is not None:
        has = lexer.ban_row >= 0
        banned[has] = lexer.ban[lexer.ban_row[has]]
    complete = completes(lexer)

    # 1. One witness per lexer terminal and start: shortest inside path from the start.
    wit_cost = np.full((n_starts, n_lex), INF, dtype=np.int64)
    wit_end = np.full((n_starts, n_lex), -1, dtype=np.int64)
    wit_byte = np.full((n_starts, n_lex), -1, dtype=np.int64)
    ends_somewhere = np.zeros(256, dtype=np.int64)  # per byte: how many accepting states it extends
    accepting = np.flatnonzero(complete)
    ends_somewhere[:] = (lexer.trans[accepting] >= 0).sum(axis=0)
    for k, s0 in enumerate(starts.tolist()):
        from0 = _bfs(succ_ptr, succ, np.array([s0]), n)
        for x in range(n_lex):
            states = np.flatnonzero(complete & (accept == x))
            if not len(states) or from0[states].min() >= INF:
                continue
            e = int(states[np.argmin(from0[states])])
            wit_cost[k, x], wit_end[k, x] = from0[e], e
            to_e = _bfs(pred_ptr, pred, np.array([e]), n)
            hops = np.nonzero(adj[s0] & (to_e == from0[e] - 1))[0]
            candidates = np.nonzero(first[k][hops].any(axis=0))[0]
            wit_byte[k, x] = candidates[np.argmin(ends_somewhere[candidates])]

    # 2. Trails: what it takes to end a lexeme at state s before the witness that follows it.
    moded = {lexer.terminals.index(a.rsplit(":", 1)[0]) for a, _ in lexer.aliases}
    ign_terms = np.nonzero(ignored)[0].tolist()
    parser_of = {int(t): int(parser_term[t]) for t in range(n_lex)}
    lex_of_parser: list[dict[int, int]] = []  # per start, each parser terminal's cheapest lexer terminal
    for k in range(n_starts):
        cheapest: dict[int, int] = {}
        for t, p in parser_of.items():
            if 0 <= p < n_parser and may_lex[k, p] and wit_end[k, t] >= 0 and (
                    p not in cheapest or wit_cost[k, t] < wit_cost[k, cheapest[p]]):
                cheapest[p] = t
        lex_of_parser.append(cheapest)
    follower_bytes = [[_follower_bytes(x, ignored, parser_of, follows, lex_of_parser[k], wit_byte[k])
                       for x in range(n_lex)] for k in range(n_starts)]
    cleans = []
    for k in range(n_starts):
        all_bytes = np.unique(wit_byte[k, list(lex_of_parser[k].values())]).astype(np.int64)
        cleans.append({i for i in ign_terms if wit_end[k, i] >= 0 and not _blocked(lexer, banned, wit_end[k, i], all_bytes)})
    armed = np.zeros(n, dtype=bool)  # with semicolon insertion, the second copy of the lexer's states
    if lexer.aliases:
        armed[n // 2:] = True

    def trail_of(s: int, dying: int = -1) -> int:
        """The separator a lexeme ending in ``s`` needs; with ``dying``, a fallback state whose long lexeme the next
        byte must not extend either (the lexeme in ``s`` is what the text after its earlier match became)."""

        def blocked(state: int, next_bytes: np.ndarray) -> bool:
            return _blocked(lexer, banned, state, next_bytes) or (
                state == s and dying >= 0 and bool((lexer.trans[dying, next_bytes] >= 0).any()))

        worst = 0
        for k in _next_starts(lexer, s, origin):
            fb = follower_bytes[k][accept[s]]
            if not blocked(s, fb):
                continue
            best = INF
            for i in cleans[k] - moded if armed[s] else cleans[k]:  # an armed newline would be a semicolon
                if not blocked(s, wit_byte[k, i: i + 1]) and not blocked(wit_end[k, i], fb):
                    best = min(best, wit_cost[k, i])
            worst = max(worst, best)
        if banned[s, 256]:  # the lexeme may not end the input: where a completion stops there, a separator ends it
            for k in _next_starts(lexer, s, origin):
                best = INF
                for i in ign_terms:
                    e = wit_end[k, i]
                    if e >= 0 and not banned[e, 256] and not blocked(s, wit_byte[k, i: i + 1]):
                        best = min(best, wit_cost[k, i])
                worst = max(worst, best)
        return worst

    trail = np.full(n, INF, dtype=np.int64)
    for s in accepting.tolist():
        trail[s] = trail_of(s)

    # 3. Finishing the pending lexeme: shortest inside paths to an accepting state, plus its trail.
    seed = np.full((n, n_parser + 1), INF, dtype=np.int64)
    for s in accepting.tolist():
        col = n_parser if ignored[accept[s]] else parser_of[int(accept[s])]
        seed[s, col] = min(seed[s, col], trail[s])
    lex_cost = _relax(succ_ptr, succ, seed)
    term_cost = np.full(n_parser, INF, dtype=np.int64)
    for p in range(n_parser):
        if not may_lex[:, p].any():
            continue
        costs = [wit_cost[k, t] + trail[wit_end[k, t]] if (t := lex_of_parser[k].get(p)) is not None else INF
                 for k in np.flatnonzero(may_lex[:, p]).tolist()]
        term_cost[p] = min(INF, max(costs))
    lex_cost = np.minimum(lex_cost, INF)
    column = np.array([n_parser if ignored[t] else parser_of[t] for t in range(n_lex)], dtype=np.int64)
    fall_row, fall_cost = _fall_costs(lexer, trie, lex_cost, column, complete, trail_of, skip)
    return LexicalCosts(lex_cost.astype(np.int32), np.minimum(term_cost, INF).astype(np.int32),
                        np.minimum(trail, INF).astype(np.int32), fall_row, fall_cost)


def _fall_costs(lexer: LexerAutomaton, trie: VocabTrie, lex_cost: np.ndarray, column: np.ndarray,
                complete: np.ndarray, trail_of, skip: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``LexicalCosts.fall_row`` and ``fall_cost``: ``column[t]`` is lexer terminal ``t``'s column of ``lex_cost``
    (below 0: none), ``complete`` as :func:`completes`, ``trail_of(s, q)`` the separator a lexeme ending in ``s``
    needs where the next byte must not extend fallback ``q`` either; ``skip[t]``: lexer terminal ``t``'s emission is
    not counted here (an indenter's newline), so fallbacks whose emissions hold one get no row.

    After the fallback's emissions the lexer goes on in ``r`` (its restart, past chain states). Counted: a token whose
    first byte ends the long lexeme and stays inside ``r``'s lexeme (one token, then ``lex_cost`` from where it ends),
    or, where ``r``'s lexeme is complete, ending it there (its trail, with the long lexeme ended too)."""
    fall_row = np.full(lexer.n_states, -1, dtype=np.int32)
    falls, rests = [], []
    for q in ([] if lexer.alt is None else np.flatnonzero(lexer.alt >= 0).tolist()):
        if skip is not None and skip[lexer.fallen(q)].any():
            continue
        r = int(lexer.restarts[q])
        while lexer.alt[r] == CHAIN:
            r = int(lexer.restarts[r])
        falls.append(q)
        rests.append(r)
    cost = np.full((len(falls), lex_cost.shape[1]), INF, dtype=np.int64)
    if not falls:
        return fall_row, cost.astype(np.int32)
    lands = _dying_moves(trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, lexer.trans,
                         np.array(falls, dtype=np.int64), np.array(rests, dtype=np.int64))
    for i, (q, r) in enumerate(zip(falls, rests)):
        ends = np.flatnonzero(lands[i])
        if len(ends):
            cost[i] = np.minimum(INF, lex_cost[ends].min(axis=0) + 1)
        if complete[r] and column[lexer.accept[r]] >= 0:
            col = column[lexer.accept[r]]
            cost[i, col] = min(cost[i, col], trail_of(r, q))
    fall_row[falls] = np.arange(len(falls), dtype=np.int32)
    return fall_row, np.minimum(cost, INF).astype(np.int32)


@nb.njit(cache=True)
def _dying_moves(node_byte, node_parent, node_end, node_tok_ptr, trans, falls, rests):
    """``out[i, q']``: some token whose first byte has no transition from fallback ``falls[i]`` but one from
    ``rests[i]`` (where the lexer goes on after the fallback's emissions) stays inside the lexeme from there and ends
    in ``q'``."""
    depth = node_depths(node_parent)
    levels = depth.max() + 1
    out = np.zeros((len(falls), trans.shape[0]), dtype=np.bool_)
    lane = np.empty(levels, dtype=np.int64)
    for i in range(len(falls)):
        n = 1
        while n < len(node_byte):
            d = depth[n]
            b = node_byte[n]
            if d == 1:
                s = trans[rests[i], b] if trans[falls[i], b] < 0 else -1
            else:
                s = trans[lane[d - 1], b]
            if s < 0:
                n = node_end[n]
                continue
            lane[d] = s
            if node_tok_ptr[n + 1] > node_tok_ptr[n]:
                out[i, s] = True
            n += 1
    return out


def completes(lexer: LexerAutomaton) -> np.ndarray:
    """Per lexer state: its lexeme is complete, and ending it emits it alone (not a fallback or chain state of
    Lark's backing up, whose ``accept`` is an earlier match with more text after it; not a reading state)."""
    out = lexer.accept >= 0
    if lexer.alt is not None:
        out &= lexer.alt == -1
    return out


def starts_of(lexer: LexerAutomaton) -> np.ndarray:
    """The states lexemes start in: state 0, or a contextual lexer's mode starts."""
    return _starts(lexer)[0]


def _starts(lexer: LexerAutomaton) -> tuple[np.ndarray, np.ndarray]:
    """The states lexemes start in (state 0; a contextual lexer's mode starts) and each mode's index among them."""
    if not lexer.contextual:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    starts, mode_of = np.unique(lexer.mode_start.astype(np.int64), return_inverse=True)
    return starts, mode_of.ravel()


def _next_starts(lexer: LexerAutomaton, s: int, origin: np.ndarray) -> list[int]:
    """The starts (indices) the lexeme after one ending in ``s`` may start in: the only one without modes (semicolon
    insertion's two copies lex alike), several at a contextual lexer's branch."""
    if not lexer.contextual:
        return [0]
    return sorted({int(origin[q]) for q in lexer.next_starts(s)})


def _follower_bytes(x: int, ignored: np.ndarray, parser_of: dict[int, int], follows: np.ndarray,
                    lex_of_parser: dict[int, int], wit_byte: np.ndarray) -> np.ndarray:
    """First bytes of the witnesses (of one start) of the parser terminals that may follow lexer terminal ``x``."""
    if ignored[x] or parser_of[x] < 0:
        ps = range(follows.shape[0])
    else:
        ps = np.nonzero(follows[parser_of[x]])[0].tolist()
    return np.unique([wit_byte[lex_of_parser[p]] for p in ps if p in lex_of_parser]).astype(np.int64)


def _blocked(lexer: LexerAutomaton, banned: np.ndarray, s: int, next_bytes: np.ndarray) -> bool:
    """Whether a lexeme in state ``s`` fails to end before some byte of ``next_bytes`` (it extends, or is banned)."""
    return bool((lexer.trans[s, next_bytes] >= 0).any() or banned[s, next_bytes].any())


@nb.njit(cache=True)
def node_depths(node_parent):
    """Depth of every node of a preorder trie (the root is 0)."""
    depth = np.zeros(len(node_parent), dtype=np.int32)
    for n in range(1, len(node_parent)):
        depth[n] = depth[node_parent[n]] + 1
    return depth


@nb.njit(cache=True)
def _inside_moves(node_byte, node_parent, node_end, node_tok_ptr, trans, n_states, origin, n_starts):
    """``adj[q, q']``: some token stays inside the lexeme from ``q`` and ends in ``q'``;
    ``first[k, q', b]``: some token whose first byte is ``b`` does so from start ``k`` (the state ``q`` with
    ``origin[q] == k``) to ``q'``.

    All lexer states are walked at once down the vocabulary trie, keeping per depth the compact
    list of states still alive; a subtree where none is alive is skipped.
    """
    depth = node_depths(node_parent)
    levels = depth.max() + 1
    adj = np.zeros((n_states, n_states), dtype=np.bool_)
    first = np.zeros((n_starts, n_states, 256), dtype=np.bool_)
    lane_state = np.empty((levels, n_states), dtype=np.int32)
    lane_origin = np.empty((levels, n_states), dtype=np.int32)
    alive = np.zeros(levels, dtype=np.int64)
    for q in range(n_states):
        lane_state[0, q] = q
        lane_origin[0, q] = q
    alive[0] = n_states
    first_byte = 0
    n = 1
    while n < len(node_byte):
        d = depth[n]
        b = node_byte[n]
        if d == 1:
            first_byte = b
        m = 0
        for k in range(alive[d - 1]):
            s = trans[lane_state[d - 1, k], b]
            if s >= 0:
                lane_state[d, m] = s
                lane_origin[d, m] = lane_origin[d - 1, k]
                m += 1
        alive[d] = m
        if m == 0:
            n = node_end[n]
            continue
        if node_tok_ptr[n + 1] > node_tok_ptr[n]:
            for k in range(m):
                q = lane_origin[d, k]
                adj[q, lane_state[d, k]] = True
                if origin[q] >= 0:
                    first[origin[q], lane_state[d, k], first_byte] = True
        n += 1
    return adj, first


def _csr(adj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(adj)
    ptr = np.zeros(adj.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=adj.shape[0]), out=ptr[1:])
    return ptr, cols.astype(np.int64)


@nb.njit(cache=True)
def _bfs(ptr, nbr, sources, n):
    """Unit-cost distances from ``sources`` over the CSR graph (INF where unreachable)."""
    dist = np.full(n, INF, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    head = 0
    tail = 0
    for s in sources:
        if dist[s] > 0:
            dist[s] = 0
            queue[tail] = s
            tail += 1
    while head < tail:
        x = queue[head]
        head += 1
        for k in range(ptr[x], ptr[x + 1]):
            y = nbr[k]
            if dist[y] >= INF:
                dist[y] = dist[x] + 1
                queue[tail] = y
                tail += 1
    return dist


@nb.njit(cache=True)
def _relax(ptr, succ, seed):
    """``out[q, c] = min over paths q -> s of (tokens on the path + seed[s, c])``, by Bellman-Ford sweeps."""
    out = seed.copy()
    changed = True
    while changed:
        changed = False
        for q in range(out.shape[0]):
            for k in range(ptr[q], ptr[q + 1]):
                s = succ[k]
                for c in range(out.shape[1]):
                    v = out[s, c] + 1
                    if v < out[q, c]:
                        out[q, c] = v
                        changed = True
    return out
