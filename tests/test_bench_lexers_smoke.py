"""Smoke test of bench/bench_lexers.py: one grammar with seed programs and one replaying sampled documents,
on the committed SmolLM2 tokenizer."""

from __future__ import annotations

from conftest import skip_module_without_syncode

skip_module_without_syncode()

import bench_lexers


def test_measures_programs_and_sampled_documents():
    tok = bench_lexers.load_tokenizer("smollm2")
    calc = bench_lexers.measure("syncode-calc", "contextual", tok, n_sampled=3)
    assert calc["documents"] == "3 sampled" and calc["masks"] > 3 and calc["mask_p50_ms"] > 0
    go = bench_lexers.measure("syncode-go", "basic", tok, n_sampled=3)
    assert go["documents"] == "5 programs" and go["masks"] > 500
    empty = bench_lexers.measure("syncode-invariants", "basic", tok, n_sampled=3)  # its start derives no sentence
    assert empty["documents"] == "0 sampled" and empty["masks"] == 0 and empty["mask_p50_ms"] is None
