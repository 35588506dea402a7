"""The native thread pools the benchmarks pin to one thread, named apart so a script can set them
before numpy, numba, llguidance or torch load (this module imports nothing that starts a pool)."""

from __future__ import annotations

import os

THREAD_VARS = ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def one_thread_env() -> dict[str, str]:
    """This process's environment with every variable of :data:`THREAD_VARS` set to 1."""
    return dict(os.environ, **{var: "1" for var in THREAD_VARS})
