"""The precomputed budget tables of a compiled grammar, and their place in the disk cache.

Built once per grammar and vocabulary (the first time a budget is asked for), then kept beside
the compiled grammar's cache file as ``<key>.budget.npz`` in the same format (plain arrays,
no pickles, keyed by the compiled grammar's cache key and :data:`BUDGET_FORMAT`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from grammask.budget.bounds import finish_bounds, state_bounds
from grammask.budget.lexical import LexicalCosts, build_lexical_costs
from grammask.budget.parser_costs import (
    ParserCosts,
    build_parser_costs,
    follow_terminals,
)
from grammask.cache import load_arrays, save_arrays
from grammask.errors import CacheError

if TYPE_CHECKING:
    from grammask.compiled import CompiledGrammar

log = logging.getLogger("grammask")

BUDGET_FORMAT = 1


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


def build_budget_tables(compiled: CompiledGrammar) -> BudgetTables:
    """Compute the budget tables of ``compiled`` (seconds for large grammars and vocabularies)."""
    from grammask.compiled import _vocab_trie as vocab_trie

    start = time.perf_counter()
    tables = compiled.tables
    trie = vocab_trie(compiled.vocab)
    lexical = build_lexical_costs(compiled.lexer, compiled.parser_term, trie, follow_terminals(tables))
    parser = build_parser_costs(tables, lexical.term_cost)
    m = compiled.mask_tables
    fptr = m.follow_ptr.tolist()
    follow_sets = [(m.follow_terms[fptr[f]: fptr[f + 1]], bool(a)) for f, a in enumerate(m.follow_any.tolist())]
    finish, ignore = finish_bounds(lexical.lex_cost, follow_sets, m.state_follow, parser.exit_bound)
    partial = BudgetTables(lexical, parser, finish, ignore, np.zeros(0, dtype=np.int64))
    bound = state_bounds(trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, compiled.lexer.trans,
                         compiled.lexer.accept, compiled.parser_term, finish, ignore, parser.exit_bound,
                         partial.goto_exit_max, partial.eps1)
    return dataclasses.replace(partial, state_bound=bound, seconds=time.perf_counter() - start)


_PARTS = {"lexical": LexicalCosts, "parser": ParserCosts}
_ARRAYS = ("finish_bound", "ignore_cost", "state_bound")


def save_budget_tables(path: Path, key: str, t: BudgetTables) -> None:
    """Write ``t`` to ``path`` for the compiled grammar of cache key ``key`` (a warning on failure)."""
    arrays = {f: getattr(t, f) for f in _ARRAYS}
    scalars = {}
    for part in _PARTS:
        for f in dataclasses.fields(getattr(t, part)):
            value = getattr(getattr(t, part), f.name)
            if isinstance(value, np.ndarray):
                arrays[f"{part}.{f.name}"] = value
            else:
                scalars[f"{part}.{f.name}"] = value
    meta = {"key": _file_key(key), "scalars": scalars, "seconds": t.seconds}
    try:
        save_arrays(path, arrays, meta)
    except OSError as e:
        log.warning("grammask: could not write the budget cache %s (%s)", path, e)


def load_budget_tables(path: Path, key: str) -> BudgetTables:
    """Read tables written by :func:`save_budget_tables`; :class:`CacheError` if missing, corrupt or stale."""
    arrays, meta = load_arrays(path, _file_key(key))
    try:
        values = {**arrays, **meta["scalars"]}
        parts = {
            part: cls(**{f.name: values[f"{part}.{f.name}"] for f in dataclasses.fields(cls)})
            for part, cls in _PARTS.items()
        }
        return BudgetTables(**parts, **{f: arrays[f] for f in _ARRAYS}, seconds=float(meta["seconds"]))
    except (KeyError, TypeError) as e:
        raise CacheError(f"budget cache file {path} lacks a field ({e})") from None


def _file_key(key: str) -> str:
    return f"budget{BUDGET_FORMAT}:{key}"
