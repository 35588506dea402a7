"""What the bench scripts measure with: engines behind one stepping interface, grammask compiled
in a fresh process or in this one, the timed replay of a token sequence, and statistics of times.

Run as a script, this module is the compile worker: it reads one request (JSON) on stdin, compiles
once and prints the timing as one JSON line (see :func:`compile_in_subprocess`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from threads import one_thread_env

import grammask as gm
from grammask.bitmask import bitmask_words

DEFAULT_COMPILE_TIMEOUT_S = 300.0


class BenchError(Exception):
    """The benchmark cannot run as asked (missing data, a document outside its grammar)."""


class NotApplicable(Exception):
    """This engine cannot run this case; the message says why (shown in the results table)."""


@dataclass
class Stepper:
    """One sequence's matcher, reduced to the calls the replay times.

    ``fill()`` writes the next mask into ``row`` (int32 words, bit ``t % 32`` of word ``t // 32``);
    ``advance(t)`` consumes token ``t`` and returns ``False`` (or raises) when it is rejected;
    ``terminated()`` says whether the matcher has consumed EOS.
    """

    row: np.ndarray
    fill: Callable[[], object]
    advance: Callable[[int], object]
    terminated: Callable[[], bool]


@dataclass
class Build:
    """A compiled grammar: compile times in seconds (``cached_s`` is None when not measured), a
    factory for fresh steppers, extra fields for the results row, and a factory for the engine's
    own fresh matchers (for the batch benchmark; None where not given)."""

    cold_s: float
    cached_s: float | None
    new_stepper: Callable[[], Stepper]
    extra: dict = field(default_factory=dict)
    new_matcher: Callable[[], object] | None = None


# ---- grammask ---------------------------------------------------------------------------------


def make_postlex(spec: str | None):
    """A fresh instance of the postlexer class named ``"module:Class"`` (None for None)."""
    if spec is None:
        return None
    module, _, qualname = spec.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj()


def from_lark_takes_postlex() -> bool:
    """Whether this grammask's ``Grammar.from_lark`` has a ``postlex`` argument."""
    try:
        return "postlex" in inspect.signature(gm.Grammar.from_lark).parameters
    except (TypeError, ValueError):
        return False


class NoPostlexSupport(Exception):
    """``Grammar.from_lark`` takes no ``postlex=`` (yet); the message carries its error without one."""


def lark_grammar(
    lark_text: str, name: str, postlex: str | None = None, *, lexer: str = "basic", start: str = "start"
) -> gm.Grammar:
    """``Grammar.from_lark(lark_text, name=name, postlex=<instance>, lexer=lexer, start=start)`` (the judge of
    most of these benchmarks is Lark's basic lexer), or without ``postlex`` when None.

    Where grammask's ``from_lark`` has no ``postlex`` argument yet, the grammar is loaded without it
    and whatever that raises (``%declare``d terminals with no pattern) is raised again as
    :class:`NoPostlexSupport`, saying so.
    """
    if postlex is None:
        return gm.Grammar.from_lark(lark_text, name=name, lexer=lexer, start=start)
    if from_lark_takes_postlex():
        return gm.Grammar.from_lark(lark_text, name=name, postlex=make_postlex(postlex), lexer=lexer, start=start)
    try:
        gm.Grammar.from_lark(lark_text, name=name)
    except gm.GrammaskError as e:
        raise NoPostlexSupport(
            f"Grammar.from_lark has no postlex= argument here; without {postlex}: {type(e).__name__}: {e}"
        ) from None
    raise NoPostlexSupport(f"Grammar.from_lark has no postlex= argument here (the grammar loads without {postlex})")


def grammask_stepper(compiled: gm.CompiledGrammar, n_logits: int) -> Stepper:
    """A fresh grammask matcher on ``compiled`` as a :class:`Stepper`."""
    matcher = compiled.matcher()
    row = np.zeros(bitmask_words(n_logits), dtype=np.int32)
    return Stepper(row, partial(matcher.fill_mask, row), matcher.advance, matcher.is_terminated)


def compile_here(grammar_of: Callable[[], gm.Grammar], vocab: gm.Vocabulary) -> Build:
    """Compile ``grammar_of()`` in this process without any cache; ``cold_s`` times both calls."""
    t0 = time.perf_counter()
    compiled = gm.compile(grammar_of(), vocab, cache=False)
    seconds = time.perf_counter() - t0
    return Build(seconds, None, partial(grammask_stepper, compiled, vocab.n_logits))


def compile_once(request: dict) -> dict:
    """The compile worker's body: compile once, timing the call (wall and CPU seconds), with the tracemalloc
    peak if asked.

    ``cache`` is a cache directory, or None for a fresh ``Compiler(vocab, cache=False)`` (no disk). The grammar
    is ``Grammar.builtin(request["builtin"])`` where that is given, else the Lark text under ``lexer`` and
    ``start`` (default ``basic``, ``start``).
    """
    if request.get("builtin"):
        grammar = gm.Grammar.builtin(request["builtin"])
    else:
        grammar = lark_grammar(request["lark_text"], request["name"], request.get("postlex"),
                               lexer=request.get("lexer", "basic"), start=request.get("start", "start"))
    vocab = gm.Vocabulary.from_tokenizer_json(request["tokenizer_json"])
    cache = False if request["cache"] is None else request["cache"]
    if request["trace"]:
        tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    compiled = gm.Compiler(vocab, cache=cache).compile(grammar)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1] if request["trace"] else None
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "table_bytes": compiled.nbytes,
            "tracemalloc_peak_bytes": peak}


