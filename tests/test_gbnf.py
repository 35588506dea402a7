"""``Grammar.from_gbnf``: llama.cpp GBNF grammars keep their language exactly, or raise a clear error.

The reference is Lark's Earley parser on the same rules written as character-level Lark EBNF
(Earley accepts any context-free grammar, ambiguous ones included).
"""

from __future__ import annotations

import random

import pytest
from json_schema_suite import lex_all
from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedInput

from grammask.automata.lexer import build_lexer
from grammask.automata.regex import Alt, Chars, Concat, Repeat
from grammask.errors import (
    GrammarConflictError,
    GrammarSyntaxError,
    UndefinedSymbolError,
)
from grammask.grammar import gbnf
from grammask.grammar.gbnf import grammar_from_gbnf
from grammask.grammar.lark_export import lark_parser, lark_terminal_name
from grammask.grammar.regex_frontend import render_ranges
from grammask.sampler import SentenceSampler, mutate

JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"""

LIST_GBNF = r"""
root ::= "[" item ("," item)* "]"
item ::= [a-z]+ | root
"""

EXPR_GBNF = r"""
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
"""

CHESS_GBNF = r"""
root   ::= (move " ")* move
move   ::= piece? [a-h] [1-8] ("x" [a-h] [1-8])? "+"?
piece  ::= [KQRBN]
"""

GRAMMARS = {"json": JSON_GBNF, "list": LIST_GBNF, "expr": EXPR_GBNF, "chess": CHESS_GBNF}


def _lark_expr(expr) -> str:
    if isinstance(expr, gbnf.Ref):
        return "r_" + expr.name.replace("-", "_").lower()
    if isinstance(expr, Chars):
        return "/" + render_ranges(expr.ranges).replace("/", "\\/") + "/s"
    if isinstance(expr, (gbnf._Seq, Concat)):
        return "(" + " ".join(_lark_expr(p) for p in expr.parts) + ")" if expr.parts else ""
    if isinstance(expr, (gbnf._Alt, Alt)):
        options = [_lark_expr(o) for o in expr.options]
        body = "(" + " | ".join(o for o in options if o) + ")"
        return f"[{body}]" if "" in options else body
    assert isinstance(expr, (gbnf._Rep, Repeat))
    inner = _lark_expr(expr.node)
    if expr.max is None:
        return f"({inner} ~ {expr.min} {inner}*)" if expr.min else f"{inner}*"
    return f"({inner} ~ {expr.min}..{expr.max})" if expr.max else ""


def _earley(text: str) -> Lark:
    rules = gbnf._Parser(text).rules()
    lines = [f"r_{name.replace('-', '_').lower()}: {_lark_expr(body)}" for name, (body, _) in rules.items()]
    return Lark("\n".join(lines), parser="earley", lexer="dynamic", start="r_root")


def _converted_accepts(grammar, lexer, parser, text: str) -> bool:
    terms = lex_all(lexer, text.encode("utf-8"))
    if terms is None:
        return False
    ip = parser.parse_interactive("")
    try:
        for t in terms:
            ip.feed_token(Token(lark_terminal_name(lexer.terminals[t]), ""))
        ip.feed_eof()
    except UnexpectedInput:
        return False
    return True


def _earley_accepts(earley: Lark, text: str) -> bool:
    try:
        earley.parse(text)
    except LarkError:
        return False
    return True


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "json" else n for n in sorted(GRAMMARS)]
)
def test_language_matches_earley_reference(name):
    text = GRAMMARS[name]
    grammar = grammar_from_gbnf(text)
    lexer, parser, earley = build_lexer(grammar), lark_parser(grammar), _earley(text)
    sampler = SentenceSampler(grammar, max_depth=8)
    rng = random.Random(3)
    alphabet = "{}[],:\"\\ \n\tabcx019-+*/().eEtrufnlKQ"
    checked = accepted = 0
    for _ in range(60):
        sentence = sampler.sample(rng, ignored_rate=0.0)
        for candidate in (sentence, mutate(sentence, rng, alphabet, edits=rng.randint(1, 2))):
            mine = _converted_accepts(grammar, lexer, parser, candidate)
            assert mine == _earley_accepts(earley, candidate), (name, candidate)
            checked += 1
            accepted += mine
    assert accepted >= 60 and checked - accepted > 5


def test_json_grammar_examples():
    grammar = grammar_from_gbnf(JSON_GBNF)
    lexer, parser = build_lexer(grammar), lark_parser(grammar)
    for good in ('{"a": [1, 2.5, true, "x\\n"]}', '{}', '{"a" : -0.5e3 }', '{"k":{"n":null}}\n  '):
        assert _converted_accepts(grammar, lexer, parser, good), good
    for bad in ("[1]", '{"a" 1}', '{"a": 01}', '{"a": "\x01"}', '{"a": tru}'):
        assert not _converted_accepts(grammar, lexer, parser, bad), bad


def test_regular_grammar_becomes_one_terminal():
    g = grammar_from_gbnf('root ::= part ("-" part)?\npart ::= [0-9]{2,3} | "x"')
    assert [t.name for t in g.terminals] == ["ROOT"]
    import re

    pattern = g.terminals[0].pattern
    assert re.fullmatch(pattern, "12-345") and re.fullmatch(pattern, "x") and not re.fullmatch(pattern, "1-2")


def test_ambiguous_grammar_raises_conflict():
    with pytest.raises(GrammarConflictError, match="LALR"):
        grammar_from_gbnf('root ::= (expr "=" ws term "\\n")+\nexpr ::= term ([-+] term)*\nterm ::= [a-z]+ ws | "(" expr ")" ws\nws ::= [ \\n]*')


def test_syntax_errors_name_the_place():
    with pytest.raises(GrammarSyntaxError, match="unterminated character class"):
        grammar_from_gbnf('root ::= "a"\nitem ::= [a-z\n')
    with pytest.raises(GrammarSyntaxError, match="line 2, column 14"):
        grammar_from_gbnf('root ::= "a"\nitem ::= "b" @')
    with pytest.raises(GrammarSyntaxError, match="::="):
        grammar_from_gbnf("root = 'a'")
    with pytest.raises(GrammarSyntaxError, match="defined twice"):
        grammar_from_gbnf('root ::= "a"\nroot ::= "b"')


def test_undefined_rules():
    with pytest.raises(UndefinedSymbolError, match="'item'"):
        grammar_from_gbnf("root ::= item")
    with pytest.raises(UndefinedSymbolError, match="'root'"):
        grammar_from_gbnf('start ::= "a"')


def test_escapes_and_comments():
    g = grammar_from_gbnf('root ::= "\\x41\\u00e9\\t" [\\]\\-] # trailing comment\n')
    import re

    assert re.fullmatch(g.terminals[0].pattern, "Aé\t]") and re.fullmatch(g.terminals[0].pattern, "Aé\t-")
