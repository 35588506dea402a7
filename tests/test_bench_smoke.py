"""Smoke test of bench/bench_masks.py and the harness, cases and report modules it runs on: the whole
machinery on a tiny grammar and a tiny tokenizer.

No timing is asserted; the test checks that every engine replays the document, that the replay's
checks catch what they must, and that the reports and the bar check come out right.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import use_bench_scripts
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

use_bench_scripts()

import bench_masks as bm
import cases
import harness
import peers
import report

import grammask as gm

TINY_LARK = r"""
start: object
object: "{" (member ("," member)*)? "}"
member: KEY ":" array
array: "[" (NUMBER ("," NUMBER)*)? "]"
KEY: /"[a-z]+"/
NUMBER.2: /-?(0|[1-9][0-9]*)/
WS: /[ \t\r\n]+/
%ignore WS
"""
# Leading and trailing whitespace on purpose: Lark's %ignore allows it, the peers need adapting for it.
TINY_DOC = '\n{\n  "ab": [1, 22, -3],\n  "c": []\n}\n'

INSTALLED_PEERS = [e for e in ("llguidance", "xgrammar") if importlib.util.find_spec(e) is not None]


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> cases.BenchTokenizer:
    """A byte-level BPE tokenizer of about 300 tokens, trained on JSON-ish text, with one EOS."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([TINY_DOC, '{"abc": [10, 20]}', '{\n  "x": [-1]\n}'] * 20, trainer)
    path = tmp_path_factory.mktemp("tiny") / "tokenizer.json"
    tok.save(str(path))
    return cases.BenchTokenizer.load("tiny", path)


@pytest.fixture(scope="module")
def tiny_case() -> cases.Case:
    return cases.Case("tiny", TINY_LARK, TINY_DOC, xgrammar="builtin_json")


@pytest.fixture(scope="module")
def rows(tiny_case, tiny_tokenizer) -> list[dict]:
    return bm.run_matrix([tiny_case], [tiny_tokenizer], ["grammask", *INSTALLED_PEERS], repeat=2, log=lambda _: None)


def test_grammask_replays_the_document_with_every_check_passing(rows, tiny_tokenizer):
    row = rows[0]
    assert row["engine"] == "grammask"
    assert row["status"] == "ok", row.get("reason")
    assert row["eos_mismatches"] == []
    assert row["tokens"] == len(tiny_tokenizer.encode(TINY_DOC)) > 5
    assert set(row["mask_us"]) == {"mean", "p50", "p99", "max"}
    assert set(row["advance_us"]) == {"mean", "p50", "p99"}
    assert 0 < row["mask_us"]["p50"] <= row["mask_us"]["p99"] <= row["mask_us"]["max"]
    assert row["compile_cold_s"] > 0 and row["compile_cached_s"] > 0
    assert row["memory"]["table_bytes"] > 0 and row["memory"]["tracemalloc_peak_bytes"] > 0
    assert report.grammask_check_failures(rows) == []


@pytest.mark.parametrize("engine", INSTALLED_PEERS)
def test_peers_replay_the_same_tokens_and_get_ratios(rows, engine):
    row = next(r for r in rows if r["engine"] == engine)
    assert row["status"] == "ok", row.get("reason")
    assert row["eos_mismatches"] == []
    ours = rows[0]["mask_us"]
    assert row["ratio"]["p50"] == pytest.approx(ours["p50"] / row["mask_us"]["p50"])
    assert row["ratio"]["p99"] == pytest.approx(ours["p99"] / row["mask_us"]["p99"])


