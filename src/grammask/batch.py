"""Masks for many matchers in one call, filled in native code with the GIL released.

:func:`fill_masks` writes, for every matcher, exactly the row its own ``fill_mask`` would write.
Python checks the arguments, then goes through the matchers once: a matcher whose state has not
changed since its last mask reuses it; for the others it looks up the pair of lexer state and top LR
state (building the state's tables if need be) and plans the row (the stack's top states when the pair
has stack-dependent classes or the end of input may be accepted: the lexer state's end terminals are
looked up, not fed), publishing the rows a few at a time, per compiled grammar and tables, while
``n - 1`` helper threads (``threads=n``, woken as the call begins: :mod:`grammask.batch_crew`; they never take
the GIL) already fill them in a ``nogil`` Numba kernel (:mod:`grammask.batch_kernels`): a thread
takes the next published row by an atomic compare-and-swap (:mod:`grammask.atomics`), copies the pair's
precomputed mask into the matcher's bitmask row and adds the marked classes the stack accepts and EOS where the
stack takes the end terminals. When planning ends the calling thread fills too. A helper that the OS wakes late
takes fewer rows or none: no row waits for it. Rows the kernel cannot decide (classes or the end that reduce below
the top states it was given) are made again afterwards as ``fill_mask`` makes them, and token budgets are applied
per row in Python; so is EOS with an indenter (its end closes blocks first). A batched row is not kept as the
matcher's memo (``fill_mask`` keeps one: a state asked twice costs a copy): an engine asks each state once, and
a memo would write every row twice.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from grammask.batch_crew import (
    LAYOUT,
    OWN,
    Crew,
    address,
    describe,
    fill_group,
    give_crew,
    table_rows,
    take_crew,
)
from grammask.batch_kernels import (
    CELLS,
    CHUNK,
    COLUMNS,
    DECIDE,
    DONE,
    EOS,
    FILLED,
    FIRST_CHUNK,
    LEFT,
    LEX,
    READY,
    ROW,
    SLEEP,
    SPIN_FILLED,
    SPIN_ROWS,
    publish,
    wait,
    work,
)
from grammask.bitmask import bitmask_words
from grammask.errors import ConfigurationError, MatcherStateError
from grammask.matcher import _STACK_VIEW, _TERMINATED, Matcher, TokenSteps
from grammask.parser.kernels import ALWAYS, UNKNOWN

if TYPE_CHECKING:
    from grammask.engine import MatcherView


class _Arrays:
    """A group's own arrays for up to ``capacity`` rows (control cells, plan, top states, undecided classes) and the
    group's descriptor with them described; kept for later calls (:func:`_take`): making and describing them anew
    took ~0.1 ms of a call."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.ctl = np.zeros(CELLS, dtype=np.int64)
        self.plan = np.empty((capacity, COLUMNS), dtype=np.int64)
        self.flat = self.plan.reshape(-1)
        self.states = np.empty(capacity * _STACK_VIEW, dtype=np.int32)
        self.n_unknown = np.zeros(capacity, dtype=np.int64)
        self.desc = np.zeros((len(LAYOUT), 3), dtype=np.int64)
        describe((self.ctl,), self.desc[:1], 0)
        describe((self.plan, self.states, self.n_unknown), self.desc[2:OWN], 2)


_spare: list[_Arrays] = []
_SPARE = 8  # arrays kept for later calls


def _take(n: int) -> _Arrays:
    """Arrays for ``n`` rows: the last ones kept if large enough, else new ones (a power of two of rows)."""
    try:
        arrays = _spare.pop()  # (atomic under the GIL: concurrent calls take different ones)
    except IndexError:
        arrays = None
    return arrays if arrays is not None and arrays.capacity >= n else _Arrays(1 << max(n - 1, 0).bit_length())


def _give(arrays: _Arrays) -> None:
    """Keep ``arrays`` for a later call."""
    if len(_spare) < _SPARE:
        _spare.append(arrays)


