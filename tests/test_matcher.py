"""Matcher behaviour: replaying real documents, EOS, advance errors, rollback, fork, odd vocabularies, deep input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TOKENIZERS, get_compiled, get_vocab
from lark import Lark
from lark.exceptions import LarkError

from grammask import Grammar, Vocabulary, compile
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.errors import MatcherStateError, TokenOutOfRangeError, TokenRejectedError
from grammask.grammar.builtin import builtin_source

BENCH = Path(__file__).parent.parent / "bench" / "data"
DOCUMENTS = {"json": BENCH / "document.json", "c": BENCH / "sample.c"}


def _lark_accepts(lark, text: bytes) -> bool:
    try:
        lark.parse(text.decode())
    except (LarkError, UnicodeDecodeError):  # a prefix ending mid-character is not a sentence
        return False
    return True


def _mask(matcher, n):
    row = allocate_bitmask(1, n)[0]
    matcher.fill_mask(row)
    return bitmask_to_bool(row, n)


@pytest.mark.parametrize("vocab_name", TOKENIZERS)
@pytest.mark.parametrize("grammar", ["json", "c"])
def test_replay_benchmark_documents(grammar, vocab_name):
    vocab = get_vocab(vocab_name)
    compiled = get_compiled(grammar, vocab_name)
    ids = vocab.encode(DOCUMENTS[grammar].read_text())
    lark = Lark(builtin_source(grammar), parser="lalr", lexer="basic")
    matcher = compiled.matcher()
    eos = list(vocab.eos_ids)
    for i, t in enumerate(ids):
        mask = _mask(matcher, vocab.n_logits)
        assert mask[t], f"ground-truth token {i} ({vocab.tokens[t]!r}) masked"
        assert mask[eos].all() == _lark_accepts(lark, vocab.decode(ids[:i])), f"EOS wrong after token {i}"
        matcher.advance(t)
    mask = _mask(matcher, vocab.n_logits)
    assert mask[eos].all() and matcher.is_accepting()
    matcher.advance(eos[0])
    assert matcher.is_terminated()


def test_masked_token_raises_and_leaves_state():
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher()
    m.advance(vocab.encode("[")[0])
    before = _mask(m, vocab.n_logits)
    bad = vocab.encode("]]")[0] if len(vocab.encode("]]")) == 1 else vocab.encode(":")[0]
    assert not before[bad]
    with pytest.raises(TokenRejectedError):
        m.advance(bad)
    assert np.array_equal(_mask(m, vocab.n_logits), before)
    with pytest.raises(TokenOutOfRangeError):
        m.advance(vocab.n_logits)
    with pytest.raises(TokenOutOfRangeError):
        m.advance(-1)
    with pytest.raises(TokenRejectedError):
        m.advance(vocab.eos_ids[0])


def test_eos_only_at_sentence_end_and_after_termination():
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher()
    assert not m.is_accepting()
    for t in vocab.encode("12"):
        m.advance(t)
    assert m.is_accepting()  # "12" is a whole JSON text, and could still grow ("123")
    assert _mask(m, vocab.n_logits)[vocab.encode("3")[0]]
    m.advance(vocab.eos_ids[0])
    mask = _mask(m, vocab.n_logits)
    assert mask[list(vocab.eos_ids)].all() and mask.sum() == len(vocab.eos_ids)
    with pytest.raises(MatcherStateError):
        m.advance(vocab.encode("3")[0])


def test_rollback_and_fork():
    vocab = get_vocab("smollm2")
    compiled = get_compiled("json", "smollm2")
    ids = vocab.encode('{"a": [1, 2, {"b": null}]}')
    m = compiled.matcher()
    masks = []
    for t in ids:
        masks.append(_mask(m, vocab.n_logits))
        m.advance(t)
    fork = m.fork()
    m.rollback(4)
    assert np.array_equal(_mask(m, vocab.n_logits), masks[-4])
    assert fork.is_accepting() and not m.is_accepting()
    for t in ids[-4:]:
        m.advance(t)
    assert m.is_accepting()
    m.rollback(len(ids))
    assert np.array_equal(_mask(m, vocab.n_logits), masks[0])
    with pytest.raises(MatcherStateError):
        m.rollback(1)


def test_special_tokens_and_extra_logits_are_masked():
    base = get_vocab("smollm2")
    vocab = Vocabulary(base.tokens, base.eos_ids, n_logits=len(base.tokens) + 100, special_ids=base.special_ids)
    compiled = compile(Grammar.builtin("json"), vocab, cache=False)
    mask = _mask(compiled.matcher(), vocab.n_logits)
    assert not mask[len(base.tokens):].any()
    assert not mask[sorted(base.special_ids)].any()
    assert mask[base.encode("{")[0]]


def test_tokens_with_equal_bytes_are_all_allowed():
    tokens = [b"{", b"}", b"[", b"]", b"1", b"1", b'"', b"a", b" ", b",", b":", None]
    vocab = Vocabulary(tokens, [11])
    m = compile(Grammar.builtin("json"), vocab, cache=False).matcher()
    assert _mask(m, len(tokens))[[4, 5]].all()


def test_deep_nesting_without_recursion_errors():
    vocab = get_vocab("smollm2")
    compiled = get_compiled("json", "smollm2")
    depth = 100_000
    m = compiled.matcher()
    open_id, close_id = vocab.encode("[")[0], vocab.encode("]")[0]
    for _ in range(depth):
        m.advance(open_id)
    assert _mask(m, vocab.n_logits)[close_id]
    for _ in range(depth):
        m.advance(close_id)
    assert m.is_accepting()
    assert not _mask(m, vocab.n_logits)[close_id]


def test_mask_row_width_is_checked():
    m = get_compiled("json", "smollm2").matcher()
    with pytest.raises(ValueError):
        m.fill_mask(np.zeros(3, dtype=np.int32))
