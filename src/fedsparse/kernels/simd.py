"""Eight float64 lanes as one value (LLVM's ``<8 x double>``), for kernels that keep running
sums in registers, in lanes they fix themselves.

numba's LLVM vectorises loops, not blocks of several sums (its SLP vectoriser is off), and a
``UniTuple`` of eight floats is split into scalars and rebuilt at every iteration; a value of
this type stays one vector register (two or four where the CPU has no AVX-512, with the same
results). :func:`vfma` and :func:`fma` are ``llvm.fma``: one rounding, so the same bits on
every machine, whatever its vector width.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

LANES = 8
_VEC = ir.VectorType(ir.DoubleType(), LANES)


class Vec8Type(types.Type):
    def __init__(self):
        super().__init__(name="Vec8")


vec8 = Vec8Type()


@register_model(Vec8Type)
class _Vec8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


def _pointer(context, builder, aryty, ary, indices):
    array = context.make_array(aryty)(context, builder, ary)
    ptr = cgutils.get_item_pointer(context, builder, aryty, array, indices, wraparound=False)
    return builder.bitcast(ptr, _VEC.as_pointer())


def _check_float64(a, ndim):
    if not (isinstance(a, types.Array) and a.dtype == types.float64 and a.ndim == ndim):
        raise TypeError(f"expected a {ndim}-D float64 array, got {a}")


@intrinsic
def vzero(typingctx):
    """Eight +0.0."""

    def codegen(context, builder, signature, args):
        return ir.Constant(_VEC, [0.0] * LANES)

    return vec8(), codegen


@intrinsic
def vload2(typingctx, a, r, i):
    """``a[r, i:i + 8]`` of a 2-D float64 array whose rows have unit stride (no bounds check)."""
    _check_float64(a, 2)

    def codegen(context, builder, signature, args):
        return builder.load(
            _pointer(context, builder, signature.args[0], args[0], args[1:]), align=8
        )

    return vec8(a, types.intp, types.intp), codegen


@intrinsic
def vstore2(typingctx, a, r, i, v):
    """``a[r, i:i + 8] = v`` (2-D float64 whose rows have unit stride, no bounds check)."""
    _check_float64(a, 2)

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1:3])
        builder.store(args[3], ptr, align=8)
        return context.get_dummy_value()

    return types.void(a, types.intp, types.intp, vec8), codegen


@intrinsic
def vsplat(typingctx, x):
    """``x`` in all eight lanes."""

    def codegen(context, builder, signature, args):
        v = builder.insert_element(ir.Constant(_VEC, ir.Undefined), args[0], ir.IntType(32)(0))
        mask = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
        return builder.shuffle_vector(v, v, mask)

    return vec8(types.float64), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """``a * b + c`` in each lane, rounded once."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_VEC, [_VEC, _VEC, _VEC])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.fma.v8f64")
        return builder.call(fn, list(args))

    return vec8(vec8, vec8, vec8), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` of three float64, rounded once."""

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(d, [d, d, d]), "llvm.fma.f64"
        )
        return builder.call(fn, list(args))

    return types.float64(types.float64, types.float64, types.float64), codegen


@intrinsic
def lane(typingctx, v, k):
    """Lane ``k`` of ``v``."""

    def codegen(context, builder, signature, args):
        return builder.extract_element(args[0], args[1])

    return types.float64(vec8, types.intp), codegen


@njit(inline="always")
def hsum(v):
    """The sum of the eight lanes, pairwise: ((0+1)+(2+3))+((4+5)+(6+7))."""
    low = (lane(v, 0) + lane(v, 1)) + (lane(v, 2) + lane(v, 3))
    high = (lane(v, 4) + lane(v, 5)) + (lane(v, 6) + lane(v, 7))
    return low + high
