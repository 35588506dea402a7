"""Smoke test of bench/bench_compile.py: SynCode's calculator grammar under both lexers and one grammar that
fails, on the committed SmolLM2 tokenizer."""

from __future__ import annotations

import json

import pytest
from conftest import skip_module_without_syncode

skip_module_without_syncode()

import bench_compile


def test_compiles_under_both_lexers(tmp_path):
    out = tmp_path / "compile.md"
    assert bench_compile.main(["--grammars", "syncode-calc", "--tokenizer", "smollm2", "--out", str(out)]) == 0
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert [r["lexer"] for r in rows] == ["basic", "contextual"]
    assert all(r["cpu_s"] > 0 and r["wall_s"] > 0 and r["table_mib"] > 0 for r in rows)
    assert "| syncode-calc | contextual |" in out.read_text()


def test_over_the_bar_fails(tmp_path):
    out = tmp_path / "compile.md"
    args = ["--grammars", "syncode-calc", "--lexers", "basic", "--tokenizer", "smollm2", "--bar", "0", "--out", str(out)]
    assert bench_compile.main(args) == 1
    assert "| NO |" in out.read_text()


def test_unknown_grammar_is_a_usage_error():
    with pytest.raises(SystemExit):
        bench_compile.main(["--grammars", "nope"])
