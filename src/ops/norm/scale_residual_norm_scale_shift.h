// diffusion.scale_residual_norm_scale_shift — replaces the eager chain
//   r = residual + gate * update                                   (2 kernels)
//   n = F.layer_norm(r, (D,), eps=eps)  or  F.rms_norm(r, (D,), weight, eps)
//   out = n * (1 + scale) + shift                                  (3 kernels)
//   return r, out
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32, both outputs. r is
// ops/adaln/residual_gate_add.h's element (product rounded, then sum rounded). r is a fresh
// contiguous tensor in the chain, so its norm takes the path aten picks for an aligned, contiguous
// operand (common/layer_norm_stats.h layer_norm_path: vectorized when D % 4 == 0 and D <= 2^24 and,
// for rms_norm, the weight is 4-element aligned; else generic), with that path's reduction order
// (LayerNorm: layer_norm_stats.h's Welford orders; RMSNorm: common/rms_norm_arith.h's F.rms_norm
// orders), the normalized value rounded once to the storage dtype, then
// ops/adaln/modulate_scale_shift.h's three roundings. The statistics are folded from the rounded r
// values the kernel itself produced. Limits: rows of at most 8192 elements (the CUDA kernel stages
// rows over 6144 elements in shared memory); the path follows aten 2.11's dispatch (the torch op's first-sight
// Gate checks each signature); on the host rsqrt is correctly rounded (CUDA: rsqrtf).
#pragma once

#include <cstdint>

#include "common/layer_norm_stats.h"
#include "common/rms_norm_arith.h"
#include "common/rows.h"
#include "ops/adaln/residual_gate_add.h"
#include "ops/norm/layernorm_modulate.h"

namespace dfuse::detail {

constexpr int64_t kScaleResidualNormMaxCols = 8192;  // long rows staged in shared memory on CUDA

// The norm applied to r (dfuse::ResidualNorm, mirrored so that kernels need no public header).
enum class ResidualNormKind : uint8_t { layer_norm, rms_norm };

struct ScaleResidualNormParams {
  RowwiseParams rows;          // geometry of residual; in = {residual, gate, update, scale}; out = r
  RowOperand shift;            // broadcast against residual
  RowOperand out;              // the modulated output
  const void* weight = nullptr;  // rms_norm: [D] contiguous, or null
  ResidualNormKind norm = ResidualNormKind::layer_norm;
  LayerNormPath path = LayerNormPath::vectorized;  // aten's path for r (and weight)
  float eps = 0.0f;
};

// A row's statistics: LayerNorm mean and rstd, or RMSNorm rstd (mean unused).
struct ResidualNormStats {
  float mean = 0.0f, rstd = 0.0f;
};

// The row's statistics from its r values (load(k): element k of r as float), host order.
template <typename Load>
ResidualNormStats scale_residual_norm_stats_host(const ScaleResidualNormParams& p, Load load, int64_t n) {
  if (p.norm == ResidualNormKind::layer_norm) {
    const LayerNormStats s = layer_norm_stats_host(p.path, load, n);
    return {s.mean, layer_norm_rstd(s.var, p.eps)};
  }
  if (p.path == LayerNormPath::generic)
    return {0.0f, torch_rms_norm_rstd_generic(layer_norm_stats_generic_host(load, n), p.eps)};
  return {0.0f, torch_rms_norm_rstd(torch_rms_norm_sum_of_squares_host(load, n), n, p.eps)};
}

// The normalized value of r (as float) before its rounding to T, for one norm, aten path and presence of
// the weight (rms_norm) fixed at compile time; k4 = the element's position in its 4-element chunk.
template <ResidualNormKind kNorm, LayerNormPath kPath, bool kWeight>
struct ResidualNormElement {
  static constexpr bool kHasWeight = kWeight;
  DFUSE_HD float operator()(float r, ResidualNormStats s, int k4, float weight) const {
    if constexpr (kNorm == ResidualNormKind::layer_norm)
      return ModulateEpilogue::normalized<kPath>(r, s.mean, s.rstd, k4);
    return torch_rms_norm_element(r, s.rstd, kWeight, weight);
  }
};

// f(ResidualNormElement<p.norm, kPath, p has a weight>{}) for a kernel whose statistics take aten path kPath
// (p.path): kernels branch on these once, not per element. (layer_norm takes no weight here.)
template <LayerNormPath kPath, typename F>
DFUSE_HD decltype(auto) with_residual_norm_element(const ScaleResidualNormParams& p, F&& f) {
  using enum ResidualNormKind;
  if (p.norm == layer_norm) return f(ResidualNormElement<layer_norm, kPath, false>{});
  return p.weight ? f(ResidualNormElement<rms_norm, kPath, true>{})
                  : f(ResidualNormElement<rms_norm, kPath, false>{});
}

// The modulated output element from r (as float), the row statistics, the weight element (rms_norm),
// scale and shift: the normalized value rounded to T, then ops/adaln/modulate_scale_shift.h's three
// roundings; k4 = the element's position in its 4-element chunk.
template <typename T>
DFUSE_HD T scale_residual_norm_element(const ScaleResidualNormParams& p, float r, ResidualNormStats s, int k4,
                                       float weight, T scale, T shift) {
  const auto modulated = [&](auto element) {
    return ModulateScaleShift<T>{}(Storage<T>::store(element(r, s, k4, weight)), scale, shift);
  };
  if (p.path == LayerNormPath::generic) return with_residual_norm_element<LayerNormPath::generic>(p, modulated);
  return with_residual_norm_element<LayerNormPath::vectorized>(p, modulated);
}

using ScaleResidualNormEntry = void (*)(const ScaleResidualNormParams& p, Stream stream);

}  // namespace dfuse::detail
