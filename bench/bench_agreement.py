"""Issue 13's agreement bar: grammask's verdict on whole documents against Lark's, for SynCode's 10
grammars and Lark's bundled python.lark and lark.lark.

Both sides use Lark's ``--lexer`` (``basic`` or ``contextual``). Per grammar: the cold compile
(``grammask.compile(g, vocab, cache=False)``), then ``--n`` sampled
documents (:class:`grammask.sampler.SentenceSampler`; real indentation for the Python grammars),
``--n`` mutations of them (1 to 3 characters inserted, deleted or swapped) and every program of the
seeds' benchmark (``data/seeds/``) for that language. grammask accepts a document when every token
of the tokenizer's encoding is allowed and EOS is allowed after the last; Lark accepts it when its
LALR parser (the same lexer and postlex) parses it. Any difference is a disagreement, listed
with where grammask rejected (token index, the token, the text before it) and Lark's error. A document
the tokenizer cannot spell (its encoding decodes to other bytes, as SmolLM2's does for a few
characters) is left out of the counts and counted apart (``unspellable``).

    python bench/bench_agreement.py [--n 500] [--grammars syncode-c,lark-python] [--seed 0] [--lexer basic] [--append]

Results go to ``results/agreement.md`` and ``agreement.json`` (``--out``; with ``--append`` the rows
of grammars not run now are kept from the JSON there, so grammars can be run one by one); the exit
code is 1 when a grammar run now disagrees, fails to compile or cannot be sampled.
"""

from __future__ import annotations

import os
import sys

from threads import THREAD_VARS

if __name__ == "__main__":
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import lark
from cases import (
    REAL_GRAMMARS,
    REAL_POSTLEX,
    REAL_PROGRAMS,
    BenchTokenizer,
    load_real_grammar,
    load_seed_grammar,
    load_tokenizer,
    real_grammar_source,
)
from harness import BenchError, make_postlex
from report import environment

import grammask as gm
from grammask.grammar.lark_frontend import _no_collision_check
from grammask.sampler import SentenceSampler, mutate

RESULTS = Path(__file__).resolve().parent / "results"
LARK_ERRORS = (lark.exceptions.LarkError, AssertionError, IndexError)
"""What Lark raises on a document it rejects (its Indenter raises IndexError on a newline without a line break)."""
MAX_DEPTH = 8
SAMPLE_TRIES = 3
"""Sample draws per wanted document before giving up (a draw fails when no lexemes lex apart)."""
MUTATION_CHARS = " \n\t\"'\\/*#()[]{}:;,.=+-0123456789abcxyzEe_"


@dataclass
class Example:
    """One disagreement: what kind of document, both verdicts, the text (shortened), where grammask
    rejected (token index, the token, the text before it) and Lark's error where it rejected."""

    kind: str
    lark: bool
    grammask: bool
    text: str
    rejected_at: int | None = None
    token: str = ""
    before: str = ""
    lark_error: str = ""


@dataclass
class Result:
    """One grammar's figures (counts are documents; ``*_agree`` those where the verdicts are equal;
    ``unspellable`` documents the tokenizer cannot encode back to their own text, left out of the counts)."""

    grammar: str
    postlex: str | None
    error: str = ""
    compile_s: float | None = None
    sampled: int = 0
    sampled_agree: int = 0
    sample_failures: int = 0
    mutated: int = 0
    mutated_agree: int = 0
    mutated_lark_accepts: int = 0
    programs: int = 0
    programs_agree: int = 0
    unspellable: int = 0
    check_s: float = 0.0
    examples: list[Example] = field(default_factory=list)

    @property
    def disagreements(self) -> int:
        """Documents of any kind where the verdicts differ."""
        return (self.sampled - self.sampled_agree) + (self.mutated - self.mutated_agree) + (self.programs - self.programs_agree)


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else f"{text[: limit // 2]} … {text[-limit // 2 :]}"


