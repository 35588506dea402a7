"""Helper threads for :func:`grammask.batch.fill_masks` that wait, wake and fill rows in native code, never taking
the GIL: the caller plans rows in Python (holding the GIL) while they fill, and they start as soon as the OS wakes
them, not when the interpreter would hand them the GIL.

A crew is a few threads, each in a ``nogil`` Numba loop (:func:`_serve`), and one mailbox (an int64 array). A call
takes a free crew (:func:`take_crew`; concurrent calls take different ones), opens ``n`` seats and wakes the threads as it
begins (a futex, :mod:`grammask.atomics`: a thread's wake-up, ~0.05-0.15 ms after an idle while, overlaps the
caller's argument checks and first plans). Each group of rows the call plans is published to the crew as one row of a
descriptor table (every array the group's kernel reads: address and shape; the mailbox holds the table's address),
and a thread that took a seat fills each group's rows as they are published (:func:`grammask.batch_kernels.work`),
then leaves. A
thread the OS wakes after the call has closed its seats finds none left and goes back to sleep; the call waits for
the threads that took a seat to leave before its arrays can go. The threads are kept off the caller's CPU (a guest
OS puts a woken thread on its waker's CPU even where another is idle, and two threads would then share one CPU),
re-steered only when the caller's CPU changes. Where futexes are not available (:data:`grammask.atomics.HAS_FUTEX`),
there are no helpers: the caller fills every row.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING

import numba as nb
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from grammask.atomics import (
    HAS_FUTEX,
    atomic_add,
    atomic_cas,
    atomic_load,
    atomic_store,
    current_cpu,
    nap,
    sleep_while,
    wake,
    yield_cpu,
)
from grammask.batch_kernels import (
    SLEEP,
    SPIN_FILLED,
    SPIN_ROWS,
    YIELD_EVERY,
    publish,
    wait,
    work,
)
from grammask.errors import MatcherStateError

if TYPE_CHECKING:
    from grammask.engine import MatcherView

# Mailbox cells: calls so far (the threads sleep on it), seats left (CLOSED once the call ends), threads that took a
# seat and left, groups published, planning over (no more groups), the descriptor table's address and rows.
_EPOCH, _SEATS, _GONE, _GROUPS, _PLANNED, _TABLE, _TABLE_ROWS = range(7)
_CELLS = 7
_CLOSED = -(1 << 40)
# A group's arrays as the kernel takes them, in descriptor order: dtype and dimensions. The first five are the
# group's own (control cells, bitmask, plan, top states, undecided classes), then the grammar's
# tables (``MatcherView.fill_args``); :func:`_tables` reads them back in the same order.
LAYOUT = (
    (np.int64, 1), (np.int32, 2), (np.int64, 2), (np.int32, 1), (np.int64, 1),
    (np.int32, 1), (np.int32, 1), (np.int32, 2), (np.int64, 1), (np.uint8, 1), (np.int64, 2), (np.int32, 1),
    (np.int32, 1), (np.int32, 1), (np.int32, 2), (np.int32, 2), (np.int32, 1), (np.int32, 1), (np.int64, 1),
    (np.int32, 1), (np.int32, 1), (np.int32, 1), (np.int32, 1), (np.bool_, 1), (np.int64, 1), (np.int32, 1),
    (np.int32, 1), (np.int64, 1), (np.int32, 1), (np.int32, 2),
)
OWN = 5
_NOWHERE = -2  # no CPU: the threads were never steered
# Polls a thread with a seat spins waiting for the next group (~1 ms: woken as the call begins, it waits out the
# caller's checks and first plans) before it naps (microseconds) between looks.
_SPIN_GROUPS = 1 << 20
_NAP_US = 100


@intrinsic
def _pointer(typingctx, address, dtype):
    """``address`` as a pointer to ``dtype`` values."""
    target = types.CPointer(dtype.instance_type)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(target))

    return target(types.int64, dtype), codegen


@nb.njit(cache=True)
def address(a):
    """The address of array ``a``'s first element (a third of ``a.ctypes.data``'s time in a call after a pause)."""
    return a.ctypes.data


@nb.njit(cache=True, nogil=True, inline="always")
def _at1(d, k, dtype):
    """The 1-D array descriptor row ``d[k]`` describes."""
    return nb.carray(_pointer(d[k, 0], dtype), (d[k, 1],))


@nb.njit(cache=True, nogil=True, inline="always")
def _at2(d, k, dtype):
    """The 2-D array descriptor row ``d[k]`` describes."""
    return nb.carray(_pointer(d[k, 0], dtype), (d[k, 1], d[k, 2]))


@nb.njit(cache=True, nogil=True)
def _tables(d):
    """The grammar's tables of descriptor ``d`` (its rows from ``OWN`` on, as :data:`LAYOUT` lists them)."""
    return (_at1(d, 5, np.int32), _at1(d, 6, np.int32), _at2(d, 7, np.int32), _at1(d, 8, np.int64),
            _at1(d, 9, np.uint8), _at2(d, 10, np.int64), _at1(d, 11, np.int32), _at1(d, 12, np.int32),
            _at1(d, 13, np.int32), _at2(d, 14, np.int32), _at2(d, 15, np.int32), _at1(d, 16, np.int32),
            _at1(d, 17, np.int32), _at1(d, 18, np.int64), _at1(d, 19, np.int32), _at1(d, 20, np.int32),
            _at1(d, 21, np.int32), _at1(d, 22, np.int32), _at1(d, 23, np.bool_), _at1(d, 24, np.int64),
            _at1(d, 25, np.int32), _at1(d, 26, np.int32), _at1(d, 27, np.int64), _at1(d, 28, np.int32),
            _at2(d, 29, np.int32))


