"""No hangs: every MaskBench schema (JSONSchemaBench) compiles in <= 2 s or is refused with a clear error in <= 2 s.

Each schema of a sample (fixed seed) is built (``Grammar.from_json_schema``, strict) and compiled
cold for the tokenizer in one worker process (a pool of 1), the front end with a timeout of the
fast limit less a 0.1 s margin and the compile with what is left of it; the worker is killed and restarted where a schema runs past the wall limit.
Outcomes: ``compiled`` and ``refused`` (a grammask error: unsupported keyword, size bound or
compile timeout) within the fast limit, ``slow`` (either, later), ``killed`` (past the wall limit),
``crashed`` (an exception that is no grammask error, or a dead worker).

    python bench/bench_schema_hangs.py REPO_GIT_DIR [--sample 300] [--seed 0] [--tokenizer llama3]
        [--fast-s 2] [--wall-s 10] [--json OUT] [--md OUT] [--rows ROWS.jsonl] [--names NAMES.txt]

``--sample 0`` takes every schema; ``--names`` only the schemas a file names (one file name per line, e.g. the
ones an earlier run found slow, to measure them again). ``--rows`` appends each schema's row to a JSON-lines file as it is
measured and skips the schemas already there, so a run of all 11,306 schemas can stop and go on.

``REPO_GIT_DIR`` is a git directory of guidance-ai/jsonschemabench (read with ``git show``,
no work tree needed); the schemas are ``maskbench/data/*.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from threads import THREAD_VARS

FAST_S = 2.0
MARGIN_S = 0.1
"""The compile timeout is the fast limit less this: a deadline is noticed between steps of a loop."""
_WARM_SCHEMA = {"anyOf": [{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
                          {"type": "array", "items": {"type": "string", "maxLength": 3}}]}
OUTCOMES = ("compiled", "refused", "slow", "killed", "crashed")


def schema_names(repo: str) -> list[str]:
    """The MaskBench schema files of the repository, sorted."""
    out = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "HEAD", "--name-only", "maskbench/data"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(n for n in out.splitlines() if n.endswith(".json"))


def read_schema(repo: str, name: str) -> object:
    """The ``schema`` field of one MaskBench file."""
    text = subprocess.run(["git", "-C", repo, "show", f"HEAD:{name}"], capture_output=True, text=True, check=True).stdout
    return json.loads(text)["schema"]


def worker(conn, tokenizer: str, fast_s: float) -> None:
    """Compile schemas sent over ``conn`` one by one; send back (outcome, seconds, error text)."""
    import warnings

    from cases import load_tokenizer

    import grammask as gm

    warnings.simplefilter("ignore")
    compiler = gm.Compiler(load_tokenizer(tokenizer).vocab, cache=False, max_memory=0)
    for warm in (gm.Grammar.builtin("json"), gm.Grammar.from_json_schema(_WARM_SCHEMA)):  # numba kernels
        compiler.compile(warm)
    conn.send("ready")
    while True:
        schema = conn.recv()
        start = time.perf_counter()
        try:
            grammar = gm.Grammar.from_json_schema(schema, timeout=fast_s - MARGIN_S)
            compiler.compile(grammar, timeout=max(fast_s - MARGIN_S - (time.perf_counter() - start), 0.05))
            result = ("compiled", "")
        except gm.GrammaskError as e:
            result = ("refused", f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - a crash is what this benchmark counts
            result = ("crashed", f"{type(e).__name__}: {e}")
        conn.send((*result, time.perf_counter() - start))


class Pool1:
    """One worker process, restarted after it is killed or dies."""

    def __init__(self, tokenizer: str, fast_s: float):
        self.args = (tokenizer, fast_s)
        self.proc = None
        self.conn = None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker, args=(child, *self.args), daemon=True)
        self.proc.start()
        if not self.conn.poll(300) or self.conn.recv() != "ready":
            raise RuntimeError("the worker did not start")

    def run(self, schema: object, wall_s: float) -> tuple[str, str, float]:
        """(outcome, error text, seconds) of one schema."""
        if self.proc is None or not self.proc.is_alive():
            self._start()
        start = time.perf_counter()
        self.conn.send(schema)
        try:
            if self.conn.poll(wall_s):
                outcome, error, seconds = self.conn.recv()
                return outcome, error, seconds
            reason = ("killed", f"still running after {wall_s:g} s")
        except EOFError:
            reason = ("crashed", f"the worker died (exit code {self.proc.exitcode})")
        self.proc.kill()
        self.proc.join()
        self.proc = None
        return reason[0], reason[1], time.perf_counter() - start

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()


def classify(outcome: str, seconds: float, fast_s: float) -> str:
    """The reported outcome: a compile or refusal past ``fast_s`` is ``slow``."""
    return "slow" if outcome in ("compiled", "refused") and seconds > fast_s else outcome


def summarize(rows: list[dict], args: argparse.Namespace, total: int) -> dict:
    """Counts per outcome, time percentiles, the refusal reasons and the slow schemas."""
    counts = Counter(r["outcome"] for r in rows)
    times = sorted(r["seconds"] for r in rows)

    def pct(p: float) -> float:
        return round(times[min(len(times) - 1, int(p * len(times)))], 3) if times else 0.0

    reasons = Counter(_reason(r["error"]) for r in rows if r["outcome"] == "refused")
    return {
        "schemas_in_maskbench": total, "sample": len(rows), "seed": args.seed, "tokenizer": args.tokenizer,
        "fast_s": args.fast_s, "wall_s": args.wall_s,
        "counts": {o: counts.get(o, 0) for o in OUTCOMES},
        "seconds": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": times[-1] if times else 0.0},
        "refusals": dict(reasons.most_common(15)),
        "not_fast": [r for r in rows if r["outcome"] in ("slow", "killed", "crashed")],
    }


def _reason(error: str) -> str:
    """An error's class and what it names: the phase of a timeout, else the first quoted word (the keyword)."""
    kind, _, text = error.partition(": ")
    if "stopped in " in text:
        return f"{kind} in {text.split('stopped in ')[1].rstrip(')')}"
    quoted = text.split("'")
    return f"{kind}: {quoted[1]}" if len(quoted) >= 3 else kind


