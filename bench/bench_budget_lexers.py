"""Token budgets under Lark's two LALR lexers, on the seeds' Go and Java grammars (SynCode's) and programs.

Per grammar and lexer (``basic``, ``contextual``): the time to build the budget tables (once per grammar and
vocabulary, cached on disk after), then each seed program replayed token by token with three matchers side by
side: unbudgeted, budgeted far above the program's length (``10 * tokens + 10``) and budgeted at exactly the
program's tokens and EOS, each until its mask first cuts a token of the program. Reported: the claimed minimum to
finish from the start, where the large budget first cuts the program and at how many steps before that its mask
differs from the unbudgeted one (SynCode's grammars have conflicts: a token whose every completion needs a
reduction a resolution drops is one budgets cannot count, so they mask it), the first token the exact budget cuts
(claims are upper bounds, so a program may fit exactly and still be cut), at how many prefixes the claims
(``min_tokens_to_finish``) differ from the other lexer's (and the range of the difference), and the mask time of the
budgeted matcher (large budget, while it runs) against the unbudgeted one (median and mean, one thread).

    python bench/bench_budget_lexers.py [--tokenizer smollm2] [--grammars go,java]

Results go to ``results/budget_lexers.md``.
"""

from __future__ import annotations

import os
import sys

from threads import THREAD_VARS

if __name__ == "__main__":
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import dataclasses
import time
import warnings
from pathlib import Path

import numpy as np
from cases import load_seed_grammar, load_tokenizer
from report import table_head

import grammask as gm
from grammask.bitmask import allocate_bitmask, bitmask_to_bool

RESULTS = Path(__file__).resolve().parent / "results"


def _replay(compiled, ids: list[int], n_logits: int) -> dict:
    """One program through an unbudgeted, a large-budget and an exact-budget matcher (each budgeted one runs until
    its mask first cuts a token of the program)."""
    free = compiled.matcher()
    budgeted = {"large": compiled.matcher(max_tokens=10 * len(ids) + 10), "exact": compiled.matcher(max_tokens=len(ids) + 1)}
    cut: dict[str, int | None] = {"large": None, "exact": None}
    rows = allocate_bitmask(2, n_logits)
    claims, differ = [], 0
    free_time, budget_time = [], []
    for i, t in enumerate(ids):
        start = time.perf_counter()
        free.fill_mask(rows[0])
        free_time.append(time.perf_counter() - start)
        claims.append(free.min_tokens_to_finish())
        for kind, m in budgeted.items():
            if cut[kind] is not None:
                continue
            start = time.perf_counter()
            m.fill_mask(rows[1])
            if kind == "large":
                budget_time.append(time.perf_counter() - start)
                differ += not np.array_equal(rows[0], rows[1])
            if bitmask_to_bool(rows[1], n_logits)[t]:
                m.advance(t)
            else:
                cut[kind] = i
        free.advance(t)
    return {"claims": claims, "differ": differ, "cut": cut, "free": free_time, "budget": budget_time}


def _step(i: int | None) -> str:
    return "-" if i is None else str(i)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--grammars", default="go,java")
    parser.add_argument("--out", default=str(RESULTS / "budget_lexers.md"))
    args = parser.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    vocab = tok.vocab
    lines = table_head(
        f"Token budgets under both lexers ({args.tokenizer}, one thread)",
        f"python bench/bench_budget_lexers.py --tokenizer {args.tokenizer} --grammars {args.grammars}",
        ["grammar", "lexer", "budget tables (s)", "program", "tokens", "min from start",
         "large budget: first token cut", "large budget: masks differ before it", "exact budget: first token cut",
         "claims unlike the other lexer's: steps (this - other)", "mask p50 free / budgeted (ms)",
         "mask mean free / budgeted (ms)"])
    for name in args.grammars.split(","):
        seed = load_seed_grammar(name)
        runs = {}
        for lexer in ("basic", "contextual"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the conflicts Lark's rules resolve, and what budgets cannot count
                grammar = gm.Grammar.from_lark(seed.lark_text, lexer=lexer, name=name)
                # budgets count the plain lexing rule only (Go and Java back up in places under the contextual lexer)
                compiled = gm.compile(dataclasses.replace(grammar, backtrack=False), vocab, cache=False)
                start = time.perf_counter()
                minimum = compiled.matcher(max_tokens=1 << 20).min_tokens_to_finish()
                tables = time.perf_counter() - start
                runs[lexer] = (compiled, minimum, tables,
                               {p: _replay(compiled, tok.encode(text), vocab.n_logits) for p, text in seed.programs})
        for lexer, (compiled, minimum, tables, replays) in runs.items():
            for program, r in replays.items():
                other = runs["basic" if lexer == "contextual" else "contextual"][3][program]["claims"]
                diff = np.array(r["claims"], dtype=np.int64) - np.array(other, dtype=np.int64)
                same = f"{int((diff != 0).sum())} ({int(diff.min())}..{int(diff.max())})"
                free, budget = np.array(r["free"]) * 1e3, np.array(r["budget"]) * 1e3
                lines.append(
                    f"| {name} | {lexer} | {tables:.2f} | {program} | {len(r['claims'])} | {minimum} "
                    f"| {_step(r['cut']['large'])} | {r['differ']} | {_step(r['cut']['exact'])} | {same} "
                    f"| {np.median(free):.3f} / {np.median(budget):.3f} | {free.mean():.3f} / {budget.mean():.3f} |")
        print("\n".join(lines[-2 * len(seed.programs):]), flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
