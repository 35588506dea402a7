"""Lark's first match under the contextual lexer: a terminal is cut only where its cutter competes (issue 13).

Lark's lexer tries its terminals as a first-match alternation, so a regex of higher priority that matches a proper
prefix of a string of a later terminal takes that prefix (grammask cuts those strings from the later terminal:
:mod:`grammask.automata.first_match`). Under the contextual lexer each LR state has its own alternation, of the
terminals it accepts: the cut holds only in the states whose scanner has the cutter.
"""

from __future__ import annotations

import random
import warnings

import pytest
from conftest import get_vocab, skip_module_without_syncode
from contextual_oracle import ContextualOracle
from lark import Lark
from mask_check import check_cuts
from test_contextual import _compiled, _grammask_accepts, _lark_accepts

from grammask import Grammar, compile
from grammask.automata.lexer import build_lexer
from grammask.sampler import SentenceSampler, mutate

# CONSTRAINT (priority 9) takes "all" out of "allowed" where it competes (right after "select" and "union"), and
# nowhere else: there "allowed" and "allfrom" are one NAME.
QUERY = r"""
start: query ("union" CONSTRAINT? query)*
query: "select" CONSTRAINT? NAME alias? "from" NAME ("where" NAME "=" NUMBER)?
alias: NAME
CONSTRAINT.9: "all"i | "distinct"i
NAME: /[a-z][a-z0-9]*/i
NUMBER: /[0-9]+/
%ignore " "
"""
# (document, Lark's verdict): the first three are issue 13's SQL texts in small
QUERY_DOCS = [
    ("select a from t where allowed = 1", True),
    ("select 1 allfrom t", False),
    ("select a allfrom t", False),
    ("select a from allowed", True),
    ("select allowed from t", True),
    ("select all x from t", True),
    ("select allx from t", True),
    ("select a from t union allselect b from c", True),
    ("select a from t union allowed from c", False),
    ("select distincta b from t", True),
    ("select distincta from t", True),
]


def test_the_cut_holds_only_where_the_cutter_competes():
    vocab = get_vocab("smollm2")
    _, compiled = _compiled(QUERY, "smollm2")
    lark = Lark(QUERY, parser="lalr", lexer="contextual")
    for doc, accepted in QUERY_DOCS:
        assert _lark_accepts(lark, doc) == accepted, doc
        assert _grammask_accepts(compiled, vocab, doc) == accepted, doc


def test_agrees_with_lark_on_sampled_and_mutated_documents():
    vocab = get_vocab("smollm2")
    grammar, compiled = _compiled(QUERY, "smollm2")
    lark = Lark(QUERY, parser="lalr", lexer="contextual")
    sampler = SentenceSampler(grammar, max_depth=6)
    rng = random.Random(5)
    alphabet = "alowedfrmsctinux 1"
    verdicts = set()
    for _ in range(150):
        doc = sampler.sample(rng)
        for text in (doc, mutate(doc, rng, alphabet, edits=rng.randint(1, 3))):
            reference = _lark_accepts(lark, text)
            assert _grammask_accepts(compiled, vocab, text) == reference, f"Lark says {reference}: {text!r}"
            verdicts.add(reference)
    assert verdicts == {True, False}


@pytest.mark.parametrize("vocab_name", ["smollm2", "llama2"])
def test_masks_equal_oracle(vocab_name):
    vocab = get_vocab(vocab_name)
    grammar, compiled = _compiled(QUERY, vocab_name)
    oracle = ContextualOracle(QUERY, grammar, build_lexer(grammar).rank, vocab)
    docs = ["select a from t where allowed = 1", "select allowed from allx", "select a from t union allselect b from c",
            "select distinct distinct from t"]
    checked = 0
    for doc in docs:
        ids = vocab.encode(doc)
        checked += check_cuts(compiled, oracle, vocab, ids, list(range(len(ids) + 1)))
    assert checked >= 20


def test_the_basic_lexer_still_cuts_everywhere():
    """lexer='basic' is Lark's basic lexer: one alternation, "allowed" is CONSTRAINT then NAME everywhere."""
    vocab = get_vocab("smollm2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        basic = compile(Grammar.from_lark(QUERY, lexer="basic"), vocab, cache=False)
    lark = Lark(QUERY, parser="lalr", lexer="basic")
    for doc in ("select a from t where allowed = 1", "select allowed from t", "select a allfrom t"):
        assert _grammask_accepts(basic, vocab, doc) == _lark_accepts(lark, doc), doc


@pytest.fixture(scope="module")
def syncode_sql():
    skip_module_without_syncode()
    import cases

    text = (cases.shared_dir(cases.SYNCODE_SUBDIR) / "sql.lark").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile(Grammar.from_lark(text, name="sql"), get_vocab("smollm2"), cache=False)
    return compiled, Lark(text, parser="lalr", lexer="contextual")


@pytest.mark.parametrize("doc", ["SELECT a FROM t WHERE allowed = 1", "SELECT 1 Allfrom t",
                                 "SELECT a FROM t window allas", "SELECT ALL a FROM t"])
def test_syncode_sql_agrees_with_lark(syncode_sql, doc):
    """Issue 13's texts on SynCode's SQL grammar: grammask's verdict is Lark's."""
    compiled, lark = syncode_sql
    assert _grammask_accepts(compiled, get_vocab("smollm2"), doc) == _lark_accepts(lark, doc)
