"""Per-request compile latency: JSON schema to the first exact mask, and to the whole grammar, with the peers.

For each schema of JSON-Mode-Eval (all 100) and of a MaskBench sample (``--sample`` of
JSONSchemaBench's ``maskbench/data``, fixed seed, as ``bench_schema_hangs.py`` draws it), every
engine is timed cold, one thread, in this process:

- **first mask**: from the schema (a dict) to the first mask filled: grammask
  ``Grammar.from_json_schema`` + ``Compiler.compile`` + ``matcher()`` + ``fill_mask``; llguidance
  ``grammar_from_json_schema`` + ``LLMatcher`` + its first mask; xgrammar ``compile_json_schema`` +
  ``GrammarMatcher`` + ``fill_next_token_bitmask``.
- **whole compile**: from the schema to every table built: grammask's first mask plus
  ``compiled.complete()`` where the compiler builds tables lazily (the same as the first mask
  where it builds them all at once); xgrammar's ``compile_json_schema``; none for llguidance,
  which builds everything lazily.

Cold means no disk cache and no compiled grammar in memory: grammask's ``Compiler`` (one per
vocabulary, as a server keeps it) has ``cache=False, max_memory=0``; xgrammar's ``GrammarCompiler``
has its cache off. What an engine keeps per vocabulary stays between schemas, as it would in a server
(grammask's vocabulary trie and the walks it shares between grammars, llguidance's ``LLTokenizer``,
xgrammar's ``TokenizerInfo``); ``--fresh`` gives grammask a new compiler (trie prebuilt) per schema.
JSON whitespace is compact for all three. A schema an engine refuses (or, for grammask, does not
compile within ``--timeout``) is counted, not timed; percentiles are over the schemas each engine
compiled, and over those all engines compiled ("common").

    python bench/bench_schema_latency.py [--maskbench GIT_DIR] [--sample 300] [--limit N]
        [--engines grammask,llguidance,xgrammar] [--fresh] [--json OUT] [--md OUT]

``GIT_DIR`` is a git directory of guidance-ai/jsonschemabench (default
``/work/.mirror/guidance-ai+jsonschemabench/repo``; ``--sample 0`` runs JSON-Mode-Eval only).
Bars (issue 16): grammask first mask p50 <= 20 ms and p95 <= 100 ms, whole compile p50 <= 100 ms.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

from threads import THREAD_VARS

for _var in THREAD_VARS:
    os.environ.setdefault(_var, "1")

import numpy as np
from bench_schema_hangs import read_schema, schema_names
from cases import jme_documents, load_tokenizer
from harness import percentile
from peers import llg_tokenizer

import grammask as gm
from grammask.bitmask import bitmask_words

MASKBENCH = "/work/.mirror/guidance-ai+jsonschemabench/repo"
ENGINES = ("grammask", "llguidance", "xgrammar")
BARS = (("first_ms", 50, 20.0), ("first_ms", 95, 100.0), ("whole_ms", 50, 100.0))
_WARM = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}},
                                          "b": {"type": "string", "maxLength": 3}}, "required": ["a"]}


class Grammask:
    """grammask with one compiler for the vocabulary (lazy tables where this grammask has them)."""

    def __init__(self, vocab: gm.Vocabulary, timeout: float, fresh: bool):
        self.vocab = vocab
        self.timeout = timeout
        self.fresh = fresh
        self.lazy = "lazy" in inspect.signature(gm.Compiler).parameters
        self.compiler = self._compiler()
        self.row = np.zeros(bitmask_words(vocab.n_logits), dtype=np.int32)
        self.time(_WARM)  # numba kernels loaded or compiled before timing

    def _compiler(self) -> gm.Compiler:
        extra = {"lazy": True} if self.lazy else {}
        compiler = gm.Compiler(self.vocab, cache=False, max_memory=0, timeout=self.timeout, **extra)
        compiler.trie()
        return compiler

    def time(self, schema: dict) -> tuple[float, float]:
        if self.fresh:
            self.compiler = self._compiler()
        t0 = time.perf_counter()
        compiled = self.compiler.compile(gm.Grammar.from_json_schema(schema, timeout=self.timeout))
        compiled.matcher().fill_mask(self.row)
        t1 = time.perf_counter()
        if self.lazy:
            compiled.complete()
        return t1 - t0, time.perf_counter() - t0


class LLGuidance:
    """llguidance: strict (compact) whitespace, its tokenizer built once."""

    def __init__(self, tok):
        import llguidance

        self.llg = llguidance
        self.lltok = llg_tokenizer(tok.peer)
        self.row = np.zeros(bitmask_words(tok.vocab.n_logits), dtype=np.int32)

    def time(self, schema: dict) -> tuple[float, None]:
        t0 = time.perf_counter()
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
        matcher = self.llg.LLMatcher(self.lltok, grammar, log_level=0)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error().splitlines()[0])
        matcher.unsafe_compute_mask_ptr(self.row.ctypes.data, self.row.nbytes)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error().splitlines()[0])
        return time.perf_counter() - t0, None


class XGrammar:
    """xgrammar: compact whitespace, one thread, its compiler's cache off."""

    def __init__(self, tok):
        import xgrammar
        from peers import _xgr_tokenizer_info

        self.xgr = xgrammar
        info = _xgr_tokenizer_info(tok.peer)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.rows = np.zeros((1, bitmask_words(info.vocab_size)), dtype=np.int32)

    def time(self, schema: dict) -> tuple[float, float]:
        t0 = time.perf_counter()
        compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)
        t1 = time.perf_counter()
        self.xgr.GrammarMatcher(compiled).fill_next_token_bitmask(self.rows, 0)
        return time.perf_counter() - t0, t1 - t0


