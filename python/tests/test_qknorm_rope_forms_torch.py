"""torch.ops.dfuse QK-norm + rotate-half RoPE forms against the real PyTorch eager chain they replace.

The chain, for (x, w) in ((q, q_weight), (k, k_weight)), as model code writes it:
    x = norm(x)          F.rms_norm(x, (D,), w, eps) (torch.nn.RMSNorm) or diffusers' RMSNorm.forward
    x = rope(x)          x_rot, x_pass = x[..., :R], x[..., R:]; x1, x2 = x_rot.chunk(2, -1)
                         (x_rot.float() * cos + torch.cat((-x2, x1), -1).float() * sin).to(x.dtype)
                         (math="fp32_opmath"; "storage_dtype": the same in x's dtype), x_pass concatenated

    fused_inplace_qknorm_rope(q, k, ...)          the spec's default form (round_norm_before_rope=False): the
                                                  normalized value stays fp32 into the RoPE, one rounding; close to
                                                  the chain within the bound of dfuse/ops/rope.h, no bitwise Gate
    fused_qknorm_rope(q, k, ...) -> (q, k)        the chain out of place, bit for bit
    fused_qknorm_rope_pack_kv(q, k, v, ...) -> kv q in place, kv = torch.stack([chain(k), v], dim=-3), bit for bit

The exact in-place form (round_norm_before_rope=True) is tested in test_rope_torch.py. Outputs are compared as
integers, so -0/+0 and NaN bits count. Where a Gate-verified kernel is expected to run, each case calls the op
twice (first sight, then the verified kernel alone) and the op counters must show two fused calls and no new
fallback. The CUDA tests skip without a GPU (an error under DFUSE_REQUIRE_CUDA=1); the CPU tests always run.
"""

import pytest
import torch
from conftest import require_cuda

import dfuse.torch as dt
from rope_chains import NORMS, ROPES, rotate_half
from bitwise import (HALF_MIN_SUBNORMAL, UNIT_ROUNDOFF, assert_bitwise, bits, counters, poison_allocator, rand,
                     sprinkle_specials)

HALF = [torch.bfloat16, torch.float16]
ALL = HALF + [torch.float32]
EPS = 1e-6


@pytest.fixture
def cuda():
    require_cuda()
    return "cuda"


# ---- the chain, as model code writes it ---------------------------------------------------------------------


def split_chain(x, weight, cos, sin, norm, math):
    return ROPES[math](NORMS[norm](x, weight, EPS), cos, sin)


# ---- inputs -------------------------------------------------------------------------------------------------


def rope_tables(tokens, rot, dtype, device):
    """cos/sin [tokens, 1, rot] in the rotate-half layout, built in fp64 and cast as the models do."""
    inv = 1.0 / 10000.0 ** (torch.arange(0, rot, 2, dtype=torch.float64, device=device) / rot)
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float64, device=device), inv)
    freqs = torch.cat([freqs, freqs], dim=-1)
    return freqs.cos().to(dtype)[:, None, :], freqs.sin().to(dtype)[:, None, :]


class Case:
    """q, k, v: the [B, S, H, D] slots of one packed projection [B, S, 3 * H * D] (strided views), the norm
    weights, the tables, and the chain's results for q and k."""

    def __init__(self, shape, rot, dtype, norm, math, device, with_weight=True, specials=False):
        b, s, h, d = shape
        self.shape, self.norm, self.math = shape, norm, math
        self.qkv = rand((b, s, 3 * h * d), dtype, 3.0, device=device)
        if specials:
            sprinkle_specials(self.qkv)
        self.weights = ((rand((d,), dtype, device=device), rand((d,), dtype, device=device)) if with_weight
                        else (None, None))
        self.cos, self.sin = rope_tables(s, rot, dtype if math == "storage_dtype" else torch.float32, device)
        q, k, _ = self.slots(self.qkv)
        self.normed = [NORMS[norm](x, w, EPS) for x, w in zip((q, k), self.weights)]
        self.ref = [split_chain(x, w, self.cos, self.sin, norm, math) for x, w in zip((q, k), self.weights)]

    def slots(self, qkv):
        b, s, h, d = self.shape
        return qkv.view(b, s, 3, h, d).unbind(2)

    def args(self):
        return (*self.weights, EPS, self.cos, self.sin, self.norm, self.math)


