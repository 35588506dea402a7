"""The Hugging Face adapter on the real default model (SmolLM2-135M-Instruct, fetched once into the cache)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the 'hf' extra (torch, transformers) is not installed")
pytest.importorskip("transformers", reason="the 'hf' extra (torch, transformers) is not installed")

import grammask.decoding as dec
from grammask.adapters.hf import GrammarLogitsProcessor
from grammask.adapters.torch_bitmask import apply_token_bitmask_
from grammask.bitmask import bitmask_to_bool
from grammask.compiler import compile
from grammask.errors import MatcherStateError, ModelError
from grammask.grammar import Grammar
from grammask.models.default import default_model_dir
from grammask.models.hf import HFModel, load_hf_model

ANIMALS = Grammar.from_lark(
    """
start: ANIMAL " and " ANIMAL
ANIMAL: "cat" | "dog" | "bird" | "horse" | "fish"
""",
    name="animals",
)
PROMPTS = ["Name two animals.", "Which two pets do you like?", "Two animals that live on a farm:", "Say two animals."]


@pytest.fixture(scope="module")
def model() -> HFModel:
    torch.set_num_threads(1)
    return load_hf_model(default_model_dir())


@pytest.fixture(scope="module")
def animals(model):
    return compile(ANIMALS, model.vocab)


def full_forward_logits(model: HFModel, ids: list[int]) -> np.ndarray:
    with torch.inference_mode():
        return model.model(torch.tensor([ids])).logits[0, -1].float().numpy()


def test_default_model_ends_at_both_chat_end_tokens(model):
    tok = model.tokenizer
    assert model.eos_ids == {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    assert model.vocab.n_logits == model.n_logits == 49152
    assert model.context_window == 8192


def test_prompts_get_the_chat_template(model):
    text = model.tokenizer.decode(model.encode_prompt("Hi"))
    assert text.startswith("<|im_start|>system") and text.endswith(
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert model.tokenizer.decode(model.encode_prompt("Hi", chat=False)) == "Hi"


def test_cached_states_give_the_logits_of_a_full_forward_pass_also_after_forks(model):
    model = HFModel(model.model, model.tokenizer, recent=1)  # forces cache rebuilds from the shared prefix tree
    prompt = model.encode_prompt("Count: 1, 2,", chat=False)
    root = model.start(prompt)
    a = model.extend([root], [28])[0]
    b = model.extend([root], [216])[0]  # forks root after `a` took its place among the recent caches
    a2 = model.extend([a], [30])[0]  # `a` was evicted: rebuilt from root's and its own cache parts
    for state, ids in [(root, prompt), (a, prompt + [28]), (b, prompt + [216]), (a2, prompt + [28, 30])]:
        assert state.length == len(ids)
        np.testing.assert_allclose(state.logits, full_forward_logits(model, ids), atol=2e-3)


def test_a_batched_extension_equals_separate_ones_also_for_unequal_lengths(model):
    root = model.start(model.encode_prompt("Hello there", chat=False))
    kids = model.extend([root, root, root], [28, 216, 30])
    grandchild = model.extend([kids[0]], [11])[0]
    other = model.start(model.encode_prompt("A different, longer prompt for this one", chat=False))
    states = [*kids, grandchild, root, other]
    batched = model.extend(states, [17] * len(states))
    for state, got in zip(states, batched):
        assert got.length == state.length + 1
        np.testing.assert_allclose(got.logits, model.extend([state], [17])[0].logits, atol=2e-3)
    # children of a padded batch extend correctly on their own
    again = model.extend([batched[3]], [5])[0]
    np.testing.assert_allclose(
        again.logits,
        full_forward_logits(model, [*model.encode_prompt("Hello there", chat=False), 28, 11, 17, 5]),
        atol=2e-3,
    )


def test_states_of_a_batch_hold_only_their_own_logits_read_only(model):
    root = model.start(model.encode_prompt("Hello there", chat=False))
    kids = model.extend([root, root, root], [28, 216, 30])
    row_bytes = model.n_logits * kids[0]._logits.element_size()
    for state in [root, *kids]:
        assert state._logits.untyped_storage().nbytes() == row_bytes  # not the batch's whole logits array
        with pytest.raises(ValueError):
            state.logits[0] = 0.0
    assert not np.array_equal(kids[0].logits, kids[1].logits)


def test_reading_sequences_raises_no_deprecation_warnings(model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        root = model.start(model.encode_prompt("Hello there", chat=False))
        other = model.start(model.encode_prompt("A longer prompt than the first", chat=False))
        model.extend([root, other], [28, 28])
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning | FutureWarning)] == []


def test_torch_mask_application_matches_the_bitmask(model):
    rng = np.random.default_rng(0)
    bitmask = rng.integers(-(2**31), 2**31 - 1, size=(3, 4), dtype=np.int32)  # 128 bits
    scores = torch.zeros((3, 130))
    apply_token_bitmask_(scores, torch.from_numpy(bitmask))
    for r in range(3):
        allowed = np.concatenate([bitmask_to_bool(bitmask[r], 128), [False, False]])
        assert np.array_equal(torch.isfinite(scores[r]).numpy(), allowed)


def generated_rows(out, prompt_len: int, eos_ids) -> list[list[int]]:
    rows = []
    for row in out[:, prompt_len:].tolist():
        end = next((i for i, t in enumerate(row) if t in eos_ids), None)
        rows.append(row if end is None else row[: end + 1])
    return rows


def assert_accepted_whole(compiled, row: list[int], eos_ids) -> None:
    m = compiled.matcher()
    for t in row:
        m.advance(t)  # raises if the token was not allowed
    assert m.is_terminated(), f"output {row} did not end with EOS after a whole sentence"


@pytest.mark.parametrize(
    "options",
    [{"do_sample": False}, {"do_sample": True, "temperature": 1.0, "top_k": 0}, {"do_sample": False, "num_beams": 4}],
    ids=["greedy", "sample", "beam4"],
)
def test_logits_processor_constrains_model_generate_for_a_batch(model, animals, options):
    tok = model.tokenizer
    tok.padding_side = "left"
    texts = [
        tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
        for p in PROMPTS
    ]
    batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    beams = options.get("num_beams", 1)
    proc = GrammarLogitsProcessor(animals, batch_size=len(PROMPTS), num_beams=beams)
    torch.manual_seed(0)
    out = model.model.generate(
        **batch,
        logits_processor=[proc],
        max_new_tokens=12,
        eos_token_id=sorted(model.eos_ids),
        pad_token_id=tok.pad_token_id,
        num_return_sequences=beams,
        **options,
    )
    rows = generated_rows(out, batch["input_ids"].shape[1], model.eos_ids)
    assert len(rows) == len(PROMPTS) * beams
    for row in rows:
        assert_accepted_whole(animals, row, model.eos_ids)
    if beams > 1:
        assert len({tuple(r) for r in rows[:beams]}) == beams  # the beams of one prompt differ
    assert proc.mask_seconds > 0


JSON_PROMPTS = ["Give a JSON object with the key city for Paris.", "Return JSON for a cat named Tom, aged 3.",
                "Reply with a JSON object with the key ok set to true.", "A JSON list of two fruits, please."]


@pytest.fixture(scope="module")
def json_grammar(model):
    return compile(Grammar.builtin("json"), model.vocab)


@pytest.mark.parametrize(
    "options",
    [{"do_sample": False}, {"do_sample": True, "temperature": 0.7, "top_k": 0}, {"do_sample": False, "num_beams": 3}],
    ids=["greedy", "sample", "beam3"],
)
def test_canonical_logits_processor_outputs_are_the_tokenizers_own_encoding(model, json_grammar, options):
    tok = model.tokenizer
    tok.padding_side = "left"
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
             for p in JSON_PROMPTS]
    batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    proc = GrammarLogitsProcessor(json_grammar, batch_size=len(JSON_PROMPTS), num_beams=options.get("num_beams", 1),
                                  canonical=True)
    torch.manual_seed(0)
    out = model.model.generate(**batch, logits_processor=[proc], max_new_tokens=40, eos_token_id=sorted(model.eos_ids),
                               pad_token_id=tok.pad_token_id, **options)
    rows = generated_rows(out, batch["input_ids"].shape[1], model.eos_ids)
    ended = [row[:-1] for row in rows if row[-1] in model.eos_ids]
    assert ended or options["do_sample"], "no output ended within 40 tokens"
    for row in ended:
        assert row == tok.encode(tok.decode(row), add_special_tokens=False)
    for row in rows:  # cut ones too: every step was a canonical one
        assert json_grammar.matcher(canonical=True).accept_tokens(row) == len(row)


def test_canonical_logits_processor_agrees_with_the_canonical_greedy_strategy(model, json_grammar):
    prompt = model.encode_prompt("Give a JSON object with the key city for Paris.")
    ours = dec.Greedy().decode(model, prompt, json_grammar.matcher(canonical=True), max_tokens=30)
    proc = GrammarLogitsProcessor(json_grammar, batch_size=1, canonical=True)
    out = model.model.generate(torch.tensor([prompt]), logits_processor=[proc], max_new_tokens=31, do_sample=False,
                               eos_token_id=sorted(model.eos_ids), pad_token_id=2)
    theirs = out[0, len(prompt) :].tolist()
    assert theirs[: len(ours.tokens)] == ours.tokens


def test_a_canonical_logits_processor_keeps_the_token_budget(model, json_grammar):
    """With ``max_new_tokens`` the canonical processor's outputs end with EOS within it, as the tokenizer's own."""
    tok = model.tokenizer
    prompt = model.encode_prompt("Give a JSON object with the key city for Paris.")
    for limit in (6, 12):
        proc = GrammarLogitsProcessor(json_grammar, batch_size=1, max_new_tokens=limit, canonical=True)
        out = model.model.generate(torch.tensor([prompt]), logits_processor=[proc], max_new_tokens=limit,
                                   do_sample=False, eos_token_id=sorted(model.eos_ids), pad_token_id=2)
        row = out[0, len(prompt) :].tolist()
        assert row[-1] in model.eos_ids and len(row) <= limit, row
        assert row[:-1] == tok.encode(tok.decode(row[:-1]), add_special_tokens=False)
        json.loads(tok.decode(row[:-1]))


def test_a_logits_processor_serves_one_generate_call(model, animals):
    ids = torch.tensor([model.encode_prompt("Name two animals.")])
    proc = GrammarLogitsProcessor(animals, batch_size=1)
    model.model.generate(ids, logits_processor=[proc], max_new_tokens=2, do_sample=False, pad_token_id=2)
    with pytest.raises(MatcherStateError, match="make a new one"):
        model.model.generate(ids, logits_processor=[proc], max_new_tokens=2, do_sample=False, pad_token_id=2)


def test_greedy_strategy_agrees_with_model_generate_under_the_same_grammar(model, animals):
    prompt = model.encode_prompt("Name two animals.")
    ours = dec.Greedy().decode(model, prompt, animals.matcher(), max_tokens=12)
    proc = GrammarLogitsProcessor(animals, batch_size=1)
    out = model.model.generate(
        torch.tensor([prompt]),
        logits_processor=[proc],
        max_new_tokens=13,
        do_sample=False,
        eos_token_id=sorted(model.eos_ids),
        pad_token_id=2,
    )
    theirs = out[0, len(prompt) :].tolist()
    assert theirs[:-1] == ours.tokens and theirs[-1] in model.eos_ids
    assert_accepted_whole(animals, theirs, model.eos_ids)


@pytest.mark.parametrize(
    "strategy", [dec.Sample(), dec.BeamSearch(width=3), dec.MCTS(trials=4)], ids=["sample", "beam", "mcts"]
)
def test_strategies_on_the_real_model_give_sentences_of_the_grammar(model, animals, strategy):
    out = strategy.decode(model, model.encode_prompt("Name two animals."), animals.matcher(), max_tokens=10, seed=3)
    assert out.stats.stop_reason == "eos"
    assert_accepted_whole(animals, out.tokens + [2], model.eos_ids)
    text = model.decode(out.tokens)
    first, _, second = text.partition(" and ")
    assert {first, second} <= {"cat", "dog", "bird", "horse", "fish"}


def test_decode_many_batches_prompts_of_different_lengths_on_the_real_model(model, animals):
    prompts = [model.encode_prompt(p) for p in ("Name two animals.", "Which two animals do you like best? Answer.")]
    assert len(prompts[0]) != len(prompts[1])  # the batch is left-padded
    outs = dec.Greedy().decode_many(model, prompts, [animals.matcher(), animals.matcher()], max_tokens=10)
    for prompt, out in zip(prompts, outs):
        assert out.stats.stop_reason == "eos"
        assert_accepted_whole(animals, out.tokens + [2], model.eos_ids)
        alone = dec.Greedy().decode(model, prompt, animals.matcher(), max_tokens=10)
        assert model.decode(out.tokens) == model.decode(alone.tokens)


def test_unknown_model_paths_are_reported(tmp_path):
    with pytest.raises(ModelError, match="no model at"):
        load_hf_model(tmp_path / "missing")
    with pytest.raises(ModelError, match="no config.json"):
        load_hf_model(tmp_path)
