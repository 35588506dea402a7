"""The ``nogil`` Numba kernels of :func:`grammask.batch.fill_masks`, shared by the calling thread and the helper
threads (:mod:`grammask.batch_crew`): filling a planned row, taking published rows one at a time, and the control
cells they coordinate through (:mod:`grammask.atomics`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from grammask.atomics import (
    atomic_add,
    atomic_cas,
    atomic_load,
    atomic_store,
    yield_cpu,
)
from grammask.matcher import _STACK_VIEW
from grammask.parser.kernels import (
    ALWAYS,
    SCRATCH,
    UNKNOWN,
    add_marked_classes,
    feed_sequence,
)

# Plan columns, one plan row per matcher the kernel fills: its bitmask row, lexer state, pair (-1: terminated),
# whether EOS is allowed (1 or 0; DECIDE: the kernel decides from the lexer state's ``end_table`` row and writes
# ALWAYS, NEVER or UNKNOWN here), its top stack states top first ``states[a:b]`` (empty when neither the pair's marked
# classes nor EOS need them), whether the pair has marked classes.
ROW, LEX, PAIR, EOS, STATES_A, STATES_B, MARKED = range(7)
COLUMNS = 7
DECIDE = -1
# Cells of a group's control array: plan rows published, next row to take, planning done, rows filled, rows filled
# that Python must finish (classes or EOS the kernel could not decide).
READY, NEXT, DONE, FILLED, LEFT = range(5)
CELLS = 5
# Rows planned between two publications to the threads already filling (a row takes a few microseconds to plan):
# 2 at first, so that they start soon, then twice as many each time up to ``CHUNK``.
FIRST_CHUNK = 2
CHUNK = 8
# Polls of the control array (about a nanosecond each) a thread spins before it gives up waiting: a helper thread for
# rows to fill (~0.4 ms; then it naps and looks again), the caller for helper threads to finish their last rows (~1 ms
# at a time, then it sleeps ``SLEEP`` seconds and looks again). Every ``YIELD_EVERY`` polls (microseconds) a spinning thread lets
# another thread ready on its CPU run: on a busy machine that may be the one it waits for.
YIELD_EVERY = 4096
SPIN_ROWS = 1 << 19
SPIN_FILLED = 1 << 20
SLEEP = 1e-4


@nb.njit(cache=True, nogil=True, inline="always")
def copy_words(dst, src):
    """``dst[:] = src`` for two rows of mask words (Numba's slice assignment checks for overlap and copies through
    a temporary array: five times slower)."""
    for w in range(dst.shape[0]):
        dst[w] = src[w]


@nb.njit(cache=True, nogil=True)
def fill_row(i, plan, states, n_unknown, bitmask, tables, stack_room, scratch):
    """Fill plan row ``i``'s bitmask row: the pair's mask, its marked classes the stack accepts
    (:func:`add_marked_classes`), EOS (decided here where the plan says so); ``n_unknown[i]`` = classes left
    undecided, which Python makes afterwards (as EOS where the plan left it undecided). ``stack_room`` and
    ``scratch``: a thread's room for the stack's top states and for :func:`feed_sequence`."""
    (pair_mask, pair_marks, masks, marks_ptr, marks, state_span, state_class, state_lcp, state_dep, action, goto,
     rule_len, rule_lhs, seq_ptr, seq_terms, class_follow, follow_ptr, follow_terms, follow_any, word_ptr, words, bits,
     eos_words, eos_bits, end_table) = tables
    row = bitmask[plan[i, ROW]]
    pair = plan[i, PAIR]
    n = 0
    if pair < 0:
        row[:] = 0
    else:
        copy_words(row, masks[pair_mask[pair]])
        a, b = plan[i, STATES_A], plan[i, STATES_B]
        stack = stack_room[: b - a]  # bottom first
        for k in range(b - a):
            stack[k] = states[b - 1 - k]
        q = plan[i, LEX]
        if plan[i, EOS] == DECIDE:
            ends = end_table[q, 1 : end_table[q, 0] + 1]
            plan[i, EOS] = feed_sequence(action, goto, rule_len, rule_lhs, stack, ends, scratch)
        if plan[i, MARKED]:
            m = pair_marks[pair]
            s0, s1 = state_span[q, 0], state_span[q, 1]
            n = add_marked_classes(
                row, action, goto, rule_len, rule_lhs, stack, state_class[s0:s1], state_lcp[s0:s1],
                state_dep[s0:s1], marks[marks_ptr[m] : marks_ptr[m + 1]], seq_ptr, seq_terms, class_follow,
                follow_ptr, follow_terms, follow_any, word_ptr, words, bits, np.empty(s1 - s0, dtype=np.int32))
    n_unknown[i] = n
    if plan[i, EOS] == ALWAYS:
        for j in range(len(eos_words)):
            row[eos_words[j]] |= eos_bits[j]
    return n > 0 or plan[i, EOS] == UNKNOWN


@nb.njit(cache=True, nogil=True)
def work(ctl, spin, bitmask, plan, states, n_unknown, tables):
    """Take published plan rows one at a time (``ctl[NEXT]``) and fill them (:func:`fill_row`) until planning is
    done and none is left (True), or until ``spin`` polls in a row found nothing new to take (False)."""
    stack_room = np.empty(_STACK_VIEW, dtype=np.int32)
    scratch = np.empty(SCRATCH, dtype=np.int32)
    idle = 0
    while True:
        done = atomic_load(ctl, DONE)
        ready = atomic_load(ctl, READY)
        i = atomic_load(ctl, NEXT)
        if i < ready:
            if atomic_cas(ctl, NEXT, i, i + 1) == i:
                if fill_row(i, plan, states, n_unknown, bitmask, tables, stack_room, scratch):
                    atomic_add(ctl, LEFT, 1)
                atomic_add(ctl, FILLED, 1)
                idle = 0
        elif done:
            return True
        else:
            idle += 1
            if idle > spin:
                return False
            if idle % YIELD_EVERY == 0:
                yield_cpu()  # on a busy machine the thread that plans the rows may be waiting for this CPU


@nb.njit(cache=True, nogil=True)
def wait(ctl, cell, target, spin):
    """Whether ``ctl[cell]`` reached ``target`` within ``spin`` polls (the GIL is released meanwhile)."""
    for k in range(spin):
        if atomic_load(ctl, cell) >= target:
            return True
        if k % YIELD_EVERY == YIELD_EVERY - 1:
            yield_cpu()
    return atomic_load(ctl, cell) >= target


@nb.njit(cache=True)
def publish(ctl, cell, value):
    """``ctl[cell] = value``, seen by the filling threads after everything written before it."""
    atomic_store(ctl, cell, value)
