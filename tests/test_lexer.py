"""The lexing rule (docs/architecture.md): 1-lookahead maximal munch, priorities, literal over regex."""

from __future__ import annotations

import dataclasses

import lark
import pytest

from grammask import Grammar
from grammask.automata.lexer import _max_width, _nfa_width, build_lexer
from grammask.automata.patterns import terminal_nfa
from grammask.errors import NO_DEADLINE
from grammask.mask_tables import build_front


def _lex(grammar: str | Grammar, data: bytes):
    lexer = build_lexer(Grammar.from_lark(grammar) if isinstance(grammar, str) else grammar)
    stepped = lexer.step(0, data)
    if stepped is None:
        return None
    emitted, state = stepped
    tail = lexer.finish(state)
    if tail is None:
        return None
    return [lexer.terminals[t] for t in emitted + tail]


OPS = 'start: (PLUS | INC | PLUSEQ | NAME)*\nPLUS: "+"\nINC: "++"\nPLUSEQ: "+="\nNAME: /[a-z]+/\n'


def test_maximal_munch():
    assert _lex(OPS, b"a+++b") == ["NAME", "INC", "PLUS", "NAME"]
    assert _lex(OPS, b"a+=b") == ["NAME", "PLUSEQ", "NAME"]
    assert _lex(OPS, b"a++=b") is None  # "++" then "=", which starts no terminal


def test_longest_match_over_keyword_prefix():
    g = 'start: (IF | NAME | WS)*\nIF: "if"\nNAME: /[a-z]+/\nWS: " "\n'
    assert _lex(g, b"if iffy") == ["IF", "WS", "NAME"]


def test_literal_wins_tie_with_regex():
    g = 'start: (IF | NAME)*\nIF: "if"\nNAME: /[a-z]+/\n'
    assert _lex(g, b"if") == ["IF"]


def test_priority_wins_tie():
    g = 'start: (A | B)*\nA.2: /[0-9]+/\nB: /[0-9a-f]+/\n'
    assert _lex(g, b"12") == ["A"]
    assert _lex(g, b"f1") == ["B"]


def test_earlier_terminal_preempts_as_in_lark():
    # Lark tries A first (priority 2) and takes its match "1": a Lark grammar never lexes "1f" as B.
    g = 'start: (A | B)*\nA.2: /[0-9]+/\nB: /[0-9a-f]+/\n'
    assert _lex(g, b"1f") == ["A", "B"]
    assert _lex(g, b"1f") == _lark_lex(g, "1f")
    # A grammar grammask writes itself keeps plain maximal munch.
    assert _lex(dataclasses.replace(Grammar.from_lark(g), first_match=False), b"1f") == ["B"]


@pytest.mark.parametrize("text", ["int", "INT", "İnt", "ınt", "İNT", "Tİme", "tıme", "ſet", "seTſ"])
def test_case_insensitive_literal_after_name_as_in_lark(text):
    # "int"i also matches "İnt" (re folds İ to i), but CNAME comes first in Lark's order and stops before İ.
    g = 'start: (INT | TIME | SET | CNAME)*\nINT: "int"i\nTIME: "time"i\nSET: "set"i\nCNAME: /[A-Za-z_][A-Za-z0-9_]*/\n'
    assert _lex(g, text.encode()) == _lark_lex(g, text)


def _lark_lex(grammar_text: str, text: str) -> list[str] | None:
    try:
        return [t.type for t in lark.Lark(grammar_text, parser="lalr", lexer="basic").lex(text)]
    except lark.exceptions.UnexpectedInput:
        return None


def test_no_backtracking():
    # "1." is a prefix of FLOAT, so the lexer keeps going; "x" then fails: no return to INT "." NAME.
    g = 'start: (INT | FLOAT | DOT | NAME)*\nINT: /[0-9]+/\nFLOAT: /[0-9]+\\.[0-9]+/\nDOT: "."\nNAME: /[a-z]+/\n'
    assert _lex(g, b"1.5") == ["FLOAT"]
    assert _lex(g, b"1.x") is None
    assert _lex(g, b"1.") is None
    assert _lex(g, b"1x") == ["INT", "NAME"]


