"""The Compiler: one per vocabulary, owning a bounded memory cache, the disk cache and compile threads."""

from __future__ import annotations

import time

import pytest
from conftest import get_vocab

import grammask as gm
from grammask.errors import CompileTimeoutError, ConfigurationError, Deadline
from grammask.gc_pause import collector_paused

GRAMMARS = [gm.Grammar.from_lark(f'start: "{w}"+') for w in ("a", "b", "c")]


def test_memory_cache_is_bounded_and_least_recently_used_goes_first():
    compiler = gm.Compiler(get_vocab("smollm2"), cache=False, max_memory=2)
    a, b = compiler.compile(GRAMMARS[0]), compiler.compile(GRAMMARS[1])
    assert compiler.compile(GRAMMARS[0]) is a  # a is now the most recently used
    compiler.compile(GRAMMARS[2])  # evicts b
    assert compiler.compile(GRAMMARS[0]) is a
    assert compiler.compile(GRAMMARS[1]) is not b


def test_clear_forgets_memory_and_optionally_disk(tmp_path):
    compiler = gm.Compiler(get_vocab("smollm2"), cache=tmp_path)
    first = compiler.compile(GRAMMARS[0])
    compiler.clear()
    again = compiler.compile(GRAMMARS[0])
    assert again is not first and again.stats.from_cache
    compiler.clear(disk=True)
    assert list(tmp_path.glob("*.npz")) == []
    assert not compiler.compile(GRAMMARS[0]).stats.from_cache


def test_submit_compiles_on_the_compiler_threads():
    vocab = get_vocab("smollm2")
    compiler = gm.Compiler(vocab, cache=False, threads=2)
    futures = [compiler.submit(g) for g in GRAMMARS]
    compiled = [f.result(timeout=120) for f in futures]
    for g, c in zip(GRAMMARS, compiled):
        m = c.matcher()
        for t in vocab.encode(g.terminals[0].literal * 3):
            m.advance(t)
        assert m.is_accepting()
    assert compiler.compile(GRAMMARS[1]) is compiled[1]


def test_same_language_with_other_notes_shares_tables():
    vocab = get_vocab("smollm2")
    compiler = gm.Compiler(vocab, cache=False)
    plain = gm.Grammar.from_json_schema({"type": "integer"})
    noted = gm.Grammar.from_json_schema({"type": "integer", "multipleOf": 3}, strict=False)
    assert plain.fingerprint() == noted.fingerprint() and noted.notes and not plain.notes
    a, b = compiler.compile(plain), compiler.compile(noted)
    assert a.notes == () and b.notes == noted.notes and b.nbytes == a.nbytes


@pytest.mark.parametrize("kwargs", [{"max_memory": -1}, {"threads": 0}, {"cache": 3}])
def test_bad_arguments(kwargs):
    with pytest.raises(ConfigurationError):
        gm.Compiler(get_vocab("smollm2"), **kwargs)


def test_shared_compilers_behind_compile():
    vocab = get_vocab("smollm2")
    first = gm.compile(GRAMMARS[0], vocab, cache=False)
    assert gm.compile(GRAMMARS[0], vocab, cache=False) is first
    gm.clear_caches()
    assert gm.compile(GRAMMARS[0], vocab, cache=False) is not first


def test_the_timeout_counts_from_the_call(monkeypatch):
    # The cache key (a hash of every rule: a tenth of a second on a schema of 100,000 rules) is part of the compile.
    grammar = gm.Grammar.from_regex("ab+")
    fingerprint = type(grammar).fingerprint

    def slow_fingerprint(self):
        time.sleep(0.3)
        return fingerprint(self)

    monkeypatch.setattr(type(grammar), "fingerprint", slow_fingerprint)
    compiler = gm.Compiler(get_vocab("smollm2"), cache=False)
    with pytest.raises(CompileTimeoutError):
        compiler.compile(grammar, timeout=0.2)
    compiler.compile(grammar, timeout=5)  # the same compile with time to spare


def test_a_deadline_counts_the_time_to_free_what_the_compile_holds():
    """While the collector is paused, the objects a compile made count toward its deadline (freeing a million of them
    takes about 0.08 s, before the caller sees the error)."""
    with collector_paused():
        deadline = Deadline(0.05, "g")
        deadline.check("start")  # nothing held yet
        held = [[] for _ in range(1_000_000)]
        with pytest.raises(CompileTimeoutError, match="holding"):
            deadline.check("holding")
        del held
    Deadline(0.05, "g").check("after")
