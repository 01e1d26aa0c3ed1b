// Parameters and shared guards of the norm + epilogue ops with fp32 internals.
#include "ops/norm/norm_fp32_rows.h"

#include <string>

#include "common/rowwise_guards.h"

namespace dfuse::detail {

NormFp32RowsParams norm_fp32_rows_params(Fp32NormStats stats, const TensorView& x, const TensorView* weight,
                                         const TensorView* bias, double eps, const TensorView& a, const TensorView& b,
                                         const TensorView& out) {
  NormFp32RowsParams p;
  p.rows = rowwise_params(x, {&x, &a, &b}, out);
  p.weight = weight ? weight->data() : nullptr;
  p.bias = bias ? bias->data() : nullptr;
  p.stats = stats;
  p.eps = float(eps);
  if (stats == Fp32NormStats::mean_of_squares) {
    if (x.numel() > 0) {
      const int64_t rows = p.rows.geom.rows(), d = p.rows.geom.cols;
      p.mean = mean_reduce_config(rows, d);  // a float tensor: 4-element vectors
      p.mean_factor = mean_factor(rows, d);
    }
  } else {
    p.path = layer_norm_path(x, weight, bias);
  }
  return p;
}

void check_norm_affine(GuardList& g, const char* name, const TensorView& t, const TensorView& x, const char* x_name) {
  g.same_dtype(name, t, x, x_name);
  g.same_device(name, t, x, x_name);
  g.not_null(name, t);
  if (!g.ok()) return;
  const int64_t d = x.size(-1);
  if (t.dim() != 1 || t.size(0) != d)
    g.fail("shape", std::string(name) + " must be [" + std::to_string(d) + "] (" + x_name + "'s last dim), got " +
                        shape_str(t));
  else if (t.stride(0) != 1 && d > 1)
    g.fail("layout", std::string(name) + " must be contiguous, got stride " + std::to_string(t.stride(0)));
}

}  // namespace dfuse::detail
