"""Batched mask benchmark: rows per second of one call that fills the masks of many sequences.

For each case (a grammar and a document) the document is tokenized once with the HF ``tokenizers``
library, and ``--rows`` sequences are cut at seeded random points of it: every engine builds its
matchers at exactly those states (one walk along the document, a copy at each cut). Then each
engine fills all rows in one batched call, with 1 and 2 threads: grammask
``grammask.batch.fill_masks``, llguidance ``fill_next_token_bitmask_par`` (an ``LLExecutor`` of that
many threads), xgrammar ``BatchGrammarMatcher.batch_fill_next_token_bitmask`` (``max_threads``).
Every timed call gets fresh copies of the matchers (made untimed), so no engine reuses a mask it
computed before. Checks: every row allows its sequence's next document token, and grammask's rows
equal its per-matcher ``fill_mask`` rows. grammask's loop of ``fill_mask`` is shown for reference.
"cores used" is the process's CPU time during the call over its wall time: above 1 only where threads
ran side by side. Before the run, two threads sort with NumPy (no GIL) to show how much CPU the
machine gives two threads at all.

"GIL free" (grammask): the share of the time a second Python thread can run while this one fills
masks in a loop (see :func:`gil_free`), for ``fill_masks`` and for the loop of ``fill_mask``.

    python bench/bench_batch.py [--tokenizer llama3] [--cases json,schema,c] [--rows 128] [--repeat 5] [--out F]
"""

from __future__ import annotations

import os
import sys

from threads import THREAD_VARS

if __name__ == "__main__":
    # One thread in every native pool; the batched calls get their threads explicitly.
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cases import BenchTokenizer, Case, jme_documents, load_case, load_tokenizer
from harness import BenchError, Build, NotApplicable, allowed
from peers import build_llguidance, build_llguidance_schema, build_xgrammar
from report import environment

import grammask as gm
from grammask.batch import fill_masks
from grammask.bitmask import allocate_bitmask

CASES = ("json", "schema", "c")
ENGINES = ("grammask", "llguidance", "xgrammar")
THREADS = (1, 2)
BENCH_DIR = Path(__file__).resolve().parent
PAUSE_S = 0.05


def load_batch_case(name: str) -> Case:
    """``json`` and ``c`` as in the mask benchmark; ``schema``: JSON-Mode-Eval's schema with the longest
    document (as the schema benchmark reads it: compact JSON)."""
    if name != "schema":
        return load_case(name)
    _, schema, document = max(jme_documents(100), key=lambda doc: len(doc[2]))
    return Case("schema", "", document, schema=schema, xgrammar="schema")


@dataclass
class Engine:
    """One engine's matchers at the states, how to copy one, and its batched fill ``fill(matchers, bitmask, threads)``."""

    name: str
    matchers: list
    copy: Callable[[object], object]
    fill: Callable[[list, np.ndarray, int], None]


def at_cuts(new: Callable[[], object], advance: Callable[[object, int], object], copy: Callable[[object], object],
            tokens: list[int], cuts: list[int]) -> list:
    """A matcher after ``tokens[:k]`` for every ``k`` of ``cuts`` (one walk, a copy at each cut)."""
    m, done, out = new(), 0, {}
    for k in sorted(set(cuts)):
        for t in tokens[done:k]:
            if advance(m, t) is False:
                raise BenchError(f"document token {t} rejected")
        done = k
        out[k] = m
        m = copy(m)
    return [copy(out[k]) for k in cuts]


def grammask_engine(case: Case, vocab: gm.Vocabulary, tokens: list[int], cuts: list[int]) -> Engine:
    """grammask's compiled grammar (disk cache as usual) and ``fill_masks``."""
    grammar = gm.Grammar.from_json_schema(case.schema) if case.name == "schema" else case.grammar()
    compiled = gm.compile(grammar, vocab)
    matchers = at_cuts(compiled.matcher, gm.Matcher.advance, gm.Matcher.fork, tokens, cuts)
    return Engine("grammask", matchers, gm.Matcher.fork, lambda ms, bm, n: fill_masks(ms, bm, threads=n))


