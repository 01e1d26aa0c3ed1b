// The GEMM-epilogue family's host reference kernel (ops/gemm/linear.h).
#include "ops/gemm/linear.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/arith.h"
#include "common/dispatch.h"
#include "common/guards.h"

namespace dfuse::detail {

namespace {

constexpr int64_t kMaxExtent = (int64_t(1) << 31) - 1;  // kept in 32 bits for cuBLASLt's layouts
constexpr int kCudaAlignBytes = 16;

bool aligned(const void* p, std::initializer_list<int64_t> strides, DType t) {
  if (reinterpret_cast<uintptr_t>(p) % kCudaAlignBytes != 0) return false;
  for (int64_t s : strides)
    if (s * int64_t(dtype_size(t)) % kCudaAlignBytes != 0) return false;
  return true;
}

// The row dim of a [M, C] or [B, S, C] operand (the guards have checked the rank), its row and
// batch strides (batch stride 0 for rank 2).
int row_dim(const TensorView& t) { return t.dim() == 3 ? 1 : 0; }
int64_t row_stride(const TensorView& t) { return t.stride(row_dim(t)); }
int64_t batch_stride(const TensorView& t) { return t.dim() == 3 ? t.stride(0) : 0; }

// Rows of `t` ([.., rows, cols]) are pairwise disjoint and so are its batches.
bool rows_disjoint(const TensorView& t) {
  const int64_t rows = t.size(row_dim(t)), cols = t.size(row_dim(t) + 1);
  if (rows > 1 && row_stride(t) < cols) return false;
  return t.dim() < 3 || t.size(0) <= 1 || batch_stride(t) >= (rows - 1) * row_stride(t) + cols;
}

// aten's tanh-GELU on a float (reference/pytorch-eager-arithmetic.md section 4), with the C++
// library's tanh.
float gelu_tanh_f(float x) {
  constexpr float kBeta = 0.79788458347320556641f;
  constexpr float kKappa = 0.044715f;
  const float x3 = mul_rn(x, mul_rn(x, x));
  const float inner = mul_rn(std::fma(x3, kKappa, x), kBeta);
  return mul_rn(mul_rn(0.5f, x), add_rn(std::tanh(inner), 1.0f));
}

template <typename T>
void linear_host_typed(const LinearParams& p) {
  using S = Storage<T>;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* bias = static_cast<const T*>(p.bias);
  T* out = static_cast<T*>(p.out);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t m = 0; m < p.m; ++m) {
      const T* x_row = x + b * p.x_batch_stride + m * p.x_row_stride;
      T* out_row = out + b * p.out_batch_stride + m * p.out_row_stride;
      for (int64_t n = 0; n < p.n; ++n) {
        float acc = 0.0f;
        for (int64_t k = 0; k < p.k; ++k) acc = add_rn(acc, mul_rn(S::load(x_row[k]), S::load(w[n * p.weight_row_stride + k])));
        if (bias) acc = add_rn(acc, S::load(bias[n]));
        if (p.epilogue == LinearEpilogue::gelu_tanh) acc = gelu_tanh_f(acc);
        out_row[n] = S::store(acc);
      }
    }
  }
}

}  // namespace

void check_linear(GuardList& g, const TensorView& x, const TensorView& weight, const TensorView* bias,
                  const TensorView& out) {
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
  g.rank_between("out", out, 2, 3);
  g.last_dim_contiguous("out", out);
  g.non_negative_strides("out", out);
  if (bias) {
    g.same_dtype("bias", *bias, x, "x");
    g.same_device("bias", *bias, x, "x");
    g.rank_between("bias", *bias, 1, 1);
    g.not_null("bias", *bias);
    g.last_dim_contiguous("bias", *bias);
  }
  if (!g.ok()) return;

  const int64_t k = x.size(row_dim(x) + 1), n = weight.size(0);
  if (k == 0) g.fail("x_shape", "x " + shape_str(x) + " has no columns (K = 0)");
  if (weight.size(1) != k)
    g.fail("weight_shape", "weight " + shape_str(weight) + " is not [N, K] with K = " + std::to_string(k));
  if (bias && bias->size(0) != n)
    g.fail("bias_shape", "bias " + shape_str(*bias) + " is not [N] with N = " + std::to_string(n));
  bool out_shape = out.dim() == x.dim() && out.size(row_dim(out) + 1) == n;
  for (int d = 0; out_shape && d <= row_dim(x); ++d) out_shape = out.size(d) == x.size(d);
  if (!out_shape)
    g.fail("out_shape", "out " + shape_str(out) + " is not x's outer dims " + shape_str(x) + " with last dim N = " +
                            std::to_string(n));
  if (!g.ok()) return;
  if (!rows_disjoint(x)) g.fail("x_rows", "x " + strides_str(x) + ": rows or batches overlap");
  if (weight.size(0) > 1 && weight.stride(0) < k)
    g.fail("weight_rows", "weight rows overlap: row stride " + std::to_string(weight.stride(0)));
  if (!rows_disjoint(out)) g.fail("out_rows", "out " + strides_str(out) + ": rows or batches overlap");
  g.no_partial_overlap("out", out, "x", x, false);
  g.no_partial_overlap("out", out, "weight", weight, false);
  if (bias) g.no_partial_overlap("out", out, "bias", *bias, false);
  const int64_t rows = x.size(row_dim(x));
  if (rows > kMaxExtent || n > kMaxExtent || k > kMaxExtent || row_stride(x) > kMaxExtent ||
      weight.stride(0) > kMaxExtent || row_stride(out) > kMaxExtent)
    g.fail("extent", "M, N, K or a row stride is 2^31 or more");
  if (g.ok() && x.device().is_cuda()) {
    const DType t = x.dtype();
    if (!aligned(x.data(), {row_stride(x), batch_stride(x)}, t) || !aligned(weight.data(), {weight.stride(0)}, t) ||
        !aligned(out.data(), {row_stride(out), batch_stride(out)}, t) || (bias && !aligned(bias->data(), {}, t)))
      g.fail("alignment", "cuBLASLt needs 16-byte aligned pointers and row/batch strides (multiples of 8 elements)");
    // A leading dimension below the row length is invalid in cuBLASLt's layouts even for a single
    // row, whose stride torch leaves free (0 after expand).
    if (row_stride(x) < k || weight.stride(0) < k || row_stride(out) < n)
      g.fail("row_stride", "cuBLASLt needs row strides of at least the row length (K for x and weight, N for "
                           "out), also for a single row; got " + strides_str(x) + ", " + strides_str(weight) +
                               ", " + strides_str(out));
  }
}

LinearParams linear_params(const TensorView& x, const TensorView& weight, const TensorView* bias,
                           const TensorView& out, LinearEpilogue epilogue) {
  return {.dtype = x.dtype(),
          .device = x.device().index,
          .epilogue = epilogue,
          .batch = x.dim() == 3 ? x.size(0) : 1,
          .m = x.size(row_dim(x)),
          .n = weight.size(0),
          .k = x.size(row_dim(x) + 1),
          .x = x.data(),
          .x_row_stride = row_stride(x),
          .x_batch_stride = batch_stride(x),
          .weight = weight.data(),
          .weight_row_stride = weight.stride(0),
          .bias = bias ? bias->data() : nullptr,
          .out = out.data(),
          .out_row_stride = row_stride(out),
          .out_batch_stride = batch_stride(out)};
}

void linear_host_entry(const LinearParams& p, Stream) {
  dispatch_bf16_f16(p.dtype, "linear", [&](auto tag) { linear_host_typed<decltype(tag)>(p); });
}

}  // namespace dfuse::detail
