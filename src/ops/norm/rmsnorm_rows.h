// The row machinery shared by the RMSNorm + epilogue ops (rmsnorm_scale_shift, rmsnorm_scale,
// rmsnorm_tanh_residual, qk_rmsnorm): parameters, the guards common to them, and the host kernel. A
// row of x is normalized by one of the three eager RMSNorm chains (dfuse/ops/rmsnorm.h, arithmetic in common/rms_norm_arith.h), the result rounded to
// the storage dtype, and an epilogue functor `T epi(T normed, T a, ...)` combines it with the op's
// other operands, element by element. The CUDA kernel is cuda/rms_norm_rows.cuh.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "common/dispatch.h"
#include "common/guards.h"
#include "common/rms_norm_arith.h"
#include "common/rows.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::detail {

constexpr int64_t kRmsNormMaxCols = 8192;  // the CUDA kernel stages a row in shared memory

struct RmsNormRowsParams {
  RowwiseParams rows;             // in[0] = x (normalized), in[1..] = the epilogue's operands
  const void* weight = nullptr;   // [D] contiguous, or null
  RmsNormChain chain = RmsNormChain::torch_rms_norm;
  LayerNormPath path = LayerNormPath::vectorized;  // torch_rms_norm: the path aten takes
  float eps = 0.0f;               // the Python double cast to float
  MeanReduceConfig mean;          // diffusers_decomposed, storage_dtype: Reduce.cuh's configuration for (M, D)
  float mean_factor = 0.0f;       // diffusers_decomposed, storage_dtype: float(M) / float(M * D)
};

// Guards on x, weight and eps shared by the RMSNorm ops: x [.., D] as check_rowwise_input, D <=
// kRmsNormMaxCols; weight null or [D] contiguous of x's dtype and device; eps finite, >= 0; for
// diffusers_decomposed and storage_dtype, no mean configuration that splits a row across warps
// (D > ~8160).
// `x_name`/`weight_name` name the operands in the messages. An op whose kernel implements the
// storage_dtype chain says so (`storage_dtype_supported`); for every other op that chain is refused.
void check_rms_norm_input(GuardList& g, RmsNormChain chain, const TensorView& x, const TensorView* weight,
                          double eps, const char* x_name = "x", const char* weight_name = "weight",
                          bool storage_dtype_supported = false);
// Parameters: x's geometry, x then `operands` broadcast against x, the output, the chain's statistics
// configuration.
RmsNormRowsParams rms_norm_rows_params(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                       std::initializer_list<const TensorView*> operands, const TensorView& out);

// The normalized value of element x of a row before its last rounding to T, for one chain and with or
// without a weight fixed at compile time; `inv` is the row's rstd (torch chain) or inverse RMS
// (decomposed and storage-dtype chains).
template <typename T, RmsNormChain Chain, bool kWeight>
struct RmsNormElement {
  static constexpr RmsNormChain kChain = Chain;
  static constexpr bool kHasWeight = kWeight;
  DFUSE_HD float operator()(float x, float inv, float weight) const {
    if constexpr (kChain == RmsNormChain::torch_rms_norm) return torch_rms_norm_element(x, inv, kWeight, weight);
    if constexpr (kChain == RmsNormChain::diffusers_decomposed)
      return decomposed_rms_norm_element<T>(x, inv, kWeight, weight);
    return storage_rms_norm_element<T>(x, inv, kWeight, weight);
  }
};

// f(RmsNormElement<T, p.chain, p has a weight>{}): kernels branch on the chain once, not per element.
template <typename T, typename F>
DFUSE_HD decltype(auto) with_rms_norm_element(const RmsNormRowsParams& p, F&& f) {
  const bool w = p.weight != nullptr;
  switch (p.chain) {
    case RmsNormChain::torch_rms_norm:
      return w ? f(RmsNormElement<T, RmsNormChain::torch_rms_norm, true>{})
               : f(RmsNormElement<T, RmsNormChain::torch_rms_norm, false>{});
    case RmsNormChain::diffusers_decomposed:
      return w ? f(RmsNormElement<T, RmsNormChain::diffusers_decomposed, true>{})
               : f(RmsNormElement<T, RmsNormChain::diffusers_decomposed, false>{});
    default:
      return w ? f(RmsNormElement<T, RmsNormChain::storage_dtype, true>{})
               : f(RmsNormElement<T, RmsNormChain::storage_dtype, false>{});
  }
}