def test_unfinished_lexeme_at_end_is_rejected():
    g = 'start: STR\nSTR: /"[a-z]*"/\n'
    assert _lex(g, b'"abc"') == ["STR"]
    assert _lex(g, b'"abc') is None


def test_bytes_mid_character():
    g = 'start: WORD\nWORD: /\\w+/\n'
    lexer = build_lexer(Grammar.from_lark(g))
    data = "héllo".encode()
    emitted, state = lexer.step(0, data[:2])  # ends inside 'é'
    assert emitted == [] and lexer.finish(state) is None
    emitted, state = lexer.step(state, data[2:])
    assert lexer.terminals[lexer.finish(state)[0]] == "WORD"
    assert lexer.step(0, b"\xff") is None


def test_initial_state_means_empty_lexeme():
    # The minimal DFA of (a|b)*abb loops back to its start state; a pending "b" is not "nothing".
    g = "start: T*\nT: /(a|b)*abb/\n"
    assert _lex(g, b"") == []
    assert _lex(g, b"b") is None
    assert _lex(g, b"babb") == ["T"]



def test_a_literal_an_ignored_regex_matches_whole_is_never_emitted():
    """Lark lexes ``"\\n"`` as the ignored whitespace here (its keyword rule comes after the ignore check), so
    the comment rule can never end; grammask agrees (SynCode's C grammar has this shape)."""
    from lark import Lark
    from lark.exceptions import LarkError

    text = 'start: "a" comment?\ncomment: "#" "\\n"\n%ignore /[ \\t\\n]+/\n'
    lexer = build_lexer(Grammar.from_lark(text, lexer="basic"))
    newline = next(i for i, name in enumerate(lexer.terminals) if name == "__ANON_0" or name == "NEWLINE")
    assert newline not in lexer.accept.tolist()
    emitted, state = lexer.step(0, b"a #\n")
    assert [lexer.terminals[t] for t in emitted] == ["A", "__IGNORE_0", "HASH"] and lexer.ignored[lexer.accept[state]]
    with pytest.raises(LarkError):
        Lark(text, parser="lalr", lexer="basic").parse("a #\n")


def test_terminal_that_never_wins_is_warned():
    # /\s+/ comes first in Lark's order and matches every string of /\n+/ whole: NL is never lexed.
    g = Grammar.from_lark('start: (WORD | NL | WS)*\nWORD: /[a-z]+/\nNL: /\\n+/\nWS: /\\s+/\n', lexer="basic")
    with pytest.warns(UserWarning, match=r"terminal\(s\) NL can never be lexed"):
        build_front(g)


@pytest.mark.parametrize("pattern", [
    "[a-z]+", "ab|abc|x", "é{2,5}", "(?:日本|x){3}", "[^\\n]{0,7}\\n", "(a|bc)?d", "\\d{1,4}(\\.\\d+)?", "(?:ab)*c",
    "[\\u00e9-\\u4e00]{2}z?", "\"(?:[^\"\\\\]|\\\\.){0,40}\"",
])
def test_width_on_the_automaton_is_larks(pattern):
    # a pattern too long to parse again is measured on its automaton: the order of terminals must not change
    assert _nfa_width(terminal_nfa(pattern), NO_DEADLINE) == _max_width(pattern)


def test_a_long_alternation_is_ordered_without_parsing_it_again():
    words = [f"w{i:06d}" for i in range(20_000)]  # a 160 KB pattern, as a JSON schema's enum makes
    grammar = Grammar.from_lark(f'start: LONG | SHORT\nLONG: /{"|".join(words)}|w0000000/\nSHORT: /w[0-9]{{6}}/\n')
    assert len(grammar.terminals[0].pattern) > 4096
    assert _lex(grammar, b"w000123") == ["LONG"]  # the wider terminal (8 characters against 7) wins the tie