def _cell(engine: str, result: dict) -> str:
    """One engine's times on one schema, for the progress line."""
    if not result["ok"]:
        return f"{engine} {'refused':>17}"
    whole = "-" if result["whole_ms"] is None else f"{result['whole_ms']:.1f}"
    return f"{engine} {result['first_ms']:8.1f}/{whole:>8}"


def schemas(sample: int, seed: int, repo: str, limit: int | None) -> list[tuple[str, str, dict]]:
    """(set, name, schema): JSON-Mode-Eval's, then the MaskBench sample's."""
    out = [("jme", name, schema) for name, schema, _ in jme_documents(100)]
    if sample:
        names = schema_names(repo)
        for name in sorted(random.Random(seed).sample(names, min(sample, len(names)))):
            out.append(("maskbench", Path(name).name, read_schema(repo, name)))
    return out[:limit]


def schema_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that pick the schemas and the tokenizer (shared with ``profile_schema_phases.py``)."""
    parser.add_argument("--maskbench", default=MASKBENCH)
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--tokenizer", default="llama3")


def summarize(rows: list[dict], engines: list[str]) -> dict:
    """Per set (jme, maskbench, all) and engine: counts and p50/p95 of both times, over its own and the common schemas."""
    out = {}
    for subset in ("jme", "maskbench", "all"):
        mine = [r for r in rows if subset in ("all", r["set"])]
        common = [r for r in mine if all(r[e]["ok"] for e in engines)]
        per = {}
        for e in engines:
            ok = [r[e] for r in mine if r[e]["ok"]]
            stats = {"schemas": len(mine), "compiled": len(ok)}
            for which, pool in (("", ok), ("common_", [r[e] for r in common])):
                for key in ("first_ms", "whole_ms"):
                    values = [x[key] for x in pool if x.get(key) is not None]
                    for q in (50, 95):
                        stats[f"{which}{key}_p{q}"] = round(percentile(values, q / 100), 2) if values else None
            per[e] = stats
        out[subset] = {"common": len(common), **per}
    return out


def markdown(summary: dict, engines: list[str], args: argparse.Namespace) -> str:
    setup = (f"Compiler per schema: {'fresh' if args.fresh else 'one per vocabulary'}; MaskBench sample "
             f"{args.sample} (seed {args.seed}).")
    head = ("| set | engine | compiled | first p50 | first p95 | whole p50 | whole p95 | common: first p50 | "
            "first p95 | whole p50 |")
    lines = [f"# Schema to first mask: {args.tokenizer}, one thread, cold (ms)", "", setup, "", head,
             "|" + " --- |" * 10]
    for subset, per in summary.items():
        for e in engines:
            s = per[e]
            cells = [s["first_ms_p50"], s["first_ms_p95"], s["whole_ms_p50"], s["whole_ms_p95"],
                     s["common_first_ms_p50"], s["common_first_ms_p95"], s["common_whole_ms_p50"]]
            shown = " | ".join("n/a" if c is None else f"{c:.1f}" for c in cells)
            lines.append(f"| {subset} | {e} | {s['compiled']}/{s['schemas']} | {shown} |")
    lines += ["", "common = the schemas every engine compiled (" +
              ", ".join(f"{k}: {v['common']}" for k, v in summary.items()) + ")."]
    g = summary["all"].get("grammask")
    if g:
        lines += ["", "Bars (grammask, all schemas it compiled):"]
        for key, q, limit in BARS:
            value = g[f"{key}_p{q}"]
            verdict = "n/a" if value is None else ("PASS" if value <= limit else "FAIL")
            lines.append(f"- {key} p{q} <= {limit:g} ms: {value} ms {verdict}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    schema_arguments(parser)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--timeout", type=float, default=10.0, help="grammask's compile timeout per schema (s)")
    parser.add_argument("--fresh", action="store_true", help="a new grammask compiler per schema")
    parser.add_argument("--json")
    parser.add_argument("--md")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    tok = load_tokenizer(args.tokenizer)
    engines = args.engines.split(",")
    makers = {"grammask": lambda: Grammask(tok.vocab, args.timeout, args.fresh), "llguidance": lambda: LLGuidance(tok),
              "xgrammar": lambda: XGrammar(tok)}
    runners = {e: makers[e]() for e in engines}
    rows = []
    todo = schemas(args.sample, args.seed, args.maskbench, args.limit)
    for i, (subset, name, schema) in enumerate(todo):
        row = {"set": subset, "name": name}
        for e, runner in runners.items():
            try:
                first, whole = runner.time(schema)
                row[e] = {"ok": True, "first_ms": round(first * 1e3, 3),
                          "whole_ms": None if whole is None else round(whole * 1e3, 3)}
            except Exception as err:  # noqa: BLE001 - a refusal is what this benchmark counts
                row[e] = {"ok": False, "error": f"{type(err).__name__}: {str(err)[:200]}"}
        rows.append(row)
        shown = "  ".join(_cell(e, row[e]) for e in engines)
        print(f"[{i + 1}/{len(todo)}] {name:50.50} {shown}", flush=True)
    summary = summarize(rows, engines)
    text = markdown(summary, engines, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "args": vars(args), "rows": rows}, indent=1) + "\n")
    if args.md:
        Path(args.md).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
