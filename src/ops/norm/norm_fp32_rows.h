// The row machinery of the request-gated norm + epilogue ops with fp32 internals
// (norm_scale_shift, rmsnorm_modulate_fp32, rmsnorm_tanh_residual_fp32): parameters, the row
// statistics, the normalized element and the host kernel. A row of x is normalized in float by
// one of three statistics, each the fp32 statistics of an eager chain in that chain's reduction
// order (so that the eager chain and the fused op see the same fp32 normalized value), and an
// epilogue functor `T epi(float normed, T a, T b)` combines the unrounded normalized value with the
// op's two other operands in float and rounds once to the storage dtype. The CUDA kernel is
// cuda/norm_fp32_rows.cuh.
#pragma once

#include <cstdint>

#include "common/dispatch.h"
#include "common/guards.h"
#include "common/layer_norm_stats.h"
#include "common/rms_norm_arith.h"
#include "common/rows.h"

namespace dfuse::detail {

constexpr int64_t kNormFp32MaxCols = 8192;  // the CUDA kernel stages a row of floats in shared memory

// Whose fp32 statistics (and normalized element) a row gets.
enum class Fp32NormStats : uint8_t {
  layer_norm,       // F.layer_norm(x, (D,), weight, bias, eps): Welford in aten's order for `path`
  torch_rms_norm,   // F.rms_norm(x, (D,), weight, eps): aten's order for `path`
  mean_of_squares,  // x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight on a float x:
                    // the float mean in Reduce.cuh's order for (M, D) (common/rms_norm_arith.h)
};

struct NormFp32RowsParams {
  RowwiseParams rows;            // in[0] = x, in[1], in[2] = the epilogue's operands
  const void* weight = nullptr;  // [D] contiguous, or null
  const void* bias = nullptr;    // layer_norm only: [D] contiguous, or null
  Fp32NormStats stats = Fp32NormStats::layer_norm;
  LayerNormPath path = LayerNormPath::vectorized;  // layer_norm, torch_rms_norm: aten's path for x
  float eps = 0.0f;                                // the Python double cast to float
  MeanReduceConfig mean;                           // mean_of_squares: Reduce.cuh's configuration
  float mean_factor = 0.0f;                        // mean_of_squares: float(M) / float(M * D)
};

// A row's statistics: mean (layer_norm only) and rstd (the inverse RMS for the RMS statistics).
struct NormRowStats {
  float mean = 0.0f, rstd = 0.0f;
};

// mean_of_squares: the contiguous float pow(2) intermediate's row start relative to a 16-byte
// boundary, in elements (Reduce.cuh's head-alignment shift) for row `row`.
DFUSE_HD int norm_fp32_mean_shift(const NormFp32RowsParams& p, int64_t row) {
  return p.mean.vectorized ? int((row * p.rows.geom.cols) % p.mean.vec) : 0;
}

// The normalized element in float (before any rounding), for one statistics kind, aten path and presence
// of weight and bias fixed at compile time; k4 = the element's position in its 4-element chunk (the
// LayerNorm beta-only artefact depends on it).
template <Fp32NormStats kStats, LayerNormPath kPath, bool kWeight, bool kBias>
struct NormFp32Element {
  static constexpr bool kHasWeight = kWeight, kHasBias = kBias;
  DFUSE_HD float operator()(float x, NormRowStats s, int k4, float weight, float bias) const {
    if constexpr (kStats == Fp32NormStats::layer_norm)
      return layer_norm_element(kPath, x, s.mean, s.rstd, kWeight, weight, kBias, bias, k4);
    if constexpr (kStats == Fp32NormStats::torch_rms_norm) return torch_rms_norm_element(x, s.rstd, kWeight, weight);
    return decomposed_rms_norm_element<float>(x, s.rstd, kWeight, weight);  // (x * r) * weight
  }
};

// with_norm_fp32_element<kPath>(p, f): f(NormFp32Element<p.stats, kPath, p has a weight, p has a bias>{}) for
// a kernel whose statistics take aten path kPath (p.path when p.stats is layer_norm): kernels branch on these
// once, not per element. (The RMSNorm elements take no bias and do not depend on the path.)
// with_layer_norm_fp32_element: the same for p.stats == layer_norm only (kernels that compute no other).
template <LayerNormPath kPath, typename F>
DFUSE_HD decltype(auto) with_layer_norm_fp32_element(const NormFp32RowsParams& p, F&& f) {
  using enum Fp32NormStats;
  if (p.weight)
    return p.bias ? f(NormFp32Element<layer_norm, kPath, true, true>{})
                  : f(NormFp32Element<layer_norm, kPath, true, false>{});
  return p.bias ? f(NormFp32Element<layer_norm, kPath, false, true>{})
                : f(NormFp32Element<layer_norm, kPath, false, false>{});
}

template <LayerNormPath kPath, typename F>
DFUSE_HD decltype(auto) with_norm_fp32_element(const NormFp32RowsParams& p, F&& f) {
  using enum Fp32NormStats;
  const bool w = p.weight != nullptr;
  if (p.stats == layer_norm) return with_layer_norm_fp32_element<kPath>(p, f);
  if (p.stats == torch_rms_norm)
    return w ? f(NormFp32Element<torch_rms_norm, kPath, true, false>{})
             : f(NormFp32Element<torch_rms_norm, kPath, false, false>{});
  return w ? f(NormFp32Element<mean_of_squares, kPath, true, false>{})
           : f(NormFp32Element<mean_of_squares, kPath, false, false>{});
}

// The same with everything read per call.
DFUSE_HD float norm_fp32_element(const NormFp32RowsParams& p, float x, NormRowStats s, int k4, float weight,
                                 float bias) {
  const auto normalize = [&](auto element) { return element(x, s, k4, weight, bias); };
  if (p.path == LayerNormPath::generic) return with_norm_fp32_element<LayerNormPath::generic>(p, normalize);
  return with_norm_fp32_element<LayerNormPath::vectorized>(p, normalize);
}

// The row's statistics on the host (load(k): element k as float; `row`: the row's flat index).
template <typename Load>
NormRowStats norm_fp32_row_stats_host(const NormFp32RowsParams& p, Load load, int64_t row) {
  const int64_t n = p.rows.geom.cols;
  switch (p.stats) {
    case Fp32NormStats::layer_norm: {
      const LayerNormStats s = layer_norm_stats_host(p.path, load, n);
      return {s.mean, layer_norm_rstd(s.var, p.eps)};
    }
    case Fp32NormStats::torch_rms_norm:
      if (p.path == LayerNormPath::generic)
        return {0.0f, torch_rms_norm_rstd_generic(layer_norm_stats_generic_host(load, n), p.eps)};
      return {0.0f, torch_rms_norm_rstd(torch_rms_norm_sum_of_squares_host(load, n), n, p.eps)};
    case Fp32NormStats::mean_of_squares:
      return {0.0f,
              decomposed_inv_rms_host(load, n, p.mean, norm_fp32_mean_shift(p, row), p.mean_factor, p.eps)};
  }
  return {};
}

// The host kernel: per row, the statistics from x, then every element through `epi` (x is read in
// full before the row is written, so out may be x).
template <typename T, typename Epi>
void norm_fp32_rows_host(const NormFp32RowsParams& p, Epi epi) {
  using S = Storage<T>;
  const RowwiseParams& q = p.rows;
  const int64_t n = q.geom.cols;
  const T* weight = static_cast<const T*>(p.weight);
  const T* bias = static_cast<const T*>(p.bias);
  for (int64_t r = 0; r < q.geom.rows(); ++r) {
    uint32_t idx[3];
    q.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(q.in[0].data) + q.in[0].offset(idx);
    const T* a = static_cast<const T*>(q.in[1].data) + q.in[1].offset(idx);
    const T* b = static_cast<const T*>(q.in[2].data) + q.in[2].offset(idx);
    T* out = static_cast<T*>(q.out.data) + q.out.offset(idx);
    const NormRowStats s = norm_fp32_row_stats_host(p, [x](int64_t k) { return S::load(x[k]); }, r);
    for (int64_t k = 0; k < n; ++k) {
      const float normed = norm_fp32_element(p, S::load(x[k]), s, int(k % 4), weight ? S::load(weight[k]) : 1.0f,
                                             bias ? S::load(bias[k]) : 0.0f);
      out[k] = epi(normed, a[k * q.in[1].col_stride], b[k * q.in[2].col_stride]);
    }
  }
}

// The host entry of an op whose epilogue is Epi<T>.
template <template <typename> class Epi>
void norm_fp32_rows_host_entry(const NormFp32RowsParams& p, Stream) {
  dispatch_bf16_f16_f32(p.rows.dtype, "norm_fp32_rows host kernel",
                        [&](auto tag) { norm_fp32_rows_host<decltype(tag)>(p, Epi<decltype(tag)>{}); });
}

// Parameters: x's geometry, the epilogue's operands a and b broadcast against x, the output, and
// the statistics' configuration (aten's path for x, weight, bias; or the float mean's for M rows).
NormFp32RowsParams norm_fp32_rows_params(Fp32NormStats stats, const TensorView& x, const TensorView* weight,
                                         const TensorView* bias, double eps, const TensorView& a, const TensorView& b,
                                         const TensorView& out);

// Guards on a [D] weight or bias: x's dtype and device, 1-D of D elements, contiguous.
void check_norm_affine(GuardList& g, const char* name, const TensorView& t, const TensorView& x,
                       const char* x_name = "x");

using NormFp32RowsEntry = void (*)(const NormFp32RowsParams& p, Stream stream);

}  // namespace dfuse::detail
