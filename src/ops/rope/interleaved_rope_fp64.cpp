// diffusion.interleaved_rope_fp64: guards, dispatch, and the host kernel.
#include "ops/rope/interleaved_rope_fp64.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "interleaved_rope_fp64";

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView& cos, const TensorView& sin,
                        const TensorView& q_out, const TensorView& k_out) {
  detail::GuardList g(kOp);
  g.rank_between("q", q, 2, 4);
  detail::check_rowwise_input(g, "q", q);
  detail::check_rope_extent(g, "q", q);
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  g.same_shape("k", k, q, "q");
  g.not_null("k", k);
  g.last_dim_contiguous("k", k);
  g.non_negative_strides("k", k);
  if (g.ok() && q.size(-1) % 2 != 0)
    g.fail("head_dim", "the head dim D = q.size(-1) must be even (pairs), got " + std::to_string(q.size(-1)));
  for (const auto& [name, t] : {std::pair{"freqs_cos", &cos}, std::pair{"freqs_sin", &sin}}) {
    g.dtype_in(name, *t, {DType::f64});
    g.same_device(name, *t, q, "q");
    g.not_null(name, *t);
    g.rank_between(name, *t, 1, 4);
    if (g.ok() && t->size(-1) != q.size(-1))
      g.fail("shape", std::string(name) + " " + detail::shape_str(*t) + " must have q's head dim " +
                          std::to_string(q.size(-1)) + " as its last dim");
    g.broadcastable_rows(name, *t, q, "q");
    g.non_negative_strides(name, *t);
  }
  const std::initializer_list<detail::NamedInput> inputs = {
      {"q", &q, true}, {"k", &k, false}, {"freqs_cos", &cos, false}, {"freqs_sin", &sin, false}};
  detail::check_rowwise_output(g, q_out, q, inputs, "q");
  if (!g.ok()) return g;
  // k_out is checked under its own name: check_rowwise_output names its output "out".
  g.same_dtype("k_out", k_out, q, "q");
  g.same_device("k_out", k_out, q, "q");
  g.same_shape("k_out", k_out, q, "q");
  g.not_null("k_out", k_out);
  g.last_dim_contiguous("k_out", k_out);
  g.non_negative_strides("k_out", k_out);
  g.non_overlapping("k_out", k_out);
  g.no_partial_overlap("k_out", k_out, "k", k, true);
  g.no_partial_overlap("k_out", k_out, "q", q, false);
  g.no_partial_overlap("k_out", k_out, "q_out", q_out, false);
  g.no_partial_overlap("k_out", k_out, "freqs_cos", cos, false);
  g.no_partial_overlap("k_out", k_out, "freqs_sin", sin, false);
  return g;
}

detail::InterleavedRopeFp64Params params(const TensorView& q, const TensorView& k, const TensorView& cos,
                                         const TensorView& sin, const TensorView& q_out, const TensorView& k_out) {
  detail::InterleavedRopeFp64Params p;
  p.dtype = q.dtype();
  p.device = q.device().index;
  p.geom = detail::row_geometry(q);
  p.q = detail::row_operand(q, q);
  p.k = detail::row_operand(k, q);
  p.cos = detail::row_operand(cos, q);
  p.sin = detail::row_operand(sin, q);
  p.q_out = detail::row_operand(q_out, q);
  p.k_out = detail::row_operand(k_out, q);
  return p;
}

template <typename T>
void host_head(const T* x, const double* cos, const double* sin, T* out, int64_t cols) {
  using S = detail::Storage<T>;
  for (int64_t i = 0; i < cols; i += 2) {  // both values are read before either is written (in place)
    const auto r = detail::interleaved_rope_fp64_pair<T>(double(S::load(x[i])), double(S::load(x[i + 1])), cos[i],
                                                         sin[i + 1]);
    out[i] = r.even;
    out[i + 1] = r.odd;
  }
}

template <typename T>
void host_rows(const detail::InterleavedRopeFp64Params& p) {
  const int64_t rows = p.geom.rows();
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const double* cos = static_cast<const double*>(p.cos.data) + p.cos.offset(idx);
    const double* sin = static_cast<const double*>(p.sin.data) + p.sin.offset(idx);
    host_head(static_cast<const T*>(p.q.data) + p.q.offset(idx), cos, sin,
              static_cast<T*>(p.q_out.data) + p.q_out.offset(idx), p.geom.cols);
    host_head(static_cast<const T*>(p.k.data) + p.k.offset(idx), cos, sin,
              static_cast<T*>(p.k_out.data) + p.k_out.offset(idx), p.geom.cols);
  }
}

void host_entry(const detail::InterleavedRopeFp64Params& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, "interleaved_rope_fp64 host kernel",
                                [&](auto tag) { host_rows<decltype(tag)>(p); });
}

DFUSE_REGISTER_ENTRY(host, "interleaved_rope_fp64", &host_entry);

}  // namespace

bool can_use_interleaved_rope_fp64(const TensorView& q, const TensorView& k, const TensorView& freqs_cos,
                                   const TensorView& freqs_sin, const TensorView& q_out, const TensorView& k_out,
                                   std::string* why) {
  return check(q, k, freqs_cos, freqs_sin, q_out, k_out).answer(why);
}

void interleaved_rope_fp64(const TensorView& q, const TensorView& k, const TensorView& freqs_cos,
                           const TensorView& freqs_sin, const TensorView& q_out, const TensorView& k_out,
                           Stream stream) {
  check(q, k, freqs_cos, freqs_sin, q_out, k_out).throw_if_failed();
  if (q.numel() == 0) return;
  static detail::OpEntry entry("diffusion.interleaved_rope_fp64");
  entry.get<detail::InterleavedRopeFp64Entry>(q.device())(params(q, k, freqs_cos, freqs_sin, q_out, k_out),
                                                          stream);
}

}  // namespace dfuse
