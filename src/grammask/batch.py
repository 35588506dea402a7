"""Masks for many matchers in one call, filled in native code with the GIL released.

:func:`fill_masks` writes, for every matcher, exactly the row its own ``fill_mask`` would write.
Python gathers each matcher's state into a plan (pair of lexer state and top LR state, the stack's
top states when the pair has stack-dependent classes, the EOS decision; a matcher whose state has
not changed since its last mask reuses it), then a ``nogil`` Numba kernel copies the pairs'
precomputed masks and checks their marked classes against the stacks: one call per compiled grammar,
or with ``threads=n`` the rows cut into shrinking pieces that the calling thread and ``n - 1`` pool
threads take one by one. All planning is done before, so between kernel calls the threads run only a
few lines of Python and never wait long for the GIL (planning on one thread while others filled would
make each hand-over wait for the interpreter's switch interval, 5 ms); a pool thread that the OS
starts late takes fewer pieces instead of holding up the call. What the kernel cannot decide
(classes that reduce below the top states it was given), the memo and the token budgets are
finished per row in Python afterwards, as ``fill_mask`` does.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from grammask.errors import ConfigurationError, MatcherStateError
from grammask.matcher import _STACK_VIEW, _TERMINATED, Matcher, _top_list
from grammask.parser.kernels import add_marked_classes

if TYPE_CHECKING:
    from grammask.engine import MatcherView

# Plan columns, one plan row per matcher the kernel fills: its bitmask row, lexer state, pair (-1: terminated),
# whether EOS is allowed, its top stack states ``states[a:b]`` (empty when the pair has no marked classes), and
# where its undecided classes go in ``unknown``; its place in the plan (where their count goes).
_ROW, _LEX, _PAIR, _EOS, _STATES_A, _STATES_B, _UNKNOWN, _INDEX = range(8)


@nb.njit(cache=True, nogil=True)
def _fill_rows(bitmask, plan, states, unknown, n_unknown, pair_mask, pair_marks, masks, marks_ptr, marks,
               state_span, state_class, state_lcp, state_dep, action, goto, rule_len, rule_lhs, seq_ptr, seq_terms,
               class_follow, follow_ptr, follow_terms, follow_any, word_ptr, words, bits, eos_words, eos_bits):
    """Fill ``bitmask[plan[i, _ROW]]`` for every plan row ``i``: the pair's mask, its marked classes the
    stack accepts (:func:`add_marked_classes`), EOS; ``n_unknown[plan[i, _INDEX]]`` = classes left undecided."""
    for i in range(plan.shape[0]):
        row = bitmask[plan[i, _ROW]]
        pair = plan[i, _PAIR]
        n = 0
        if pair < 0:
            row[:] = 0
        else:
            row[:] = masks[pair_mask[pair]]
            a, b = plan[i, _STATES_A], plan[i, _STATES_B]
            if b > a:
                q = plan[i, _LEX]
                s0, s1 = state_span[q, 0], state_span[q, 1]
                m = pair_marks[pair]
                u = plan[i, _UNKNOWN]
                n = add_marked_classes(
                    row, action, goto, rule_len, rule_lhs, states[a:b], state_class[s0:s1], state_lcp[s0:s1],
                    state_dep[s0:s1], marks[marks_ptr[m] : marks_ptr[m + 1]], seq_ptr, seq_terms, class_follow,
                    follow_ptr, follow_terms, follow_any, word_ptr, words, bits, unknown[u : u + s1 - s0])
        n_unknown[plan[i, _INDEX]] = n
        if plan[i, _EOS]:
            for j in range(len(eos_words)):
                row[eos_words[j]] |= eos_bits[j]


_MIN_PIECE = 4
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _start(fn: Callable[[], None], n: int) -> list[Future]:
    """Run ``fn`` on ``n`` threads of a shared pool (a bigger pool replaces it when asked for more; the
    old one ends once its work is done)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(n, thread_name_prefix="grammask-masks"), n
        return [_pool.submit(fn) for _ in range(n)]


