"""LALR(1) tables of a conflict-free grammar on integer items: the tables lark's analyzer gives, faster.

Lark's ``LALR_Analyzer`` builds the LR(0) automaton and its DeRemer-Pennello lookaheads on objects (rule
pointers hashed through their rules), which takes seconds on the few-thousand-rule grammars big JSON schemas
become. This module runs the same construction on integers: an item is a number (a rule's first item plus the
dot), a state's kernel a sorted tuple of items, a lookahead set a Python int used as a bit set. It follows lark's
construction step by step (its root rule, its reads, includes and lookback relations, quirks included), so the
tables are lark's, numbered in the canonical order :func:`~grammask.parser.tables.build_parse_tables` gives them.
On a grammar with a conflict it returns the first one (:class:`LALRConflict`), and such a grammar goes to lark's
analyzer and the conflict rules of :mod:`grammask.parser.conflicts`; on the few grammars it leaves to lark it gives
up (None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from grammask.errors import NO_DEADLINE, Deadline

ERROR = -1


class LALRTables(NamedTuple):
    """The LR states in canonical order (breadth first from the start over terminals, end of input, nonterminals)."""

    action: np.ndarray
    """``action[s, t]`` (``t`` a parser terminal, or the end of input last): the shift's target, -1, or a
    reduction's code ``-rule - 2``; a row of errors added last for the accept state."""
    goto: np.ndarray
    end_state: int
    """The state after the start symbol, where the end of input is accepted."""


class LALRConflict(NamedTuple):
    """Two actions of the LALR(1) tables on one lookahead: what lark's analyzer refuses in strict mode."""

    terminal: int
    """The lookahead: a terminal's index, or ``n_terminals`` for the end of input."""
    shift: bool
    """A shift and a reduction (else two reductions)."""


