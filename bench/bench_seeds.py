"""The seeds' benchmark: GreatGramma's Table 1 rerun, SynCode's Go, Java and Python grammars on
Llama-2, Llama-3 and Qwen3, with grammask, llguidance and xgrammar side by side.

Per grammar and tokenizer, each engine compiles the grammar once (grammask: cold in a fresh process
with a fresh ``Compiler(vocab, cache=False)``, cached in another fresh process reading the disk
cache) and replays every program of ``bench/data/seeds/<grammar>/`` token by token (the HF
tokenizer's ids, then EOS), timing each mask. Every ground-truth token must be allowed; EOS must be
allowed exactly where Lark's LALR parser (basic lexer, the grammar's postlexer) takes the prefix.
The published GreatGramma and SynCode figures (GreatGramma paper, Table 1) are printed beside.
Run ``python bench/bench_seeds.py --help``; ``--quick`` is a smoke run (one tokenizer, 2 programs).
"""

from __future__ import annotations

import os
import sys

from threads import THREAD_VARS

if __name__ == "__main__":
    # One thread everywhere; these are read when numpy, numba, llguidance and torch load.
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import gc
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from bench_masks import build_engine
from cases import (
    SEED_GRAMMARS,
    BenchTokenizer,
    Case,
    SeedGrammar,
    load_seed_grammar,
    load_tokenizer,
    sentence_prefixes,
    token_bytes,
)
from harness import (
    DEFAULT_COMPILE_TIMEOUT_S,
    BenchError,
    NotApplicable,
    median_stats,
    replay,
    step_stats,
)
from report import environment

import grammask as gm

BENCH_DIR = Path(__file__).resolve().parent
ENGINES = ("grammask", "llguidance", "xgrammar")
TOKENIZERS = ("llama2", "llama3", "qwen3")
QUICK_TOKENIZER = "llama2"
QUICK_PROGRAMS = 2
DEFAULT_REPLAY_BUDGET_S = 20.0
"""Seconds of replaying one row may take: no step starts after that (xgrammar's masks on these
grammars take up to a second each)."""

PAPER_TOKENIZER = {"llama2": "Llama (32,000)", "llama3": "Llama-3 (128,256)", "qwen3": "Qwen-2 (151,665)"}
"""The tokenizer of GreatGramma's Table 1 each of ours stands beside (Qwen3's vocabulary is Qwen-2's)."""

PUBLISHED = {
    # (tokenizer, grammar): offline preprocessing (s) and online per-token overhead (ms), GreatGramma
    # paper Table 1; SynCode's online figure is None where the paper marks it X (it masked valid tokens).
    ("llama2", "go"): {"outlines_s": 2.51, "syncode_s": 556.10, "greatgramma_s": 24.76,
                       "outlines_ms": 3213.05, "syncode_ms": None, "greatgramma_ms": 5.08},
    ("llama2", "java"): {"outlines_s": 2.49, "syncode_s": 579.48, "greatgramma_s": 33.79,
                         "outlines_ms": 3450.67, "syncode_ms": 46.71, "greatgramma_ms": 6.29},
    ("llama2", "python"): {"outlines_s": 4.89, "syncode_s": 768.33, "greatgramma_s": 35.40,
                           "outlines_ms": 3245.10, "syncode_ms": 62.40, "greatgramma_ms": 7.11},
    ("llama3", "go"): {"outlines_s": 2.43, "syncode_s": 2212.95, "greatgramma_s": 106.07,
                       "outlines_ms": 12974.43, "syncode_ms": None, "greatgramma_ms": 21.11},
    ("llama3", "java"): {"outlines_s": 2.46, "syncode_s": 2294.26, "greatgramma_s": 166.87,
                         "outlines_ms": 13725.58, "syncode_ms": 49.03, "greatgramma_ms": 24.69},
    ("llama3", "python"): {"outlines_s": 4.86, "syncode_s": 2789.31, "greatgramma_s": 170.71,
                           "outlines_ms": 13167.83, "syncode_ms": 71.49, "greatgramma_ms": 30.17},
    ("qwen3", "go"): {"outlines_s": 2.38, "syncode_s": 2635.00, "greatgramma_s": 132.27,
                      "outlines_ms": 14756.47, "syncode_ms": None, "greatgramma_ms": 21.32},
    ("qwen3", "java"): {"outlines_s": 2.39, "syncode_s": 2734.27, "greatgramma_s": 260.80,
                        "outlines_ms": 15235.25, "syncode_ms": 50.32, "greatgramma_ms": 25.12},
    ("qwen3", "python"): {"outlines_s": 4.81, "syncode_s": 3268.09, "greatgramma_s": 155.32,
                          "outlines_ms": 15146.38, "syncode_ms": 70.87, "greatgramma_ms": 32.30},
}  # fmt: skip

