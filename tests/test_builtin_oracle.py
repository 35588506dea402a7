"""The built-in Python and Go grammars' masks equal the brute-force oracle at prefixes of real standard-library
files, on SmolLM2.

The oracle (:mod:`postlex_oracle`) shares nothing with the engine: it lexes with its own byte loop, runs the
grammars' own postlex objects and parses with Lark's LALR parser. The prefixes are token boundaries of whole files
(fixed seeds), EOS included. For Python the oracle runs Lark's ``Indenter`` rules, which differ from CPython's
only at the ends of input and in tab stops: there EOS is CPython's own verdict (``ast.parse`` of the prefix), the
empty prefix is left to ``test_python_grammar`` (CPython's first line), and a file indented with tabs would show
up as a mismatch. CI checks a slice;
``pytest -m slow tests/test_builtin_oracle.py`` checks 1,000 prefixes per language (issue 14's bar), in four
quarters that can be run apart (``-k "go and part2"``), each about 15 minutes of one core for Go.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import get_vocab
from postlex_oracle import PostlexOracle, allowed_mask
from test_go_grammar import needs_go, stdlib_texts
from test_python_grammar import cpython_accepts, stdlib_files

from grammask import Compiler, Grammar
from grammask.grammar.builtin.go_semicolons import GoSemicolons
from grammask.grammar.builtin.python_indent import CPythonIndenter

VOCAB = "smollm2"


def _texts(language: str, n: int) -> list[str]:
    if language == "python":
        return [text for _, text in stdlib_files(n)]
    return stdlib_texts(n)


def _check(language: str, n_prefixes: int, per_file: int, seed: int, part: tuple[int, int] = (0, 1)) -> int:
    """Compare masks with the oracle at up to ``per_file`` random token boundaries of each file, in turn, until
    ``n_prefixes`` are drawn; returns how many were compared (a mismatch fails with the prefix and the differing
    tokens). ``part`` ``(k, n)``: only the drawn prefixes whose index is ``k`` modulo ``n``."""
    grammar = Grammar.builtin(language)
    vocab = get_vocab(VOCAB)
    compiled = Compiler(vocab).compile(grammar)
    oracle = PostlexOracle(grammar, vocab, CPythonIndenter() if language == "python" else GoSemicolons())
    rng = random.Random(seed)
    drawn = checked = 0
    for text in _texts(language, 200):
        if drawn >= n_prefixes:
            break
        ids = vocab.encode(text)
        first = 1 if language == "python" else 0
        wanted = min(per_file, len(ids) + 1 - first, n_prefixes - drawn)
        cuts = sorted(rng.sample(range(first, len(ids) + 1), wanted))
        m, done = compiled.matcher(), 0
        for cut in cuts:
            for t in ids[done:cut]:
                assert m.accept_token(t), (vocab.decode(ids[:done])[-60:], vocab.tokens[t])
            done = cut
            drawn += 1
            if (drawn - 1) % part[1] != part[0]:
                continue
            prefix = vocab.decode(ids[:done])
            want = oracle.mask(prefix)
            if language == "python":
                want[list(vocab.eos_ids)] = cpython_accepts(prefix.decode())
            diff = np.flatnonzero(want != allowed_mask(m))
            shown = [(int(t), vocab.tokens[t] if t < len(vocab.tokens) else None, bool(want[t])) for t in diff[:10]]
            assert not len(diff), (vocab.decode(ids[:done])[-80:], shown)
            checked += 1
    return checked


@pytest.mark.parametrize("language", ["python", pytest.param("go", marks=needs_go)])
def test_masks_equal_oracle(language):
    assert _check(language, n_prefixes=3, per_file=3, seed=0) == 3


@pytest.mark.slow
@pytest.mark.parametrize("part", [f"part{k}" for k in range(4)])
@pytest.mark.parametrize("language", ["python", pytest.param("go", marks=needs_go)])
def test_masks_equal_oracle_many(language, part):
    assert _check(language, n_prefixes=1000, per_file=40, seed=1, part=(int(part[-1]), 4)) == 250
