"""Does the JSON grammar make the default model's outputs parse, and what does it cost?

30 prompts of our own ask for JSON objects (10 show a JSON Schema). Each runs on the default model
(SmolLM2-135M-Instruct), single-threaded, with and without the built-in JSON grammar, for greedy,
sampling (3 seeds), beam search (b=4) and MCTS. Printed: the share of outputs ``json.loads`` accepts,
the mean time per token, and the mask overhead: the time grammask adds per token (mask + advance +
applying the mask) as a share of the unconstrained time per token of the same strategy. Greedy and
sampling try the model's own choice before computing a full mask; ``greedy-full-masks`` computes the
full mask at every step, for the engine's raw cost.

    python evals/json_prompts.py                      # everything (long: MCTS dominates)
    python evals/json_prompts.py --prompts 5 --strategies greedy beam
    python evals/json_prompts.py --strategies mcts --together 30   # MCTS on all prompts at once
    python evals/json_prompts.py --strategies mcts --conditions json --dtype bfloat16 --together 30
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from statistics import mean
from time import perf_counter

os.environ.setdefault("OMP_NUM_THREADS", "1")

SCHEMA_PERSON = '{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}'
SCHEMA_PRODUCT = '{"type": "object", "properties": {"product": {"type": "string"}, "price": {"type": "number"}, "in_stock": {"type": "boolean"}}, "required": ["product", "price", "in_stock"]}'
SCHEMA_EVENT = '{"type": "object", "properties": {"title": {"type": "string"}, "date": {"type": "string"}, "attendees": {"type": "array", "items": {"type": "string"}}}, "required": ["title", "date", "attendees"]}'
SCHEMA_POINT = (
    '{"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}'
)
SCHEMA_WEATHER = '{"type": "object", "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}, "condition": {"enum": ["sunny", "cloudy", "rainy"]}}, "required": ["city", "temperature_c", "condition"]}'

PROMPTS = [
    "Return a JSON object describing a cat named Tom who is 3 years old, with the keys name and age.",
    "Give me a JSON object with the keys city and country for Paris.",
    "Write a JSON object for the book 1984 by George Orwell, published in 1949, with keys title, author and year.",
    "Output only a JSON object with a single key answer whose value is the capital of Italy.",
    "Create a JSON object for a user with username alice, email alice@example.com and active set to true.",
    "Describe a red car with 4 doors as a JSON object with keys color and doors.",
    "Give a JSON object listing three primary colors under the key colors.",
    "Produce a JSON object that maps the numbers one, two and three to 1, 2 and 3.",
    "Return JSON for a rectangle with width 5 and height 2, and its area.",
    "Make a JSON object with keys language and year for the Python programming language, first released in 1991.",
    "Write a JSON object describing today's weather in Oslo: snowy, minus 3 degrees.",
    "Reply with a JSON object containing the key ok set to true.",
    "Represent the fraction three quarters as a JSON object with keys numerator and denominator.",
    "Give me a JSON object for a movie: Inception, directed by Christopher Nolan, 2010.",
    "Return a JSON object with a key fruits holding a list of two fruits.",
    "Encode the RGB color pure green as a JSON object with keys r, g and b.",
    "Create a JSON object for a to-do item 'buy milk' that is not done yet.",
    "Give a JSON object with the name and population of Tokyo (about 14 million).",
    "Answer in JSON: is water wet? Use the keys question and answer.",
    "Return a JSON object for a planet: Mars, fourth from the sun, with two moons.",
    f"Return a JSON object that follows this JSON Schema: {SCHEMA_PERSON}. The person is Bob, aged 42.",
    f"Fill in this schema as a JSON object: {SCHEMA_PERSON}. Use Marie Curie at age 66.",
    f"Here is a JSON Schema: {SCHEMA_PRODUCT}. Write a JSON object for a pen that costs 1.5 and is in stock.",
    f"Produce a JSON object valid against {SCHEMA_PRODUCT} for a laptop priced 999 that is sold out.",
    f"Following the schema {SCHEMA_EVENT}, write a JSON object for a team meeting on 2024-05-01 with Ann and Raj.",
    f"Schema: {SCHEMA_EVENT}. Give a JSON object for a birthday party on 2025-01-12 attended by Lea.",
    f"Give the point (3, 4) as a JSON object matching {SCHEMA_POINT}.",
    f"Using the schema {SCHEMA_POINT}, output the origin as JSON.",
    f"Report the weather as JSON matching {SCHEMA_WEATHER}: it is sunny and 25 degrees in Madrid.",
    f"Answer with JSON valid under {SCHEMA_WEATHER}: London, 12 degrees, rainy.",
]
assert len(PROMPTS) == 30


@dataclass
class Row:
    strategy: str
    constrained: bool
    prompt: int
    seed: int | None
    text: str
    tokens: int
    stop_reason: str
    parses: bool
    ms_per_token: float
    mask_ms_per_token: float


def parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def runs(strategies: list[str], mcts_trials: int, mcts_batch: int):
    """(label, strategy, seed) for each configured run."""
    import grammask.decoding as dec

    configs = {
        "greedy": [("greedy", dec.Greedy(), None)],
        "greedy-full-masks": [("greedy, full masks", dec.Greedy(check_first=False), None)],
        "sample": [(f"sample (seed {s})", dec.Sample(), s) for s in (0, 1, 2)],
        "beam": [("beam (b=4)", dec.BeamSearch(width=4), None)],
        "mcts": [(f"mcts ({mcts_trials} trials)", dec.MCTS(trials=mcts_trials, batch=mcts_batch), None)],
    }
    return [c for name in strategies for c in configs[name]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=len(PROMPTS), help="use the first N prompts (default 30)")
    parser.add_argument(
        "--strategies",
        nargs="+",
        default=["greedy", "sample", "beam", "mcts"],
        choices=["greedy", "greedy-full-masks", "sample", "beam", "mcts"],
    )
    parser.add_argument("--max-tokens", type=int, default=100)
    parser.add_argument("--mcts-trials", type=int, default=20, help="MCTS trials per token (paper: 20)")
    parser.add_argument("--mcts-batch", type=int, default=1, help="MCTS trials per batched wave (1: sequential)")
    parser.add_argument(
        "--together",
        type=int,
        default=1,
        help="decode this many prompts side by side, sharing forward passes (Strategy.decode_many); "
        "ms/token then counts each output's share of the passes",
    )
    parser.add_argument("--conditions", nargs="+", default=["free", "json"], choices=["free", "json"],
                        help="free: unconstrained; json: the JSON grammar with a budget of --max-tokens (default both)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="model weights (bfloat16 is about 1.5x faster in batches on CPUs with AMX)")
    parser.add_argument("--out", help="also write every output and figure to this JSON file")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    import grammask.decoding as dec
    from grammask.compiler import compile
    from grammask.grammar import Grammar
    from grammask.models.load import load_model

    model = load_model(dtype=getattr(torch, args.dtype))
    compiled = compile(Grammar.builtin("json"), model.vocab)
    prompts = [model.encode_prompt(p) for p in PROMPTS[: args.prompts]]
    dec.Greedy().decode(model, prompts[0], compiled.matcher(), max_tokens=2)  # warm-up
    rows: list[Row] = []
    started = perf_counter()
    for label, strategy, seed in runs(args.strategies, args.mcts_trials, args.mcts_batch):
        for constrained in [c == "json" for c in args.conditions]:
            for first in range(0, len(prompts), args.together):
                chunk = prompts[first : first + args.together]
                matchers = [compiled.limited_matcher(args.max_tokens) if constrained else None for _ in chunk]
                outs = strategy.decode_many(model, chunk, matchers, max_tokens=args.max_tokens, seed=seed)
                for i, out in enumerate(outs, start=first):
                    text = model.decode(out.tokens)
                    s = out.stats
                    rows.append(
                        Row(
                            label,
                            constrained,
                            i,
                            seed,
                            text,
                            s.tokens,
                            s.stop_reason,
                            parses(text),
                            s.ms_per_token,
                            s.mask_ms_per_token,
                        )
                    )
                    print(
                        f"[{perf_counter() - started:7.0f} s] {label:<18} {'json' if constrained else 'free':<4} prompt {i + 1:>2}: "
                        f"{s.tokens:>3} tokens ({s.stop_reason}), {s.ms_per_token:6.1f} ms/token, "
                        f"{'parses' if rows[-1].parses else 'no parse'}: {text[:60]!r}",
                        flush=True,
                    )
    report(rows, args.dtype)
    if args.out:
        with open(args.out, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    return 0


def report(rows: list[Row], dtype: str) -> None:
    print()
    print(
        f"{'strategy':<18} {'parses free':>11} {'parses json':>11} {'ms/token free':>13} {'ms/token json':>13} {'mask ms/token':>13} {'overhead':>8}"
    )
    for label in dict.fromkeys(r.strategy for r in rows):
        free = [r for r in rows if r.strategy == label and not r.constrained]
        cons = [r for r in rows if r.strategy == label and r.constrained]
        free_ms = mean(r.ms_per_token for r in free) if free else None
        cons_ms = mean(r.ms_per_token for r in cons) if cons else None
        mask_ms = mean(r.mask_ms_per_token for r in cons) if cons else None
        overhead = f"{100 * mask_ms / free_ms:.1f}%" if free and cons else "n/a"
        print(
            f"{label:<18} {sum(r.parses for r in free):>8}/{len(free):<2} {sum(r.parses for r in cons):>8}/{len(cons):<2} "
            f"{_ms(free_ms):>13} {_ms(cons_ms):>13} {_ms(mask_ms, 2):>13} {overhead:>8}"
        )
    print(
        "\nparses: json.loads accepts the whole output; overhead: mask ms/token (mask + advance + applying the mask, "
        "constrained runs) / ms/token of the unconstrained runs of the same strategy; single-threaded; "
        f"weights in {dtype}."
    )


def _ms(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
