// diffusion.helios_qk_rope: guards, dispatch, and the host kernel.
#include "ops/rope/helios_qk_rope.h"

#include <string>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "helios_qk_rope";

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView& freqs, const TensorView& q_out,
                        const TensorView& k_out) {
  detail::GuardList g(kOp);
  detail::check_paired_qk(g, q, k, 4, "[B, S, heads, D]");
  if (!g.ok()) return g;
  if (q.size(3) % 2 != 0)
    g.fail("head_dim", "the head dim D = q.size(-1) must be even (pairs), got " + std::to_string(q.size(3)));
  g.dtype_in("freqs", freqs, {DType::f32});
  g.same_device("freqs", freqs, q, "q");
  g.not_null("freqs", freqs);
  g.non_negative_strides("freqs", freqs);
  if (!g.ok()) return g;
  if (freqs.dim() != 3 || (freqs.size(0) != q.size(0) && freqs.size(0) != 1) || freqs.size(1) != q.size(1) ||
      freqs.size(2) != 2 * q.size(3))
    g.fail("shape", "freqs must be [B or 1, S, 2D] = [" + std::to_string(q.size(0)) + ", " + std::to_string(q.size(1)) +
                        ", " + std::to_string(2 * q.size(3)) + "] (cos then sin of each token), got " +
                        detail::shape_str(freqs));
  if (!g.ok()) return g;
  detail::check_paired_qk_outputs(g, q, k, q_out, k_out, {{"freqs", &freqs}});
  return g;
}

detail::HeliosQkRopeParams params(const TensorView& q, const TensorView& k, const TensorView& freqs,
                                  const TensorView& q_out, const TensorView& k_out) {
  detail::HeliosQkRopeParams p;
  p.dtype = q.dtype();
  p.device = q.device().index;
  for (int d = 0; d < 3; ++d) p.sizes[d] = q.size(d);
  p.head_dim = q.size(3);
  const TensorView* xs[2] = {&q, &k};
  const TensorView* outs[2] = {&q_out, &k_out};
  for (int i = 0; i < 2; ++i) {
    p.x[i] = xs[i]->data();
    p.out[i] = outs[i]->data();
    for (int d = 0; d < 3; ++d) {
      p.x_strides[i][d] = xs[i]->stride(d);
      p.out_strides[i][d] = outs[i]->stride(d);
    }
  }
  p.freqs = static_cast<const float*>(freqs.data());
  p.freqs_strides[0] = freqs.size(0) == 1 ? 0 : freqs.stride(0);
  p.freqs_strides[1] = freqs.stride(1);
  p.freqs_strides[2] = freqs.stride(2);
  return p;
}

template <typename T>
void host_rows(const detail::HeliosQkRopeParams& p) {
  using detail::Storage;
  const int64_t rows = p.sizes[0] * p.sizes[1] * p.sizes[2];
  for (int i = 0; i < 2; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      const uint32_t idx[3] = {uint32_t(r / (p.sizes[1] * p.sizes[2])), uint32_t(r / p.sizes[2] % p.sizes[1]),
                               uint32_t(r % p.sizes[2])};
      int64_t x_off = 0, out_off = 0;
      for (int d = 0; d < 3; ++d) {
        x_off += idx[d] * p.x_strides[i][d];
        out_off += idx[d] * p.out_strides[i][d];
      }
      const T* x = static_cast<const T*>(p.x[i]) + x_off;
      T* out = static_cast<T*>(p.out[i]) + out_off;
      for (int64_t j = 0; j < p.head_dim / 2; ++j) {  // a pair is read before it is written (in place)
        const auto r2 = detail::rope_pair_rounded_each<T>(Storage<T>::load(x[2 * j]), Storage<T>::load(x[2 * j + 1]),
                                                          p.cos(idx, j), p.sin(idx, j));
        out[2 * j] = r2.even;
        out[2 * j + 1] = r2.odd;
      }
    }
}

void host_entry(const detail::HeliosQkRopeParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, "helios_qk_rope host kernel", [&](auto tag) { host_rows<decltype(tag)>(p); });
}

DFUSE_REGISTER_ENTRY(host, "helios_qk_rope", &host_entry);

}  // namespace

bool can_use_helios_qk_rope(const TensorView& q, const TensorView& k, const TensorView& freqs,
                            const TensorView& q_out, const TensorView& k_out, std::string* why) {
  return check(q, k, freqs, q_out, k_out).answer(why);
}

void helios_qk_rope(const TensorView& q, const TensorView& k, const TensorView& freqs, const TensorView& q_out,
                    const TensorView& k_out, Stream stream) {
  check(q, k, freqs, q_out, k_out).throw_if_failed();
  if (q.numel() == 0) return;
  static detail::OpEntry entry("diffusion.helios_qk_rope");
  entry.get<detail::HeliosQkRopeEntry>(q.device())(params(q, k, freqs, q_out, k_out), stream);
}

}  // namespace dfuse
