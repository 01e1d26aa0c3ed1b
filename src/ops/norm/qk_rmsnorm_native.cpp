// diffusion.qk_rmsnorm_native / diffusion.qk_rmsnorm: guards, dispatch, and the host kernel.
#include "ops/norm/qk_rmsnorm_native.h"

#include <string>
#include <utility>

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "qk_rmsnorm";

void check_head_rows(detail::GuardList& g, RmsNormChain chain, const TensorView& t, const TensorView* weight,
                     const char* name) {
  if (!g.ok() || t.numel() == 0) return;
  const int64_t dh = t.size(-1);
  if (dh % 128 != 0 || dh > detail::kQkRmsNormMaxHeadDim)
    g.fail("extent", std::string(name) + " has a head dim of " + std::to_string(dh) +
                         "; a multiple of 128 up to 512 is supported");
  if (!g.ok()) return;
  if (chain == RmsNormChain::storage_dtype) {
    if (dh != 128)
      g.fail("extent", std::string(name) + " has a head dim of " + std::to_string(dh) +
                           "; the storage-dtype chain is implemented for 128");
  } else if (chain == RmsNormChain::diffusers_decomposed) {
    const int64_t rows = t.numel() / dh;
    const detail::MeanReduceConfig c = detail::mean_reduce_config(rows, dh);
    if (c.lanes != 32 || !c.vectorized || c.split)
      g.fail("extent", std::string(name) + " " + detail::shape_str(t) + " has " + std::to_string(rows) +
                           " rows; torch's mean gives such rows more than 32 lanes (a warp), not reproduced here");
  } else if (detail::layer_norm_path(t, weight, nullptr) != detail::LayerNormPath::vectorized) {
    g.fail("alignment", std::string(name) +
                            " (or its weight) is contiguous but not 4-element aligned: aten takes its generic "
                            "RMSNorm path, not reproduced here");
  }
}

detail::GuardList check(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                        const TensorView* k_weight, double eps, const TensorView& q_out, const TensorView& k_out) {
  detail::GuardList g(kOp);
  detail::check_rms_norm_input(g, chain, q, q_weight, eps, "q", "q_weight", true);
  detail::check_rms_norm_input(g, chain, k, k_weight, eps, "k", "k_weight", true);
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  g.same_shape("k", k, q, "q");
  check_head_rows(g, chain, q, q_weight, "q");
  check_head_rows(g, chain, k, k_weight, "k");
  // Outputs: q's shape, no overlap with any input except an identical view of their own input (in place).
  detail::check_rowwise_output(g, q_out, q, {{"q", &q, true}, {"k", &k, false}}, "q");
  detail::check_rowwise_output(g, k_out, k, {{"k", &k, true}, {"q", &q, false}, {"q_out", &q_out, false}}, "k");
  for (const auto& [name, w] : {std::pair{"q_weight", q_weight}, std::pair{"k_weight", k_weight}}) {
    if (!w) continue;
    g.no_partial_overlap("q_out", q_out, name, *w, false);
    g.no_partial_overlap("k_out", k_out, name, *w, false);
  }
  return g;
}

const char* op_id(RmsNormChain chain) {
  switch (chain) {
    case RmsNormChain::torch_rms_norm: return "diffusion.qk_rmsnorm";
    case RmsNormChain::diffusers_decomposed: return "diffusion.qk_rmsnorm_native";
    case RmsNormChain::storage_dtype: return "diffusion.qk_rmsnorm_storage_dtype";
  }
  return "";
}

void host_qk_rmsnorm(const detail::QkRmsNormParams& p, Stream stream) {
  detail::rms_norm_rows_host_entry<detail::RmsNormOnly>(p.q, stream);
  detail::rms_norm_rows_host_entry<detail::RmsNormOnly>(p.k, stream);
}
DFUSE_REGISTER_ENTRY(host, "qk_rmsnorm", &host_qk_rmsnorm);
DFUSE_REGISTER_ENTRY(host, "qk_rmsnorm_native", &host_qk_rmsnorm);
DFUSE_REGISTER_ENTRY(host, "qk_rmsnorm_storage_dtype", &host_qk_rmsnorm);

}  // namespace

bool can_use_qk_rmsnorm(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                        const TensorView* k_weight, double eps, const TensorView& q_out, const TensorView& k_out,
                        std::string* why) {
  return check(chain, q, k, q_weight, k_weight, eps, q_out, k_out).answer(why);
}

void qk_rmsnorm(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                const TensorView* k_weight, double eps, const TensorView& q_out, const TensorView& k_out,
                Stream stream) {
  check(chain, q, k, q_weight, k_weight, eps, q_out, k_out).throw_if_failed();
  if (q.numel() == 0) return;
  static detail::OpEntry entries[] = {detail::OpEntry(op_id(RmsNormChain::torch_rms_norm)),
                                      detail::OpEntry(op_id(RmsNormChain::diffusers_decomposed)),
                                      detail::OpEntry(op_id(RmsNormChain::storage_dtype))};
  detail::OpEntry& entry = entries[size_t(chain)];
  const detail::QkRmsNormParams p{detail::rms_norm_rows_params(chain, q, q_weight, eps, {}, q_out),
                                  detail::rms_norm_rows_params(chain, k, k_weight, eps, {}, k_out)};
  entry.get<detail::QkRmsNormEntry>(q.device())(p, stream);
}

}  // namespace dfuse
