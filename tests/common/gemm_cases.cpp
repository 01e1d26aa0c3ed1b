#include "common/gemm_cases.h"

#include <cmath>
#include <vector>

#include "common/tensors.h"
#include "dfuse/ops/gemm.h"

namespace dfuse::test {

namespace {

std::vector<double> values(const TensorView& v) {
  const std::vector<uint8_t> bytes = gather_bytes(v);
  std::vector<double> out(size_t(v.numel()));
  for (int64_t i = 0; i < v.numel(); ++i) out[size_t(i)] = load_as_double(bytes.data(), v.dtype(), i);
  return out;
}

// Rounds a float to the storage dtype and back.
float round_to(DType t, float v) {
  uint16_t bits = 0;
  store_from_double(&bits, t, 0, double(v));
  return float(load_as_double(&bits, t, 0));
}

// aten's tanh-GELU in float.
float gelu_tanh(float x) {
  constexpr float kBeta = 0.79788458347320556641f, kKappa = 0.044715f;
  const float x3 = x * (x * x);
  return (0.5f * x) * (std::tanh(std::fma(x3, kKappa, x) * kBeta) + 1.0f);
}

}  // namespace

std::vector<LinearCase> linear_cases(LinearOp op, bool model_shapes) {
  std::vector<LinearCase> cases = {
      {.op = op, .batch = 2, .m = 7, .n = 24, .k = 40},
      {.op = op, .batch = 0, .m = 5, .n = 16, .k = 64, .x_row_pad = 8},
      {.op = op, .batch = 1, .m = 3, .n = 40, .k = 256, .bias = false},
      {.op = op, .batch = 3, .m = 1, .n = 8, .k = 8, .seed = 9},
      {.op = op, .batch = 2, .m = 5, .n = 48, .k = 32, .out_rows_before = 3, .out_rows_after = 2, .seed = 4},
      // One problem (shapes and strides) twice: out at the buffer's start, then one 272-byte row in,
      // only 16-byte aligned; an algorithm cached for the first call must not be reused for the second.
      {.op = op, .batch = 1, .m = 32, .n = 136, .k = 64, .out_rows_after = 1, .seed = 7},
      {.op = op, .batch = 1, .m = 32, .n = 136, .k = 64, .out_rows_before = 1, .seed = 8},
  };
  if (model_shapes) {
    if (op == LinearOp::linear_gelu_tanh)
      cases.push_back({.op = op, .batch = 1, .m = 64, .n = 1536, .k = 3072, .seed = 5});
    else  // 3 x 3072 added Q/K/V outputs of 16 text tokens into a joint buffer with 32 image rows after them
      cases.push_back({.op = op, .batch = 1, .m = 16, .n = 9216, .k = 3072, .out_rows_after = 32, .seed = 6});
  }
  return cases;
}

std::string check_linear_op(Device d, DType t, const LinearCase& c) {
  const bool flat = c.batch == 0;
  const int64_t batches = flat ? 1 : c.batch;
  const int64_t rows_total = c.out_rows_before + c.m + c.out_rows_after;
  std::vector<int64_t> x_sizes = flat ? std::vector<int64_t>{c.m, c.k} : std::vector<int64_t>{c.batch, c.m, c.k};
  std::vector<int64_t> x_strides = flat ? std::vector<int64_t>{c.k + c.x_row_pad, 1}
                                        : std::vector<int64_t>{c.m * (c.k + c.x_row_pad), c.k + c.x_row_pad, 1};
  const TestTensor x = random_tensor(d, t, x_sizes, x_strides, 0, {c.seed, 1.0});
  const TestTensor w = random_tensor(d, t, {c.n, c.k}, {}, 0, {c.seed + 1, 1.0 / std::sqrt(double(c.k))});
  const TestTensor b = random_tensor(d, t, {c.n}, {}, 0, {c.seed + 2, 0.5});
  // The destination buffer [batches, rows_total, n], all ones-bytes; out is its rows [before, before + m).
  const TestTensor buffer = poisoned_tensor(d, t, {batches, rows_total, c.n}, 0xFF);
  std::vector<int64_t> out_sizes = x_sizes;
  out_sizes.back() = c.n;
  std::vector<int64_t> out_strides = flat ? std::vector<int64_t>{c.n, 1} : std::vector<int64_t>{rows_total * c.n, c.n, 1};
  const TensorView out(static_cast<char*>(buffer.view.data()) + c.out_rows_before * c.n * int64_t(dtype_size(t)), t,
                       out_sizes.data(), out_strides.data(), int(out_sizes.size()), d);
  const TensorView* bias = c.bias ? &b.view : nullptr;
  if (c.op == LinearOp::linear_gelu_tanh)
    linear_gelu_tanh(x.view, w.view, bias, out);
  else
    qkv_projection_into(x.view, w.view, bias, out);

  const std::vector<double> xs = values(x.view), ws = values(w.view), bs = values(b.view);
  const std::vector<uint8_t> all = gather_bytes(buffer.view);
  int64_t bad = 0, untouched_written = 0;
  std::string worst;
  double worst_excess = 0;
  for (int64_t bt = 0; bt < batches; ++bt) {
    for (int64_t r = 0; r < rows_total; ++r) {
      const bool in_out = r >= c.out_rows_before && r < c.out_rows_before + c.m;
      for (int64_t n = 0; n < c.n; ++n) {
        const int64_t flat_index = (bt * rows_total + r) * c.n + n;
        if (!in_out) {
          untouched_written += all[size_t(flat_index) * 2] != 0xFF || all[size_t(flat_index) * 2 + 1] != 0xFF;
          continue;
        }
        const int64_t m = bt * c.m + (r - c.out_rows_before);
        float h = 0.0f;
        double a = 0.0;  // the sum of the products' magnitudes: the scale of any reordering of the sum
        for (int64_t k = 0; k < c.k; ++k) {
          h += float(xs[size_t(m * c.k + k)]) * float(ws[size_t(n * c.k + k)]);
          a += std::fabs(xs[size_t(m * c.k + k)] * ws[size_t(n * c.k + k)]);
        }
        if (c.bias) {
          h += float(bs[size_t(n)]);
          a += std::fabs(bs[size_t(n)]);
        }
        const float linear = round_to(t, h);
        const double eager = c.op == LinearOp::linear_gelu_tanh ? round_to(t, gelu_tanh(linear)) : linear;
        const double fused = load_as_double(all.data(), t, flat_index);
        const double tiny = std::ldexp(1.0, t == DType::f16 ? -24 : -133);  // the smallest subnormal
        const double bound = std::ldexp(std::fabs(eager), -7) + std::ldexp(std::fabs(double(h)), -8) +
                             std::ldexp(3.0 * double(c.k) * a, -24) + tiny;
        const double excess = std::fabs(fused - eager) - bound;
        if (!(excess <= 0)) {
          ++bad;
          if (!(excess <= worst_excess)) {
            worst_excess = excess;
            worst = "out[" + std::to_string(bt) + ", " + std::to_string(r - c.out_rows_before) + ", " +
                    std::to_string(n) + "] = " + std::to_string(fused) + ", eager " + std::to_string(eager) + ", h " +
                    std::to_string(h);
          }
        }
      }
    }
  }
  std::string problems;
  if (bad > 0)
    problems = std::to_string(bad) + " of " + std::to_string(batches * c.m * c.n) +
               " elements outside the bound; worst " + worst;
  if (untouched_written > 0)
    problems += (problems.empty() ? "" : "; ") + std::to_string(untouched_written) + " elements outside out written";
  return problems;
}

}  // namespace dfuse::test
