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
import numpy as np
import pytest
from conftest import get_vocab
from contextual_oracle import ContextualOracle
from mask_check import check_cuts
from test_contextual import _check_masks

from grammask import Grammar, compile
from grammask.automata.lexer import build_lexer
from grammask.compiler import clear_caches
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

# ":f" runs on as a DOC; at "o" it dies and falls back to SEP, after which the next mode depends on the stack: after
# "a" only NAME may follow (so "for" is a NAME there), after "b" only FOR (so "fox" fails). The two modes lex "fo" into
# different states, so the fallback's restart is picked by the mode the parser reaches after SEP (a parting state).
PARTED = r"""
start: s+
s: "a" (SEP | DOC) NAME ";" | "b" (SEP | DOC) FOR ";"
SEP: ":"
DOC: /:f"[^"]*"/
NAME: /[a-z]+/
FOR: "for"
%ignore " "
"""
PARTED_DOCS = ["a:for;", "b:for;", "a:fox;", "b:fox;", 'a:f"x"y;', 'b:f"x"for;', "a:f;", "b:f;", "a:fo;", "a:for;b:for;",
               "b:for;a:fox;", "b: for;", "a:f", "b:fo"]

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


def test_a_fallback_whose_modes_part_is_kept():
    grammar = Grammar.from_lark(PARTED, lexer="contextual")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback to SEP is kept, with a restart per mode after it
        front = build_front(grammar)
    lexer = front.lexer
    assert lexer.part_row is not None
    heads = np.flatnonzero(lexer.part_row >= 0)
    assert len(heads) == 1 and lexer.terminals[lexer.parting[heads[0]]] == "SEP"
    members = lexer.parts[lexer.part_row[heads[0]], 1:]
    assert len(set(members.tolist())) == 2 and (lexer.part_bits[members] != 0).all()


def test_grammars_without_parting_pay_nothing():
    lexer = build_front(Grammar.from_lark(DASH, lexer="contextual")).lexer
    assert lexer.part_row is None and lexer.parts is None and lexer.part_bits is None


@pytest.mark.parametrize("vocab_name", ["smollm2", "llama2"])
def test_parted_verdicts_equal_larks(vocab_name):
    vocab = get_vocab(vocab_name)
    _, compiled = _compiled(PARTED, vocab_name)
    wrong = [doc for doc in PARTED_DOCS if _grammask_accepts(compiled, vocab, doc) != _lark_accepts(PARTED, doc)]
    assert not wrong
    assert _lark_accepts(PARTED, "a:for;") and not _lark_accepts(PARTED, "b:fox;")


def test_parted_masks_equal_oracle_at_every_cut():
    vocab = get_vocab("smollm2")
    grammar, compiled = _compiled(PARTED)
    oracle = ContextualOracle(PARTED, grammar, build_lexer(grammar).rank, vocab)
    for doc in PARTED_DOCS:
        ids = vocab.encode(doc)
        if vocab.decode(ids) == doc.encode() and _lark_accepts(PARTED, doc):
            check_cuts(compiled, oracle, vocab, ids, list(range(len(ids) + 1)))


def test_parted_masks_equal_oracle_sampled():
    docs = [d for d in PARTED_DOCS if _lark_accepts(PARTED, d)]
    assert _check_masks(PARTED, docs, "smollm2", n_prefixes=60, seed=7) >= 60


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


def test_masks_equal_oracle_where_only_the_end_falls_back():
    # lark.lark's REGEXP after "/\/": Lark backs up to it only where no "/" follows before the end of input
    docs = ["a: /\\/\nb: c\n", "a: /\\/ | /y/\n", "a: /\\/ c x/\n"]
    assert _check_masks(LARK_GRAMMAR.read_text(), docs, "smollm2", n_prefixes=12, seed=4) >= 12


def test_parting_states_survive_the_disk_cache(tmp_path):
    vocab = get_vocab("smollm2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grammar = Grammar.from_lark(PARTED, lexer="contextual")
        first = compile(grammar, vocab, cache=tmp_path)
        clear_caches()
        second = compile(grammar, vocab, cache=tmp_path)
    assert second.stats.from_cache
    built, loaded = first._engine.lexer, second._engine.lexer
    for field in ("part_row", "parts", "part_bits"):
        assert np.array_equal(getattr(built, field), getattr(loaded, field)), field
    assert _grammask_accepts(second, vocab, "a:for;") and not _grammask_accepts(second, vocab, "b:fox;")
