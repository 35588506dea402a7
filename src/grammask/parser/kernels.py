"""Compiled (Numba) LR simulation for checking many token classes against one stack at once.

A token class is "emitted terminal sequence E, then one terminal of follow set F (or any, if
the pending lexeme may end as an ignored terminal)". :func:`check_classes` feeds each class
to a copy-free overlay of a stack given as its top states: pops move a cursor down the given
states, pushes go to a small scratch area, the given states are never written. A reduction
that would pop every given state makes the answer UNKNOWN: the compile step uses this with
the one-state stack ``[p]`` to find the classes whose fate does not depend on what lies below
``p``, and the matcher passes the whole stack (or its top, and falls back when UNKNOWN).
"""

from __future__ import annotations

from collections.abc import Callable

import numba as nb
import numpy as np

NEVER, ALWAYS, UNKNOWN = 0, 1, 2
SCRATCH = 128


@nb.njit(cache=True, inline="always")
def feed_terminal(action, goto, rule_len, rule_lhs, stack, real, scratch, n_scratch, terminal):
    """Feed one terminal to the overlay (``real`` given states in use + ``n_scratch`` pushed ones).

    Returns (status, real, n_scratch): ALWAYS shifted, NEVER syntax error, UNKNOWN popped every given state
    (or a context terminal: an id past the table's columns, see :mod:`grammask.indentation`).
    """
    if terminal >= action.shape[1]:
        return UNKNOWN, real, n_scratch
    while True:
        top = scratch[n_scratch - 1] if n_scratch > 0 else stack[real - 1]
        code = action[top, terminal]
        if code >= 0:
            if n_scratch >= SCRATCH:
                return UNKNOWN, real, n_scratch
            scratch[n_scratch] = code
            return ALWAYS, real, n_scratch + 1
        if code == -1:
            return NEVER, real, n_scratch
        rule = -code - 2
        n = rule_len[rule]
        if n <= n_scratch:
            n_scratch -= n
        else:
            real -= n - n_scratch
            n_scratch = 0
            if real <= 0:
                return UNKNOWN, real, n_scratch
        below = scratch[n_scratch - 1] if n_scratch > 0 else stack[real - 1]
        if n_scratch >= SCRATCH:
            return UNKNOWN, real, n_scratch
        scratch[n_scratch] = goto[below, rule_lhs[rule]]
        n_scratch += 1


@nb.njit(cache=True, nogil=True)
def feed_sequence(action, goto, rule_len, rule_lhs, stack, terminals, scratch):
    """ALWAYS if ``stack`` (its top states, bottom first) takes every one of ``terminals`` in turn, NEVER if one is a
    syntax error, UNKNOWN if the given states cannot decide (see :func:`feed_terminal`); ``scratch``: room for
    :data:`SCRATCH` states pushed meanwhile."""
    real, n_scratch = len(stack), 0
    for t in terminals:
        status, real, n_scratch = feed_terminal(action, goto, rule_len, rule_lhs, stack, real, scratch, n_scratch, t)
        if status != ALWAYS:
            return status
    return ALWAYS


@nb.njit(cache=True)
def check_classes(action, goto, rule_len, rule_lhs, stack, classes, lcp, seq_ptr, seq_terms, class_follow,
                  follow_ptr, follow_terms, follow_any, out):
    """``out[k]`` = ALWAYS / NEVER / UNKNOWN for class ``classes[k]`` fed on ``stack`` (bottom first).

    Class ``c`` emits ``seq_terms[seq_ptr[c]:seq_ptr[c+1]]`` and then needs a terminal of follow
    set ``class_follow[c]`` (or nothing more if ``follow_any`` of that set). Classes come sorted by
    their sequences and ``lcp[k]`` is the length of the sequence prefix class ``k`` shares with
    class ``k - 1``: the simulation of that prefix is reused (the classes form a trie), and a
    prefix that already failed fails every class under it.
    """
    _check_from(action, goto, rule_len, rule_lhs, stack, classes, lcp, seq_ptr, seq_terms, class_follow,
                follow_ptr, follow_terms, follow_any, out, 0)


