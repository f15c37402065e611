"""Bit tricks and a clock for compiled code: numba intrinsics over LLVM's own instructions.

Owns the four primitives the compiled board and search need and numba does not expose publicly:
``popcount``, ``lsb`` (index of the lowest set bit), ``msb`` (index of the highest) of a ``uint64``
bitboard, and ``monotonic_ns`` (``CLOCK_MONOTONIC`` in nanoseconds, the clock of Python's
``time.monotonic_ns``), so a search can stop on a deadline without leaving compiled code.

All four take ``uint64`` (pass ``np.uint64`` values, never a Python ``int``: numba turns mixed
``uint64``/``int64`` arithmetic into ``float64``) and return ``int64``. ``lsb``/``msb`` of 0 are 64
and -1. They are emitted as single instructions (``cttz``, ``ctlz``, ``ctpop``) and the clock as a
call to libc's ``clock_gettime``, resolved by name when the code is loaded, so functions using them
stay cacheable (``cache=True``). POSIX only (Linux, macOS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

_CLOCK_MONOTONIC = 1  # Linux and macOS agree on the number

if TYPE_CHECKING:  # what callers in compiled code see; @intrinsic's own signature takes numba's typing context

    def popcount(bits: int) -> int: ...

    def lsb(bits: int) -> int: ...

    def msb(bits: int) -> int: ...

    def monotonic_ns() -> int: ...

else:

    @intrinsic
    def popcount(typingctx, bits):
        """Number of set bits of a ``uint64``."""

        def codegen(context, builder, signature, args):
            return builder.ctpop(args[0])

        return types.int64(types.uint64), codegen

    @intrinsic
    def lsb(typingctx, bits):
        """Index of the lowest set bit of a ``uint64`` (64 when none)."""

        def codegen(context, builder, signature, args):
            return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

        return types.int64(types.uint64), codegen

    @intrinsic
    def msb(typingctx, bits):
        """Index of the highest set bit of a ``uint64`` (-1 when none)."""

        def codegen(context, builder, signature, args):
            zeros = builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
            return builder.sub(ir.Constant(ir.IntType(64), 63), zeros)

        return types.int64(types.uint64), codegen

    @intrinsic
    def monotonic_ns(typingctx):
        """``clock_gettime(CLOCK_MONOTONIC)`` in nanoseconds, as ``time.monotonic_ns()`` reads it."""

        def codegen(context, builder, signature, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            timespec = builder.alloca(ir.ArrayType(i64, 2))  # struct timespec {tv_sec; tv_nsec} on LP64
            function = builder.module.globals.get("clock_gettime")
            if function is None:
                function = ir.Function(builder.module, ir.FunctionType(i32, [i32, timespec.type]), "clock_gettime")
            builder.call(function, [ir.Constant(i32, _CLOCK_MONOTONIC), timespec])
            zero = ir.Constant(i32, 0)
            seconds = builder.load(builder.gep(timespec, [zero, zero]))
            nanos = builder.load(builder.gep(timespec, [zero, ir.Constant(i32, 1)]))
            return builder.add(builder.mul(seconds, ir.Constant(i64, 1_000_000_000)), nanos)

        return types.int64(), codegen
