// diffusion.layernorm_modulate — replaces the eager chain
//   F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift        (four kernels)
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32. The LayerNorm part
// reproduces the path aten takes for x (common/layer_norm_stats.h: vectorized kernel when
// D % 4 == 0, D <= 2^24 and x is 8-byte (bf16/f16) or 16-byte (f32) aligned or non-contiguous,
// else the generic RowwiseMoments path), that path's Welford reduction order and affine-free
// output element, rounded once to the storage dtype; the modulate epilogue is
// ops/adaln/modulate_scale_shift.h's element (three roundings). Limits: the choice of path follows
// aten 2.11's dispatch; another PyTorch build could choose or compute differently (the torch op's
// first-sight Gate checks each signature). On the host rsqrt is the correctly rounded value.
#pragma once

#include "common/layer_norm_stats.h"
#include "common/rows.h"
#include "ops/adaln/modulate_scale_shift.h"

namespace dfuse::detail {

struct LayernormModulateParams {
  RowwiseParams rows;  // in = {x, scale, shift}
  float eps = 0.0f;
  LayerNormPath path = LayerNormPath::generic;
};

// The element of layernorm_modulate: x's normalized value in `P` (affine-free), rounded to T, then
// ops/adaln/modulate_scale_shift.h's three roundings. (k4: position in the 4-element chunk.)
struct ModulateEpilogue {
  // The normalized value before its rounding to T.
  template <LayerNormPath P>
  static DFUSE_HD float normalized(float x, float mean, float rstd, int k4) {
    return layer_norm_element(P, x, mean, rstd, false, 1.0f, false, 0.0f, k4);
  }
  template <LayerNormPath P, typename T>
  static DFUSE_HD T apply(float x, float mean, float rstd, int k4, T scale, T shift) {
    return ModulateScaleShift<T>{}(Storage<T>::store(normalized<P>(x, mean, rstd, k4)), scale, shift);
  }
};

// The host loop of the LayerNorm + modulate family: per row, the statistics in aten's order for
// p.path (emulated sequentially), then every element through `Epi` (see
// cuda/layer_norm_modulate_rows.cuh for its interface).
template <typename Epi, typename T>
void layernorm_modulate_rows_host(const LayernormModulateParams& p) {
  using S = Storage<T>;
  const RowwiseParams& q = p.rows;
  const int64_t n = q.geom.cols;
  for (int64_t r = 0; r < q.geom.rows(); ++r) {
    uint32_t idx[3];
    q.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(q.in[0].data) + q.in[0].offset(idx);
    const T* scale = static_cast<const T*>(q.in[1].data) + q.in[1].offset(idx);
    const T* shift = static_cast<const T*>(q.in[2].data) + q.in[2].offset(idx);
    T* out = static_cast<T*>(q.out.data) + q.out.offset(idx);
    const auto stats = layer_norm_stats_host(p.path, [&](int64_t k) { return S::load(x[k]); }, n);
    const float rstd = layer_norm_rstd(stats.var, p.eps);
    for (int64_t k = 0; k < n; ++k) {
      const T sc = scale[k * q.in[1].col_stride], sh = shift[k * q.in[2].col_stride];
      out[k] = p.path == LayerNormPath::vectorized
                   ? Epi::template apply<LayerNormPath::vectorized>(S::load(x[k]), stats.mean, rstd, int(k % 4), sc, sh)
                   : Epi::template apply<LayerNormPath::generic>(S::load(x[k]), stats.mean, rstd, int(k % 4), sc, sh);
    }
  }
}

using LayernormModulateEntry = void (*)(const LayernormModulateParams& p, Stream stream);

}  // namespace dfuse::detail