def lalr_tables(rules: list[tuple[int, tuple[int, ...]]], n_terminals: int, n_nonterminals: int, start: int,
                deadline: Deadline | None = None, goto: bool = True) -> LALRTables | LALRConflict | None:
    """LALR(1) tables of ``rules`` (lhs nonterminal index, right-hand side of symbol codes: terminals
    ``0..n_terminals-1``, nonterminal ``n`` as ``n_terminals + 1 + n``), start nonterminal ``start``; the first
    conflict where the tables have one (a shift and a reduction, or two reductions, on one lookahead); None where lark
    refuses the rules (a rule twice, a nonterminal without rules) and where reads relations form a cycle. Raises
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed. ``goto=False`` leaves the goto table
    empty (it has a cell per state and nonterminal: gigabytes on some schema grammars) where only the verdict
    matters."""
    check = (deadline or NO_DEADLINE).check
    base = n_terminals + 1
    root = n_nonterminals
    rules = [*rules, (root, (base + start,))]
    n_rules = len(rules)
    first_item = [0] * (n_rules + 1)
    for r, (_, rhs) in enumerate(rules):
        first_item[r + 1] = first_item[r] + len(rhs) + 1
    item_rule: list[int] = []
    item_next: list[int] = []
    for r, (_, rhs) in enumerate(rules):
        item_rule.extend([r] * (len(rhs) + 1))
        item_next.extend(rhs)
        item_next.append(-1)
    by_lhs: list[list[int]] = [[] for _ in range(n_nonterminals + 1)]
    for r, (lhs, _) in enumerate(rules):
        by_lhs[lhs].append(r)
    if len(set(rules)) < n_rules or any(s >= base and not by_lhs[s - base] for _, rhs in rules for s in rhs):
        return None  # lark refuses these
    check("the parse tables")
    nullable = _nullable(rules, n_nonterminals + 1, base)
    check("the parse tables")
    expand = _expansions(rules, by_lhs, first_item, base, check)

    # LR(0) states, numbered breadth first over symbols in code order: the canonical order.
    kernels: list[tuple[int, ...]] = [(first_item[n_rules - 1],)]
    state_of: dict[tuple[int, ...], int] = {kernels[0]: 0}
    closures: list[list[int]] = []
    trans: list[dict[int, int]] = []
    s = 0
    while s < len(kernels):
        if s % 256 == 0:
            check("the parse tables")
        kernel = kernels[s]
        closure = list(kernel)
        seen = set(kernel)
        for i in kernel:
            nxt = item_next[i]
            if nxt >= base:
                for j in expand[nxt - base]:
                    if j not in seen:
                        seen.add(j)
                        closure.append(j)
        closures.append(closure)
        moves: dict[int, list[int]] = {}
        for i in closure:
            nxt = item_next[i]
            if nxt >= 0:
                moves.setdefault(nxt, []).append(i + 1)
        out = {}
        for sym in sorted(moves):
            target = tuple(sorted(moves[sym]))
            t = state_of.get(target)
            if t is None:
                t = state_of[target] = len(kernels)
                kernels.append(target)
            out[sym] = t
        trans.append(out)
        s += 1
    n_states = len(kernels)

    # DeRemer-Pennello lookaheads, as lark's LALR_Analyzer computes them.
    check("the parse tables")
    nt_index: dict[tuple[int, int], int] = {}
    nt_list: list[tuple[int, int]] = []
    for p in range(n_states):
        for sym, q in trans[p].items():
            if sym >= base:
                nt_index[p, sym] = len(nt_list)
                nt_list.append((p, sym))
    direct = [0] * len(nt_list)
    reads: list[list[int]] = [[] for _ in nt_list]
    for k, (p, sym) in enumerate(nt_list):
        q = trans[p][sym]
        bits = 0
        for nxt in trans[q]:
            if nxt < base:
                bits |= 1 << nxt
            elif nullable[nxt - base]:
                reads[k].append(nt_index[q, nxt])
        direct[k] = bits
    direct[nt_index[0, base + start]] |= 1 << n_terminals
    check("the parse tables")
    # A nonterminal transition (p, A) includes and looks back through the items of p's closure whose rule is A's: the
    # kernel's and, A being predicted there, every rule of A from its start.
    nullable_after = _nullable_after(rules, first_item, nullable, base)
    includes: list[list[int]] = [[] for _ in nt_list]
    lookback: list[list[tuple[int, int]]] = [[] for _ in nt_list]
    kernel_by_lhs: dict[int, list[int]] = {}
    last = -1
    for k, (p, sym) in enumerate(nt_list):
        if p != last:
            last = p
            kernel_by_lhs = {}
            for i in kernels[p]:
                if i != first_item[item_rule[i]]:
                    kernel_by_lhs.setdefault(rules[item_rule[i]][0], []).append(i)
        lhs = sym - base
        for i in [*kernel_by_lhs.get(lhs, ()), *(first_item[r] for r in by_lhs[lhs])]:
            start_item = i
            state = p
            x = item_next[i]
            while x >= 0:
                if x >= base and nullable_after[i]:
                    includes[nt_index[state, x]].append(k)
                state = trans[state][x]
                i += 1
                x = item_next[i]
            r = item_rule[i]
            if start_item == first_item[r]:
                lookback[k].append((state, r))
    read_sets, cyclic = _digraph(reads, direct)
    if cyclic:
        return None  # lark's follow sets then share set objects across the cycle: left to lark
    follow, _ = _digraph(includes, read_sets)
    lookahead: dict[tuple[int, int], int] = {}
    for k, pairs in enumerate(lookback):
        for key in pairs:
            lookahead[key] = lookahead.get(key, 0) | follow[k]

    check("the parse tables")
    action = np.empty((n_states + 1, n_terminals + 1), dtype=np.int32)
    for lo in range(0, n_states + 1, 256):  # states x terminals can pass 10^8 cells: filling them takes a while
        check("the parse tables")
        action[lo : lo + 256] = ERROR
        for p in range(lo, min(lo + 256, n_states)):
            for sym, q in trans[p].items():
                if sym < base:
                    action[p, sym] = q
    check("the parse tables")
    conflict = _put_reductions(action, lookahead, n_terminals + 1)
    if conflict is not None:
        return conflict
    gotos = np.empty((n_states + 1 if goto else 0, n_nonterminals), dtype=np.int32)
    for p in range(len(gotos)):  # row by row: the table may take seconds to fill
        if p % 256 == 0:
            check("the parse tables")
        row = gotos[p]
        row.fill(ERROR)
        if p < n_states:
            for sym, q in trans[p].items():
                if sym >= base:
                    row[sym - base] = q
    return LALRTables(action, gotos, trans[0][base + start])


