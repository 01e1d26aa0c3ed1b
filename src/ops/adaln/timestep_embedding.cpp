// diffusion.timestep_embedding: guards, parameters, and the host kernel.
#include "ops/adaln/timestep_embedding.h"

#include <cmath>
#include <limits>

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/adaln.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "timestep_embedding";

detail::GuardList check(const TensorView& timesteps, const TensorView& out, const TimestepEmbeddingOptions& o) {
  detail::GuardList g(kOp);
  g.dtype_in("timesteps", timesteps, {DType::f32, DType::bf16, DType::f16, DType::i64});
  g.rank_between("timesteps", timesteps, 1, 1);
  g.not_null("timesteps", timesteps);
  g.non_negative_strides("timesteps", timesteps);
  g.dtype_in("out", out, {DType::f32});
  g.same_device("out", out, timesteps, "timesteps");
  g.rank_between("out", out, 2, 2);
  g.not_null("out", out);
  g.last_dim_contiguous("out", out);
  g.non_negative_strides("out", out);
  g.non_overlapping("out", out);
  g.no_partial_overlap("out", out, "timesteps", timesteps, false);
  if (!g.ok()) return g;
  if (out.size(0) != timesteps.size(0))
    g.fail("shape", "out must be [N, embedding_dim] with timesteps' N = " + std::to_string(timesteps.size(0)) +
                        ", got " + detail::shape_str(out));
  else if (out.numel() >= std::numeric_limits<int32_t>::max())
    g.fail("extent", "out " + detail::shape_str(out) + " has 2^31 or more elements");
  if (!(o.max_period > 0) || !std::isfinite(o.max_period))
    g.fail("max_period",
           "max_period must be finite and positive (its log is taken), got " + std::to_string(o.max_period));
  const int64_t half_dim = out.size(1) / 2;
  if (half_dim > 0 && !(double(half_dim) - o.downscale_freq_shift != 0.0))
    g.fail("downscale_freq_shift", "embedding_dim // 2 - downscale_freq_shift must be nonzero, got half_dim " +
                                       std::to_string(half_dim) + " and shift " +
                                       std::to_string(o.downscale_freq_shift));
  if (!std::isfinite(o.scale) || !std::isfinite(o.downscale_freq_shift))
    g.fail("options", "scale and downscale_freq_shift must be finite");
  return g;
}

detail::TimestepEmbeddingParams params(const TensorView& timesteps, const TensorView& out,
                                       const TimestepEmbeddingOptions& o) {
  detail::TimestepEmbeddingParams p;
  p.timesteps_dtype = timesteps.dtype();
  p.device = timesteps.device().index;
  p.timesteps = timesteps.data();
  p.timesteps_stride = timesteps.stride(0);
  p.count = timesteps.size(0);
  p.out = static_cast<float*>(out.data());
  p.out_row_stride = out.stride(0);
  p.dim = out.size(1);
  p.half_dim = p.dim / 2;
  p.flip_sin_to_cos = o.flip_sin_to_cos;
  p.neg_log_max_period = float(-std::log(o.max_period));
  p.inv_divisor = float(1.0 / (double(p.half_dim) - o.downscale_freq_shift));
  p.scale = float(o.scale);
  return p;
}

void timestep_embedding_host(const detail::TimestepEmbeddingParams& p, Stream) {
  detail::dispatch_timestep_dtype(p.timesteps_dtype,
                                  [&](auto tag) { detail::timestep_embedding_host_rows<decltype(tag)>(p); });
}

DFUSE_REGISTER_ENTRY(host, "timestep_embedding", &timestep_embedding_host);

}  // namespace

bool can_use_timestep_embedding(const TensorView& timesteps, const TensorView& out,
                                const TimestepEmbeddingOptions& options, std::string* why) {
  return check(timesteps, out, options).answer(why);
}

void timestep_embedding(const TensorView& timesteps, const TensorView& out, const TimestepEmbeddingOptions& options,
                        Stream stream) {
  check(timesteps, out, options).throw_if_failed();
  static detail::OpEntry entry("diffusion.timestep_embedding");
  entry.get<detail::TimestepEmbeddingEntry>(timesteps.device())(params(timesteps, out, options), stream);
}

}  // namespace dfuse
