"""Lark's backing up under the contextual lexer: each LR state's scanner is a Python ``re`` alternation over the
terminals that state accepts (and the ignored ones), so a lexeme that runs on past a match and dies falls back to
it there too, and the rest is lexed again in the mode of the state the parser then reaches.

Masks equal the brute-force oracle (tests/contextual_oracle.py, which backs up with its own code, one DFA per LR
state of Lark's own parser) and whole-document verdicts equal Lark's.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import lark
import pytest
from conftest import get_vocab
from test_contextual import _check_masks

from grammask import Grammar, compile
from grammask.mask_tables import build_front

# " #ab" runs on as a COMMENT until a line break; at ";" it dies and falls back to the ignored WS, and "#ab" is lexed
# again (HASH, then what follows it: only "x" may). "ab-1" runs on as LONG until "!"; without it LONG dies and falls back
# to NAME, and "-1" is lexed again in the mode after NAME. Every restart here is known without the stack (no branch).
DASH = r"""
start: s+
s: "k" (NAME | LONG) ("-" NUM)? ";" | "m" NUM NUM ";" | HASH "x" ";"
NAME: /[a-z]+/
NUM: /[0-9]+/
LONG: /[a-z]+-[0-9]+!/
HASH: "#"
WS: / +/
COMMENT: / *#[a-w]*\n/
%ignore WS
%ignore COMMENT
"""
DASH_DOCS = ["k ab-1;", "k ab-1!;", "k ab-1!-2;", "m 1 2; #x;", "k a; #x;", "#ab\nk a;", "k a #ab\n;", "k a #ab;", "k ab-1-", "k ab-",
             "k a #x;", "#x;#x;"]

LARK_GRAMMAR = Path(lark.__file__).parent / "grammars" / "lark.lark"
# Lark accepts it (WS_INLINE, then _NL; the whitespace run is a prefix of COMMENT that dies at "R"); main refused "RE"
LARK_DOC = " \n   \u1680   \x0c\x1e       \x0bRELDIH9AP{RR}  .546469:|->osu28rl1"


def _compiled(text: str, vocab_name: str = "smollm2"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grammar = Grammar.from_lark(text, lexer="contextual")
        return grammar, compile(grammar, get_vocab(vocab_name), cache=False)


def _lark_accepts(text: str, doc: str) -> bool:
    try:
        lark.Lark(text, parser="lalr", lexer="contextual").parse(doc)
    except lark.exceptions.LarkError:
        return False
    return True


def _grammask_accepts(compiled, vocab, doc: str) -> bool:
    matcher = compiled.matcher()
    return all(matcher.accept_token(t) for t in vocab.encode(doc)) and matcher.is_accepting()


def test_the_contextual_lexer_gets_fallbacks():
    grammar = Grammar.from_lark(DASH, lexer="contextual")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every fallback is kept
        front = build_front(grammar)
    assert front.lexer.contextual and front.lexer.alt is not None
    assert front.state_modes.shape[0] == front.lexer.n_states


@pytest.mark.parametrize("doc", DASH_DOCS)
def test_verdicts_equal_larks(doc):
    vocab = get_vocab("smollm2")
    _, compiled = _compiled(DASH)
    assert _grammask_accepts(compiled, vocab, doc) == _lark_accepts(DASH, doc), doc


def test_lark_lark_document_that_backs_up():
    text = LARK_GRAMMAR.read_text()
    vocab = get_vocab("smollm2")
    _, compiled = _compiled(text)
    assert _lark_accepts(text, LARK_DOC)
    assert _grammask_accepts(compiled, vocab, LARK_DOC)


def test_masks_equal_oracle_dash():
    docs = [d for d in DASH_DOCS if _lark_accepts(DASH, d)]
    assert _check_masks(DASH, docs, "smollm2", n_prefixes=60, seed=5) >= 60


def test_masks_equal_oracle_lark_lark():
    text = LARK_GRAMMAR.read_text()
    assert _check_masks(text, [LARK_DOC], "smollm2", n_prefixes=30, seed=2) >= 30
