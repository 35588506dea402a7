"""A schema's string languages handed to the lexer as automata (``strings.spelled_nfa`` through
``patterns.give_nfa``): the same byte DFA as the rendered pattern's, and the lexer takes the given NFA."""

from __future__ import annotations

import numpy as np
import pytest

from grammask.automata.dfa import build_dfa
from grammask.automata.patterns import (
    _compact,
    compile_regex,
    give_nfa,
    regex_to_dfa,
    terminal_nfa,
)
from grammask.grammar.json_schema.formats import format_automaton
from grammask.grammar.json_schema.strings import StringSet, spelled_nfa
from grammask.grammar.regex_frontend import parse_pattern

SETS = [
    StringSet.regular(*format_automaton("email")),
    StringSet.regular(*format_automaton("date-time")),
    StringSet.regular(parse_pattern("^(?:[a-z]{1,3}-)*[0-9]+$|^é+\"\\\\$", dialect="ecma")),
    StringSet.regular(parse_pattern("^[^a]*\U0001f600[\\u0000-\\u001f]?$", dialect="ecma")),
    StringSet.literal("naïve \"quote\""),
]


@pytest.mark.parametrize("language", SETS, ids=lambda s: s.describe())
def test_spelled_nfa_has_the_rendered_patterns_dfa(language: StringSet) -> None:
    pattern, _ = language.lexeme()
    spelled = build_dfa([spelled_nfa(language.dfa, 10**9)])
    parsed = regex_to_dfa(pattern)
    assert np.array_equal(spelled.trans, parsed.trans) and spelled.accepts == parsed.accepts


def test_spellings_longer_than_the_pattern_are_not_built() -> None:
    assert spelled_nfa(SETS[0].dfa, 10) is None


def test_terminal_nfa_takes_a_given_nfa_once() -> None:
    pattern = "zz(?:given|test)"
    _compact.pop((pattern, ""), None)
    give_nfa(pattern, "", lambda: compile_regex("other"))  # a wrong NFA shows which one was taken
    assert build_dfa([terminal_nfa(pattern)]).walk(b"other") > 0
    _compact.pop((pattern, ""), None)
    assert build_dfa([terminal_nfa(pattern)]).walk(b"other") < 0  # taken once: parsed now
    give_nfa(pattern, "", lambda: None)  # None: parse the pattern
    _compact.pop((pattern, ""), None)
    assert build_dfa([terminal_nfa(pattern)]).walk(b"zzgiven") > 0
