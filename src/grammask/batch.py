"""Masks for many matchers in one call, filled in native code with the GIL released.

:func:`fill_masks` writes, for every matcher, exactly the row its own ``fill_mask`` would write.
Python checks the arguments, then goes through the matchers once: a matcher whose state has not
changed since its last mask reuses it; for the others it looks up the pair of lexer state and top LR
state (building the state's tables if need be) and plans the row (the stack's top states when the pair
has stack-dependent classes or the end of input may be accepted: the lexer state's end terminals are
looked up, not fed), publishing the rows a few at a time, per compiled grammar and tables, while
``n - 1`` pool threads (``threads=n``, woken at the start of the call; for the call they are barred from
the caller's CPU and the caller is kept on it: a guest OS otherwise wakes a thread on the CPU of the
thread that wakes it or hands it the GIL, even with another CPU idle, and two threads share one CPU)
already fill them in a ``nogil`` Numba kernel: a thread takes the next published row
by an atomic compare-and-swap (:mod:`grammask.atomics`), copies the pair's precomputed mask into the
matcher's memo row, adds the marked classes the stack accepts and EOS where the stack takes the end
terminals, and copies the row into the bitmask once planning has succeeded (rows filled before, after
it): an error while planning leaves the bitmask as it was. When planning ends the calling thread fills
too. A pool thread needs the GIL only to enter the kernel (the caller waits for that without holding
it) and then spins there for the next rows, so no hand-over waits for the interpreter's switch
interval; spinning threads yield their CPU now and then, and a pool thread that the OS starts late
takes fewer rows or none: no row waits for it. Rows the kernel cannot decide (classes or the end that
reduce below the top states it was given) are made again afterwards as ``fill_mask`` makes them, and
token budgets are applied per row in Python; so is EOS with an indenter (its end closes blocks first).
The memo rows of one call are rows of one array: a matcher kept after the others are gone keeps it.
"""

from __future__ import annotations

import contextlib
import ctypes
import operator
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from grammask.atomics import (
    atomic_add,
    atomic_cas,
    atomic_load,
    atomic_store,
    yield_cpu,
)
from grammask.errors import ConfigurationError, MatcherStateError
from grammask.matcher import _STACK_VIEW, _TERMINATED, Matcher
from grammask.parser.kernels import (
    ALWAYS,
    SCRATCH,
    UNKNOWN,
    add_marked_classes,
    feed_sequence,
)

if TYPE_CHECKING:
    from grammask.engine import MatcherView

# Plan columns, one plan row per matcher the kernel fills: its bitmask row, lexer state, pair (-1: terminated),
# whether EOS is allowed (1 or 0; _DECIDE: the kernel decides from the lexer state's ``end_table`` row and writes
# ALWAYS, NEVER or UNKNOWN here), its top stack states top first ``states[a:b]`` (empty when neither the pair's marked
# classes nor EOS need them), whether the pair has marked classes.
_ROW, _LEX, _PAIR, _EOS, _STATES_A, _STATES_B, _MARKED = range(7)
_COLUMNS = 7
_DECIDE = -1
# Cells of a group's control array: plan rows published, next row to take, planning done, rows filled, threads
# that entered :func:`_work`, rows filled that Python must finish (classes or EOS the kernel could not decide),
# planning succeeded (rows may go to the bitmask), next row to copy there, rows copied (or found copied).
_READY, _NEXT, _DONE, _FILLED, _STARTED, _LEFT, _VALID, _NEXT_COPY, _COPIED = range(9)
# A plan row's flag: not filled yet, filled in its memo row only, in the bitmask too.
_EMPTY, _IN_MEMO, _COPIED_OUT = range(3)
# Rows planned between two publications to the threads already filling (a row takes a few microseconds to plan):
# 2 at first, so that they start soon, then twice as many each time up to ``_CHUNK``.
_FIRST_CHUNK = 2
_CHUNK = 8
# Polls of the control array (about a nanosecond each) a thread spins before it gives up waiting: a pool thread for
# rows to fill (~0.4 ms; then it sleeps until planning is done), the caller for pool threads to start (~0.1 ms) and
# to finish their last rows (~1 ms at a time). Every ``_YIELD_EVERY`` polls (microseconds) a spinning thread lets
# another thread ready on its CPU run: on a busy machine that may be the one it waits for.
_YIELD_EVERY = 4096
_SPIN_ROWS = 1 << 19
_SPIN_START = 1 << 17
_SPIN_FILLED = 1 << 20
_SLEEP = 1e-4