@nb.njit(cache=True)
def check_classes_on_tops(action, goto, rule_len, rule_lhs, tops, classes, lcp, seq_ptr, seq_terms, class_follow,
                          follow_ptr, follow_terms, follow_any, out):
    """``out[i]`` = :func:`check_classes`'s verdicts of ``classes`` on the one-state stack ``[tops[i]]``, for every ``i``."""
    stack = np.empty(1, dtype=np.int32)
    for i in range(len(tops)):
        stack[0] = tops[i]
        _check_from(action, goto, rule_len, rule_lhs, stack, classes, lcp, seq_ptr, seq_terms, class_follow,
                    follow_ptr, follow_terms, follow_any, out[i], 0)


@nb.njit(cache=True)
def check_class_tails(action, goto, rule_len, rule_lhs, stack, classes, lcp, seq_ptr, seq_terms, class_follow,
                      follow_ptr, follow_terms, follow_any, out):
    """:func:`check_classes` for the classes' sequences without their first terminal (``lcp`` between the tails):
    the matcher feeds that first one itself (a context terminal, see :mod:`grammask.indentation`)."""
    _check_from(action, goto, rule_len, rule_lhs, stack, classes, lcp, seq_ptr, seq_terms, class_follow,
                follow_ptr, follow_terms, follow_any, out, 1)


@nb.njit(cache=True, inline="always")
def _check_from(action, goto, rule_len, rule_lhs, stack, classes, lcp, seq_ptr, seq_terms, class_follow,
                follow_ptr, follow_terms, follow_any, out, offset):
    depth = len(stack)
    max_len = 1
    for k in range(len(classes)):
        c = classes[k]
        max_len = max(max_len, seq_ptr[c + 1] - seq_ptr[c] - offset + 1)
    snap = np.empty((max_len, SCRATCH), dtype=np.int32)
    snap_real = np.empty(max_len, dtype=np.int64)
    snap_n = np.empty(max_len, dtype=np.int64)
    probe = np.empty(SCRATCH, dtype=np.int32)
    scratch = np.empty(SCRATCH, dtype=np.int32)
    # Follow terminals already tried after the current sequence (classes of one sequence are adjacent).
    n_columns = action.shape[1]
    tried = np.zeros(n_columns, dtype=np.int64)
    tried_status = np.empty(action.shape[1], dtype=np.int8)
    config = 0
    snap_real[0] = depth
    snap_n[0] = 0
    failed_at = max_len + 1  # sequence prefixes at least this long (on the current path) failed
    failed_status = NEVER
    previous = -1  # sequence length of the previous class, if its sequence is still fed in ``scratch``
    real = depth
    n_scratch = 0
    for k in range(len(classes)):
        c = classes[k]
        start = seq_ptr[c] + offset
        length = seq_ptr[c + 1] - start
        shared = lcp[k]
        if failed_at <= shared:
            out[k] = failed_status
            previous = -1
            continue
        failed_at = max_len + 1
        status = ALWAYS
        if not (shared == length and previous == length):
            config += 1
            real = snap_real[shared]
            n_scratch = snap_n[shared]
            scratch[:n_scratch] = snap[shared, :n_scratch]
            for d in range(shared, length):
                status, real, n_scratch = feed_terminal(action, goto, rule_len, rule_lhs, stack, real, scratch, n_scratch,
                                                seq_terms[start + d])
                if status != ALWAYS:
                    failed_at = d + 1
                    failed_status = status
                    break
                snap_real[d + 1] = real
                snap_n[d + 1] = n_scratch
                snap[d + 1, :n_scratch] = scratch[:n_scratch]
        if status == ALWAYS:
            previous = length
            f = class_follow[c]
            if not follow_any[f]:
                status = NEVER
                for j in range(follow_ptr[f], follow_ptr[f + 1]):
                    x = follow_terms[j]
                    if x >= n_columns:
                        status = UNKNOWN
                        continue
                    if tried[x] != config:
                        probe[:n_scratch] = scratch[:n_scratch]
                        tried_status[x], _, _ = feed_terminal(action, goto, rule_len, rule_lhs, stack, real, probe,
                                                      n_scratch, x)
                        tried[x] = config
                    if tried_status[x] == ALWAYS:
                        status = ALWAYS
                        break
                    if tried_status[x] == UNKNOWN:
                        status = UNKNOWN
        else:
            previous = -1
        out[k] = status


