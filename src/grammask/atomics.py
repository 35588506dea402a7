"""Atomic operations on the cells of an int64 NumPy array, for ``nogil`` Numba kernels that share work, and a
CPU yield for threads that spin on them.

Each one is sequentially consistent: what a thread wrote before an atomic store (or add, or a successful
compare-and-swap) is seen by another thread that reads the new value with :func:`atomic_load`.
"""

from __future__ import annotations

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