SYNCODE_PAPER_NOTE = (
    "SynCode's own paper (Table 5, its DFA mask store, one-time): Llama-7B (32,000 tokens) Python 382.26 s "
    "and 1.17 GB, Go 380.49 s and 1.06 GB; CodeGen-350M and WizardCoder-1B (about 50K tokens) 588-603 s. "
    "Its online cost is given only as whole-generation time over unconstrained generation (\"with LR(1) or "
    "LALR(1) parsing ... respective overheads of 1.22x and 1.76x\"), not per mask."
)


# ---- running --------------------------------------------------------------------------------------


def program_inputs(seed: SeedGrammar, tok: BenchTokenizer) -> list[tuple[str, list[int], list[bool]]]:
    """Each program of ``seed`` as (name, token ids, EOS expected at each step), Lark judging the prefixes."""
    out = []
    for name, text in seed.programs:
        tokens = tok.encode(text)
        case = Case(f"{seed.name}/{name}", seed.lark_text, text, postlex=seed.postlex)
        out.append((name, tokens, sentence_prefixes(case, token_bytes(tok, tokens))))
    return out


def run_seed_engine(
    engine: str,
    seed: SeedGrammar,
    tok: BenchTokenizer,
    inputs: list[tuple[str, list[int], list[bool]]],
    repeat: int,
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
    budget_s: float = DEFAULT_REPLAY_BUDGET_S,
) -> dict:
    """Compile ``seed`` once with ``engine`` for ``tok``, replay every program ``repeat`` times; one row.

    Mask statistics pool the masks of all programs that replayed without a failure (per replay,
    then the median over replays). ``status`` is ``ok``, ``n/a`` (the engine cannot take the
    grammar: ``reason`` has its error) or ``FAIL`` (a compile error, or a program whose replay
    failed: ``failures`` names them; the other programs still count). Once the replays have taken
    ``budget_s`` seconds no further step starts (``out_of_time``): ``replays``, ``programs_replayed``
    and ``masks_timed`` say how far it got; the masks of a replay cut short still count when it is
    the first one. ``first_replay_mask_max_us`` is the slowest mask of the first replay (warm-up).
    Where no program passed, ``mask_us_before_failures`` has the statistics of the masks made
    before each program's failure (one replay each).
    """
    row = {
        "grammar": seed.name,
        "tokenizer": tok.name,
        "engine": engine,
        "programs": len(inputs),
        "tokens": sum(len(t) for _, t, _ in inputs),
    }
    try:
        build = build_engine(engine, seed.case(), tok, compile_timeout_s, trace=False, cold_on_disk=False)
    except NotApplicable as e:
        return dict(row, status="n/a", reason=str(e))
    except Exception as e:  # noqa: BLE001 - one engine failing to compile must not hide the others' rows
        return dict(row, status="FAIL", reason=f"compile: {type(e).__name__}: {' '.join(str(e).split())}")
    row.update(compile_cold_s=build.cold_s, compile_cached_s=build.cached_s, **build.extra)
    failures: dict[str, str] = {}
    mismatches: dict[str, set[int]] = {}
    masks, advances = [], []
    deadline = time.perf_counter() + budget_s
    replayed: set[str] = set()
    out_of_time = False
    masks_timed = 0
    failed_mask_ns: list[np.ndarray] = []
    for _ in range(repeat):
        mask_ns, advance_ns = [], []
        for name, tokens, expected in inputs:
            if name in failures:
                continue
            stepper = build.new_stepper()
            gc.collect()
            r = replay(stepper, tokens, tok.peer.eos_ids, expected, deadline)
            if r.cut:
                out_of_time = True
                if not masks and len(r.mask_ns):
                    replayed.add(name)
                    mask_ns.append(r.mask_ns)
                    advance_ns.append(r.advance_ns)
                break
            replayed.add(name)
            if r.failure:
                failures[name] = r.failure
                failed_mask_ns.append(r.mask_ns)
                continue
            if r.eos_mismatches:
                mismatches.setdefault(name, set()).update(r.eos_mismatches)
            mask_ns.append(r.mask_ns)
            advance_ns.append(r.advance_ns)
        if out_of_time and masks:
            break  # a replay cut short only counts when it is the first
        if mask_ns:
            masks_timed += sum(len(m) for m in mask_ns)
            masks.append(step_stats(np.concatenate(mask_ns), ("mean", "p50", "p99", "max")))
            advances.append(step_stats(np.concatenate(advance_ns), ("mean", "p50", "p99")))
        if out_of_time:
            break
    row["status"] = "FAIL" if failures else "ok"
    row["replays"] = len(masks)
    row["programs_replayed"] = len(replayed)
    row["masks_timed"] = masks_timed
    row["out_of_time"] = out_of_time
    if masks:
        row["first_replay_mask_max_us"] = masks[0]["max"]
    elif failed_mask_ns and sum(len(m) for m in failed_mask_ns):
        # No program passed: the masks made before each failure, so that the row still shows a speed.
        row["mask_us_before_failures"] = step_stats(np.concatenate(failed_mask_ns), ("mean", "p50", "p99", "max"))
        row["masks_timed"] = sum(len(m) for m in failed_mask_ns)
    row["failures"] = failures
    row["programs_ok"] = len(inputs) - len(failures)
    row["eos_mismatches"] = {k: sorted(v) for k, v in mismatches.items()}
    if masks:
        row.update(mask_us=median_stats(masks), advance_us=median_stats(advances))
    return row


