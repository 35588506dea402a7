"""Smoke tests of bench/bench_batch.py and bench/profile_batch_phases.py: a few rows of the JSON case on the
committed tokenizer, through their command lines, bench_batch with grammask and llguidance (when installed).
No timing is asserted."""

from __future__ import annotations

import importlib.util
import json

from conftest import use_bench_scripts

use_bench_scripts()

import bench_batch
import profile_batch_phases

ENGINES = ["grammask"] + (["llguidance"] if importlib.util.find_spec("llguidance") else [])


def test_batch_bench_runs_and_reports(tmp_path):
    out = tmp_path / "batch.md"
    argv = ["--tokenizer", "smollm2", "--cases", "json", "--engines", ",".join(ENGINES), "--rows", "6",
            "--repeat", "1", "--out", str(out)]
    assert bench_batch.main(argv) == 0
    results = json.loads(out.with_suffix(".json").read_text())
    rows = {(r["engine"], r["threads"]): r for r in results["rows"]}
    assert set(rows) >= {("grammask", 1), ("grammask", 2), ("grammask", "fill_mask loop")}
    assert all(r["check"] == "ok" and r["rows_per_s"] > 0 for r in rows.values())
    assert 0 <= rows["grammask", 1]["gil_free"]
    assert [b["bar"] for b in results["bars"]] == ["json: grammask 2 threads >= 1.7x 1 thread"]
    assert "| json | grammask | 1 |" in out.read_text()


def test_batch_phases_profile_runs(capsys):
    assert profile_batch_phases.main(["--tokenizer", "smollm2", "--cases", "json", "--rows", "6", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "json: before" in out and "2 threads at most" in out and "wake-up" in out
