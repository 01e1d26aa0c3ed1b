// diffusion.linear_gelu_tanh: guards, dispatch, and the host kernel (the reference arithmetic).
#include "ops/gemm/linear_gelu_tanh.h"

#include <cmath>
#include <cstdint>

#include "common/arith.h"
#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/gemm.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "linear_gelu_tanh";
constexpr int64_t kMaxExtent = (int64_t(1) << 31) - 1;  // kept in 32 bits for cuBLASLt's layouts
constexpr int kCudaAlignBytes = 16;

// Row stride of the rows that x's outer dims collapse into, or -1 when they do not collapse.
int64_t collapsed_row_stride(const TensorView& x) {
  if (x.dim() == 2) return x.stride(0);
  return x.stride(0) == x.size(1) * x.stride(1) || x.size(0) == 1 ? x.stride(1) : -1;
}

bool aligned(const void* p, int64_t row_stride, DType t) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  const int64_t row_bytes = row_stride * int64_t(dtype_size(t));
  return address % kCudaAlignBytes == 0 && row_bytes % kCudaAlignBytes == 0;
}

detail::GuardList check(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out) {
  detail::GuardList g(kOp);
  g.dtype_in("x", x, {DType::bf16, DType::f16});
  g.rank_between("x", x, 2, 3);
  g.not_null("x", x);
  g.last_dim_contiguous("x", x);
  g.non_negative_strides("x", x);
  g.same_dtype("weight", weight, x, "x");
  g.same_device("weight", weight, x, "x");
  g.rank_between("weight", weight, 2, 2);
  g.not_null("weight", weight);
  g.last_dim_contiguous("weight", weight);
  g.same_dtype("out", out, x, "x");
  g.same_device("out", out, x, "x");
  if (bias) {
    g.same_dtype("bias", *bias, x, "x");
    g.same_device("bias", *bias, x, "x");
    g.rank_between("bias", *bias, 1, 1);
    g.not_null("bias", *bias);
    g.last_dim_contiguous("bias", *bias);
  }
  if (!g.ok()) return g;

  const int64_t k = x.size(x.dim() - 1), n = weight.size(0);
  if (k == 0) g.fail("x_shape", "x " + detail::shape_str(x) + " has no columns (K = 0)");
  const int64_t x_rows = collapsed_row_stride(x);
  if (x_rows < 0) g.fail("x_rows", "the outer dims of x " + detail::strides_str(x) + " do not collapse into rows");
  if (x.dim() == 2 && x.size(0) > 1 && x_rows < k)
    g.fail("x_rows", "x rows overlap: row stride " + std::to_string(x_rows) + " < K " + std::to_string(k));
  if (weight.size(1) != k)
    g.fail("weight_shape", "weight " + detail::shape_str(weight) + " is not [N, K] with K = " + std::to_string(k));
  if (weight.size(0) > 1 && weight.stride(0) < k)
    g.fail("weight_rows", "weight rows overlap: row stride " + std::to_string(weight.stride(0)));
  if (bias && bias->size(0) != n)
    g.fail("bias_shape", "bias " + detail::shape_str(*bias) + " is not [N] with N = " + std::to_string(n));
  bool out_shape = out.dim() == x.dim() && out.size(out.dim() - 1) == n;
  for (int d = 0; out_shape && d + 1 < x.dim(); ++d) out_shape = out.size(d) == x.size(d);
  if (!out_shape)
    g.fail("out_shape", "out " + detail::shape_str(out) + " is not x's outer dims " + detail::shape_str(x) +
                            " with last dim N = " + std::to_string(n));
  if (!g.ok()) return g;
  if (!out.is_contiguous()) g.fail("out_layout", "out " + detail::strides_str(out) + " is not contiguous");
  g.no_partial_overlap("out", out, "x", x, false);
  g.no_partial_overlap("out", out, "weight", weight, false);
  if (bias) g.no_partial_overlap("out", out, "bias", *bias, false);
  const int64_t m = x.numel() / k;
  if (m > kMaxExtent || n > kMaxExtent || k > kMaxExtent || x_rows > kMaxExtent || weight.stride(0) > kMaxExtent)
    g.fail("extent", "M, N, K or a row stride is 2^31 or more");
  if (g.ok() && x.device().is_cuda()) {
    if (!aligned(x.data(), x_rows, x.dtype()) || !aligned(weight.data(), weight.stride(0), x.dtype()) ||
        !aligned(out.data(), n, x.dtype()) || (bias && !aligned(bias->data(), 0, x.dtype())))
      g.fail("alignment", "cuBLASLt needs 16-byte aligned pointers and row strides (multiples of 8 elements)");
  }
  return g;
}

detail::LinearGeluParams params(const TensorView& x, const TensorView& weight, const TensorView* bias,
                                const TensorView& out) {
  const int64_t k = x.size(x.dim() - 1);
  return {.dtype = x.dtype(),
          .device = x.device().index,
          .m = x.numel() / k,
          .n = weight.size(0),
          .k = k,
          .x = x.data(),
          .x_row_stride = collapsed_row_stride(x),
          .weight = weight.data(),
          .weight_row_stride = weight.stride(0),
          .bias = bias ? bias->data() : nullptr,
          .out = out.data()};
}

// aten's tanh-GELU on a float (reference/pytorch-eager-arithmetic.md section 4).
float gelu_tanh_f(float x) {
  constexpr float kBeta = 0.79788458347320556641f;
  constexpr float kKappa = 0.044715f;
  const float x3 = detail::mul_rn(x, detail::mul_rn(x, x));
  const float inner = detail::mul_rn(std::fma(x3, kKappa, x), kBeta);
  return detail::mul_rn(detail::mul_rn(0.5f, x), detail::add_rn(std::tanh(inner), 1.0f));
}

template <typename T>
void host_kernel(const detail::LinearGeluParams& p) {
  using S = detail::Storage<T>;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* bias = static_cast<const T*>(p.bias);
  T* out = static_cast<T*>(p.out);
  for (int64_t m = 0; m < p.m; ++m) {
    for (int64_t n = 0; n < p.n; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < p.k; ++k)
        acc = detail::add_rn(acc, detail::mul_rn(S::load(x[m * p.x_row_stride + k]), S::load(w[n * p.weight_row_stride + k])));
      if (bias) acc = detail::add_rn(acc, S::load(bias[n]));
      out[m * p.n + n] = S::store(gelu_tanh_f(acc));
    }
  }
}

void host_entry(const detail::LinearGeluParams& p, Stream) {
  detail::dispatch_bf16_f16(p.dtype, kOp, [&](auto tag) { host_kernel<decltype(tag)>(p); });
}

DFUSE_REGISTER_ENTRY(host, "linear_gelu_tanh", &host_entry);

}  // namespace

bool can_use_linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias,
                              const TensorView& out, std::string* why) {
  return check(x, weight, bias, out).answer(why);
}

void linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out,
                      Stream stream) {
  check(x, weight, bias, out).throw_if_failed();
  if (out.numel() == 0) return;
  static detail::OpEntry entry("diffusion.linear_gelu_tanh");
  entry.get<detail::LinearGeluEntry>(x.device())(params(x, weight, bias, out), stream);
}

}  // namespace dfuse
