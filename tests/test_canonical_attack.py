"""Issue 15's attack on canonical matchers (``bench/bench_canonical_attack.py``): a CI slice, and the dead ends
and mismatches it found, as regression tests.

* The slice: a few runs of every chooser on SmolLM2 (JSON, two JSON-Mode-Eval schemas, two regexes), half of
  them under a budget: no empty mask, every run ends with EOS (within its budget), as the tokenizer's own
  encoding.
* SmolLM2, JSON: after white space, a lone ``" "`` is a dead end where the grammar wants a value (the tokenizer
  writes the space with the value, `` {``, `` "``, `` 1``); it used to be allowed and the mask then emptied.
* Llama-3 writes digits in threes: ``"0"`` where a date's year needs three more digits is a dead end.
* The relation took its character classes from the ``regex`` module's Unicode tables, which know code points that
  the tokenizer's own regex engine reads as unassigned (U+1DF54): a token that spans the cut the tokenizer makes
  there was taken. The classes are now asked of the tokenizer (``pretokens.CharClasses.probed``).
"""

from __future__ import annotations

import pytest
from conftest import get_vocab, use_bench_scripts

use_bench_scripts()

import bench_canonical_attack as attack

import grammask as gm
from grammask.canonical_matcher import MaskRows


def run_slice(schemas: int, runs: int, cap: int) -> list:
    cases, skipped = attack.load_cases(["smollm2"], ["json", "jme", "regex"], schemas=schemas, n_regexes=2, log=print)
    assert len(cases) == 3 + schemas and not skipped
    results = attack.attack(cases, runs=runs, seed=3, cap=cap, finish=60, budgets=True, full_share=0.2, log=print)
    summary = attack.summarize(results)
    assert summary["failures"] == 0, summary["failed"]
    assert {r.outcome for r in results} <= {"ok", "refused"}
    return results


def test_attack_slice_finds_no_failure():
    results = run_slice(schemas=1, runs=8, cap=6)
    assert sum(r.budget is not None and r.outcome == "ok" for r in results) >= 2


@pytest.mark.slow
def test_attack_slice_finds_no_failure_slow():
    results = run_slice(schemas=4, runs=40, cap=12)
    assert sum(r.budget is not None and r.outcome == "ok" for r in results) >= 10


def test_a_lone_space_after_white_space_is_not_allowed_in_json():
    vocab = get_vocab("smollm2")
    m = gm.compile(gm.Grammar.builtin("json"), vocab).matcher(canonical=True)
    for t in [42185, 27655, 24112, 3136, 36328]:  # white space runs ending in "\n" + 46 spaces
        m.advance(t)
    space = vocab.tokens.index(b" ")
    assert space not in m.allowed_tokens()
    probe = m.fork()
    probe._forced, probe._rows = None, MaskRows()  # without the dead-end check (and its rows), the space is allowed
    assert space in probe.allowed_tokens()
    probe.advance(space)
    assert len(probe.allowed_tokens()) == 0


def test_a_single_digit_where_a_year_needs_four_is_not_allowed_llama3():
    vocab = get_vocab("llama3")
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}
    m = gm.compile(gm.Grammar.from_json_schema(schema), vocab).matcher(canonical=True)
    m.accept_tokens(vocab.encode('{"d":"'))
    allowed = set(m.allowed_tokens().tolist())
    assert vocab.tokens.index(b"201") in allowed
    assert vocab.tokens.index(b"0") not in allowed and vocab.tokens.index(b"20") not in allowed


def test_relation_reads_unassigned_code_points_as_the_tokenizer_does_llama3():
    vocab = get_vocab("llama3")
    relation = gm.compile(gm.Grammar.from_regex("[^a-z]+"), vocab)._relation_of()
    ids = [82350, 78147]  # " \xf0\x9d" + "\xbd\x94" "드": U+1DF54 then a letter, across the tokenizer's cut
    assert vocab.decode(ids).decode() == " \U0001df54드"
    assert vocab.encode(" \U0001df54드") != ids
    assert relation.accepts(ids) <= len(ids)
