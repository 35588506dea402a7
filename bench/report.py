"""What the benchmarks report: grammask / peer ratios, the core-engine issue's Speed bar checks,
failed grammask checks, the environment, the Markdown tables and the results files."""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from cases import CASES
from threads import THREAD_VARS

BAR_TOKENIZER = "llama3"


def add_ratios(rows: list[dict]) -> None:
    """Put grammask/peer ratios of mask p50 and p99 on each peer row of the same case and tokenizer."""
    ours = {(r["case"], r["tokenizer"]): r for r in rows if r["engine"] == "grammask" and "mask_us" in r}
    for r in rows:
        base = ours.get((r["case"], r["tokenizer"]))
        if r["engine"] != "grammask" and base and "mask_us" in r:
            r["ratio"] = {k: base["mask_us"][k] / r["mask_us"][k] for k in ("p50", "p99")}


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


def table_head(title: str, command: str, columns: list[str]) -> list[str]:
    """The first lines of a one-thread bench's Markdown results: its title, when, where and how it ran (``command``),
    and the header of its table."""
    env = environment(1)
    return [f"# {title}", "", f"{env['date']}, {env['cpu']}, Python {env['python']}; `{command}`", "",
            "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]


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


def print_bar_check(bars: list[dict], out: Callable[[str], object] = print) -> None:
    """The bar check as plain lines: PASS / FAIL / NOT RUN, the bar, what was measured."""
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


def summary_main(
    run: Callable[[str, int], dict], description: str, tokenizer: str, limit: int, argv: list[str] | None = None
) -> int:
    """The command line of the regex and schema benchmarks: ``--tokenizer``, ``--limit``, ``--json``.

    Runs ``run(tokenizer, limit)``, prints its summary as JSON and writes it to ``--json`` if given.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tokenizer", default=tokenizer)
    parser.add_argument("--limit", type=int, default=limit)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    summary = run(args.tokenizer, args.limit)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0