class _Group:
    """The matchers of one engine whose rows the kernel fills: planned by :meth:`add`, then :meth:`seal`,
    :meth:`fill` (any thread, any piece of the plan) and :meth:`finish` (the caller's thread)."""

    def __init__(self, view: MatcherView):
        self.view = view
        self.matchers: list[Matcher] = []
        self._rows: list[tuple[int, ...]] = []
        self._states: list[int] = []
        self._n_states = 0
        self._n_unknown = 0

    def add(self, m: Matcher, row: int) -> None:
        """Plan matcher ``m``'s mask into bitmask row ``row``.

        Raises :class:`MatcherStateError` as ``fill_mask`` does when no mask table covers the state.
        """
        q, stack = m._lexstate, m._stack
        a, i = self._n_states, len(self._rows)
        if q == _TERMINATED:
            self._rows.append((row, 0, -1, 1, a, a, 0, i))
            self.matchers.append(m)
            return
        view = self.view
        pair = view.pairs(q)[stack[0]]
        if pair < 0:
            raise MatcherStateError(f"internal error: no mask table for lexer state {q} with LR state {stack[0]}")
        if view.pair_has_marks[pair]:
            top = _top_list(stack, _STACK_VIEW)
            self._states += top
            self._n_states += len(top)
        self._rows.append((row, q, pair, int(m._accepts_end(q, stack, m._post)), a, self._n_states, self._n_unknown, i))
        self._n_unknown += len(view.state_classes[q][0])
        self.matchers.append(m)

    def seal(self, threads: int) -> None:
        """The plan as the kernel's arrays, cut into pieces for ``threads`` threads (one piece for one)."""
        self.plan = np.array(self._rows, dtype=np.int64)
        self.pieces = [self.plan[a:b] for a, b in _pieces(len(self.plan), threads)]
        self.states = np.array(self._states, dtype=np.int32)
        self.unknown = np.empty(self._n_unknown, dtype=np.int32)
        self.n_unknown = np.zeros(len(self._rows), dtype=np.int64)

    def fill(self, bitmask: np.ndarray, piece: np.ndarray) -> None:
        """Run the kernel on ``piece`` (rows of the sealed plan); the GIL is released while it runs."""
        _fill_rows(bitmask, piece, self.states, self.unknown, self.n_unknown, *self.view.fill_args)

    def finish(self, bitmask: np.ndarray) -> None:
        """What ``fill_mask`` does after its compiled check: the Python fallback and the memo."""
        rows = self.plan[:, [_ROW, _PAIR, _UNKNOWN]].tolist()
        for m, (row, pair, u), k in zip(self.matchers, rows, self.n_unknown.tolist(), strict=True):
            if pair < 0:
                continue
            mask = bitmask[row]
            if k:
                m._add_unknown_classes(mask, m._stack, self.unknown[u : u + k])
            m._mask = mask.copy()
            m._mask_key = (m._lexstate, m._stack, m._post)


