"""Jump-forward on JSON-Mode-Eval: how much of the output the grammar forces, and what reading it at once saves.

For each schema of ``../shared/data/json-mode-eval/`` the default model writes a reply greedily with the
schema grammar and a token budget (the prompts and budgets of ``evals/budget_jme.py``), once plainly and
once with ``jump_forward=True``: after each token, the tokens of the text the grammar forces next (keys,
quotes, colons, commas of a schema's objects) are appended without a model choice and read in one forward
pass (:meth:`grammask.matcher.Matcher.forced_tokens`). Each output is decoded alone (no batching), the two
conditions of a schema one after the other, in alternating order. Reported: the share of output tokens
jump-forward supplies, model calls per output, decoding seconds per output and the end-to-end speed-up
(decoding time plain / with jump-forward, prompt reading excluded), how many outputs are identical, and
Syntax / Schema / Exact-match as ``budget_jme.judge`` measures them. Outputs are appended to a ``.jsonl``
beside ``--out`` (``--resume`` keeps them); the table is printed and written to ``--out``.

    python evals/jump_forward.py                       # all 100 schemas
    python evals/jump_forward.py --schemas 10 --out /tmp/jf.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import budget_jme

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    schema: int
    jump_forward: bool
    budget: int
    text: str
    tokens: int
    forced: int
    model_calls: int
    decode_seconds: float
    stop_reason: str
    syntax: bool
    valid: bool
    exact: bool


def run(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(1)
    from grammask.compiler import compile
    from grammask.decoding import Greedy
    from grammask.grammar.json_schema import grammar_from_json_schema
    from grammask.models.load import load_model

    model = load_model(None)
    log = Path(args.out).with_suffix(".jsonl")
    rows = [Row(**json.loads(line)) for line in log.read_text().splitlines()] if args.resume and log.exists() else []
    done = {(r.schema, r.jump_forward) for r in rows}
    if not args.resume:
        log.write_text("")
    started = time.perf_counter()
    for i in range(args.schemas):
        case = json.loads((budget_jme.JME / f"JME_{i}.json").read_text())
        schema, truth = case["schema"], case["tests"][0]["data"]
        compiled = compile(grammar_from_json_schema(schema, name=f"JME_{i}"), model.vocab)
        compact = json.dumps(truth, separators=(",", ":"), ensure_ascii=False)
        budget = max(math.floor(1.1 * len(model.vocab.encode(compact))), compiled.matcher().min_tokens_to_finish())
        prompt = model.encode_prompt(budget_jme.prompt_for(schema, truth))
        for jump in (False, True) if i % 2 == 0 else (True, False):
            if (i, jump) in done:
                continue
            out = Greedy().decode(model, prompt, compiled.matcher(max_tokens=budget), max_tokens=budget, jump_forward=jump)
            text = model.decode(out.tokens)
            s = out.stats
            row = Row(i, jump, budget, text, s.tokens, s.forced_tokens, s.forward_passes,
                      s.decode_seconds, s.stop_reason, *budget_jme.judge(text, schema, truth))
            rows.append(row)
            with log.open("a") as f:
                f.write(json.dumps(asdict(row)) + "\n")
            print(f"[{time.perf_counter() - started:6.0f} s] JME_{i:<2} jump {int(jump)} {row.tokens:>3} tokens, "
                  f"{row.forced:>3} forced, {row.model_calls:>3} calls, {row.decode_seconds:6.2f} s {text[:60]!r}",
                  flush=True)
    table = report(rows)
    Path(args.out).write_text(table + "\n")
    print("\n" + table)
    return 0


def report(rows: list[Row]) -> str:
    by = {(r.schema, r.jump_forward): r for r in rows}
    pairs = [(by[(i, False)], by[(i, True)]) for i in sorted({r.schema for r in rows}) if (i, False) in by and (i, True) in by]
    lines = [
        (f"Jump-forward on JSON-Mode-Eval: default model (SmolLM2-135M-Instruct, float32, 1 torch thread), greedy, "
        f"schema grammar with a token budget (budget_jme.py's), each output decoded alone; {len(pairs)} schemas. "
        f"{budget_jme.PROMPT_NOTE} Decoding time excludes reading the prompt."),
        "",
        ("| condition | outputs | tokens | forced by the grammar | model calls | decode s (sum) | ms / output token | "
        "Syntax | Schema | Exact |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for jump in (False, True):
        sel = [p[jump] for p in pairs]
        tokens = sum(r.tokens for r in sel)
        seconds = sum(r.decode_seconds for r in sel)
        lines.append(
            f"| {'jump-forward' if jump else 'plain'} | {len(sel)} | {tokens} | {sum(r.forced for r in sel)} "
            f"({100 * sum(r.forced for r in sel) / max(tokens, 1):.1f}%) | {sum(r.model_calls for r in sel)} | "
            f"{seconds:.1f} | {1e3 * seconds / max(tokens, 1):.1f} | {sum(r.syntax for r in sel)} | "
            f"{sum(r.valid for r in sel)} | {sum(r.exact for r in sel)} |"
        )
    if pairs:
        ratios = [a.decode_seconds / b.decode_seconds for a, b in pairs if b.decode_seconds > 0]
        plain, jumped = (sum(p[k].decode_seconds for p in pairs) for k in (0, 1))
        lines += [
            "",
            (f"Speed-up of decoding (plain / jump-forward): {plain / jumped:.2f}x over all outputs, per-output median "
            f"{statistics.median(ratios):.2f}x. Identical outputs: {sum(a.text == b.text for a, b in pairs)} of "
            f"{len(pairs)} (jump-forward appends the tokenizer's own encoding of the forced text, where the model "
            f"may have spelled it otherwise)."),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schemas", type=int, default=100, help="the first N JSON-Mode-Eval schemas")
    p.add_argument("--out", default=str(ROOT / "evals" / "results" / "jump_forward_smollm2.md"))
    p.add_argument("--resume", action="store_true", help="keep the outputs of the .jsonl beside --out")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