def run_seeds(
    grammars: list[str],
    toks: list[BenchTokenizer],
    engines: list[str],
    repeat: int,
    programs: int | None = None,
    log: Callable[[str], object] = print,
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
    budget_s: float = DEFAULT_REPLAY_BUDGET_S,
) -> list[dict]:
    """Every (grammar, tokenizer, engine) row, grammars loaded with their first ``programs`` programs."""
    rows = []
    for name in grammars:
        seed = load_seed_grammar(name, programs)
        for tok in toks:
            inputs = program_inputs(seed, tok)
            for engine in engines:
                log(f"{name} / {tok.name} / {engine}: {len(inputs)} programs ...")
                rows.append(run_seed_engine(engine, seed, tok, inputs, repeat, compile_timeout_s, budget_s))
                log(f"  {_brief(rows[-1])}")
    return rows


def _brief(row: dict) -> str:
    if "compile_cold_s" not in row:
        return f"{row['status']}: {row.get('reason', '')}"
    mask = row.get("mask_us", {})
    return (
        f"{row['status']}: cold {row['compile_cold_s']:.2f} s, mask p50 {mask.get('p50', float('nan')):.1f} µs"
        + (f", failures {row['failures']}" if row.get("failures") else "")
    )


# ---- reporting ------------------------------------------------------------------------------------


