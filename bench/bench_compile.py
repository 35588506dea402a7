"""Cold compile time per grammar (issue 13's and issue 14's bar: <= 20 s on Llama-3, one thread).

Each grammar is compiled once in a fresh one-thread process with a fresh ``Compiler(vocab, cache=False)``:
the time includes everything a first compile does (the vocabulary's one-time work too). Grammars: SynCode's
ten and Lark's python.lark and lark.lark under both of Lark's lexers, and the built-in Python and Go. Wall
and CPU seconds are both reported: on a shared box the CPU seconds are the steadier figure.

    python bench/bench_compile.py [--tokenizer llama3] [--grammars syncode-go,builtin-python] [--lexers basic]

Results go to ``results/compile_<tokenizer>.md`` and ``.json`` (``--out``); the exit code is 1 when a grammar
fails to compile or takes longer than ``--bar`` seconds of CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cases import (
    REAL_GRAMMARS,
    REAL_POSTLEX,
    REAL_START,
    load_tokenizer,
    real_grammar_source,
)
from harness import BenchError, compile_in_subprocess
from report import environment

RESULTS = Path(__file__).resolve().parent / "results"
BUILTINS = ("builtin-python", "builtin-go")
LEXERS = ("basic", "contextual")


def measure(name: str, lexer: str | None, tokenizer_json: str, timeout_s: float) -> dict:
    """One cold compile of grammar ``name`` (under ``lexer`` for a Lark grammar) as a results row."""
    row = {"grammar": name, "lexer": lexer or "-"}
    try:
        if name in BUILTINS:
            done = compile_in_subprocess("", name, tokenizer_json, None, False, timeout_s,
                                         builtin=name.removeprefix("builtin-"))
        else:
            done = compile_in_subprocess(real_grammar_source(name), name, tokenizer_json, None, False, timeout_s,
                                         REAL_POSTLEX.get(name), lexer=lexer, start=REAL_START.get(name, "start"))
    except BenchError as e:
        return row | {"error": str(e)}
    return row | {"wall_s": round(done["seconds"], 2), "cpu_s": round(done["cpu_seconds"], 2),
                  "table_mib": round(done["table_bytes"] / 2**20, 1)}


def markdown(rows: list[dict], header: str, bar: float) -> str:
    """The results table."""
    lines = [header, "", "| grammar | lexer | cold wall (s) | cold CPU (s) | tables (MiB) | CPU <= bar |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['grammar']} | {r['lexer']} | error: {r['error']} |  |  |  |")
        else:
            ok = "yes" if r["cpu_s"] <= bar else "NO"
            lines.append(f"| {r['grammar']} | {r['lexer']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['table_mib']} | {ok} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the compiles the command line asks for; returns the exit code."""
    names_all = REAL_GRAMMARS + BUILTINS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--grammars", default=",".join(names_all), help="comma-separated, from: " + ", ".join(names_all))
    ap.add_argument("--lexers", default=",".join(LEXERS), help="Lark lexers to compile Lark grammars under")
    ap.add_argument("--bar", type=float, default=20.0, help="seconds of CPU a cold compile may take (default 20)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a compile is stopped")
    ap.add_argument("--out", type=Path, help="Markdown (default results/compile_<tokenizer>.md); the JSON beside it")
    args = ap.parse_args(argv)
    names = [g for g in args.grammars.split(",") if g]
    lexers = [x for x in args.lexers.split(",") if x]
    unknown = [g for g in names if g not in names_all] + [x for x in lexers if x not in LEXERS]
    if unknown:
        ap.error(f"unknown grammar(s) or lexer(s) {', '.join(unknown)}")
    tok = load_tokenizer(args.tokenizer)
    rows = []
    for name in names:
        for lexer in [None] if name in BUILTINS else lexers:
            rows.append(measure(name, lexer, tok.path, args.timeout))
            print(json.dumps(rows[-1]), flush=True)
    env = environment(1)
    header = (f"Cold compiles (fresh process, `Compiler(vocab, cache=False)`), tokenizer {args.tokenizer}, measured "
              f"{env['date']} on {env['cpu']}, Python {env['python']}, one thread, load average "
              f"{os.getloadavg()[0]:.1f} at the end (wall times are upper bounds on a shared box).")
    out = args.out or RESULTS / f"compile_{args.tokenizer}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(rows, header, args.bar), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps({"header": header, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return int(any("error" in r or r["cpu_s"] > args.bar for r in rows))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
