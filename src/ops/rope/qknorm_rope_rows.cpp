// The QK-norm + RoPE rows: guards, parameters and the host kernel (ops/rope/qknorm_rope_rows.h).
#include "ops/rope/qknorm_rope_rows.h"

#include <string>
#include <vector>

#include "common/dispatch.h"
#include "common/layer_norm_stats.h"
#include "ops/rope/rope_guards.h"

namespace dfuse::detail {

namespace {

// The RMSNorm path the kernel's warp reductions reproduce for x: aten's vectorized F.rms_norm kernel,
// or Reduce.cuh's 32-lane vectorized, unsplit mean for the decomposed chain (rows of 256 floats get 64
// lanes when the mean has fewer than 16 rows).
void check_norm_path(GuardList& g, RmsNormChain chain, const char* name, const TensorView& x,
                     const TensorView* weight) {
  if (!g.ok() || x.numel() == 0) return;
  if (chain == RmsNormChain::torch_rms_norm) {
    if (layer_norm_path(x, weight, nullptr) != LayerNormPath::vectorized)
      g.fail("rms_norm_path", std::string(name) +
                                  ": aten takes its generic F.rms_norm path here (contiguous rows not 4-element "
                                  "aligned), which this kernel does not reproduce");
    return;
  }
  const int64_t d = x.size(-1);
  const MeanReduceConfig c = mean_reduce_config(x.numel() / d, d);
  if (c.lanes != 32 || !c.vectorized || c.split)
    g.fail("rms_norm_path", std::string(name) + " " + shape_str(x) + ": torch's mean over these " +
                                std::to_string(x.numel() / d) + " rows uses " + std::to_string(c.lanes) +
                                " lanes per row; the kernel reproduces the 32-lane order only");
}

}  // namespace

void check_qknorm_rope_input(GuardList& g, RmsNormChain chain, const char* name, const TensorView& x,
                             const TensorView* weight, const char* weight_name, double eps, const TensorView& cos,
                             const TensorView& sin, RopeMath math, RopePairing pairing) {
  g.rank_between(name, x, 2, 4);
  check_rms_norm_input(g, chain, x, weight, eps, name, weight_name);
  check_rope_extent(g, name, x);
  if (!g.ok()) return;
  const int64_t d = x.size(-1);
  if (d != 128 && d != 256)
    g.fail("head_dim", std::string("the head dim D = ") + name + ".size(-1) must be 128 or 256, got " +
                           std::to_string(d));
  check_norm_path(g, chain, name, x, weight);
  if (pairing == RopePairing::interleaved_pairs && math != RopeMath::fp32_opmath)
    g.fail("math", "the interleaved-pair RoPE chain computes in fp32 (math fp32_opmath)");
  check_rotate_half_tables(g, name, x, cos, sin, math);
  if (g.ok() && pairing == RopePairing::interleaved_pairs && cos.size(-1) != d)
    g.fail("shape", "cos " + shape_str(cos) + " must have " + name + "'s head dim " + std::to_string(d) +
                        " as its last dim (the pairs cover the whole head)");
}

void check_qknorm_rope_rounding(GuardList& g, bool round_norm, RopeMath math) {
  if (!round_norm && math != RopeMath::fp32_opmath)
    g.fail("math", "the one-rounding form (normalized value kept in fp32 into the RoPE) is provided for math "
                   "fp32_opmath only");
}

QkNormRopeRows qknorm_rope_rows(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                const TensorView& cos, const TensorView& sin, RopeMath math, RopePairing pairing,
                                bool round_norm, const TensorView& out) {
  QkNormRopeRows p;
  p.norm = rms_norm_rows_params(chain, x, weight, eps, {}, out);
  p.table_dtype = cos.dtype();
  p.math = math;
  p.pairing = pairing;
  p.round_norm = round_norm;
  p.rot_dim = cos.size(-1);
  const TensorView x_rot = x.narrow(-1, 0, p.rot_dim);
  p.cos = row_operand(cos, x_rot);
  p.sin = row_operand(sin, x_rot);
  return p;
}

namespace {

template <typename T, typename Table, RopeMath M>
void host_rows(const QkNormRopeRows& p) {
  const RmsNormRowsParams& n = p.norm;
  const int64_t rows = n.rows.geom.rows(), cols = n.rows.geom.cols;
  const int rot = int(p.rot_dim);
  const T* weight = static_cast<const T*>(n.weight);
  std::vector<float> normed(static_cast<size_t>(cols));
  const auto value = [&normed](int e) { return normed[size_t(e)]; };
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    n.rows.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(n.rows.in[0].data) + n.rows.in[0].offset(idx);
    T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
    const float inv = rms_norm_row_inv_host(n, [x](int64_t c) { return Storage<T>::load(x[c]); }, r);
    // The whole head is read before any of it is written: out may be x.
    for (int64_t c = 0; c < cols; ++c)
      normed[size_t(c)] = qknorm_rope_normalized<T>(p, Storage<T>::load(x[c]), inv,
                                                    weight ? Storage<T>::load(weight[c]) : 1.0f);
    const Table* cs = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* sn = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    if (p.pairing == RopePairing::interleaved_pairs) {
      for (int e = 0; e < rot; e += 2) {
        const auto pair = rope_interleaved_pair<T>(normed[size_t(e)], normed[size_t(e + 1)], Storage<Table>::load(cs[e]),
                                                   Storage<Table>::load(cs[e + 1]), Storage<Table>::load(sn[e]),
                                                   Storage<Table>::load(sn[e + 1]));
        out[e] = pair.even;
        out[e + 1] = pair.odd;
      }
    } else {
      for (int e = 0; e < rot; ++e)
        out[e] = qknorm_rotate_half_output<T, M>(value, e, rot, Storage<Table>::load(cs[e]), Storage<Table>::load(sn[e]));
    }
    for (int64_t c = rot; c < cols; ++c) out[c] = Storage<T>::store(normed[size_t(c)]);
    if (p.copies) {
      const T* src = static_cast<const T*>(p.copy_src.data) + p.copy_src.offset(idx);
      T* dst = static_cast<T*>(p.copy_dst.data) + p.copy_dst.offset(idx);
      for (int64_t c = 0; c < cols; ++c) dst[c] = src[c];
    }
  }
}

void host_part(const QkNormRopeRows& p) {
  dispatch_bf16_f16_f32(p.norm.rows.dtype, "QK-norm + RoPE host kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.math == RopeMath::storage_dtype) return host_rows<T, T, RopeMath::storage_dtype>(p);
    if (p.table_dtype == DType::f32) return host_rows<T, float, RopeMath::fp32_opmath>(p);
    return host_rows<T, T, RopeMath::fp32_opmath>(p);
  });
}

}  // namespace

void qknorm_rope_host(const QkNormRopeLaunch& launch) {
  for (int i = 0; i < launch.parts; ++i) host_part(launch.part[i]);
}

}  // namespace dfuse::detail
