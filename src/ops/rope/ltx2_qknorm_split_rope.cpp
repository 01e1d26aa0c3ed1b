// diffusion.ltx2_qknorm_split_rope: guards, dispatch, and the host kernel.
#include "ops/rope/ltx2_qknorm_split_rope.h"

#include <string>
#include <tuple>
#include <vector>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "ltx2_qknorm_split_rope";

// One of q, k: x [B, S, C] with its F.rms_norm, tables [B, H, S, D/2] fp32 with C = H * D.
void check_side(detail::GuardList& g, const char* x_name, const TensorView& x, const TensorView* weight, double eps,
                const char* cos_name, const TensorView& cos, const char* sin_name, const TensorView& sin) {
  const std::string xn = x_name;
  if (g.ok() && x.dim() != 3) g.fail("rank", xn + " must be [B, S, C] (rank 3), got " + detail::shape_str(x));
  detail::check_rms_norm_input(g, RmsNormChain::torch_rms_norm, x, weight, eps, x_name,
                               (xn + "_weight").c_str());
  detail::check_rope_extent(g, x_name, x);
  g.dtype_in(cos_name, cos, {DType::f32});
  g.same_dtype(sin_name, sin, cos, cos_name);
  g.same_device(cos_name, cos, x, x_name);
  g.same_device(sin_name, sin, x, x_name);
  g.not_null(cos_name, cos);
  g.not_null(sin_name, sin);
  if (!g.ok()) return;
  if (cos.dim() != 4)
    g.fail("shape", std::string(cos_name) + " must be [B, H, S, D/2] (rank 4), got " + detail::shape_str(cos));
  g.same_shape(sin_name, sin, cos, cos_name);
  if (!g.ok()) return;
  const int64_t heads = cos.size(1), half = cos.size(3), c = x.size(2);
  if (cos.size(0) != x.size(0) || cos.size(2) != x.size(1) || heads <= 0 || half <= 0 || heads * 2 * half != c)
    g.fail("shape", std::string(cos_name) + " " + detail::shape_str(cos) + " must be [B, H, S, D/2] with B, S of " +
                        xn + " " + detail::shape_str(x) + " and H * D = " + std::to_string(c));
  g.last_dim_contiguous(cos_name, cos);
  g.last_dim_contiguous(sin_name, sin);
  g.non_negative_strides(cos_name, cos);
  g.non_negative_strides(sin_name, sin);
}

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                        const TensorView* k_weight, double eps, const TensorView& q_cos, const TensorView& q_sin,
                        const TensorView& k_cos, const TensorView& k_sin, const TensorView& q_out,
                        const TensorView& k_out) {
  detail::GuardList g(kOp);
  check_side(g, "q", q, q_weight, eps, "q_cos", q_cos, "q_sin", q_sin);
  check_side(g, "k", k, k_weight, eps, "k_cos", k_cos, "k_sin", k_sin);
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  if (!g.ok()) return g;
  std::vector<detail::NamedInput> reads = {{"q", &q, false},         {"k", &k, false},
                                           {"q_cos", &q_cos, false}, {"q_sin", &q_sin, false},
                                           {"k_cos", &k_cos, false}, {"k_sin", &k_sin, false}};
  if (q_weight) reads.push_back({"q_weight", q_weight, false});
  if (k_weight) reads.push_back({"k_weight", k_weight, false});
  detail::check_rowwise_output(g, q_out, q, {}, "q");
  detail::check_rowwise_output(g, k_out, k, {}, "k");
  // Each output may be its own input exactly, nothing else it overlaps.
  for (const auto& [out_name, out, own] : {std::tuple{"q_out", &q_out, &q}, std::tuple{"k_out", &k_out, &k}})
    for (const auto& in : reads) g.no_partial_overlap(out_name, *out, in.name, *in.view, in.view == own);
  g.no_partial_overlap("k_out", k_out, "q_out", q_out, false);
  return g;
}

