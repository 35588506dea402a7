"""A token limit on one matcher (and its forks): which tokens keep a complete output within ``N`` tokens.

``N`` counts every token the matcher accepts, EOS included, so a budgeted generation always ends
with EOS at token ``N`` or before. With ``used`` tokens accepted, token ``t`` is allowed iff the
grammar allows it and ``used + 1 + C(after t) + 1 <= N`` (:mod:`.runtime` defines ``C``); EOS iff
the output is a sentence. Most steps are decided by bounds (:mod:`.bounds`): when even the
costliest token of the lexer state fits, the grammar's own mask is the answer; otherwise the
allowed token groups whose static bound does not fit get a bound from the top of the stack
(cached per context), and only those that still do not fit are costed exactly, against the real
stack. A mask is remembered so that ``advance`` of a token it allows needs no costing.

Under an indenter the matcher also passes its indentation context (levels, bracket depth, pending
line width); tokens whose cost depends on it are costed by :mod:`.indented`, and the static bounds
hold only while at most :data:`~.tables.DEDENT_CAP` levels are open and blocks may still be opened
(otherwise every allowed token is costed).
"""

from __future__ import annotations

import numpy as np

from grammask.budget.costs import INF
from grammask.budget.indented import IndentCosts
from grammask.budget.runtime import (
    REJECTED,
    BudgetRuntime,
    StateTokens,
    remove_over,
    select_groups,
    spread_costs,
)
from grammask.budget.tables import DEDENT_CAP
from grammask.errors import BudgetError, ConfigurationError


