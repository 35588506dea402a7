"""The SGLang grammar backend (grammask.adapters.sglang) against SGLang's own base classes and traversal.

Needs the ``sglang`` package (``pip install 'grammask[sglang]'``, see pyproject.toml) and torch; skipped
with the reason otherwise. CI does not install SGLang.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'grammask[sglang]')")
base = pytest.importorskip(
    "sglang.srt.constrained.base_grammar_backend",
    reason="sglang is not installed or does not import here (pip install 'grammask[sglang]')",
)
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conftest import DATA_DIR

from grammask.adapters import sglang as adapter
from grammask.bitmask import bitmask_to_bool

TOKENIZER = DATA_DIR / "tokenizers" / "smollm2" / "tokenizer.json"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER), eos_token="<|im_end|>")


@pytest.fixture(scope="module")
def backend(tokenizer):
    return adapter.GrammaskGrammarBackend(tokenizer, vocab_size=len(tokenizer), eos_token_ids={tokenizer.eos_token_id},
                                          any_whitespace=False)


def _compile(backend, key):
    """Through SGLang's own dispatch (cache miss: the backend's executor compiles)."""
    value, hit = backend.get_cached_or_future_value(key, require_reasoning=False)
    assert not hit
    grammar = value.result(timeout=300)
    backend.set_cache(key, grammar.copy())
    return grammar


def _row_bools(grammar, n):
    mask = grammar.allocate_vocab_mask(n, 1, "cpu")
    grammar.fill_vocab_mask(mask, 0)
    return bitmask_to_bool(mask[0].numpy(), n)


def test_classes_are_sglangs(backend):
    assert isinstance(backend, base.BaseGrammarBackend)
    grammar = backend.dispatch_regex(r"yes|no")
    assert isinstance(grammar, base.BaseGrammarObject)


def test_json_masks_match_grammask_matcher(backend, tokenizer):
    grammar = _compile(backend, ("json", json.dumps(SCHEMA)))
    compiled = grammar.state.compiled
    n = len(tokenizer)
    for doc in ['{"name":"Tom","age":3}', '{"name": "Ann \\u00e9", "age": -12}']:
        g = grammar.copy()
        reference = compiled.matcher()
        for token in tokenizer.encode(doc, add_special_tokens=False):
            expected = reference.allowed_tokens()
            got = _row_bools(g, n)
            assert list(got.nonzero()[0]) == list(expected)
            g.accept_token(token)
            reference.advance(token)
        assert _row_bools(g, n)[tokenizer.eos_token_id]
        g.accept_token(tokenizer.eos_token_id)
        assert g.is_terminated()


def test_cache_hit_gives_a_fresh_grammar(backend, tokenizer):
    key = ("regex", r"[a-z]+@[a-z]+\.com")
    first = _compile(backend, key)
    first.accept_token(tokenizer.encode("bob", add_special_tokens=False)[0])
    value, hit = backend.get_cached_or_future_value(key, require_reasoning=False)
    assert hit and value.state.num_tokens == 0 and value.grammar_stats.is_cache_hit


def test_rejected_token_raises_value_error_and_keeps_state(backend, tokenizer):
    grammar = backend.dispatch_regex(r"\d+")
    letter = tokenizer.encode("a", add_special_tokens=False)[0]
    with pytest.raises(ValueError):
        grammar.accept_token(letter)
    assert grammar.state.num_tokens == 0


@pytest.mark.parametrize("ebnf", [
    'root ::= "yes" | "no" | "maybe " [0-9]',
    'start: "yes" | "no" | "maybe " DIGIT\n%import common.DIGIT',
])
def test_ebnf_gbnf_and_lark(backend, tokenizer, ebnf):
    grammar = backend.dispatch_ebnf(ebnf)
    for token in tokenizer.encode("maybe 7", add_special_tokens=False):
        grammar.accept_token(token)
    grammar.accept_token(tokenizer.eos_token_id)
    assert grammar.is_terminated()


def test_invalid_grammar_and_structural_tag_are_reported(backend):
    bad = backend.dispatch_json("{not json")
    assert isinstance(bad, base.InvalidGrammarObject) and "JSON" in bad.error_message
    tag = backend.dispatch_structural_tag(json.dumps({"structures": [], "triggers": []}))
    assert isinstance(tag, base.InvalidGrammarObject) and "structural tags" in tag.error_message


def test_jump_forward(backend, tokenizer):
    grammar = backend.dispatch_json(json.dumps(SCHEMA))
    helper = grammar.try_jump_forward(tokenizer)
    assert helper is not None
    text, _ = grammar.jump_forward_str_state(helper)
    assert text == '{"name":'  # then a space or the string's quote
    ids, _ = helper
    assert tokenizer.decode(ids) == text[: len(tokenizer.decode(ids))]
    new_ids = tokenizer.encode(text, add_special_tokens=False)
    grammar.jump_and_retokenize([], new_ids, -1)
    assert grammar.state.num_tokens == len(new_ids)
    for token in tokenizer.encode('"Tom","age":', add_special_tokens=False):
        grammar.accept_token(token)
    assert grammar.try_jump_forward(tokenizer) is None  # a digit or '-' may come next


def test_jump_and_retokenize_rolls_back_to_the_common_prefix(backend, tokenizer):
    grammar = backend.dispatch_json(json.dumps(SCHEMA))
    by_char = [tokenizer.encode(c, add_special_tokens=False)[0] for c in '{"name":"To']
    for token in by_char:
        grammar.accept_token(token)
    merged = tokenizer.encode('{"name":"To', add_special_tokens=False)
    assert merged != by_char
    grammar.jump_and_retokenize(by_char, merged, -1)
    assert grammar.state.num_tokens == len(merged)
    reference = grammar.state.compiled.matcher(prefix='{"name":"To')
    assert list(_row_bools(grammar, len(tokenizer)).nonzero()[0]) == list(reference.allowed_tokens())


def test_speculative_tree_traversal_with_sglangs_traverse_tree(backend, tokenizer):
    """SGLang's own draft-tree walk (accept, fill, rollback(1)) gives each node the mask of its path."""
    spec_utils = pytest.importorskip("sglang.srt.speculative.spec_utils", reason="SGLang's speculative module does not import here")
    grammar = backend.dispatch_json(json.dumps(SCHEMA))
    prefix = tokenizer.encode('{"name":"', add_special_tokens=False)
    for token in prefix[:-1]:
        grammar.accept_token(token)
    good = tokenizer.encode('Tom"', add_special_tokens=False)
    bad = tokenizer.encode("}", add_special_tokens=False)
    # tree: node 0 = last prefix token (already verified); children chain: good tokens; sibling of node 1: bad
    draft = [prefix[-1], *good, bad[0]]
    n_nodes = len(draft)
    next_token = [1] + [i + 1 if i + 1 < len(good) + 1 else -1 for i in range(1, len(good) + 1)] + [-1]
    next_sibling = [-1, n_nodes - 1] + [-1] * (n_nodes - 2)
    n = len(tokenizer)
    mask = grammar.allocate_vocab_mask(n, n_nodes, "cpu")
    mask.fill_(0)
    spec_utils.traverse_tree(torch.tensor(next_token), torch.tensor(next_sibling), torch.tensor(draft), grammar, mask, n)
    assert grammar.state.num_tokens == len(prefix) - 1  # every draft token rolled back
    reference = grammar.state.compiled.matcher()
    reference.accept_tokens(prefix)
    for node, token in enumerate([None, *good]):
        if token is not None:
            reference.advance(token)
        assert list(bitmask_to_bool(mask[node].numpy(), n).nonzero()[0]) == list(reference.allowed_tokens())
    assert not mask[n_nodes - 1].any()  # the bad sibling was refused: its row never filled