@nb.njit(cache=True, nogil=True, inline="always")
def _copy_words(dst, src):
    """``dst[:] = src`` for two rows of mask words (Numba's slice assignment checks for overlap and copies through
    a temporary array: five times slower)."""
    for w in range(dst.shape[0]):
        dst[w] = src[w]


@nb.njit(cache=True, nogil=True)
def _fill_row(i, plan, states, n_unknown, memo, tables, stack_room, scratch):
    """Fill ``memo[i]``: the pair's mask, its marked classes the stack accepts (:func:`add_marked_classes`), EOS
    (decided here where the plan says so); ``n_unknown[i]`` = classes left undecided. Whether Python must finish the
    row (classes or EOS left undecided). ``stack_room`` and ``scratch``: a thread's room for the stack's top states
    and for :func:`feed_sequence`."""
    (pair_mask, pair_marks, masks, marks_ptr, marks, state_span, state_class, state_lcp, state_dep, action, goto,
     rule_len, rule_lhs, seq_ptr, seq_terms, class_follow, follow_ptr, follow_terms, follow_any, word_ptr, words, bits,
     eos_words, eos_bits, end_table) = tables
    row = memo[i]
    pair = plan[i, _PAIR]
    n = 0
    if pair < 0:
        row[:] = 0
    else:
        _copy_words(row, masks[pair_mask[pair]])
        a, b = plan[i, _STATES_A], plan[i, _STATES_B]
        stack = stack_room[: b - a]  # bottom first
        for k in range(b - a):
            stack[k] = states[b - 1 - k]
        q = plan[i, _LEX]
        if plan[i, _EOS] == _DECIDE:
            ends = end_table[q, 1 : end_table[q, 0] + 1]
            plan[i, _EOS] = feed_sequence(action, goto, rule_len, rule_lhs, stack, ends, scratch)
        if plan[i, _MARKED]:
            m = pair_marks[pair]
            s0, s1 = state_span[q, 0], state_span[q, 1]
            n = add_marked_classes(
                row, action, goto, rule_len, rule_lhs, stack, state_class[s0:s1], state_lcp[s0:s1],
                state_dep[s0:s1], marks[marks_ptr[m] : marks_ptr[m + 1]], seq_ptr, seq_terms, class_follow,
                follow_ptr, follow_terms, follow_any, word_ptr, words, bits, np.empty(s1 - s0, dtype=np.int32))
    n_unknown[i] = n
    if plan[i, _EOS] == ALWAYS:
        for j in range(len(eos_words)):
            row[eos_words[j]] |= eos_bits[j]
    return n > 0 or plan[i, _EOS] == UNKNOWN


@nb.njit(cache=True, nogil=True)
def _work(ctl, spin, bitmask, plan, states, n_unknown, memo, flags, tables):
    """Take published plan rows one at a time (``ctl[_NEXT]``) and fill them (:func:`_fill_row`) until planning is
    done and none is left (True), or until ``spin`` polls in a row found nothing new to take (False). A row goes to
    the bitmask once planning has succeeded: at once if it has, else by :func:`_copy_out` after it."""
    atomic_add(ctl, _STARTED, 1)
    stack_room = np.empty(_STACK_VIEW, dtype=np.int32)
    scratch = np.empty(SCRATCH, dtype=np.int32)
    idle = 0
    while True:
        done = atomic_load(ctl, _DONE)
        ready = atomic_load(ctl, _READY)
        i = atomic_load(ctl, _NEXT)
        if i < ready:
            if atomic_cas(ctl, _NEXT, i, i + 1) == i:
                if _fill_row(i, plan, states, n_unknown, memo, tables, stack_room, scratch):
                    atomic_add(ctl, _LEFT, 1)
                if atomic_load(ctl, _VALID):
                    _copy_words(bitmask[plan[i, _ROW]], memo[i])
                    atomic_store(flags, i, _COPIED_OUT)
                else:
                    atomic_store(flags, i, _IN_MEMO)
                atomic_add(ctl, _FILLED, 1)
                idle = 0
        elif done:
            if atomic_load(ctl, _VALID):
                _copy_out(ctl, bitmask, plan, memo, flags)
            return True
        else:
            idle += 1
            if idle > spin:
                return False
            if idle % _YIELD_EVERY == 0:
                yield_cpu()  # on a busy machine the thread that plans the rows may be waiting for this CPU


