"""The collective x dtype x reduce-op matrix of the torch backend tests, and its references.

Each case runs the same call on the same inputs over tessera (the default group) and over Gloo (a
gloo group of the same ranks), and checks both against a serial reference computed in float64
from every rank's inputs (each rank regenerates all ranks' inputs from the seed).

Tolerances (documented in the README's PyTorch section):
  integers and bool     bit-equal to the reference and to Gloo;
  min / max             bit-equal (no rounding happens; -0 < +0, as IEEE 754-2019 says);
  floats, "exact" data  small integers whose sums, products and averages the dtype holds exactly:
                        bit-equal to the reference and to Gloo;
  floats, random data   |result - reference| <= 2 n u sum_i |x_i| (sums; times |factor| for
                        PREMUL_SUM, divided by n for AVG) or 2 n u |reference| (products), plus
                        2 u |reference| + n t, with u the dtype's unit roundoff (2^-53, 2^-24,
                        2^-11, 2^-8, 2^-4 for e4m3, 2^-3 for e5m2), t the spacing of its
                        subnormals (a product may underflow) and n the ranks: at most one
                        rounding per step of any order of the reduction; against Gloo twice that;
  bool                  compared as truth values (Gloo's sum of two True bytes is a byte 2).
Gloo has no float8, no PREMUL_SUM and no AVG on integers: those cases check the reference only.
"""

import zlib

import torch
import torch.distributed as dist

FLOATS = ["float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
INTS = ["int8", "uint8", "int32", "int64"]
DTYPES = FLOATS + INTS + ["bool", "complex64"]
REDOPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
REDUCING = [
    "all_reduce",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_inplace",
    "all_reduce_coalesced",
]
MOVING = [
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_into_tensor_inplace",
    "all_gather_into_tensor_coalesced",
    "all_gather_coalesced",
    "all_to_all_single",
    "all_to_all_single_uneven",
    "all_to_all",
    "gather",
    "scatter",
]
# The spacing of the smallest (subnormal) values: a product may underflow to them.
TINY = {
    "float64": 2.0**-1074,
    "float32": 2.0**-149,
    "float16": 2.0**-24,
    "bfloat16": 2.0**-133,
    "float8_e4m3fn": 2.0**-9,
    "float8_e5m2": 2.0**-16,
}
UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
    "float8_e4m3fn": 2.0**-4,
    "float8_e5m2": 2.0**-3,
}


def valid(op, dtype, redop):
    """Whether torch lets the case through to a backend (the others are torch's own errors or
    tessera's refusals, tested elsewhere)."""
    if op in MOVING:
        return redop is None
    if redop is None:
        return False
    if dtype == "complex64":
        return redop in ("SUM", "AVG", "PREMUL_SUM") and op in ("all_reduce", "reduce")
    if dtype == "bool":
        return redop in ("SUM", "PRODUCT", "MIN", "MAX")
    return True


def all_cases(sizes):
    out = []
    for op in REDUCING + MOVING:
        for dtype in DTYPES:
            for redop in ([None] if op in MOVING else REDOPS):
                if not valid(op, dtype, redop):
                    continue
                for n in sizes:
                    for exact in (True, False) if dtype in FLOATS + ["complex64"] else (True,):
                        out.append((op, dtype, redop, n, exact))
    return out


def gen(seed, rank, key, n, dtype, exact):
    """Rank `rank`'s input of a case: n elements of dtype (reproducible on every rank)."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{seed}/{rank}/{key}".encode()))
    if dtype == "bool":
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype in INTS:
        lo, hi = (0, 5) if dtype == "uint8" else (-3, 3)
        return torch.randint(lo, hi + 1, (n,), generator=g).to(getattr(torch, dtype))
    if dtype == "complex64":
        pair = gen(seed, rank, key + "/c", 2 * n, "float32", exact)
        return torch.view_as_complex(pair.reshape(n, 2).contiguous())
    if exact:
        v = torch.randint(-2, 3, (n,), generator=g).double()
    else:
        v = torch.randn(n, generator=g, dtype=torch.float64)
        if dtype.startswith("float8"):
            v = v.clamp(-8, 8)
    return v.to(getattr(torch, dtype))


def _wide(t):
    if t.is_complex():
        return torch.view_as_real(t).double()
    return t.double() if t.dtype != torch.bool else t.to(torch.int64)


def premul_factor(dtype):
    return 3.0 if dtype in INTS else 0.5


def _zero_sign(r, stack, negative):
    """IEEE 754-2019's minimum and maximum (what tessera computes): -0 < +0, so MIN of -0 and +0
    is -0 and MAX is +0; torch's amin/amax return either (seen with float8 data, where about one
    element in a million is a max of -0 and +0)."""
    if not r.dtype.is_floating_point:
        return r
    zeros = stack == 0
    has = (zeros & torch.signbit(stack)) if negative else (zeros & ~torch.signbit(stack))
    signed = torch.full_like(r, -0.0 if negative else 0.0)
    return torch.where((r == 0) & has.any(0), signed, r)


def reduce_ref(inputs, dtype, redop):
    """The reduction of `inputs` (one per rank) in float64 (int64 for integers and bool), and the
    bound of its error (0: must be exact)."""
    xs = [_wide(x) for x in inputs]
    n = len(xs)
    stack = torch.stack(xs)
    if dtype == "bool":
        r = {"SUM": stack.amax(0), "MAX": stack.amax(0), "PRODUCT": stack.amin(0), "MIN": stack.amin(0)}[redop]
        return r, None
    if redop == "SUM":
        r = stack.sum(0)
    elif redop == "AVG":
        r = stack.sum(0)
        if dtype in INTS:
            r = torch.trunc(r / n)
        else:
            r = r / n
    elif redop == "PRODUCT":
        r = stack.prod(0)
    elif redop == "MIN":
        r = _zero_sign(stack.amin(0), stack, negative=True)
    elif redop == "MAX":
        r = _zero_sign(stack.amax(0), stack, negative=False)
    else:  # PREMUL_SUM
        r = (stack * premul_factor(dtype)).sum(0)
    if dtype in INTS or redop in ("MIN", "MAX"):
        return r, None
    u = UNIT_ROUNDOFF["float32" if dtype == "complex64" else dtype]
    tiny = TINY["float32" if dtype == "complex64" else dtype]
    if redop == "PRODUCT":
        bound = 2 * n * u * r.abs()
    else:
        scale = {"AVG": 1.0 / n, "PREMUL_SUM": abs(premul_factor(dtype))}.get(redop, 1.0)
        bound = 2 * n * u * stack.abs().sum(0) * scale
    return r, bound + 2 * u * r.abs() + n * tiny


def narrow(ref, like):
    """A float64 reference in the tensor's dtype (for exact comparisons)."""
    if like.dtype == torch.bool:
        return ref.bool()
    if like.is_complex():
        return torch.view_as_complex(ref.float().contiguous())
    return ref.to(like.dtype)


def redop_of(name, dtype):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(premul_factor(dtype))
    return getattr(dist.ReduceOp, name)


def same(a, b):
    """Bit-equal (NaN-free data), whatever the dtype; bools as truth values."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == torch.bool:
        return torch.equal(a.view(torch.uint8) != 0, b.view(torch.uint8) != 0)
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    return torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))


def within(result, ref, bound):
    diff = (_wide(result) - ref).abs()
    return bool((diff <= bound).all())
