"""CPU per canonical attack run: the same runs (cases, choosers, budgets, seeds) as ``bench_canonical_attack.py``
draws them, each timed with ``time.process_time``, and the token ids each run produced.

Run it in two checkouts (copy this file into the other one) one after the other, then compare: the runs must
produce the same tokens (the masks and verdicts they met are unchanged) and the ratio of CPU is the speed-up.

    python bench/bench_canonical_speed.py --runs 24 --schemas 12 --out /tmp/new.json
    python bench/bench_canonical_speed.py --runs 8 --schemas 8 --budgeted --out /tmp/new_budgeted.json
    python bench/bench_canonical_speed.py --compare /tmp/old.json /tmp/new.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import bench_canonical_attack as attack

from grammask.errors import BudgetError


def timed_runs(tokenizer: str, kinds: str, schemas: int, regexes: int, runs: int, seed: int, cap: int,
               budgeted: bool) -> list[dict]:
    """``runs`` attack runs over the cases in turn, every one budgeted with ``budgeted`` (budgets drawn as the attack
    bench draws them); per run its case, chooser, budget, outcome, token ids and CPU seconds."""
    cases, _ = attack.load_cases([tokenizer], kinds.split(","), schemas, regexes, lambda _: None)
    rng = random.Random(seed)
    choosers = attack.DEFAULT_CHOOSERS
    weights = [attack.CHOOSER_WEIGHTS[c] for c in choosers]
    rows = []
    for k in range(runs):
        case = cases[k % len(cases)]
        chooser = rng.choices(choosers, weights)[0]
        budget = None
        if budgeted:
            least = case.compiled.matcher().min_tokens_to_finish()
            budget = rng.randint(max(1, least), max(least, cap) + 8)
        full = rng.random() < 0.05
        run_rng = random.Random(rng.getrandbits(64))
        began = time.process_time()
        try:
            run = attack.Run(case, chooser, run_rng, budget, full)
            outcome, ids = run.run(cap, 200).outcome, run.tokens
        except BudgetError:
            outcome, ids = "refused", []
        cpu = time.process_time() - began
        rows.append({"case": case.name, "chooser": chooser, "budget": budget, "full_mask": full, "outcome": outcome,
                     "ids": ids, "cpu": cpu})
        print(f"{k} {case.name} {chooser} budget={budget} {outcome} {len(ids)} tokens {cpu:.2f} s", flush=True)
    return rows


def compare(old: Sequence[dict], new: Sequence[dict]) -> str:
    """How many runs produced the same tokens and outcome, and the CPU of each side (total, median, ratios)."""
    same = sum(a["ids"] == b["ids"] and a["outcome"] == b["outcome"] for a, b in zip(old, new))
    lines = [f"{same}/{len(old)} runs with the same token ids and outcome"]
    for a, b in zip(old, new):
        if a["ids"] != b["ids"] or a["outcome"] != b["outcome"]:
            lines.append(f"differs: {a['case']} {a['chooser']} budget={a['budget']}: {a['outcome']} {a['ids'][:30]} "
                         f"-> {b['outcome']} {b['ids'][:30]}")
    ca, cb = [a["cpu"] for a in old], [b["cpu"] for b in new]
    lines.append(f"old: total {sum(ca):.1f} s, median {statistics.median(ca):.2f} s per run; "
                 f"new: total {sum(cb):.1f} s, median {statistics.median(cb):.2f} s per run; "
                 f"ratio {sum(ca) / sum(cb):.2f}x total, {statistics.median(ca) / statistics.median(cb):.2f}x median")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", default="llama3")
    p.add_argument("--cases", default="jme", help="json,c,jme,regex")
    p.add_argument("--schemas", type=int, default=12)
    p.add_argument("--regexes", type=int, default=12)
    p.add_argument("--runs", type=int, default=24)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--cap", type=int, default=12)
    p.add_argument("--budgeted", action="store_true", help="every run under max_tokens")
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = p.parse_args(argv)
    if args.compare:
        old, new = (json.loads(path.read_text(encoding="utf-8")) for path in args.compare)
        print(compare(old, new))
        return 0
    rows = timed_runs(args.tokenizer, args.cases, args.schemas, args.regexes, args.runs, args.seed, args.cap,
                      args.budgeted)
    cpu = [r["cpu"] for r in rows]
    print(f"total {sum(cpu):.1f} s CPU, median {statistics.median(cpu):.2f} s per run")
    if args.out:
        args.out.write_text(json.dumps(rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
