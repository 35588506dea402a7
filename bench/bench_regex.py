"""Regex benchmark: grammask's ``Grammar.from_regex`` against outlines-core on the same regexes.

For each of the 100 regexes of ``tests/test_regex_frontend.py``: cold compile time of both
engines, then one sampled string of the regex is tokenized and replayed token by token; per
step both fill a mask (timed) and both must allow the next token. Prints p50/p99 per engine.

    python bench/bench_regex.py [--tokenizer smollm2|llama3] [--limit N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import get_vocab
from test_regex_frontend import REGEXES

from grammask.bitmask import bitmask_to_bool, bitmask_words
from grammask.compiled import compile as compile_grammar
from grammask.grammar.regex_frontend import grammar_from_regex
from grammask.sampler import SentenceSampler


def outlines_vocabulary(vocab):
    import outlines_core

    eos = set(vocab.eos_ids)
    by_bytes: dict[bytes, list[int]] = {}
    for i, token in enumerate(vocab.tokens):
        if token and i not in eos:
            by_bytes.setdefault(token, []).append(i)
    return outlines_core.Vocabulary(min(eos), by_bytes)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run(tokenizer: str, limit: int) -> dict:
    import outlines_core

    vocab = get_vocab(tokenizer)
    oc_vocab = outlines_vocabulary(vocab)
    words = bitmask_words(vocab.n_logits)
    rng = random.Random(0)
    stats = {"grammask": {"compile": [], "mask": []}, "outlines-core": {"compile": [], "mask": []}}
    disagreements = 0
    for pattern in REGEXES[:limit]:
        grammar = grammar_from_regex(pattern)
        t0 = time.perf_counter()
        compiled = compile_grammar(grammar, vocab, cache=False)
        t1 = time.perf_counter()
        try:
            index = outlines_core.Index(pattern, oc_vocab)
        except Exception as e:  # noqa: BLE001 (outlines-core rejects some Python regex syntax, error types undocumented)
            print(f"outlines-core cannot compile {pattern!r}: {str(e).splitlines()[0]}")
            index = None
        t2 = time.perf_counter()
        stats["grammask"]["compile"].append(t1 - t0)
        if index is not None:
            stats["outlines-core"]["compile"].append(t2 - t1)
        text = SentenceSampler(grammar).sample(rng, ignored_rate=0.0)
        tokens = vocab.encode(text)
        matcher = compiled.matcher()
        guide = outlines_core.Guide(index) if index is not None else None
        row = np.zeros(words, dtype=np.int32)
        oc_row = np.zeros(words, dtype=np.int32)
        for token in tokens:
            t0 = time.perf_counter()
            matcher.fill_mask(row)
            t1 = time.perf_counter()
            stats["grammask"]["mask"].append(t1 - t0)
            ok = bitmask_to_bool(row, vocab.n_logits)[token]
            if guide is not None:
                t2 = time.perf_counter()
                guide.write_mask_into(oc_row.ctypes.data, oc_row.size, 4)
                stats["outlines-core"]["mask"].append(time.perf_counter() - t2)
                if bitmask_to_bool(oc_row, vocab.n_logits)[token] != ok:
                    disagreements += 1
                    print(f"engines disagree on {pattern!r} at token {token} of {text!r}")
                    guide = None
                else:
                    guide.advance(token)
            if not ok:
                disagreements += 1
                break
            matcher.advance(token)
    summary = {"tokenizer": tokenizer, "regexes": min(limit, len(REGEXES)), "disagreements": disagreements}
    for engine, s in stats.items():
        summary[engine] = {
            "compile_p50_s": percentile(s["compile"], 0.5),
            "compile_mean_s": statistics.fmean(s["compile"]) if s["compile"] else float("nan"),
            "mask_p50_us": percentile(s["mask"], 0.5) * 1e6,
            "mask_p99_us": percentile(s["mask"], 0.99) * 1e6,
            "masks": len(s["mask"]),
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--limit", type=int, default=len(REGEXES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    summary = run(args.tokenizer, args.limit)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
