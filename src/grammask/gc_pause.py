"""Python's cyclic garbage collector paused while grammask compiles.

A compile allocates many small objects in a short time; with the collector on, the allocation counts trigger its
collections there, and a full one walks the whole process heap (tens of ms in a process holding numba and lark).
Paused, the compile makes no collections; the cycles it leaves are collected after, when the collector runs again.
A compile stopped by its deadline leaves what it built referenced from the traceback's frames, where the first
collection would walk all of it (0.3 s after a 1 s schema compile); those frames' locals are cleared first.
"""

from __future__ import annotations

import gc
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from grammask.errors import CompileTimeoutError

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block (or, as a decorator, the function) with the collector off; on leaving the outermost such block
    of any thread, turn it back on if it was on when the first one began. Raises what the block raises; a
    :class:`~grammask.errors.CompileTimeoutError` leaving the outermost block first lets go of its frames' locals."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    except CompileTimeoutError as e:
        if _depth == 1:
            traceback.clear_frames(e.__traceback__)
        raise
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