def llguidance_engine(case: Case, tok: BenchTokenizer, tokens: list[int], cuts: list[int]) -> Engine:
    """llguidance's matchers (as the mask benchmark builds them) and ``fill_next_token_bitmask_par``."""
    build: Build = build_llguidance_schema(case.schema, tok.peer) if case.name == "schema" else build_llguidance(
        case.lark_text, tok.peer)
    import llguidance
    from llguidance.numpy import fill_next_token_bitmask_par

    executors = {n: llguidance.LLExecutor(num_threads=n) for n in THREADS}

    def fill(ms: list, bitmask: np.ndarray, n: int) -> None:
        fill_next_token_bitmask_par(executors[n], [(m, i) for i, m in enumerate(ms)], bitmask)

    copy = llguidance.LLMatcher.deep_copy
    return Engine("llguidance", at_cuts(build.new_matcher, llguidance.LLMatcher.consume_token, copy, tokens, cuts),
                  copy, fill)


def xgrammar_engine(case: Case, tok: BenchTokenizer, tokens: list[int], cuts: list[int]) -> Engine:
    """xgrammar's matchers (as the mask benchmark builds them) and ``batch_fill_next_token_bitmask``."""
    if case.xgrammar is None:
        raise NotApplicable(case.xgrammar_na)
    build = build_xgrammar(case.xgrammar, case.schema, tok.peer)
    import xgrammar

    batchers = {n: xgrammar.BatchGrammarMatcher(max_threads=n) for n in THREADS}

    def fill(ms: list, bitmask: np.ndarray, n: int) -> None:
        batchers[n].batch_fill_next_token_bitmask(ms, bitmask)

    copy = xgrammar.GrammarMatcher.fork
    return Engine("xgrammar", at_cuts(build.new_matcher, xgrammar.GrammarMatcher.accept_token, copy, tokens, cuts),
                  copy, fill)


def check_rows(engine: Engine, tokens: list[int], cuts: list[int], n_logits: int) -> str | None:
    """The first row that masks its sequence's next token (grammask: or differs from ``fill_mask``), else None."""
    bitmask = allocate_bitmask(len(cuts), n_logits)
    engine.fill([engine.copy(m) for m in engine.matchers], bitmask, 1)
    for i, k in enumerate(cuts):
        if k < len(tokens) and not allowed(bitmask[i], tokens[k]):
            return f"row {i} (cut {k}) masks the next document token {tokens[k]}"
        if engine.name == "grammask":
            row = np.zeros_like(bitmask[i])
            engine.matchers[i].fork().fill_mask(row)
            if not (row == bitmask[i]).all():
                return f"row {i} (cut {k}) differs from fill_mask"
    return None


def ready_bitmask(n_rows: int, n_logits: int) -> np.ndarray:
    """A bitmask whose pages are mapped, and a pause: the peers' thread pools spin a while after a call
    (on two cores that would slow the next engine down), and this lets them go back to sleep."""
    bitmask = allocate_bitmask(n_rows, n_logits)
    bitmask.fill(-1)
    time.sleep(PAUSE_S)
    return bitmask


def time_fill(engine: Engine, n_logits: int, threads: int) -> tuple[float, float]:
    """Seconds of one batched fill of all rows, on fresh copies of the matchers, into a bitmask already
    in memory, and the CPU seconds the process spent meanwhile (all its threads)."""
    ms = [engine.copy(m) for m in engine.matchers]
    bitmask = ready_bitmask(len(ms), n_logits)
    t0, c0 = time.perf_counter(), time.process_time()
    engine.fill(ms, bitmask, threads)
    return time.perf_counter() - t0, time.process_time() - c0


def cores_for_two_threads(seconds: float = 0.5) -> float:
    """CPU seconds per second two threads get for GIL-free NumPy work (sorting) now: 2 on an idle
    machine with two cores or more, less when other jobs take them."""
    arrays = [np.random.default_rng(k).random(1 << 20) for k in range(2)]

    def sort(a: np.ndarray) -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            np.sort(a)

    threads = [threading.Thread(target=sort, args=(a,)) for a in arrays]
    t0, c0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.process_time() - c0) / (time.perf_counter() - t0)


