"""Regex benchmark: grammask's ``Grammar.from_regex`` against outlines-core on the same regexes.

For each of the 100 regexes of ``tests/data/regexes.json`` (the regex front end's bar): cold compile
time of both engines, then one sampled string of the regex is tokenized and each engine replays it
token by token: per step it fills a mask (timed), must allow the next token, and must allow EOS iff
the prefix is a whole match (``re.fullmatch``). Prints p50/p99 per engine.

    python bench/bench_regex.py [--tokenizer smollm2|llama3] [--limit N] [--json OUT]
"""

from __future__ import annotations

import random
import re
import sys
from functools import partial

from cases import load_tokenizer, regexes, token_bytes
from harness import Tally, compile_here, prefix_verdicts, replay_each
from peers import build_outlines
from report import summary_main

import grammask as gm
from grammask.sampler import SentenceSampler

ENGINES = ("grammask", "outlines-core")


def run(tokenizer: str, limit: int) -> dict:
    """Compile and replay the first ``limit`` regexes with both engines; the summary."""
    tok = load_tokenizer(tokenizer)
    vocab = tok.vocab
    rng = random.Random(0)
    tallies = {engine: Tally() for engine in ENGINES}
    patterns = regexes()[:limit]
    disagreements = 0
    for pattern in patterns:
        grammar = gm.Grammar.from_regex(pattern)
        text = SentenceSampler(grammar).sample(rng, ignored_rate=0.0)
        tokens = vocab.encode(text)
        expected = prefix_verdicts(token_bytes(tok, tokens), lambda s, p=pattern: re.fullmatch(p, s) is not None)
        builds = {
            "grammask": partial(compile_here, lambda g=grammar: g, vocab),
            "outlines-core": partial(build_outlines, pattern, vocab),
        }
        for engine, problem in replay_each(builds, tallies, tokens, vocab.eos_ids, expected).items():
            print(f"{engine} on {pattern!r} ({text!r}): {problem}")
            disagreements += not problem.startswith("cannot compile")
    summary = {"tokenizer": tokenizer, "regexes": len(patterns), "disagreements": disagreements}
    summary.update({engine: tally.summary() for engine, tally in tallies.items()})
    return summary


if __name__ == "__main__":
    sys.exit(summary_main(run, __doc__.splitlines()[0], "smollm2", len(regexes())))
