"""Exact masks: ``fill_mask`` equals the brute-force oracle (tests/oracle.py) at prefixes of sampled documents.

CI checks a few hundred prefixes; ``pytest -m slow tests/test_oracle.py`` checks 2,000 per
grammar and vocabulary (8,000 in all) before an issue about masks is resolved.
"""

from __future__ import annotations

import random

import pytest
from conftest import get_compiled, get_vocab
from mask_check import check_cuts
from oracle import MaskOracle

from grammask import Grammar
from grammask.automata.lexer import build_lexer
from grammask.grammar.builtin import builtin_source
from grammask.sampler import SentenceSampler

CASES = [(g, v) for g in ("json", "c") for v in ("smollm2", "llama2")]


def _prefixes(grammar: str, vocab_name: str, n_prefixes: int, seed: int):
    """Yield (token ids of a document, cut points) until ``n_prefixes`` cuts are produced."""
    vocab = get_vocab(vocab_name)
    sampler = SentenceSampler(Grammar.builtin(grammar), max_depth=8)
    rng = random.Random(seed)
    produced = 0
    while produced < n_prefixes:
        text = sampler.sample(rng)
        ids = vocab.encode(text)
        if vocab.decode(ids).strip() != text.encode().strip():
            continue  # the tokenizer cannot spell some byte of this text (SmolLM2 lacks a few)
        cuts = sorted(rng.sample(range(len(ids) + 1), min(5, len(ids) + 1, n_prefixes - produced)))
        produced += len(cuts)
        yield ids, cuts


def _check(grammar: str, vocab_name: str, n_prefixes: int, seed: int) -> int:
    vocab = get_vocab(vocab_name)
    compiled = get_compiled(grammar, vocab_name)
    oracle = MaskOracle(builtin_source(grammar), build_lexer(Grammar.builtin(grammar)), vocab)
    checked = 0
    for ids, cuts in _prefixes(grammar, vocab_name, n_prefixes, seed):
        checked += check_cuts(compiled, oracle, vocab, ids, cuts)
    return checked


@pytest.mark.parametrize(("grammar", "vocab_name"), CASES)
def test_masks_equal_oracle(grammar, vocab_name):
    assert _check(grammar, vocab_name, n_prefixes=75, seed=1) == 75


@pytest.mark.slow
@pytest.mark.parametrize(("grammar", "vocab_name"), CASES)
def test_masks_equal_oracle_many(grammar, vocab_name):
    assert _check(grammar, vocab_name, n_prefixes=2000, seed=2) == 2000
