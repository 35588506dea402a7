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
from grammask.budget.costs import INF
from grammask.budget.lexical import LexicalCosts, build_lexical_costs
from grammask.budget.newlines import NewlineCosts, build_newline_costs
from grammask.budget.parser_costs import (
    ParserCosts,
    build_parser_costs,
    follow_terminals,
)
from grammask.indentation import byte_widths
from grammask.parser.tables import ERROR

if TYPE_CHECKING:
    from grammask.engine import Engine

BUDGET_KIND = "budget3"
"""The cache kind of budget tables; the number changes with their format."""

UNBOUNDED = -2
"""``state_bound`` of a state not bounded yet (a contextual lexer's: see :meth:`~.runtime.BudgetRuntime.state_bound`)."""

DEDENT_CAP = 6
"""Under an indenter, the static bounds hold while at most this many levels are open (a newline then feeds at
most this many dedents); deeper, every token is costed against the stack."""


@dataclass(frozen=True)
class BudgetTables:
    """Everything a budgeted matcher reads (see :mod:`.lexical`, :mod:`.parser_costs`, :mod:`.bounds`).

    ``state_bound[q]`` bounds (without the stack's level) the completion cost after any token
    read from lexer state ``q`` (:data:`UNBOUNDED` under a contextual lexer, whose bounds come from each state's
    token groups at decoding time); ``finish_bound`` and ``ignore_cost`` are its per-state parts,
    ``bound_exit`` the exit bounds they use (an indenter's newline raised to cover the indent or
    dedents it brings) and ``bound_term``/``bound_weight`` per lexer terminal the symbol and the
    number of parser terminals a bound counts for it (see :mod:`.bounds`).

    Under an indenter, ``newlines`` holds the newline costs and ``flat`` the parser costs of
    completions that open no block (where a deeper level would pass ``newlines.width_cap``);
    both are None otherwise.
    """

    lexical: LexicalCosts
    parser: ParserCosts
    finish_bound: np.ndarray
    ignore_cost: np.ndarray
    state_bound: np.ndarray
    bound_exit: np.ndarray
    bound_term: np.ndarray
    bound_weight: np.ndarray
    newlines: NewlineCosts | None = None
    flat: ParserCosts | None = None
    end_discount: int = 0
    """What the last newline of every completion costs where the end of input writes it (an indenter that adds
    a newline at the end, in a grammar whose sentences all end with a newline and dedents): a probe takes it
    off every completion that does not end at once."""
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
    """Compute the budget tables of a compiled grammar (seconds for large grammars and vocabularies).

    Raises :class:`~grammask.errors.BudgetUnsupportedError` where an indenter's newlines cannot be costed
    (see :func:`~grammask.budget.newlines.build_newline_costs`).
    """
    start = time.perf_counter()
    tables = engine.parse
    trie = engine.trie
    indent = engine.indent
    parser_term = engine.parser_term.copy()
    if indent is not None:
        parser_term[parser_term >= indent.base] = indent.newline
    skip = None if indent is None else engine.parser_term >= indent.base  # fallbacks emitting a newline: not counted
    lexical = build_lexical_costs(engine.lexer, parser_term, trie, follow_terminals(tables), _lexable(engine), skip)
    newlines = flat = None
    weight = (parser_term >= 0).astype(np.int64)
    if indent is None:
        parser = build_parser_costs(tables, lexical.term_cost)
    else:
        newlines = build_newline_costs(engine.lexer, indent.newline_lexer,
                                       byte_widths(indent.tab_len, indent.line_breaks), engine.vocab.tokens,
                                       lexical.trail)
        outer = lexical.term_cost.astype(np.int64)
        outer[indent.newline] = newlines.term
        outer[[indent.indent, indent.dedent]] = 0
        inner = outer.copy()
        inner[indent.indent] = INF  # completions open new blocks only on the levels of a real stack
        parser = build_parser_costs(tables, outer, inner)
        flat = build_parser_costs(tables, inner)
        weight[indent.newline_lexer] = 2 + DEDENT_CAP
    bound_exit = parser.exit_bound.astype(np.int64)
    if indent is not None:
        bound_exit[indent.newline] = bound_exit[[indent.newline, indent.indent, indent.dedent]].max()
    goto_exit_max = int(parser.exit_bound[len(parser.exit_bound) - len(parser.nt_cost):].max(initial=0))
    eps1 = 1 + parser.eps_pushes
    m = engine.masks
    fptr = m.follow_ptr.tolist()
    follow_sets = [(m.follow_terms[fptr[f]: fptr[f + 1]], bool(a)) for f, a in enumerate(m.follow_any.tolist())]
    finish, ignore = finish_bounds(lexical.lex_cost, follow_sets, m.state_follow, bound_exit)
    if newlines is not None:
        finish = np.maximum(finish, _newline_finish(newlines, indent.newline, bound_exit, goto_exit_max, eps1))
    if engine.lexer.alt is not None:  # a token leaving a fallback may be allowed by the reading where it dies only,
        falls = engine.lexer.alt >= 0  # which costs count INF: such tokens are always costed
        finish[falls] = ignore[falls] = INF
    if engine.lexer.contextual:  # the next lexeme's mode may depend on the stack: bounded per state from its groups
        bound = np.full(engine.lexer.n_states, UNBOUNDED, dtype=np.int64)
    else:
        bound = state_bounds(trie.node_byte, trie.node_parent, trie.node_end, trie.node_tok_ptr, engine.lexer.trans,
                             engine.lexer.accept, engine.lexer.restarts, parser_term, weight, finish, ignore,
                             bound_exit, goto_exit_max, eps1)
    discount = 0
    if indent is not None and indent.eof_newline and _ends_with(tables, indent.newline, indent.dedent):
        discount = newlines.term
    return BudgetTables(lexical, parser, finish, ignore, bound, bound_exit, parser_term, weight, newlines, flat,
                        discount, seconds=time.perf_counter() - start)