@nb.njit(cache=True, nogil=True, inline="always")
def _copy_out(ctl, bitmask, plan, memo, flags):
    """Copy to the bitmask, one at a time (``ctl[_NEXT_COPY]``), the rows filled before planning succeeded (waiting
    for those still being filled)."""
    ready = atomic_load(ctl, _READY)
    while True:
        j = atomic_load(ctl, _NEXT_COPY)
        if j >= ready:
            return
        if atomic_cas(ctl, _NEXT_COPY, j, j + 1) == j:
            k = 0
            while atomic_load(flags, j) == _EMPTY:  # another thread fills it now
                k += 1
                if k % _YIELD_EVERY == 0:
                    yield_cpu()
            if atomic_load(flags, j) == _IN_MEMO:
                _copy_words(bitmask[plan[j, _ROW]], memo[j])
            atomic_add(ctl, _COPIED, 1)


@nb.njit(cache=True, nogil=True)
def _wait(ctl, cell, target, spin):
    """Whether ``ctl[cell]`` reached ``target`` within ``spin`` polls (the GIL is released meanwhile)."""
    for k in range(spin):
        if atomic_load(ctl, cell) >= target:
            return True
        if k % _YIELD_EVERY == _YIELD_EVERY - 1:
            yield_cpu()
    return atomic_load(ctl, cell) >= target


@nb.njit(cache=True)
def _publish(ctl, cell, value):
    """``ctl[cell] = value``, seen by the filling threads after everything written before it."""
    atomic_store(ctl, cell, value)


