"""Token budgets under Lark's two LALR lexers, on the seeds' Go and Java grammars (SynCode's) and programs.

Per grammar and lexer (``basic``, ``contextual``): the time to build the budget tables (once per grammar and
vocabulary, cached on disk after), then each seed program replayed token by token with three matchers side by
side: unbudgeted, budgeted far above the program's length (``10 * tokens + 10``) and budgeted at exactly the
program's tokens and EOS. Reported: the claimed minimum to finish from the start, the steps where the large
budget's mask differs from the unbudgeted one (tokens whose every completion needs a reduction an LALR conflict
resolution drops: budgets cannot count them), the first token the exact budget masks, whether the claims
(``min_tokens_to_finish`` after every prefix) are the same under both lexers, and the mask time of the
budgeted matcher against the unbudgeted one (median and mean over the program's steps, one thread).

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
import time
import warnings
from pathlib import Path

import numpy as np
from cases import load_seed_grammar, load_tokenizer
from report import environment

import grammask as gm
from grammask.bitmask import allocate_bitmask, bitmask_to_bool

RESULTS = Path(__file__).resolve().parent / "results"


def _replay(compiled, ids: list[int], n_logits: int) -> dict:
    """One program through an unbudgeted, a large-budget and an exact-budget matcher."""
    free = compiled.matcher()
    large = compiled.matcher(max_tokens=10 * len(ids) + 10)
    exact = compiled.matcher(max_tokens=len(ids) + 1)
    rows = allocate_bitmask(3, n_logits)
    claims, differ, first_cut = [], 0, None
    free_time, budget_time = [], []
    for i, t in enumerate(ids):
        start = time.perf_counter()
        free.fill_mask(rows[0])
        free_time.append(time.perf_counter() - start)
        start = time.perf_counter()
        large.fill_mask(rows[1])
        budget_time.append(time.perf_counter() - start)
        differ += not np.array_equal(rows[0], rows[1])
        claims.append(free.min_tokens_to_finish())
        if exact is not None:
            exact.fill_mask(rows[2])
            if not bitmask_to_bool(rows[2], n_logits)[t]:
                first_cut, exact = i, None
            else:
                exact.advance(t)
        free.advance(t)
        large.advance(t)
    return {"claims": claims, "differ": differ, "first_cut": first_cut, "free": free_time, "budget": budget_time}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--grammars", default="go,java")
    parser.add_argument("--out", default=str(RESULTS / "budget_lexers.md"))
    args = parser.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    vocab = tok.vocab
    lines = [f"# Token budgets under both lexers ({args.tokenizer}, one thread)", "", environment(), "",
             "| grammar | lexer | budget tables (s) | program | tokens | min from start | large budget: masks differ "
             "| exact budget: first token cut | claims equal across lexers | mask p50 free / budgeted (ms) "
             "| mask mean free / budgeted (ms) |", "|" + " --- |" * 11]
    for name in args.grammars.split(","):
        seed = load_seed_grammar(name)
        runs = {}
        for lexer in ("basic", "contextual"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the conflicts Lark's rules resolve, and what budgets cannot count
                compiled = gm.compile(gm.Grammar.from_lark(seed.text, lexer=lexer, name=name), vocab, cache=False)
                start = time.perf_counter()
                minimum = compiled.matcher(max_tokens=1 << 20).min_tokens_to_finish()
                tables = time.perf_counter() - start
                runs[lexer] = (compiled, minimum, tables,
                               {p: _replay(compiled, tok.encode(text), vocab.n_logits) for p, text in seed.programs})
        for lexer, (compiled, minimum, tables, replays) in runs.items():
            for program, r in replays.items():
                same = r["claims"] == runs["basic" if lexer == "contextual" else "contextual"][3][program]["claims"]
                free, budget = np.array(r["free"]) * 1e3, np.array(r["budget"]) * 1e3
                lines.append(
                    f"| {name} | {lexer} | {tables:.2f} | {program} | {len(r['claims'])} | {minimum} | {r['differ']} "
                    f"| {'-' if r['first_cut'] is None else r['first_cut']} | {'yes' if same else 'no'} "
                    f"| {np.median(free):.3f} / {np.median(budget):.3f} | {free.mean():.3f} / {budget.mean():.3f} |")
        print("\n".join(lines[-2 * len(seed.programs):]), flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