def markdown(summary: dict) -> str:
    """The summary as a short Markdown report."""
    lines = [
        (f"# MaskBench hangs: {summary['sample']} of {summary['schemas_in_maskbench']} schemas "
         f"(seed {summary['seed']}, {summary['tokenizer']}, fast <= {summary['fast_s']:g} s, wall {summary['wall_s']:g} s)"),
        "",
        "| outcome | schemas |", "| --- | --- |",
        *(f"| {o} | {n} |" for o, n in summary["counts"].items()),
        "",
        "Seconds per schema (front end + compile): " + ", ".join(f"{k} {v}" for k, v in summary["seconds"].items()),
        *([f"Not in the repository (not counted): {', '.join(summary['unreadable'])}"] if summary.get("unreadable") else []),
        "", "Refusals by error and keyword:", "",
        *(f"- {n} x {why}" for why, n in summary["refusals"].items()),
        "", "Not fast:", "",
        *(f"- {r['name']}: {r['outcome']} {r['seconds']:.2f} s {r['error'][:160]}" for r in summary["not_fast"]),
    ]
    return "\n".join(lines) + "\n"


def _read_rows(path: str | None) -> list[dict]:
    """The rows already measured in a ``--rows`` file (none when it is absent)."""
    if not path or not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo")
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", default="llama3")
    parser.add_argument("--fast-s", type=float, default=FAST_S)
    parser.add_argument("--wall-s", type=float, default=10.0)
    parser.add_argument("--json")
    parser.add_argument("--md")
    parser.add_argument("--rows", help="JSON-lines file of measured rows: appended to, and its schemas skipped")
    parser.add_argument("--names", help="file of schema file names, one per line: only these are measured")
    args = parser.parse_args()
    missing = [v for v in THREAD_VARS if v not in os.environ]
    if missing:
        print(f"note: {', '.join(missing)} unset; the worker may use several threads", file=sys.stderr)
    names = schema_names(args.repo)
    if args.names:
        named = set(Path(args.names).read_text().split())
        sample = [name for name in names if Path(name).name in named]
        if len(sample) != len(named):
            parser.error(f"{len(named) - len(sample)} names of {args.names} are not MaskBench schemas")
    else:
        count = len(names) if args.sample <= 0 else min(args.sample, len(names))
        sample = sorted(random.Random(args.seed).sample(names, count))
    rows = _read_rows(args.rows)
    done = {r["name"] for r in rows}
    pool = Pool1(args.tokenizer, args.fast_s)
    unreadable = []  # a snapshot may lack its largest files
    try:
        for i, name in enumerate(sample):
            if Path(name).name in done:
                continue
            try:
                schema = read_schema(args.repo, name)
            except subprocess.CalledProcessError:
                unreadable.append(Path(name).name)
                print(f"[{i + 1}/{len(sample)}] unreadable {Path(name).name}: not in the repository", flush=True)
                continue
            outcome, error, seconds = pool.run(schema, args.wall_s)
            rows.append({"name": Path(name).name, "outcome": classify(outcome, seconds, args.fast_s),
                         "seconds": round(seconds, 3), "error": error[:300]})
            if args.rows:
                with open(args.rows, "a") as f:
                    f.write(json.dumps(rows[-1]) + "\n")
            print(f"[{i + 1}/{len(sample)}] {rows[-1]['outcome']:8} {seconds:6.2f}s {Path(name).name} {error[:100]}",
                  flush=True)
    finally:
        pool.close()
    wanted = {Path(name).name for name in sample}
    rows = [r for r in rows if r["name"] in wanted]
    summary = {**summarize(rows, args, len(names)), "unreadable": unreadable}
    if args.json:
        Path(args.json).write_text(json.dumps({**summary, "rows": rows}, indent=1) + "\n")
    text = markdown(summary)
    if args.md:
        Path(args.md).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
