"""Where one thread's batched fill goes, and what that leaves a second thread to gain (Amdahl).

On the batch benchmark's states and conditions (fresh matcher copies, a 50 ms pause before each call,
128 rows, one call), ``fill_masks(threads=1)`` is cut at its phases: before the loop (argument checks),
the loop (each matcher's pair looked up, sorting the matchers, planning each row in Python), the
kernel, and after (rows of deep stacks, budgets). With ``threads=2`` the loop overlaps the helper
thread's filling, so only "before" and "after" stay serial: the printed bound is
``total / (serial + (loop + kernel) / 2)`` (medians over the calls of the share and the bound); the helper
thread's wake-up after the pause (a seat opened to a helper taking it, measured first) is time it cannot
help (the call wakes it first, but it has no rows before the loop), so the second bound is
``total / (serial + (loop + kernel + wake) / 2)``.

    python bench/profile_batch_phases.py [--cases json,schema,c] [--repeat 11]
"""

from __future__ import annotations

import os
import sys

from threads import THREAD_VARS

if __name__ == "__main__":
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import random
import time

import numpy as np
from bench_batch import PAUSE_S, grammask_engine, load_batch_case, ready_bitmask
from cases import load_tokenizer

from grammask import batch, batch_crew


def phases(engine, n_logits: int, repeat: int, wake_ms: float) -> dict[str, float]:
    """Median milliseconds of each phase of ``fill_masks(threads=1)``, and the bounds for 2 threads (a helper that
    wakes ``wake_ms`` after the call begins)."""
    marks: dict[str, float] = {}

    def timed(owner, name: str, key: str) -> None:
        inner = getattr(owner, name)

        def wrapper(*args):
            marks.setdefault(key + "+", time.perf_counter())
            out = inner(*args)
            marks[key + "-"] = time.perf_counter()
            return out

        setattr(owner, name, wrapper)

    saved = (batch._plan, batch._Group.fill, batch.fill_group)
    timed(batch, "_plan", "plan")
    timed(batch._Group, "fill", "fill")
    timed(batch, "fill_group", "work")
    rows = []
    try:
        for _ in range(repeat):
            ms = [m.fork() for m in engine.matchers]
            bitmask = ready_bitmask(len(ms), n_logits)
            marks.clear()
            time.sleep(PAUSE_S)
            t0 = time.perf_counter()
            batch.fill_masks(ms, bitmask, threads=1)
            t1 = time.perf_counter()
            rows.append((marks["plan+"] - t0, marks["work+"] - marks["plan+"], marks["work-"] - marks["work+"],
                         t1 - marks["work-"], t1 - t0))
    finally:
        batch._plan, batch._Group.fill, batch.fill_group = saved
    times = np.array(rows) * 1e3
    serial, overlapped = times[:, 0] + times[:, 3], times[:, 1] + times[:, 2]
    before, loop, kernel, after, total = np.median(times, axis=0)
    return {"before": before, "loop": loop, "kernel": kernel, "after": after, "total": total,
            "serial": float(np.median(serial / times[:, 4])), "bound": float(np.median(times[:, 4] / (serial + overlapped / 2))),
            "woken": float(np.median(times[:, 4] / (serial + (overlapped + wake_ms) / 2)))}


def wake_up(repeat: int) -> np.ndarray:
    """Microseconds from a call opening a helper crew's seat to a helper taking it, each after the pause."""
    crew = batch_crew.Crew()
    out = []
    for k in range(repeat + 1):
        crew.begin(1, 1)  # (seats opened; the thread, started the first time, takes one at once)
        crew.close()
        time.sleep(PAUSE_S)
        t0 = time.perf_counter()
        crew._open()  # what beginning a call does
        while crew.mail[batch_crew._SEATS] > 0 and time.perf_counter() - t0 < 1:
            pass
        if k:  # the first call starts the thread
            out.append(time.perf_counter() - t0)
        crew.close()
    return np.array(out) * 1e6


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="llama3")
    parser.add_argument("--cases", default="json,schema,c")
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    lat = wake_up(args.repeat * 3)
    print(f"helper thread wake-up after {PAUSE_S * 1e3:.0f} ms idle: p50 {np.median(lat):.0f} us, "
          f"p90 {np.percentile(lat, 90):.0f} us")
    for name in args.cases.split(","):
        case = load_batch_case(name)
        tokens = tok.encode(case.document)
        rng = random.Random(0)
        cuts = [rng.randrange(1, len(tokens) + 1) for _ in range(args.rows)]
        p = phases(grammask_engine(case, tok.vocab, tokens, cuts), tok.vocab.n_logits, args.repeat,
                   float(np.median(lat)) / 1e3)
        print(f"{name}: before {p['before']:.3f} ms, loop {p['loop']:.3f}, kernel {p['kernel']:.3f}, after "
              f"{p['after']:.3f}, total {p['total']:.3f}; serial {p['serial']:.0%}, 2 threads at most {p['bound']:.2f}x, "
              f"{p['woken']:.2f}x with the helper's wake-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