class Judges:
    """grammask's and Lark's verdicts on whole documents of one grammar."""

    def __init__(self, compiled: gm.CompiledGrammar, parser: lark.Lark, tok: BenchTokenizer):
        self.compiled, self.parser, self.tok = compiled, parser, tok

    def lark(self, text: str) -> str | None:
        """None when Lark parses ``text``, else the first line of its error."""
        try:
            self.parser.parse(text)
        except LARK_ERRORS as e:
            return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        return None

    def grammask(self, text: str) -> tuple[bool, int | None]:
        """Whether grammask accepts ``text``, and the index of the token it rejected (None: it took
        every token; then a rejection is EOS's)."""
        matcher = self.compiled.matcher()
        ids = self.tok.encode(text)
        for i, t in enumerate(ids):
            if not matcher.accept_token(t):
                return False, i
        return matcher.is_accepting(), None


def check(result: Result, judges: Judges, kind: str, text: str, n_examples: int) -> tuple[bool, bool]:
    """Judge one document, count it under ``kind`` and keep it as an example when the verdicts differ;
    returns (Lark's verdict, whether they agree). A document the tokenizer cannot spell (its encoding
    decodes to other bytes: SmolLM2 drops a few) is counted as ``unspellable`` instead: no token
    sequence of that vocabulary writes it, so neither verdict can be checked; returns (False, True)."""
    if judges.tok.vocab.decode(judges.tok.encode(text)) != text.encode():
        result.unspellable += 1
        return False, True
    error = judges.lark(text)
    want = error is None
    got, at = judges.grammask(text)
    agree = want == got
    setattr(result, kind, getattr(result, kind) + 1)
    setattr(result, f"{kind}_agree", getattr(result, f"{kind}_agree") + agree)
    if not agree and sum(e.kind == kind for e in result.examples) < n_examples:
        pieces = [judges.tok.vocab.tokens[t] or b"" for t in judges.tok.encode(text)]
        token = "" if at is None else pieces[at].decode("utf-8", "replace")
        before = "" if at is None else b"".join(pieces[:at]).decode("utf-8", "replace")[-60:]
        result.examples.append(Example(kind, want, got, _shorten(text), at, token, before, error or ""))
    return want, agree


def run_grammar(name: str, tok: BenchTokenizer, n: int, seed: int, lexer: str, n_examples: int) -> Result:
    """All of one grammar's figures; a grammar that grammask does not load or compile, Lark does not
    build or the sampler cannot sample gets its error."""
    postlex = REAL_POSTLEX.get(name)
    result = Result(name, postlex)
    try:
        text = real_grammar_source(name)
        grammar = load_real_grammar(name, lexer)
        t0 = time.perf_counter()
        compiled = gm.compile(grammar, tok.vocab, cache=False)
        result.compile_s = round(time.perf_counter() - t0, 2)
    except gm.GrammaskError as e:
        result.error = f"compile: {type(e).__name__}: {e}"
        return result
    try:
        with _no_collision_check():
            parser = lark.Lark(text, parser="lalr", lexer=lexer, postlex=make_postlex(postlex),
                               start=grammar.start)
    except lark.exceptions.LarkError as e:
        result.error = f"Lark: {type(e).__name__}: {str(e).strip().splitlines()[0]}"
        return result
    judges = Judges(compiled, parser, tok)
    t0 = time.perf_counter()
    if name in REAL_PROGRAMS:
        for _, program in load_seed_grammar(REAL_PROGRAMS[name]).programs:
            check(result, judges, "programs", program, n_examples)
    try:
        sampler = SentenceSampler(grammar, max_depth=MAX_DEPTH)
    except gm.GrammaskError as e:
        result.error = f"sampler: {type(e).__name__}: {e}"
        result.check_s = round(time.perf_counter() - t0, 2)
        return result
    rng = random.Random(seed)
    alphabet = "".join(sorted({ch for t in grammar.terminals if t.literal for ch in t.literal} | set(MUTATION_CHARS)))
    for _ in range(n * SAMPLE_TRIES):
        if result.sampled == n:
            break
        try:
            doc = sampler.sample(rng)
        except gm.GrammaskError:
            result.sample_failures += 1
            continue
        check(result, judges, "sampled", doc, n_examples)
        lark_ok, _ = check(result, judges, "mutated", mutate(doc, rng, alphabet, edits=rng.randint(1, 3)), n_examples)
        result.mutated_lark_accepts += lark_ok
    if result.sampled < n:
        result.error = f"sampler: {result.sample_failures} of {n * SAMPLE_TRIES} draws failed; {result.sampled} documents"
    result.check_s = round(time.perf_counter() - t0, 2)
    return result