def test_apply_vocab_mask(backend, tokenizer):
    grammar = backend.dispatch_regex(r"\d+")
    n = len(tokenizer)
    mask = grammar.allocate_vocab_mask(n, 2, "cpu")
    grammar.fill_vocab_mask(mask, 0)
    logits = torch.zeros(2, n)
    grammar.apply_vocab_mask(logits, grammar.move_vocab_mask(mask, "cpu"))
    allowed = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert allowed == list(grammar.state.matcher.allowed_tokens())
    assert torch.isfinite(logits[1]).all()  # an unfilled row allows everything


def test_plugin_entry_point_registers_the_backend(tokenizer):
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES

    adapter.register()
    assert base.GRAMMAR_BACKEND_REGISTRY["grammask"] is adapter.create_backend
    assert "grammask" in GRAMMAR_BACKEND_CHOICES
    backend = adapter.create_backend(object(), tokenizer, len(tokenizer), {tokenizer.eos_token_id})
    assert backend.any_whitespace


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    points = {ep.name: ep.value for ep in entry_points(group="sglang.srt.plugins")}
    if "grammask" not in points:
        pytest.skip("grammask is not installed as a distribution here (pip install -e .): no entry points to read")
    assert points["grammask"] == "grammask.adapters.sglang:register"


def test_draft_walk_accept_fill_rollback_one(backend, tokenizer):
    """The pattern of SGLang's draft-tree walk, by hand: masks along a path, then rollback(1) back to the root."""
    grammar = backend.dispatch_json(json.dumps(SCHEMA))
    draft = tokenizer.encode('{"name":"Al","age":4', add_special_tokens=False)
    n = len(tokenizer)
    rows = []
    for token in draft:
        rows.append(_row_bools(grammar, n))
        grammar.accept_token(token)
    for _ in draft:
        grammar.rollback(1)
    assert grammar.state.num_tokens == 0
    reference = grammar.state.compiled.matcher()
    for token, row in zip(draft, rows):
        assert list(row.nonzero()[0]) == list(reference.allowed_tokens())
        reference.advance(token)
