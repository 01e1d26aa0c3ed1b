// diffusion.linear_gelu_tanh — replaces `F.gelu(F.linear(x, weight, bias), approximate="tanh")`
// (a GEMM whose [tokens, 4*dim] output is written, then read back by the GELU kernel). Contract:
// close, tier extra-high (bound in dfuse/ops/gemm.h). The CUDA kernel is one cuBLASLt matmul with
// the GELU_BIAS epilogue (cuda/cublaslt_linear.cu); the host kernel is the family's reference
// (ops/gemm/linear.h). Guards, dispatch.
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/gemm.h"
#include "ops/gemm/linear.h"

namespace dfuse {

namespace {

detail::GuardList check(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out) {
  detail::GuardList g("linear_gelu_tanh");
  detail::check_linear(g, x, weight, bias, out);
  return g;
}

DFUSE_REGISTER_ENTRY(host, "linear_gelu_tanh", &detail::linear_host_entry);

}  // namespace

bool can_use_linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias,
                              const TensorView& out, std::string* why) {
  return check(x, weight, bias, out).answer(why);
}

void linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out,
                      Stream stream) {
  check(x, weight, bias, out).throw_if_failed();
  if (out.numel() == 0) return;
  static detail::OpEntry entry("diffusion.linear_gelu_tanh");
  entry.get<detail::LinearEntry>(x.device())(
      detail::linear_params(x, weight, bias, out, detail::LinearEpilogue::gelu_tanh), stream);
}

}  // namespace dfuse
