"""Deterministic automata over Unicode scalar values, for the Boolean algebra of string languages.

JSON Schema combines string constraints (``pattern``, ``format``, lengths, ``enum``, ``not``)
by intersection and difference, which regexes cannot express directly. A :class:`CharDFA` is
built from a regex AST (:mod:`grammask.automata.regex`), combined by product constructions,
tested for emptiness and inclusion, and turned back into an AST by state elimination.
Transitions are labelled with disjoint code point ranges.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from grammask.automata.dfa import coarsest_partition
from grammask.automata.regex import Alt, Chars, Concat, Node, Repeat
from grammask.automata.utf8 import CodeRanges, normalize
from grammask.errors import NO_DEADLINE, Deadline
from grammask.grammar.regex_frontend import EPSILON, NOTHING, alt, concat, repeat

PHASE = "the JSON Schema string languages"
"""The compile phase a timeout in the string languages names."""

# One state's transitions: sorted, disjoint (lo, hi, target) triples.
Row = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, eq=False)
class CharDFA:
    """A trimmed deterministic automaton: state 0 is the start, every state can reach an accept.

    An automaton with no accepting state is the single state 0 with no transitions (the empty
    language). A missing transition means the string can no longer be accepted.
    """

    rows: tuple[Row, ...]
    accepting: frozenset[int]

    @property
    def n_states(self) -> int:
        return len(self.rows)

    def is_empty(self) -> bool:
        return not self.accepting

    def accepts(self, text: str) -> bool:
        state = 0
        for ch in text:
            state = _step(self.rows[state], ord(ch))
            if state < 0:
                return False
        return state in self.accepting

    @cached_property
    def single_string(self) -> str | None:
        """The one string of the language, if it has exactly one."""
        out = []
        state = 0
        seen = set()
        while True:
            seen.add(state)
            row = self.rows[state]
            if state in self.accepting:
                return "".join(out) if not row else None
            if len(row) != 1 or row[0][0] != row[0][1] or row[0][2] in seen:
                return None
            out.append(chr(row[0][0]))
            state = row[0][2]

    @cached_property
    def key(self) -> tuple:
        """A canonical form: equal languages have equal keys (the automaton is minimal)."""
        return (self.rows, tuple(sorted(self.accepting)))


def _step(row: Row, c: int) -> int:
    for lo, hi, target in row:
        if lo <= c <= hi:
            return target
        if lo > c:
            break
    return -1


# --- construction ----------------------------------------------------------------------------


def dfa_from_ast(node: Node) -> CharDFA:
    """The minimal automaton of a regex AST."""
    nfa = _Nfa()
    start = nfa.new()
    final = nfa.build(node, start)
    return _determinize(nfa, start, final)


class _Nfa:
    def __init__(self) -> None:
        self.edges: list[list[tuple[CodeRanges, int]]] = []
        self.eps: list[list[int]] = []

    def new(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node: Node, src: int) -> int:
        if isinstance(node, Chars):
            dst = self.new()
            if node.ranges:
                self.edges[src].append((node.ranges, dst))
            return dst
        if isinstance(node, Concat):
            for part in node.parts:
                src = self.build(part, src)
            return src
        if isinstance(node, Alt):
            join = self.new()
            for option in node.options:
                self.eps[self.build(option, src)].append(join)
            return join
        return self._repeat(node, src)

    def _repeat(self, node: Repeat, src: int) -> int:
        for _ in range(node.min):
            src = self.build(node.node, src)
        if node.max is None:
            loop = self.new()
            self.eps[src].append(loop)
            self.eps[self.build(node.node, loop)].append(loop)
            return loop
        join = self.new()
        for _ in range(node.max - node.min):
            self.eps[src].append(join)
            src = self.build(node.node, src)
        self.eps[src].append(join)
        return join

    def closure(self, states) -> frozenset[int]:
        seen = set(states)
        todo = list(seen)
        while todo:
            for t in self.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


def _split_ranges(labelled: list[tuple[int, int, int]]) -> list[tuple[int, int, frozenset[int]]]:
    """Cut overlapping labelled ranges into disjoint pieces, each with the labels covering it."""
    points = sorted({lo for lo, _, _ in labelled} | {hi + 1 for _, hi, _ in labelled})
    out = []
    for a, b in itertools.pairwise(points):
        labels = frozenset(t for lo, hi, t in labelled if lo <= a and b - 1 <= hi)
        if labels:
            out.append((a, b - 1, labels))
    return out


def _determinize(nfa: _Nfa, start: int, final: int) -> CharDFA:
    first = nfa.closure([start])
    ids = {first: 0}
    subsets = [first]
    rows: list[list[tuple[int, int, int]]] = []
    while len(rows) < len(subsets):
        labelled = [(lo, hi, t) for s in subsets[len(rows)] for ranges, t in nfa.edges[s] for lo, hi in ranges]
        row = []
        for lo, hi, targets in _split_ranges(labelled):
            subset = nfa.closure(targets)
            if subset not in ids:
                ids[subset] = len(subsets)
                subsets.append(subset)
            row.append((lo, hi, ids[subset]))
        rows.append(row)
    accepting = {i for i, s in enumerate(subsets) if final in s}
    return minimize(rows, accepting)


def minimize(rows: list[list[tuple[int, int, int]]] | tuple[Row, ...], accepting: set[int] | frozenset[int],
             deadline: Deadline = NO_DEADLINE) -> CharDFA:
    """Trim and minimize an automaton given as rows from start state 0; renumber breadth-first. Raises
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed (checked between the steps)."""
    deadline.check(PHASE)
    live = _co_reachable(rows, accepting)
    if 0 not in live:
        return CharDFA(((),), frozenset())
    rows = [tuple((lo, hi, t) for lo, hi, t in row if t in live) if s in live else () for s, row in enumerate(rows)]
    deadline.check(PHASE)
    block = _equivalent(rows, sorted(live), accepting)
    deadline.check(PHASE)
    order = {block[0]: 0}
    todo = [0]
    rep = {}
    for s in sorted(live):
        rep.setdefault(block[s], s)
    out_rows: list[Row] = []
    i = 0
    while i < len(todo):
        s = todo[i]
        i += 1
        merged = _merge_row((lo, hi, block[t]) for lo, hi, t in rows[s])
        for _, _, b in merged:
            if b not in order:
                order[b] = len(order)
                todo.append(rep[b])
        out_rows.append(tuple((lo, hi, order[b]) for lo, hi, b in merged))
    return CharDFA(tuple(out_rows), frozenset(order[block[s]] for s in live if s in accepting))


def _equivalent(rows, live: list[int], accepting) -> dict[int, int]:
    """Each live state's block of equivalent states: the rows as a table over the code point intervals their
    edges cut, refined by :func:`~grammask.automata.dfa.coarsest_partition`."""
    index = {s: i for i, s in enumerate(live)}
    points = sorted({lo for s in live for lo, _, _ in rows[s]} | {hi + 1 for s in live for _, hi, _ in rows[s]})
    at = {p: i for i, p in enumerate(points)}
    columns = np.full((len(live), max(len(points) - 1, 1)), -1, dtype=np.int32)
    for i, s in enumerate(live):
        for lo, hi, t in rows[s]:
            columns[i, at[lo] : at[hi + 1]] = index[t]
    labels = np.array([s in accepting for s in live])
    return dict(zip(live, coarsest_partition(columns, labels).tolist(), strict=True))


def _merge_row(edges) -> Row:
    out: list[tuple[int, int, int]] = []
    for lo, hi, t in sorted(edges):
        if out and out[-1][2] == t and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, t)
        else:
            out.append((lo, hi, t))
    return tuple(out)


def _co_reachable(rows, accepting) -> set[int]:
    preds: dict[int, set[int]] = {}
    for s, row in enumerate(rows):
        for _, _, t in row:
            preds.setdefault(t, set()).add(s)
    live = set(accepting)
    todo = list(live)
    while todo:
        for p in preds.get(todo.pop(), ()):
            if p not in live:
                live.add(p)
                todo.append(p)
    return live


# --- Boolean operations ----------------------------------------------------------------------

DEAD = -1


def product(a: CharDFA, b: CharDFA, mode: str, deadline: Deadline = NO_DEADLINE) -> CharDFA:
    """``mode`` ``"and"``: the intersection; ``"minus"``: the strings of ``a`` not in ``b``; ``"or"``: the union.
    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed."""
    return minimize(*_product_rows(a, b, mode, deadline), deadline)


def _product_rows(a: CharDFA, b: CharDFA, mode: str,
                  deadline: Deadline = NO_DEADLINE) -> tuple[list[list[tuple[int, int, int]]], set[int]]:
    """The reachable part of the product automaton (rows from state 0) and its accepting states (``deadline``
    checked every 128 rows)."""
    ids = {(0, 0): 0}
    pairs = [(0, 0)]
    rows: list[list[tuple[int, int, int]]] = []
    while len(rows) < len(pairs):
        if len(rows) % 128 == 127:
            deadline.check(PHASE)
        x, y = pairs[len(rows)]
        ra = a.rows[x] if x != DEAD else ()
        rb = b.rows[y] if y != DEAD else ()
        labelled = [(lo, hi, 0) for lo, hi, _ in ra] + [(lo, hi, 1) for lo, hi, _ in rb]
        row = []
        for lo, hi, which in _split_ranges(labelled):
            tx = _step(ra, lo) if 0 in which else DEAD
            ty = _step(rb, lo) if 1 in which else DEAD
            if (mode == "and" and (tx == DEAD or ty == DEAD)) or (mode == "minus" and tx == DEAD):
                continue
            pair = (tx, ty)
            if pair not in ids:
                ids[pair] = len(pairs)
                pairs.append(pair)
            row.append((lo, hi, ids[pair]))
        rows.append(row)
    accepting = set()
    for i, (x, y) in enumerate(pairs):
        in_a, in_b = x in a.accepting, y in b.accepting
        if (mode == "and" and in_a and in_b) or (mode == "minus" and in_a and not in_b) or (mode == "or" and (in_a or in_b)):
            accepting.add(i)
    return rows, accepting


def raw_product(a: CharDFA, b: CharDFA, mode: str, deadline: Deadline = NO_DEADLINE) -> CharDFA:
    """:func:`product` without trimming or minimizing (for questions about its strings, not for keeping)."""
    rows, accepting = _product_rows(a, b, mode, deadline)
    return CharDFA(tuple(tuple(r) for r in rows), frozenset(accepting))


def is_subset(a: CharDFA, b: CharDFA, deadline: Deadline = NO_DEADLINE) -> bool:
    """Whether every string of ``a`` is in ``b``: no accepting state of ``a`` minus ``b`` is reachable."""
    return not _product_rows(a, b, "minus", deadline)[1]


# --- back to a regex AST ---------------------------------------------------------------------


def dfa_to_ast(dfa: CharDFA, deadline: Deadline = NO_DEADLINE) -> Node:
    """A regex AST for the automaton's language, by state elimination (fewest paths first).

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed (checked
    before each path is rerouted).
    """
    if dfa.is_empty():
        return NOTHING
    start, final = -1, -2
    edges: dict[int, dict[int, Node]] = {start: {0: EPSILON}}
    for s, row in enumerate(dfa.rows):
        out: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, t in row:
            out.setdefault(t, []).append((lo, hi))
        edges[s] = {t: Chars(normalize(r)) for t, r in out.items()}
        if s in dfa.accepting:
            edges[s][final] = EPSILON
    edges[final] = {}
    preds: dict[int, set[int]] = {s: set() for s in edges}  # the other states with an edge to s
    for p, out_edges in edges.items():
        for t in out_edges:
            if t != p:
                preds[t].add(p)
    remaining = set(range(dfa.n_states))
    while remaining:
        deadline.check(PHASE)
        k = min(remaining, key=lambda s: (len(preds[s]) * (len(edges[s]) - (s in edges[s])), s))
        loop = edges[k].pop(k, None)
        middle = repeat(loop, 0, None) if loop is not None else EPSILON
        for p in sorted(preds[k], key=lambda p: (p != start, p)):  # the order the states were made in
            head = edges[p].pop(k)
            for t, tail in edges[k].items():
                deadline.check(PHASE)
                path = concat(head, middle, tail)
                edges[p][t] = alt(edges[p][t], path) if t in edges[p] else path
                if t != p:
                    preds[t].add(p)
        for t in edges[k]:
            preds[t].discard(k)
        del edges[k], preds[k]
        remaining.discard(k)
    return edges[start].get(final, NOTHING)
