"""Exact masks on the seeds' benchmark grammars (SynCode's Go, Java and Python, as the GreatGramma paper uses them):
``fill_mask`` equals the brute-force oracle at prefixes of real programs those grammars accept (then of sampled
documents, where more prefixes are asked for than the programs have), under both of
Lark's LALR lexers (tests/oracle.py for the basic one, tests/contextual_oracle.py for the contextual one); SynCode's
Python with its indenter under the basic lexer (tests/postlex_oracle.py; the contextual one is in
tests/test_contextual_indentation.py). Their programs need Lark's backing up (``automata/fallback.py``).

CI checks a slice; ``pytest -m slow tests/test_seed_oracle.py`` checks 1,000 prefixes per grammar and lexer.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import get_vocab
from contextual_oracle import ContextualOracle
from mask_check import check_cuts
from oracle import MaskOracle
from postlex_oracle import PostlexOracle
from test_sampler_indentation import _SynCodeIndenter

from grammask import Compiler, Grammar
from grammask.automata.lexer import build_lexer
from grammask.errors import GrammarError
from grammask.sampler import SentenceSampler

ROOT = Path(__file__).resolve().parents[1]
SYNCODE = ROOT.parent / "shared" / "data" / "syncode-grammars"
PROGRAMS = ROOT / "bench" / "data" / "seeds"
SUFFIX = {"go": "*.go", "java": "*.java", "python": "*.py"}


def _setup(name: str, lexer: str):
    path = SYNCODE / f"{name}.lark"
    if not path.exists():
        pytest.skip(f"SynCode's grammars are not at {SYNCODE}")
    text = path.read_text()
    postlex = _SynCodeIndenter() if name == "python" else None
    grammar = Grammar.from_lark(text, name=f"syncode-{name}", lexer=lexer, postlex=postlex)
    vocab = get_vocab("smollm2")
    compiled = Compiler(vocab, cache=False).compile(grammar)
    return text, grammar, vocab, compiled


def _check(name: str, lexer: str, n_prefixes: int, seed: int) -> int:
    text, grammar, vocab, compiled = _setup(name, lexer)
    if grammar.indentation is not None:
        oracle = PostlexOracle(grammar, vocab, _SynCodeIndenter())
    elif lexer == "basic":
        oracle = MaskOracle(text, build_lexer(grammar), vocab, backtrack=grammar.backtrack)
    else:
        oracle = ContextualOracle(text, grammar, build_lexer(grammar).rank, vocab)
    programs = [path.read_text() for path in sorted(PROGRAMS.joinpath(name).glob(SUFFIX[name]))]
    rng = random.Random(seed)
    sampler = SentenceSampler(grammar, max_depth=8)
    checked = 0
    while checked < n_prefixes:  # the programs' prefixes first, then sampled documents' if more are asked for
        try:
            document = programs.pop(0) if programs else sampler.sample(rng)
        except GrammarError:
            continue  # a draw whose lexemes do not lex apart
        ids = vocab.encode(document)
        if vocab.decode(ids) != document.encode():
            continue  # the tokenizer cannot spell some byte of a sampled document (SmolLM2 lacks a few)
        share = n_prefixes - checked if not programs else (n_prefixes - checked) // (len(programs) + 1)
        checked += check_cuts(compiled, oracle, vocab, ids, sorted(rng.sample(range(len(ids) + 1), min(share, len(ids) + 1))))
    return checked


@pytest.mark.parametrize("lexer", ["basic", "contextual"])
@pytest.mark.parametrize("name", ["go", "java"])
def test_masks_equal_oracle(name, lexer):
    assert _check(name, lexer, n_prefixes=10, seed=1) == 10


@pytest.mark.slow
@pytest.mark.parametrize("lexer", ["basic", "contextual"])
@pytest.mark.parametrize("name", ["go", "java"])
def test_masks_equal_oracle_many(name, lexer):
    assert _check(name, lexer, n_prefixes=1000, seed=2) == 1000


def test_python_masks_equal_oracle():
    assert _check("python", "basic", n_prefixes=10, seed=1) == 10


@pytest.mark.slow
def test_python_masks_equal_oracle_many():
    assert _check("python", "basic", n_prefixes=1000, seed=2) == 1000
