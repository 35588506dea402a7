"""The integer LALR(1) construction (:mod:`grammask.parser.lalr`) gives exactly the tables lark's analyzer gives
for grammars without conflicts, finds conflicts where lark's strict analyzer does, and leaves those to lark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lark.exceptions import GrammarError as LarkGrammarError

from grammask import Grammar
from grammask.automata.lexer import build_lexer
from grammask.grammar.ir import Rule, Terminal
from grammask.grammar.lark_export import check_lalr
from grammask.mask_tables import parser_terminal_map
from grammask.parser import tables
from grammask.parser.lalr import LALRConflict, LALRTables, lalr_tables

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


def test_a_reduce_reduce_conflict_is_named():
    # start: a "x" | b "x";  a: "y";  b: "y"  (terminals x=0, y=1; nonterminals start, a, b from 3)
    rules = [(0, (4, 0)), (0, (5, 0)), (1, (1,)), (2, (1,))]
    assert lalr_tables(rules, 2, 3, 0) == LALRConflict(terminal=0, shift=False)
    assert isinstance(lalr_tables([(0, (4, 0)), (1, (1,))], 2, 2, 0), LALRTables)


def _random_grammar(draw_rules: list[tuple[str, tuple[str, ...]]]) -> Grammar:
    terminals = tuple(Terminal(name, name.lower(), literal=name.lower()) for name in ("A", "B", "C"))
    return Grammar(terminals, tuple(Rule(lhs, rhs) for lhs, rhs in draw_rules), "s")


_SYMBOLS = st.sampled_from(["A", "B", "C", "s", "p", "q"])
_RULES = st.lists(st.tuples(st.sampled_from(["s", "p", "q"]), st.lists(_SYMBOLS, max_size=4).map(tuple)),
                  min_size=1, max_size=9)


def _larks_verdict(grammar: Grammar) -> bool:
    """Whether lark's analyzer (strict: shift/reduce conflicts refused too) accepts the rules."""
    from lark.common import ParserConf
    from lark.grammar import NonTerminal
    from lark.grammar import Rule as LarkRule
    from lark.grammar import Terminal as LarkTerminal
    from lark.parsers.lalr_analysis import LALR_Analyzer

    unique = dict.fromkeys((r.lhs, r.rhs) for r in grammar.rules)
    rules = [LarkRule(NonTerminal(lhs), [LarkTerminal(x) if x.isupper() else NonTerminal(x) for x in rhs], order=i)
             for i, (lhs, rhs) in enumerate(unique)]
    analyzer = LALR_Analyzer(ParserConf(rules, {}, ["s"]), strict=True)
    try:
        analyzer.compute_lalr()
    except LarkGrammarError:
        return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(_RULES)
def test_conflicts_are_found_where_larks_analyzer_finds_them(rules):
    defined = {lhs for lhs, _ in rules}
    assume("s" in defined and all(x.isupper() or x in defined for _, rhs in rules for x in rhs))
    grammar = _random_grammar(rules)
    verdict = tables.lalr_conflict(grammar)
    assume(verdict is not None)  # left to lark: a cycle of reads relations
    assert (verdict == "") == _larks_verdict(grammar), verdict


def test_check_lalr_names_the_conflict_without_larks_analyzer(monkeypatch):
    import lark.parsers.lalr_analysis as analysis

    def refuse(*args, **kwargs):
        raise AssertionError("lark's analyzer ran")

    monkeypatch.setattr(analysis.LALR_Analyzer, "__init__", refuse)
    with pytest.raises(LarkGrammarError, match="^shift/reduce conflict on terminal ELSE$"):
        check_lalr(Grammar.from_lark(DANGLING_ELSE.replace('"else"', "ELSE") + 'ELSE: "else"\n', lexer="basic"))
    check_lalr(Grammar.builtin("json"))