def assert_gate_counts(name, before, fused):
    after = counters(name)
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    else:
        assert after.fused == before.fused, dt.gate_report()


# ---- fused_inplace_qknorm_rope, the default one-rounding form -----------------------------------------------


def one_rounding_differences(fused, split, normed, cos, sin):
    """Asserts the bound of dfuse/ops/rope.h's fused_inplace_qknorm_rope_one_rounding on every element (the
    fused result against the split chain's, with n the norm module's output and p the RoPE partner) and
    returns how many elements differ from the split chain's bits."""
    rot = cos.shape[-1]
    fused, split, normed = fused.contiguous(), split.contiguous(), normed.contiguous()
    differ = int((bits(fused) != bits(split)).sum())
    if fused.dtype == torch.float32:  # one rounding either way: the same bits
        assert differ == 0, f"{differ} f32 elements differ from the split chain"
        return differ
    assert torch.equal(bits(fused[..., rot:]), bits(split[..., rot:])), "the tail beyond R differs"
    u, d = UNIT_ROUNDOFF[fused.dtype], HALF_MIN_SUBNORMAL[fused.dtype]
    f, e = fused[..., :rot].double(), split[..., :rot].double()
    n = normed[..., :rot].double()
    p = rotate_half(n)
    c, s = cos.double(), sin.double()
    assert torch.equal(f.isnan(), e.isnan()), "NaN where the split chain has none, or the reverse"
    inf = f.isinf() | e.isinf()
    assert torch.equal(f[inf], e[inf]), "infinities differ"
    finite = ~(f.isnan() | inf)
    bound = (u + 2.0**-21) * ((c * n).abs() + (s * p).abs()) + u * (f.abs() + e.abs()) + (c.abs() + s.abs() + 2) * d
    bound = bound.expand_as(f)[finite]
    assert torch.isfinite(bound).all()
    err = (f - e).abs()[finite]
    over = err > bound
    assert not over.any(), (f"{int(over.sum())} elements beyond the bound, worst excess "
                            f"{float((err - bound).max())}")
    return differ


def check_one_rounding(case):
    before = counters("fused_inplace_qknorm_rope")
    work = case.qkv.clone()
    q, k, v = case.slots(work)
    v_before = v.clone()
    dt.fused_inplace_qknorm_rope(q, k, *case.args())  # round_norm_before_rope=False: the default
    assert torch.equal(bits(v), bits(v_before))  # the packed v is untouched
    after = counters("fused_inplace_qknorm_rope")
    assert after == before, "the Gate counters moved: the one-rounding kernel refused, the exact form ran"
    return sum(one_rounding_differences(x, ref, n, case.cos, case.sin)
               for x, ref, n in zip((q, k), case.ref, case.normed))


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape, rot", [((1, 4608, 24, 128), 128), ((1, 4097, 30, 128), 64), ((2, 7, 3, 128), 96),
                                        ((1, 513, 8, 256), 160)], ids=str)
def test_one_rounding_within_bound(cuda, shape, rot, dtype, norm):
    torch.manual_seed(7)
    differ = check_one_rounding(Case(shape, rot, dtype, norm, "fp32_opmath", cuda))
    if dtype != torch.float32:  # the close kernel ran: not the split chain's bits everywhere
        assert differ > 0, "the default form gave the exact form's bits everywhere"


@pytest.mark.parametrize("norm", list(NORMS))
def test_one_rounding_without_weight_and_specials(cuda, norm):
    torch.manual_seed(8)
    case = Case((1, 257, 24, 128), 128, torch.bfloat16, norm, "fp32_opmath", cuda, with_weight=False,
                specials=True)
    assert check_one_rounding(case) > 0


