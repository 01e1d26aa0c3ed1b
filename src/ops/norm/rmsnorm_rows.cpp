// Guards and parameters shared by the RMSNorm + epilogue ops.
#include "ops/norm/rmsnorm_rows.h"

#include <cmath>
#include <string>

#include "common/rowwise_guards.h"

namespace dfuse {

const char* rms_norm_chain_name(RmsNormChain chain) {
  switch (chain) {
    case RmsNormChain::torch_rms_norm: return "torch_rms_norm";
    case RmsNormChain::diffusers_decomposed: return "diffusers_decomposed";
    case RmsNormChain::storage_dtype: return "storage_dtype";
  }
  return "?";
}

namespace detail {

namespace {
// input_vec_size of the chain's mean: its input is float squares, or squares in x's dtype.
int mean_vec(RmsNormChain chain, DType t) {
  return chain == RmsNormChain::storage_dtype ? int(16 / dtype_size(t)) : 4;
}
}  // namespace

void check_rms_norm_input(GuardList& g, RmsNormChain chain, const TensorView& x, const TensorView* weight,
                          double eps, const char* x_name, const char* weight_name, bool storage_dtype_supported) {
  const std::string xn = x_name, wn = weight_name;
  if (chain == RmsNormChain::storage_dtype && !storage_dtype_supported)
    g.fail("chain", "this op replaces F.rms_norm or the diffusers RMSNorm chain, not the storage_dtype chain");
  check_rowwise_input(g, x_name, x);
  if (!g.ok()) return;
  const int64_t d = x.size(-1);
  if (d > kRmsNormMaxCols)
    g.fail("extent", xn + " has rows of " + std::to_string(d) + " elements; at most " +
                         std::to_string(kRmsNormMaxCols) + " are supported");
  if (weight) {
    g.same_dtype(weight_name, *weight, x, x_name);
    g.same_device(weight_name, *weight, x, x_name);
    g.not_null(weight_name, *weight);
    if (g.ok() && (weight->dim() != 1 || weight->size(0) != d))
      g.fail("shape", wn + " must be [" + std::to_string(d) + "] (" + xn + "'s last dim), got " + shape_str(*weight));
    if (g.ok() && weight->stride(0) != 1 && d > 1)
      g.fail("layout", wn + " must be contiguous, got stride " + std::to_string(weight->stride(0)));
  }
  if (!(std::isfinite(eps) && eps >= 0.0))
    g.fail("eps", "eps must be finite and non-negative, got " + std::to_string(eps));
  if (g.ok() && chain != RmsNormChain::torch_rms_norm && x.numel() > 0) {
    const int64_t rows = x.numel() / d;
    if (mean_reduce_config(rows, d, mean_vec(chain, x.dtype())).split)
      g.fail("extent", xn + " " + shape_str(x) +
                           ": torch's mean over rows this long splits each row across warps, an order "
                           "not reproduced");
  }
}

RmsNormRowsParams rms_norm_rows_params(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                       std::initializer_list<const TensorView*> operands, const TensorView& out) {
  RmsNormRowsParams p;
  p.rows.dtype = x.dtype();
  p.rows.device = x.device().index;
  p.rows.geom = row_geometry(x);
  if (operands.size() + 1 > size_t(kRowwiseMaxInputs))
    throw InvalidArgument("rms_norm_rows_params: more than 3 operands");
  p.rows.in[0] = row_operand(x, x);
  int k = 1;
  for (const TensorView* t : operands) p.rows.in[k++] = row_operand(*t, x);
  p.rows.out = row_operand(out, x);
  p.weight = weight ? weight->data() : nullptr;
  p.chain = chain;
  p.eps = float(eps);
  if (chain == RmsNormChain::torch_rms_norm) {
    p.path = layer_norm_path(x, weight, nullptr);
  } else if (x.numel() > 0) {
    const int64_t rows = p.rows.geom.rows(), d = p.rows.geom.cols;
    p.mean = mean_reduce_config(rows, d, mean_vec(chain, x.dtype()));
    p.mean_factor = mean_factor(rows, d);
  }
  return p;
}

}  // namespace detail
}  // namespace dfuse
