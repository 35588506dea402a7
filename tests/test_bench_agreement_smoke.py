"""Smoke test of bench/bench_agreement.py: SynCode's calculator and tiny grammars, a few documents each,
on the committed SmolLM2 tokenizer, run one by one into the same results (``--append``)."""

from __future__ import annotations

import json

import pytest
from conftest import skip_module_without_syncode

skip_module_without_syncode()

import bench_agreement


def test_runs_and_appends(tmp_path):
    out = tmp_path / "agreement.md"
    common = ["--n", "4", "--tokenizer", "smollm2", "--out", str(out)]
    assert bench_agreement.main(["--grammars", "syncode-calc", *common]) == 0
    assert bench_agreement.main(["--grammars", "syncode-tiny", "--append", *common]) == 0
    rows = {r["grammar"]: r for r in json.loads(out.with_suffix(".json").read_text())["results"]}
    assert list(rows) == ["syncode-calc", "syncode-tiny"]
    for r in rows.values():
        assert r["sampled"] == r["sampled_agree"] == r["mutated"] == r["mutated_agree"] == 4
        assert r["compile_s"] is not None and not r["error"]
    assert "| syncode-tiny |" in out.read_text()


def test_unknown_grammar_is_a_usage_error():
    with pytest.raises(SystemExit):
        bench_agreement.main(["--grammars", "nope"])


def test_documents_the_tokenizer_cannot_spell_are_counted_apart():
    tok = bench_agreement.load_tokenizer("smollm2")
    text = "1+\x06"  # SmolLM2's encoding drops the control byte
    assert tok.vocab.decode(tok.encode(text)) != text.encode()
    result = bench_agreement.Result("syncode-calc", None)
    judges = bench_agreement.Judges(compiled=None, parser=None, tok=tok)  # never asked: nothing to judge
    assert bench_agreement.check(result, judges, "mutated", text, 3) == (False, True)
    assert (result.unspellable, result.mutated, result.mutated_agree) == (1, 0, 0)
    assert "| unspellable |" in bench_agreement.markdown([result], "header")
