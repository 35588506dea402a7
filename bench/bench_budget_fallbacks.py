"""Token budgets for grammars whose lexer backs up (Lark's lexing, ``Grammar.from_lark``'s default): how far the claims
are above those of the same grammar with the plain lexing rule, on the seeds' programs.

Per grammar (SynCode's Go, Java and Python with its indenter; Lark's python.lark uses the Python programs) and lexer,
the grammar as ``from_lark`` makes it (``backtrack=True``) and the same grammar with ``backtrack=False`` (whose
lexer never backs up; its costs are the plain rule's, exact in the sense of docs/architecture.md) replay each seed
program token by token. At every prefix both accept, the claimed minimum to finish (``min_tokens_to_finish``) of
the first is compared with the second's where both are finite (near a conflict Lark's rules resolve, claims can be
INF: docs/architecture.md, "Resolved conflicts"), and every ``--walk``-th prefix the
claim is realised: tokens are taken greedily, each the cheapest that lowers the claim, until EOS (asserting that one
always exists and that the walk is no longer than the claim). Reported: prefixes compared, where the claims differ
(count, range, mean of this - plain), INF claims (and of those, where the plain claim is finite), prefixes that
leave a fallback pending, where a budget of ten times the program's length first masks one of its tokens (a conflict,
or a token allowed only where its long lexeme dies, which costs INF), and at the walked prefixes, for up to 64
tokens each that leave a fallback pending and the plain grammar allows: how many, at how many the cost after the
token is above the plain grammar's (and the mean difference), and how many the budget masks (cost INF); and the
median mask time unbudgeted and budgeted (while the large budget runs), the walks (count, mean claim -
walk) and the budget tables' build time (cold).

    python bench/bench_budget_fallbacks.py [--tokenizer smollm2] [--grammars go,java,python,python.lark]

Results go to ``results/budget_fallbacks.md``.
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

import lark
import numpy as np
from cases import load_seed_grammar, load_tokenizer
from harness import make_postlex
from report import table_head

import grammask as gm
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.budget import INF, build_budget_tables

RESULTS = Path(__file__).resolve().parent / "results"


def _grammars(name: str, lexer: str) -> tuple[gm.Grammar, list[tuple[str, str]]]:
    """The grammar ``from_lark`` makes of ``name`` under ``lexer``, and its seed programs."""
    if name == "python.lark":
        seed = load_seed_grammar("python")
        text = (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()
        postlex, start = make_postlex("lark.indenter:PythonIndenter"), "file_input"
    else:
        seed = load_seed_grammar(name)
        text, postlex, start = seed.lark_text, make_postlex(seed.postlex), "start"
    return gm.Grammar.from_lark(text, lexer=lexer, name=name, postlex=postlex, start=start), list(seed.programs)


def walk_claim(matcher, claim: int) -> int:
    """Follow ``claim`` from a fork of ``matcher``, always the cheapest token that lowers it; the tokens taken."""
    m = matcher.fork()
    n = 0
    while not m.is_terminated():
        costs = m.next_token_costs()
        lower = np.flatnonzero((costs >= 0) & (costs <= claim - 1))
        if not len(lower):
            raise AssertionError(f"no token lowers the claim {claim} after {n} tokens")
        token = int(lower[np.argmin(costs[lower])])
        claim = int(costs[token])
        m.advance(token)
        n += 1
    return n


def _near_fallbacks(m, p, most: int = 64) -> list[int]:
    """For up to ``most`` tokens after which ``m`` leaves a fallback pending and the plain grammar's matcher ``p``
    allows: ``m``'s cost after the token minus ``p``'s (INF where ``m`` masks it)."""
    alt = m.compiled._engine.lexer.alt
    if alt is None:
        return []
    groups = m.compiled._budget_runtime().groups(m._lexstate)
    costs = m.next_token_costs()
    found = []
    for g in np.flatnonzero(alt[groups.ends] >= 0).tolist():
        for w in range(groups.tok_ptr[g], groups.tok_ptr[g + 1]):
            bits, base = int(np.uint32(groups.tok_bits[w])), int(groups.tok_words[w]) * 32
            found.extend(base + b for b in range(32) if bits >> b & 1)
    out = []
    for t in found[:most]:
        after = p.fork()
        if not after.accept_token(t):
            continue
        plain = after.min_tokens_to_finish()
        if plain < INF:
            out.append(INF if costs[t] < 0 else int(costs[t]) - plain)
    return out


def _replay(backs, plain, ids: list[int], n_logits: int, walk_every: int) -> dict:
    """Claims of both grammars after every prefix of ``ids`` (unbudgeted matchers: a claim does not depend on the
    budget), walks from every ``walk_every``-th, and where a large budget first masks a program token."""
    m, p = backs.matcher(), plain.matcher()
    large = backs.matcher(max_tokens=10 * len(ids) + 10)
    alt = backs._engine.lexer.alt
    row = allocate_bitmask(1, n_logits)[0]
    out = {"diffs": [], "pending": 0, "cut": "-", "gaps": [], "inf": 0, "inf_only_here": 0, "near": [],
           "free": [], "budgeted": []}
    for i, t in enumerate(ids):
        claim = m.min_tokens_to_finish()
        other = INF if p is None else p.min_tokens_to_finish()
        out["inf"] += claim >= INF
        out["inf_only_here"] += claim >= INF > other
        if claim < INF and other < INF:
            out["diffs"].append(claim - other)
        out["pending"] += alt is not None and alt[m._lexstate] >= 0
        if claim < INF and i % walk_every == 0:
            walked = walk_claim(m, claim)
            if walked > claim:
                raise AssertionError(f"walk {walked} above the claim {claim}")
            out["gaps"].append(claim - walked)
            if p is not None:
                out["near"].extend(_near_fallbacks(m, p))
        start = time.perf_counter()
        m.fill_mask(row)
        out["free"].append(time.perf_counter() - start)
        if large is not None:
            start = time.perf_counter()
            large.fill_mask(row)
            out["budgeted"].append(time.perf_counter() - start)
            if bitmask_to_bool(row, n_logits)[t]:
                large.advance(t)
            else:
                out["cut"], large = f"at {i}", None
        m.advance(t)
        if p is not None:
            try:
                p.advance(t)
            except gm.errors.GrammaskError:
                p = None  # the plain rule rejects the program here: no more comparisons
    return out


def _near(diffs: list[int]) -> str:
    d = np.array(diffs, dtype=np.int64)
    finite = d[d < INF]
    return f"{len(d)}, {int((finite > 0).sum())} ({finite.mean() if len(finite) else 0:.2f}), {int((d >= INF).sum())}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--grammars", default="go,java,python,python.lark")
    parser.add_argument("--lexers", default="basic,contextual")
    parser.add_argument("--walk", type=int, default=7, help="realise the claim at every n-th prefix")
    parser.add_argument("--out", default=str(RESULTS / "budget_fallbacks.md"))
    args = parser.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    vocab = tok.vocab
    lines = table_head(
        f"Token budgets where the lexer backs up ({args.tokenizer}, one thread)",
        (f"python bench/bench_budget_fallbacks.py --tokenizer {args.tokenizer} --grammars {args.grammars} "
         f"--lexers {args.lexers} --walk {args.walk}"),
        ["grammar", "lexer", "fallback states", "budget tables (s)", "program", "tokens", "prefixes compared",
         "claims above plain: prefixes (range, mean)", "claims INF (plain finite)", "fallback pending",
         "large budget first cuts", "walks (mean claim - walk)",
         "near a fallback: tokens, claims above plain (mean), masked", "mask p50 free / budgeted (ms)"])
    for name in args.grammars.split(","):
        for lexer in args.lexers.split(","):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Lark's resolved conflicts, fallbacks not kept, uncounted rules
                grammar, programs = _grammars(name, lexer)
                backs = gm.compile(grammar, vocab)
                plain = gm.compile(dataclasses.replace(grammar, backtrack=False), vocab)
                start = time.perf_counter()
                build_budget_tables(backs._engine)  # cold: the disk cache keeps them for the matchers
                tables = time.perf_counter() - start
            alt = backs._engine.lexer.alt
            n_falls = 0 if alt is None else int((alt >= 0).sum())
            for program, text in programs:
                ids = tok.encode(text)
                r = _replay(backs, plain, ids, vocab.n_logits, args.walk)
                d = np.array(r["diffs"], dtype=np.int64)
                above = f"{int((d != 0).sum())} ({int(d.min(initial=0))}..{int(d.max(initial=0))}, {d.mean() if len(d) else 0:.3f})"
                g = np.array(r["gaps"])
                lines.append(f"| {name} | {lexer} | {n_falls} | {tables:.2f} | {program} | {len(ids)} | {len(d)} | "
                             f"{above} | {r['inf']} ({r['inf_only_here']}) | {r['pending']} | {r['cut']} | {len(g)} ({g.mean():.2f}) | "
                             f"{_near(r['near'])} | {np.median(r['free']) * 1e3:.3f} / "
                             f"{np.median(r['budgeted']) * 1e3:.3f} |")
                print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
