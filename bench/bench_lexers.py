"""Lark's two LALR lexers side by side: cold compile and mask time on the seeds' programs.

For SynCode's Go and Java grammars (the GreatGramma benchmark, ``data/seeds/``) under ``lexer="basic"`` and
``lexer="contextual"``: the cold compile (after a warm-up compile of a one-rule grammar, so the
vocabulary's one-time work is not counted) and the time of every mask while each program is replayed
token by token. Issue 13's speed bar is per grammar: cold compile <= 20 s, mask p50 <= 0.3 ms (Llama-3).

    python bench/bench_lexers.py [--tokenizer llama3] [--grammars go,java]

Results go to ``results/lexers.md`` and ``lexers.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from cases import load_seed_grammar, load_tokenizer
from report import environment

import grammask as gm
from grammask.bitmask import allocate_bitmask

RESULTS = Path(__file__).parent / "results"
LEXERS = ("basic", "contextual")


def measure(name: str, lexer: str, tok) -> dict:
    """One grammar under one lexer: cold compile seconds, mask milliseconds (p50, mean, p99) over the programs."""
    seed = load_seed_grammar(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resolved LALR conflicts
        grammar = gm.Grammar.from_lark(seed.lark_text, name=f"syncode-{name}", lexer=lexer)
        compiler = gm.Compiler(tok.vocab, cache=False)
        compiler.compile(gm.Grammar.from_lark('start: "a"'))
        start = time.perf_counter()
        compiled = compiler.compile(grammar)
        cold = time.perf_counter() - start
    row = allocate_bitmask(1, tok.vocab.n_logits)[0]
    times = []
    for _, program in seed.programs:
        matcher = compiled.matcher()
        for token in tok.encode(program):
            start = time.perf_counter()
            matcher.fill_mask(row)
            times.append(time.perf_counter() - start)
            matcher.advance(token)
    ms = np.array(times) * 1e3
    return {"grammar": f"syncode-{name}", "lexer": lexer, "cold_compile_s": round(cold, 2), "masks": len(ms),
            "mask_p50_ms": round(float(np.median(ms)), 4), "mask_mean_ms": round(float(ms.mean()), 4),
            "mask_p99_ms": round(float(np.percentile(ms, 99)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--grammars", default="go,java")
    args = ap.parse_args()
    tok = load_tokenizer(args.tokenizer)
    rows = []
    for name in args.grammars.split(","):
        for lexer in LEXERS:
            rows.append(measure(name, lexer, tok))
            print(json.dumps(rows[-1]), flush=True)
    env = environment(1)
    lines = [f"Lexers compared, tokenizer {args.tokenizer}; measured {env['date']} on {env['cpu']}, one thread.", "",
             "| grammar | lexer | cold compile (s) | masks | mask p50 (ms) | mean (ms) | p99 (ms) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['grammar']} | {r['lexer']} | {r['cold_compile_s']} | {r['masks']} | {r['mask_p50_ms']} | "
              f"{r['mask_mean_ms']} | {r['mask_p99_ms']} |" for r in rows]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lexers.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "lexers.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