detail::Ltx2SplitRopeSide side(const TensorView& x, const TensorView* weight, double eps, const TensorView& cos,
                               const TensorView& sin, const TensorView& out) {
  detail::Ltx2SplitRopeSide s;
  s.norm = detail::rms_norm_rows_params(RmsNormChain::torch_rms_norm, x, weight, eps, {}, out);
  s.heads = cos.size(1);
  s.half = cos.size(3);
  // x's rows are tokens with outer dims (1, B, S); the tables' token rows are (b, s) of [B, H, S, r].
  for (auto [t, op, head_stride] : {std::tuple{&cos, &s.cos, &s.cos_head_stride},
                                    std::tuple{&sin, &s.sin, &s.sin_head_stride}}) {
    op->data = t->data();
    op->stride[0] = 0;
    op->stride[1] = t->stride(0);
    op->stride[2] = t->stride(2);
    op->col_stride = 1;
    *head_stride = t->stride(1);
  }
  return s;
}

template <typename T>
void host_side(const detail::Ltx2SplitRopeSide& s) {
  using detail::Storage;
  const detail::RmsNormRowsParams& n = s.norm;
  const int64_t rows = n.rows.geom.rows(), cols = n.rows.geom.cols, d = 2 * s.half;
  const T* weight = static_cast<const T*>(n.weight);
  std::vector<float> normed(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    n.rows.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(n.rows.in[0].data) + n.rows.in[0].offset(idx);
    T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
    const float inv = detail::rms_norm_row_inv_host(n, [x](int64_t c) { return Storage<T>::load(x[c]); }, r);
    // The whole row is normalized before any of it is written: out may be x.
    for (int64_t c = 0; c < cols; ++c)
      normed[size_t(c)] = Storage<T>::load(
          detail::rms_norm_normalized<T>(n, Storage<T>::load(x[c]), inv, weight ? Storage<T>::load(weight[c]) : 1.0f));
    const float* cos_row = static_cast<const float*>(s.cos.data) + s.cos.offset(idx);
    const float* sin_row = static_cast<const float*>(s.sin.data) + s.sin.offset(idx);
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* cs = cos_row + h * s.cos_head_stride;
      const float* sn = sin_row + h * s.sin_head_stride;
      for (int64_t i = 0; i < s.half; ++i) {
        const int64_t e1 = h * d + i, e2 = e1 + s.half;
        const auto pair = detail::ltx2_split_rope_pair<T>(normed[size_t(e1)], normed[size_t(e2)], cs[i], sn[i]);
        out[e1] = pair.even;
        out[e2] = pair.odd;
      }
    }
  }
}

void host_entry(const detail::Ltx2QkNormSplitRopeParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.side[0].norm.rows.dtype, "ltx2_qknorm_split_rope host kernel", [&](auto tag) {
    for (const auto& s : p.side) host_side<decltype(tag)>(s);
  });
}

DFUSE_REGISTER_ENTRY(host, "ltx2_qknorm_split_rope", &host_entry);

}  // namespace

bool can_use_ltx2_qknorm_split_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                                    const TensorView* k_weight, double eps, const TensorView& q_cos,
                                    const TensorView& q_sin, const TensorView& k_cos, const TensorView& k_sin,
                                    const TensorView& q_out, const TensorView& k_out, std::string* why) {
  return check(q, k, q_weight, k_weight, eps, q_cos, q_sin, k_cos, k_sin, q_out, k_out).answer(why);
}

void ltx2_qknorm_split_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                            const TensorView* k_weight, double eps, const TensorView& q_cos, const TensorView& q_sin,
                            const TensorView& k_cos, const TensorView& k_sin, const TensorView& q_out,
                            const TensorView& k_out, Stream stream) {
  check(q, k, q_weight, k_weight, eps, q_cos, q_sin, k_cos, k_sin, q_out, k_out).throw_if_failed();
  if (q.numel() == 0 && k.numel() == 0) return;
  detail::Ltx2QkNormSplitRopeParams p;
  p.side[0] = side(q, q_weight, eps, q_cos, q_sin, q_out);
  p.side[1] = side(k, k_weight, eps, k_cos, k_sin, k_out);
  static detail::OpEntry entry("diffusion.ltx2_qknorm_split_rope");
  entry.get<detail::Ltx2QkNormSplitRopeEntry>(q.device())(p, stream);
}

}  // namespace dfuse
