"""JSON Schema benchmark: grammask's ``Grammar.from_json_schema`` against llguidance on JSON-Mode-Eval.

For each of the 100 JSON-Mode-Eval schemas: cold compile time (schema to ready matcher) of both
engines, then the schema's valid document (compact ``json.dumps``) is tokenized and each engine
replays it token by token: per step it fills a mask (timed) and must allow the next token, and
EOS at the end.
Prints p50/p99 per engine. Bars: grammask compile p50 <= 0.5 s on Llama-3; mask p50 within 2x of
llguidance's in the same run.

    python bench/bench_schema.py [--tokenizer llama3|smollm2] [--limit N] [--json OUT]
"""

from __future__ import annotations

import sys
from functools import partial

from cases import jme_documents, load_tokenizer
from harness import Tally, compile_here, replay_each
from peers import build_llguidance_schema
from report import summary_main

import grammask as gm

ENGINES = ("grammask", "llguidance")


def run(tokenizer: str, limit: int) -> dict:
    """Compile and replay the first ``limit`` schemas with both engines; the summary."""
    tok = load_tokenizer(tokenizer)
    vocab = tok.vocab
    tallies = {engine: Tally() for engine in ENGINES}
    problems: list[str] = []
    schemas = 0
    for name, schema, text in jme_documents(limit):
        schemas += 1
        tokens = vocab.encode(text)
        builds = {
            "grammask": partial(compile_here, partial(gm.Grammar.from_json_schema, schema), vocab),
            "llguidance": partial(build_llguidance_schema, schema, tok.peer),
        }
        # Only the whole document is judged: it must end where EOS is allowed.
        expected = [None] * len(tokens) + [True]
        for engine, problem in replay_each(builds, tallies, tokens, vocab.eos_ids, expected).items():
            problems.append(f"{name}: {engine}: {problem}")
    summary: dict = {"tokenizer": tokenizer, "schemas": schemas, "problems": problems}
    summary.update({engine: tally.summary() for engine, tally in tallies.items()})
    summary["mask_p50_ratio"] = summary["grammask"]["mask_p50_us"] / summary["llguidance"]["mask_p50_us"]
    return summary


if __name__ == "__main__":
    sys.exit(summary_main(run, __doc__.splitlines()[0], "llama3", 100))