def time_fill_mask_loop(engine: Engine, n_logits: int) -> tuple[float, float]:
    """Seconds and CPU seconds of grammask's per-matcher ``fill_mask`` over all rows, as :func:`time_fill`."""
    ms = [m.fork() for m in engine.matchers]
    bitmask = ready_bitmask(len(ms), n_logits)
    t0, c0 = time.perf_counter(), time.process_time()
    for i, m in enumerate(ms):
        m.fill_mask(bitmask[i])
    return time.perf_counter() - t0, time.process_time() - c0


def gil_free(work: Callable[[], object], seconds: float = 0.1, rounds: int = 5) -> float:
    """The share of time the GIL is free for another Python thread while ``work()`` runs in a loop here.

    A second thread counts, giving the GIL back after every step (``time.sleep(0)``); the interpreter's
    switch interval is raised to 1 s meanwhile, so this thread keeps the GIL until it lets go of it
    itself (native code that releases it, a large NumPy copy). The counting rate beside ``work``
    divided by the rate beside an idle thread is that share (the CPU the machine leaves the counter
    scales both alike). Idle and busy spells alternate ``rounds`` times; the median ratio is returned.
    """

    def rate(working: bool) -> float:
        stop, out = threading.Event(), []

        def count() -> None:
            n, t0 = 0, time.perf_counter()
            while not stop.is_set():
                n += 1
                time.sleep(0)
            out.append(n / (time.perf_counter() - t0))

        side = threading.Thread(target=count)
        side.start()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            if working:
                work()
            else:
                time.sleep(0.001)
        stop.set()
        side.join()
        return out[0]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        return float(np.median([rate(True) / rate(False) for _ in range(rounds)]))
    finally:
        sys.setswitchinterval(interval)


def gil_free_shares(engine: Engine, n_logits: int) -> dict[int | str, float]:
    """:func:`gil_free` of ``fill_masks`` (one thread) and of the ``fill_mask`` loop over the rows.

    Each call first forgets the masks the matchers keep for a repeated call at the same state
    (``_mask_key``), so every call computes them afresh, as after a decoding step.
    """
    ms = [m.fork() for m in engine.matchers]
    bitmask = allocate_bitmask(len(ms), n_logits)

    def fresh() -> list:
        for m in ms:
            m._mask_key = None
        return ms

    def loop() -> None:
        for i, m in enumerate(fresh()):
            m.fill_mask(bitmask[i])

    return {1: gil_free(lambda: fill_masks(fresh(), bitmask)), "fill_mask loop": gil_free(loop)}


def run_case(name: str, tok: BenchTokenizer, n_rows: int, repeat: int, engines: tuple[str, ...]) -> list[dict]:
    """Every engine's rows/s on one case's states; one result row per (engine, threads)."""
    case = load_batch_case(name)
    tokens = tok.encode(case.document)
    rng = random.Random(0)
    cuts = [rng.randrange(1, len(tokens) + 1) for _ in range(n_rows)]
    n_logits = tok.vocab.n_logits
    built: dict[str, Engine] = {}
    results: list[dict] = []
    makers = {
        "grammask": lambda: grammask_engine(case, tok.vocab, tokens, cuts),
        "llguidance": lambda: llguidance_engine(case, tok, tokens, cuts),
        "xgrammar": lambda: xgrammar_engine(case, tok, tokens, cuts),
    }
    for engine in engines:
        try:
            built[engine] = makers[engine]()
        except NotApplicable as e:
            results.append({"case": name, "engine": engine, "na": str(e)})
        except BenchError as e:
            raise BenchError(f"{name} / {engine}: {e}") from None
    problems = {e: check_rows(b, tokens, cuts, n_logits) for e, b in built.items()}
    times: dict[tuple[str, int | str], list[float]] = {}
    for _ in range(repeat):  # engines interleaved, so load changes hit them alike
        for engine, b in built.items():
            for n in THREADS:
                times.setdefault((engine, n), []).append(time_fill(b, n_logits, n))
            if engine == "grammask":
                times.setdefault((engine, "fill_mask loop"), []).append(time_fill_mask_loop(b, n_logits))
    for (engine, n), ts in times.items():
        s = float(np.median([wall for wall, _ in ts]))
        cores = float(np.median([cpu / wall for wall, cpu in ts]))
        results.append({"case": name, "engine": engine, "threads": n, "rows": n_rows, "tokens": len(tokens),
                        "median_ms": s * 1e3, "rows_per_s": n_rows / s, "cores": cores,
                        "check": problems[engine] or "ok"})
    if "grammask" in built:
        shares = gil_free_shares(built["grammask"], n_logits)
        for row in results:
            if row["engine"] == "grammask" and row.get("threads") in shares:
                row["gil_free"] = shares[row["threads"]]
    return results


