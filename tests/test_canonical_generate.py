"""Canonical mode in the generation paths: ``grammask.generate(..., canonical=True)`` and ``--canonical``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import get_vocab

import grammask.decoding as dec
from grammask import Grammar
from grammask.errors import ConfigurationError


@dataclass(frozen=True)
class _State:
    length: int
    logits: np.ndarray


class NoisyModel:
    """A text model over SmolLM2's vocabulary with seeded random logits (EOS made likely late)."""

    context_window = None

    def __init__(self):
        self.vocab = get_vocab("smollm2")
        self.n_logits = self.vocab.n_logits
        self.eos_ids = frozenset(self.vocab.eos_ids)

    def encode_prompt(self, prompt: str, *, chat: bool | None = None) -> list[int]:
        return self.vocab.encode(prompt)

    def decode(self, token_ids) -> str:
        return self.vocab.decode(token_ids).decode("utf-8", "replace")

    def _logits(self, length: int, seed: int) -> np.ndarray:
        logits = np.random.default_rng(seed).normal(scale=3.0, size=self.n_logits).astype(np.float32)
        logits[list(self.eos_ids)] += length / 2
        return logits

    def start(self, prompt_ids):
        return _State(len(prompt_ids), self._logits(len(prompt_ids), 0))

    def extend(self, states, token_ids):
        return [_State(s.length + 1, self._logits(s.length + 1, t * 7919 + s.length)) for s, t in zip(states, token_ids)]


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_canonical_outputs_are_the_tokenizers_own_encoding(strategy):
    model = NoisyModel()
    grammar = Grammar.builtin("json")
    for seed in range(3):
        gen = dec.generate(model, "{", grammar, max_tokens=40, strategy=strategy, seed=seed, canonical=True)
        assert gen.tokens == model.vocab.encode(gen.text), (gen.text, gen.tokens)
        if gen.stats.stop_reason == "eos":
            json.loads(gen.text)


def test_without_canonical_mode_outputs_can_be_spelled_otherwise():
    model = NoisyModel()
    grammar = Grammar.builtin("json")
    outputs = [dec.generate(model, "{", grammar, max_tokens=40, seed=s, strategy="sample") for s in range(3)]
    assert any(g.tokens != model.vocab.encode(g.text) for g in outputs)


def test_canonical_needs_a_grammar():
    with pytest.raises(ConfigurationError, match="canonical"):
        dec.generate(NoisyModel(), "{", None, max_tokens=5, canonical=True)
