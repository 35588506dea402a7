"""vLLM v1 adapters against vLLM's own classes: the structured-output backend driven by vLLM's
``StructuredOutputManager`` (bitmasks, speculative validate / fill per draft position / rollback), and the
custom logits processor driven by vLLM's ``BatchUpdate``.

Needs ``vllm`` (``pip install 'grammask[vllm]'``; on a CPU machine the wheel installed with --no-deps
plus the light modules it imports, see the README) and torch; skipped with the reason otherwise.
CI does not install vLLM.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'grammask[vllm]')")
backend_types = pytest.importorskip(
    "vllm.v1.structured_output.backend_types",
    reason="vllm is not installed or does not import here (pip install 'grammask[vllm]')",
)
so_manager = pytest.importorskip("vllm.v1.structured_output", reason="vLLM's StructuredOutputManager does not import here")
lp = pytest.importorskip("vllm.v1.sample.logits_processor", reason="vLLM's logits processors do not import here")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conftest import DATA_DIR
from vllm import SamplingParams
from vllm.sampling_params import StructuredOutputsParams
from vllm.v1.request import Request

from grammask.adapters import vllm as adapter
from grammask.adapters import vllm_logits
from grammask.bitmask import bitmask_to_bool
from grammask.errors import ConfigurationError

TOKENIZER_DIR = DATA_DIR / "tokenizers" / "smollm2"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
Options = backend_types.StructuredOutputOptions


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))


def _config(vocab_size, spec_tokens=0, max_num_seqs=4):
    """The parts of a VllmConfig that StructuredOutputManager and the logits processor read."""
    return SimpleNamespace(
        parallel_config=SimpleNamespace(distributed_executor_backend="external_launcher"),  # compile inline
        scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs),
        model_config=SimpleNamespace(skip_tokenizer_init=True, is_diffusion=False, tokenizer=str(TOKENIZER_DIR),
                                     get_vocab_size=lambda: vocab_size),
        structured_outputs_config=SimpleNamespace(enable_in_reasoning=False, disable_any_whitespace=True,
                                                  reasoning_parser=None, reasoning_parser_plugin=None),
        num_speculative_tokens=spec_tokens,
        speculative_config=None,
    )


@pytest.fixture(scope="module")
def backend(tokenizer):
    return adapter.GrammaskBackend(_config(len(tokenizer)), tokenizer=tokenizer, vocab_size=len(tokenizer))


def _manager(backend, spec_tokens):
    """vLLM's own manager with grammask as its backend (vLLM has no hook to pick it by name)."""
    manager = so_manager.StructuredOutputManager(_config(backend.vocab_size, spec_tokens))
    manager.backend, manager.backend_name = backend, adapter.BACKEND_NAME
    return manager


def _request(request_id, structured, eos):
    params = SamplingParams(max_tokens=64, structured_outputs=structured, stop_token_ids=[eos])
    params.structured_outputs._backend = adapter.BACKEND_NAME
    return Request(request_id, [1, 2, 3], params, None)


def _allowed(row, n):
    return list(bitmask_to_bool(row, n).nonzero()[0])


def test_classes_are_vllms(backend):
    assert isinstance(backend, backend_types.StructuredOutputBackend)
    grammar = backend.compile_grammar(Options.REGEX, r"\d+")
    assert isinstance(grammar, backend_types.StructuredOutputGrammar)


@pytest.mark.parametrize("kind, spec, text", [
    (Options.JSON, json.dumps(SCHEMA), '{"name":"Tom","age":3}'),
    (Options.JSON_OBJECT, "", '{"a": [1, 2]}'),
    (Options.REGEX, r"\d{3}-[A-Z]{2}", "123-AB"),
    (Options.GRAMMAR, 'root ::= "yes" | "no"', "no"),
    (Options.GRAMMAR, 'start: "yes" | "no"', "yes"),
    (Options.CHOICE, json.dumps(["red", "green"]), "green"),
])
def test_request_kinds(backend, tokenizer, kind, spec, text):
    grammar = backend.compile_grammar(kind, spec, stop_token_ids={tokenizer.eos_token_id})
    tokens = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    assert grammar.validate_tokens(tokens) == tokens
    assert grammar.accept_tokens("r", tokens) and grammar.is_terminated()
    grammar.reset()
    assert not grammar.is_terminated() and grammar.state.num_tokens == 0


def test_structural_tag_is_refused(backend):
    from grammask.errors import GrammarError

    with pytest.raises(GrammarError, match="structural tags"):
        backend.compile_grammar(Options.STRUCTURAL_TAG, json.dumps({"structures": [], "triggers": []}))


def test_manager_bitmasks_match_grammask_matcher(backend, tokenizer):
    manager = _manager(backend, spec_tokens=0)
    request = _request("a", StructuredOutputsParams(json=json.dumps(SCHEMA)), tokenizer.eos_token_id)
    manager.grammar_init(request)
    grammar = request.structured_output_request.grammar
    assert isinstance(grammar, adapter.GrammaskGrammar)
    reference = grammar.state.compiled.matcher()
    n = len(tokenizer)
    for doc_token in tokenizer.encode('{"name": "Zoë", "age": 41}', add_special_tokens=False):
        rows = manager.grammar_bitmask({"a": request}, ["a"], {})
        assert _allowed(rows[0], n) == list(reference.allowed_tokens())
        assert manager.accept_tokens(request, [doc_token])
        reference.advance(doc_token)
    rows = manager.grammar_bitmask({"a": request}, ["a"], {})
    assert _allowed(rows[0], n) == [tokenizer.eos_token_id]
    assert manager.accept_tokens(request, [tokenizer.eos_token_id])
    assert grammar.is_terminated()


