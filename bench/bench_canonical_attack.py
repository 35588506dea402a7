"""Issue 15's "no dead ends, attacked" bar: random and adversarial choosers drive canonical matchers.

Cases: the built-in JSON and C grammars, the first ``--schemas`` JSON-Mode-Eval schemas and ``--regexes``
patterns of ``tests/data/regexes.json`` (those a canonical matcher takes: a pattern with no canonically
tokenized string, or a schema with counted length bounds, is listed as skipped with the reason), on SmolLM2
and Llama-3. Each run drives ``compiled.matcher(canonical=True)`` (with ``--budgets``, also runs under
``max_tokens=N``) with one chooser until ``--cap`` tokens, EOS avoided; then it must finish: it follows
the canonical completion that ``grammask.canonical_budget.complete`` finds within ``--finish`` more
tokens (a search in plain-cost order, every step the matcher's own ``advance``), then EOS. A budgeted run
(budget drawn between the plain shortest output and ``--cap`` + 8) avoids EOS until the matcher leaves
nothing else, and must end within its budget; a budget no canonical output is found to fit is refused
up front (``BudgetError``, counted as ``refused``, not a failure).

Choosers (the adversarial ones try to reach a dead end):

* ``uniform``: uniform over the allowed tokens;
* ``longest``: the longest allowed token;
* ``midlexeme``: tokens that end inside a lexeme the grammar cannot end there (``" fals"``), then inside one;
* ``narrow``: of 6 allowed tokens, the one that leaves the longest undecided run of tokens in the relation
  (the tokens it cannot yet cut off: the fewest ways on); ``narrowest`` measures the allowed set instead
  (of 3: a relation state costs about 0.1 s the first time);
* ``space``: whitespace tokens and tokens that end in whitespace (Llama-3's ``\\s+(?!\\S)`` cut);
* ``rare``: tokens that end in a byte no merge joins often (punctuation, digits, non-ASCII).

A token is *allowed* when the canonical matcher's ``advance`` takes it (the check-first path, with the
same verdict as the mask): a chooser tries tokens of the grammar's own mask in its order of preference,
which costs a few milliseconds a step where the whole mask of a new relation state costs about 0.1 s.
A ``--full-share`` of the runs fills the whole mask at every step instead, chooses from it and checks
that ``advance`` takes the choice. Where no tried token is taken, the whole mask is filled: an empty
one is a dead end.

Failures: ``empty`` (the mask is empty before the end), ``unfinished`` (no EOS within the caps, or a
budgeted run at its budget without EOS), ``not_own_encoding`` (the token ids are not the HF tokenizer's
encoding of the decoded text, no special tokens), ``mask_mismatch`` (``advance`` refuses a token of the
mask), ``error`` (an exception). Results go to ``--out`` (markdown) and a ``.json`` beside it.

    python bench/bench_canonical_attack.py                      # the bar: >= 10,000 runs
    python bench/bench_canonical_attack.py --runs 200 --tokenizers smollm2 --cases json,regex
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
from cases import jme_dir, load_tokenizer, regexes

import grammask as gm
from grammask.canonical_budget import complete
from grammask.errors import (
    BudgetError,
    CanonicalError,
    ConfigurationError,
    GrammaskError,
    TokenRejectedError,
)

BENCH_DIR = Path(__file__).resolve().parent
CHOOSERS = ("uniform", "longest", "midlexeme", "narrow", "narrowest", "space", "rare")
# How often each chooser drives a run; narrowest pays for whole relation states, so only when asked for.
CHOOSER_WEIGHTS = {"uniform": 3, "longest": 2, "midlexeme": 2, "narrow": 1, "narrowest": 1, "space": 2, "rare": 1}
DEFAULT_CHOOSERS = tuple(c for c in CHOOSERS if c != "narrowest")
KINDS = ("json", "c", "jme", "regex")
_TRIES = 400  # tokens tried per step before the whole mask is filled


@dataclass
class Case:
    """One grammar on one tokenizer, with its compiled form."""

    tokenizer: str
    kind: str
    name: str
    compiled: gm.CompiledGrammar
    encode: Callable[[str], list[int]] = field(repr=False)


@dataclass
class RunResult:
    case: str
    tokenizer: str
    kind: str
    chooser: str
    budget: int | None
    full_mask: bool
    outcome: str  # "ok" or a failure kind
    tokens: int
    seconds: float
    detail: str = ""


class Run:
    """One attack run: a canonical matcher, a chooser, and what it has produced so far."""

    def __init__(self, case: Case, chooser: str, rng: random.Random, budget: int | None, full_mask: bool):
        self.case = case
        self.vocab = case.compiled.vocab
        self.chooser = chooser
        self.rng = rng
        self.budget = budget
        self.full_mask = full_mask
        self.matcher = case.compiled.matcher(canonical=True, max_tokens=budget) if budget else \
            case.compiled.matcher(canonical=True)
        self.eos = sorted(self.vocab.eos_ids)
        self.tokens: list[int] = []

    # ---- what the matcher allows ----

    def take(self, token: int) -> bool:
        """Advance by ``token`` if the matcher allows it."""
        try:
            self.matcher.advance(token)
        except TokenRejectedError:
            return False
        self.tokens.append(token)
        return True

    def grammar_tokens(self) -> np.ndarray:
        """The tokens the grammar alone allows (a superset of the canonical mask), EOS left out."""
        ids = self.matcher._matcher.allowed_tokens()
        return ids[~np.isin(ids, self.eos)]

    def full(self) -> list[int]:
        """The canonical matcher's whole mask, EOS left out; raises ``_Failure('empty')`` when it is empty."""
        ids = self.matcher.allowed_tokens()
        if len(ids) == 0:
            raise _Failure("empty", f"empty mask after {self.text()!r} {self.tokens}")
        return [t for t in ids.tolist() if t not in self.eos]

    def text(self) -> str:
        return self.vocab.decode(self.tokens).decode("utf-8", errors="replace")

    # ---- one step ----

    def finish(self, finish: int) -> None:
        """Finish an unbudgeted run: the canonical completion :func:`complete` finds, then EOS."""
        witness = complete(self.matcher, finish, nodes=400)
        if witness is None:
            raise _Failure("unfinished", f"no canonical completion found within {finish} tokens after {self.text()!r} "
                                         f"{self.tokens}")
        for token in witness:
            if not self.take(token):
                raise _Failure("mask_mismatch", f"advance refuses the completion's {self.vocab.tokens[token]!r} "
                                                f"after {self.text()!r}")
        self.take_eos()

    def step(self) -> bool:
        """Take one token, EOS only where nothing else is allowed; True once EOS is taken."""
        if self.full_mask:
            return self.from_mask(lambda allowed: self.order(np.array(allowed))[0])
        for token in self.order(self.grammar_tokens())[:_TRIES]:
            if self.take(token):
                return False
        return self.from_mask(self.rng.choice)

    def from_mask(self, pick: Callable[[list[int]], int]) -> bool:
        """Take the token ``pick`` chooses from the whole mask (EOS where nothing else is allowed); True after EOS."""
        allowed = self.full()
        if not allowed:
            if not self.matcher.is_accepting():
                raise _Failure("empty", f"only EOS in the mask but not accepting after {self.text()!r}")
            self.take_eos()
            return True
        token = pick(allowed)
        if not self.take(token):
            raise _Failure("mask_mismatch", f"advance refuses {self.vocab.tokens[token]!r} of the mask after "
                                            f"{self.text()!r}")
        return False

    def take_eos(self) -> None:
        try:
            self.matcher.advance(self.eos[0])
        except TokenRejectedError as e:
            raise _Failure("mask_mismatch", f"EOS refused while accepting after {self.text()!r}: {e}") from e

    # ---- choosers: the order in which tokens are tried ----

    def order(self, candidates: np.ndarray) -> list[int]:
        """``candidates`` in the order this run's chooser tries them."""
        rng = self.rng
        if len(candidates) == 0:
            return []
        shuffled = candidates[np.random.default_rng(rng.getrandbits(32)).permutation(len(candidates))]
        chooser = self.chooser
        if chooser == "uniform":
            return shuffled.tolist()
        if chooser in ("longest", "space", "rare"):  # a stable sort by a per-token key, as sorted(key=...) would
            key = _chooser_keys(self.vocab)[chooser]
            return shuffled[np.argsort(key[shuffled], kind="stable")].tolist()
        if chooser == "midlexeme":
            return self.midlexeme_first(shuffled.tolist())
        return self.narrow_first(shuffled.tolist(), exact=chooser == "narrowest")

    def midlexeme_first(self, shuffled: list[int]) -> list[int]:
        """Of 30 tokens, those that leave a lexeme the grammar cannot end there first, then inside one."""
        plain = self.matcher._matcher
        lexer = self.case.compiled._engine.lexer
        rank = {}
        for t in shuffled[:30]:
            probe = plain.fork()
            probe.advance(t)
            q = probe.lexer_state
            rank[t] = 0 if q > 0 and lexer.accept[q] < 0 else 1 if q > 0 else 2
        return sorted(shuffled, key=lambda t: rank.get(t, 3))

    def narrow_first(self, shuffled: list[int], exact: bool) -> list[int]:
        """Of a few allowed tokens, the one after which the relation allows least first (see the module doc)."""
        relation = self.case.compiled._relation_of()
        keep = 3 if exact else 6
        scored, tried = [], 0
        for t in shuffled:
            if tried >= 20 or len(scored) >= keep:
                break
            tried += 1
            probe = self.matcher.fork()
            try:
                probe.advance(t)
            except TokenRejectedError:
                continue
            r = probe.relation_state
            with relation.lock:
                score = -int(np.unpackbits(relation.allowed_words(r).view(np.uint8)).sum()) if exact else \
                    len(relation._states[r][1])
            scored.append((score, t))
        best = [t for _, t in sorted(scored, key=lambda s: -s[0])]
        return best + [t for t in shuffled if t not in best]

    # ---- the run ----

    def run(self, cap: int, finish: int) -> RunResult:
        start = time.perf_counter()
        outcome, detail = "ok", ""
        try:
            limit = self.budget if self.budget else cap
            done = False
            while not done and len(self.tokens) < limit:
                done = self.step()
            if not done and self.budget:
                if not self.matcher.is_accepting():
                    raise _Failure("unfinished", f"no EOS within the budget {self.budget}: {self.text()!r}")
                self.take_eos()  # at the budget: EOS must be the one token left
            elif not done:
                self.finish(finish)
            self.check_output()
        except _Failure as f:
            outcome, detail = f.kind, f.detail
        except (GrammaskError, ValueError, AssertionError, KeyError, IndexError) as e:
            outcome, detail = "error", f"{type(e).__name__}: {e} after {self.text()!r}\n{traceback.format_exc(limit=4)}"
        c = self.case
        return RunResult(c.name, c.tokenizer, c.kind, self.chooser, self.budget, self.full_mask, outcome,
                         len(self.tokens), time.perf_counter() - start, detail)

    def check_output(self) -> None:
        if not self.matcher.is_terminated():
            raise _Failure("unfinished", f"ended without EOS: {self.text()!r}")
        if self.budget is not None and len(self.tokens) + 1 > self.budget:
            raise _Failure("unfinished", f"{len(self.tokens)} tokens + EOS over the budget {self.budget}")
        try:
            text = self.vocab.decode(self.tokens).decode("utf-8")
        except UnicodeDecodeError:
            raise _Failure("not_own_encoding", f"not UTF-8: {self.vocab.decode(self.tokens)!r}") from None
        own = self.case.encode(text)
        if own != self.tokens:
            raise _Failure("not_own_encoding", f"{text!r}: ids {self.tokens} but the tokenizer writes {own}")


