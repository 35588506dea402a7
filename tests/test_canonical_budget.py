"""Token budgets under canonical mode (issue 15): ``compiled.matcher(canonical=True, max_tokens=N)``.

* The budget counts canonical tokens: SmolLM2 writes ``reingin`` in 3 tokens where 2 other ones spell it,
  so the plain budget takes 3 tokens (EOS included) and the canonical one refuses 3 and takes 4.
* Exactness by brute force on small regexes: at every state a budgeted canonical matcher reaches, its mask
  is a subset of the exact one (the tokens after which some canonical output ends within the tokens left,
  found by enumerating the unbudgeted canonical matcher's sequences), never empty; the tokens it removes
  that the exact mask keeps are counted.
* Random runs on JSON and a schema end with EOS within the budget, as the tokenizer's own encoding.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest
from conftest import get_vocab

import grammask as gm
from grammask.canonical_budget import complete
from grammask.errors import BudgetError, TokenRejectedError

JME = Path(__file__).resolve().parents[2] / "shared" / "data" / "json-mode-eval"


@functools.cache
def compiled_regex(pattern: str) -> gm.CompiledGrammar:
    return gm.compile(gm.Grammar.from_regex(pattern), get_vocab("smollm2"))


def test_the_budget_counts_canonical_tokens():
    vocab = get_vocab("smollm2")
    compiled = compiled_regex("reingin")
    assert compiled.matcher(3).min_tokens_to_finish() == 3  # two tokens spell it, plus EOS
    assert len(vocab.encode("reingin")) == 3
    with pytest.raises(BudgetError, match="canonical"):
        compiled.matcher(3, canonical=True)
    m = compiled.matcher(4, canonical=True)
    for token in vocab.encode("reingin"):
        assert m.allowed_tokens().tolist() == [token]
        m.advance(token)
    assert m.is_accepting()
    two = compiled.matcher(3)  # the plain budget's two-token spelling starts otherwise
    first = [t for t in two.allowed_tokens().tolist() if t != vocab.encode("reingin")[0]]
    assert first
    with pytest.raises(TokenRejectedError):
        compiled.matcher(4, canonical=True).advance(first[0])


def exact_costs(matcher, eos: set[int], depth: int, memo: dict) -> int:
    """The fewest canonical tokens (EOS included) that end the output from ``matcher``'s state, searched up to
    ``depth`` tokens (``depth + 1`` where none ends within it)."""
    key = (matcher.plain.lexer_state, matcher.plain.stack, matcher.relation_state, depth)
    if key in memo:
        return memo[key]
    best = depth + 1
    if matcher.is_accepting():
        best = 1
    elif depth > 1:
        for t in matcher.allowed_tokens().tolist():
            if t in eos:
                continue
            matcher.advance(t)
            best = min(best, 1 + exact_costs(matcher, eos, depth - 1, memo))
            matcher.rollback()
    memo[key] = best
    return best


REGEXES = ["x(relyre|y)( [0-3]{1,2})?", "[a-c]{1,3}(,[a-c]{1,3}){0,2}", r"\{\"(a|ab|abc)\": [0-9]{1,3}\}"]


@pytest.mark.parametrize("pattern", [REGEXES[0], *(pytest.param(r, marks=pytest.mark.slow) for r in REGEXES[1:])])
def test_budgeted_masks_are_sound_and_measured_against_brute_force(pattern):
    vocab = get_vocab("smollm2")
    eos = set(vocab.eos_ids)
    compiled = compiled_regex(pattern)
    plain_canonical = compiled.matcher(canonical=True)
    memo: dict = {}
    kept = removed = states = 0
    for limit in (3, 4, 5, 6, 8):
        try:
            budgeted = compiled.matcher(limit, canonical=True)
        except BudgetError:
            assert exact_costs(plain_canonical, eos, limit, memo) > limit
            continue
        stack = [(budgeted, [])]
        while stack:
            m, seq = stack.pop()
            states += 1
            got = set(m.allowed_tokens().tolist())
            assert got, f"empty mask after {vocab.decode(seq)!r}"
            left = limit - m.num_tokens
            probe = compiled.matcher(canonical=True)
            assert probe.accept_tokens(seq) == len(seq)
            exact = set()
            for t in probe.allowed_tokens().tolist():
                if t in eos:
                    exact.add(t)
                    continue
                probe.advance(t)
                if 1 + exact_costs(probe, eos, left - 1, memo) <= left:
                    exact.add(t)
                probe.rollback()
            assert got <= exact, f"{pattern!r} at {vocab.decode(seq)!r}: {got - exact} cannot finish in time"
            kept += len(got)
            removed += len(exact - got)
            for t in sorted(got - eos):
                child = m.fork()
                child.advance(t)
                stack.append((child, [*seq, t]))
    print(f"{pattern!r}: {states} states, {kept} tokens kept, {removed} the exact mask keeps removed")
    assert states > 0 and removed <= kept


def run_to_end(matcher, vocab, rng: random.Random) -> list[int]:
    """Uniform over the allowed tokens, EOS only when nothing else is allowed: the tokens before EOS."""
    eos = set(vocab.eos_ids)
    tokens: list[int] = []
    while not matcher.is_terminated():
        allowed = matcher.allowed_tokens().tolist()
        assert allowed, f"empty mask after {vocab.decode(tokens)!r}"
        others = [t for t in allowed if t not in eos]
        t = rng.choice(others) if others else allowed[0]
        matcher.advance(t)
        if t not in eos:
            tokens.append(t)
    return tokens


@pytest.mark.parametrize("limit", [5, 9, pytest.param(16, marks=pytest.mark.slow)])
def test_budgeted_runs_on_json_end_within_the_budget(limit):
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    m = compiled.matcher(limit, canonical=True)
    tokens = run_to_end(m, vocab, random.Random(limit))
    assert len(tokens) + 1 <= limit
    assert vocab.encode(vocab.decode(tokens).decode()) == tokens


def test_budgeted_runs_on_a_schema_end_within_the_budget():
    vocab = get_vocab("smollm2")
    schema = json.loads((JME / "JME_1.json").read_text())["schema"]
    compiled = gm.compile(gm.Grammar.from_json_schema(schema), vocab)
    least = compiled.matcher().min_tokens_to_finish()
    rng = random.Random(0)
    m = compiled.matcher(least + 6, canonical=True)
    tokens = run_to_end(m, vocab, rng)
    assert len(tokens) + 1 <= least + 6
    assert vocab.encode(vocab.decode(tokens).decode()) == tokens


def test_complete_finds_a_canonical_way_to_finish():
    """After ``"}`` SmolLM2 cannot close the outer object with ``}`` (it writes ``"}}``): the completion takes `` }``."""
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    m = compiled.matcher(canonical=True)
    m.accept_tokens(vocab.encode('{"a": {"b": "c'))
    m.advance(vocab.tokens.index(b'"}'))
    assert vocab.tokens.index(b"}") not in m.allowed_tokens()
    witness = complete(m, 5)
    assert witness is not None and m.validate_tokens(witness) == len(witness)
    probe = m.fork()
    probe.accept_tokens(witness)
    assert probe.is_accepting()