class _Pool:
    """Daemon threads that run the functions put on one queue (a call wakes one with a single ``put``);
    there are as many as the most helpers any call asked for."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._size = 0
        self._lock = threading.Lock()
        self._ids: list[int] = []  # the threads' native ids

    def run(self, fn: Callable[[], None], n: int, cpus: set[int] | None = None) -> None:
        """Have ``n`` pool threads run ``fn`` (each once), starting threads if fewer are there, kept on ``cpus`` (the
        caller's but its own; see :func:`_steer`)."""
        if self._size < n:
            with self._lock:
                while self._size < n:
                    threading.Thread(target=self._serve, name=f"grammask-masks-{self._size}", daemon=True).start()
                    self._size += 1
        _steer(self._ids, cpus)
        for _ in range(n):
            self._queue.put(fn)

    def _serve(self) -> None:
        self._ids.append(threading.get_native_id())
        while True:
            self._queue.get()()


_pool = _Pool()
_sched_getcpu = getattr(ctypes.CDLL(None), "sched_getcpu", None) if hasattr(os, "sched_setaffinity") else None


class _Gate:
    """A one-time signal (what ``threading.Event`` does for this, at a fraction of its cost to make): threads
    :meth:`wait` until it is :meth:`open`."""

    __slots__ = ("_lock", "_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._open = False

    def open(self) -> None:
        """Let every waiting thread and every later :meth:`wait` through (again: nothing)."""
        if not self._open:
            self._open = True
            self._lock.release()

    def wait(self) -> None:
        """Return once the gate is open."""
        with self._lock:
            pass


def _new_pool() -> None:
    global _pool
    _pool = _Pool()  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_new_pool)


class _Group:
    """The rows of one engine's matchers (while its tables do not grow): :meth:`add` plans each (top stack states,
    EOS) and publishes them
    a few at a time to the pool threads, which fill them meanwhile (:meth:`help`) (with no pool threads, all
    at once: ``chunk`` = ``max_chunk`` = the number of matchers); :meth:`fill` fills what is left on this
    thread; :meth:`finish` is Python's part."""

    def __init__(self, view: MatcherView, bitmask: np.ndarray, capacity: int, chunk: int, max_chunk: int):
        self.view = view
        self.entries: list[Matcher] = []  # per plan row
        self.chunk, self.max_chunk = chunk, max_chunk
        self.ctl = np.zeros(9, dtype=np.int64)
        self.flags = np.zeros(capacity, dtype=np.int64)  # per plan row, _EMPTY, _IN_MEMO or _COPIED_OUT
        self.plan = np.empty((capacity, _COLUMNS), dtype=np.int64)
        self._flat = self.plan.reshape(-1)
        self.states = np.empty(capacity * _STACK_VIEW, dtype=np.int32)
        self.n_unknown = np.zeros(capacity, dtype=np.int64)
        self.memo = np.empty((capacity, bitmask.shape[1]), dtype=np.int32)
        self._memo_rows = list(self.memo)
        # The tables as they are now hold every pair looked up before (tables only grow; :func:`_plan` starts another
        # group where a lookup builds a state).
        self.args = (bitmask, self.plan, self.states, self.n_unknown, self.memo, self.flags, view.fill_args)
        self.planned = _Gate()
        self._rows: list[int] = []  # the plan rows since the last publication, one after another
        self._tops: list[int] = []
        self._n_states = 0
        self._n = 0  # rows planned

    def add(self, m: Matcher, row: int, q: int, pair: int) -> None:
        """Plan matcher ``m``'s row ``row`` (lexer state ``q``, ``pair`` from :func:`_pairs`) and give the matcher
        its memo row (filled by the kernel, and by :meth:`finish` where Python decides classes or EOS)."""
        a = b = self._n_states
        if pair < 0:
            self._rows += (row, 0, -1, 1, a, b, 0)
        else:
            view, stack, post = self.view, m._stack, m._post
            if m._indenter is not None:
                eos = int(m._accepts_end(q, stack, post))
            else:
                terms = view.end_terms(q)
                eos = 0 if terms is None else _DECIDE if len(terms) <= view.end_width else int(m._accepts_end(q, stack, post))
            marked = view.pair_has_marks[pair]
            if marked or eos == _DECIDE:
                append, s, left = self._tops.append, stack, _STACK_VIEW
                while s is not None and left:
                    state, s = s
                    append(state)
                    left -= 1
                b = self._n_states = a + _STACK_VIEW - left
            self._rows += (row, q, pair, eos, a, b, marked)
            m._mask = self._memo_rows[self._n]
            m._mask_key = (q, stack, post, m._late)
        self.entries.append(m)
        self._n += 1
        if len(self._rows) == self.chunk * _COLUMNS:
            self._publish()

    def _publish(self) -> None:
        """Hand the rows planned since the last time to the filling threads."""
        n, b = self._n, self._n_states
        self._flat[n * _COLUMNS - len(self._rows) : n * _COLUMNS] = self._rows
        self.states[b - len(self._tops) : b] = self._tops
        self._rows, self._tops = [], []
        self.chunk = min(2 * self.chunk, self.max_chunk)
        _publish(self.ctl, _READY, n)

    def help(self) -> None:
        """Fill rows as they are published until none is left (a pool thread's part)."""
        if not _work(self.ctl, _SPIN_ROWS, *self.args):
            self.planned.wait()
            _work(self.ctl, _SPIN_ROWS, *self.args)

    def fill(self, failed: bool = False) -> None:
        """Publish the last rows and let the rows go to the bitmask (unless planning ``failed``: then the bitmask is
        left as it was and the matchers forget the memo rows they were given), fill what is left on this thread and
        wait for the rows pool threads took."""
        ctl = self.ctl
        if failed:
            for m in self.entries:
                m._mask_key = None
        else:
            if self._rows:
                self._publish()
            _publish(ctl, _VALID, 1)
        _publish(ctl, _DONE, 1)
        self.planned.open()
        _work(ctl, _SPIN_ROWS, *self.args)
        for cell in (_FILLED,) if failed else (_FILLED, _COPIED):
            while not _wait(ctl, cell, ctl[_READY], _SPIN_FILLED):
                time.sleep(_SLEEP)  # a pool thread still fills a row it took (or the OS stopped it meanwhile)

    def finish(self, bitmask: np.ndarray) -> None:
        """The rows where the kernel left classes undecided (stacks deeper than it was given), as ``fill_mask``
        makes them (its compiled check, then Python), EOS where the kernel could not decide it, and their memo rows
        again."""
        if not self.ctl[_LEFT]:
            return
        view = self.view
        n = self._n
        eos = self.plan[:n, _EOS]
        for i in np.flatnonzero((self.n_unknown[:n] > 0) | (eos == UNKNOWN)).tolist():
            m, q = self.entries[i], int(self.plan[i, _LEX])
            mask = bitmask[self.plan[i, _ROW]]
            if self.n_unknown[i]:
                m._table_mask(mask, q, m._stack)
            if eos[i] == ALWAYS or (eos[i] == UNKNOWN and m._accepts_end(q, m._stack, m._post)):
                mask[view.eos_words] |= view.eos_bits
            self.memo[i] = mask


def _current_cpu() -> int:
    """The CPU this thread runs on (-1 where the OS does not say)."""
    return -1 if _sched_getcpu is None else _sched_getcpu()


def _steer(threads: list[int], cpus: set[int] | None) -> None:
    """Keep the ``threads`` (native ids) on ``cpus`` (if any: the caller's CPUs but its own) until each restores its
    CPUs (at the end of :func:`_help`).

    A woken thread is often put on the CPU of the thread that woke it, even where another is idle (a guest
    OS sees a halted virtual CPU as busy): a pool thread would then only run when the caller waits, and
    two threads would share one CPU. Barred from the caller's CPU before it is woken, it wakes on another.
    """
    if cpus:
        for thread in threads:
            with contextlib.suppress(OSError):  # a thread that ended
                os.sched_setaffinity(thread, cpus)


@contextlib.contextmanager
def _pinned(cpu: int, cpus: set[int] | None) -> Iterator[None]:
    """Keep the calling thread on CPU ``cpu`` meanwhile, then give it back its ``cpus`` (nothing where it has one CPU
    or the OS does not say which it runs on). The pool threads are barred from that CPU (:func:`_steer`); a thread
    that waits for the GIL is woken on the CPU of the thread that hands it over, so without this the caller would
    follow a pool thread onto its CPU the first time it waits for the GIL."""
    if cpus is None or len(cpus) < 2:
        yield
        return
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)


