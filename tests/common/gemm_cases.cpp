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

std::string check_linear_gelu_tanh(Device d, DType t, const LinearGeluCase& c) {
  const bool flat = c.batch == 0;
  const int64_t rows = flat ? c.m : c.batch * c.m;
  std::vector<int64_t> x_sizes = flat ? std::vector<int64_t>{c.m, c.k} : std::vector<int64_t>{c.batch, c.m, c.k};
  std::vector<int64_t> x_strides = flat ? std::vector<int64_t>{c.k + c.x_row_pad, 1} : std::vector<int64_t>{};
  std::vector<int64_t> out_sizes = x_sizes;
  out_sizes.back() = c.n;
  const TestTensor x = random_tensor(d, t, x_sizes, x_strides, 0, {c.seed, 1.0});
  const TestTensor w = random_tensor(d, t, {c.n, c.k}, {}, 0, {c.seed + 1, 1.0 / std::sqrt(double(c.k))});
  const TestTensor b = random_tensor(d, t, {c.n}, {}, 0, {c.seed + 2, 0.5});
  const TestTensor out = poisoned_tensor(d, t, out_sizes, 0xFF);
  linear_gelu_tanh(x.view, w.view, c.bias ? &b.view : nullptr, out.view);

  const std::vector<double> xs = values(x.view), ws = values(w.view), bs = values(b.view), got = values(out.view);
  int64_t bad = 0;
  std::string worst;
  double worst_excess = 0;
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < c.n; ++n) {
      float h = 0.0f;
      for (int64_t k = 0; k < c.k; ++k) h += float(xs[size_t(m * c.k + k)]) * float(ws[size_t(n * c.k + k)]);
      if (c.bias) h += float(bs[size_t(n)]);
      const double eager = round_to(t, gelu_tanh(round_to(t, h)));
      const double fused = got[size_t(m * c.n + n)];
      const double bound = std::ldexp(std::fabs(eager), -7) + std::ldexp(std::fabs(double(h)), -8);
      const double excess = std::fabs(fused - eager) - bound;
      if (!(excess <= 0)) {
        ++bad;
        if (!(excess <= worst_excess)) {
          worst_excess = excess;
          worst = "out[" + std::to_string(m) + ", " + std::to_string(n) + "] = " + std::to_string(fused) +
                  ", eager " + std::to_string(eager) + ", h " + std::to_string(h);
        }
      }
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(rows * c.n) + " elements outside the bound; worst " + worst;
}

}  // namespace dfuse::test
