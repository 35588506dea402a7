"""Lark's two LALR lexers side by side: cold compile and mask time of the real-world grammars.

For SynCode's grammars and Lark's bundled python.lark and lark.lark (``cases.REAL_GRAMMARS``) under
``lexer="basic"`` and ``lexer="contextual"``: the cold compile (after a warm-up compile of a one-rule grammar,
so the vocabulary's one-time work is not counted) and the time of every mask while documents are replayed
token by token: the seeds' benchmark programs (``data/seeds/``) where the grammar has them, else
``--sampled`` documents of the grammar's sampler (fixed seed). Issue 13's speed bar is per grammar: cold
compile <= 20 s, mask p50 <= 0.3 ms (Llama-3).

    python bench/bench_lexers.py [--tokenizer llama3] [--grammars syncode-go,syncode-java] [--sampled 20]

Results go to ``results/lexers.md`` and ``lexers.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from cases import (
    REAL_GRAMMARS,
    REAL_PROGRAMS,
    load_real_grammar,
    load_seed_grammar,
    load_tokenizer,
)
from report import environment

import grammask as gm
from grammask.bitmask import allocate_bitmask
from grammask.sampler import SentenceSampler

RESULTS = Path(__file__).parent / "results"
LEXERS = ("basic", "contextual")


def documents(name: str, grammar: gm.Grammar, n_sampled: int) -> list[str]:
    """What grammar ``name`` replays: the seeds' programs where it has them, else ``n_sampled`` sampled documents
    (none where the sampler cannot sample the grammar, as SynCode's invariants, whose start derives no sentence)."""
    if name in REAL_PROGRAMS:
        return [program for _, program in load_seed_grammar(REAL_PROGRAMS[name]).programs]
    try:
        sampler = SentenceSampler(grammar, max_depth=8)
    except gm.GrammaskError:
        return []
    rng = random.Random(0)
    docs = []
    for _ in range(n_sampled * 3):
        if len(docs) == n_sampled:
            break
        try:
            docs.append(sampler.sample(rng))
        except gm.GrammaskError:
            continue
    return docs


def measure(name: str, lexer: str, tok, n_sampled: int) -> dict:
    """One grammar under one lexer: cold compile seconds, mask milliseconds (p50, mean, p99) over its documents."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resolved LALR conflicts
        grammar = load_real_grammar(name, lexer)
        compiler = gm.Compiler(tok.vocab, cache=False)
        compiler.compile(gm.Grammar.from_lark('start: "a"'))
        start = time.perf_counter()
        compiled = compiler.compile(grammar)
        cold = time.perf_counter() - start
    row = allocate_bitmask(1, tok.vocab.n_logits)[0]
    times = []
    docs = documents(name, grammar, n_sampled)
    for doc in docs:
        matcher = compiled.matcher()
        for token in tok.encode(doc):
            start = time.perf_counter()
            matcher.fill_mask(row)
            times.append(time.perf_counter() - start)
            if not matcher.accept_token(token):
                break  # a document the tokenizer cannot spell as the grammar's text (sampled only)
    row = {"grammar": name, "lexer": lexer, "cold_compile_s": round(cold, 2),
           "documents": f"{len(docs)} {'programs' if name in REAL_PROGRAMS else 'sampled'}", "masks": len(times),
           "mask_p50_ms": None, "mask_mean_ms": None, "mask_p99_ms": None}
    if times:
        ms = np.array(times) * 1e3
        row.update(mask_p50_ms=round(float(np.median(ms)), 4), mask_mean_ms=round(float(ms.mean()), 4),
                   mask_p99_ms=round(float(np.percentile(ms, 99)), 3))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--grammars", default=",".join(REAL_GRAMMARS), help="comma-separated, from: " + ", ".join(REAL_GRAMMARS))
    ap.add_argument("--sampled", type=int, default=20, help="documents replayed where a grammar has no programs")
    args = ap.parse_args()
    tok = load_tokenizer(args.tokenizer)
    rows = []
    for name in args.grammars.split(","):
        for lexer in LEXERS:
            rows.append(measure(name, lexer, tok, args.sampled))
            print(json.dumps(rows[-1]), flush=True)
    env = environment(1)
    lines = [f"Lexers compared, tokenizer {args.tokenizer}; measured {env['date']} on {env['cpu']}, one thread.", "",
             "| grammar | lexer | cold compile (s) | documents | masks | mask p50 (ms) | mean (ms) | p99 (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['grammar']} | {r['lexer']} | {r['cold_compile_s']} | {r['documents']} | {r['masks']} | "
              + " | ".join("n/a" if r[k] is None else str(r[k]) for k in ("mask_p50_ms", "mask_mean_ms", "mask_p99_ms"))
              + " |" for r in rows]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lexers.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "lexers.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
