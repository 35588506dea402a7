"""Bad input gets a clear grammask error naming the problem, never a crash deep inside."""

from __future__ import annotations

import pytest
from conftest import get_vocab

import grammask as gm
from grammask import Grammar, compile
from grammask.errors import (
    ConfigurationError,
    EmptyLanguageError,
    GrammarConflictError,
    GrammarError,
    GrammarSyntaxError,
    UndefinedSymbolError,
    UnsupportedRegexError,
)


def _compile(text: str):
    return compile(Grammar.from_lark(text), get_vocab("smollm2"), cache=False)


def test_syntax_error_names_the_line():
    with pytest.raises(GrammarSyntaxError) as e:
        Grammar.from_lark('start: "a"\nitem: ("b" | \n')
    assert e.value.line in (2, 3) and "line" in str(e.value)


def test_undefined_rule_and_terminal():
    with pytest.raises(UndefinedSymbolError, match="missing"):
        Grammar.from_lark('start: "a" missing')
    with pytest.raises(UndefinedSymbolError, match="NUMBER"):
        Grammar.from_lark('start: "a" NUMBER')


def test_empty_language():
    with pytest.raises(EmptyLanguageError, match="start"):
        _compile('start: "a" start')


def test_lalr_conflicts_name_the_rules():
    with pytest.raises(GrammarConflictError, match="shift/reduce") as e:
        compile(Grammar.from_lark('start: e\ne: e "+" e | "x"', conflicts="error"), get_vocab("smollm2"), cache=False)
    assert "e -> e PLUS e" in str(e.value) or "<e : e PLUS e>" in str(e.value)
    with pytest.raises(GrammarConflictError, match="[Rr]educe/[Rr]educe") as e:
        _compile('start: a | b\na: "x"\nb: "x"')
    assert "a" in str(e.value) and "b" in str(e.value)


@pytest.mark.parametrize(("regex", "feature"), [("a(?=b)", "look"), (r"(a)\1", "backreference"), ("(?<!x)a", "look")])
def test_unsupported_regex_names_the_terminal(regex, feature):
    with pytest.raises(UnsupportedRegexError, match="ODD") as e:
        _compile(f'start: ODD\nODD: /{regex}/')
    assert feature in str(e.value).lower()


def test_zero_width_terminal():
    with pytest.raises(GrammarError, match="EMPTYISH"):
        _compile('start: EMPTYISH "a"\nEMPTYISH: /b*/')


def test_errors_share_one_base_class():
    from grammask import GrammaskError

    assert issubclass(GrammarConflictError, GrammaskError)


def test_sampler_without_ignored_terminals_reports_unseparable_lexemes():
    import random

    from grammask.sampler import SentenceSampler

    grammar = Grammar.from_lark('start: WORD WORD\nWORD: /[a-z]+/\n')
    with pytest.raises(GrammarError, match="lex(es)? apart"):
        SentenceSampler(grammar).sample(random.Random(0))


def test_wrong_kinds_of_argument_are_named():
    vocab = get_vocab("smollm2")
    with pytest.raises(ConfigurationError, match="takes a Vocabulary"):
        gm.Compiler(None)
    compiler = gm.Compiler(vocab, cache=False)
    for bad in (None, 'start: "a"'):
        with pytest.raises(GrammarError, match="compile takes a Grammar"):
            compiler.compile(bad)
    for load, what in ((gm.Grammar.from_lark, "Lark grammar"), (gm.Grammar.from_regex, "regex"),
                       (gm.Grammar.from_gbnf, "GBNF grammar")):
        for bad in (None, 5, b"x"):
            with pytest.raises(GrammarError, match=f"a {what} must be text"):
                load(bad)
