"""Semicolon insertion (Go's rule) run by the lexer in two modes: verdicts and masks against an oracle that
runs the reference postlex object itself, and clear errors for bad postlexes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import get_vocab
from lark import Token
from lark.lark import PostLex
from postlex_oracle import PostlexOracle, allowed_mask

from grammask import Compiler, Grammar
from grammask.errors import BudgetError, UndefinedSymbolError

GRAMMAR = r"""
start: (stmt ";")*
stmt: NAME "=" expr | "return" expr? | "{" (stmt ";")* stmt? "}" | "f" "(" [expr ("," expr)*] ")"
expr: atom ("+" atom)*
atom: NAME | NUMBER | "(" expr ")"
NAME: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+/
_NL: "\n"
_ML_COMMENT: /\/\*[^*]*\n[^*]*\*\//
%ignore /[ \t]+/
%ignore /\/\/[^\n]*/
%ignore /\/\*[^*\n]*\*\//
"""


class Semis(PostLex):
    """The reference: a newline after NAME, NUMBER, RETURN, ")" or "}" is a ";", else dropped; also at the end."""

    nl_types = ("_NL", "_ML_COMMENT")
    semicolon_type = "SEMICOLON"
    trigger_types = frozenset({"NAME", "NUMBER", "RETURN", "RPAR", "RBRACE"})
    insert_at_eof = True
    always_accept = ("_NL", "_ML_COMMENT")

    def process(self, stream):
        armed, last = False, None
        for token in stream:
            if token.type in self.nl_types:
                if armed:
                    yield Token(self.semicolon_type, "\n")
                    armed = False
                continue
            armed, last = token.type in self.trigger_types, token
            yield token
        if armed and self.insert_at_eof and last is not None:
            yield Token(self.semicolon_type, "\n")


TEXT = """x = 1
y = (x +
  2)
{
  return x /* a
  comment */ z = 3
  f(x, y) // c
}
return
"""


@pytest.fixture(scope="module")
def grammar():
    return Grammar.from_lark(GRAMMAR, postlex=Semis(), lexer="basic")


@pytest.fixture(scope="module")
def compiled(grammar):
    return Compiler(get_vocab("smollm2"), cache=False).compile(grammar)




def _reference_accepts(grammar, text: str) -> bool:
    import lark

    parser = lark.Lark(GRAMMAR, parser="lalr", lexer="basic", postlex=Semis())
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def _accepts(compiled, text: str) -> bool:
    m = compiled.matcher()
    return all(m.accept_token(t) for t in compiled.vocab.encode(text)) and m.is_accepting()


def test_grammar_reads_the_postlex(grammar):
    rules = grammar.semicolons
    assert rules.newlines == ("_NL", "_ML_COMMENT") and rules.semicolon == "SEMICOLON" and rules.at_end
    assert "RBRACE" in rules.triggers


@pytest.mark.parametrize(
    "text",
    [TEXT, "x = 1", "x = 1\n\n\n", "x = (1\n)\n", "x =\n1\n", "return\n1\n", "{ x = 1 }\n", "x = 1 /* c */ y = 2\n",
     "x = 1 /* c\n */ y = 2\n", "x = 1 // c\ny = 2", "f(\nx)\n", "f(x\n)\n", "x = 1;\n", "x = 1;;\n"],
)
def test_verdicts_agree_with_the_reference(grammar, compiled, text):
    assert _accepts(compiled, text) == _reference_accepts(grammar, text)


def test_masks_match_the_oracle(grammar, compiled):
    vocab = compiled.vocab
    oracle = PostlexOracle(grammar, vocab, Semis())
    ids = vocab.encode(TEXT)
    m = compiled.matcher()
    done = 0
    for cut in sorted(random.Random(3).sample(range(len(ids)), 15)):
        while done < cut:
            m.advance(ids[done])
            done += 1
        want = oracle.mask(vocab.decode(ids[:done]))
        diff = np.flatnonzero(want != allowed_mask(m))
        assert not len(diff), [(vocab.tokens[t] if t < len(vocab.tokens) else t, bool(want[t])) for t in diff[:10]]


@pytest.mark.parametrize("prefix", ["", "x = 1\n", "{ return (a +"])
@pytest.mark.parametrize("slack", [0, 3])
def test_budgets_count_inserted_semicolons(grammar, compiled, prefix, slack):
    from test_budget_guarantee import longest_walk

    text = prefix + longest_walk(compiled, prefix, slack)
    assert _reference_accepts(grammar, text), text


def test_budgets_name_the_rules_a_conflict_resolution_hides(grammar):
    ambiguous = GRAMMAR.replace('expr: atom ("+" atom)*\natom:', 'expr: expr "+" expr |')
    compiled = Compiler(get_vocab("smollm2"), cache=False).compile(Grammar.from_lark(ambiguous, postlex=Semis(),
                                                                                      lexer="basic"))
    with pytest.warns(UserWarning, match="count no completion through expr -> expr PLUS expr"):
        assert compiled.matcher(max_tokens=20).min_tokens_to_finish() == 1
    with pytest.raises(BudgetError, match="budgets count no complete output"):
        compiled.matcher(prefix="x = a +", max_tokens=20)


def test_missing_terminals_are_named():
    class Wrong(Semis):
        semicolon_type = "SEMI"

    with pytest.raises(UndefinedSymbolError, match="SEMI"):
        Grammar.from_lark(GRAMMAR, postlex=Wrong())
