"""The precomputed budget tables of a compiled grammar, and their encoding as plain arrays.

Built once per grammar and vocabulary (the first time a budget is asked for); the disk cache
(:mod:`grammask.cache`) keeps them beside the compiled grammar, as kind :data:`BUDGET_KIND`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from grammask.budget.bounds import finish_bounds, state_bounds
from grammask.budget.lexical import LexicalCosts, build_lexical_costs
from grammask.budget.parser_costs import (
    ParserCosts,
    build_parser_costs,
    follow_terminals,
)

if TYPE_CHECKING:
    from grammask.engine import Engine

BUDGET_KIND = "budget1"
"""The cache kind of budget tables; the number changes with their format."""


@dataclass(frozen=True)
class BudgetTables:
    """Everything a budgeted matcher reads (see :mod:`.lexical`, :mod:`.parser_costs`, :mod:`.bounds`).

    ``state_bound[q]`` bounds (without the stack's level) the completion cost after any token
    read from lexer state ``q``; ``finish_bound`` and ``ignore_cost`` are its per-state parts.
    """

    lexical: LexicalCosts
    parser: ParserCosts
    finish_bound: np.ndarray
    ignore_cost: np.ndarray
    state_bound: np.ndarray
    seconds: float = 0.0

    @property
    def goto_exit_max(self) -> int:
        """The largest cheapest exit of a state entered on a nonterminal (see :mod:`.bounds`)."""
        n_nts = len(self.parser.nt_cost)
        return int(self.parser.exit_bound[len(self.parser.exit_bound) - n_nts:].max(initial=0))

    @property
    def eps1(self) -> int:
        return 1 + self.parser.eps_pushes


def build_budget_tables(engine: Engine) -> BudgetTables:
    """Compute the budget tables of a compiled grammar (seconds for large grammars and vocabularies)."""
    start = time.perf_counter()
    tables = engine.parse
    trie = engine.trie
    lexical = build_lexical_costs(engine.lexer, engine.parser_term, trie, follow_terminals(tables))
    parser = build_parser_costs(tables, lexical.term_cost)
    m = engine.masks
    fptr = m.follow_ptr.tolist()
    follow_sets = [(m.follow_terms[fptr[f]: fptr[f + 1]], bool(a)) for f, a in enumerate(m.follow_any.tolist())]
    finish, ignore = finish_bounds(lexical.lex_cost, follow_sets, m.state_follow, parser.exit_bound)
    partial = BudgetTables(lexical, parser, finish, ignore, np.zeros(0, dtype=np.int64))
    bound = state_bounds(trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, engine.lexer.trans,
                         engine.lexer.accept, engine.lexer.restarts, engine.parser_term, finish, ignore, parser.exit_bound,
                         partial.goto_exit_max, partial.eps1)
    return dataclasses.replace(partial, state_bound=bound, seconds=time.perf_counter() - start)


_PARTS = {"lexical": LexicalCosts, "parser": ParserCosts}
_ARRAYS = ("finish_bound", "ignore_cost", "state_bound")


def encode_budget_tables(t: BudgetTables) -> tuple[dict[str, np.ndarray], dict]:
    """``t`` as named arrays and JSON-able metadata (see :func:`decode_budget_tables`)."""
    arrays = {f: getattr(t, f) for f in _ARRAYS}
    scalars = {}
    for part in _PARTS:
        for f in dataclasses.fields(getattr(t, part)):
            value = getattr(getattr(t, part), f.name)
            if isinstance(value, np.ndarray):
                arrays[f"{part}.{f.name}"] = value
            else:
                scalars[f"{part}.{f.name}"] = value
    return arrays, {"scalars": scalars, "seconds": t.seconds}


def decode_budget_tables(arrays: dict[str, np.ndarray], meta: dict) -> BudgetTables:
    """The tables :func:`encode_budget_tables` encoded; KeyError or TypeError if a field is missing."""
    values = {**arrays, **meta["scalars"]}
    parts = {
        part: cls(**{f.name: values[f"{part}.{f.name}"] for f in dataclasses.fields(cls)})
        for part, cls in _PARTS.items()
    }
    return BudgetTables(**parts, **{f: arrays[f] for f in _ARRAYS}, seconds=float(meta["seconds"]))
