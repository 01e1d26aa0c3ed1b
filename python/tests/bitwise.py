"""Bitwise comparison helpers shared by the torch op tests (imported after conftest.require_cuda()), and the
storage dtypes' rounding constants the close contracts' bounds are written in."""

from collections import namedtuple

import pytest
import torch

import dfuse.torch as dt

Counters = namedtuple("Counters", "fused eager verifications fallbacks")

# The unit roundoff u, and half the smallest subnormal (a rounding's largest error below the normal range).
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
HALF_MIN_SUBNORMAL = {torch.bfloat16: 2.0**-134, torch.float16: 2.0**-25, torch.float32: 2.0**-150}


def counters(name):
    return Counters(*dt.op_counters(name))


def rand(shape, dtype, amplitude=1.0, device="cuda"):
    """Fresh normal data times `amplitude`, drawn in f32 and rounded once to `dtype`."""
    return (torch.randn(shape, device=device, dtype=torch.float32) * amplitude).to(dtype)


def sprinkle_specials(t, extra=(), copies=8):
    """Writes NaN, +-inf, -0, a subnormal and the `extra` values at `copies` random places each of `t`, in
    place through t's own strides (a view writes into its base tensor), and returns t."""
    values = [float("nan"), float("inf"), -float("inf"), -0.0, torch.finfo(t.dtype).tiny / 4, *extra]
    where = tuple(torch.randint(0, size, (copies * len(values),), device=t.device) for size in t.shape)
    t[where] = torch.tensor(values, dtype=t.dtype, device=t.device).repeat(copies)
    return t


def bits(t):
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def assert_bitwise(out, ref):
    assert out.dtype == ref.dtype
    assert out.shape == ref.shape
    assert out.is_contiguous()
    same = torch.equal(bits(out), bits(ref.contiguous()))
    if not same:
        differ = (bits(out) != bits(ref.contiguous())).sum().item()
        pytest.fail(f"{differ} of {out.numel()} elements differ bitwise from the eager chain")


def poison_allocator(nbytes, device="cuda"):
    """Leaves a freed all-ones block of `nbytes` in the caching allocator, so that the op's output (likely
    that block) starts as NaN everywhere and an element the kernel skips shows up as a mismatch."""
    torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(0xFF)


def check_op(name, op, chain, args, fused=True):
    """Op vs eager chain, bitwise, called twice (first sight, then verified). fused=True: the fused kernel
    must have run both times with no new fallback; False: it must not have run; None: either is fine."""
    ref = chain(*args)
    before = counters(name)
    for _ in range(2):
        poison_allocator(ref.numel() * ref.element_size(), ref.device)
        assert_bitwise(op(*args), ref)
    after = counters(name)
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()
    return ref
