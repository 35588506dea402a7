"""JSON Schema benchmark: grammask's ``Grammar.from_json_schema`` against llguidance on JSON-Mode-Eval.

For each of the 100 JSON-Mode-Eval schemas: cold compile time (schema to ready matcher) of both
engines, then the schema's valid document (``json.dumps``) is tokenized and replayed token by
token; per step both fill a mask (timed) and both must allow the next token, and grammask EOS at
the end.
Prints p50/p99 per engine. Bars: grammask compile p50 <= 0.5 s on Llama-3; mask p50 within 2x of
llguidance's in the same run.

    python bench/bench_schema.py [--tokenizer llama3|smollm2] [--limit N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from conftest import get_tokenizer_dir, get_vocab
from peers import PeerTokenizer, _llg_tokenizer

from grammask.bitmask import bitmask_to_bool, bitmask_words
from grammask.compiled import compile as compile_grammar
from grammask.grammar.json_schema import grammar_from_json_schema

JME_DIR = ROOT.parent / "shared" / "data" / "json-mode-eval"


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run(tokenizer: str, limit: int) -> dict:
    import llguidance

    vocab = get_vocab(tokenizer)
    peer = PeerTokenizer(str(Path(get_tokenizer_dir(tokenizer)) / "tokenizer.json"), tuple(vocab.eos_ids), vocab.n_logits)
    lltok = _llg_tokenizer(peer)
    words = bitmask_words(vocab.n_logits)
    stats = {"grammask": {"compile": [], "mask": []}, "llguidance": {"compile": [], "mask": []}}
    problems: list[str] = []
    paths = sorted(JME_DIR.glob("JME_*.json"), key=lambda p: int(p.stem.split("_")[1]))[:limit]
    for path in paths:
        doc = json.loads(path.read_text(encoding="utf-8"))
        # Compact separators: llguidance's strict-whitespace JSON takes no space after ',' and ':'.
        schema, text = doc["schema"], json.dumps(doc["tests"][0]["data"], separators=(",", ":"))
        t0 = time.perf_counter()
        compiled = compile_grammar(grammar_from_json_schema(schema), vocab, cache=False)
        t1 = time.perf_counter()
        llg_grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
        llg = llguidance.LLMatcher(lltok, llg_grammar, log_level=0)
        t2 = time.perf_counter()
        stats["grammask"]["compile"].append(t1 - t0)
        stats["llguidance"]["compile"].append(t2 - t1)
        if llg.is_error():
            problems.append(f"{path.stem}: llguidance: {llg.get_error().splitlines()[0]}")
            llg = None
        matcher = compiled.matcher()
        row, llg_row = np.zeros(words, dtype=np.int32), np.zeros(words, dtype=np.int32)
        for token in vocab.encode(text):
            t0 = time.perf_counter()
            matcher.fill_mask(row)
            stats["grammask"]["mask"].append(time.perf_counter() - t0)
            if llg is not None:
                t0 = time.perf_counter()
                llg.unsafe_compute_mask_ptr(llg_row.ctypes.data, llg_row.nbytes)
                stats["llguidance"]["mask"].append(time.perf_counter() - t0)
                if not bitmask_to_bool(llg_row, vocab.n_logits)[token]:
                    problems.append(f"{path.stem}: llguidance rejects token {token}")
                    llg = None
                else:
                    llg.consume_token(token)
            if not bitmask_to_bool(row, vocab.n_logits)[token]:
                problems.append(f"{path.stem}: grammask rejects token {token}")
                break
            matcher.advance(token)
        else:
            if not matcher.is_accepting():
                problems.append(f"{path.stem}: grammask does not allow EOS at the end")
    summary: dict = {"tokenizer": tokenizer, "schemas": len(paths), "problems": problems}
    for engine, s in stats.items():
        summary[engine] = {
            "compile_p50_s": percentile(s["compile"], 0.5),
            "compile_p90_s": percentile(s["compile"], 0.9),
            "mask_p50_us": percentile(s["mask"], 0.5) * 1e6,
            "mask_p99_us": percentile(s["mask"], 0.99) * 1e6,
            "masks": len(s["mask"]),
        }
    summary["mask_p50_ratio"] = summary["grammask"]["mask_p50_us"] / summary["llguidance"]["mask_p50_us"]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="llama3")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    summary = run(args.tokenizer, args.limit)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