def _help(groups: list[_Group], started: _Gate, cpus: set[int] | None) -> None:
    """A pool thread's part of one call: help fill each group, the first as soon as there is one, then take back
    the ``cpus`` :func:`_steer` barred it from. Not before: a thread that sleeps on a lock (``started``, a group's
    planning) is woken on the CPU of the thread that opens it where it may, and two threads would share one CPU."""
    try:
        started.wait()
        for group in groups:
            group.help()
    finally:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)


def _plan(matchers: Sequence[Matcher], rows: Sequence[int], bitmask: np.ndarray, helpers: int, started: _Gate,
          groups: list[_Group]) -> tuple[list[tuple[Matcher, int]], ...]:
    """Plan the rows the kernel fills into ``groups`` (one per compiled grammar, and a new one where looking up a pair
    built a state's tables: the groups before hold the tables as they were), publishing them as it goes; the
    matchers (with their rows) whose memo holds their mask, those Python makes the mask of, and those with budgets.

    Raises :class:`ConfigurationError` if ``bitmask``'s rows are not as wide as a matcher's vocabulary needs, and
    :class:`MatcherStateError` as ``fill_mask`` does when no mask table covers a state it would look up (before
    any row reaches the bitmask: see :meth:`_Group.fill`).
    """
    current: dict[int, _Group] = {}
    memo: list[tuple[Matcher, int]] = []
    own: list[tuple[Matcher, int]] = []
    budgeted: list[tuple[Matcher, int]] = []
    view = None
    for m, row in zip(matchers, rows, strict=True):
        if m._rt is not view:  # a batch's matchers mostly share one grammar: one check for a run of them
            view = m._rt
            if bitmask.shape[1] != view.n_words:
                raise ConfigurationError(f"bitmask rows have {bitmask.shape[1]} words, expected {view.n_words} for "
                                         f"{m.compiled.vocab.n_logits} logits")
        q = m._lexstate
        pair = -1
        if q != _TERMINATED:
            if m._late:  # EOS also from the readings kept beside a late lexer state: fill_mask, budget included
                own.append((m, row))
                continue
            if m._budget is not None:
                budgeted.append((m, row))
            if m._memo_valid():  # also a matcher named twice, planned before
                memo.append((m, row))
                continue
            if _counted_near(m):
                own.append((m, row))
                continue
            pair = (view.pair_index[q] or view.pairs(q))[m._stack[0]]
            if pair < 0:
                raise MatcherStateError(f"internal error: no mask table for lexer state {q} with LR state {m._stack[0]}")
        group = current.get(id(view))
        if group is None or group.args[-1] is not view.fill_args:
            chunks = (_FIRST_CHUNK, _CHUNK) if helpers else (len(matchers), len(matchers))
            group = current[id(view)] = _Group(view, bitmask, len(matchers), *chunks)
            groups.append(group)
            if helpers and len(groups) == 1:
                started.open()
                _wait(group.ctl, _STARTED, helpers, _SPIN_START)  # no GIL held meanwhile: pool threads enter
        group.add(m, row, q, pair)
    return memo, own, budgeted