def test_default_form_takes_the_exact_path_where_the_close_kernel_refuses(cuda):
    torch.manual_seed(9)
    # math="storage_dtype": the one-rounding form is stated for fp32 opmath only; the exact kernel serves it
    case = Case((2, 33, 4, 128), 96, torch.bfloat16, "torch_rms_norm", "storage_dtype", cuda)
    before = counters("fused_inplace_qknorm_rope")
    for _ in range(2):
        work = case.qkv.clone()
        q, k, _ = case.slots(work)
        dt.fused_inplace_qknorm_rope(q, k, *case.args())
        assert_bitwise(q.contiguous(), case.ref[0])
        assert_bitwise(k.contiguous(), case.ref[1])
    assert_gate_counts("fused_inplace_qknorm_rope", before, fused=True)
    # D = 64: no kernel accepts it; the chain
    case = Case((1, 33, 4, 64), 64, torch.bfloat16, "torch_rms_norm", "fp32_opmath", cuda)
    work = case.qkv.clone()
    q, k, _ = case.slots(work)
    dt.fused_inplace_qknorm_rope(q, k, *case.args())
    assert_bitwise(q.contiguous(), case.ref[0])
    assert_bitwise(k.contiguous(), case.ref[1])


# ---- fused_qknorm_rope (out of place) and fused_qknorm_rope_pack_kv -----------------------------------------


def check_out_of_place(case, fused=True):
    before = counters("fused_qknorm_rope")
    q, k, _ = case.slots(case.qkv)
    qkv_before = case.qkv.clone()
    for _ in range(2):
        poison_allocator(2 * case.ref[0].numel() * case.ref[0].element_size(), case.qkv.device)
        out_q, out_k = dt.fused_qknorm_rope(q, k, *case.args())
        assert_bitwise(out_q, case.ref[0])
        assert_bitwise(out_k, case.ref[1])
    assert torch.equal(bits(case.qkv), bits(qkv_before))  # q and k only read
    assert_gate_counts("fused_qknorm_rope", before, fused)


def check_pack_kv(case, fused=True):
    _, k0, v0 = case.slots(case.qkv)
    ref_kv = torch.stack([case.ref[1], v0], dim=-3)
    before = counters("fused_qknorm_rope_pack_kv")
    for _ in range(2):
        work = case.qkv.clone()
        q, k, v = case.slots(work)
        poison_allocator(ref_kv.numel() * ref_kv.element_size(), work.device)
        kv = dt.fused_qknorm_rope_pack_kv(q, k, v, *case.args())
        assert_bitwise(q.contiguous(), case.ref[0])
        assert_bitwise(kv, ref_kv)
        assert torch.equal(bits(k), bits(k0)) and torch.equal(bits(v), bits(v0))  # k and v only read
    assert_gate_counts("fused_qknorm_rope_pack_kv", before, fused)


FORMS_SHAPES = [((1, 4608, 24, 128), 128), ((2, 7, 3, 128), 96), ((1, 513, 8, 256), 160)]


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape, rot", FORMS_SHAPES, ids=str)
def test_out_of_place(cuda, shape, rot, dtype, norm):
    torch.manual_seed(10)
    check_out_of_place(Case(shape, rot, dtype, norm, "fp32_opmath", cuda))


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape, rot", FORMS_SHAPES, ids=str)
def test_pack_kv(cuda, shape, rot, dtype, norm):
    torch.manual_seed(11)
    check_pack_kv(Case(shape, rot, dtype, norm, "fp32_opmath", cuda))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_forms_storage_dtype_math(cuda, dtype):
    torch.manual_seed(12)
    case = Case((2, 65, 6, 128), 64, dtype, "diffusers_decomposed", "storage_dtype", cuda)
    check_out_of_place(case)
    check_pack_kv(case)


@pytest.mark.parametrize("norm", list(NORMS))
def test_forms_without_weight_and_specials(cuda, norm):
    torch.manual_seed(13)
    case = Case((1, 257, 24, 128), 128, torch.bfloat16, norm, "fp32_opmath", cuda, with_weight=False,
                specials=True)
    check_out_of_place(case)
    check_pack_kv(case)


def test_forms_fallbacks(cuda):
    torch.manual_seed(14)
    # D = 64: the kernels take D = 128 or 256 only; the chain
    case = Case((1, 33, 4, 64), 64, torch.bfloat16, "torch_rms_norm", "fp32_opmath", cuda)
    check_out_of_place(case, fused=False)
    check_pack_kv(case, fused=False)


