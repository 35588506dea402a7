"""Canonical mode in the generation paths: ``grammask.generate(..., canonical=True)`` and ``--canonical``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import get_compiled, get_vocab

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


STRATEGIES = {
    "greedy": dec.Greedy(),
    "greedy-full-masks": dec.Greedy(check_first=False),
    "sample": dec.Sample(),
    "sample-top-k": dec.Sample(temperature=0.8, top_k=50),
    "beam": dec.BeamSearch(width=3),
    "mcts": dec.MCTS(trials=2),
}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_canonical_outputs_are_the_tokenizers_own_encoding(strategy):
    model = NoisyModel()
    grammar = Grammar.builtin("json")
    searches = strategy in ("beam", "mcts")  # many masks per token: shorter runs
    for seed in range(1 if searches else 3):
        gen = dec.generate(model, "{", grammar, max_tokens=12 if searches else 40, strategy=STRATEGIES[strategy],
                           seed=seed, canonical=True)
        assert gen.tokens == model.vocab.encode(gen.text), (gen.text, gen.tokens)
        if gen.stats.stop_reason == "eos":
            json.loads(gen.text)


def test_canonical_greedy_checking_the_models_choice_first_gives_the_full_mask_output():
    model = NoisyModel()
    grammar = Grammar.builtin("json")
    for prompt in ("{", "[", "x"):
        fast = dec.generate(model, prompt, grammar, max_tokens=30, strategy=dec.Greedy(), canonical=True)
        full = dec.generate(model, prompt, grammar, max_tokens=30, strategy=dec.Greedy(check_first=False),
                            canonical=True)
        assert fast.tokens == full.tokens


def test_a_canonical_step_is_refused_where_its_mask_clears_it():
    # ' fals' is a dead end: ' false' is one token, so no canonical way finishes the keyword. The strategies
    # that try the model's choice before the mask rely on advance refusing what the mask clears.
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher(canonical=True)
    for t in vocab.encode("["):
        m.advance(t)
    dead = [vocab.tokens.index(b) for b in (b" fals", b" tru", b" nu")]
    assert all(not m.fork().accept_token(t) for t in dead)  # before any mask was computed here
    assert not set(dead) & set(m.allowed_tokens().tolist())
    assert all(not m.fork().accept_token(t) for t in dead)  # and after


def test_no_canonical_dead_end_in_trailing_whitespace():
    # After '}' and '\n' only whitespace or EOS may follow, and '\n' '\n' is canonical only before more text.
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher(canonical=True)
    newline = vocab.tokens.index(b"\n")
    for t in [*vocab.encode('{"a": 1}'), newline]:
        m.advance(t)
    assert newline not in m.allowed_tokens().tolist() and not m.fork().accept_token(newline)
    assert m.is_accepting()


def test_no_canonical_dead_end_before_forced_text():
    # The schema forces '"ssid":' after '{': '{' alone and '{"' + 's' would need tokens the tokenizer never writes
    # ('{"' and 'ss' are tokens); the masks and advance must refuse them.
    from grammask import compile
    from grammask.grammar.json_schema import grammar_from_json_schema

    vocab = get_vocab("smollm2")
    schema = {"type": "object", "properties": {"ssid": {"type": "string"}}, "required": ["ssid"],
              "additionalProperties": False}
    m = compile(grammar_from_json_schema(schema), vocab, cache=False).matcher(canonical=True)
    brace, s = vocab.tokens.index(b"{"), vocab.tokens.index(b"s")
    assert not m.fork().accept_token(brace) and brace not in m.allowed_tokens().tolist()
    m.advance(vocab.tokens.index(b'{"'))
    assert not m.fork().accept_token(s) and s not in m.allowed_tokens().tolist()


def test_canonical_decode_many_gives_each_output_the_tokenizers_encoding():
    model = NoisyModel()
    compiled = get_compiled("json", "smollm2")
    prompts = [model.encode_prompt(p) for p in ("{", "[", "a")]
    outs = dec.Sample().decode_many(model, prompts, [compiled.matcher(canonical=True) for _ in prompts],
                                    max_tokens=30, seed=1)
    for out in outs:
        assert out.tokens == model.vocab.encode(model.decode(out.tokens))


def test_without_canonical_mode_outputs_can_be_spelled_otherwise():
    model = NoisyModel()
    grammar = Grammar.builtin("json")
    outputs = [dec.generate(model, "{", grammar, max_tokens=40, seed=s, strategy="sample") for s in range(3)]
    assert any(g.tokens != model.vocab.encode(g.text) for g in outputs)


def test_canonical_needs_a_grammar():
    with pytest.raises(ConfigurationError, match="canonical"):
        dec.generate(NoisyModel(), "{", None, max_tokens=5, canonical=True)


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_canonical_generation_keeps_the_token_budget(strategy):
    """``generate(canonical=True, max_tokens=N)``: the output ends with EOS within ``N`` tokens, as the tokenizer's own
    encoding (the noisy model puts off EOS, so without the budget it would be cut)."""
    model = NoisyModel()
    grammar = Grammar.builtin("json")
    for limit in (6, 10):
        gen = dec.generate(model, "{", grammar, max_tokens=limit, strategy=STRATEGIES[strategy], seed=limit,
                           canonical=True)
        assert gen.stats.stop_reason == "eos" and len(gen.tokens) + 1 <= limit, (gen.text, gen.tokens)
        assert gen.tokens == model.vocab.encode(gen.text)
        json.loads(gen.text)