def _f(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _checks(row: dict) -> str:
    if row["status"] == "n/a":
        return "n/a"
    if "compile_cold_s" not in row:
        return "FAIL (compile)"
    parts = []
    if row.get("out_of_time"):
        parts.append(
            f"out of time: {row['masks_timed']} masks, {row['programs_replayed']}/{row['programs']} programs, "
            f"{row['replays']} replays"
        )
    if row["failures"]:
        parts.append(f"{len(row['failures'])}/{row['programs']} programs fail")
    if "mask_us_before_failures" in row:
        parts.append(f"masks: the {row['masks_timed']} made before the failures")
    if row["eos_mismatches"]:
        parts.append(f"EOS differs in {len(row['eos_mismatches'])} programs")
    return "; ".join(parts) or "ok"


def render_markdown(rows: list[dict], env: dict) -> str:
    """The measured table, the side-by-side table with the published figures, and the notes."""
    lines = [
        (f"Measured {env['date']} on {env['cpu']}, Python {env['python']}, one thread, medians of "
        f"{env['repeat']} replays of every program (fewer where a row's time budget of {env.get('budget_s')} s ran "
        f"out); versions: {env.get('versions', '')}. Mask and advance times in µs, over the masks of all "
        "programs of the grammar (one per token plus the final EOS mask)."),
        "",
        ("| grammar | tokenizer | engine | programs | tokens | compile cold (s) | compile cached (s) "
        "| mask mean | mask p50 | mask p99 | mask max | 1st replay max | advance p50 | compiled size (MiB) | checks |"),
        "|" + "---|" * 15,
    ]
    notes = []
    for r in rows:
        where = f"{r['grammar']} / {r['tokenizer']} / {r['engine']}"
        if r.get("reason"):
            notes.append(f"- {where}: {r['status']}: {r['reason']}")
        for program, failure in r.get("failures", {}).items():
            notes.append(f"- {where}: {program}: {failure}")
        for program, steps in r.get("eos_mismatches", {}).items():
            notes.append(f"- {where}: {program}: EOS allowed iff Lark takes the prefix fails at steps {steps}")
        m, a = r.get("mask_us") or r.get("mask_us_before_failures", {}), r.get("advance_us", {})
        size = r.get("memory", {}).get("table_bytes")
        cells = [
            r["grammar"],
            r["tokenizer"],
            r["engine"],
            str(r["programs"]),
            str(r["tokens"]),
            _f(r.get("compile_cold_s"), ".3f"),
            _f(r.get("compile_cached_s"), ".4f"),
            *(_f(m.get(k), ".1f") for k in ("mean", "p50", "p99", "max")),
            _f(r.get("first_replay_mask_max_us"), ".1f"),
            _f(a.get("p50"), ".1f"),
            _f(size / 2**20 if size else None, ".1f"),
            _checks(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    parts = [
        *lines,
        "",
        ("Beside GreatGramma's Table 1 (published figures, measured on their machine; masks in ms per token; "
        "`*`: that row's checks are not all ok or it ran out of its time budget, see the table above):"),
        "",
    ]
    parts += side_by_side(rows)
    parts += ["", SYNCODE_PAPER_NOTE]
    if notes:
        parts += ["", "Notes:", "", *notes]
    return "\n".join(parts) + "\n"


def side_by_side(rows: list[dict]) -> list[str]:
    """One line per (tokenizer, grammar) measured: our cold compile and mean mask time per engine,
    the paper's GreatGramma, SynCode and Outlines figures."""
    by = {(r["tokenizer"], r["grammar"], r["engine"]): r for r in rows}
    out = [
        ("| tokenizer (paper's) | grammar | grammask cold (s) | llguidance cold (s) | xgrammar cold (s) "
        "| GreatGramma offline (s) | SynCode offline (s) | Outlines offline (s) "
        "| grammask mask mean / p50 (ms) | llguidance mask mean (ms) | xgrammar mask mean (ms) "
        "| GreatGramma online (ms) | SynCode online (ms) | Outlines online (ms) |"),
        "|" + "---|" * 14,
    ]
    seen = []
    for r in rows:
        key = (r["tokenizer"], r["grammar"])
        if key not in seen:
            seen.append(key)
    for tok, grammar in seen:
        paper = PUBLISHED.get((tok, grammar), {})

        def cold(engine: str, tok: str = tok, grammar: str = grammar) -> str:
            r = by.get((tok, grammar, engine))
            return _cell(r, lambda r: _f(r.get("compile_cold_s"), ".3f"))

        def mask(engine: str, tok: str = tok, grammar: str = grammar) -> str:
            r = by.get((tok, grammar, engine))
            def stats(r: dict) -> dict:
                return r.get("mask_us") or r["mask_us_before_failures"]

            if engine == "grammask":
                return _cell(r, lambda r: f"{stats(r)['mean'] / 1000:.3f} / {stats(r)['p50'] / 1000:.3f}")
            return _cell(r, lambda r: f"{stats(r)['mean'] / 1000:.3f}")

        syncode_ms = paper.get("syncode_ms")
        cells = [
            f"{tok} ({PAPER_TOKENIZER.get(tok, '?')})",
            grammar,
            cold("grammask"),
            cold("llguidance"),
            cold("xgrammar"),
            _f(paper.get("greatgramma_s"), ".2f"),
            _f(paper.get("syncode_s"), ".2f"),
            _f(paper.get("outlines_s"), ".2f"),
            mask("grammask"),
            mask("llguidance"),
            mask("xgrammar"),
            _f(paper.get("greatgramma_ms"), ".2f"),
            "X (masked valid tokens)" if paper and syncode_ms is None else _f(syncode_ms, ".2f"),
            _f(paper.get("outlines_ms"), ".2f"),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _cell(row: dict | None, text: Callable[[dict], str]) -> str:
    """A row's value, or what stands in for it: not run, n/a, FAIL; ``*`` marks failed programs."""
    if row is None:
        return "not run"
    if row["status"] == "n/a":
        return "n/a"
    if "compile_cold_s" not in row:
        return "FAIL"
    try:
        value = text(row)
    except KeyError:
        return "FAIL"
    return value + ("*" if row["status"] != "ok" or row.get("eos_mismatches") or row.get("out_of_time") else "")


def versions() -> str:
    """The engines' versions, as text."""
    from importlib.metadata import PackageNotFoundError, version

    out = [f"grammask {gm.__version__}"]
    for name in ("llguidance", "xgrammar", "lark"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} not installed")
    return ", ".join(out)


def write_results(out: Path, rows: list[dict], env: dict) -> Path:
    """The markdown to ``out``, everything (with the published figures) as JSON beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path = out.with_suffix(".json")
    published = [{"tokenizer": t, "grammar": g, **v} for (t, g), v in PUBLISHED.items()]
    data = {"environment": env, "rows": rows, "published_greatgramma_table1": published}
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    out.write_text(render_markdown(rows, env), encoding="utf-8")
    return json_path


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark as the command line asks; exit 1 when a grammask row is not ok, 2 when it cannot run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grammars", type=lambda s: _names(s, SEED_GRAMMARS, "grammar"), default=list(SEED_GRAMMARS))
    parser.add_argument("--tokenizers", type=lambda s: _names(s, TOKENIZERS, "tokenizer"), default=None)
    parser.add_argument("--engines", type=lambda s: _names(s, ENGINES, "engine"), default=list(ENGINES))
    parser.add_argument("--programs", type=int, default=None, help="the first N programs of each grammar")
    parser.add_argument("--repeat", type=int, default=3, help="replays of every program per engine; medians reported")
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke run: {QUICK_TOKENIZER} only, {QUICK_PROGRAMS} programs, 1 replay"
    )
    parser.add_argument("--out", type=Path, default=None, help="markdown (default results/seeds.md; --quick: none)")
    parser.add_argument("--compile-timeout", type=float, default=DEFAULT_COMPILE_TIMEOUT_S)
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_REPLAY_BUDGET_S,
        help="seconds of replays per row; no replay starts after that (default %(default)s)",
    )
    parser.add_argument("--render", type=Path, help="only write the markdown (--out) again from this results JSON")
    args = parser.parse_args(argv)
    if args.render:
        data = json.loads(args.render.read_text(encoding="utf-8"))
        out = args.out or args.render.with_suffix(".md")
        out.write_text(render_markdown(data["rows"], data["environment"]), encoding="utf-8")
        print(f"wrote {out}")
        return 0
    if args.quick:
        args.tokenizers = args.tokenizers or [QUICK_TOKENIZER]
        args.programs = args.programs or QUICK_PROGRAMS
        args.repeat = 1
    elif args.out is None:
        args.out = BENCH_DIR / "results" / "seeds.md"
    tokenizer_names = args.tokenizers or list(TOKENIZERS)
    if args.repeat < 1 or (args.programs is not None and args.programs < 1):
        parser.error("--repeat and --programs must be at least 1")
    try:
        toks = [load_tokenizer(n) for n in tokenizer_names]
        rows = run_seeds(
            args.grammars,
            toks,
            args.engines,
            args.repeat,
            args.programs,
            log=partial(print, file=sys.stderr),
            compile_timeout_s=args.compile_timeout,
            budget_s=args.budget,
        )
    except (BenchError, gm.GrammaskError) as e:
        print(f"bench_seeds: error: {e}", file=sys.stderr)
        return 2
    env = dict(environment(args.repeat), versions=versions(), budget_s=args.budget)
    print(render_markdown(rows, env))
    if args.out:
        json_path = write_results(args.out, rows, env)
        print(f"wrote {args.out} and {json_path}")
    bad = [r for r in rows if r["engine"] == "grammask" and (r["status"] != "ok" or r.get("eos_mismatches"))]
    for r in bad:
        print(f"grammask not ok: {r['grammar']}/{r['tokenizer']}: {_checks(r)} {r.get('reason', '')}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