# ---- CPU (the ATen chain), errors, opcheck ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cpu_matches_torch_cpu_chain(dtype):
    torch.manual_seed(15)
    for norm in NORMS:
        case = Case((2, 9, 3, 128), 96, dtype, norm, "fp32_opmath", "cpu")
        for round_norm in (False, True):  # CPU tensors take the exact chain in both forms
            work = case.qkv.clone()
            q, k, _ = case.slots(work)
            dt.fused_inplace_qknorm_rope(q, k, *case.args(), round_norm_before_rope=round_norm)
            assert_bitwise(q.contiguous(), case.ref[0])
            assert_bitwise(k.contiguous(), case.ref[1])
        q, k, v = case.slots(case.qkv)
        out_q, out_k = dt.fused_qknorm_rope(q, k, *case.args())
        assert_bitwise(out_q, case.ref[0])
        assert_bitwise(out_k, case.ref[1])
        ref_kv = torch.stack([case.ref[1], v], dim=-3)
        work = case.qkv.clone()
        q, k, v = case.slots(work)
        assert_bitwise(dt.fused_qknorm_rope_pack_kv(q, k, v, *case.args()), ref_kv)
        assert_bitwise(q.contiguous(), case.ref[0])


def test_errors():
    q, k, v = (rand((1, 7, 3, 128), torch.bfloat16, device="cpu") for _ in range(3))
    w = rand((128,), torch.bfloat16, device="cpu")
    cos, sin = rope_tables(7, 128, torch.float32, "cpu")
    with pytest.raises(RuntimeError, match="q_weight must have q's dtype"):
        dt.fused_qknorm_rope(q, k, w.float(), w, EPS, cos, sin)
    with pytest.raises(RuntimeError, match="cos and sin must have q's dtype"):
        dt.fused_qknorm_rope(q, k, w, w, EPS, cos, sin, "torch_rms_norm", "storage_dtype")
    with pytest.raises(RuntimeError, match="v must have k's shape"):
        dt.fused_qknorm_rope_pack_kv(q, k, v[:, :5], w, w, EPS, cos, sin)
    with pytest.raises(RuntimeError, match="k_weight must have k's dtype"):
        dt.fused_qknorm_rope_pack_kv(q, k, v, w, w.half(), EPS, cos, sin)
    with pytest.raises(RuntimeError, match="norm must be"):
        dt.fused_qknorm_rope(q, k, w, w, EPS, cos, sin, "layer_norm")
    with pytest.raises(RuntimeError, match="math must be"):
        dt.fused_inplace_qknorm_rope(q, k, w, w, EPS, cos, sin, "torch_rms_norm", "bf16")
    q0 = q.clone()
    with pytest.raises(RuntimeError, match="v must have k's shape"):
        dt.fused_qknorm_rope_pack_kv(q, k, v.float(), w, w, EPS, cos, sin)
    assert torch.equal(bits(q), bits(q0))  # a refused call leaves q intact


def opcheck_all(device):
    q, k, v = (rand((2, 7, 3, 128), torch.bfloat16, device=device) for _ in range(3))
    w = rand((128,), torch.bfloat16, device=device)
    cos, sin = rope_tables(7, 96, torch.float32, device)
    args = (q, k, w, None, EPS, cos, sin, "diffusers_decomposed", "fp32_opmath")
    torch.library.opcheck(torch.ops.dfuse.fused_qknorm_rope.default, args)
    torch.library.opcheck(torch.ops.dfuse.fused_qknorm_rope_pack_kv.default, (q, k, v, *args[2:]))
    torch.library.opcheck(torch.ops.dfuse.fused_inplace_qknorm_rope.default, args)
    torch.library.opcheck(torch.ops.dfuse.fused_inplace_qknorm_rope.default, args, {"round_norm_before_rope": True})


def test_opcheck_cpu():
    opcheck_all("cpu")


def test_opcheck_cuda(cuda):
    opcheck_all(cuda)