@nb.njit(cache=True, inline="always")
def _feed_tracking(action, goto, rule_len, rule_lhs, stack, real, scratch, n_scratch, terminal):
    """Like :func:`feed_terminal`, and on UNKNOWN also returns the rule being reduced and how many of its
    right-hand-side symbols lie at or below the given states (the part to walk back over; rule -1 for a
    context terminal)."""
    if terminal >= action.shape[1]:
        return UNKNOWN, real, n_scratch, -1, 0
    while True:
        top = scratch[n_scratch - 1] if n_scratch > 0 else stack[real - 1]
        code = action[top, terminal]
        if code >= 0:
            if n_scratch >= SCRATCH:
                return UNKNOWN, real, n_scratch, -1, 0
            scratch[n_scratch] = code
            return ALWAYS, real, n_scratch + 1, -1, 0
        if code == -1:
            return NEVER, real, n_scratch, -1, 0
        rule = -code - 2
        n = rule_len[rule]
        if n <= n_scratch:
            n_scratch -= n
        else:
            if n - n_scratch >= real:
                return UNKNOWN, real, n_scratch, rule, n - n_scratch - (real - 1)
            real -= n - n_scratch
            n_scratch = 0
        below = scratch[n_scratch - 1] if n_scratch > 0 else stack[real - 1]
        if n_scratch >= SCRATCH:
            return UNKNOWN, real, n_scratch, -1, 0
        scratch[n_scratch] = goto[below, rule_lhs[rule]]
        n_scratch += 1


_BRANCHES = 64
_MAX_PUSHES = 4096
"""Branches one class may follow in all before it is left UNKNOWN: stacks under long chains of reductions with several
candidates each branch without end in practice (a JSON schema's nested objects: seconds per class)."""


@nb.njit(cache=True)
def classify_classes(action, goto, rule_len, rule_lhs, cand_key, cand_keys, cand_ptr, cand_states, n_states, top,
                     classes, seq_ptr, seq_terms, class_follow, follow_ptr, follow_terms, follow_any, out):
    """``out[k]`` = ALWAYS / NEVER / UNKNOWN for class ``classes[k]`` with LR state ``top`` on an unknown stack.

    When a reduction pops ``top`` itself, the states that can lie below are the candidates
    ``u`` with ``δ*(u, rhs[:j]) = top`` (see :func:`exposed_states`); each is followed as a
    branch, and a class is ALWAYS (NEVER) only if it is accepted (rejected) on every branch (UNKNOWN past
    :data:`_MAX_PUSHES` branches).
    The real stack is one of the branches, so both answers are sound; UNKNOWN is checked
    against the real stack when decoding.
    """
    scratch = np.empty(SCRATCH, dtype=np.int32)
    probe = np.empty(SCRATCH, dtype=np.int32)
    given = np.empty(1, dtype=np.int32)
    work_given = np.empty(_BRANCHES, dtype=np.int32)
    work_first = np.empty(_BRANCHES, dtype=np.int32)
    work_index = np.empty(_BRANCHES, dtype=np.int64)
    for k in range(len(classes)):
        c = classes[k]
        n_work = 1
        work_given[0] = top
        work_first[0] = -1
        work_index[0] = seq_ptr[c]
        seen_always = False
        seen_never = False
        unknown = False
        pushes = 0
        while n_work > 0 and not unknown:
            n_work -= 1
            given[0] = work_given[n_work]
            n_scratch = 0
            if work_first[n_work] >= 0:
                scratch[0] = work_first[n_work]
                n_scratch = 1
            real = 1
            i = work_index[n_work]
            status = ALWAYS
            while i < seq_ptr[c + 1]:
                status, real, n_scratch, rule, j = _feed_tracking(action, goto, rule_len, rule_lhs, given, real,
                                                                  scratch, n_scratch, seq_terms[i])
                if status != ALWAYS:
                    break
                i += 1
            if status == UNKNOWN:
                if rule < 0:
                    unknown = True
                    break
                # Follow every state that can lie under the popped part; no candidate: no such stack.
                lo, hi = _exposed_range(cand_keys, cand_ptr, (cand_key[rule] + j - 1) * n_states + given[0])
                lhs = rule_lhs[rule]
                pushes += hi - lo
                if pushes > _MAX_PUSHES:
                    unknown = True
                    break
                for m in range(lo, hi):
                    if n_work >= _BRANCHES:
                        unknown = True
                        break
                    u = cand_states[m]
                    work_given[n_work] = u
                    work_first[n_work] = goto[u, lhs]
                    work_index[n_work] = i
                    n_work += 1
                continue
            if status == ALWAYS:
                status = _follow_branching(action, goto, rule_len, rule_lhs, cand_key, cand_keys, cand_ptr, cand_states,
                                           n_states, given, real, scratch, n_scratch, probe, class_follow[c],
                                           follow_ptr, follow_terms, follow_any)
            if status == ALWAYS:
                seen_always = True
            elif status == NEVER:
                seen_never = True
            else:
                unknown = True
            if seen_always and seen_never:
                unknown = True
        if unknown:
            out[k] = UNKNOWN
        elif seen_always:
            out[k] = ALWAYS
        else:
            out[k] = NEVER