def _nullable(rules: list[tuple[int, tuple[int, ...]]], n_nonterminals: int, base: int) -> list[bool]:
    """Per nonterminal, whether it derives the empty string."""
    nullable = [False] * n_nonterminals
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            if not nullable[lhs] and all(s >= base and nullable[s - base] for s in rhs):
                nullable[lhs] = changed = True
    return nullable


def _nullable_after(rules: list[tuple[int, tuple[int, ...]]], first_item: list[int], nullable: list[bool],
                    base: int) -> list[bool]:
    """Per item before a symbol, whether every symbol after that one derives the empty string."""
    out = [False] * first_item[-1]
    for r, (_, rhs) in enumerate(rules):
        ok = True
        for d in range(len(rhs) - 1, -1, -1):
            out[first_item[r] + d] = ok
            ok = ok and rhs[d] >= base and nullable[rhs[d] - base]
    return out


def _put_reductions(action: np.ndarray, lookahead: dict[tuple[int, int], int], width: int) -> LALRConflict | None:
    """Write each reduction (state, rule) on the terminals of its lookahead bit set into ``action``; the first
    conflict (``action`` then partly written) where one meets a shift or another reduction."""
    if not lookahead:
        return None
    n_bytes = (width + 7) // 8
    blob = b"".join(bits.to_bytes(n_bytes, "little") for bits in lookahead.values())
    bits = np.unpackbits(np.frombuffer(blob, np.uint8).reshape(len(lookahead), n_bytes), axis=1, bitorder="little")
    rows, terms = np.nonzero(bits[:, :width])
    keys = np.array(list(lookahead), dtype=np.int64).reshape(-1, 2)
    cells = keys[rows, 0] * width + terms
    flat = action.reshape(-1)
    shifted = flat[cells] != ERROR
    if shifted.any():
        return LALRConflict(int(terms[np.argmax(shifted)]), True)
    unique, first, counts = np.unique(cells, return_index=True, return_counts=True)
    if unique.size < cells.size:
        return LALRConflict(int(terms[first[np.argmax(counts > 1)]]), False)
    flat[cells] = -keys[rows, 1] - 2
    return None


def _expansions(rules, by_lhs: list[list[int]], first_item: list[int], base: int,
                check: Callable[[str], None]) -> list[tuple[int, ...]]:
    """Per nonterminal, the first items of the rules its closure adds (its own and, through each one's first
    symbol, those of the nonterminals it starts with); ``check`` (a deadline's) every 1,024 nonterminals."""
    out = []
    for n in range(len(by_lhs)):
        if n % 1024 == 0:
            check("the parse tables")
        items: list[int] = []
        seen = {n}
        todo = [n]
        while todo:
            m = todo.pop(0)
            for r in by_lhs[m]:
                items.append(first_item[r])
                rhs = rules[r][1]
                if rhs and rhs[0] >= base and rhs[0] - base not in seen:
                    seen.add(rhs[0] - base)
                    todo.append(rhs[0] - base)
        out.append(tuple(items))
    return out


def _digraph(relation: list[list[int]], start: list[int]) -> tuple[list[int], bool]:
    """``F(x) = start(x) | the F(y) of every y that x relates to`` (DeRemer and Pennello's traversal over strongly
    connected components, without recursion), and whether some component has several members."""
    n = len(start)
    depth = [0] * n
    out = list(start)
    stack: list[int] = []
    cyclic = False
    for root in range(n):
        if depth[root]:
            continue
        stack.append(root)
        depth[root] = len(stack)
        frames = [[root, len(stack), 0]]
        while frames:
            frame = frames[-1]
            x, d, k = frame
            edges = relation[x]
            if k < len(edges):
                y = edges[k]
                if depth[y] == 0:  # visit y first; back here, y is handled below
                    stack.append(y)
                    depth[y] = len(stack)
                    frames.append([y, len(stack), 0])
                    continue
                frame[2] = k + 1
                if 0 < depth[y] < depth[x]:
                    depth[x] = depth[y]
                out[x] |= out[y]
                continue
            frames.pop()
            if depth[x] == d:
                cyclic |= stack[-1] != x
                while True:
                    z = stack.pop()
                    depth[z] = -1
                    out[z] = out[x]
                    if z == x:
                        break
    return out, cyclic


def _bits(bits: int) -> list[int]:
    """The set bits of ``bits``, lowest first."""
    out = []
    k = 0
    while bits:
        low = bits & -bits
        k = low.bit_length() - 1
        out.append(k)
        bits ^= low
    return out