def _pieces(n: int, threads: int) -> list[tuple[int, int]]:
    """Row ranges of ``n`` rows for ``threads`` threads: shrinking pieces (a share of what is left), so
    threads that start late or run slow still end about together."""
    if threads == 1:
        return [(0, n)]
    out, a = [], 0
    while a < n:
        b = min(n, a + max(_MIN_PIECE, -(-(n - a) // (2 * threads))))
        out.append((a, b))
        a = b
    return out


def _fill(groups: list[_Group], bitmask: np.ndarray, threads: int) -> None:
    """Run the kernel on every group's pieces: this thread and ``threads - 1`` pool threads take the next
    piece as they get free (a thread the OS starts late takes fewer, or none)."""
    work = iter([(group, piece) for group in groups for piece in group.pieces])  # next() is atomic under the GIL

    def drain() -> None:
        for group, piece in work:
            group.fill(bitmask, piece)

    futures = _start(drain, threads - 1) if threads > 1 else []
    drain()
    for f in futures:
        if not f.cancel():  # a pool thread not started by now has nothing left to do: no waiting for it
            f.result()


def _check_args(matchers: Sequence[Matcher], bitmask: np.ndarray, indices: Sequence[int] | None,
                threads: int) -> list[int]:
    """The row of each matcher; :class:`ConfigurationError` for the argument errors :func:`fill_masks` names."""
    if not isinstance(bitmask, np.ndarray) or bitmask.ndim != 2 or bitmask.dtype != np.int32:
        raise ConfigurationError("bitmask must be a 2-D int32 NumPy array (rows of mask words)")
    if not bitmask.flags.writeable:
        raise ConfigurationError("bitmask is read-only")
    if not isinstance(threads, int) or threads < 1:
        raise ConfigurationError(f"threads must be a positive int, got {threads!r}")
    n_rows, width = bitmask.shape
    if indices is None:
        if n_rows < len(matchers):
            raise ConfigurationError(f"bitmask has {n_rows} rows for {len(matchers)} matchers")
        rows = list(range(len(matchers)))
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
    for m in matchers:
        words = m._rt.n_words
        if width != words:
            raise ConfigurationError(f"bitmask rows have {width} words, expected {words} for {m.compiled.vocab.n_logits} logits")
    return rows


def fill_masks(matchers: Sequence[Matcher], bitmask: np.ndarray, indices: Sequence[int] | None = None, *,
               threads: int = 1) -> None:
    """Fill row ``indices[i]`` (row ``i`` without ``indices``) of ``bitmask`` as ``matchers[i].fill_mask`` would.

    Example: ``fill_masks(matchers, allocate_bitmask(len(matchers), vocab.n_logits), threads=2)``.

    ``bitmask`` is a 2-D int32 array of mask rows (xgrammar/vLLM layout) as wide as the matchers'
    vocabulary needs; the matchers may come from different compiled grammars of that vocabulary.
    The masks are filled in native code with the GIL released, the rows split over ``threads``
    threads; the Python work per matcher (gathering its state, deciding EOS, budgets) stays on the
    calling thread. Rows not named are left as they are (the bitmask may have more rows than matchers,
    as xgrammar's batched fill allows).

    Raises :class:`ConfigurationError` if ``bitmask`` is not a writable 2-D int32 array with rows of
    the vocabulary's width, if without ``indices`` it has fewer rows than matchers, if ``indices``
    does not give each matcher its own row in range, or if ``threads`` is not a positive int;
    :class:`MatcherStateError` as ``fill_mask`` does. Either comes before anything is written.
    """
    rows = _check_args(matchers, bitmask, indices, threads)
    threads = max(1, min(threads, len(matchers)))
    groups: dict[int, _Group] = {}
    memo: list[tuple[Matcher, int]] = []
    own: list[tuple[Matcher, int]] = []
    for m, row in zip(matchers, rows, strict=True):
        if m._lexstate != _TERMINATED and m._memo_valid():
            memo.append((m, row))
            continue
        if m._counting is not None and m._lexstate != _TERMINATED and m._counting.near(m._lexstate, m._post):
            own.append((m, row))  # a counted lexeme near its level's end: several levels' masks, in Python
            continue
        engine = m.compiled._engine
        group = groups.get(id(engine))
        if group is None:
            group = groups[id(engine)] = _Group(engine.view)
        group.add(m, row)
    for group in groups.values():
        group.seal(threads)
    _fill(list(groups.values()), bitmask, threads)
    for group in groups.values():
        group.finish(bitmask)
    for m, row in memo:
        bitmask[row] = m._mask
    for m, row in own:
        m.fill_mask(bitmask[row])  # budgets are not built for counted terminals: nothing more to restrict
    for m, row in zip(matchers, rows, strict=True):
        if m._budget is not None and m._lexstate != _TERMINATED:
            m._budget.restrict(bitmask[row], m._lexstate, m._stack, len(m._history), m._post)
