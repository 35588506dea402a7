"""Canonical mode on the default model: how often constrained outputs are not the tokenizer's own encoding
of their text, and what canonical masks change (log-probability, Schema, Exact-match, time).

Two sets of problems: ``json``, the prompts of ``evals/json_prompts.py`` under the built-in JSON grammar
(cut at ``--max-tokens``), and ``jme``, the JSON-Mode-Eval schemas of ``../shared/data/json-mode-eval/``
with the schema grammar and the prompts of ``evals/budget_jme.py`` (cut at ``--jme-factor`` x the
ground truth's tokens). Each problem runs plain (``compiled.matcher()``) and canonical
(``compiled.matcher(canonical=True)``), greedy and sampling (``Sample()``, temperature 1, fixed seeds);
neither condition has a token budget (the runs predate canonical budgets). Per output: whether its
token ids equal the HF tokenizer's ``encode(text, add_special_tokens=False)``; the model's mean
log-probability per output token (unmasked distribution, EOS not counted, one extra forward pass);
Syntax, Schema and Exact-match as ``budget_jme.judge`` measures them (``json``: Syntax only, there is
no schema or ground truth); ms per token and mask ms per token. Outputs are appended to a ``.jsonl``
beside ``--out`` as they finish (``--resume`` keeps them); the table is printed and written to ``--out``.

    python evals/canonical.py                                   # both sets, all problems
    python evals/canonical.py --prompts 5 --schemas 5 --seeds 0
    python evals/canonical.py --sets jme --schemas 40 --together 8 --resume
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import budget_jme
import json_prompts


@dataclass
class Row:
    problems: str  # "json" or "jme"
    problem: int
    decoding: str
    canonical: bool
    limit: int
    text: str
    tokens: int
    stop_reason: str
    own_encoding: bool  # the token ids are the tokenizer's encoding of ``text``
    mean_logprob: float  # per output token, EOS not counted (nan for an empty output)
    syntax: bool
    valid: bool | None  # None where there is no schema (``json``)
    exact: bool | None  # None where there is no ground truth (``json``)
    ms_per_token: float
    mask_ms_per_token: float


@dataclass(frozen=True)
class Problem:
    problems: str
    number: int
    prompt_ids: list[int]
    compiled: object  # CompiledGrammar
    limit: int
    schema: dict | None
    truth: object


def mean_logprob(model, prompt_ids: Sequence[int], output: Sequence[int]) -> float:
    """The model's mean log-probability of ``output``'s tokens after ``prompt_ids`` (nan when empty)."""
    import torch

    if not output:
        return math.nan
    ids = torch.tensor([[*prompt_ids, *output]])
    with torch.inference_mode():
        logits = model.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    picked = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(output)[:, None])
    return float(picked.mean())


def problems(model, sets: Sequence[str], n_prompts: int, n_schemas: int, max_tokens: int,
             jme_factor: float, jme_dir: Path = budget_jme.JME) -> list[Problem]:
    """The selected problems, their grammars compiled for the model's vocabulary."""
    from grammask.compiler import compile
    from grammask.grammar import Grammar
    from grammask.grammar.json_schema import grammar_from_json_schema

    out = []
    if "json" in sets:
        compiled = compile(Grammar.builtin("json"), model.vocab)
        for i, prompt in enumerate(json_prompts.PROMPTS[:n_prompts]):
            out.append(Problem("json", i, model.encode_prompt(prompt), compiled, max_tokens, None, None))
    if "jme" in sets:
        for i in range(n_schemas):
            case = json.loads((jme_dir / f"JME_{i}.json").read_text())
            schema, truth = case["schema"], case["tests"][0]["data"]
            compact = json.dumps(truth, separators=(",", ":"), ensure_ascii=False)
            limit = max(1, math.floor(jme_factor * len(model.vocab.encode(compact))))
            compiled = compile(grammar_from_json_schema(schema, name=f"JME_{i}"), model.vocab)
            out.append(Problem("jme", i, model.encode_prompt(budget_jme.prompt_for(schema, truth)), compiled, limit,
                               schema, truth))
    return out


def decodings(seeds: Sequence[int], names: Sequence[str]) -> list[tuple[str, object, int | None]]:
    """(label, strategy, seed) per decoding."""
    import grammask.decoding as dec

    table = {"greedy": [("greedy", dec.Greedy(), None)],
             "sample": [(f"sample (seed {s})", dec.Sample(), s) for s in seeds]}
    return [d for name in names for d in table[name]]


def decode_chunk(model, strategy, chunk: Sequence[tuple[Problem, bool]], seed: int | None) -> list:
    """One output per (problem, canonical) of ``chunk``, decoded side by side; None for a run that met a dead end
    (a mask with no token), found by decoding the chunk's runs one by one when the batch meets one."""
    from grammask.errors import MatcherStateError

    def matcher(p: Problem, canonical: bool):
        return p.compiled.matcher(canonical=True) if canonical else p.compiled.matcher()

    try:
        return strategy.decode_many(model, [p.prompt_ids for p, _ in chunk], [matcher(p, c) for p, c in chunk],
                                    max_tokens=[p.limit for p, _ in chunk], seed=seed)
    except MatcherStateError:
        outs = []
        for p, c in chunk:
            try:
                outs.append(strategy.decode(model, p.prompt_ids, matcher(p, c), max_tokens=p.limit, seed=seed))
            except MatcherStateError:
                outs.append(None)
        return outs


