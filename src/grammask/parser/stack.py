"""LR stack simulation over persistent stacks, and tables keyed by them (numbers per stack, nodes by identity).

A stack is a linked list of ``(state, parent)`` tuples, so pushing shares the tail and a
stack can be kept, forked or rolled back for free: nothing is ever mutated.
"""

from __future__ import annotations

import itertools
from typing import Optional

from grammask.parser.tables import ERROR, ParseTables

Stack = tuple[int, Optional["Stack"]]


def unseen_nodes(stack: Stack | None, known: dict[int, tuple]) -> tuple[list[Stack], tuple | None]:
    """The nodes of ``stack`` from the top down to the first one that ``known`` holds by identity (``id(node)``),
    that one left out, and what ``known`` holds for it (None when it holds no node of the stack)."""
    chain = []
    node = stack
    while node is not None:
        hit = known.get(id(node))
        if hit is not None:
            return chain, hit
        chain.append(node)
        node = node[1]
    return chain, None


class StackNumbers:
    """A number per stack, equal for stacks equal by value and never given to two different ones, so that a table
    keyed by stacks hashes an int instead of a tuple chain. Numbered node by node: a new stack is a node or two on
    one already numbered, found by identity. Both tables are emptied past ``limit`` entries (a stack numbered again
    then gets a new number: keys made before only stop matching). Safe to share between threads."""

    def __init__(self, limit: int = 16_384):
        self._limit = limit
        self._nodes: dict[int, tuple[Stack, int]] = {}  # id(node) -> (the node, kept alive so the id is not reused; number)
        self._numbers: dict[tuple[int, int], int] = {}  # (LR state, number of the stack below) -> number
        self._count = itertools.count(1)

    def number(self, stack: Stack | None) -> int:
        """``stack``'s number (0 for the empty stack)."""
        hit = self._nodes.get(id(stack))
        if hit is not None:
            return hit[1]
        chain, hit = unseen_nodes(stack, self._nodes)
        number = 0 if hit is None else hit[1]
        if len(self._nodes) > self._limit:
            self._nodes.clear()
        if len(self._numbers) > self._limit:
            self._numbers.clear()
        for node in reversed(chain):
            known = self._numbers.get((node[0], number))
            number = known if known is not None else self._numbers.setdefault((node[0], number), next(self._count))
            self._nodes[id(node)] = (node, number)
        return number


class LRRunner:
    """Feeds terminals to persistent LR stacks using a grammar's :class:`ParseTables`."""

    __slots__ = ("action", "end", "goto", "initial", "rule_len", "rule_lhs", "tables")

    def __init__(self, tables: ParseTables):
        self.tables = tables
        # Rows as Python lists (indexing them is several times faster than NumPy scalar access), each converted when
        # first fed: a schema's goto table can hold millions of cells, and a matcher visits few of its states.
        self.action: list[list[int] | None] = [None] * tables.action.shape[0]
        self.goto: list[list[int] | None] = [None] * tables.goto.shape[0]
        self.rule_len = tables.rule_len.tolist()
        self.rule_lhs = tables.rule_lhs.tolist()
        self.end = tables.end
        self.initial: Stack = (tables.start_state, None)

    def feed(self, stack: Stack, terminal: int) -> Stack | None:
        """The stack after shifting ``terminal`` (reductions included), or None if it is a syntax error."""
        action = self.action
        while True:
            state = stack[0]
            code = (action[state] or self._action_row(state))[terminal]
            if code >= 0:
                return (code, stack)
            if code == ERROR:
                return None
            rule = -code - 2
            for _ in range(self.rule_len[rule]):
                stack = stack[1]
            state = stack[0]
            stack = ((self.goto[state] or self._goto_row(state))[self.rule_lhs[rule]], stack)

    def _action_row(self, state: int) -> list[int]:
        row = self.action[state] = self.tables.action[state].tolist()
        return row

    def _goto_row(self, state: int) -> list[int]:
        row = self.goto[state] = self.tables.goto[state].tolist()
        return row

    def feed_all(self, stack: Stack, terminals) -> Stack | None:
        """Feed a sequence of terminals; None as soon as one is an error."""
        for t in terminals:
            stack = self.feed(stack, t)
            if stack is None:
                return None
        return stack