@nb.njit(cache=True, nogil=True)
def fill_group(d):
    """Fill rows of the group descriptor ``d`` describes until its planning is done and none is left (the calling
    thread's part too: one descriptor crosses into native code, not the 30 arrays it describes)."""
    ctl = _at1(d, 0, np.int64)
    args = (_at2(d, 1, np.int32), _at2(d, 2, np.int64), _at1(d, 3, np.int32), _at1(d, 4, np.int64), _tables(d))
    while not work(ctl, SPIN_ROWS, *args):
        nap(_NAP_US)  # no rows for a while: planning is slow (a state's tables being built)


@nb.njit(cache=True, nogil=True)
def take_seat(mail):
    """Take one of the call's seats if one is left (whether it did)."""
    while True:
        seats = atomic_load(mail, _SEATS)
        if seats <= 0:
            return False
        if atomic_cas(mail, _SEATS, seats, seats - 1) == seats:
            return True


@nb.njit(cache=True, nogil=True)
def _help(mail):
    """A seated thread's part of a call: fill each group as it is published until planning is over."""
    table = nb.carray(_pointer(mail[_TABLE], np.int64), (mail[_TABLE_ROWS], len(LAYOUT), 3))
    g = 0
    idle = 0
    while True:
        if g < atomic_load(mail, _GROUPS):
            fill_group(table[g])
            g += 1
            idle = 0
        elif atomic_load(mail, _PLANNED):
            return
        else:
            idle += 1
            if idle > _SPIN_GROUPS:
                nap(_NAP_US)
            elif idle % YIELD_EVERY == 0:
                yield_cpu()


@nb.njit(cache=True, nogil=True)
def _serve(mail):
    """A crew thread's life: sleep until a call wakes it, help if a seat is left, and again."""
    seen = atomic_load(mail, _EPOCH)
    while True:
        sleep_while(mail, _EPOCH, seen)
        now = atomic_load(mail, _EPOCH)
        if now != seen:
            seen = now
            if take_seat(mail):
                _help(mail)
                atomic_add(mail, _GONE, 1)


@nb.njit(cache=True)
def _open_seats(mail, seats, avoid):
    """Start a call with ``seats`` seats and wake that many threads, unless the caller
    is no longer on CPU ``avoid`` (the one the threads are kept off; -1: none): then nothing. The caller's CPU."""
    cpu = current_cpu()
    if cpu == avoid:
        mail[_GONE] = mail[_PLANNED] = 0
        atomic_store(mail, _SEATS, seats)
        atomic_add(mail, _EPOCH, 1)
        wake(mail, _EPOCH, seats)
    return cpu


@nb.njit(cache=True)
def _close(mail):
    """Close the call's seats; how many were left."""
    return atomic_store(mail, _SEATS, _CLOSED)


def describe(arrays: tuple[np.ndarray, ...], out: np.ndarray, first: int) -> None:
    """Write into ``out`` (rows of address and shape) the descriptors of ``arrays``, as :data:`LAYOUT` lists them
    from ``first`` on. Raises :class:`MatcherStateError` for an array not as the layout says (an internal error: a
    table a kernel change forgot to list)."""
    for k, (a, (dtype, ndim)) in enumerate(zip(arrays, LAYOUT[first : first + len(out)], strict=True)):
        if a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            raise MatcherStateError(f"internal error: batch kernel array {first + k} is {a.dtype} {a.ndim}-D, expected C-contiguous "
                            f"{np.dtype(dtype)} {ndim}-D")
        out[k] = (a.ctypes.data, a.shape[0], a.shape[1] if ndim == 2 else 1)