class TokenBudget:
    """The limit ``N`` of a matcher family (None: costs only), with the cost rows of the stacks it has seen.

    Creating one with a limit checks that a complete output fits from the given state: raises
    :class:`BudgetError` if none does, :class:`ConfigurationError` if ``max_tokens`` is not an int.
    ``grammar_name`` names the grammar in that error. ``context``: the indentation context of the
    state (levels, depth, pending width) under an indenter, else None (the same in every method).
    """

    __slots__ = ("_indented", "_last", "limit", "nodes", "rt")

    def __init__(self, rt: BudgetRuntime, max_tokens: int | None, lexstate: int, stack: tuple, grammar_name: str,
                 context: tuple | None = None):
        self.rt = rt
        self.nodes = self.rt.new_nodes()
        self.limit = max_tokens
        self._indented = None if rt.engine.indent is None else IndentCosts(rt)
        self._last: tuple | None = None  # (lexstate, stack, used, context, budgeted row or None if all fit) of the last mask
        if max_tokens is None:
            return
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
            raise ConfigurationError(f"max_tokens must be an int, got {type(max_tokens).__name__}")
        self.limit = int(max_tokens)
        need = self.min_tokens(lexstate, stack, context)
        if need >= INF:
            raise BudgetError(
                f"grammar {grammar_name!r}: budgets count no complete output from this state (every completion "
                "goes through a reduction an LALR conflict resolution drops; see the warning and compiled.notes)"
            )
        if need > self.limit:
            raise BudgetError(
                f"max_tokens={self.limit} is too small for grammar {grammar_name!r} with vocabulary "
                f"{rt.engine.vocab.name!r}: a complete output takes at least {need} tokens (EOS included); "
                f"use max_tokens={need} or more"
            )

    def min_tokens(self, lexstate: int, stack: tuple, context: tuple | None = None) -> int:
        """Tokens (EOS included) of the cheapest complete continuation grammask knows (INF: none)."""
        cost = self._state_cost(lexstate, stack, context)
        return INF if cost == REJECTED or cost >= INF else cost + 1

    def _state_cost(self, lexstate: int, stack: tuple, context: tuple | None) -> int:
        if self._indented is None:
            return self.rt.state_cost(self.nodes, lexstate, stack)
        return self._indented.state_cost(self.nodes, lexstate, stack, context)

    def _top(self, stack: tuple, context: tuple | None) -> tuple[int, int, bool]:
        """The row of ``stack``'s top, its level, and whether the static bounds hold there."""
        levels = (0,) if context is None else context[0]
        top = self.nodes.row(stack, self.rt, levels)
        static = context is None or (len(levels) - 1 <= DEDENT_CAP and not self.nodes.flat[top])
        return top, int(self.nodes.level[top]), static

    def restrict(self, row: np.ndarray, lexstate: int, stack: tuple, used: int, context: tuple | None = None) -> None:
        """Clear from the grammar's mask ``row`` every token that would not leave room to finish."""
        slack = self.limit - used - 2
        if slack < 0:
            rt = self.rt.engine.view
            eos = row[rt.eos_words] & rt.eos_bits
            row[:] = 0
            row[rt.eos_words] |= eos
            self._last = (lexstate, stack, used, context, row.copy())
            return
        self._last = (lexstate, stack, used, context, None)
        top, level, static = self._top(stack, context)
        if static and self.rt.state_bound(lexstate) + level <= slack:
            return  # even the costliest token of this lexer state fits
        groups = self.rt.groups(lexstate)
        n_dedents = 0 if context is None else len(context[0]) - 1
        if static:
            states, known = self.rt.context_bounds(lexstate, stack, len(groups.ends), n_dedents)
            threshold = slack - level
            selected, n_todo = select_groups(row, groups.neg_bounds, threshold, groups.first_word, groups.first_bit,
                                             known)
            check, todo = selected[n_todo:], selected[:n_todo]
        else:
            check = np.flatnonzero(row[groups.first_word] & groups.first_bit)
            todo = check[:0]
        indented = check[:0]
        if groups.context is not None:
            indented = np.concatenate([check[groups.context[check]], todo[groups.context[todo]]])
            check, todo = check[~groups.context[check]], todo[~groups.context[todo]]
        if len(todo):
            self.rt.fill_context_bounds(states, groups, todo, known, n_dedents)
            check = np.concatenate([check, todo[known[todo] > threshold]])
        changed = False
        if len(check):
            costs = self._costs(groups, top, check, slack, context)
            remove_over(row, check, costs, slack, groups.tok_ptr, groups.tok_words, groups.tok_bits)
            changed = True
        if len(indented):
            costs = self._indented.group_costs(self.nodes, groups, indented, stack, context)
            if not self.rt.several_readings:  # a token's only reading: rejected here means not counted
                costs = np.where(costs < 0, INF, costs)
            remove_over(row, indented, costs, slack, groups.tok_ptr, groups.tok_words, groups.tok_bits)
            changed = True
        if changed:
            self._last = (lexstate, stack, used, context, row.copy())

    def allows(self, token_id: int, lexstate: int, stack: tuple, used: int, new_lexstate: int, new_stack: tuple,
               context: tuple | None = None, new_context: tuple | None = None) -> bool:
        """Whether a (grammatical) step by ``token_id`` from the first state to the second leaves room to finish."""
        last = self._last
        if last is not None and last[0] == lexstate and last[1] is stack and last[2] == used and last[3] == context:
            return last[4] is None or bool((int(last[4][token_id >> 5]) >> (token_id & 31)) & 1)
        slack = self.limit - used - 2
        _, level, static = self._top(stack, context)
        if static and self.rt.state_bound(lexstate) + level <= slack:
            return True
        return 0 <= self._state_cost(new_lexstate, new_stack, new_context) <= slack

    def next_token_costs(self, lexstate: int, stack: tuple, used: int, n_logits: int,
                         context: tuple | None = None) -> np.ndarray:
        """Per token: :meth:`min_tokens` after it, or -1 where the grammar or the limit forbids it (EOS not set)."""
        groups = self.rt.groups(lexstate)
        top, _, _ = self._top(stack, context)
        every = np.arange(len(groups.ends))
        if groups.context is None:
            costs = self._costs(groups, top, every, INF, context)
        else:
            costs = np.empty(len(every), dtype=np.int64)
            inside = groups.context
            costs[~inside] = self._costs(groups, top, every[~inside], INF, context)
            costs[inside] = self._indented.group_costs(self.nodes, groups, every[inside], stack, context)
        after = np.where((costs >= 0) & (costs < INF), costs + 1, -1)
        if self.limit is not None:
            after[used + 1 + after > self.limit] = -1
        out = np.full(n_logits, -1, dtype=np.int64)
        spread_costs(after, groups.tok_ptr, groups.tok_words, groups.tok_bits, out)
        return out

    def _costs(self, groups: StateTokens, top: int, which: np.ndarray, cap: int, context: tuple | None) -> np.ndarray:
        n_dedents = 0 if context is None else len(context[0]) - 1
        return self.rt.probe_costs(self.nodes, top, which, groups.seq_ptr, groups.seq_terms, groups.ends, cap,
                                   n_dedents, bool(self.nodes.flat[top]))