@nb.njit(cache=True)
def _follow_branching(action, goto, rule_len, rule_lhs, cand_key, cand_keys, cand_ptr, cand_states, n_states, given, real,
                      scratch, n_scratch, probe, f, follow_ptr, follow_terms, follow_any):
    """Follow-set verdict on one branch: ALWAYS if some terminal is shifted on all its sub-branches."""
    if follow_any[f]:
        return ALWAYS
    status = NEVER
    sub_given = np.empty(1, dtype=np.int32)
    for j in range(follow_ptr[f], follow_ptr[f + 1]):
        x = follow_terms[j]
        probe[:n_scratch] = scratch[:n_scratch]
        s, _, _, rule, depth = _feed_tracking(action, goto, rule_len, rule_lhs, given, real, probe, n_scratch, x)
        if s == UNKNOWN and rule >= 0:
            lo, hi = _exposed_range(cand_keys, cand_ptr, (cand_key[rule] + depth - 1) * n_states + given[0])
            lhs = rule_lhs[rule]
            n_ok = 0
            n_bad = 0
            n_all = hi - lo
            for m in range(lo, hi):
                u = cand_states[m]
                sub_given[0] = u
                probe[0] = goto[u, lhs]
                s2, _, _, _, _ = _feed_tracking(action, goto, rule_len, rule_lhs, sub_given, 1, probe, 1, x)
                if s2 == ALWAYS:
                    n_ok += 1
                elif s2 == NEVER:
                    n_bad += 1
            if n_ok == n_all and n_all > 0:
                s = ALWAYS
            elif n_bad == n_all:
                s = NEVER
            else:
                s = UNKNOWN
        if s == ALWAYS:
            return ALWAYS
        if s == UNKNOWN:
            status = UNKNOWN
    return status


@nb.njit(cache=True)
def _exposed_range(cand_keys, cand_ptr, key):
    """The slice of ``cand_states`` (:func:`exposed_states`) for ``key``; empty where no state is exposed."""
    i = np.searchsorted(cand_keys, key)
    if i < len(cand_keys) and cand_keys[i] == key:
        return cand_ptr[i], cand_ptr[i + 1]
    return 0, 0


