"""Lark's contextual lexer (``lexer="contextual"``): masks equal a brute-force oracle, verdicts equal Lark's.

The oracle (tests/contextual_oracle.py) builds one DFA per LR state of Lark's own parser from the terminals
that state accepts, with none of the engine's shortcuts (modes merged, terminals that shadow nothing kept,
branch aliases), and checks every vocabulary token at random prefixes of sampled documents and of documents
only the contextual lexer accepts.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from conftest import get_vocab
from contextual_oracle import ContextualOracle
from lark import Lark
from lark.exceptions import LarkError
from mask_check import check_cuts

from grammask import Grammar, compile
from grammask.automata.lexer import build_lexer
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.grammar.builtin import builtin_source
from grammask.mask_tables import build_front
from grammask.sampler import SentenceSampler, mutate

# Keywords a NAME may spell where the keyword cannot stand, and "=" / "==" where only one can: the next
# lexeme's mode after NAME depends on the stack (branches).
LET = r"""
start: stmt+
stmt: "let" NAME "=" expr ";" | "print" expr ";" | NAME "==" expr ";" | "if" expr "then" stmt
expr: NAME | NUMBER | expr "+" expr | "(" expr ")" | expr "=>" expr
NAME: /[a-z_]+/
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore /[ \n]+/
"""
LET_ONLY_CONTEXTUAL = ["let let = print;", "print if;", "let then = 1; then == then;", "if if then print if;",
                       "let x = let=>print;", "print then+let;"]

KEYS = r"""
start: "{" [pair ("," pair)*] "}"
pair: KEY ":" value
value: "true" | "false" | "null" | NUMBER | KEY | start
KEY: /[a-z]+/
NUMBER: /-?[0-9]+/
%ignore " "
"""
KEYS_ONLY_CONTEXTUAL = ['{true: null}', '{null: true, false: false}', '{a: {true: x}}']

# After "k" the next lexeme's mode depends on what came before "k": after "p" both XX and Y compete ("xx" is
# one XX), after "q" only Y does ("xx" is two Y). A token "xxx" read right after "k" is lexed both ways at
# once by the walk; only the stack says which reading is the real one.
SPLIT = r"""
start: "p" "k" (XX | Y Y Y) | "q" "k" Y Y Y Y
XX: "xx"
Y: "x"
%ignore " "
"""
SPLIT_DOCS = ["pkxx", "pk x x x", "qkxxxx", "q k x xxx"]

# STRING's lookahead reaches one byte past ''. After "a" only STRING may stand, so no LONG lexeme extends '' on a
# third quote: there '' may not end before "'" (a ban), and "a'''x'" is rejected, as Lark's regex rejects it.
QUOTES = r"""
start: "a" STRING+ | "b" (STRING | LONG)+
STRING: /'(?!'')[^']*'/
LONG: /'''[^']*'''/
%ignore " "
"""
QUOTES_DOCS = ["a'' 'x'", "b'''x''''y'", "a'x''y'", "b'' '''q'''"]

# After "a" only A may stand, so no AB lexeme extends "x": there A's lookahead bans "x" before any byte but "y" and
# at the end of input (which token budgets count: tests/test_budget.py).
EOF_BAN = r"""
start: "a" A Y | "b" (A Y | AB)
A: /x(?=y)/
AB: /x[a-xz]*/
Y: "y"
"""

SMALL = {"let": (LET, LET_ONLY_CONTEXTUAL), "keys": (KEYS, KEYS_ONLY_CONTEXTUAL), "split": (SPLIT, SPLIT_DOCS),
         "quotes": (QUOTES, QUOTES_DOCS)}


def _compiled(text: str, vocab_name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grammar = Grammar.from_lark(text, lexer="contextual")
        return grammar, compile(grammar, get_vocab(vocab_name), cache=False)


def _check_masks(text: str, extra: list[str], vocab_name: str, n_prefixes: int, seed: int) -> int:
    vocab = get_vocab(vocab_name)
    grammar, compiled = _compiled(text, vocab_name)
    oracle = ContextualOracle(text, grammar, build_lexer(grammar).rank, vocab)
    sampler = SentenceSampler(grammar, max_depth=6)
    rng = random.Random(seed)
    docs = list(extra)
    checked = 0
    while checked < n_prefixes:
        doc = docs.pop() if docs else sampler.sample(rng)
        ids = vocab.encode(doc)
        if vocab.decode(ids).strip() != doc.encode().strip():
            continue
        checked += check_cuts(compiled, oracle, vocab, ids, sorted(rng.sample(range(len(ids) + 1), min(4, len(ids) + 1))))
    return checked


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("vocab_name", ["smollm2", "llama2"])
def test_masks_equal_oracle(name, vocab_name):
    text, extra = SMALL[name]
    assert _check_masks(text, extra, vocab_name, n_prefixes=40, seed=3) >= 40


@pytest.mark.parametrize("vocab_name", ["smollm2", "llama2"])
def test_stack_decides_a_token_lexed_in_two_modes(vocab_name):
    vocab = get_vocab(vocab_name)
    grammar, compiled = _compiled(SPLIT, vocab_name)
    oracle = ContextualOracle(SPLIT, grammar, build_lexer(grammar).rank, vocab)
    xxx = vocab.tokens.index(b"xxx")
    verdicts = {}
    for prefix in ("pk", "qk", "p k", "qkx"):
        row = allocate_bitmask(1, vocab.n_logits)[0]
        compiled.matcher(prefix=prefix).fill_mask(row)
        mask = bitmask_to_bool(row, vocab.n_logits)
        assert np.array_equal(mask, oracle.mask(prefix.encode())), prefix
        verdicts[prefix] = bool(mask[xxx])
    # "pk" + "xxx" lexes as XX then Y (a dead end); "qk" + "xxx" as three Y
    assert verdicts == {"pk": False, "qk": True, "p k": False, "qkx": True}


def test_a_lexeme_whose_lookahead_fails_may_not_end():
    _, compiled = _compiled(QUOTES, "smollm2")
    assert compiled._engine.lexer.ban is not None
    lark = Lark(QUOTES, parser="lalr", lexer="contextual")
    for doc, accepted in [("a'''x'", False), ("a'' 'x'", True), ("b'''x'''", True), ("a''", True), ("a'''", False)]:
        assert _lark_accepts(lark, doc) == accepted, doc
        assert _grammask_accepts(compiled, get_vocab("smollm2"), doc) == accepted, doc


def _lark_accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except LarkError:
        return False
    return True


def _grammask_accepts(compiled, vocab, text: str) -> bool:
    matcher = compiled.matcher()
    return all(matcher.accept_token(t) for t in vocab.encode(text)) and matcher.is_accepting()


@pytest.mark.parametrize("name", ["c", "let", "keys", "split", "quotes"])
def test_agrees_with_lark(name):
    """Whole documents, sampled and mutated: grammask's verdict is Lark's with ``lexer="contextual"``."""
    text = builtin_source("c") if name == "c" else SMALL[name][0]
    vocab = get_vocab("llama3")
    grammar, compiled = _compiled(text, "llama3")
    lark = Lark(text, parser="lalr", lexer="contextual")
    sampler = SentenceSampler(grammar, max_depth=7)
    alphabet = "".join(sorted({ch for t in grammar.terminals if t.literal for ch in t.literal} | set(" \nabcxyz019")))
    rng = random.Random(11)
    docs = [("contextual only", d) for d in ([] if name == "c" else SMALL[name][1])]
    for _ in range(150):
        doc = sampler.sample(rng)
        docs += [("sampled", doc), ("mutated", mutate(doc, rng, alphabet, edits=rng.randint(1, 3)))]
    verdicts = {"sampled": set(), "mutated": set(), "contextual only": set()}
    for kind, doc in docs:
        reference = _lark_accepts(lark, doc)
        assert _grammask_accepts(compiled, vocab, doc) == reference, f"{kind} document, Lark says {reference}: {doc!r}"
        verdicts[kind].add(reference)
    assert verdicts["sampled"] == {True}
    assert verdicts["mutated"] == {True, False}
    assert verdicts["contextual only"] <= {True}


def test_contextual_only_documents_are_refused_by_the_basic_lexer():
    vocab = get_vocab("llama3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        basic = compile(Grammar.from_lark(LET, lexer="basic"), vocab, cache=False)
    _, contextual = _compiled(LET, "llama3")
    for doc in LET_ONLY_CONTEXTUAL:
        assert _grammask_accepts(contextual, vocab, doc) and not _grammask_accepts(basic, vocab, doc), doc


def test_pays_nothing_where_the_lexers_agree():
    """JSON's terminals never shadow one another where the parser could tell: one mode, the basic lexer itself."""
    basic = build_front(Grammar.builtin("json"))
    contextual = build_front(Grammar.from_lark(builtin_source("json"), lexer="contextual"))
    assert contextual.state_modes is None and not contextual.lexer.contextual
    assert np.array_equal(basic.lexer.trans, contextual.lexer.trans)
    assert np.array_equal(basic.tables.action, contextual.tables.action)


