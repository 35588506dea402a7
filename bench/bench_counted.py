"""Where compile time goes for counted constraints: a string with ``maxLength`` N, a regex ``a{1,N}``.

For each N: the JSON Schema front end (schema to IR), the lexer DFA and parse tables
(``build_front``), and the compile for the tokenizer's vocabulary (vocabulary walk per reachable
lexer state, verdicts), with the lexer's state count. numba kernels are warmed first.

    python bench/bench_counted.py [--tokenizer llama3] [--kind schema|regex] N [N ...]
"""

from __future__ import annotations

import argparse
import time

from cases import load_tokenizer

import grammask as gm
from grammask.mask_tables import build_front


def grammar_for(kind: str, n: int) -> gm.Grammar:
    """The counted grammar of size ``n`` of ``kind``."""
    if kind == "schema":
        return gm.Grammar.from_json_schema({"type": "string", "maxLength": n})
    return gm.Grammar.from_regex(f"a{{1,{n}}}")


def measure(compiler: gm.Compiler, kind: str, n: int) -> dict:
    """Seconds per phase for one ``n`` (a refusal is reported as its error)."""
    start = time.perf_counter()
    try:
        grammar = grammar_for(kind, n)
    except gm.GrammaskError as e:
        return {"n": n, "refused_s": time.perf_counter() - start, "error": str(e)}
    t_ir = time.perf_counter()
    lexer = build_front(grammar).lexer
    t_front = time.perf_counter()
    stats = compiler.compile(grammar).stats
    return {
        "n": n, "schema_to_ir_s": t_ir - start, "lexer_and_lr_s": t_front - t_ir, "lexer_states": lexer.n_states,
        "compile_s": stats.seconds, "phases": {k: round(v, 3) for k, v in stats.phases.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="+")
    parser.add_argument("--tokenizer", default="llama3")
    parser.add_argument("--kind", choices=("schema", "regex"), default="schema")
    args = parser.parse_args()
    compiler = gm.Compiler(load_tokenizer(args.tokenizer).vocab, cache=False)
    compiler.compile(grammar_for(args.kind, 3))
    for n in args.sizes:
        print(measure(compiler, args.kind, n), flush=True)


if __name__ == "__main__":
    main()
