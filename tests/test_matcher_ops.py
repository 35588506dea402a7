"""Engine-shaped matcher operations: starting after a text prefix, accepting and validating token lists,
and forced (jump-forward) text, checked against the reference lexer + Lark parser on a byte vocabulary."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import get_vocab
from oracle import MaskOracle

import grammask as gm
from grammask.automata.lexer import build_lexer
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.errors import TextRejectedError
from grammask.grammar.lark_export import to_lark_text
from grammask.sampler import SentenceSampler, mutate

JME = Path(__file__).resolve().parents[2] / "shared" / "data" / "json-mode-eval"
BYTES = gm.Vocabulary([bytes((b,)) for b in range(256)] + [None], eos_ids=[256], name="bytes")


def _grammars() -> dict[str, gm.Grammar]:
    out = {"json": gm.Grammar.builtin("json"), "c": gm.Grammar.builtin("c")}
    for i in (0, 7, 19):
        path = JME / f"JME_{i}.json"
        if path.exists():
            out[f"JME_{i}"] = gm.Grammar.from_json_schema(json.loads(path.read_text())["schema"], name=f"JME_{i}")
    return out


GRAMMARS = _grammars()


def _byte_oracle(grammar: gm.Grammar) -> MaskOracle:
    """Brute force over single-byte tokens: which bytes (and EOS) may follow a byte prefix."""
    return MaskOracle(to_lark_text(grammar), build_lexer(grammar), BYTES)


def _mask(m, n_logits: int) -> np.ndarray:
    row = allocate_bitmask(1, n_logits)[0]
    m.fill_mask(row)
    return bitmask_to_bool(row, n_logits)


def _documents(grammar: gm.Grammar, n: int, seed: int) -> list[str]:
    sampler = SentenceSampler(grammar, max_depth=6)
    rng = random.Random(seed)
    return [sampler.sample(rng) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_prefix_is_the_state_its_tokens_reach(name):
    vocab = get_vocab("smollm2")
    compiled = gm.compile(GRAMMARS[name], vocab)
    rng = random.Random(1)
    checked = 0
    for doc in _documents(GRAMMARS[name], 12, seed=2):
        data = doc.encode()
        for cut in sorted(rng.sample(range(len(data) + 1), min(4, len(data) + 1))):
            text = data[:cut].decode("utf-8", errors="ignore")
            ids = vocab.encode(text)
            if vocab.decode(ids) != text.encode():
                continue  # the tokenizer prepends or drops something: no token path spells this text
            by_tokens = compiled.matcher()
            for t in ids:
                by_tokens.advance(t)
            by_text = compiled.matcher(prefix=text)
            assert np.array_equal(_mask(by_text, vocab.n_logits), _mask(by_tokens, vocab.n_logits)), (name, text)
            assert by_text.num_tokens == 0 and by_text.is_accepting() == by_tokens.is_accepting()
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("name", ["json", "c", "JME_7"])
def test_rejected_prefix_names_the_first_byte_no_sentence_follows(name):
    if name not in GRAMMARS:
        pytest.skip("JSON-Mode-Eval data not found")
    grammar = GRAMMARS[name]
    compiled = gm.compile(grammar, get_vocab("smollm2"))
    oracle = _byte_oracle(grammar)
    rng = random.Random(3)
    rejected = 0
    for doc in _documents(grammar, 40, seed=4):
        bad = mutate(doc, rng, alphabet='{}[]":,0a \n;()', edits=2).encode()
        try:
            compiled.matcher(prefix=bad)
        except TextRejectedError as e:
            p = e.position
            assert oracle.mask(bad[:p])[bad[p]] == 0, (name, bad, p)
            rejected += 1
    assert rejected >= 5


def _forced_by_oracle(oracle: MaskOracle, prefix: bytes) -> bytes:
    out = b""
    while True:
        allowed = oracle.mask(prefix + out)
        if allowed[256] or allowed[:256].sum() != 1:
            return out
        out += bytes((int(np.flatnonzero(allowed[:256])[0]),))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_forced_text_matches_the_byte_oracle(name):
    grammar = GRAMMARS[name]
    vocab = get_vocab("smollm2")
    compiled = gm.compile(grammar, vocab)
    oracle = _byte_oracle(grammar)
    rng = random.Random(5)
    forced_somewhere = 0
    for doc in _documents(grammar, 8, seed=6):
        data = doc.encode()
        for cut in rng.sample(range(len(data) + 1), min(4, len(data) + 1)):
            prefix = data[:cut]
            m = compiled.matcher(prefix=prefix)
            forced = m.forced_text()
            assert forced == _forced_by_oracle(oracle, prefix), (name, prefix)
            forced_somewhere += bool(forced)
            tokens = m.forced_tokens()
            assert forced.startswith(vocab.decode(tokens))
            assert m.accept_tokens(tokens) == len(tokens)
    assert forced_somewhere >= 1


def test_forced_text_at_the_start_of_a_schema_output():
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    vocab = get_vocab("smollm2")
    m = gm.compile(gm.Grammar.from_json_schema(schema), vocab).matcher()
    assert m.forced_text() == b'{"name":'
    tokens = m.forced_tokens()
    assert tokens and vocab.decode(tokens) == b'{"name'[: len(vocab.decode(tokens))]
    terminated = gm.compile(gm.Grammar.from_regex("ab"), vocab).matcher(prefix="ab")
    assert terminated.forced_text() == b""


@pytest.mark.parametrize("name", ["json", "c"])
def test_accept_and_validate_token_lists(name):
    vocab = get_vocab("smollm2")
    compiled = gm.compile(GRAMMARS[name], vocab)
    rng = random.Random(7)
    for doc in _documents(GRAMMARS[name], 10, seed=8):
        ids = vocab.encode(doc)
        k = rng.randrange(len(ids) + 1)
        at_k = compiled.matcher()
        at_k.accept_tokens(ids[:k])
        disallowed = np.flatnonzero(~_mask(at_k, vocab.n_logits))
        if not len(disallowed):
            continue
        bad = int(rng.choice(disallowed.tolist()))
        draft = [*ids[:k], bad, *ids[k:]]
        m = compiled.matcher()
        before = _mask(m, vocab.n_logits)
        assert m.validate_tokens(draft) == k
        assert m.num_tokens == 0 and np.array_equal(_mask(m, vocab.n_logits), before)
        assert m.accept_tokens(draft) == k and m.num_tokens == k
        m.rollback(k)
        assert np.array_equal(_mask(m, vocab.n_logits), before)


def test_budget_counts_from_the_end_of_the_prefix():
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    prefix = '{"key": [1, 2, {"a": "lon'
    free = compiled.matcher(prefix=prefix)
    need = free.min_tokens_to_finish()
    rng = np.random.default_rng(9)
    for _ in range(20):
        m = compiled.matcher(need + 3, prefix=prefix)
        while not m.is_terminated():
            allowed = m.allowed_tokens()
            assert len(allowed)
            m.advance(int(rng.choice(allowed)))
        assert m.num_tokens <= need + 3
    with pytest.raises(gm.BudgetError):
        compiled.matcher(need - 1, prefix=prefix)


@pytest.mark.parametrize("canonical", [False, True])
def test_bad_arguments_name_the_problem(canonical):
    vocab = get_vocab("smollm2")
    compiled = gm.Compiler(vocab).compile(gm.Grammar.builtin("json"))
    m = compiled.matcher(canonical=canonical)
    row = allocate_bitmask(1, vocab.n_logits)[0]
    for token in ("a", 3.0, None, "5"):
        with pytest.raises(gm.errors.TokenOutOfRangeError, match="is not an integer"):
            m.advance(token)
        with pytest.raises(gm.errors.TokenOutOfRangeError, match="is not an integer"):
            m.accept_tokens([token])
    for bad in (row.astype(np.float32), row.astype(np.int64), np.stack([row, row]), list(row), row[::2]):
        with pytest.raises(gm.errors.ConfigurationError, match="mask row"):
            m.fill_mask(bad)
    read_only = row.copy()
    read_only.flags.writeable = False
    with pytest.raises(gm.errors.ConfigurationError, match="read-only"):
        m.fill_mask(read_only)
    with pytest.raises(gm.errors.MatcherStateError, match="number of tokens"):
        m.rollback("x")
    m.advance(np.int64(vocab.encode("[")[0]))  # NumPy ints are token ids
    m.rollback(np.int64(1))
    assert m.fill_mask(row) is None and not m.is_terminated()
    with pytest.raises(gm.errors.ConfigurationError, match="prefix must be text"):
        compiled.matcher(prefix=5, canonical=canonical)
    with pytest.raises(gm.errors.ConfigurationError, match="counts >= 0"):
        allocate_bitmask(-1, vocab.n_logits)


@pytest.mark.parametrize("grammar", [gm.Grammar.from_regex(""), gm.Grammar.from_lark("start:"),
                                     gm.Grammar.from_gbnf("root ::= ")], ids=["regex", "lark", "gbnf"])
def test_a_grammar_of_the_empty_text_allows_only_eos(grammar):
    # No terminal at all: the lexer is built from no automata (it crashed on them).
    vocab = get_vocab("smollm2")
    compiled = gm.Compiler(vocab, cache=False).compile(grammar)
    for options in ({}, {"max_tokens": 1}, {"canonical": True}, {"canonical": True, "max_tokens": 1}):
        m = compiled.matcher(**options)
        assert m.allowed_tokens().tolist() == sorted(vocab.eos_ids), options
        m.advance(min(vocab.eos_ids))
        assert m.is_terminated()
