// diffusion.timestep_embedding — replaces diffusers' get_timestep_embedding(timesteps,
// embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period) (the Timesteps module
// of FLUX, SD3, Wan, LTX, ...), about eight eager kernels:
//   half_dim = embedding_dim // 2
//   exponent = -math.log(max_period) * torch.arange(0, half_dim, dtype=torch.float32)
//   exponent = exponent / (half_dim - downscale_freq_shift)
//   emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
//   emb = scale * emb
//   emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)       # [cos, sin] if flip_sin_to_cos
//   emb = F.pad(emb, (0, 1, 0, 0)) if embedding_dim % 2 == 1
//
// The element follows the eager chain's float32 roundings op by op: a Python scalar enters as a
// float32 scalar, except the divisor, which aten applies as a multiply by float(1 / divisor) with
// the reciprocal taken in double (reference/pytorch-eager-arithmetic.md §3); exp, sin and cos are
// the math library's expf/sinf/cosf (libdevice on CUDA, as aten; no fast-math intrinsics).
//
// Contract: close. |out - torch| <= 2^-20 * max(1, |scale * t|) per element (a few float ulps of
// the sin/cos argument): the host's libm expf/sinf/cosf differ from libdevice's in the last
// bits, and an ulp of exp moves the argument by ulps of |scale * t| (up to 1000 for diffusion
// timesteps). On CUDA the chain is the same sequence of libdevice calls and IEEE roundings as
// aten's kernels, so the result is expected to equal torch bit for bit; that is measured by
// python/tests/test_adaln_values_torch.py, not promised.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/arith.h"
#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::detail {

struct TimestepEmbeddingParams {
  DType timesteps_dtype = DType::f32;
  int device = 0;
  const void* timesteps = nullptr;
  int64_t timesteps_stride = 1;  // elements
  int64_t count = 0;             // N
  float* out = nullptr;
  int64_t out_row_stride = 0;  // elements
  int64_t dim = 0;             // embedding_dim
  int64_t half_dim = 0;
  bool flip_sin_to_cos = false;
  float neg_log_max_period = 0;  // float(-log(max_period))
  float inv_divisor = 0;         // float(1 / (half_dim - downscale_freq_shift)), reciprocal in double
  float scale = 1;               // float(scale)
};

// timesteps[:, None].float() for the supported timestep dtypes.
template <typename T>
DFUSE_HD float timestep_as_float(T t) {
  if constexpr (std::is_same_v<T, int64_t>)
    return float(t);  // round to nearest, as aten's int64 -> float cast
  else
    return Storage<T>::load(t);
}

// Column `j` of the embedding of timestep `t` (as float).
DFUSE_HD float timestep_embedding_element(const TimestepEmbeddingParams& p, float t, int64_t j) {
  if (j >= 2 * p.half_dim) return 0.0f;  // the F.pad column of an odd embedding_dim
  const bool first_half = j < p.half_dim;
  const int64_t k = first_half ? j : j - p.half_dim;
  const float exponent = mul_rn(mul_rn(p.neg_log_max_period, float(k)), p.inv_divisor);
  const float arg = mul_rn(p.scale, mul_rn(t, exp_f(exponent)));
  const bool sine = first_half != p.flip_sin_to_cos;
  return sine ? sinf(arg) : cosf(arg);
}

// Calls f(T{}) with the element type of the timesteps (guards have rejected other dtypes).
template <typename F>
void dispatch_timestep_dtype(DType t, F&& f) {
  switch (t) {
    case DType::bf16:
      return f(bf16_t{});
    case DType::f16:
      return f(f16_t{});
    case DType::i64:
      return f(int64_t{});
    default:
      return f(float{});
  }
}

template <typename T>
void timestep_embedding_host_rows(const TimestepEmbeddingParams& p) {
  for (int64_t n = 0; n < p.count; ++n) {
    const float t = timestep_as_float(static_cast<const T*>(p.timesteps)[n * p.timesteps_stride]);
    for (int64_t j = 0; j < p.dim; ++j) p.out[n * p.out_row_stride + j] = timestep_embedding_element(p, t, j);
  }
}

using TimestepEmbeddingEntry = void (*)(const TimestepEmbeddingParams& p, Stream stream);

}  // namespace dfuse::detail
