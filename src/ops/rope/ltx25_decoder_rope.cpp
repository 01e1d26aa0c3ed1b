// diffusion.ltx25_decoder_rope: guards, dispatch, and the host kernel.
#include "ops/rope/ltx25_decoder_rope.h"

#include <string>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "ltx25_decoder_rope";
constexpr const char* kAxisNames[3] = {"frame", "row", "column"};

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView* const cos[3],
                        const TensorView* const sin[3], const TensorView& q_out, const TensorView& k_out) {
  detail::GuardList g(kOp);
  detail::check_paired_qk(g, q, k, 6, "[B, T, H, W, heads, D]");
  if (!g.ok()) return g;
  int64_t channels = 0;
  for (int a = 0; a < 3; ++a) {
    const std::string cn = std::string("cos_") + kAxisNames[a], sn = std::string("sin_") + kAxisNames[a];
    const TensorView &c = *cos[a], &s = *sin[a];
    g.dtype_in(cn.c_str(), c, {DType::f32});
    g.same_dtype(sn.c_str(), s, c, cn.c_str());
    g.same_device(cn.c_str(), c, q, "q");
    g.same_device(sn.c_str(), s, q, "q");
    g.not_null(cn.c_str(), c);
    g.not_null(sn.c_str(), s);
    if (!g.ok()) return g;
    if (c.dim() != 2 || c.size(0) != q.size(1 + a))
      g.fail("shape", cn + " must be [" + std::to_string(q.size(1 + a)) + ", pairs] (q's " + kAxisNames[a] +
                          " count, then the axis' channel pairs), got " + detail::shape_str(c));
    g.same_shape(sn.c_str(), s, c, cn.c_str());
    g.last_dim_contiguous(cn.c_str(), c);
    g.last_dim_contiguous(sn.c_str(), s);
    g.non_negative_strides(cn.c_str(), c);
    g.non_negative_strides(sn.c_str(), s);
    if (g.ok()) channels += 2 * c.size(1);
  }
  if (g.ok() && channels != q.size(5))
    g.fail("head_dim", "the axes' channels (2 * the tables' widths) must add up to the head dim " +
                           std::to_string(q.size(5)) + ", got " + std::to_string(channels));
  if (!g.ok()) return g;
  detail::check_paired_qk_outputs(g, q, k, q_out, k_out,
                                  {{"cos table", cos[0]}, {"sin table", sin[0]}, {"cos table", cos[1]},
                                   {"sin table", sin[1]}, {"cos table", cos[2]}, {"sin table", sin[2]}});
  return g;
}

detail::Ltx25DecoderRopeParams params(const TensorView& q, const TensorView& k, const TensorView* const cos[3],
                                      const TensorView* const sin[3], const TensorView& q_out,
                                      const TensorView& k_out) {
  detail::Ltx25DecoderRopeParams p;
  p.dtype = q.dtype();
  p.device = q.device().index;
  for (int d = 0; d < 5; ++d) p.sizes[d] = q.size(d);
  p.head_dim = q.size(5);
  const TensorView* xs[2] = {&q, &k};
  const TensorView* outs[2] = {&q_out, &k_out};
  for (int i = 0; i < 2; ++i) {
    p.x[i] = xs[i]->data();
    p.out[i] = outs[i]->data();
    for (int d = 0; d < 5; ++d) {
      p.x_strides[i][d] = xs[i]->stride(d);
      p.out_strides[i][d] = outs[i]->stride(d);
    }
  }
  for (int a = 0; a < 3; ++a) {
    p.axis[a].cos = static_cast<const float*>(cos[a]->data());
    p.axis[a].sin = static_cast<const float*>(sin[a]->data());
    p.axis[a].cos_stride = cos[a]->stride(0);
    p.axis[a].sin_stride = sin[a]->stride(0);
    p.axis[a].pairs = cos[a]->size(1);
  }
  return p;
}

template <typename T>
void host_rows(const detail::Ltx25DecoderRopeParams& p) {
  using detail::Storage;
  const int64_t rows = p.sizes[0] * p.sizes[1] * p.sizes[2] * p.sizes[3] * p.sizes[4];
  for (int i = 0; i < 2; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t idx[5], rest = r;
      for (int d = 4; d >= 0; --d) {
        idx[d] = rest % p.sizes[d];
        rest /= p.sizes[d];
      }
      int64_t x_off = 0, out_off = 0;
      for (int d = 0; d < 5; ++d) {
        x_off += idx[d] * p.x_strides[i][d];
        out_off += idx[d] * p.out_strides[i][d];
      }
      const T* x = static_cast<const T*>(p.x[i]) + x_off;
      T* out = static_cast<T*>(p.out[i]) + out_off;
      for (int64_t j = 0; j < p.head_dim / 2; ++j) {  // a pair is read before it is written (in place)
        int64_t local = 0;
        const int a = p.axis_of(j, local);
        const detail::Ltx25AxisTable& t = p.axis[a];
        const int64_t pos = idx[1 + a];
        const auto r2 = detail::rope_pair_rounded_each<T>(Storage<T>::load(x[2 * j]), Storage<T>::load(x[2 * j + 1]),
                                                   t.cos[pos * t.cos_stride + local], t.sin[pos * t.sin_stride + local]);
        out[2 * j] = r2.even;
        out[2 * j + 1] = r2.odd;
      }
    }
}

void host_entry(const detail::Ltx25DecoderRopeParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, "ltx25_decoder_rope host kernel",
                                [&](auto tag) { host_rows<decltype(tag)>(p); });
}

DFUSE_REGISTER_ENTRY(host, "ltx25_decoder_rope", &host_entry);

}  // namespace

std::array<int64_t, 3> ltx25_decoder_rope_dim_split(int64_t head_dim) {
  int64_t dim_t = (head_dim / 4) / 2 * 2, dim_hw = (head_dim - dim_t) / 2;
  if (dim_hw % 2 != 0) {
    dim_t -= 2;
    dim_hw = (head_dim - dim_t) / 2;
  }
  return {dim_t, dim_hw, dim_hw};
}

bool can_use_ltx25_decoder_rope(const TensorView& q, const TensorView& k, const TensorView& cos_t,
                                const TensorView& sin_t, const TensorView& cos_h, const TensorView& sin_h,
                                const TensorView& cos_w, const TensorView& sin_w, const TensorView& q_out,
                                const TensorView& k_out, std::string* why) {
  const TensorView* cos[3] = {&cos_t, &cos_h, &cos_w};
  const TensorView* sin[3] = {&sin_t, &sin_h, &sin_w};
  return check(q, k, cos, sin, q_out, k_out).answer(why);
}

void ltx25_decoder_rope(const TensorView& q, const TensorView& k, const TensorView& cos_t, const TensorView& sin_t,
                        const TensorView& cos_h, const TensorView& sin_h, const TensorView& cos_w,
                        const TensorView& sin_w, const TensorView& q_out, const TensorView& k_out, Stream stream) {
  const TensorView* cos[3] = {&cos_t, &cos_h, &cos_w};
  const TensorView* sin[3] = {&sin_t, &sin_h, &sin_w};
  check(q, k, cos, sin, q_out, k_out).throw_if_failed();
  if (q.numel() == 0) return;
  static detail::OpEntry entry("diffusion.ltx25_decoder_rope");
  entry.get<detail::Ltx25DecoderRopeEntry>(q.device())(params(q, k, cos, sin, q_out, k_out), stream);
}

}  // namespace dfuse
