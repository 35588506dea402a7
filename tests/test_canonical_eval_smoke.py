"""evals/canonical.py end to end on the default model, at a tiny size: one JSON prompt and one JSON-Mode-Eval
schema (when ``../shared/data`` is there), greedy and one sampling seed, a few tokens each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the 'hf' extra (torch, transformers) is not installed")
pytest.importorskip("jsonschema", reason="evals/canonical.py judges schemas with jsonschema")

EVALS = Path(__file__).resolve().parent.parent / "evals"


@pytest.fixture(scope="module")
def canonical_eval():
    sys.path.insert(0, str(EVALS))
    try:
        import canonical

        yield canonical
    finally:
        sys.path.remove(str(EVALS))


def test_the_eval_writes_one_row_per_run_and_the_table(canonical_eval, tmp_path):
    import budget_jme

    sets = ["json", "jme"] if budget_jme.JME.is_dir() else ["json"]
    out = tmp_path / "canonical.md"
    argv = ["--sets", *sets, "--prompts", "1", "--schemas", "1", "--max-tokens", "6", "--jme-factor", "0.2",
            "--seeds", "3", "--together", "4", "--out", str(out)]
    assert canonical_eval.main(argv) == 0
    rows = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert len(rows) == len(sets) * 2 * 2  # sets x {greedy, sample} x {plain, canonical}
    for row in rows:
        assert row["stop_reason"] in ("eos", "max_tokens")
        assert 1 <= row["tokens"] <= row["limit"]
        assert row["mean_logprob"] < 0
        if row["canonical"]:
            assert row["own_encoding"]
    table = out.read_text()
    assert "| json | greedy | plain | 1 |" in table and "| json | sample (seed 3) | canonical | 1 |" in table
    assert "Plain vs canonical" in table
