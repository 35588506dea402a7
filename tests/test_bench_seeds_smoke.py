"""Smoke test of bench/bench_seeds.py: SynCode's Java grammar and one program on a tiny byte-level
BPE tokenizer trained on the seed programs (the Python grammar only loaded: its compile takes too
long for a smoke test). No timing is asserted."""

from __future__ import annotations

import json

import pytest
from conftest import skip_module_without_syncode
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

pytestmark = pytest.mark.filterwarnings("ignore:grammar .java.:UserWarning")
skip_module_without_syncode()

import bench_seeds
import cases
from harness import NoPostlexSupport, from_lark_takes_postlex, lark_grammar


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> cases.BenchTokenizer:
    texts = [text for name in ("java", "python") for _, text in cases.load_seed_grammar(name).programs]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    path = tmp_path_factory.mktemp("tiny") / "tokenizer.json"
    tok.save(str(path))
    return cases.BenchTokenizer.load("tiny", path)


@pytest.fixture(scope="module")
def rows(tiny_tokenizer) -> list[dict]:
    return bench_seeds.run_seeds(["java"], [tiny_tokenizer], ["grammask"], repeat=1, programs=1, log=str)


def test_java_replays_with_every_check_passing(rows):
    row = rows[0]
    assert (row["grammar"], row["engine"], row["programs"]) == ("java", "grammask", 1)
    assert row["status"] == "ok", row.get("reason") or row.get("failures")
    assert row["eos_mismatches"] == {} and row["programs_replayed"] == 1
    assert row["compile_cold_s"] > 0 and row["compile_cached_s"] > 0 and row["memory"]["table_bytes"] > 0
    assert 0 < row["mask_us"]["p50"] <= row["mask_us"]["max"]


def test_python_grammar_loads_with_its_indenter_or_says_why_not():
    seed = cases.load_seed_grammar("python", 1)
    if from_lark_takes_postlex():
        grammar = lark_grammar(seed.lark_text, seed.name, seed.postlex)
        assert grammar.declared
    else:
        with pytest.raises(NoPostlexSupport, match="postlex"):
            lark_grammar(seed.lark_text, seed.name, seed.postlex)


def test_results_put_the_published_figures_beside(rows, tmp_path):
    env = dict(bench_seeds.environment(1), versions=bench_seeds.versions(), budget_s=60.0)
    json_path = bench_seeds.write_results(tmp_path / "seeds.md", rows, env)
    markdown = (tmp_path / "seeds.md").read_text(encoding="utf-8")
    assert "| java | tiny | grammask | 1 |" in markdown
    assert "GreatGramma" in markdown
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert len(data["published_greatgramma_table1"]) == 9
    table = bench_seeds.side_by_side(
        [dict(rows[0], tokenizer="llama3"), {"grammar": "go", "tokenizer": "llama3", "engine": "xgrammar",
                                              "status": "n/a"}]
    )
    assert "| llama3 (Llama-3 (128,256)) | java |" in table[2] and "| 166.87 |" in table[2]
    assert "X (masked valid tokens)" in table[3] and "| n/a |" in table[3]
