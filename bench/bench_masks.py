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

from threads import THREAD_VARS

if __name__ == "__main__":
    # One thread everywhere; these are read when numpy, numba, llguidance and torch load.
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import gc
from collections.abc import Callable
from functools import partial
from pathlib import Path

from cases import (
    CASES,
    BenchTokenizer,
    Case,
    load_case,
    load_tokenizer,
    sentence_prefixes,
    token_bytes,
)
from harness import (
    DEFAULT_COMPILE_TIMEOUT_S,
    BenchError,
    Build,
    NotApplicable,
    build_grammask,
    median_stats,
    replay,
    step_stats,
)
from peers import build_llguidance, build_xgrammar
from report import (
    add_ratios,
    bar_checks,
    environment,
    grammask_check_failures,
    print_bar_check,
    render_markdown,
    write_results,
)

import grammask as gm

BENCH_DIR = Path(__file__).resolve().parent
ENGINES = ("grammask", "llguidance", "xgrammar")
TOKENIZERS = ("llama3", "llama2")


def build_engine(
    engine: str,
    case: Case,
    tok: BenchTokenizer,
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
    **grammask_options,
) -> Build:
    """Compile ``case`` for ``tok`` with ``engine``; :class:`NotApplicable` when it cannot take the case.

    ``grammask_options`` go to :func:`~harness.build_grammask` (``trace``, ``cold_on_disk``).
    """
    if engine == "grammask":
        return build_grammask(
            case.lark_text, case.name, tok.vocab, tok.path, compile_timeout_s, postlex=case.postlex, **grammask_options
        )
    if engine == "llguidance":
        return build_llguidance(case.lark_text, tok.peer)
    if engine == "xgrammar":
        if case.xgrammar is None:
            raise NotApplicable(case.xgrammar_na)
        return build_xgrammar(case.xgrammar, case.schema, tok.peer, case.lark_text)
    raise BenchError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


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
        masks.append(step_stats(r.mask_ns, ("mean", "p50", "p99", "max")))
        advances.append(step_stats(r.advance_ns, ("mean", "p50", "p99")))
    row.update(mask_us=median_stats(masks), advance_us=median_stats(advances), eos_mismatches=sorted(mismatches))
    return row


def run_matrix(
    cases: list[Case],
    toks: list[BenchTokenizer],
    engines: list[str],
    repeat: int,
    log: Callable[[str], object] = print,
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


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark as the command line asks; the exit code says how grammask's checks went."""
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
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        cases = [load_case(n) for n in args.cases]
        toks = [load_tokenizer(n) for n in args.tokenizers]
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