class _Group:
    """The rows of one engine's matchers (while its tables do not grow): :meth:`add` plans each (top stack states,
    EOS) and publishes them a few at a time to the helper threads, which fill them meanwhile (with no helpers, all
    at once: ``chunk`` = ``max_chunk`` = the number of matchers); :meth:`fill` fills what is left on this
    thread; :meth:`finish` is Python's part. ``bitmask_row``: the bitmask's descriptor row, None where it is not
    C-contiguous (the kernel then gets the arrays themselves)."""

    def __init__(self, view: MatcherView, bitmask: np.ndarray, bitmask_row: tuple[int, int, int] | None,
                 arrays: _Arrays, chunk: int, max_chunk: int):
        self.view = view
        self.entries: list[Matcher] = []  # per plan row
        self.chunk, self.max_chunk = chunk, max_chunk
        self.arrays = arrays
        self.ctl, self.plan, self.states = arrays.ctl, arrays.plan, arrays.states
        self.ctl[:] = 0
        self._flat = arrays.flat
        # The tables as they are now hold every pair looked up before (tables only grow; :func:`_plan` starts another
        # group where a lookup builds a state).
        self.args = (bitmask, self.plan, self.states, arrays.n_unknown, view.fill_args)
        self.desc = None
        if bitmask_row is not None:
            self.desc = arrays.desc
            self.desc[1] = bitmask_row
            self.desc[OWN:] = table_rows(view)
        self._rows: list[int] = []  # the plan rows since the last publication, one after another
        self._tops: list[int] = []
        self._n_states = 0
        self._n = 0  # rows planned

    def add(self, m: Matcher, row: int, q: int, pair: int) -> None:
        """Plan matcher ``m``'s row ``row`` (lexer state ``q``, ``pair`` from :func:`_plan`; -1: terminated)."""
        a = b = self._n_states
        if pair < 0:
            self._rows += (row, 0, -1, 1, a, b, 0)
        else:
            view, stack, post = self.view, m._stack, m._post
            if m._indenter is not None:
                eos = int(m._accepts_end(q, stack, post))
            else:
                terms = view.end_terms(q)
                eos = 0 if terms is None else DECIDE if len(terms) <= view.end_width else int(m._accepts_end(q, stack, post))
            marked = view.pair_has_marks[pair]
            if marked or eos == DECIDE:
                append, s, left = self._tops.append, stack, _STACK_VIEW
                while s is not None and left:
                    state, s = s
                    append(state)
                    left -= 1
                b = self._n_states = a + _STACK_VIEW - left
            self._rows += (row, q, pair, eos, a, b, marked)
        self.entries.append(m)
        self._n += 1
        if len(self._rows) == self.chunk * COLUMNS:
            self._publish()

    def _publish(self) -> None:
        """Hand the rows planned since the last time to the filling threads."""
        n, b = self._n, self._n_states
        self._flat[n * COLUMNS - len(self._rows) : n * COLUMNS] = self._rows
        self.states[b - len(self._tops) : b] = self._tops
        self._rows, self._tops = [], []
        self.chunk = min(2 * self.chunk, self.max_chunk)
        publish(self.ctl, READY, n)

    def fill(self, failed: bool = False) -> None:
        """Publish the last rows, fill what is left on this thread and wait for the rows helper threads took; if
        planning ``failed``, publish no more and clear the rows published (their Python part is never made)."""
        ctl = self.ctl
        if self._rows and not failed:
            self._publish()
        publish(ctl, DONE, 1)
        if self.desc is None:
            work(ctl, SPIN_ROWS, *self.args)
        else:
            fill_group(self.desc)
        while not wait(ctl, FILLED, ctl[READY], SPIN_FILLED):
            time.sleep(SLEEP)  # a helper still fills a row it took (or the OS stopped it meanwhile)
        if failed:
            self.args[0][self.plan[: ctl[READY], ROW]] = 0

    def finish(self, bitmask: np.ndarray) -> None:
        """The rows where the kernel left classes undecided (stacks deeper than it was given), as ``fill_mask``
        makes them (its compiled check, then Python), and EOS where the kernel could not decide it."""
        if not self.ctl[LEFT]:
            return
        view = self.view
        n = self._n
        eos, n_unknown = self.plan[:n, EOS], self.arrays.n_unknown
        for i in np.flatnonzero((n_unknown[:n] > 0) | (eos == UNKNOWN)).tolist():
            m, q = self.entries[i], int(self.plan[i, LEX])
            mask = bitmask[self.plan[i, ROW]]
            if n_unknown[i]:
                m._table_mask(mask, q, m._stack)
            if eos[i] == ALWAYS or (eos[i] == UNKNOWN and m._accepts_end(q, m._stack, m._post)):
                mask[view.eos_words] |= view.eos_bits


