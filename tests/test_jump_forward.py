"""Jump-forward decoding: tokens the grammar forces are appended without a model choice and read in one pass."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

import grammask as gm
import grammask.decoding as dec
from grammask.errors import DecodingError

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "maximum": 120}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class SeededState:
    tokens: tuple[int, ...]
    logits: np.ndarray

    @property
    def length(self) -> int:
        return len(self.tokens)


class SeededModel:
    """Logits drawn from an RNG seeded by the whole sequence: any two paths to one sequence agree."""

    def __init__(self, n_logits: int, eos_ids: frozenset[int]):
        self.n_logits = n_logits
        self.eos_ids = eos_ids
        self.extends = 0

    def _state(self, tokens: tuple[int, ...]) -> SeededState:
        rng = np.random.default_rng(abs(hash(tokens)) % 2**32)
        return SeededState(tokens, rng.normal(size=self.n_logits).astype(np.float32) * 4)

    def start(self, prompt_ids):
        return self._state(tuple(prompt_ids))

    def extend(self, states, token_ids):
        self.extends += len(states)
        return [self._state(s.tokens + (t,)) for s, t in zip(states, token_ids)]


class ReadingSeededModel(SeededModel):
    """The same model, able to read several tokens in one pass."""

    def __init__(self, n_logits: int, eos_ids: frozenset[int]):
        super().__init__(n_logits, eos_ids)
        self.reads: list[int] = []

    def read(self, state, token_ids):
        self.reads.append(len(token_ids))
        return self._state(state.tokens + tuple(token_ids))


@pytest.fixture(scope="module")
def compiled(vocab):
    return gm.compile(gm.Grammar.from_json_schema(SCHEMA), vocab("smollm2"), cache=False)


@pytest.mark.parametrize("seed", range(5))
def test_jump_forward_output_is_a_sentence_with_forced_tokens(compiled, seed):
    v = compiled.vocab
    model = ReadingSeededModel(v.n_logits, frozenset(v.eos_ids))
    out = dec.Sample().decode(model, [1], compiled.matcher(max_tokens=40), max_tokens=40, seed=seed, jump_forward=True)
    assert out.stats.stop_reason == "eos"
    doc = json.loads(v.decode(out.tokens))
    assert set(doc) == {"name", "age"}
    # '{"name":' is forced at the start: its first tokens come without a model choice, read in one pass
    assert out.stats.forced_tokens >= 2
    assert sum(model.reads) == out.stats.forced_tokens + len(model.reads)
    assert out.stats.forward_passes == model.extends + len(model.reads)
    m = compiled.matcher(max_tokens=40)
    assert m.accept_tokens(out.tokens) == len(out.tokens) and m.is_accepting()


def test_forced_tokens_are_the_tokenizers_encoding(compiled):
    v = compiled.vocab
    model = ReadingSeededModel(v.n_logits, frozenset(v.eos_ids))
    out = dec.Greedy().decode(model, [1], compiled.matcher(), max_tokens=40, jump_forward=True)
    first_read = model.reads[0] - 1  # the read appends the chosen token, then the forced ones
    chosen = out.tokens[0]
    forced = out.tokens[1 : 1 + first_read]
    m = compiled.matcher()
    m.advance(chosen)
    assert forced == m.forced_tokens()


def test_a_model_without_read_gets_one_pass_per_token(compiled):
    v = compiled.vocab
    reading = ReadingSeededModel(v.n_logits, frozenset(v.eos_ids))
    plain = SeededModel(v.n_logits, frozenset(v.eos_ids))
    a = dec.Greedy().decode(reading, [1], compiled.matcher(), max_tokens=40, jump_forward=True)
    b = dec.Greedy().decode(plain, [1], compiled.matcher(), max_tokens=40, jump_forward=True)
    assert a.tokens == b.tokens and a.stats.forced_tokens == b.stats.forced_tokens > 0
    assert plain.extends == len(b.tokens)  # the forced tokens were read one by one


def test_jump_forward_respects_max_tokens(compiled):
    v = compiled.vocab
    model = ReadingSeededModel(v.n_logits, frozenset(v.eos_ids))
    out = dec.Greedy().decode(model, [1], compiled.matcher(), max_tokens=2, jump_forward=True)
    assert len(out.tokens) == 2 and out.stats.stop_reason == "max_tokens"


def test_without_jump_forward_nothing_is_forced(compiled):
    v = compiled.vocab
    model = ReadingSeededModel(v.n_logits, frozenset(v.eos_ids))
    out = dec.Greedy().decode(model, [1], compiled.matcher(), max_tokens=40)
    assert out.stats.forced_tokens == 0 and model.reads == []


@pytest.mark.parametrize("strategy", [dec.BeamSearch(width=2), dec.MCTS(trials=2)])
def test_search_strategies_refuse_jump_forward(compiled, strategy):
    v = compiled.vocab
    model = SeededModel(v.n_logits, frozenset(v.eos_ids))
    with pytest.raises(DecodingError, match="does not jump forward"):
        strategy.decode(model, [1], compiled.matcher(), max_tokens=5, jump_forward=True)