// f(RmsNormElement<T, kChain, p has a weight>{}) for a chain fixed at compile time.
template <typename T, RmsNormChain kChain, typename F>
DFUSE_HD decltype(auto) with_rms_norm_element_of(const RmsNormRowsParams& p, F&& f) {
  return p.weight ? f(RmsNormElement<T, kChain, true>{}) : f(RmsNormElement<T, kChain, false>{});
}

// The same with the chain read per call.
template <typename T>
DFUSE_HD float rms_norm_normalized_float(const RmsNormRowsParams& p, float x, float inv, float weight) {
  return with_rms_norm_element<T>(p, [&](auto element) { return element(x, inv, weight); });
}

// The normalized value of element x of a row, rounded to T.
template <typename T>
DFUSE_HD T rms_norm_normalized(const RmsNormRowsParams& p, float x, float inv, float weight) {
  return Storage<T>::store(rms_norm_normalized_float<T>(p, x, inv, weight));
}

// The pow(2) intermediate's row start relative to a 16-byte boundary, in elements (Reduce.cuh's
// head-alignment shift) for row `row` of the decomposed or storage-dtype chain.
DFUSE_HD int rms_norm_mean_shift(const RmsNormRowsParams& p, int64_t row) {
  return p.mean.vectorized ? int((row * p.rows.geom.cols) % p.mean.vec) : 0;
}

// The row's rstd / inverse RMS on the host, load(k) returning element k as float; `row` is the row's
// flat index (the decomposed chain's alignment shift depends on it).
template <typename Load>
float rms_norm_row_inv_host(const RmsNormRowsParams& p, Load load, int64_t row) {
  const int64_t n = p.rows.geom.cols;
  if (p.chain == RmsNormChain::diffusers_decomposed)
    return decomposed_inv_rms_host(load, n, p.mean, rms_norm_mean_shift(p, row), p.mean_factor, p.eps);
  if (p.chain == RmsNormChain::storage_dtype) {
    float rstd = 0.0f;
    dispatch_bf16_f16_f32(p.rows.dtype, "rmsnorm host kernel", [&](auto tag) {
      rstd = storage_rms_norm_rstd_host<decltype(tag)>(load, n, p.mean, rms_norm_mean_shift(p, row), p.mean_factor,
                                                       p.eps);
    });
    return rstd;
  }
  if (p.path == LayerNormPath::generic) return torch_rms_norm_rstd_generic(layer_norm_stats_generic_host(load, n), p.eps);
  return torch_rms_norm_rstd(torch_rms_norm_sum_of_squares_host(load, n), n, p.eps);
}

template <typename T, typename Epi, size_t... K>
void rms_norm_rows_host_impl(const RmsNormRowsParams& p, Epi epi, std::index_sequence<K...>) {
  using S = Storage<T>;
  const int64_t rows = p.rows.geom.rows(), cols = p.rows.geom.cols;
  const T* weight = static_cast<const T*>(p.weight);
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.rows.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(p.rows.in[0].data) + p.rows.in[0].offset(idx);
    [[maybe_unused]] const T* in[] = {static_cast<const T*>(p.rows.in[K + 1].data) + p.rows.in[K + 1].offset(idx)...};
    [[maybe_unused]] const int64_t step[] = {p.rows.in[K + 1].col_stride...};
    T* out = static_cast<T*>(p.rows.out.data) + p.rows.out.offset(idx);
    const float inv = rms_norm_row_inv_host(p, [x](int64_t k) { return S::load(x[k]); }, r);
    // x is read in full before the row is written: out may be x.
    for (int64_t c = 0; c < cols; ++c) {
      const T y = rms_norm_normalized<T>(p, S::load(x[c]), inv, weight ? S::load(weight[c]) : 1.0f);
      out[c] = epi(y, in[K][c * step[K]]...);
    }
  }
}

// The identity epilogue: RMSNorm alone.
template <typename T>
struct RmsNormOnly {
  DFUSE_HD T operator()(T normed) const { return normed; }
};

// The host entry of an RMSNorm op whose epilogue is Epi<T>.
template <template <typename> class Epi>
void rms_norm_rows_host_entry(const RmsNormRowsParams& p, Stream) {
  dispatch_bf16_f16_f32(p.rows.dtype, "rmsnorm host kernel", [&](auto tag) {
    using T = decltype(tag);
    rms_norm_rows_host_impl<T>(p, Epi<T>{}, std::make_index_sequence<rowwise_arity<T, Epi<T>>() - 1>{});
  });
}

using RmsNormRowsEntry = void (*)(const RmsNormRowsParams& p, Stream stream);

}  // namespace dfuse::detail
