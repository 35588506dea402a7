"""The on-disk cache of compiled grammars: reused, and rebuilt when corrupt or stale."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from conftest import get_vocab

from grammask import Grammar, compile
from grammask.compiler import clear_caches


@pytest.fixture(autouse=True)
def _fresh_memory():
    clear_caches()


def _files(path):
    return sorted(path.glob("*.npz"))


def _same_tables(a, b):
    ta, tb = a._engine.masks.arrays(), b._engine.masks.arrays()
    return ta.keys() == tb.keys() and all(np.array_equal(ta[f], tb[f]) for f in ta)


def test_cache_round_trip(tmp_path):
    vocab = get_vocab("smollm2")
    grammar = Grammar.builtin("json")
    first = compile(grammar, vocab, cache=tmp_path)
    assert not first.stats.from_cache and len(_files(tmp_path)) == 1
    clear_caches()
    second = compile(grammar, vocab, cache=tmp_path)
    assert second.stats.from_cache and _same_tables(first, second)
    m = second.matcher()
    for t in vocab.encode('{"a": [1, 2]}'):
        m.advance(t)
    assert m.is_accepting()


def test_corrupt_cache_is_rebuilt(tmp_path, caplog):
    vocab = get_vocab("smollm2")
    grammar = Grammar.builtin("json")
    reference = compile(grammar, vocab, cache=tmp_path)
    (path,) = _files(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="grammask"):
        rebuilt = compile(grammar, vocab, cache=tmp_path)
    assert "rebuilding" in caplog.text
    assert not rebuilt.stats.from_cache and _same_tables(reference, rebuilt)
    clear_caches()
    assert compile(grammar, vocab, cache=tmp_path).stats.from_cache


def test_truncated_and_foreign_files_are_rebuilt(tmp_path, caplog):
    vocab = get_vocab("smollm2")
    grammar = Grammar.builtin("json")
    compile(grammar, vocab, cache=tmp_path)
    (path,) = _files(tmp_path)
    path.write_bytes(path.read_bytes()[:1000])
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="grammask"):
        assert not compile(grammar, vocab, cache=tmp_path).stats.from_cache
    path.write_bytes(b"not a cache file")
    clear_caches()
    assert not compile(grammar, vocab, cache=tmp_path).stats.from_cache


def test_different_grammars_do_not_collide(tmp_path):
    vocab = get_vocab("smollm2")
    a = compile(Grammar.from_lark('start: "a"+'), vocab, cache=tmp_path)
    b = compile(Grammar.from_lark('start: "b"+'), vocab, cache=tmp_path)
    assert len(_files(tmp_path)) == 2 and a is not b


def test_fingerprint_does_not_depend_on_the_hash_seed():
    """Lark keeps a terminal's flags in a set; the grammar (and its cache key) must not follow that set's order."""
    import subprocess
    import sys

    code = (
        "from grammask import Grammar; "
        "print(Grammar.from_lark('start: A B\\nA: /a/is\\nB: /b/si\\n').fingerprint())"
    )
    prints = {
        subprocess.run([sys.executable, "-c", code], env={"PYTHONHASHSEED": str(seed), "PATH": ""},
                       capture_output=True, text=True, check=True).stdout
        for seed in range(6)
    }
    assert len(prints) == 1