def _plan(matchers: Sequence[Matcher], rows: Sequence[int], bitmask: np.ndarray, bitmask_row: tuple[int, int, int] | None,
          helpers: Crew | None, groups: list[_Group]) -> tuple[list[tuple[Matcher, int]], ...]:
    """Plan the rows the kernel fills into ``groups`` (one per compiled grammar, and a new one where looking up a pair
    built a state's tables: the groups before hold the tables as they were), publishing them as it goes; the
    matchers (with their rows) whose memo holds their mask, those Python makes the mask of, and those with budgets.

    Raises :class:`MatcherStateError` as ``fill_mask`` does when no mask table covers a state it would look up (the
    rows published to helper threads before it are cleared: see :meth:`_Group.fill`).
    """
    current: dict[int, _Group] = {}
    memo: list[tuple[Matcher, int]] = []
    own: list[tuple[Matcher, int]] = []
    budgeted: list[tuple[Matcher, int]] = []
    for m, row in zip(matchers, rows, strict=True):
        view = m._rt
        q = m._lexstate
        pair = -1
        if q != _TERMINATED:
            if m._late:  # EOS also from the readings kept beside a late lexer state: fill_mask, budget included
                own.append((m, row))
                continue
            if m._budget is not None:
                budgeted.append((m, row))
            if m._memo_valid():  # its own fill_mask's last row
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
            chunks = (FIRST_CHUNK, CHUNK) if helpers is not None else (len(matchers), len(matchers))
            group = current[id(view)] = _Group(view, bitmask, bitmask_row, _take(len(matchers)), *chunks)
            groups.append(group)
            if helpers is not None:
                helpers.publish(len(groups) - 1, group.desc)
        group.add(m, row, q, pair)
    return memo, own, budgeted


def _counted_near(m: Matcher) -> bool:
    """Whether ``m`` is in a counted lexeme near its level's end (its mask is several levels' masks, in Python)."""
    return m._counting is not None and m._counting.near(m._lexstate, m._post)


def _check_args(matchers: Sequence[TokenSteps], bitmask: np.ndarray, indices: Sequence[int] | None
                ) -> tuple[Sequence[Matcher], Sequence[int], list[tuple[TokenSteps, int]], bool]:
    """The plain matchers and their rows, the other matchers with theirs (filled by their own ``fill_mask``), and
    whether ``bitmask`` is C-contiguous; :class:`ConfigurationError` for the argument errors :func:`fill_masks` names
    (but ``threads``)."""
    if not isinstance(bitmask, np.ndarray) or bitmask.ndim != 2 or bitmask.dtype != np.int32:
        raise ConfigurationError("bitmask must be a 2-D int32 NumPy array (rows of mask words)")
    flags = bitmask.flags
    if not flags.writeable:
        raise ConfigurationError("bitmask is read-only")
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
    view = None
    try:
        for m in matchers:
            if m._rt is not view:  # a batch's matchers mostly share one grammar: one check for a run of them
                view = m._rt
                _check_width(bitmask, m)
    except AttributeError:  # not only plain matchers
        return (*_sorted_out(matchers, rows, bitmask), flags.c_contiguous)
    return matchers, rows, [], flags.c_contiguous


def _sorted_out(matchers: Sequence[TokenSteps], rows: Sequence[int], bitmask: np.ndarray
                ) -> tuple[list[Matcher], list[int], list[tuple[TokenSteps, int]]]:
    """:func:`_check_args`'s plain matchers with their rows, and the other matchers with theirs."""
    plain, plain_rows, others = [], [], []
    for i, (m, row) in enumerate(zip(matchers, rows, strict=True)):
        if isinstance(m, Matcher):
            plain.append(m)
            plain_rows.append(row)
        elif isinstance(m, TokenSteps):
            others.append((m, row))
        else:
            raise ConfigurationError(f"matchers[{i}] is a {type(m).__name__}, not a matcher (compiled.matcher())")
        _check_width(bitmask, m)
    return plain, plain_rows, others