def markdown(results: Sequence[Result], header: str) -> str:
    """The results table and each grammar's disagreements, as Markdown."""
    lines = [header, "", "| grammar | postlex | compile cold (s) | sampled (agree) | failed draws | mutated (agree) | mutated Lark accepts | programs (agree) | unspellable | check (s) | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        compile_s = "" if r.compile_s is None else f"{r.compile_s:.2f}"
        lines.append(
            f"| {r.grammar} | {r.postlex or ''} | {compile_s} | {r.sampled} ({r.sampled_agree}) | {r.sample_failures} | {r.mutated} ({r.mutated_agree}) "
            f"| {r.mutated_lark_accepts} | {r.programs} ({r.programs_agree}) | {r.unspellable} | {r.check_s:.1f} | {r.error.replace('|', '/')} |"
        )
    for r in results:
        if r.examples:
            lines += ["", f"### {r.grammar}: first disagreements", ""]
            for e in r.examples:
                where = "EOS refused" if e.rejected_at is None and not e.grammask else (
                    "grammask accepts" if e.grammask else f"grammask refuses token {e.rejected_at} {e.token!r} after {e.before!r}")
                lark_says = "Lark accepts" if e.lark else f"Lark rejects ({e.lark_error})"
                lines.append(f"- {e.kind}: {lark_says}, {where}: `{e.text!r}`")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agreement check as the command line asks; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammars", default=",".join(REAL_GRAMMARS), help="comma-separated, from: " + ", ".join(REAL_GRAMMARS))
    ap.add_argument("--n", type=int, default=500, help="sampled (and as many mutated) documents per grammar")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lexer", default="basic", choices=("basic", "contextual"), help="Lark's lexer (both sides)")
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--examples", type=int, default=3, help="disagreements kept per grammar and kind of document")
    ap.add_argument("--append", action="store_true", help="keep the other grammars' rows of an earlier --out")
    ap.add_argument("--out", type=Path, default=RESULTS / "agreement.md", help="Markdown; the JSON goes beside it")
    args = ap.parse_args(argv)
    names = [g for g in args.grammars.split(",") if g]
    unknown = [g for g in names if g not in REAL_GRAMMARS]
    if unknown:
        ap.error(f"unknown grammar(s) {', '.join(unknown)}; choose from {', '.join(REAL_GRAMMARS)}")
    tok = load_tokenizer(args.tokenizer)
    t0 = time.perf_counter()
    gm.compile(gm.Grammar.from_lark('start: "a"'), tok.vocab, cache=False)  # the vocabulary's one-time work
    warm_up = time.perf_counter() - t0
    results = []
    for name in names:
        r = run_grammar(name, tok, args.n, args.seed, args.lexer, args.examples)
        print(json.dumps({k: v for k, v in asdict(r).items() if k != "examples"}), flush=True)
        results.append(r)
    env = environment(1)
    header = (f"Agreement with Lark (parser=lalr, lexer={args.lexer}), tokenizer {args.tokenizer}, n={args.n}, "
              f"seed {args.seed}; measured {env['date']} on {env['cpu']}, Python {env['python']}, one thread; "
              f"compile times follow a {warm_up:.1f} s warm-up compile of a one-rule grammar (the vocabulary's one-time work).")
    failed = any(r.error or r.disagreements for r in results)
    json_path = args.out.with_suffix(".json")
    if args.append and json_path.exists():
        kept = [_result(d) for d in json.loads(json_path.read_text(encoding="utf-8"))["results"] if d["grammar"] not in names]
        results = sorted(kept + results, key=lambda r: REAL_GRAMMARS.index(r.grammar))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(results, header), encoding="utf-8")
    payload = {"header": header, "results": [asdict(r) | {"disagreements": r.disagreements} for r in results]}
    json_path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return int(failed)


def _result(row: dict) -> Result:
    """A :class:`Result` back from its JSON row."""
    fields = {k: v for k, v in row.items() if k not in ("disagreements", "examples")}
    return Result(**fields, examples=[Example(**e) for e in row["examples"]])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