def render(results: list[dict], env: dict) -> str:
    """The results as Markdown: one table, then the 2-thread speed-ups and the bars."""
    head = (f"Measured {env['date']} on {env['cpu']}, Python {env['python']}, {env['tokenizer']}, {env['rows']} rows"
            f" per call, medians of {env['repeat']} calls. CPU the machine gave two threads of GIL-free"
            f" NumPy work before the run: {env['cores_for_two_threads']:.2f} cores.")
    lines = [head, "",
             "| case | engine | threads | ms per call | rows/s | cores used | GIL free | check |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "na" in r:
            lines.append(f"| {r['case']} | {r['engine']} | | | n/a | | | {r['na']} |")
            continue
        gil = f"{r['gil_free']:.0%}" if "gil_free" in r else ""
        lines.append(f"| {r['case']} | {r['engine']} | {r['threads']} | {r['median_ms']:.2f} | {r['rows_per_s']:,.0f} "
                     f"| {r['cores']:.2f} | {gil} | {r['check']} |")
    lines += ["", "| bar | measured | result |", "|---|---|---|"]
    for bar in bars(results):
        lines.append(f"| {bar['bar']} | {bar['measured']} | {'PASS' if bar['pass'] else 'FAIL'} |")
    return "\n".join(lines) + "\n"


def bars(results: list[dict]) -> list[dict]:
    """The batched-masks issue's bars per case: 2 threads >= 1.7x one; one thread >= xgrammar's one thread."""
    rate = {(r["case"], r["engine"], r["threads"]): r["rows_per_s"] for r in results if "na" not in r}
    out = []
    for case in dict.fromkeys(r["case"] for r in results):
        one, two = rate.get((case, "grammask", 1)), rate.get((case, "grammask", 2))
        if one and two:
            out.append({"bar": f"{case}: grammask 2 threads >= 1.7x 1 thread", "measured": f"{two / one:.2f}x",
                        "pass": two >= 1.7 * one})
        xgr = rate.get((case, "xgrammar", 1))
        if one and xgr:
            out.append({"bar": f"{case}: grammask 1 thread >= xgrammar 1 thread (rows/s)",
                        "measured": f"{one:,.0f} vs {xgr:,.0f} ({one / xgr:.2f}x)", "pass": one >= xgr})
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line; exit code 1 when a check fails, 2 when the benchmark cannot run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="llama3")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "batch.md")
    args = parser.parse_args(argv)
    cores = cores_for_two_threads()
    try:
        tok = load_tokenizer(args.tokenizer)
        results = []
        for name in args.cases.split(","):
            results += run_case(name, tok, args.rows, args.repeat, tuple(args.engines.split(",")))
    except BenchError as e:
        print(f"bench_batch: {e}", file=sys.stderr)
        return 2
    env = {**environment(args.repeat), "tokenizer": args.tokenizer, "rows": args.rows, "cores_for_two_threads": cores}
    text = render(results, env)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({"environment": env, "rows": results, "bars": bars(results)},
                                                        indent=2) + "\n", encoding="utf-8")
    return 1 if any(r.get("check", "ok") != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