def compile_in_subprocess(
    lark_text: str,
    name: str,
    tokenizer_json: str,
    cache: Path | None,
    trace: bool,
    timeout_s: float,
    postlex: str | None = None,
    **grammar: str,
) -> dict:
    """Run :func:`compile_once` in a fresh one-thread process; its result, or :class:`BenchError`.

    ``cache``: the cache directory, or None for no disk cache. ``grammar``: ``lexer``, ``start`` or ``builtin``
    (see :func:`compile_once`).
    """
    request = {
        "name": name,
        "lark_text": lark_text,
        "tokenizer_json": tokenizer_json,
        "cache": None if cache is None else str(cache),
        "trace": trace,
        "postlex": postlex,
        **grammar,
    }
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve())],
            input=json.dumps(request),
            check=False,
            capture_output=True,
            text=True,
            env=one_thread_env(),
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"grammask compile ran past --compile-timeout ({timeout_s:g} s) and was stopped") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"grammask compile failed in a subprocess: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_grammask(
    lark_text: str,
    name: str,
    vocab: gm.Vocabulary,
    tokenizer_json: str,
    timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
    *,
    postlex: str | None = None,
    trace: bool = True,
    cold_on_disk: bool = True,
) -> Build:
    """Compile in fresh processes: cold, cached (reading the cache a cold compile wrote), and cold
    under tracemalloc (skipped, peak None, when ``trace`` is False).

    ``cold_on_disk``: the cold compile writes the cache (into an empty directory; the matcher for the
    replay then comes from that cache). False: the cold compile is a fresh ``Compiler(vocab,
    cache=False)``, no disk at all, and this process compiles once more to write the cache, its
    matcher serving the replay. ``postlex``: the grammar's postlexer as ``"module:Class"``.
    """
    grammar = lark_grammar(lark_text, name, postlex)  # a grammar grammask cannot load fails here, fast
    compile_at = partial(compile_in_subprocess, lark_text, name, tokenizer_json, timeout_s=timeout_s, postlex=postlex)
    root = Path(tempfile.mkdtemp(prefix="grammask-bench-"))
    try:
        if cold_on_disk:
            cold = compile_at(root / "cache", False)
            cached = compile_at(root / "cache", False)
        else:
            cold = compile_at(None, False)
        compiled = gm.compile(grammar, vocab, cache=root / "cache")
        if not cold_on_disk:
            cached = compile_at(root / "cache", False)
        traced = compile_at(root / "traced", True) if trace else {"tracemalloc_peak_bytes": None}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    memory = {"table_bytes": cold["table_bytes"], "tracemalloc_peak_bytes": traced["tracemalloc_peak_bytes"]}
    return Build(
        cold["seconds"],
        cached["seconds"],
        partial(grammask_stepper, compiled, vocab.n_logits),
        {"version": gm.__version__, "memory": memory},
    )


# ---- replay -----------------------------------------------------------------------------------


@dataclass
class Replay:
    """One replay of a token sequence: the times in ns of the masks and advances made, the steps
    where EOS disagreed with the expectation, and the first failure."""

    mask_ns: np.ndarray
    advance_ns: np.ndarray
    eos_mismatches: list[int]
    failure: str | None = None
    cut: bool = False
    """Stopped at its deadline before the end; the times cover the steps made."""

    def problem(self) -> str | None:
        """The failure, else the EOS mismatches as one message, else None."""
        if self.failure or not self.eos_mismatches:
            return self.failure
        return f"EOS allowed wrongly at steps {self.eos_mismatches}"