@nb.njit(cache=True)
def add_marked_classes(row, action, goto, rule_len, rule_lhs, stack, classes, lcp, deps, marks, seq_ptr,
                       seq_terms, class_follow, follow_ptr, follow_terms, follow_any, word_ptr, words, bits,
                       unknown):
    """OR into ``row`` the tokens of every marked class the stack accepts.

    ``classes``/``lcp``/``deps`` are one lexer state's classes in class order, ``marks`` a bitset
    over them. Classes the given stack states cannot decide (only when ``stack`` is the top of a
    deeper stack) are written to ``unknown``; returns how many.
    """
    picked = np.empty(len(classes), dtype=np.int32)
    shared = np.empty(len(classes), dtype=np.int64)
    n = 0
    run = np.int64(1 << 40)
    for k in range(len(classes)):
        run = min(run, lcp[k])
        if marks[k >> 3] & (1 << (k & 7)):
            picked[n] = classes[k]
            shared[n] = run if n > 0 else 0
            run = np.int64(1 << 40)
            unknown[n] = k
            n += 1
    verdicts = np.empty(n, dtype=np.int8)
    check_classes(action, goto, rule_len, rule_lhs, stack, picked[:n], shared[:n], seq_ptr, seq_terms,
                  class_follow, follow_ptr, follow_terms, follow_any, verdicts)
    n_unknown = 0
    for i in range(n):
        if verdicts[i] == ALWAYS:
            d = deps[unknown[i]]
            for w in range(word_ptr[d], word_ptr[d + 1]):
                row[words[w]] |= bits[w]
        elif verdicts[i] == UNKNOWN:
            unknown[n_unknown] = unknown[i]
            n_unknown += 1
    return n_unknown


@nb.njit(cache=True)
def or_class_tokens(row, word_ptr, words, bits, lists):
    """OR into ``row`` the tokens of the dependent class lists ``lists`` (see :func:`add_marked_classes`)."""
    for d in lists:
        for w in range(word_ptr[d], word_ptr[d + 1]):
            row[words[w]] |= bits[w]


def exposed_states(action: np.ndarray, goto: np.ndarray, rule_len: np.ndarray, rule_lhs: np.ndarray,
                   rule_rhs: np.ndarray, n_terms: int, check: Callable[[str], None] | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every rule ``r``, prefix length ``j`` and state ``p``: the states ``u`` with ``δ*(u, rhs_r[:j]) = p``.

    These are the states a reduction by ``r`` can expose when ``p`` is the lowest known state and
    ``j`` of the rule's symbols lie at or below it. Returned as ``(key_of_rule, keys, ptr, states)``:
    with ``k = (key_of_rule[r] + j - 1) * n_states + p``, the states for ``(r, j, p)`` are
    ``states[ptr[i]:ptr[i+1]]`` where ``keys[i] == k`` (``keys`` sorted; none where ``k`` is not there). Only
    states with a goto on the rule's left-hand side are kept (others cannot be under a reduction by it).
    ``check`` (a deadline's) is called before each rule (a big grammar's rule costs milliseconds).
    """
    n_states = action.shape[0]
    key_of_rule = np.zeros(len(rule_len), dtype=np.int64)
    np.cumsum(rule_len[:-1], out=key_of_rule[1:])
    starts = np.cumsum(rule_len) - rule_len
    chunks_key, chunks_u = [], []
    states = np.arange(n_states)
    for r in range(len(rule_len)):
        if check is not None:
            check("the token verdicts")
        feasible = goto[:, rule_lhs[r]] >= 0
        cur = np.where(feasible, states, -1)
        for j in range(1, int(rule_len[r]) + 1):
            sym = int(rule_rhs[starts[r] + j - 1])
            ok = cur >= 0
            column = action[:, sym] if sym < n_terms else goto[:, sym - n_terms]  # a shift is its target, >= 0
            cur = np.where(ok, column[np.maximum(cur, 0)], -1)
            hit = np.nonzero(cur >= 0)[0]
            # Keys of one (r, j) lie above those of the (r, j) before: sorting each run by p sorts them all.
            by_p = np.argsort(cur[hit], kind="stable")
            chunks_key.append((key_of_rule[r] + j - 1) * n_states + cur[hit][by_p])
            chunks_u.append(hit[by_p])
    keys = np.concatenate(chunks_key) if chunks_key else np.zeros(0, dtype=np.int64)
    us = np.concatenate(chunks_u) if chunks_u else np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])) if len(keys) else np.zeros(0, np.int64)
    return key_of_rule, keys[first], np.append(first, len(keys)).astype(np.int64), us.astype(np.int32)