_KEYS: dict[int, dict[str, np.ndarray]] = {}


def _chooser_keys(vocab: gm.Vocabulary) -> dict[str, np.ndarray]:
    """Per token id, the sort key of the ``longest``, ``space`` and ``rare`` choosers (lower first); per vocabulary."""
    found = _KEYS.get(id(vocab))
    if found is None:
        tokens = [t or b"" for t in vocab.tokens]
        found = _KEYS[id(vocab)] = {
            "longest": np.array([-len(t) for t in tokens], dtype=np.int64),
            "space": np.array([2 * (not t.isspace()) + (not t[-1:].isspace()) for t in tokens], dtype=np.int64),
            "rare": np.array([t[-1:].isalpha() or t[-1:] == b" " for t in tokens], dtype=np.int64),
        }
    return found


class _Failure(Exception):
    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


# ---- cases ----


def load_cases(tokenizers: Sequence[str], kinds: Sequence[str], schemas: int, n_regexes: int,
               log: Callable[[str], None]) -> tuple[list[Case], list[tuple[str, str, str]]]:
    """The cases to attack, and those skipped: (tokenizer, case, reason)."""
    cases, skipped = [], []
    for name in tokenizers:
        tok = load_tokenizer(name)
        compiler = gm.Compiler(tok.vocab)
        grammars: list[tuple[str, str, Callable[[], gm.Grammar]]] = []
        if "json" in kinds:
            grammars.append(("json", "json", lambda: gm.Grammar.builtin("json")))
        if "c" in kinds:
            grammars.append(("c", "c", lambda: gm.Grammar.builtin("c")))
        if "jme" in kinds:
            paths = sorted(jme_dir().glob("JME_*.json"), key=lambda p: int(p.stem.split("_")[1]))[:schemas]
            for path in paths:
                schema = json.loads(path.read_text(encoding="utf-8"))["schema"]
                grammars.append(("jme", path.stem, lambda s=schema, n=path.stem: gm.Grammar.from_json_schema(s, name=n)))
        if "regex" in kinds:
            for k, pattern in enumerate(regexes()[:n_regexes]):
                grammars.append(("regex", f"re{k}:{pattern}", lambda p=pattern: gm.Grammar.from_regex(p)))
        for kind, label, make in grammars:
            start = time.perf_counter()
            try:
                compiled = compiler.compile(make())
                compiled.matcher(canonical=True)
            except (CanonicalError, ConfigurationError) as e:
                skipped.append((name, label, f"{type(e).__name__}: {e}"))
                log(f"skip {name} {label}: {e}")
                continue
            cases.append(Case(name, kind, label, compiled, tok.encode))
            log(f"case {name} {label}: ready in {time.perf_counter() - start:.1f} s")
    return cases, skipped


