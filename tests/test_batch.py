"""``grammask.batch.fill_masks``: the same rows as each matcher's own ``fill_mask``, on threads, by index."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import get_compiled, get_vocab
from lark.indenter import Indenter

from grammask import Compiler, Grammar, Vocabulary, compile
from grammask.batch import fill_masks
from grammask.bitmask import allocate_bitmask, bitmask_words
from grammask.engine import MatcherView
from grammask.errors import ConfigurationError, MatcherStateError
from grammask.matcher import Matcher
from grammask.sampler import SentenceSampler

JME_SUBDIR = Path("shared") / "data" / "json-mode-eval"
JME_SCHEMAS = ("JME_0", "JME_7", "JME_23")


def _jme_schema(name: str) -> dict:
    for folder in Path(__file__).resolve().parents:
        path = folder / JME_SUBDIR / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))["schema"]
    pytest.skip(f"no {JME_SUBDIR} in a folder above the tests")


def _mid_document_matchers(compiled, vocab: Vocabulary, seed: int, n: int, budgets: bool = True) -> list[Matcher]:
    """``n`` matchers at random cuts of sampled documents: with and without budgets (if ``budgets``), some after EOS."""
    sampler = SentenceSampler(compiled.grammar, max_depth=8)
    rng = random.Random(seed)
    eos = min(vocab.eos_ids)
    shortest = compiled.matcher().min_tokens_to_finish() if budgets else 0
    out = []
    while len(out) < n:
        tokens = vocab.encode(sampler.sample(rng))
        finish = rng.random() < 0.15
        cut = len(tokens) if finish else rng.randint(0, len(tokens))
        budget = None if rng.random() < 0.5 or not budgets else max(shortest, len(tokens) + 1) + rng.randint(0, 3)
        m = compiled.matcher(max_tokens=budget)
        for t in tokens[:cut]:
            if not m.accept_token(t):  # a tight budget may refuse this tokenization: stop there
                break
        if finish and m.is_accepting():
            m.advance(eos)
        out.append(m)
    return out


def _one_by_one(matchers: list[Matcher], n_rows: int, rows: list[int]) -> np.ndarray:
    """The rows each matcher's own ``fill_mask`` gives, from a fork (the originals' memos untouched)."""
    out = np.full((n_rows, bitmask_words(matchers[0].compiled.vocab.n_logits)), 7, dtype=np.int32)
    for m, r in zip(matchers, rows, strict=True):
        m.fork().fill_mask(out[r])
    return out


def _check(matchers: list[Matcher], threads: int, seed: int) -> None:
    rng = random.Random(seed)
    n = len(matchers)
    expected = _one_by_one(matchers, n, list(range(n)))
    got = np.full_like(expected, -1)
    fill_masks(matchers, got, threads=threads)
    assert (got == expected).all(), np.nonzero((got != expected).any(axis=1))[0].tolist()
    # Again, half of them with the memo of their own fill_mask, into a shuffled wider bitmask by index.
    rows = rng.sample(range(n + 5), n)
    expected = _one_by_one(matchers, n + 5, rows)
    for m in matchers[::2]:
        m.fill_mask(np.empty_like(expected[0]))
    got = np.full_like(expected, 7)
    fill_masks(matchers, got, rows, threads=threads)
    assert (got == expected).all()


CASES = [("json", None), ("c", None), *(("schema", name) for name in JME_SCHEMAS)]


def _compiled(kind: str, schema: str | None):
    if kind != "schema":
        return get_compiled(kind, "smollm2")
    return compile(Grammar.from_json_schema(_jme_schema(schema)), get_vocab("smollm2"), cache=False)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("kind", "schema"), CASES, ids=[s or k for k, s in CASES])
def test_rows_equal_fill_mask(kind, schema, threads):
    compiled = _compiled(kind, schema)
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=len(kind) + threads, n=40)
    assert any(m.is_terminated() for m in matchers) and any(m.max_tokens for m in matchers)
    _check(matchers, threads, seed=threads)


@pytest.mark.parametrize("threads", [1, 3])
def test_grammars_mixed_in_one_call(threads):
    vocab = get_vocab("smollm2")
    matchers = []
    for i, kind in enumerate(["json", "c"]):
        matchers += _mid_document_matchers(get_compiled(kind, "smollm2"), vocab, seed=10 + i, n=15)
    random.Random(3).shuffle(matchers)
    _check(matchers, threads, seed=4)


def test_a_memo_serves_only_its_own_state():
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher()
    start = allocate_bitmask(1, vocab.n_logits)
    m.fill_mask(start[0])  # the memo of the start state
    m.advance(vocab.encode("[")[0])
    bm = allocate_bitmask(1, vocab.n_logits)
    fill_masks([m], bm)
    expected = allocate_bitmask(1, vocab.n_logits)
    m.fork().fill_mask(expected[0])
    assert (bm == expected).all() and not (bm == start).all()
    m.rollback(1)  # the memo's state again (the same stack)
    fill_masks([m], bm)
    assert (bm == start).all()


def test_same_matcher_twice_and_numpy_indices():
    vocab = get_vocab("smollm2")
    matchers = _mid_document_matchers(get_compiled("json", "smollm2"), vocab, seed=7, n=3)
    twice = [matchers[0], matchers[1], matchers[0], matchers[2]]
    rows = np.array([3, 0, 1, 2])
    expected = _one_by_one(twice, 4, rows.tolist())
    got = allocate_bitmask(4, vocab.n_logits)
    fill_masks(twice, got, rows, threads=2)
    assert (got == expected).all()


# The last "b" closes every "a" at once: with more than the kernel's 256 top states, the classes of
# tokens that end it ("bc", "ba") are decided by the Python fallback, as in fill_mask.
DEEP = 'start: x "c"?\nx: "a" x | "b"'


def test_deep_stacks_fall_back_to_python(monkeypatch):
    vocab = Vocabulary([b"a", b"b", b"c", b"ba", b"bc", b"ab", None], [6])
    compiled = compile(Grammar.from_lark(DEEP), vocab, cache=False)
    calls = []
    original = Matcher._add_unknown_classes
    monkeypatch.setattr(Matcher, "_add_unknown_classes",
                        lambda self, row, stack, unknown, *rest: (calls.append(len(unknown)),
                                                                  original(self, row, stack, unknown, *rest)))
    matchers = []
    for depth in (3, 255, 300, 1000):
        m = compiled.matcher()
        for _ in range(depth):
            m.advance(0)
        matchers.append(m)
    expected = _one_by_one(matchers, 4, [0, 1, 2, 3])
    assert any(calls)
    calls.clear()
    got = allocate_bitmask(4, vocab.n_logits)
    fill_masks(matchers, got, threads=2)
    assert any(calls)
    assert (got == expected).all()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_strided_bitmask(threads):
    # The first columns of a wider array: rows are not contiguous in memory (the helpers only take contiguous ones).
    vocab = get_vocab("smollm2")
    matchers = _mid_document_matchers(get_compiled("json", "smollm2"), vocab, seed=27, n=12)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    wide = np.full((len(matchers), expected.shape[1] + 3), 5, dtype=np.int32)
    fill_masks([m.fork() for m in matchers], wide[:, : expected.shape[1]], threads=threads)
    assert (wide[:, : expected.shape[1]] == expected).all() and (wide[:, expected.shape[1] :] == 5).all()


def test_empty_batch_and_padding_rows():
    fill_masks([], np.zeros((0, 5), dtype=np.int32))
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher()
    bm = np.full((3, bitmask_words(vocab.n_logits)), 9, dtype=np.int32)
    fill_masks([m], bm)
    expected = allocate_bitmask(1, vocab.n_logits)
    m.fill_mask(expected[0])
    assert (bm[0] == expected[0]).all() and (bm[1:] == 9).all()


def test_bad_input_raises_configuration_error():
    vocab = get_vocab("smollm2")
    compiled = get_compiled("json", "smollm2")
    ms = [compiled.matcher() for _ in range(3)]
    good = allocate_bitmask(3, vocab.n_logits)
    bad = [
        ((ms, allocate_bitmask(2, vocab.n_logits)), {}),          # fewer rows than matchers
        ((ms, good[:, :-1]), {}),                                 # rows too narrow
        ((ms, good.astype(np.int64)), {}),                        # not int32
        ((ms, good[0]), {}),                                      # not 2-D
        ((ms, good, [0, 1]), {}),                                 # one index short
        ((ms, good, [0, 1, 3]), {}),                              # out of range
        ((ms, good, [0, 1, -1]), {}),                             # out of range
        ((ms, good, [0, 1, 1]), {}),                              # a row twice
        ((ms, good), {"threads": 0}),
        ((ms, good, [0, 1, 2.0]), {}),                            # not an int
        ((ms, np.broadcast_to(good, good.shape)), {}),             # read-only
        (([*ms[:2], "x"], good), {}),                             # not a matcher
        ((iter(ms), good), {}),                                   # not a sequence
        (([compiled.matcher(canonical=True), *ms[:2]], good[:, :-1]), {}),  # rows too narrow (canonical)
    ]
    for args, kwargs in bad:
        with pytest.raises(ConfigurationError):
            fill_masks(*args, **kwargs)
    assert not good.any()



@pytest.mark.parametrize("threads", [1, 2])
def test_canonical_matchers_among_plain_ones(threads):
    vocab = get_vocab("smollm2")
    compiled = get_compiled("json", "smollm2")
    plain = _mid_document_matchers(compiled, vocab, seed=41, n=6, budgets=False)
    canonical = []
    for text in ['{"a": [1, ', '[true, "x', '']:
        m = compiled.matcher(canonical=True)
        for t in vocab.encode(text):
            m.advance(t)
        canonical.append(m)
    matchers = [plain[0], canonical[0], *plain[1:4], canonical[1], *plain[4:], canonical[2]]
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    got = np.full_like(expected, -1)
    fill_masks(matchers, got, threads=threads)
    assert (got == expected).all()
    assert not (got[1] == _one_by_one([canonical[0]._matcher], 1, [0])[0]).all()  # the canonical row, not the plain one


def test_concurrent_callers_with_growing_pools():
    compiled = get_compiled("json", "smollm2")
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=5, n=12)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    failures = []

    def call(threads: int) -> None:
        for _ in range(5):
            got = np.zeros_like(expected)
            try:
                fill_masks([m.fork() for m in matchers], got, threads=threads)
            except Exception as e:  # noqa: BLE001 - reported by the assertion below
                failures.append(repr(e))
            if not (got == expected).all():
                failures.append(threads)

    callers = [threading.Thread(target=call, args=(k,)) for k in (2, 3, 4, 5)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert failures == []


@pytest.mark.parametrize("threads", [1, 2])
def test_kept_arrays_serve_calls_of_every_size(monkeypatch, threads):
    from grammask import batch

    monkeypatch.setattr(batch, "_spare", [])
    compiled = get_compiled("json", "smollm2")
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=31, n=70)
    for n in (3, 70, 2, 70, 33):
        expected = _one_by_one(matchers[:n], n, list(range(n)))
        got = np.full_like(expected, -1)
        fill_masks(matchers[:n], got, threads=threads)
        assert (got == expected).all(), n
    assert [a.capacity for a in batch._spare] == [128]  # 4 rows kept for 3 gave way to 128 for 70, kept since


def test_rows_equal_fill_mask_on_llama3():
    compiled = get_compiled("json", "llama3")
    matchers = _mid_document_matchers(compiled, get_vocab("llama3"), seed=11, n=24)
    _check(matchers, threads=2, seed=12)


def test_rows_filled_without_helpers_and_late_ones_write_nothing(monkeypatch):
    # Helper threads that never come (the OS starts them late): the caller fills every row, and a thread that wakes
    # after the call finds its seats closed.
    from grammask import batch_crew

    if not batch_crew.HAS_FUTEX:
        pytest.skip("no helper threads on this platform")
    started = []
    monkeypatch.setattr(batch_crew, "_free", [])
    monkeypatch.setattr(batch_crew, "_serve", started.append)  # a thread that ends at once
    compiled = get_compiled("json", "smollm2")
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=21, n=30)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    got = np.full_like(expected, 5)
    fill_masks(matchers, got, threads=3)
    assert len(started) == 2 and (got == expected).all()
    (crew,) = batch_crew._free
    assert not batch_crew.take_seat(crew.mail)


@pytest.mark.parametrize("threads", [1, 2])
def test_error_while_planning(monkeypatch, threads):
    compiled = get_compiled("json", "smollm2")
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=22, n=40)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    calls = []
    original = MatcherView.end_terms

    def failing(self, *args):
        calls.append(1)
        if len(calls) == 25:
            raise RuntimeError("injected")
        return original(self, *args)

    monkeypatch.setattr(MatcherView, "end_terms", failing)  # planning asks it once per row
    got = np.full_like(expected, 7)
    with pytest.raises(RuntimeError, match="injected"):
        fill_masks(matchers, got, threads=threads)
    monkeypatch.setattr(MatcherView, "end_terms", original)
    kept, cleared = (got == 7).all(axis=1), (got == 0).all(axis=1)
    assert (kept | cleared).all()  # a row is as it was, or (begun by a helper) allows nothing
    assert kept.all() if threads == 1 else kept[25:].all()  # one thread fills nothing before planning ends
    again = np.zeros_like(expected)
    for i, m in enumerate(matchers):
        m.fill_mask(again[i])
    assert (again == expected).all()
    got[:] = 0
    fill_masks(matchers, got, threads=threads)  # the crew still works after the error
    assert (got == expected).all()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two CPUs")
def test_helpers_kept_off_the_callers_cpu_and_steered_again_when_it_moves(monkeypatch):
    from grammask import batch_crew

    if not batch_crew.HAS_FUTEX:
        pytest.skip("no helper threads on this platform")
    monkeypatch.setattr(batch_crew, "_free", [])
    compiled = get_compiled("json", "smollm2")
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=24, n=8)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    allowed = os.sched_getaffinity(0)
    for moved in (False, True):
        if moved:
            batch_crew._free[0]._avoid = max(allowed) + 1  # as if the caller had been on a CPU it is not on now
        got = np.zeros_like(expected)
        fill_masks([m.fork() for m in matchers], got, threads=2)
        (crew,) = batch_crew._free
        assert crew._avoid in allowed  # the CPU the caller was on when the call began
        assert [os.sched_getaffinity(t) for t in crew._ids] == [allowed - {crew._avoid}]
        assert os.sched_getaffinity(0) == allowed and (got == expected).all()


def test_described_tables_keep_no_grammar_alive(monkeypatch):
    import gc
    import weakref

    from grammask import batch_crew

    monkeypatch.setattr(batch_crew, "_described", weakref.WeakKeyDictionary())
    vocab = get_vocab("smollm2")
    compiler = Compiler(vocab, cache=False)  # (its in-memory cache holds what it compiled)
    compiled = compiler.compile(Grammar.from_lark('start: "[" ("a" | "b")* "]"'))
    m = compiled.matcher()
    m.advance(vocab.encode("[")[0])
    fill_masks([m, m.fork()], allocate_bitmask(2, vocab.n_logits), threads=2)
    assert len(batch_crew._described) == 1
    del compiler, compiled, m
    gc.collect()
    assert len(batch_crew._described) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_helpers_in_a_forked_child():
    # A forked child has none of its parent's helper threads: it starts its own (a crew kept from before the fork
    # would wake threads that do not exist, and fill every row alone).
    from grammask import batch_crew

    compiled = get_compiled("json", "smollm2")
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=26, n=8)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    got = np.zeros_like(expected)
    fill_masks([m.fork() for m in matchers], got, threads=2)  # the parent has a crew now
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 when its rows are right
        status = 1
        try:
            child = np.zeros_like(expected)
            fill_masks([m.fork() for m in matchers], child, threads=2)
            alive = {t.native_id for t in threading.enumerate()}
            own = batch_crew._free and all(set(c._ids) <= alive for c in batch_crew._free)
            status = 0 if (child == expected).all() and own else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_descriptors_read_back_as_the_arrays_they_describe():
    import numba as nb

    from grammask import batch_crew

    @nb.njit
    def read_back(d):
        return batch_crew._tables(d)

    view = _mid_document_matchers(get_compiled("json", "smollm2"), get_vocab("smollm2"), seed=25, n=1)[0]._rt
    rows = np.empty((len(batch_crew.LAYOUT), 3), dtype=np.int64)
    batch_crew.describe(view.fill_args, rows[batch_crew.OWN :], batch_crew.OWN)
    back = read_back(rows)
    assert len(back) == len(view.fill_args)
    for a, b in zip(view.fill_args, back, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all()
    wrong = (view.fill_args[0].astype(np.int64), *view.fill_args[1:])
    with pytest.raises(MatcherStateError, match=f"batch kernel array {batch_crew.OWN} is int64"):
        batch_crew.describe(wrong, rows[batch_crew.OWN :], batch_crew.OWN)


def test_eos_decided_in_python_where_the_kernel_cannot(monkeypatch):
    # End sequences too long for the kernel's table (none here: made so by a width of 0) and stacks deeper than the
    # kernel's 256 states that the end reduces through ("a" * depth + "b"): Python decides EOS, as fill_mask does.
    vocab = Vocabulary([b"a", b"b", b"c", b"ba", b"bc", b"ab", None], [6])
    compiled = compile(Grammar.from_lark(DEEP), vocab, cache=False)
    matchers = []
    cases = ((0, 1), (3, 1), (3, 0), (3, 4), (300, 1), (300, 0), (300, 4), (1000, 1))
    for depth, last in cases:
        m = compiled.matcher()
        for t in [0] * depth + [last]:
            m.advance(t)
        matchers.append(m)
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    assert {bool(row[0] >> 6 & 1) for row in expected} == {False, True}  # EOS allowed in some rows only
    calls = []
    original = Matcher._accepts_end
    monkeypatch.setattr(Matcher, "_accepts_end", lambda self, *args: (calls.append(1), original(self, *args))[1])
    view = matchers[0]._rt
    for width in (view.end_width, 0):
        monkeypatch.setattr(view, "end_width", width)
        calls.clear()
        got = allocate_bitmask(len(matchers), vocab.n_logits)
        fill_masks([m.fork() for m in matchers], got, threads=2)
        assert (got == expected).all(), width
        # Only the deep stacks ending in "b" or "bc" (the end reduces below the given states) are left to Python,
        # unless no end sequence fits the table.
        assert len(calls) == (3 if width else len(matchers))


INDENTED = r"""
start: _NL? stmt+
stmt: NAME _NL | NAME ":" _NL _INDENT stmt+ _DEDENT
NAME: /[a-z]+/
_NL: /(\r?\n[\t ]*)+/
%ignore " "
%declare _INDENT _DEDENT
"""


class _TreeIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types: list[str] = []  # noqa: RUF012 - Lark's Indenter reads these class attributes
    CLOSE_PAREN_types: list[str] = []  # noqa: RUF012
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8
    tab_rule = "cpython"  # and the end of input ends the last line, as CPython does


@pytest.mark.parametrize("threads", [1, 2])
def test_rows_equal_fill_mask_with_indentation(threads):
    compiled = compile(Grammar.from_lark(INDENTED, postlex=_TreeIndenter(), lexer="basic"), get_vocab("smollm2"),
                       cache=False)
    matchers = _mid_document_matchers(compiled, get_vocab("smollm2"), seed=30 + threads, n=30, budgets=False)
    # The end closes open blocks (a newline, dedents first): those ends are the indenter's.
    matchers += [compiled.matcher(prefix=text) for text in ("a:\n  b\n", "a:\n  b:\n    c", "a:\n  b", "a:\n  ")]
    assert all(m.is_accepting() for m in matchers[-4:-1]) and not all(m.is_accepting() for m in matchers)
    _check(matchers, threads, seed=threads)


def test_kernel_runs_without_the_gil():
    # A thread fills the rows in the kernel while this one plans them in Python: that only works if the kernel
    # lets go of the GIL. Held, the thread would spin its whole budget (seconds) and return False.
    from grammask import batch, batch_kernels

    vocab = get_vocab("smollm2")
    matchers = _mid_document_matchers(get_compiled("json", "smollm2"), vocab, seed=40, n=20, budgets=False)
    matchers = [m for m in matchers if not m.is_terminated()]
    expected = _one_by_one(matchers, len(matchers), list(range(len(matchers))))
    got = allocate_bitmask(len(matchers), vocab.n_logits)
    view = matchers[0]._rt
    pairs = [view.pairs(m.lexer_state)[m.stack[0]] for m in matchers]
    group = batch._Group(view, got, None, batch._Arrays(len(matchers)), 1, 1)
    finished = []
    helper = threading.Thread(target=lambda: finished.append(batch_kernels.work(group.ctl, 1 << 31, *group.args)))
    helper.start()
    for i, (m, pair) in enumerate(zip(matchers, pairs, strict=True)):
        group.add(m, i, m.lexer_state, pair)  # Python, published row by row
    while group.ctl[batch_kernels.FILLED] < len(matchers) and helper.is_alive():
        pass
    filled_by_helper = int(group.ctl[batch_kernels.FILLED])
    group.fill()
    helper.join()
    group.finish(got)
    assert finished == [True] and filled_by_helper == len(matchers)
    assert (got == expected).all()


@pytest.mark.parametrize("threads", [1, 2])
def test_states_built_during_the_call(monkeypatch, threads):
    # A lazy compile builds a lexer state's tables when a row first needs them: the rows planned before were given the
    # tables as they were, the later ones go to another group that has the grown tables.
    from grammask import batch

    vocab = get_vocab("smollm2")
    compiled = Compiler(vocab, cache=False, lazy=True).compile(Grammar.from_json_schema(_jme_schema("JME_7")))
    matchers = _mid_document_matchers(compiled, vocab, seed=50 + threads, n=40, budgets=False)
    built = int(compiled._engine.masks.built.sum())
    groups = []
    original = batch._Group.__init__
    monkeypatch.setattr(batch._Group, "__init__", lambda self, *args: (groups.append(1), original(self, *args))[1])
    got = np.full((len(matchers), bitmask_words(vocab.n_logits)), 7, dtype=np.int32)
    fill_masks(matchers, got, threads=threads)
    assert int(compiled._engine.masks.built.sum()) > built and len(groups) > 1
    assert (got == _one_by_one(matchers, len(matchers), list(range(len(matchers))))).all()