def test_compiled_tables_survive_the_disk_cache(tmp_path):
    from grammask import Compiler

    vocab = get_vocab("smollm2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grammar = Grammar.from_lark(LET, lexer="contextual")
    fresh = Compiler(vocab, cache=tmp_path).compile(grammar)
    loaded = Compiler(vocab, cache=tmp_path).compile(grammar)
    rows = allocate_bitmask(2, vocab.n_logits)
    for doc in LET_ONLY_CONTEXTUAL:
        ids = vocab.encode(doc)
        a, b = fresh.matcher(), loaded.matcher()
        for t in ids:
            a.fill_mask(rows[0])
            b.fill_mask(rows[1])
            assert np.array_equal(rows[0], rows[1])
            a.advance(t)
            b.advance(t)
        assert a.is_accepting() and b.is_accepting()


def test_refusals_name_the_problem():
    from grammask.errors import ConfigurationError
    from grammask.grammar.builtin import builtin_postlex

    with pytest.raises(ConfigurationError, match="'basic' or 'contextual'|'contextual' and 'basic'"):
        Grammar.from_lark(LET, lexer="dynamic")
    _, compiled = _compiled(LET, "smollm2")
    assert compiled.matcher(max_tokens=20).max_tokens == 20  # budgets are built under the contextual lexer
    _, banned = _compiled(EOF_BAN, "smollm2")  # a lexeme banned at the end of input: budgets count it (test_budget)
    assert banned.limited_matcher(20).max_tokens == 20
    go = Grammar.from_lark(builtin_source("go"), postlex=builtin_postlex("go"), lexer="contextual")
    with pytest.raises(ConfigurationError, match="semicolon insertion.*lexer='basic'"):
        build_front(go)
