"""Atomic operations on the cells of an int64 NumPy array, for ``nogil`` Numba kernels that share work, a CPU
yield for threads that spin on them, and a sleep on a cell until another thread wakes it (Linux futexes).

Each one is sequentially consistent: what a thread wrote before an atomic store (or add, or a successful
compare-and-swap) is seen by another thread that reads the new value with :func:`atomic_load`.
"""

from __future__ import annotations

import platform
import sys

import numba as nb
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


def _cell(context, builder, signature, args):
    """The address of ``args[0][args[1]]``."""
    array_type = signature.args[0]
    array = context.make_array(array_type)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, array_type, array, [args[1]])


def _check(array) -> None:
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        raise nb.errors.TypingError("atomics work on the cells of a 1-D int64 array")


def _read_modify_write(name: str, operation: str, doc: str):
    """An intrinsic ``f(array, index, value)`` that applies LLVM's atomic ``operation`` to ``array[index]`` and
    ``value`` and returns the value before."""

    def typer(typingctx, array, index, value):
        _check(array)

        def codegen(context, builder, signature, args):
            return builder.atomic_rmw(operation, _cell(context, builder, signature, args), args[2], "seq_cst")

        return types.int64(array, types.intp, types.int64), codegen

    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


atomic_add = _read_modify_write("atomic_add", "add", "``array[index] += value`` as one atomic step; the value before.")
atomic_store = _read_modify_write("atomic_store", "xchg", "``array[index] = value`` as one atomic step; the value before.")


@intrinsic
def atomic_load(typingctx, array, index):
    """``array[index]``, read atomically."""
    _check(array)

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_cell(context, builder, signature, args), "seq_cst", 8)

    return types.int64(array, types.intp), codegen


@intrinsic
def atomic_cas(typingctx, array, index, expected, value):
    """If ``array[index] == expected``, set it to ``value``, as one atomic step; the value before."""
    _check(array)

    def codegen(context, builder, signature, args):
        pair = builder.cmpxchg(_cell(context, builder, signature, args), args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 0)

    return types.int64(array, types.intp, types.int64, types.int64), codegen


@intrinsic
def yield_cpu(typingctx):
    """Let another thread that is ready run on this CPU (``sched_yield``), for a thread that spins on a cell."""

    def codegen(context, builder, signature, args):
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(function, [])
        return context.get_dummy_value()

    return types.none(), codegen


# ``syscall(SYS_futex, ...)``: the system call's number where grammask knows it (Linux on x86-64 and ARM64).
_FUTEX_CALL = {"x86_64": 202, "AMD64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine(), -1)
HAS_FUTEX = sys.platform == "linux" and _FUTEX_CALL >= 0 and sys.byteorder == "little"
"""Whether :func:`sleep_while` and :func:`wake` work here (they must not be called where not)."""
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129


def _futex(builder, address, operation: int, value):
    """``syscall(SYS_futex, address, operation, value, NULL)`` on the cell's low 32 bits (little-endian)."""
    i64 = ir.IntType(64)
    pointer = ir.IntType(8).as_pointer()
    function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64], var_arg=True), "syscall")
    builder.call(function, [ir.Constant(i64, _FUTEX_CALL), builder.bitcast(address, pointer),
                            ir.Constant(i64, operation), value, ir.Constant(pointer, None)])


def _futex_call(name: str, operation: int, doc: str):
    """An intrinsic ``f(array, index, value)`` that makes the futex call ``operation`` on ``array[index]``."""

    def typer(typingctx, array, index, value):
        _check(array)

        def codegen(context, builder, signature, args):
            _futex(builder, _cell(context, builder, signature, args), operation, args[2])
            return context.get_dummy_value()

        return types.none(array, types.intp, types.int64), codegen

    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


sleep_while = _futex_call(
    "sleep_while", _FUTEX_WAIT_PRIVATE,
    "Sleep while the low 32 bits of ``array[index]`` equal those of ``value``, until :func:`wake` (or a spurious "
    "wake-up: callers check the cell again); returns at once if they differ.")
wake = _futex_call("wake", _FUTEX_WAKE_PRIVATE,
                   "Wake up to ``value`` threads sleeping in :func:`sleep_while` on ``array[index]``.")


@intrinsic
def current_cpu(typingctx):
    """The CPU this thread runs on (``sched_getcpu``; -1 where the OS does not say)."""

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, []), "sched_getcpu")
        return builder.sext(builder.call(function, []), ir.IntType(64))

    return types.int64(), codegen


@intrinsic
def nap(typingctx, microseconds):
    """Sleep about ``microseconds`` (``usleep``), for a thread that waits on a cell no one will :func:`wake` it for."""

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32]), "usleep")
        builder.call(function, [builder.trunc(args[0], i32)])
        return context.get_dummy_value()

    return types.none(types.int64), codegen