def run(args: argparse.Namespace) -> int:
    """The experiment; the exit status."""
    if importlib.util.find_spec("jsonschema") is None:  # judge() needs it: fail now, not after the first decodes
        print("canonical.py needs jsonschema: pip install -e '.[test,hf]'", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads)
    from grammask.models.load import load_model

    model = load_model(dtype=getattr(torch, args.dtype))
    tokenizer = model.tokenizer
    todo = problems(model, args.sets, args.prompts, args.schemas, args.max_tokens, args.jme_factor, args.jme_dir)
    if "jme" in args.sets:
        print(budget_jme.PROMPT_NOTE, flush=True)
    warm = todo[0]  # relation, kernels and first masks outside the timed runs
    for canonical in (False, True):
        matcher = warm.compiled.matcher(canonical=True) if canonical else warm.compiled.matcher()
        decodings([0], ["greedy"])[0][1].decode(model, warm.prompt_ids, matcher, max_tokens=4)
    log = Path(args.out).with_suffix(".jsonl")
    rows = [Row(**json.loads(line)) for line in log.read_text().splitlines()] if args.resume and log.exists() else []
    done = {(r.problems, r.problem, r.decoding, r.canonical) for r in rows}
    if not args.resume:
        log.write_text("")
    started = time.perf_counter()
    for label, strategy, seed in decodings(args.seeds, args.decodings):
        # both conditions of a problem side by side, so a stopped run compares like with like
        jobs = [(p, c) for p in todo for c in (False, True) if (p.problems, p.number, label, c) not in done]
        for first in range(0, len(jobs), args.together):
            chunk = jobs[first : first + args.together]
            for (p, canonical), out in zip(chunk, decode_chunk(model, strategy, chunk, seed)):
                if out is None:
                    row = Row(p.problems, p.number, label, canonical, p.limit, "", 0, "dead end", False, math.nan,
                              False, None if p.schema is None else False, None if p.schema is None else False,
                              math.nan, math.nan)
                    rows.append(row)
                    with log.open("a") as f:
                        f.write(json.dumps(asdict(row)) + "\n")
                    print(f"{p.problems} {p.number} {label} canonical={canonical}: dead end", flush=True)
                    continue
                text = model.decode(out.tokens)
                if p.schema is None:
                    syntax, valid, exact = json_prompts.parses(text), None, None
                else:
                    syntax, valid, exact = budget_jme.judge(text, p.schema, p.truth)
                s = out.stats
                row = Row(p.problems, p.number, label, canonical, p.limit, text, s.tokens, s.stop_reason,
                          out.tokens == tokenizer.encode(text, add_special_tokens=False),
                          mean_logprob(model, p.prompt_ids, out.tokens), syntax, valid, exact, s.ms_per_token,
                          s.mask_ms_per_token)
                rows.append(row)
                with log.open("a") as f:
                    f.write(json.dumps(asdict(row)) + "\n")
                print(f"[{time.perf_counter() - started:6.0f} s] {p.problems:<4} {p.number:>2} {label:<15} "
                      f"{'canonical' if canonical else 'plain':<9} {row.tokens:>3}/{p.limit:<3} {row.stop_reason:<10} "
                      f"own {int(row.own_encoding)} logp {row.mean_logprob:6.3f} syntax {int(syntax)} "
                      f"{row.ms_per_token:5.0f} ms/t {text[:50]!r}", flush=True)
        Path(args.out).write_text(report(rows, args) + "\n")
    print("\n" + report(rows, args))
    return 0


def _pct(flags: list[bool | None]) -> str:
    known = [f for f in flags if f is not None]
    return f"{100 * sum(known) / len(known):.0f}%" if known else "-"


def _mean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.mean(finite) if finite else math.nan