# per grammar (its matchers' view, held weakly): its tables as last described, and their descriptor rows
_described: weakref.WeakKeyDictionary[MatcherView, tuple[tuple, np.ndarray]] = weakref.WeakKeyDictionary()


def table_rows(view: MatcherView) -> np.ndarray:
    """The descriptor rows (from ``OWN`` on) of the tables the grammar ``view`` fills rows from, as they are now."""
    known = _described.get(view)
    if known is None or known[0] is not view.fill_args:  # new, or its tables grew
        rows = np.empty((len(LAYOUT) - OWN, 3), dtype=np.int64)
        describe(view.fill_args, rows, OWN)
        known = _described[view] = (view.fill_args, rows)
    return known[1]


class Crew:
    """Threads that help with one call at a time, and their mailbox."""

    def __init__(self) -> None:
        self.mail = np.zeros(_CELLS, dtype=np.int64)
        self._ids: list[int] = []  # the threads' native ids
        self._avoid = _NOWHERE  # the CPU the threads are kept off (-1: none, where the OS does not say)
        self._table = np.empty((0, len(LAYOUT), 3), dtype=np.int64)
        self._wanted = self._seats = 0  # seats the call is to open, and has opened

    def begin(self, seats: int, groups: int) -> None:
        """Begin a call with ``seats`` helpers and up to ``groups`` groups: threads started if fewer are there, and
        woken (they wait for the first group)."""
        while len(self._ids) < seats:
            t = threading.Thread(target=_serve, args=(self.mail,), name=f"grammask-masks-{len(self._ids)}", daemon=True)
            t.start()
            self._ids.append(t.native_id)
            self._avoid = _NOWHERE
        if len(self._table) < groups:
            self._table = np.empty((groups, len(LAYOUT), 3), dtype=np.int64)
            self.mail[_TABLE], self.mail[_TABLE_ROWS] = self._table.ctypes.data, groups
        self._wanted, self._seats = seats, 0
        self.mail[_GROUPS] = 0
        self._open()

    def _open(self) -> None:
        """Open the call's seats and wake the threads."""
        seats = self._wanted
        cpu = _open_seats(self.mail, seats, self._avoid)
        woken = cpu == self._avoid
        if not woken:  # the caller moved: steer the threads off its CPU first
            self._steer(cpu)
            woken = _open_seats(self.mail, seats, cpu) == cpu  # (unless it moved again: then no help this time)
        self._seats = seats if woken else 0

    def _steer(self, cpu: int) -> None:
        """Keep the threads off CPU ``cpu`` (if the caller may run on others)."""
        cpus = os.sched_getaffinity(0)  # (Linux: no crews elsewhere)
        if cpu >= 0 and len(cpus) > 1:
            for thread in self._ids:
                with contextlib.suppress(OSError):  # a CPU the threads may not use
                    os.sched_setaffinity(thread, cpus - {cpu})
        self._avoid = cpu

    def publish(self, g: int, d: np.ndarray) -> None:
        """Hand group ``g`` (its descriptor ``d``: its own arrays and its grammar's tables, in :data:`LAYOUT` order) to
        the threads."""
        self._table[g] = d
        publish(self.mail, _GROUPS, g + 1)

    def close(self) -> None:
        """End the call: no more groups, no more seats; wait for the threads that took one to leave."""
        if not self._seats:
            return
        publish(self.mail, _PLANNED, 1)
        joined = self._seats - _close(self.mail)
        while not wait(self.mail, _GONE, joined, SPIN_FILLED):
            time.sleep(SLEEP)  # a thread still fills a row it took (or the OS stopped it meanwhile)


_free: list[Crew] = []


def take_crew(helpers: int, groups: int) -> Crew | None:
    """A crew with ``helpers`` helper threads woken for a call of up to ``groups`` groups (None when there are to be
    none); :func:`give_crew` ends the call."""
    if helpers < 1 or not HAS_FUTEX:
        return None
    try:
        c = _free.pop()  # (atomic under the GIL: concurrent calls take different crews)
    except IndexError:
        c = Crew()
    c.begin(helpers, groups)
    return c


def give_crew(c: Crew | None) -> None:
    """End the call of crew ``c`` (:meth:`Crew.close`) and keep it for a later call."""
    if c is not None:
        c.close()
        _free.append(c)


def _forget_crews() -> None:
    _free.clear()  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_crews)
