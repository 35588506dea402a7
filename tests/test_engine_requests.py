"""The engine-neutral parts of the SGLang and vLLM adapters: request kinds to grammars, one request's
state (stop tokens, mask rows of other widths, drafts, jump-forward), the engine vocabulary and the
torch bitmask helpers. Needs no engine; the torch and transformers parts skip without them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DATA_DIR, get_vocab

import grammask as gm
from grammask.adapters.request_state import RequestMatcher, fill_rows
from grammask.adapters.requests import ANY_JSON, grammar_for_request, is_gbnf
from grammask.bitmask import allocate_bitmask, bitmask_to_bool, bitmask_words
from grammask.errors import ConfigurationError, GrammarError, MatcherStateError

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture(scope="module")
def vocab():
    return get_vocab("smollm2")


def _matcher(vocab, kind, spec, stops=()):
    return RequestMatcher(gm.compile(grammar_for_request(kind, spec), vocab), stops)


@pytest.mark.parametrize("kind, spec, good, bad", [
    ("json", json.dumps(SCHEMA), '{"n":1}', '{"m":1}'),
    ("json", ANY_JSON, "[1, {}]", "[1,]"),
    ("json_object", "", '{"x": [true]}', "[1]"),
    ("regex", r"a+b", "aab", "ba"),
    ("ebnf", 'root ::= "x" [0-9]+', "x12", "y"),
    ("ebnf", "start: \"x\" DIGIT+\n%import common.DIGIT", "x12", "y"),
    ("choice", json.dumps(["left", "right"]), "right", "up"),
    ("choice", json.dumps(["a b", "x&y#(z)*", "a.c"]), "x&y#(z)*", "abc"),
])
def test_request_kinds(vocab, kind, spec, good, bad):
    compiled = gm.compile(grammar_for_request(kind, spec), vocab)
    m = compiled.matcher(prefix=good)
    assert m.is_accepting()
    try:
        accepting = compiled.matcher(prefix=bad).is_accepting()
    except gm.GrammaskError:
        accepting = False
    assert not accepting


def test_gbnf_detection():
    assert is_gbnf('root ::= "a"\nitem-list ::= "b"')
    assert not is_gbnf('start: "a"  // ::= in a comment is not a rule\n')


def test_request_errors():
    with pytest.raises(ConfigurationError):
        grammar_for_request("yaml", "")
    with pytest.raises(ConfigurationError):
        grammar_for_request("json", "{oops")
    with pytest.raises(ConfigurationError):
        grammar_for_request("choice", "[]")
    with pytest.raises(GrammarError, match="structural tags"):
        grammar_for_request("structural_tag", "{}")


def test_json_whitespace_follows_the_engine(vocab):
    compact = gm.compile(grammar_for_request("json", json.dumps(SCHEMA)), vocab)
    spaced = gm.compile(grammar_for_request("json", json.dumps(SCHEMA), any_whitespace=True), vocab)
    assert spaced.matcher(prefix='{\n  "n" : 1\n}').is_accepting()
    with pytest.raises(gm.GrammaskError):
        compact.matcher(prefix="{\n")


def test_rows_of_other_widths(vocab):
    m = _matcher(vocab, "regex", r"\d+")
    words = bitmask_words(vocab.n_logits)
    exact = allocate_bitmask(1, vocab.n_logits)[0]
    m.fill(exact)
    wide = np.full(words + 3, -1, dtype=np.int32)
    m.fill(wide)
    assert (wide[:words] == exact).all() and not wide[words:].any()
    narrow = np.full(words - 1, -1, dtype=np.int32)
    m.fill(narrow)
    assert (narrow == exact[: words - 1]).all()


def test_stop_tokens_are_eos_like(vocab):
    stop = vocab.encode("\n")[0]
    m = _matcher(vocab, "regex", r"\d+", stops=[stop])
    row = allocate_bitmask(1, vocab.n_logits)[0]
    m.fill(row)
    assert not bitmask_to_bool(row, vocab.n_logits)[stop]
    assert not m.accept(stop)
    assert m.accept_many(vocab.encode("12")) == len(vocab.encode("12"))
    m.fill(row)
    assert bitmask_to_bool(row, vocab.n_logits)[stop]
    assert m.accept(stop) and m.is_terminated()
    assert not m.accept(vocab.encode("3")[0])  # nothing after the end
    m.rollback(1)
    assert not m.is_terminated()


@pytest.mark.parametrize("threads", [1, 2])
def test_rows_filled_in_one_call_as_one_by_one(vocab, threads):
    stop = vocab.encode("\n")[0]
    states = [_matcher(vocab, "regex", r"\d+", stops=[stop]), _matcher(vocab, "json", json.dumps(SCHEMA)),
              RequestMatcher(gm.compile(grammar_for_request("json", ANY_JSON), vocab), max_tokens=9),
              _matcher(vocab, "choice", json.dumps(["left", "right"]))]
    for state, text in zip(states, ["12", '{"n"', "[1, ", ""], strict=True):
        state.accept_many(vocab.encode(text))
    states.append(states[0].fresh())  # a stop token not allowed yet
    states[3].accept_many(vocab.encode("left"))
    states[3].accept(vocab.eos_ids[0])  # terminated
    rows = [4, 0, 3, 1, 2]
    for width in (bitmask_words(vocab.n_logits), bitmask_words(vocab.n_logits) + 2):  # exact: one call; wider: one by one
        expected = np.zeros((len(states), width), dtype=np.int32)
        for state, row in zip(states, rows, strict=True):
            state.fill(expected[row])
        got = np.full_like(expected, 7)
        fill_rows(states, got, rows, threads=threads)
        assert (got == expected).all()
    assert bitmask_to_bool(got[4], vocab.n_logits)[stop] and not bitmask_to_bool(got[2], vocab.n_logits)[stop]


def test_drafts_validate_and_out_of_range(vocab):
    m = _matcher(vocab, "json", json.dumps(SCHEMA))
    draft = vocab.encode('{"n":12}') + [vocab.eos_ids[0], 5]
    assert m.validate(draft) == len(draft) - 1  # stops at the end of the output
    assert m.num_tokens == 0
    assert not m.accept(vocab.n_logits + 7)
    assert m.accept_many(draft) == len(draft) - 1 and m.is_terminated()
    with pytest.raises(MatcherStateError):
        m.rollback(len(draft))
    fresh = m.fresh()
    assert fresh.num_tokens == 0 and fresh.compiled is m.compiled


def test_jump_forward_text_stops_before_a_partial_character(vocab):
    m = _matcher(vocab, "regex", "é+!")
    assert m.jump_forward_text() == "é"  # then é or !
    m = _matcher(vocab, "regex", "ab\u00e9")
    text = m.jump_forward_text()
    assert text == "ab\u00e9"
    assert vocab.decode(m.jump_forward_tokens()) == text.encode()[: len(vocab.decode(m.jump_forward_tokens()))]


def test_engine_vocabulary_from_a_transformers_tokenizer():
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install '.[hf]')")
    from grammask.adapters.engine_vocab import engine_vocabulary

    tok = transformers.AutoTokenizer.from_pretrained(str(DATA_DIR / "tokenizers" / "smollm2"))
    vocab = engine_vocabulary(tok, 49216, {0})
    assert vocab.n_logits == 49216 and set(vocab.eos_ids) == {0, tok.eos_token_id}
    assert vocab.tokens[: len(tok)] == get_vocab("smollm2").tokens[: len(tok)]


def test_torch_bitmask_helpers():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install '.[hf]')")
    from grammask.adapters.torch_bitmask import (
        allocate_token_bitmask,
        apply_token_bitmask_,
    )

    mask = allocate_token_bitmask(2, 70)
    assert mask.shape == (2, 3) and (mask == -1).all()
    mask[0] = 0
    mask[0, 2] = 1 << 3  # token 67
    logits = torch.zeros(2, 72)
    apply_token_bitmask_(logits, mask)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [67]
    assert torch.isfinite(logits[1]).sum() == 72


def test_budget_and_its_fallback(vocab):
    compiled = gm.compile(grammar_for_request("json", json.dumps(SCHEMA)), vocab)
    m = RequestMatcher(compiled, max_tokens=12)
    assert m.matcher.max_tokens == 12 and m.fresh().matcher.max_tokens == 12
    with pytest.warns(UserWarning, match="without a token budget"):
        tiny = RequestMatcher(compiled, max_tokens=2)
    assert tiny.matcher.max_tokens is None
