"""The llama.cpp adapter on the default model's GGUF file. Runs only where ``llama-cpp-python`` is installed:
``pip install 'grammask[llama-cpp]'`` (it builds llama.cpp from source, about 3 minutes on 2 cores)."""

from __future__ import annotations

import numpy as np
import pytest

llama_cpp = pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed; pip install 'grammask[llama-cpp]' to run these tests"
)

import grammask.decoding as dec
from grammask.adapters.llama_cpp import LlamaCppLogitsProcessor, LlamaCppModel
from grammask.compiler import compile
from grammask.grammar import Grammar
from grammask.models.default import default_gguf, default_model_dir
from grammask.vocab import Vocabulary

ANIMALS = Grammar.from_lark('start: ANIMAL " and " ANIMAL\nANIMAL: "cat" | "dog" | "bird" | "horse" | "fish"\n')


@pytest.fixture(scope="module")
def model() -> LlamaCppModel:
    return LlamaCppModel.from_path(default_gguf(), n_ctx=1024, n_threads=1)


def read_in_chunks(model: LlamaCppModel, chunks: list[list[int]]) -> np.ndarray:
    """Last logits of a fresh context that reads ``chunks`` one ``eval`` each.

    The reference has to read the same chunks: llama.cpp's logits for one sequence depend on how it was
    split into batches (up to 0.5 apart on this Q4_1 model), so a whole-sequence read is not comparable.
    """
    model.llm.reset()
    for chunk in chunks:
        model.llm.eval(chunk)
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(model.llm.ctx, -1), shape=(model.n_logits,)).copy()


def test_token_bytes_agree_with_the_tokenizer_json(model):
    hf = Vocabulary.from_tokenizer_json(default_model_dir(), eos_ids=[0, 2])
    ours = model.vocab
    assert ours.n_logits == hf.n_logits
    text_ids = [i for i, t in enumerate(hf.tokens) if t is not None]
    assert all(ours.tokens[i] == hf.tokens[i] for i in text_ids)
    assert model.eos_ids >= {2}


def test_forked_states_reuse_the_prefix_and_give_fresh_logits(model):
    prompt = model.encode_prompt("Count: 1, 2,", chat=False)
    root = model.start(prompt)
    a = model.extend([root], [28])[0]
    b = model.extend([root], [216])[0]
    a2 = model.extend([a], [30])[0]  # rolls the cache back from prompt + [216] to the prompt, reads [28, 30]
    for state, chunks in [(a, [prompt, [28]]), (b, [prompt, [216]]), (a2, [prompt, [28, 30]])]:
        np.testing.assert_allclose(state.logits, read_in_chunks(model, chunks), atol=1e-5)
    assert np.abs(a.logits - b.logits).max() > 1.0


def test_strategies_give_sentences_of_the_grammar(model):
    animals = compile(ANIMALS, model.vocab)
    for strategy in (dec.Greedy(), dec.BeamSearch(width=3), dec.MCTS(trials=4)):
        out = strategy.decode(model, model.encode_prompt("Name two animals."), animals.matcher(), max_tokens=10)
        m = animals.matcher()
        for t in out.tokens:
            m.advance(t)
        assert out.stats.stop_reason == "eos" and m.is_accepting()


def test_logits_processor_constrains_a_completion(model):
    animals = compile(ANIMALS, model.vocab)
    proc = LlamaCppLogitsProcessor(animals)
    model.llm.reset()
    done = model.llm.create_completion(
        model.encode_prompt("Name two animals."),
        max_tokens=12,
        temperature=0.0,
        logits_processor=llama_cpp.LogitsProcessorList([proc]),
    )
    first, _, second = done["choices"][0]["text"].partition(" and ")
    assert {first, second} <= {"cat", "dog", "bird", "horse", "fish"}
    assert proc.matcher.is_accepting() or proc.matcher.is_terminated()
