// diffusion.fused_inplace_qknorm_rope: guards, dispatch, and the host kernel.
#include "ops/rope/fused_inplace_qknorm_rope.h"

#include <vector>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/layer_norm_stats.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"
#include "ops/rope/rope_rotate_half.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "fused_inplace_qknorm_rope";

// The RMSNorm path the kernel's warp reductions reproduce for x: aten's vectorized F.rms_norm kernel,
// or Reduce.cuh's 32-lane vectorized, unsplit mean for the decomposed chain (rows of 256 floats get 64
// lanes when the mean has fewer than 16 rows).
void check_norm_path(detail::GuardList& g, RmsNormChain chain, const char* name, const TensorView& x,
                     const TensorView* weight) {
  if (!g.ok() || x.numel() == 0) return;
  if (chain == RmsNormChain::torch_rms_norm) {
    if (detail::layer_norm_path(x, weight, nullptr) != detail::LayerNormPath::vectorized)
      g.fail("rms_norm_path", std::string(name) +
                                  ": aten takes its generic F.rms_norm path here (contiguous rows not 4-element "
                                  "aligned), which this kernel does not reproduce");
    return;
  }
  const int64_t d = x.size(-1);
  const detail::MeanReduceConfig c = detail::mean_reduce_config(x.numel() / d, d);
  if (c.lanes != 32 || !c.vectorized || c.split)
    g.fail("rms_norm_path", std::string(name) + " " + detail::shape_str(x) + ": torch's mean over these " +
                                std::to_string(x.numel() / d) + " rows uses " + std::to_string(c.lanes) +
                                " lanes per row; the kernel reproduces the 32-lane order only");
}

detail::GuardList check(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                        const TensorView* k_weight, double eps, const TensorView& cos, const TensorView& sin,
                        RopeMath math) {
  detail::GuardList g(kOp);
  g.rank_between("q", q, 2, 4);
  g.rank_between("k", k, 2, 4);
  detail::check_rms_norm_input(g, chain, q, q_weight, eps, "q", "q_weight");
  detail::check_rms_norm_input(g, chain, k, k_weight, eps, "k", "k_weight");
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  detail::check_rope_extent(g, "q", q);
  detail::check_rope_extent(g, "k", k);
  if (!g.ok()) return g;
  const int64_t d = q.size(-1);
  if (d != 128 && d != 256)
    g.fail("head_dim", "the head dim D = q.size(-1) must be 128 or 256, got " + std::to_string(d));
  if (g.ok() && k.size(-1) != d)
    g.fail("shape", "k's head dim must be q's " + std::to_string(d) + ", got " + std::to_string(k.size(-1)));
  check_norm_path(g, chain, "q", q, q_weight);
  check_norm_path(g, chain, "k", k, k_weight);
  detail::check_rotate_half_tables(g, "q", q, cos, sin, math);
  detail::check_rotate_half_tables(g, "k", k, cos, sin, math);
  // q and k are written in place: no element written twice, nothing written that is read elsewhere.
  g.non_overlapping("q", q);
  g.non_overlapping("k", k);
  g.no_partial_overlap("k", k, "q", q, false);
  for (const auto& [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}}) {
    g.no_partial_overlap(name, *t, "cos", cos, false);
    g.no_partial_overlap(name, *t, "sin", sin, false);
    if (q_weight) g.no_partial_overlap(name, *t, "q_weight", *q_weight, false);
    if (k_weight) g.no_partial_overlap(name, *t, "k_weight", *k_weight, false);
  }
  return g;
}

detail::QkNormRopeParams params(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                const TensorView& cos, const TensorView& sin, RopeMath math) {
  detail::QkNormRopeParams p;
  p.norm = detail::rms_norm_rows_params(chain, x, weight, eps, {}, x);
  p.table_dtype = cos.dtype();
  p.math = math;
  p.rot_dim = cos.size(-1);
  const TensorView x_rot = x.narrow(-1, 0, p.rot_dim);
  p.cos = detail::row_operand(cos, x_rot);
  p.sin = detail::row_operand(sin, x_rot);
  return p;
}

template <typename T, typename Table, RopeMath M>
void host_rows(const detail::QkNormRopeParams& p) {
  using detail::Storage;
  const detail::RmsNormRowsParams& n = p.norm;
  const int64_t rows = n.rows.geom.rows(), cols = n.rows.geom.cols, half = p.rot_dim / 2;
  const T* weight = static_cast<const T*>(n.weight);
  std::vector<T> normed(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    n.rows.geom.split(uint32_t(r), idx);
    T* x = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
    const float inv = detail::rms_norm_row_inv_host(n, [x](int64_t c) { return Storage<T>::load(x[c]); }, r);
    for (int64_t c = 0; c < cols; ++c)
      normed[size_t(c)] =
          detail::rms_norm_normalized<T>(n, Storage<T>::load(x[c]), inv, weight ? Storage<T>::load(weight[c]) : 1.0f);
    const Table* cs = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* sn = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = Storage<T>::load(normed[size_t(i)]), x2 = Storage<T>::load(normed[size_t(i + half)]);
      x[i] = detail::rotate_half_element<T, M>(x1, -x2, Storage<Table>::load(cs[i]), Storage<Table>::load(sn[i]));
      x[i + half] = detail::rotate_half_element<T, M>(x2, x1, Storage<Table>::load(cs[i + half]),
                                                      Storage<Table>::load(sn[i + half]));
    }
    for (int64_t c = p.rot_dim; c < cols; ++c) x[c] = normed[size_t(c)];
  }
}

void host_one(const detail::QkNormRopeParams& p) {
  detail::dispatch_bf16_f16_f32(p.norm.rows.dtype, "fused_inplace_qknorm_rope host kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.math == RopeMath::storage_dtype) return host_rows<T, T, RopeMath::storage_dtype>(p);
    if (p.table_dtype == DType::f32) return host_rows<T, float, RopeMath::fp32_opmath>(p);
    return host_rows<T, T, RopeMath::fp32_opmath>(p);
  });
}

void host_entry(const detail::QkNormRopeParams& q, const detail::QkNormRopeParams& k, Stream) {
  host_one(q);
  host_one(k);
}

DFUSE_REGISTER_ENTRY(host, "fused_inplace_qknorm_rope", &host_entry);

}  // namespace

bool can_use_fused_inplace_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                       const TensorView* q_weight, const TensorView* k_weight, double eps,
                                       const TensorView& cos, const TensorView& sin, RopeMath math,
                                       std::string* why) {
  return check(chain, q, k, q_weight, k_weight, eps, cos, sin, math).answer(why);
}

void fused_inplace_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, Stream stream) {
  check(chain, q, k, q_weight, k_weight, eps, cos, sin, math).throw_if_failed();
  static detail::OpEntry entry("diffusion.fused_inplace_qknorm_rope");
  entry.get<detail::QkNormRopeEntry>(q.device())(params(chain, q, q_weight, eps, cos, sin, math),
                                                  params(chain, k, k_weight, eps, cos, sin, math), stream);
}

}  // namespace dfuse
