"""Where the time to a schema's first mask goes: CPU time (``time.process_time``) per phase, per schema.

For the schemas of ``bench_schema_latency.py`` (JSON-Mode-Eval, then the MaskBench sample; the same compiler
setup: one lazy compiler per vocabulary, no caches), each schema's first mask is timed as there, and split by
wrapping the phases: the schema front end (``Grammar.from_json_schema``), the lexer (of which the terminals'
automata, ``terminal_nfa``, their union, ``union_dfa``, the counted levels and Prod(q), ``producible``), the LALR(1)
tables, and the rest (walks, verdicts and masks of the start state, the matcher). CPU time, unlike wall time, hardly moves
with the load of a shared box. The garbage collector's pauses are counted per generation: a full collection
walks the whole process heap (numba's and lark's objects: tens of ms) and lands in whichever schema triggers it.

    python bench/profile_schema_phases.py [--sample 300] [--limit N] [--slowest 25]

Prints one line per schema of the slowest, then p50/p95 of the first mask and p95 without the GC pauses.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import importlib
import os
import sys
import time
import warnings

from threads import THREAD_VARS

for _var in THREAD_VARS:
    os.environ.setdefault(_var, "1")

import numpy as np
from bench_schema_latency import Grammask, schema_arguments, schemas
from cases import load_tokenizer

import grammask as gm

PHASES = (("grammask.mask_tables", "build_lexer", "lexer"), ("grammask.automata.lexer", "terminal_nfa", "terminals"),
          ("grammask.automata.lexer", "union_dfa", "union"), ("grammask.automata.lexer", "_with_counts", "counted"),
          ("grammask.automata.lexer", "producible", "prod"), ("grammask.mask_tables", "build_parse_tables", "parse"))
COLUMNS = ("first", "schema", *(p[2] for p in PHASES), "rest", "gc0", "gc1", "gc2")


def _timed(spent: collections.Counter, label: str, function):
    """``function``, its CPU time added to ``spent[label]`` (outermost calls only)."""
    depth = [0]

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        depth[0] += 1
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                spent[label] += time.process_time() - start
    return wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    schema_arguments(parser)
    parser.add_argument("--slowest", type=int, default=25)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    spent: collections.Counter = collections.Counter()
    for module, name, label in PHASES:
        owner = importlib.import_module(module)
        if hasattr(owner, name):  # older grammask (a baseline) may lack a phase: its column stays 0
            setattr(owner, name, _timed(spent, label, getattr(owner, name)))
    began = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.process_time()
        else:
            spent[f"gc{info['generation']}"] += time.process_time() - began[0]

    runner = Grammask(load_tokenizer(args.tokenizer).vocab, 60.0, fresh=False)
    gc.callbacks.append(on_gc)
    rows = []
    refused = 0
    for _, name, schema in schemas(args.sample, args.seed, args.maskbench, args.limit):
        spent.clear()
        start = time.process_time()
        try:
            grammar = gm.Grammar.from_json_schema(schema, timeout=60.0)
            front = time.process_time()
            runner.compiler.compile(grammar).matcher().fill_mask(runner.row)
        except Exception:  # noqa: BLE001 - refused schemas are counted, not timed
            refused += 1
            continue
        end = time.process_time()
        spent["first"], spent["schema"] = end - start, front - start
        spent["rest"] = end - front - spent["lexer"] - spent["parse"]
        rows.append((name, [1e3 * spent[c] for c in COLUMNS]))
    gc.callbacks.remove(on_gc)
    table = np.array([r[1] for r in rows])
    print("ms CPU: " + " ".join(f"{c:>9}" for c in COLUMNS))
    for i in np.argsort(-table[:, 0])[: args.slowest]:
        print(f"{rows[i][0][:40]:40} " + " ".join(f"{v:9.1f}" for v in table[i]))
    first = table[:, 0]
    gc_all = table[:, -3:].sum(axis=1)
    print(f"{len(rows)} schemas ({refused} refused): first mask p50 {np.percentile(first, 50):.1f} ms, p95 {np.percentile(first, 95):.1f} ms; "
          f"p95 without GC pauses {np.percentile(first - gc_all, 95):.1f} ms; schemas with a full collection: "
          f"{int((table[:, -1] > 0).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
