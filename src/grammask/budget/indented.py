"""Completion costs under an indenter where they depend on the indentation context, worked out in Python.

A matcher state under Lark's ``Indenter`` also has its level stack, bracket depth and the width of
the pending newline's line (:mod:`grammask.indentation`). Tokens that emit no newline and leave none
pending are costed by :mod:`.runtime` like any others (the levels only say how many dedents the end
of input brings). The others are fed here through the indenter (``IndentRuntime``), and a pending
newline lexeme is finished at every width that can go on: each open level (same level, or dedents
to it), one level deeper (an indent), or the end of input; what it takes to write that width comes
from :mod:`.newlines`. Levels wider than ``width_cap`` cost INF (a budget masks the newline that
would open one), so every completion counted writes newlines of counted widths.
"""

from __future__ import annotations

import numpy as np

from grammask.budget.costs import INF, add
from grammask.budget.runtime import REJECTED, BudgetRuntime, NodeTable, StateTokens

_NO_BREAK = -1  # a pending newline's line before its first line break (grammask.indentation.NO_BREAK)


class IndentCosts:
    """Costs of matcher states and token groups whose indentation context matters (see the module docstring)."""

    def __init__(self, rt: BudgetRuntime):
        self.rt = rt
        engine = rt.engine
        self.spec = engine.indent
        self.newlines = rt.tables.newlines
        self.lex_cost = rt.tables.lexical.lex_cost
        self._single = np.zeros(1, dtype=np.int64)
        self._no_seq = (np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32))

    def state_cost(self, nodes: NodeTable, lexstate: int, stack: tuple, context: tuple) -> int:
        """``C`` of a matcher state with indentation ``context`` (levels, depth, pending line width)."""
        levels, depth, width = context
        if levels[-1] > self.newlines.width_cap:
            return INF
        cost = self._probe(nodes, stack, levels, lexstate)
        if self.newlines.row[lexstate] >= 0:
            pending = self._pending_newline(nodes, lexstate, stack, levels, depth, width)
            cost = pending if cost == REJECTED else min(cost, pending)
        return cost

    def group_costs(self, nodes: NodeTable, groups: StateTokens, which: np.ndarray, stack: tuple,
                    context: tuple) -> np.ndarray:
        """``C`` after each group ``which[i]`` (REJECTED where the grammar forbids it)."""
        levels, depth, width = context
        out = np.empty(len(which), dtype=np.int64)
        for i, g in enumerate(which.tolist()):
            seq = groups.seq_terms[groups.seq_ptr[g]: groups.seq_ptr[g + 1]].tolist()
            fed = self.rt.indenter.feed_all(stack, levels, depth, seq, width)
            if fed is None:
                out[i] = REJECTED
                continue
            key = int(groups.end_width[g])
            if key > 0:  # the token's own line break: its width
                end_width = key - 2
            elif key < 0 and width != _NO_BREAK:  # the pending line goes on: the token adds to its width
                end_width = width - key - 1
            else:
                end_width = _NO_BREAK
            out[i] = self.state_cost(nodes, int(groups.ends[g]), fed[0], (fed[1], fed[2], end_width))
        return out

    def _probe(self, nodes: NodeTable, stack: tuple, levels: tuple[int, ...], lexstate: int) -> int:
        row = nodes.row(stack, self.rt, levels)
        return int(self.rt.probe_costs(nodes, row, self._single, *self._no_seq, np.array([lexstate]),
                                       n_dedents=len(levels) - 1, flat=bool(nodes.flat[row]))[0])

    def _pending_newline(self, nodes: NodeTable, q: int, stack: tuple, levels: tuple[int, ...], depth: int,
                         width: int) -> int:
        """The cheapest way on from a newline lexeme pending in lexer state ``q`` with its line ``width`` wide."""
        ind, spec = self.rt.indenter, self.spec
        items = ind.finish(q, width)
        if items is not None:
            fed = ind.feed_all(stack, levels, depth, items)
            if fed is not None and ind.accepts_end(fed[0], fed[1]):
                return 0
        if depth > 0:  # inside brackets the newline is dropped, like an ignored lexeme
            return add(int(self.lex_cost[q, spec.newline]), self._probe(nodes, stack, levels, 0))
        nl = self.newlines
        move = nl.move[nl.row[q], nl.width_index(width)]
        best = INF
        for target in sorted({*levels, levels[-1] + 1}):
            if target > nl.width_cap + 1:
                continue
            steps = int(move[target + 1])
            if steps >= best:
                continue
            fed = ind.feed(stack, levels, 0, spec.newline_id(target))
            if fed is None or fed[1][-1] > nl.width_cap:
                continue
            rest = self._probe(nodes, fed[0], fed[1], self.rt.after_newline_state)
            if rest >= 0:
                best = min(best, add(steps, rest))
        return best