def _median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def report(rows: list[Row], args: argparse.Namespace) -> str:
    """The results table and the plain-vs-canonical comparison, in Markdown."""
    lines = [
        (f"Canonical mode, default model (SmolLM2-135M-Instruct, {args.dtype}, {args.threads} thread(s)); "
         f"json: {len({r.problem for r in rows if r.problems == 'json'})} JSON prompts (evals/json_prompts.py, "
         f"JSON grammar, cut at {args.max_tokens} tokens); jme: {len({r.problem for r in rows if r.problems == 'jme'})}"
         f" JSON-Mode-Eval schemas (cut at floor({args.jme_factor} x ground-truth tokens)). No token budget in either "
         f"condition; sampling: temperature 1, seeds {', '.join(map(str, args.seeds))}."),
        "",
        ("non-canonical: token ids differ from the tokenizer's encode(text) (all outputs but dead ends; in brackets: "
         "those ended by EOS); dead ends: runs stopped by a mask that allowed no token (counted as failing Syntax, "
         "Schema and Exact-match); log-prob: the model's mean log-probability per output token (EOS not counted); ms/token and mask "
         "ms/token per output, batched passes shared by sequence: mean over outputs (median)."),
        "",
        ("| set | decoding | mode | outputs | non-canonical | log-prob | Syntax | Schema | Exact-match | cut off "
         "| dead ends | mean tokens | ms/token | mask ms/token |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in dict.fromkeys((r.problems, r.decoding) for r in rows):
        for canonical in (False, True):
            sel = [r for r in rows if (r.problems, r.decoding) == group and r.canonical == canonical]
            if not sel:
                continue
            made = [r for r in sel if r.stop_reason != "dead end"]
            ended = [r for r in sel if r.stop_reason == "eos"]
            lines.append(
                f"| {group[0]} | {group[1]} | {'canonical' if canonical else 'plain'} | {len(sel)} "
                f"| {_pct([not r.own_encoding for r in made])} ({_pct([not r.own_encoding for r in ended])}) "
                f"| {_mean([r.mean_logprob for r in sel]):.3f} | {_pct([r.syntax for r in sel])} "
                f"| {_pct([r.valid for r in sel])} | {_pct([r.exact for r in sel])} "
                f"| {sum(r.stop_reason == 'max_tokens' for r in sel)} | {_dead(sel)} "
                f"| {_mean([r.tokens for r in made]):.1f} | {_mean([r.ms_per_token for r in sel]):.1f} "
                f"({_median([r.ms_per_token for r in sel]):.1f}) | {_mean([r.mask_ms_per_token for r in sel]):.2f} "
                f"({_median([r.mask_ms_per_token for r in sel]):.2f}) |"
            )
    lines += ["", "Plain vs canonical, pooled over decodings, on the problems run in both conditions:", ""]
    for problems_set in dict.fromkeys(r.problems for r in rows):
        pairs = _pairs([r for r in rows if r.problems == problems_set])
        if not pairs:
            continue
        changed = sum(a.text != b.text for a, b in pairs)
        dlogp = _mean([b.mean_logprob - a.mean_logprob for a, b in pairs])
        plain, canon = [a for a, _ in pairs], [b for _, b in pairs]
        lines.append(
            f"- {problems_set}: {len(pairs)} pairs; dead ends {_dead(plain)} plain vs {_dead(canon)} canonical; "
            f"non-canonical {_pct([not r.own_encoding for r in plain if r.stop_reason != 'dead end'])} plain vs "
            f"{_pct([not r.own_encoding for r in canon if r.stop_reason != 'dead end'])} canonical; output text changed "
            f"in {changed}; mean log-prob change {dlogp:+.3f} per token; Exact-match {_pct([r.exact for r in plain])} "
            f"-> {_pct([r.exact for r in canon])}; Schema {_pct([r.valid for r in plain])} -> "
            f"{_pct([r.valid for r in canon])}; Syntax {_pct([r.syntax for r in plain])} -> "
            f"{_pct([r.syntax for r in canon])}; ms/token {_mean([r.ms_per_token for r in plain]):.1f} -> "
            f"{_mean([r.ms_per_token for r in canon]):.1f}."
        )
    return "\n".join(lines)


def _dead(rows: list[Row]) -> int:
    return sum(r.stop_reason == "dead end" for r in rows)


def _pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """(plain, canonical) rows of the same problem and decoding."""
    plain = {(r.problem, r.decoding): r for r in rows if not r.canonical}
    return [(plain[(r.problem, r.decoding)], r) for r in rows if r.canonical and (r.problem, r.decoding) in plain]


def main(argv: list[str] | None = None) -> int:
    """The command line; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["json", "jme"], choices=["json", "jme"])
    parser.add_argument("--prompts", type=int, default=len(json_prompts.PROMPTS),
                        help=f"json: the first N prompts (default {len(json_prompts.PROMPTS)})")
    parser.add_argument("--schemas", type=int, default=100, help="jme: JME_0 .. JME_{N-1} (default 100)")
    parser.add_argument("--jme-dir", type=Path, default=budget_jme.JME,
                        help="the JSON-Mode-Eval schemas (default ../shared/data/json-mode-eval)")
    parser.add_argument("--decodings", nargs="+", default=["greedy", "sample"], choices=["greedy", "sample"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="sampling seeds (default 0)")
    parser.add_argument("--max-tokens", type=int, default=100, help="json: output limit (default 100)")
    parser.add_argument("--jme-factor", type=float, default=2.0,
                        help="jme: output limit as a multiple of the ground truth's tokens (default 2)")
    parser.add_argument("--together", type=int, default=8,
                        help="decode this many runs side by side, sharing forward passes (default 8)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--out", default="evals/results/canonical_smollm2.md",
                        help="table file; every output goes beside it as .jsonl, one line per run")
    parser.add_argument("--resume", action="store_true", help="keep the runs already in the .jsonl and do the rest")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