def test_manager_speculative_path(backend, tokenizer):
    """validate the draft, fill one row per draft position plus the bonus row, accept, roll back."""
    manager = _manager(backend, spec_tokens=4)
    request = _request("s", StructuredOutputsParams(json=json.dumps(SCHEMA)), tokenizer.eos_token_id)
    manager.grammar_init(request)
    grammar = request.structured_output_request.grammar
    prefix = tokenizer.encode('{"name":"Al', add_special_tokens=False)
    assert manager.accept_tokens(request, prefix)
    draft = tokenizer.encode('","age":7', add_special_tokens=False)[:3]
    bad = tokenizer.encode("]", add_special_tokens=False)
    assert manager.validate_tokens(request, draft + bad) == draft
    assert grammar.state.num_tokens == len(prefix)
    rows = manager.grammar_bitmask({"s": request}, ["s"], {"s": draft})
    assert grammar.state.num_tokens == len(prefix)  # the manager rolled back what it accepted
    reference = grammar.state.compiled.matcher()
    reference.accept_tokens(prefix)
    n = len(tokenizer)
    for i, token in enumerate(draft):
        assert _allowed(rows[i], n) == list(reference.allowed_tokens())
        reference.advance(token)
    assert _allowed(rows[len(draft)], n) == list(reference.allowed_tokens())  # the bonus token's row
    assert manager.accept_tokens(request, draft[:2])
    grammar.rollback(2)
    assert grammar.state.num_tokens == len(prefix)


def test_stop_tokens_only_where_output_may_end(backend, tokenizer):
    stop = tokenizer.encode("\n\n", add_special_tokens=False)[0]
    grammar = backend.compile_grammar(Options.REGEX, r"\d+", stop_token_ids={stop, tokenizer.eos_token_id})
    n = len(tokenizer)
    row = backend.allocate_token_bitmask(1)
    grammar.fill_bitmask(row, 0)
    assert stop not in _allowed(row[0].numpy(), n)
    assert grammar.accept_tokens("r", tokenizer.encode("42", add_special_tokens=False))
    grammar.fill_bitmask(row, 0)
    assert stop in _allowed(row[0].numpy(), n)
    assert grammar.accept_tokens("r", [stop]) and grammar.is_terminated()
    assert grammar.accept_tokens("r", [5]) and grammar.validate_tokens([5]) == []  # ignored after the end


def test_logits_processor_with_batch_updates(tokenizer):
    n = len(tokenizer)
    proc = vllm_logits.GrammaskLogitsProcessor(_config(n), torch.device("cpu"), False)
    assert isinstance(proc, lp.LogitsProcessor) and not proc.is_argmax_invariant()
    constrained = SamplingParams(max_tokens=30, extra_args={"grammask": {"json_schema": SCHEMA}})
    free = SamplingParams()
    out0, out1 = [], []
    proc.update_state(lp.BatchUpdate(batch_size=2, removed=[], added=[(0, free, [1], out1), (1, constrained, [1], out0)],
                                     moved=[]))
    proc.update_state(lp.BatchUpdate(batch_size=2, removed=[], added=[], moved=[(0, 1, lp.MoveDirectionality.SWAP)]))
    matcher = proc._rows[0][0].compiled.matcher(max_tokens=30)  # max_tokens is the request's budget
    for token in tokenizer.encode('{"name":"Bo","age":2}', add_special_tokens=False):
        logits = torch.zeros(2, n)
        proc.apply(logits)
        assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == list(matcher.allowed_tokens())
        assert torch.isfinite(logits[1]).all()
        out0.append(token)
        matcher.advance(token)
    logits = torch.zeros(2, n)
    proc.apply(logits)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [tokenizer.eos_token_id]
    proc.update_state(lp.BatchUpdate(batch_size=1, removed=[0], added=[], moved=[]))
    assert proc._rows == {}


def test_logits_processor_validates_params():
    with pytest.raises(ConfigurationError):
        vllm_logits.GrammaskLogitsProcessor.validate_params(SamplingParams(extra_args={"grammask": {"regex": "(?<=a)b"}}))
    with pytest.raises(ValueError):
        vllm_logits.GrammaskLogitsProcessor.validate_params(SamplingParams(extra_args={"grammask": {"nope": 1}}))
    vllm_logits.GrammaskLogitsProcessor.validate_params(SamplingParams(extra_args={"grammask": {"choice": ["a", "b"]}}))


def test_logits_processor_budget_can_be_turned_off(tokenizer):
    proc = vllm_logits.GrammaskLogitsProcessor(_config(len(tokenizer)), torch.device("cpu"), False)
    params = SamplingParams(max_tokens=5, extra_args={"grammask": {"regex": "[a-z]+", "budget": False}})
    proc.update_state(lp.BatchUpdate(batch_size=1, removed=[], added=[(0, params, [1], [])], moved=[]))
    assert proc._rows[0][0].matcher.max_tokens is None
