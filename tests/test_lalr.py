"""The integer LALR(1) construction (:mod:`grammask.parser.lalr`) gives exactly the tables lark's analyzer gives
for grammars without conflicts, and leaves the others to lark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grammask import Grammar
from grammask.automata.lexer import build_lexer
from grammask.mask_tables import parser_terminal_map
from grammask.parser import tables
from grammask.parser.lalr import lalr_tables

JME = Path(__file__).resolve().parents[2] / "shared" / "data" / "json-mode-eval"

# Nullable nonterminals in a row, left and right recursion, an empty start: the cases DeRemer and Pennello's reads
# and includes relations are for.
NULLABLE = """
start: a b "x" c | "y" start
a: | "p" a
b: | "q"
c: | c "r"
"""
EMPTY = 'start: | start "a" "b"'
DANGLING_ELSE = """
start: stmt+
stmt: "if" NAME "then" stmt ("else" stmt)? | NAME ";"
%import common.CNAME -> NAME
%import common.WS
%ignore WS
"""


def _grammars() -> list[tuple[str, Grammar]]:
    out = [(name, Grammar.builtin(name)) for name in ("json", "c")]
    out += [(name, Grammar.from_lark(text, lexer="basic")) for name, text in
            (("nullable", NULLABLE), ("empty", EMPTY))]
    for i in (0, 1, 7, 19, 42, 58):
        path = JME / f"JME_{i}.json"
        if path.exists():
            out.append((f"JME_{i}", Grammar.from_json_schema(json.loads(path.read_text())["schema"])))
    return out


def _both(grammar: Grammar, monkeypatch) -> tuple[tables.ParseTables | None, tables.ParseTables]:
    names, _ = parser_terminal_map(grammar, build_lexer(grammar))
    fast = tables._without_conflicts(grammar, names, tables.NO_DEADLINE)
    with monkeypatch.context() as patch:
        patch.setattr(tables, "_without_conflicts", lambda *args: None)
        slow = tables.build_parse_tables(grammar, names)
    return fast, slow


@pytest.mark.parametrize("name, grammar", _grammars(), ids=lambda x: x if isinstance(x, str) else "")
def test_integer_tables_are_larks(name, grammar, monkeypatch):
    fast, slow = _both(grammar, monkeypatch)
    assert fast is not None
    for field in ("terminals", "nonterminals", "rule_text", "start_state", "accept_state", "notes"):
        assert getattr(fast, field) == getattr(slow, field), field
    for field in ("action", "goto", "rule_lhs", "rule_len", "rule_rhs", "dropped"):
        a, b = getattr(fast, field), getattr(slow, field)
        assert a.shape == b.shape and np.array_equal(a, b), field


@pytest.mark.parametrize("name", ["dangling_else", "python", "go"])
def test_grammars_with_conflicts_are_left_to_lark(name, monkeypatch):
    grammar = Grammar.from_lark(DANGLING_ELSE, lexer="basic") if name == "dangling_else" else Grammar.builtin(name)
    fast, slow = _both(grammar, monkeypatch)
    assert fast is None and slow.notes


def test_a_reduce_reduce_conflict_gives_up():
    # start: a "x" | b "x";  a: "y";  b: "y"  (terminals x=0, y=1; nonterminals start, a, b from 3)
    rules = [(0, (4, 0)), (0, (5, 0)), (1, (1,)), (2, (1,))]
    assert lalr_tables(rules, 2, 3, 0) is None
    assert lalr_tables([(0, (4, 0)), (1, (1,))], 2, 2, 0) is not None
