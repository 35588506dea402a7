"""Counted constraints never hang a compile: a compile deadline, and big counts refused before unrolling."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import get_vocab

import grammask as gm
from grammask.errors import CompileTimeoutError, ConfigurationError, Deadline

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


@pytest.mark.parametrize("pattern", ["a{1,100000}", "[a-z]{100000}", "x(ab|cd){2,100000}y", "(a{1,1000}){1,1000}", "(?:.{3}){400000,}"])
def test_a_big_regex_count_is_refused_before_unrolling(pattern):
    compiler = gm.Compiler(get_vocab("smollm2"), cache=False)
    error, seconds = _timed(lambda: compiler.compile(gm.Grammar.from_regex(pattern)))
    assert isinstance(error, gm.UnsupportedRegexError) and "counted repeat" in str(error)
    assert seconds < (0.05 if pattern == "a{1,100000}" else 0.25)  # the bar: {1,100000} in 50 ms


def test_a_regex_count_within_the_bound_stays_exact():
    compiled = gm.Compiler(get_vocab("smollm2"), cache=False).compile(gm.Grammar.from_regex("a{3,1000}"))
    m = compiled.matcher()
    for token in compiled.vocab.encode("a" * 1000):
        m.advance(token)
    assert m.is_accepting()
    with pytest.raises(gm.TokenRejectedError):
        m.advance(compiled.vocab.encode("a")[0])


HUGE = 10**6


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        ({"type": "string", "maxLength": HUGE}, "maxLength", "/maxLength"),
        ({"type": "string", "minLength": HUGE}, "minLength", "/minLength"),
        ({"properties": {"s": {"type": "string", "minLength": 1, "maxLength": 10000}}}, "maxLength", "/properties/s/maxLength"),
        ({"type": "string", "pattern": "^[a-z]{1,100000}$"}, "pattern", "/pattern"),
        ({"type": "string", "format": "email", "pattern": "^(ab){2,50000}"}, "pattern", "/pattern"),
        ({"patternProperties": {"^x{100000}$": {}}}, "patternProperties", "/patternProperties/^x{100000}$"),
        ({"type": "array", "maxItems": HUGE}, "maxItems", "/maxItems"),
        ({"type": "array", "minItems": HUGE}, "minItems", "/minItems"),
    ],
)
def test_a_big_schema_count_is_refused_fast_naming_keyword_value_and_pointer(schema, keyword, pointer):
    error, seconds = _timed(lambda: gm.Grammar.from_json_schema(schema))
    assert isinstance(error, gm.UnsupportedSchemaError), error
    assert f"'{keyword}' at {pointer}:" in str(error) and "0000" in str(error)
    assert seconds < 2.0  # the no-hang bar (2 s), not a speed target: the box may be busy
    with pytest.warns(UserWarning, match=keyword):
        grammar, seconds = _timed(lambda: gm.Grammar.from_json_schema(schema, strict=False))
    assert isinstance(grammar, gm.Grammar) and any(keyword in note for note in grammar.notes)
    assert seconds < 2.0  # the no-hang bar (2 s), not a speed target: the box may be busy


def test_a_max_length_of_a_million_is_refused_in_milliseconds():
    error, seconds = _timed(lambda: gm.Grammar.from_json_schema({"type": "string", "maxLength": HUGE}))
    assert isinstance(error, gm.UnsupportedSchemaError) and seconds < 0.05


def test_dropping_a_big_max_length_keeps_the_min_length():
    with pytest.warns(UserWarning):
        grammar = gm.Grammar.from_json_schema({"type": "string", "minLength": 2, "maxLength": HUGE}, strict=False)
    compiled = gm.Compiler(get_vocab("smollm2"), cache=False).compile(grammar)
    m = compiled.matcher()
    for token in compiled.vocab.encode('"a'):
        m.advance(token)
    with pytest.raises(gm.TokenRejectedError):
        m.advance(compiled.vocab.encode('"')[0])


def test_a_small_string_count_stays_exact():
    compiled = gm.Compiler(get_vocab("smollm2"), cache=False).compile(
        gm.Grammar.from_json_schema({"type": "string", "minLength": 2, "maxLength": 30})
    )
    for text, ok in [('"' + "x" * 30 + '"', True), ('"' + "é" * 30 + '"', True), ('"x"', False), ('"' + "x" * 31 + '"', False)]:
        m = compiled.matcher()
        try:
            for token in compiled.vocab.encode(text):
                m.advance(token)
            accepted = m.is_accepting()
        except gm.TokenRejectedError:
            accepted = False
        assert accepted is ok, text


@pytest.mark.parametrize(
    "pattern", ["a{1,2000}", "(a|b)*a(a|b){5}", "(ab){2,5}(c|d)*e?", "x{3}(y{2,4}|z+){1,3}", "[a-c]{0,7}[b-d]{2}", "(a|bc)*c{4,}"]
)
def test_minimization_from_remaining_lengths_finds_the_same_partition(pattern):
    from grammask.automata import dfa as dfa_module
    from grammask.automata.patterns import compile_regex
    from grammask.errors import NO_DEADLINE

    trans, accepts = dfa_module._determinize([compile_regex(pattern)], NO_DEADLINE)
    columns, _ = dfa_module._byte_classes(trans)
    columns, accepts = dfa_module._restrict(columns, accepts, dfa_module._live_states(columns, accepts))
    sink = len(accepts)
    table = np.vstack([np.where(columns < 0, sink, columns), np.full((1, columns.shape[1]), sink)])
    ids: dict = {}
    by_accepts = np.array([ids.setdefault(a, len(ids)) for a in [*accepts, None]], dtype=np.int64)
    plain = dfa_module._coarsest_stable_partition(by_accepts, table, NO_DEADLINE)
    block, _ = dfa_module._minimize(columns, accepts, NO_DEADLINE)
    assert len(set(plain.tolist())) == len(set(block.tolist())) + 1  # + the sink
    assert all((plain[i] == plain[j]) == (block[i] == block[j]) for i in range(sink) for j in range(0, sink, 7))


# A string language whose regex, by state elimination, is exponentially large: seconds to build.
SLOW_SCHEMA = {"type": "string", "pattern": "^[ab]*a[ab]{7}$", "not": {"pattern": "^[ab]*b[ab]{6}$"}}


def test_the_json_schema_front_end_stops_at_its_timeout():
    error, seconds = _timed(lambda: gm.Grammar.from_json_schema(SLOW_SCHEMA, timeout=0.3))
    assert isinstance(error, CompileTimeoutError), error
    assert seconds < 0.3 + 1.5 and "JSON Schema" in error.phase and error.grammar == "json_schema"


def test_the_json_schema_timeout_is_checked():
    with pytest.raises(ConfigurationError):
        gm.Grammar.from_json_schema({"type": "string"}, timeout=0)