def allowed(row: np.ndarray, token: int) -> bool:
    """Whether bit ``token`` of the int32 bitmask ``row`` is set."""
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def replay(
    stepper: Stepper,
    tokens: Sequence[int],
    eos_ids: Sequence[int],
    eos_expected: Sequence[bool | None],
    deadline: float | None = None,
) -> Replay:
    """Step through ``tokens`` then EOS, timing each mask fill and each advance separately.

    Every token must be allowed by the mask before it; EOS must be allowed at step ``i`` iff
    ``eos_expected[i]`` (None: not judged at that step). A failure stops the replay, and the times
    then cover the steps made. ``deadline`` (a ``time.perf_counter()`` value): no step starts after
    it, and the replay comes back ``cut``.
    """
    fill, advance, row = stepper.fill, stepper.advance, stepper.row
    clock = time.perf_counter_ns
    n = len(tokens)
    mask_ns = np.zeros(n + 1, dtype=np.int64)
    advance_ns = np.zeros(n, dtype=np.int64)
    mismatches: list[int] = []
    for i in range(n + 1):
        if deadline is not None and time.perf_counter() > deadline:
            return Replay(mask_ns[:i], advance_ns[:i], mismatches, cut=True)
        t0 = clock()
        fill()
        mask_ns[i] = clock() - t0
        allowed_eos = [e for e in eos_ids if allowed(row, e)]
        if eos_expected[i] is not None and bool(allowed_eos) != eos_expected[i]:
            mismatches.append(i)
        if i == n and not allowed_eos:
            return Replay(mask_ns, advance_ns, mismatches)
        token = tokens[i] if i < n else allowed_eos[0]
        what = f"token {i} (id {token})" if i < n else f"EOS (id {token})"
        if not allowed(row, token):
            return Replay(mask_ns[: i + 1], advance_ns[:i], mismatches, f"{what} is masked")
        t0 = clock()
        try:
            ok = advance(token)
        except Exception as e:  # noqa: BLE001 - each engine raises its own kind on a rejected token
            ok, reason = False, f": {e}"
        else:
            reason = ""
        elapsed = clock() - t0
        if i < n:
            advance_ns[i] = elapsed
        if ok is False:
            failure = f"{what} allowed by the mask but rejected by advance{reason}"
            return Replay(mask_ns[: i + 1], advance_ns[: i + 1], mismatches, failure)
    failure = None if stepper.terminated() else "not terminated after EOS"
    return Replay(mask_ns, advance_ns, mismatches, failure)


def prefix_verdicts(pieces: Sequence[bytes], accepts: Callable[[str], bool]) -> list[bool]:
    """For every cut k in 0..len(pieces): does ``accepts`` take the text of pieces[:k]?

    A cut inside a UTF-8 character is not accepted.
    """
    out, buf = [], b""
    for k in range(len(pieces) + 1):
        try:
            out.append(accepts(buf.decode("utf-8")))
        except UnicodeDecodeError:
            out.append(False)
        if k < len(pieces):
            buf += pieces[k]
    return out


# ---- statistics -------------------------------------------------------------------------------


def step_stats(ns: np.ndarray, keys: tuple[str, ...]) -> dict[str, float]:
    """Mean, p50, p99 and max (those named by ``keys``) of step times, in µs."""
    us = ns / 1000.0
    funcs = {"mean": np.mean, "p50": np.median, "p99": partial(np.percentile, q=99), "max": np.max}
    return {k: float(funcs[k](us)) for k in keys}


def median_stats(per_replay: list[dict[str, float]]) -> dict[str, float]:
    """Each statistic's median over replays."""
    return {k: float(np.median([s[k] for s in per_replay])) for k in per_replay[0]}


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q < 1) of ``values``; NaN when there are none."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


@dataclass
class Tally:
    """One engine's compile times (s) and mask times (ns) over many grammars."""

    compile_s: list[float] = field(default_factory=list)
    mask_ns: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        """Compile p50 / p90 / mean in s, mask p50 / p99 in µs, and how many masks were timed."""
        return {
            "compile_p50_s": percentile(self.compile_s, 0.5),
            "compile_p90_s": percentile(self.compile_s, 0.9),
            "compile_mean_s": float(np.mean(self.compile_s)) if self.compile_s else float("nan"),
            "mask_p50_us": percentile(self.mask_ns, 0.5) / 1000.0,
            "mask_p99_us": percentile(self.mask_ns, 0.99) / 1000.0,
            "masks": len(self.mask_ns),
        }


def replay_each(
    builds: dict[str, Callable[[], Build]],
    tallies: dict[str, Tally],
    tokens: Sequence[int],
    eos_ids: Sequence[int],
    eos_expected: Sequence[bool | None],
) -> dict[str, str]:
    """Build each engine and replay ``tokens`` once, adding its times to its tally.

    Returns what went wrong per engine: ``"cannot compile: ..."`` for :class:`NotApplicable`, else
    the replay's :meth:`Replay.problem`; engines that passed are left out.
    """
    problems = {}
    for engine, build in builds.items():
        try:
            built = build()
        except NotApplicable as e:
            problems[engine] = f"cannot compile: {e}"
            continue
        result = replay(built.new_stepper(), tokens, eos_ids, eos_expected)
        tallies[engine].compile_s.append(built.cold_s)
        tallies[engine].mask_ns.extend(result.mask_ns.tolist())
        if problem := result.problem():
            problems[engine] = problem
    return problems


if __name__ == "__main__":
    print(json.dumps(compile_once(json.loads(sys.stdin.read()))))