# ---- driving and reporting ----


def attack(cases: Sequence[Case], runs: int, seed: int, cap: int, finish: int, budgets: bool, full_share: float,
           log: Callable[[str], None], choosers: Sequence[str] = DEFAULT_CHOOSERS,
           seconds: float | None = None) -> list[RunResult]:
    """``runs`` runs spread over the cases in turn, each with a chooser drawn by :data:`CHOOSER_WEIGHTS`;
    with ``budgets``, every other run is budgeted (a budget drawn between the shortest output and ``cap`` + 8).
    ``seconds``: no run starts after that long."""
    rng = random.Random(seed)
    weights = [CHOOSER_WEIGHTS[c] for c in choosers]
    results = []
    start = last = time.perf_counter()
    for k in range(runs):
        if seconds is not None and time.perf_counter() - start > seconds:
            log(f"time is up after {k} runs")
            break
        case = cases[k % len(cases)]
        chooser = rng.choices(choosers, weights)[0]
        budget = None
        if budgets and k % 2 == 1:
            least = case.compiled.matcher().min_tokens_to_finish()
            budget = rng.randint(max(1, least), max(least, cap) + 8)
        full_mask = rng.random() < full_share
        run_rng = random.Random(rng.getrandbits(64))
        try:
            run = Run(case, chooser, run_rng, budget, full_mask)
        except BudgetError as e:  # no canonical output found within the budget: refused up front, as documented
            results.append(RunResult(case.name, case.tokenizer, case.kind, chooser, budget, full_mask, "refused", 0,
                                     0.0, str(e)))
            continue
        result = run.run(cap, finish)
        results.append(result)
        if result.outcome not in ("ok", "refused"):
            print(f"FAIL {result.outcome} {case.tokenizer} {case.name} {chooser} budget={budget}: {result.detail[:600]}",
                  flush=True)
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            bad = sum(r.outcome not in ("ok", "refused") for r in results)
            print(f"{k + 1}/{runs} runs, {bad} failed", flush=True)
    return results


