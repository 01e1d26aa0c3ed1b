// diffusion.flux2_strided_qknorm_rope — FLUX.2 (Klein) single-stream attention's norm_q/norm_k
// (torch.nn.RMSNorm: F.rms_norm) on q and k read as strided views of the packed QKV + MLP
// projection, each result rounded to the storage dtype, then diffusers' interleaved-pair RoPE
// (rope_interleaved_pairs' chain), into q_out and k_out. Contract: bit-exact against that chain
// (dfuse/ops/rope.h). The arithmetic and kernels are the QK-norm + RoPE rows
// (ops/rope/qknorm_rope_rows.h) with pairing interleaved_pairs and round_norm; q and k are the two
// parts of one launch. This file: guards, dispatch and the host entry (the CUDA entry:
// ops/rope/qknorm_rope_rows.cu).
#include <initializer_list>
#include <string>
#include <tuple>

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/qknorm_rope_rows.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "flux2_strided_qknorm_rope";
constexpr auto kChain = RmsNormChain::torch_rms_norm;  // torch.nn.RMSNorm
constexpr auto kPairing = detail::RopePairing::interleaved_pairs;

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                        const TensorView* k_weight, double eps, const TensorView& cos, const TensorView& sin,
                        const TensorView& q_out, const TensorView& k_out) {
  detail::GuardList g(kOp);
  detail::check_qknorm_rope_input(g, kChain, "q", q, q_weight, "q_weight", eps, cos, sin, RopeMath::fp32_opmath,
                                  kPairing);
  detail::check_qknorm_rope_input(g, kChain, "k", k, k_weight, "k_weight", eps, cos, sin, RopeMath::fp32_opmath,
                                  kPairing);
  if (!g.ok()) return g;
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  if (g.ok() && k.size(-1) != q.size(-1))
    g.fail("shape", "k's head dim must be q's " + std::to_string(q.size(-1)) + ", got " + std::to_string(k.size(-1)));
  // Each output may be its own input (in place), nothing else: no output element is read by the
  // other head's rows or the tables.
  for (const auto& [out_name, out, x_name, x] :
       {std::tuple{"q_out", &q_out, "q", &q}, std::tuple{"k_out", &k_out, "k", &k}}) {
    std::initializer_list<detail::NamedInput> inputs = {
        {"q", &q, x == &q}, {"k", &k, x == &k}, {"cos", &cos, false}, {"sin", &sin, false}};
    detail::check_rowwise_output(g, *out, *x, inputs, x_name);
    if (q_weight) g.no_partial_overlap(out_name, *out, "q_weight", *q_weight, false);
    if (k_weight) g.no_partial_overlap(out_name, *out, "k_weight", *k_weight, false);
  }
  g.no_partial_overlap("k_out", k_out, "q_out", q_out, false);
  return g;
}

void host_entry(const detail::QkNormRopeLaunch& launch, Stream) { detail::qknorm_rope_host(launch); }

DFUSE_REGISTER_ENTRY(host, "flux2_strided_qknorm_rope", &host_entry);

}  // namespace

bool can_use_flux2_strided_qknorm_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                                       const TensorView* k_weight, double eps, const TensorView& cos,
                                       const TensorView& sin, const TensorView& q_out, const TensorView& k_out,
                                       std::string* why) {
  return check(q, k, q_weight, k_weight, eps, cos, sin, q_out, k_out).answer(why);
}

void flux2_strided_qknorm_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                               const TensorView* k_weight, double eps, const TensorView& cos, const TensorView& sin,
                               const TensorView& q_out, const TensorView& k_out, Stream stream) {
  check(q, k, q_weight, k_weight, eps, cos, sin, q_out, k_out).throw_if_failed();
  detail::QkNormRopeLaunch launch;
  for (const auto& [x, weight, out] : {std::tuple{&q, q_weight, &q_out}, std::tuple{&k, k_weight, &k_out}})
    if (x->numel() > 0)
      launch.part[launch.parts++] =
          detail::qknorm_rope_rows(kChain, *x, weight, eps, cos, sin, RopeMath::fp32_opmath, kPairing, true, *out);
  if (launch.parts == 0) return;
  static detail::OpEntry entry("diffusion.flux2_strided_qknorm_rope");
  entry.get<detail::QkNormRopeEntry>(q.device())(launch, stream);
}

}  // namespace dfuse