def test_replay_reports_a_masked_ground_truth_token(tiny_case, tiny_tokenizer):
    compiled = gm.compile(tiny_case.grammar(), tiny_tokenizer.vocab, cache=False)
    bad = tiny_tokenizer.encode('{"ab": [1 2]}')
    n_logits, eos_ids = tiny_tokenizer.vocab.n_logits, tiny_tokenizer.peer.eos_ids
    result = harness.replay(harness.grammask_stepper(compiled, n_logits), bad, eos_ids, [False] * (len(bad) + 1))
    assert result.failure is not None and "is masked" in result.failure
    good = tiny_tokenizer.encode(TINY_DOC)
    expected = cases.sentence_prefixes(tiny_case, cases.token_bytes(tiny_tokenizer, good))
    wrong = [not e for e in expected]
    result = harness.replay(harness.grammask_stepper(compiled, n_logits), good, eos_ids, wrong)
    assert result.failure is None
    assert result.eos_mismatches == list(range(len(good) + 1))


def test_sentence_prefixes_follow_lark_and_reject_a_foreign_document(tiny_case, tiny_tokenizer):
    pieces = [b"{", b'"a":', b"[1", b"]", b"}", b"\n"]
    assert cases.sentence_prefixes(tiny_case, pieces) == [False, False, False, False, False, True, True]
    foreign = cases.Case("foreign", TINY_LARK, "")
    with pytest.raises(harness.BenchError, match="not a sentence"):
        cases.sentence_prefixes(foreign, [b"[1]"])


def test_xgrammar_is_not_applicable_without_an_exact_input(tiny_tokenizer):
    case = cases.Case("c-like", TINY_LARK, TINY_DOC, xgrammar_na="no lexer")
    row = bm.run_engine("xgrammar", case, tiny_tokenizer, tiny_tokenizer.encode(TINY_DOC), [], repeat=1)
    assert (row["status"], row["reason"]) == ("n/a", "no lexer")


def test_lark_for_llguidance_drops_priorities_and_wraps_start_in_ignored_runs():
    out = peers.lark_for_llguidance(TINY_LARK)
    assert "NUMBER:" in out and "NUMBER.2" not in out
    assert "\nllg_document: object" in out
    assert out.rstrip().endswith("start: (WS)* llg_document (WS)*")
    assert peers.lark_for_llguidance('start: "a"\n') == 'start: "a"\n'


def _row(case, engine, p50, p99=10.0, cold=1.0, cached=0.01):
    return {
        "case": case,
        "tokenizer": "llama3",
        "engine": engine,
        "status": "ok",
        "mask_us": {"p50": p50, "p99": p99},
        "compile_cold_s": cold,
        "compile_cached_s": cached,
    }


def test_bar_check_passes_fails_and_marks_missing_runs():
    rows = [
        _row("json", "grammask", p50=30.0, p99=900.0, cold=1.5),
        _row("json", "llguidance", p50=10.0),
        _row("c", "grammask", p50=9.0, cold=25.0, cached=0.5),
        _row("c", "llguidance", p50=10.0),
    ]
    verdicts = {b["bar"]: b["passed"] for b in report.bar_checks(rows)}
    assert verdicts == {
        "json mask p50 <= 2x llguidance": False,
        "c mask p50 <= 1x llguidance": True,
        "json mask p99 <= 1 ms": True,
        "json cold compile <= 2 s": True,
        "c cold compile <= 20 s": False,
        "json cached compile <= 0.2 s": True,
        "nested cached compile <= 0.2 s": None,
        "c cached compile <= 0.2 s": False,
    }


def test_results_are_written_as_markdown_and_json(rows, tmp_path):
    bars = report.bar_checks(rows)
    env = report.environment(repeat=2)
    json_path = report.write_results(tmp_path / "latest.md", rows, bars, env)
    markdown = (tmp_path / "latest.md").read_text(encoding="utf-8")
    assert "| tiny | tiny | grammask |" in markdown
    assert "| tiny | tiny |" in markdown.split("Memory (grammask):")[1]
    assert "json mask p50 <= 2x llguidance | not run | not run" in markdown
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert [r["engine"] for r in data["rows"]] == [r["engine"] for r in rows]
    assert data["environment"]["repeat"] == 2