def _check_width(bitmask: np.ndarray, m: TokenSteps) -> None:
    """:class:`ConfigurationError` unless ``bitmask``'s rows have the words ``m``'s masks need."""
    n_logits = m.compiled.vocab.n_logits
    if bitmask.shape[1] != bitmask_words(n_logits):
        raise ConfigurationError(f"bitmask rows have {bitmask.shape[1]} words, expected {bitmask_words(n_logits)} for "
                                 f"{n_logits} logits")


def fill_masks(matchers: Sequence[TokenSteps], bitmask: np.ndarray, indices: Sequence[int] | None = None, *,
               threads: int = 1) -> None:
    """Fill row ``indices[i]`` (row ``i`` without ``indices``) of ``bitmask`` as ``matchers[i].fill_mask`` would.

    Example: ``fill_masks(matchers, allocate_bitmask(len(matchers), vocab.n_logits), threads=2)``.

    ``bitmask`` is a 2-D int32 array of mask rows (xgrammar/vLLM layout) as wide as the matchers'
    vocabulary needs; the matchers may come from different compiled grammars of that vocabulary.
    The masks are filled in native code with the GIL released, the rows split over ``threads``
    threads; the Python work per matcher (gathering its state, planning its row, budgets) stays on the
    calling thread, while the other threads (native, never holding the GIL; Linux only, and for a
    C-contiguous bitmask: otherwise the calling thread fills every row) already fill the rows planned
    so far. Canonical matchers (``matcher(canonical=True)``) may be among them: their rows are made by
    their own ``fill_mask``, in Python, after the others. Rows not named
    are left as they are (the bitmask may have more rows than matchers, as xgrammar's batched fill
    allows).

    Raises :class:`ConfigurationError` if ``bitmask`` is not a writable 2-D int32 array with rows of
    the vocabulary's width, if without ``indices`` it has fewer rows than matchers, if ``indices``
    does not give each matcher its own row in range, if ``matchers`` is not a sequence of matchers, or
    if ``threads`` is not a positive int, before anything is written; :class:`MatcherStateError` as
    ``fill_mask`` does (an internal error: with helper threads, rows they had begun are left all zeros,
    no token allowed; the others as they were).
    """
    if not isinstance(threads, int) or threads < 1:
        raise ConfigurationError(f"threads must be a positive int, got {threads!r}")
    try:
        n = len(matchers)
    except TypeError:
        raise ConfigurationError(f"matchers must be a sequence of matchers, got {type(matchers).__name__}") from None
    groups: list[_Group] = []
    # Helpers are woken first: their wake-up overlaps the argument checks. The kernels read arrays by descriptor as
    # C-contiguous (a strided bitmask, such as a wider array's first columns, is filled by the calling thread alone,
    # from the arrays themselves).
    try:
        helpers = take_crew(min(threads, n) - 1, n)
        try:
            matchers, rows, others, contiguous = _check_args(matchers, bitmask, indices)
            bitmask_row = (address(bitmask), *bitmask.shape) if contiguous else None
            failed = True
            try:
                memo, own, budgeted = _plan(matchers, rows, bitmask, bitmask_row, helpers if contiguous else None,
                                            groups)
                failed = False
            finally:
                for group in groups:
                    group.fill(failed)
        finally:
            give_crew(helpers)
        for group in groups:
            group.finish(bitmask)
    finally:
        for group in groups:
            _give(group.arrays)
    for m, row in memo:
        bitmask[row] = m._mask
    for m, row in own + others:
        m.fill_mask(bitmask[row])  # a budget restricts in fill_mask (and is never built for counted terminals)
    for m, row in budgeted:
        m._budget.restrict(bitmask[row], m._lexstate, m._stack, len(m._history), m._post)