def summarize(results: Sequence[RunResult]) -> dict:
    """Counts per (tokenizer, kind, budgeted), per chooser and per case, and the failures."""
    rows: dict[tuple, Counter] = defaultdict(Counter)
    for r in results:
        key = (r.tokenizer, r.kind, r.budget is not None)
        rows[key]["runs"] += 1
        rows[key][r.outcome] += 1
        rows[key]["tokens"] += r.tokens
        rows[key]["seconds"] += r.seconds
        rows[key]["full_mask"] += r.full_mask
    by_chooser = Counter(r.chooser for r in results)
    return {
        "runs": len(results),
        "failures": sum(r.outcome not in ("ok", "refused") for r in results),
        "rows": [{"tokenizer": k[0], "kind": k[1], "budgeted": k[2], **dict(v)} for k, v in sorted(rows.items())],
        "choosers": dict(by_chooser),
        "per_case": dict(Counter(f"{r.tokenizer} {r.case}" for r in results)),
        "failed": [r.__dict__ for r in results if r.outcome not in ("ok", "refused")],
    }


def write_report(summary: dict, skipped: Sequence[tuple[str, str, str]], argv: Sequence[str], out: Path) -> None:
    lines = [
        "# Canonical matchers attacked (issue 15)",
        "",
        f"`python bench/bench_canonical_attack.py {' '.join(argv)}`",
        "",
        f"**{summary['runs']} runs, {summary['failures']} failures.** Choosers: "
        + ", ".join(f"{k} {v}" for k, v in sorted(summary["choosers"].items())) + ".",
        "",
        "| tokenizer | cases | budgeted | runs | ok | failures | whole-mask runs | tokens | s/run |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary["rows"]:
        bad = {k: v for k, v in row.items() if k in ("empty", "unfinished", "not_own_encoding", "mask_mismatch",
                                                       "error")}
        lines.append(
            f"| {row['tokenizer']} | {row['kind']} | {'yes' if row['budgeted'] else 'no'} | {row['runs']} "
            f"| {row.get('ok', 0)} | {', '.join(f'{k} {v}' for k, v in bad.items()) or 0} | {row['full_mask']} "
            f"| {row['tokens']} | {row['seconds'] / row['runs']:.2f} |"
        )
    if skipped:
        lines += ["", "Skipped cases:", ""] + [f"- {t} `{c}`: {why}" for t, c, why in skipped]
    if summary["failed"]:
        lines += ["", "Failures (first 30):", ""]
        lines += [f"- {f['outcome']} {f['tokenizer']} `{f['case']}` {f['chooser']} budget={f['budget']}: "
                  f"{f['detail'][:300]!r}" for f in summary["failed"][:30]]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps({"summary": summary, "skipped": skipped}, indent=1),
                                        encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--tokenizers", default="smollm2,llama3")
    p.add_argument("--cases", default=",".join(KINDS), help="json,c,jme,regex")
    p.add_argument("--schemas", type=int, default=20)
    p.add_argument("--regexes", type=int, default=20)
    p.add_argument("--choosers", default=",".join(DEFAULT_CHOOSERS))
    p.add_argument("--cap", type=int, default=24, help="tokens before a run must finish")
    p.add_argument("--finish", type=int, default=200, help="tokens a run may take to finish after the cap")
    p.add_argument("--budgets", action="store_true", help="every other run under max_tokens")
    p.add_argument("--full-share", type=float, default=0.05, help="share of runs that fill the whole mask each step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "canonical_attack.md")
    p.add_argument("--minutes", type=float, help="start no run after this many minutes (the report covers those made)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, flush=True)

    kinds = args.cases.split(",")
    cases, skipped = load_cases(args.tokenizers.split(","), kinds, args.schemas, args.regexes, log)
    if not cases:
        print("no case to attack", file=sys.stderr)
        return 2
    start = time.perf_counter()
    results = attack(cases, args.runs, args.seed, args.cap, args.finish, args.budgets, args.full_share, log,
                     args.choosers.split(","), None if args.minutes is None else 60 * args.minutes)
    summary = summarize(results)
    summary["seconds"] = time.perf_counter() - start
    write_report(summary, skipped, argv, args.out)
    log(f"{summary['runs']} runs, {summary['failures']} failures, {summary['seconds']:.0f} s; see {args.out}")
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
