"""Counted constraints: a compile deadline, big counts refused before unrolling where they cannot be counted, and
counted terminals (the length beside the lexer state) exact against the unrolled grammar's brute-force oracle."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from conftest import get_vocab
from mask_check import unrolled_oracle

import grammask as gm
from grammask.automata.lexer import build_lexer
from grammask.batch import fill_masks
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.errors import (
    CompileTimeoutError,
    ConfigurationError,
    Deadline,
    TextRejectedError,
)
from grammask.grammar import regex_frontend
from grammask.grammar.ir import Count, Grammar, Rule, Terminal
from grammask.grammar.json_schema import reader

# Its DFA has 2**16 states (the 16th byte from the end must be an 'a'): seconds to build.
SLOW = gm.Grammar.from_regex("(a|b)*a(a|b){15}")


def _timed(call):
    start = time.perf_counter()
    try:
        return call(), time.perf_counter() - start
    except gm.GrammaskError as e:
        return e, time.perf_counter() - start


@pytest.mark.parametrize("where", ["compiler", "compile"])
def test_a_long_compile_stops_at_its_timeout_naming_grammar_and_phase(where):
    limit = 0.3
    if where == "compiler":
        compiler = gm.Compiler(get_vocab("smollm2"), cache=False, timeout=limit)
        error, seconds = _timed(lambda: compiler.compile(SLOW))
    else:
        compiler = gm.Compiler(get_vocab("smollm2"), cache=False)
        error, seconds = _timed(lambda: compiler.compile(SLOW, timeout=limit))
    assert isinstance(error, CompileTimeoutError) and isinstance(error, gm.GrammarError)
    assert seconds < limit + 1.5
    assert error.grammar == "regex" and "lexer DFA" in error.phase and "'regex'" in str(error)


def test_a_timeout_only_applies_where_the_compile_is_slow():
    compiler = gm.Compiler(get_vocab("smollm2"), cache=False, timeout=60)
    assert compiler.compile(gm.Grammar.from_regex("[a-z]{2,8}")).matcher() is not None


def test_submit_passes_the_timeout():
    compiler = gm.Compiler(get_vocab("smollm2"), cache=False)
    with pytest.raises(CompileTimeoutError):
        compiler.submit(SLOW, timeout=0.2).result(timeout=60)


@pytest.mark.parametrize("timeout", [0, -1, "1", True])
def test_a_bad_timeout_is_a_configuration_error(timeout):
    with pytest.raises(ConfigurationError):
        gm.Compiler(get_vocab("smollm2"), cache=False, timeout=timeout)
    with pytest.raises(ConfigurationError):
        gm.Compiler(get_vocab("smollm2"), cache=False).compile(SLOW, timeout=timeout)


def test_deadline_without_limit_never_passes():
    Deadline(None).check("anything")
    with pytest.raises(CompileTimeoutError, match="stopped in here"):
        expired = Deadline(1e-9, "g")
        time.sleep(0.001)
        expired.check("here")


@pytest.mark.parametrize("pattern", ["x(ab|cd){2,100000}y", "(a{1,1000}){1,1000}", "(?:.{3}){400000,}"])
def test_a_big_regex_count_that_cannot_be_counted_is_refused_before_unrolling(pattern):
    compiler = gm.Compiler(get_vocab("smollm2"), cache=False)
    error, seconds = _timed(lambda: compiler.compile(gm.Grammar.from_regex(pattern)))
    assert isinstance(error, gm.UnsupportedRegexError) and "counted repeat" in str(error)
    assert seconds < 1.0  # refused before unrolling, not after (the speed bar itself is in bench/bench_counted.py)


def test_a_regex_count_within_the_bound_stays_exact():
    compiled = gm.Compiler(get_vocab("smollm2"), cache=False).compile(gm.Grammar.from_regex("a{3,1000}"))
    m = compiled.matcher()
    for token in compiled.vocab.encode("a" * 1000):
        m.advance(token)
    assert m.is_accepting()


# --- counted terminals: the length kept beside the lexer state --------------------------------------------


@pytest.mark.parametrize("pattern", ["a{1,100000}", "[a-z]{100000}", "id-[0-9]{1,100000}"])
def test_a_big_regex_count_is_counted_not_unrolled(pattern):
    grammar = gm.Grammar.from_regex(pattern)
    assert grammar.terminals[0].count is not None
    compiled = gm.Compiler(get_vocab("smollm2"), cache=False).compile(grammar)
    assert compiled.stats.lexer_states < 20


def test_a_counted_regex_takes_exactly_its_bound():
    compiled = gm.Compiler(get_vocab("smollm2"), cache=False).compile(gm.Grammar.from_regex("a{1,100000}"))
    vocab = compiled.vocab
    m = compiled.matcher()
    for token in vocab.encode("a" * 100000):
        m.advance(token)
    assert m.is_accepting()
    with pytest.raises(gm.TokenRejectedError):
        m.advance(vocab.encode("a")[0])
    assert [int(t) for t in m.allowed_tokens()] == sorted(vocab.eos_ids)
    last = vocab.encode("a" * 100000)[-1]
    m.rollback(1)
    assert last in m.allowed_tokens()


def _short_vocab(longest: int = 3) -> gm.Vocabulary:
    """SmolLM2's tokens of at most ``longest`` bytes: a real tokenizer's pieces, and a small ``L`` so that counts
    far from a bound (masks from the tables) and near it (masks per level) both come up with small bounds."""
    full = get_vocab("smollm2")
    return gm.Vocabulary([t if t is not None and len(t) <= longest else None for t in full.tokens], full.eos_ids,
                         name=f"smollm2-{longest}")


SHORT = _short_vocab()


def _random_walks(compiled, reference: gm.Grammar, walks: int, steps: int, seed: int) -> int:
    """Masks of ``compiled`` (counted) against the brute-force oracle of ``reference`` (the same language, unrolled)
    along random walks of allowed tokens; the number of masks compared."""
    vocab = compiled.vocab
    oracle = unrolled_oracle(reference, vocab)
    rng = random.Random(seed)
    row = allocate_bitmask(1, vocab.n_logits)[0]
    checked = 0
    for _ in range(walks):
        m, prefix = compiled.matcher(), b""
        for _ in range(steps):
            m.fill_mask(row)
            got = bitmask_to_bool(row, vocab.n_logits)
            want = oracle.mask(prefix)
            extra, missing = np.flatnonzero(got & ~want)[:5], np.flatnonzero(want & ~got)[:5]
            assert not len(extra) and not len(missing), (
                f"after {prefix[-40:]!r} (lexer state {m.lexer_state}, count {m._post}): wrongly allowed "
                f"{[vocab.tokens[i] for i in extra]}, wrongly masked {[vocab.tokens[i] for i in missing]}"
            )
            checked += 1
            text = [t for t in np.flatnonzero(want).tolist() if vocab.tokens[t] is not None]
            if not text:
                break
            token = rng.choice(text)
            m.advance(token)
            prefix += vocab.tokens[token]
    return checked


REGEXES = ["x[ab]{0,12}y", "[a-c]{5,9}", "id-[0-9]{3,30}", "[^!\\n]{2,15}!", "é{1,10}", "[a-y]{4,}z"]


@pytest.mark.parametrize("lazy", [False, True], ids=["whole", "lazy"])
@pytest.mark.parametrize("pattern", REGEXES)
def test_counted_regex_masks_equal_the_unrolled_oracle(pattern, lazy, monkeypatch):
    monkeypatch.setattr(regex_frontend, "COUNT_FROM", 0)
    counted = gm.Grammar.from_regex(pattern)
    assert counted.terminals[0].count is not None
    compiled = gm.Compiler(SHORT, cache=False, lazy=lazy).compile(counted)
    assert compiled.stats.complete != lazy
    assert _random_walks(compiled, gm.Grammar.from_regex(pattern, count=False), walks=30, steps=40, seed=1) > 60


SCHEMAS = [
    {"type": "string", "minLength": 3, "maxLength": 12},
    {"type": "string", "minLength": 9},
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 4}, "t": {"type": "string"}},
     "required": ["s", "t"]},
    {"type": "string", "pattern": "^[A-Z][a-z0-9]{2,25}$"},
    # Slow: the unrolled reference's oracle lexes every token from each of its many states in Python.
    pytest.param({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 8}, "b": {"enum": ["abc", "abcdefghijk", "x"]},
        "c": {"type": "string", "minLength": 5, "maxLength": 20, "pattern": "^[a-z]+$"}},
        "additionalProperties": {"type": "string", "maxLength": 10}}, marks=pytest.mark.slow),
    pytest.param({"type": "array", "items": {"anyOf": [
        {"type": "string", "maxLength": 6}, {"type": "string", "pattern": "^a", "minLength": 12}, {"type": "integer"}]}},
        marks=pytest.mark.slow),
]


@pytest.mark.parametrize("lazy", [False, True], ids=["whole", "lazy"])
@pytest.mark.parametrize("schema", SCHEMAS)
def test_counted_schema_masks_equal_the_unrolled_oracle(schema, lazy, monkeypatch):
    monkeypatch.setattr(reader, "COUNT_ABOVE", 0)
    counted = gm.Grammar.from_json_schema(schema)
    assert any(t.count is not None for t in counted.terminals)
    compiled = gm.Compiler(SHORT, cache=False, lazy=lazy).compile(counted)
    assert compiled.stats.complete != lazy
    reference = gm.Grammar.from_json_schema(schema, count_lengths=False)
    assert _random_walks(compiled, reference, walks=10, steps=40, seed=len(str(schema))) > 50


MESSAGE = {"type": "object", "properties": {"to": {"type": "string", "minLength": 1, "maxLength": 40},
                                            "body": {"type": "string", "maxLength": 10000}}, "required": ["to", "body"]}


def _message(lazy: bool = False) -> gm.CompiledGrammar:
    return gm.Compiler(get_vocab("smollm2"), cache=False, lazy=lazy).compile(gm.Grammar.from_json_schema(MESSAGE))


def _masks(m) -> np.ndarray:
    return m.allowed_tokens()


def test_a_counted_string_takes_its_bound_and_no_more():
    compiled = _message()
    vocab = compiled.vocab
    text = '{"to":"' + "x" * 40 + '","body":"' + "hello " * 1600
    m = compiled.matcher(prefix=text + "abcd")  # 9,604 characters of body
    assert m.forced_text() == b""
    quote = vocab.encode('"}')
    with pytest.raises(TextRejectedError):
        compiled.matcher(prefix='{"to":"' + "x" * 41)
    full = compiled.matcher(prefix=text + "a" * 400)
    assert full.forced_text() == b'"'  # then "}" or "," (more properties may come)
    assert full.accept_tokens(quote) == len(quote) and full.is_accepting()
    with pytest.raises(TextRejectedError):
        compiled.matcher(prefix=text + "a" * 401)


@pytest.mark.parametrize("lazy", [False, True], ids=["whole", "lazy"])
def test_fork_rollback_and_prefix_keep_the_count(lazy):
    compiled = _message(lazy)
    vocab = compiled.vocab
    ids = vocab.encode('{"to":"' + "ab" * 19 + 'c", "body":"' + "word " * 1990 + "abc")
    m = compiled.matcher()
    states = []
    for t in ids:
        states.append(_masks(m))
        m.advance(t)
    assert np.array_equal(_masks(m), _masks(compiled.matcher(prefix=vocab.decode(ids))))
    other = m.fork()
    back = 0
    for k in (1, 7, 40):
        m.rollback(k)
        back += k
        assert np.array_equal(_masks(m), states[len(ids) - back])
    assert np.array_equal(_masks(other), _masks(compiled.matcher(prefix=vocab.decode(ids))))


@pytest.mark.parametrize("lazy", [False, True], ids=["whole", "lazy"])
def test_batched_masks_equal_each_matchers_own_near_and_far_from_the_bound(lazy):
    compiled = _message(lazy)
    assert compiled.stats.complete != lazy
    vocab = compiled.vocab
    texts = ['{"to":"' + "x" * n for n in (0, 5, 38, 40)] + ['{"to":"x","body":"' + "y" * n for n in (10, 9990, 9999)]
    matchers = [compiled.matcher(prefix=t) for t in texts]
    assert any(compiled._engine.counting.near(m.lexer_state, m._post) for m in matchers)
    assert any(not compiled._engine.counting.near(m.lexer_state, m._post) for m in matchers)
    rows = allocate_bitmask(len(matchers), vocab.n_logits)
    fill_masks(matchers, rows)
    for m, row in zip(matchers, rows, strict=True):
        own = allocate_bitmask(1, vocab.n_logits)[0]
        m.fill_mask(own)
        assert np.array_equal(own, row)


def test_budgets_are_refused_with_counted_terminals():
    compiled = _message()
    with pytest.raises(gm.BudgetError, match="counted"):
        compiled.matcher(max_tokens=50)
    with pytest.warns(UserWarning, match="without a token budget"):
        assert compiled.limited_matcher(50).max_tokens is None


def test_unrolled_lengths_remain_an_option():
    grammar = gm.Grammar.from_json_schema({"type": "string", "maxLength": 12}, count_lengths=False)
    assert all(t.count is None for t in grammar.terminals)
    with pytest.raises(gm.UnsupportedSchemaError, match="maxLength"):
        gm.Grammar.from_json_schema({"type": "string", "maxLength": 10000}, count_lengths=False)
    assert gm.Grammar.from_regex("a{1,100000}", count=False) is not None  # refused when compiled: see above


def test_a_bound_on_a_format_is_refused_past_what_unrolls(recwarn):
    with pytest.raises(gm.UnsupportedSchemaError, match="maxLength"):
        gm.Grammar.from_json_schema({"type": "string", "format": "email", "maxLength": 254})
    grammar = gm.Grammar.from_json_schema({"type": "string", "format": "email", "maxLength": 254}, strict=False)
    assert any("maxLength" in n for n in grammar.notes)


def test_the_lexer_refuses_a_counted_terminal_whose_lengths_skip():
    grammar = Grammar((Terminal("A", "a(bc)*", count=Count(1, 1000)),), (Rule("start", ("A",)),), "start")
    with pytest.raises(gm.GrammarError, match="cannot be counted"):
        build_lexer(grammar)


@pytest.mark.parametrize("lazy", [False, True], ids=["whole", "lazy"])
def test_counted_tables_survive_the_disk_cache(tmp_path, lazy):
    grammar = gm.Grammar.from_json_schema(MESSAGE)
    text = '{"to":"ab","body":"' + "z" * 9998
    first = gm.Compiler(get_vocab("smollm2"), cache=tmp_path, lazy=lazy).compile(grammar)
    want = _masks(first.matcher(prefix=text))
    assert first.complete().stats.complete
    again = gm.Compiler(get_vocab("smollm2"), cache=tmp_path).compile(grammar)
    assert again.stats.from_cache
    assert np.array_equal(want, _masks(again.matcher(prefix=text)))
