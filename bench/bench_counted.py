"""Counted constraints at any bound: compile time and mask time of ``maxLength`` 10^2..10^6 and ``a{1,100000}``.

The bars (issue 16): ``maxLength`` 10^6 compiles in <= 50 ms, and so does the regex ``a{1,100000}``. Each case is
compiled fresh ``--repeat`` times by one compiler without disk or memory cache (it keeps only the vocabulary's
trie; the first compiles of the run warm numba and the process's small caches, as a serving process has them)
and the median is reported, beside the same schema
without the bound. Masks are timed along a document that writes a string up to the bound (at most 4,000
characters; near the bound the masks are built per level: :mod:`grammask.counting`).

    python bench/bench_counted.py [--tokenizer llama3] [--repeat 7] [--md OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from cases import load_tokenizer
from threads import THREAD_VARS

import grammask as gm
from grammask.bitmask import allocate_bitmask

BOUNDS = (100, 1_000, 10_000, 100_000, 1_000_000)
_WORDS = "counted constraints keep the length beside the lexer state instead of in it "


def _cases() -> list[tuple[str, object, str]]:
    """(label, grammar source, text the mask timing writes)."""
    out = [("string, no bound", {"type": "string"}, json.dumps((_WORDS * 60)[:4000]))]
    for n in BOUNDS:
        text = (_WORDS * (1 + min(n, 4000) // len(_WORDS)))[: min(n, 4000)]
        out.append((f"maxLength {n:,}", {"type": "string", "maxLength": n}, json.dumps(text)))
    out.append(("regex a{1,100000}", "a{1,100000}", "a" * 4000))
    return out


def _grammar(source: object) -> gm.Grammar:
    return gm.Grammar.from_regex(source) if isinstance(source, str) else gm.Grammar.from_json_schema(source)


def _compile_times(compiler: gm.Compiler, source: object, repeat: int) -> tuple[float, float, gm.CompiledGrammar]:
    """(median seconds from source to compiled grammar, median seconds of the compile alone, the last compile);
    ``compiler`` keeps no compiled grammar (no memory or disk cache), only the vocabulary's trie."""
    totals, compiles = [], []
    compiled = None
    for _ in range(repeat):
        start = time.perf_counter()
        grammar = _grammar(source)
        middle = time.perf_counter()
        compiled = compiler.compile(grammar)
        end = time.perf_counter()
        totals.append(end - start)
        compiles.append(end - middle)
    return statistics.median(totals), statistics.median(compiles), compiled


def _mask_times(compiled: gm.CompiledGrammar, text: str) -> tuple[list[float], int]:
    """Seconds of each fill_mask along ``text`` (tokenized by the vocabulary), and how many of them were near a
    level's end (masks per level)."""
    vocab = compiled.vocab
    row = allocate_bitmask(1, vocab.n_logits)[0]
    m = compiled.matcher()
    counting = compiled._engine.counting
    times, near = [], 0
    for token in vocab.encode(text):
        if counting is not None and counting.near(m.lexer_state, m._post):
            near += 1
        start = time.perf_counter()
        m.fill_mask(row)
        times.append(time.perf_counter() - start)
        m.advance(token)
    return times, near


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="llama3")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--md")
    args = parser.parse_args()
    missing = [v for v in THREAD_VARS if v not in os.environ]
    if missing:
        print(f"note: {', '.join(missing)} unset; numba may use several threads", file=sys.stderr)
    vocab = load_tokenizer(args.tokenizer).vocab
    warm = gm.Compiler(vocab, cache=False, max_memory=0)
    for label, source, text in _cases():  # numba kernels and the process's small caches, once
        _mask_times(warm.compile(_grammar(source)), text[:200])
    lines = [
        f"# Counted constraints ({args.tokenizer}, median of {args.repeat} fresh compiles, one thread)",
        "",
        "| case | lexer states | source to compiled (ms) | compile (ms) | masks | near the bound | mask p50 (us) | mask p99 (us) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, source, text in _cases():
        total, compile_only, compiled = _compile_times(warm, source, args.repeat)
        times, near = _mask_times(compiled, text)
        p50, p99 = np.percentile(times, 50) * 1e6, np.percentile(times, 99) * 1e6
        lines.append(f"| {label} | {compiled.stats.lexer_states} | {total * 1e3:.1f} | {compile_only * 1e3:.1f} | "
                     f"{len(times)} | {near} | {p50:.1f} | {p99:.1f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.md:
        Path(args.md).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
