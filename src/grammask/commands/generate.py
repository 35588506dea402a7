"""``grammask generate``: run a model on a prompt, constrained by a grammar, a JSON Schema or a regex."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grammask.commands.sources import read_schema, read_text
from grammask.decoding.generate import (
    STRATEGIES,
    generate,
    strategy_from_name,
)
from grammask.decoding.strategy import Strategy
from grammask.errors import DecodingError, GrammarError, GrammaskError
from grammask.grammar import Grammar
from grammask.grammar.builtin import BUILTIN_NAMES
from grammask.models.load import load_model


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate text that follows a grammar",
        description="Generate a reply to PROMPT, constrained by a grammar, a JSON Schema or a regex "
        "(unconstrained without one). Prints the output, then one line of statistics on stderr.",
    )
    p.add_argument("prompt", help="the user prompt (the chat template is applied for instruct models)")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument(
        "--grammar", metavar="NAME|FILE.lark", help=f"a built-in grammar ({', '.join(BUILTIN_NAMES)}) or a Lark file"
    )
    shape.add_argument("--schema", metavar="FILE.json", help="a JSON Schema file the output must validate against")
    shape.add_argument("--regex", metavar="R", help="a regular expression the whole output must match")
    p.add_argument(
        "--max-tokens", type=int, default=256, metavar="N",
        help="most tokens to generate, EOS included; constrained output always completes within them (default 256)",
    )
    p.add_argument("--strategy", choices=list(STRATEGIES), default="greedy", help="decoding strategy (default greedy)")
    p.add_argument(
        "--model",
        metavar="PATH",
        help="a local Hugging Face model directory or .gguf file (default: SmolLM2-135M-Instruct)",
    )
    p.add_argument("--seed", type=int, help="random seed for sampling")
    p.add_argument(
        "--temperature", type=float, help="sampling temperature (sample: 1.0) or prior temperature (mcts: 2.0)"
    )
    p.add_argument("--top-k", type=int, help="sample: keep the K most likely tokens")
    p.add_argument("--top-p", type=float, help="sample: keep the smallest set of tokens with probability P")
    p.add_argument("--beams", type=int, default=4, help="beam: beam width (default 4)")
    p.add_argument("--trials", type=int, default=20, help="mcts: trials per token (default 20)")
    p.add_argument("--c-puct", type=float, default=5.0, help="mcts: exploration weight (default 5)")
    p.add_argument("--no-chat", action="store_true", help="feed the prompt as is, without the chat template")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="CPU threads for the model (default 1: small models gain little from more, and lose much on a busy machine)",
    )
    p.add_argument(
        "--stop", action="append", default=[], metavar="TEXT",
        help="end the output at TEXT where what precedes it is a whole sentence of the grammar (repeatable)",
    )
    p.add_argument(
        "--canonical", action="store_true",
        help="allow only token sequences the model's tokenizer itself would write (no token budget then)",
    )
    p.add_argument(
        "--jump-forward", action="store_true",
        help="append text the grammar forces (e.g. a schema's keys) without asking the model (greedy and sample)",
    )
    p.add_argument("--json-out", action="store_true", help="print one JSON object: text, tokens, stats")


def run(args: argparse.Namespace) -> int:
    """Run ``grammask generate``; the exit status.

    Raises the :class:`~grammask.errors.GrammaskError` of any bad input (an option out of range, a grammar,
    schema or regex that cannot be loaded or compiled, a model that cannot be loaded, a prompt too long),
    its message joined onto one line for the command's error line.
    """
    try:
        return _generate(args)
    except GrammaskError as e:
        # Some messages (Lark's syntax errors, LALR conflicts) span lines; the command reports one line.
        e.args = (" ".join(str(e).split()),)
        raise


def _generate(args: argparse.Namespace) -> int:
    if args.max_tokens < 1:
        raise DecodingError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    grammar = read_grammar(args)
    strategy = make_strategy(args)
    if args.threads < 1:
        raise DecodingError(f"--threads must be at least 1, got {args.threads}")
    model = load_model(args.model)
    import torch  # loaded by now: the model backends run on it

    torch.set_num_threads(args.threads)
    result = generate(
        model,
        args.prompt,
        grammar,
        max_tokens=args.max_tokens,
        strategy=strategy,
        seed=args.seed,
        chat=False if args.no_chat else None,
        stop=args.stop,
        canonical=args.canonical,
        jump_forward=args.jump_forward,
    )
    if args.json_out:
        print(json.dumps({"text": result.text, "tokens": result.tokens, "stats": result.stats.to_dict()}))
    else:
        print(result.text, flush=True)
        print(result.stats.summary(), file=sys.stderr)
    return 0


def read_grammar(args: argparse.Namespace) -> Grammar | None:
    """The grammar the options name, or None (unconstrained).

    Raises :class:`~grammask.errors.GrammarError` for a ``--grammar`` that is neither a file nor a built-in
    name, an unreadable file, and what the front ends raise for their sources.
    """
    if args.grammar is not None:
        path = Path(args.grammar)
        if path.is_file():
            return Grammar.from_lark(read_text(path), name=path.stem)
        if args.grammar in BUILTIN_NAMES:
            return Grammar.builtin(args.grammar)
        raise GrammarError(
            f"--grammar {args.grammar!r} is neither a file nor a built-in grammar ({', '.join(BUILTIN_NAMES)})"
        )
    if args.schema is not None:
        path = Path(args.schema)
        schema = read_schema(path)
        from grammask.grammar.json_schema import grammar_from_json_schema

        return grammar_from_json_schema(schema, name=path.stem)
    if args.regex is not None:
        from grammask.grammar.regex_frontend import grammar_from_regex

        return grammar_from_regex(args.regex)
    return None


def make_strategy(args: argparse.Namespace) -> Strategy:
    """The strategy the options name; raises :class:`~grammask.errors.DecodingError` for a bad parameter."""
    params: dict[str, object] = {}
    if args.strategy == "sample":
        params = {"temperature": 1.0 if args.temperature is None else args.temperature, "top_k": args.top_k}
        if args.top_p is not None:
            params["top_p"] = args.top_p
    elif args.strategy == "beam":
        params = {"width": args.beams}
    elif args.strategy == "mcts":
        params = {"trials": args.trials, "c_puct": args.c_puct}
        if args.temperature is not None:
            params["temperature"] = args.temperature
    return strategy_from_name(args.strategy, **params)