def _counted_near(m: Matcher) -> bool:
    """Whether ``m`` is in a counted lexeme near its level's end (its mask is several levels' masks, in Python)."""
    return m._counting is not None and m._counting.near(m._lexstate, m._post)


def _check_args(matchers: Sequence[Matcher], bitmask: np.ndarray, indices: Sequence[int] | None,
                threads: int) -> Sequence[int]:
    """The row of each matcher; :class:`ConfigurationError` for the argument errors :func:`fill_masks` names (but
    the rows' width, :func:`_pairs`)."""
    if not isinstance(bitmask, np.ndarray) or bitmask.ndim != 2 or bitmask.dtype != np.int32:
        raise ConfigurationError("bitmask must be a 2-D int32 NumPy array (rows of mask words)")
    if not bitmask.flags.writeable:
        raise ConfigurationError("bitmask is read-only")
    if not isinstance(threads, int) or threads < 1:
        raise ConfigurationError(f"threads must be a positive int, got {threads!r}")
    n_rows = bitmask.shape[0]
    if indices is None:
        if n_rows < len(matchers):
            raise ConfigurationError(f"bitmask has {n_rows} rows for {len(matchers)} matchers")
        rows = range(len(matchers))
    else:
        try:
            rows = [operator.index(r) for r in indices]
        except TypeError:
            raise ConfigurationError(f"indices must be ints, got {indices!r}") from None
        if len(rows) != len(matchers):
            raise ConfigurationError(f"{len(rows)} indices for {len(matchers)} matchers")
        bad = [r for r in rows if not 0 <= r < n_rows]
        if bad:
            raise ConfigurationError(f"row index {bad[0]} is out of range for a bitmask of {n_rows} rows")
        if len(set(rows)) != len(rows):
            raise ConfigurationError("indices name the same row twice")
    return rows


def fill_masks(matchers: Sequence[Matcher], bitmask: np.ndarray, indices: Sequence[int] | None = None, *,
               threads: int = 1) -> None:
    """Fill row ``indices[i]`` (row ``i`` without ``indices``) of ``bitmask`` as ``matchers[i].fill_mask`` would.

    Example: ``fill_masks(matchers, allocate_bitmask(len(matchers), vocab.n_logits), threads=2)``.

    ``bitmask`` is a 2-D int32 array of mask rows (xgrammar/vLLM layout) as wide as the matchers'
    vocabulary needs; the matchers may come from different compiled grammars of that vocabulary.
    The masks are filled in native code with the GIL released, the rows split over ``threads``
    threads; the Python work per matcher (gathering its state, planning its row, budgets) stays on the
    calling thread, while the other threads already fill the rows planned so far. Rows not named
    are left as they are (the bitmask may have more rows than matchers, as xgrammar's batched fill
    allows).

    Raises :class:`ConfigurationError` if ``bitmask`` is not a writable 2-D int32 array with rows of
    the vocabulary's width, if without ``indices`` it has fewer rows than matchers, if ``indices``
    does not give each matcher its own row in range, or if ``threads`` is not a positive int;
    :class:`MatcherStateError` as ``fill_mask`` does. Either comes before anything is written.
    """
    rows = _check_args(matchers, bitmask, indices, threads)
    helpers = max(0, min(threads, len(matchers)) - 1)
    started, groups = _Gate(), []  # pool threads are woken first, so that they are ready when rows are
    cpu = _current_cpu() if helpers else -1
    cpus = None if cpu < 0 else os.sched_getaffinity(0)
    with _pinned(cpu, cpus):
        if helpers:
            _pool.run(lambda: _help(groups, started, cpus), helpers, None if cpus is None else cpus - {cpu})
        failed = True
        try:
            memo, own, budgeted = _plan(matchers, rows, bitmask, helpers, started, groups)
            failed = False
        finally:
            started.open()
            for group in groups:
                group.fill(failed)
    for group in groups:
        group.finish(bitmask)
    for m, row in memo:
        bitmask[row] = m._mask
    for m, row in own:
        m.fill_mask(bitmask[row])  # a budget restricts in fill_mask (and is never built for counted terminals)
    for m, row in budgeted:
        m._budget.restrict(bitmask[row], m._lexstate, m._stack, len(m._history), m._post)
