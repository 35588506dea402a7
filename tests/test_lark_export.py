"""The IR written back as Lark text loads into the same grammar, and its LALR parser is usable as a reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Token
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import UnexpectedToken

from grammask.grammar import Grammar, Rule, Terminal
from grammask.grammar.lark_export import (
    lark_parser,
    lark_rule_name,
    lark_terminal_name,
    to_lark_text,
)


def _same(a: Grammar, b: Grammar) -> None:
    """Equal up to Lark's renaming of names it would not accept back."""
    terms = lambda g: {(lark_terminal_name(t.name), t.pattern, t.literal, t.priority) for t in g.terminals}
    assert terms(a) == terms(b)
    names = set(a.terminal_names)

    def rename(r: Rule) -> Rule:
        return Rule(lark_rule_name(r.lhs), tuple(lark_terminal_name(s) if s in names else lark_rule_name(s) for s in r.rhs))

    assert {rename(r) for r in a.rules} == set(b.rules)
    assert {lark_terminal_name(n) for n in a.ignore} == b.ignore


def test_builtin_json_round_trips():
    g = Grammar.builtin("json")
    _same(g, Grammar.from_lark(to_lark_text(g)))


def test_awkward_patterns_and_literals_round_trip():
    g = Grammar(
        (
            Terminal("SLASHED", r"a/b\/c[/]"),
            Terminal("CONTROL", "x\ny\t\\\n"),
            Terminal("QUOTE", r'"', literal='"'),
            Terminal("BACKSLASH", re_escape := r"\\", literal="\\"),
            Terminal("PRIO", "[0-9]+", priority=3),
            Terminal("NEG", "-", literal="-", priority=-2),
        ),
        (Rule("start", ("SLASHED", "CONTROL", "QUOTE", "BACKSLASH", "PRIO", "NEG")), Rule("start", ())),
        "start",
        frozenset({"NEG"}),
    )
    assert re_escape == r"\\"
    back = Grammar.from_lark(to_lark_text(g))
    by_name = {t.name: t for t in back.terminals}
    import re

    for t in g.terminals:
        # The same language: the loaded pattern matches exactly what the original does on probes.
        for probe in ("a/b/c/", "x\ny\t\n", '"', "\\", "42", "-", "a/b\\/c/"):
            assert bool(re.fullmatch(t.pattern, probe)) == bool(re.fullmatch(by_name[t.name].pattern, probe)), (t, probe)
        assert by_name[t.name].priority == t.priority
        assert by_name[t.name].literal == t.literal
    assert back.ignore == {"NEG"}
    assert Rule("start", ()) in back.rules


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12))
def test_any_literal_round_trips(text):
    import re

    g = Grammar((Terminal("LIT", re.escape(text), literal=text),), (Rule("start", ("LIT",)),), "start")
    (t,) = Grammar.from_lark(to_lark_text(g)).terminals
    assert t.literal == text
    assert re.fullmatch(t.pattern, text)


def test_parser_is_fed_terminals():
    g = Grammar.builtin("json")
    parser = lark_parser(g)
    ip = parser.parse_interactive("")
    for name in ("LSQB", "NUMBER", "COMMA", "STRING", "RSQB"):
        ip.feed_token(Token(lark_terminal_name(name), ""))
    ip.feed_eof()
    ip = parser.parse_interactive("")
    ip.feed_token(Token(lark_terminal_name("LSQB"), ""))
    with pytest.raises(UnexpectedToken):
        ip.feed_token(Token(lark_terminal_name("COLON"), ""))


def test_strict_parser_rejects_shift_reduce_conflicts():
    ambiguous = Grammar.from_lark('start: e\ne: e "+" e | "x"\n')
    lark_parser(ambiguous)  # lenient Lark resolves the conflict by shifting
    with pytest.raises(LarkGrammarError):
        lark_parser(ambiguous, strict=True)
