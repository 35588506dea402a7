"""The matcher accepts a whole document (every token, then EOS) iff Lark's LALR parser with its basic lexer does.

Documents are sampled from each grammar and then mutated (characters inserted, deleted,
swapped); both kinds are checked, and the mutated ones must include rejections and
acceptances so the comparison means something.
"""

from __future__ import annotations

import random

import pytest
from conftest import get_vocab
from lark import Lark
from lark.exceptions import LarkError

from grammask import Grammar, compile
from grammask.grammar.builtin import builtin_source
from grammask.sampler import SentenceSampler, mutate


def _accepts(compiled, vocab, text: str) -> bool:
    matcher = compiled.matcher()
    if not all(matcher.accept_token(t) for t in vocab.encode(text)):
        return False
    return matcher.is_accepting()


@pytest.mark.parametrize("grammar", ["json", "c"])
def test_agrees_with_lark(grammar):
    vocab = get_vocab("llama3")
    g = Grammar.builtin(grammar)
    compiled = compile(g, vocab, cache=False)
    lark = Lark(builtin_source(grammar), parser="lalr", lexer="basic")
    sampler = SentenceSampler(g, max_depth=8)
    alphabet = "".join(sorted({ch for t in g.terminals if t.literal for ch in t.literal} | set(" \n\"\\/*0123456789abcxyz.-+eE'")))
    rng = random.Random(7)
    counts = {"sampled": 0, "mutated": 0, "mutated accepted": 0}
    for _ in range(1000):
        doc = sampler.sample(rng)
        for kind, text in (("sampled", doc), ("mutated", mutate(doc, rng, alphabet, edits=rng.randint(1, 3)))):
            try:
                lark.parse(text)
                reference = True
            except LarkError:
                reference = False
            assert reference or kind == "mutated", f"the sampler produced a document Lark rejects: {text!r}"
            assert _accepts(compiled, vocab, text) == reference, f"{kind} document, Lark says {reference}: {text!r}"
            counts[kind] += 1
            counts["mutated accepted"] += kind == "mutated" and reference
    assert counts["sampled"] == counts["mutated"] == 1000
    assert 50 < counts["mutated accepted"] < 950, counts
