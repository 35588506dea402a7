"""Timing of kernel readying: the time numba spends getting grammask's kernels ready on their first use in a
process (compiling them after an install, loading them from numba's disk cache later).

Numba holds its compiler lock for both, and fires ``numba:compiler_lock`` events around it; callers that time
mask computation subtract this one-off from it.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from numba.core.event import TimingListener, register, unregister

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; annotations are not evaluated at run time

_EVENT = "numba:compiler_lock"


class KernelReadying:
    """Seconds spent readying numba kernels inside a ``with`` block: ``with KernelReadying() as r: ...``,
    then ``r.seconds`` (0.0 when no kernel was readied). One block per instance."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._listener = TimingListener()

    def __enter__(self) -> Self:
        register(_EVENT, self._listener)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        unregister(_EVENT, self._listener)
        if self._listener.done:
            self.seconds = self._listener.duration