def _lexable(engine: Engine) -> np.ndarray | None:
    """Under a contextual lexer, ``out[m, y]``: some LR state of mode ``m`` takes parser terminal ``y`` (shifts or
    reduces on it), so ``y`` may be lexed in that mode; None for the basic lexer."""
    lexer, tables = engine.lexer, engine.parse
    if not lexer.contextual:
        return None
    out = np.zeros((len(lexer.mode_start), tables.end), dtype=bool)
    tops = np.flatnonzero(lexer.lr_mode >= 0)
    np.logical_or.at(out, lexer.lr_mode[tops], tables.action[tops, : tables.end] != ERROR)
    return out


def _ends_with(tables, last: int, transparent: int) -> bool:
    """Whether every nonempty sentence's last terminal other than ``transparent`` is ``last``."""
    n_terms = tables.end
    rhs = tables.right_hand_sides()
    lhs = tables.rule_lhs.tolist()
    n_nts = len(tables.nonterminals)
    ends = [set() for _ in range(n_nts)]  # per nonterminal: the last terminals (other than transparent) it may end with
    see_through = [False] * n_nts  # it may derive transparent terminals only
    changed = True
    while changed:
        changed = False
        for a, body in zip(lhs, rhs):
            found, through = set(), True
            for code in reversed(body):
                if code < n_terms:
                    if code != transparent:
                        found.add(code)
                        through = False
                        break
                    continue
                x = code - n_terms - 1
                found |= ends[x]
                if not see_through[x]:
                    through = False
                    break
            if not found <= ends[a] or (through and not see_through[a]):
                ends[a] |= found
                see_through[a] |= through
                changed = True
    end_state = int(np.nonzero(tables.action[:, n_terms] == tables.accept_state)[0][0])
    start = int(np.nonzero(tables.goto[tables.start_state] == end_state)[0][0])
    return ends[start] <= {last}


def _newline_finish(newlines: NewlineCosts, newline: int, bound_exit: np.ndarray, goto_exit_max: int,
                    eps1: int) -> np.ndarray:
    """Per lexer state, a bound on finishing a pending newline lexeme (at any width) and feeding it with its indent
    or dedents (-1 where no newline is pending): :func:`~.bounds.token_bound` counts the pending terminal as one."""
    out = np.full(len(newlines.row), -1, dtype=np.int64)
    rows = np.flatnonzero(newlines.row >= 0)
    moves = newlines.move[newlines.row[rows]].astype(np.int64)
    finite = np.where(moves < INF, moves, -1).reshape(len(rows), -1).max(axis=1)
    extra = (1 + DEDENT_CAP) * eps1 * goto_exit_max
    out[rows] = np.where(finite >= 0, np.minimum(INF, finite + int(bound_exit[newline]) + extra), -1)
    return out


_PARTS = {"lexical": LexicalCosts, "parser": ParserCosts, "newlines": NewlineCosts, "flat": ParserCosts}
_ARRAYS = ("finish_bound", "ignore_cost", "state_bound", "bound_exit", "bound_term", "bound_weight")


def encode_budget_tables(t: BudgetTables) -> tuple[dict[str, np.ndarray], dict]:
    """``t`` as named arrays and JSON-able metadata (see :func:`decode_budget_tables`)."""
    arrays = {f: getattr(t, f) for f in _ARRAYS}
    scalars = {}
    for part in _PARTS:
        if getattr(t, part) is None:
            continue
        for f in dataclasses.fields(getattr(t, part)):
            value = getattr(getattr(t, part), f.name)
            if isinstance(value, np.ndarray):
                arrays[f"{part}.{f.name}"] = value
            else:
                scalars[f"{part}.{f.name}"] = value
    return arrays, {"scalars": scalars, "seconds": t.seconds, "end_discount": t.end_discount}


def decode_budget_tables(arrays: dict[str, np.ndarray], meta: dict) -> BudgetTables:
    """The tables :func:`encode_budget_tables` encoded; KeyError or TypeError if a field is missing."""
    values = {**arrays, **meta["scalars"]}
    parts = {
        part: cls(**{f.name: values[f"{part}.{f.name}"] for f in dataclasses.fields(cls)})
        if f"{part}.{dataclasses.fields(cls)[0].name}" in values else None
        for part, cls in _PARTS.items()
    }
    return BudgetTables(**parts, **{f: arrays[f] for f in _ARRAYS}, end_discount=int(meta["end_discount"]),
                        seconds=float(meta["seconds"]))
