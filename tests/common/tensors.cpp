#include "common/tensors.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "dfuse/policy/gate.h"

namespace dfuse::test {

namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform(uint64_t& s) { return (double(splitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

int64_t extent_elems(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset) {
  int64_t hi = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return offset;
    hi += (sizes[d] - 1) * strides[d];
  }
  return hi + 1;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    st[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

}  // namespace

TestTensor random_tensor(Device d, DType t, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset,
                         RandomSpec r, int64_t storage_elems) {
  if (strides.empty()) strides = contiguous_strides(sizes);
  const int64_t n = std::max(storage_elems, extent_elems(sizes, strides, offset));
  const size_t es = dtype_size(t);
  std::vector<uint8_t> host(size_t(n) * es);
  uint64_t s = r.seed * 0x2545F4914F6CDD1Dull + 7;
  for (int64_t i = 0; i < n; ++i) {
    if (r.every_bit_pattern && es == 2) {
      const uint16_t bits = uint16_t(i);
      std::memcpy(host.data() + size_t(i) * es, &bits, es);
      continue;
    }
    double v;
    if (r.specials && (splitmix(s) % 97) == 0) {
      static const double kSpecial[] = {std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(), -0.0, 1e-40, -3e38};
      v = kSpecial[splitmix(s) % 6];
    } else {
      // Uniform in (-2a, 2a): cheap enough for model-size tensors, and never exactly zero.
      v = (uniform(s) * 4.0 - 2.0) * r.amplitude;
      if (v == 0.0) v = r.amplitude * 0.5;
    }
    store_from_double(host.data(), t, i, v);
  }
  TestTensor out{DeviceBuffer(d, host.size()), {}};
  runtime(d).copy_to_device(out.storage.data(), host.data(), host.size());
  out.view = TensorView(static_cast<char*>(out.storage.data()) + offset * int64_t(es), t, sizes.data(),
                        strides.data(), int(sizes.size()), d);
  return out;
}

TestTensor poisoned_tensor(Device d, DType t, std::vector<int64_t> sizes, uint8_t pattern) {
  auto strides = contiguous_strides(sizes);
  const int64_t n = extent_elems(sizes, strides, 0);
  std::vector<uint8_t> host(size_t(n) * dtype_size(t), pattern);
  TestTensor out{DeviceBuffer(d, host.size()), {}};
  runtime(d).copy_to_device(out.storage.data(), host.data(), host.size());
  out.view = TensorView(out.storage.data(), t, sizes.data(), strides.data(), int(sizes.size()), d);
  return out;
}

std::vector<uint8_t> gather_bytes(const TensorView& v) {
  const size_t es = dtype_size(v.dtype());
  auto [lo, hi] = v.byte_extent();
  std::vector<uint8_t> storage(size_t(hi - lo + 1));
  const char* base = static_cast<const char*>(v.data()) + lo;
  if (v.numel() > 0) runtime(v.device()).copy_to_host(storage.data(), base, storage.size());
  std::vector<uint8_t> out(size_t(v.numel()) * es);
  std::vector<int64_t> idx(size_t(v.dim()), 0);
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < v.dim(); ++d) off += idx[size_t(d)] * v.stride(d);
    std::memcpy(out.data() + size_t(i) * es, storage.data() + (off * int64_t(es) - lo), es);
    for (int d = v.dim() - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < v.size(d)) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

std::string compare_bits(const TensorView& fused, const TensorView& eager, bool any_nan_f32) {
  auto a = gather_bytes(fused), b = gather_bytes(eager);
  if (a.size() != b.size()) return "element counts differ";
  if (any_nan_f32 && fused.dtype() == DType::f32) {
    // Canonicalize every NaN in both buffers before the bitwise comparison.
    for (auto* buf : {&a, &b})
      for (size_t i = 0; i + 4 <= buf->size(); i += 4) {
        float f;
        std::memcpy(&f, buf->data() + i, 4);
        if (std::isnan(f)) std::memcpy(buf->data() + i, "\xff\xff\xff\x7f", 4);
      }
  }
  return describe_bitwise_mismatch(a.data(), b.data(), fused.dtype(), fused.numel());
}

std::vector<double> element_values(const TensorView& v) {
  const auto bytes = gather_bytes(v);
  std::vector<double> out(size_t(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_double(bytes.data(), v.dtype(), int64_t(i));
  return out;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -24);
  }
}

double half_min_subnormal(DType t) {
  switch (t) {
    case DType::bf16: return std::ldexp(1.0, -134);
    case DType::f16: return std::ldexp(1.0, -25);
    default: return std::ldexp(1.0, -150);
  }
}

bool fully_written(const TensorView& v, uint8_t pattern) {
  auto bytes = gather_bytes(v);
  const size_t es = dtype_size(v.dtype());
  for (size_t i = 0; i < bytes.size(); i += es) {
    bool all = true;
    for (size_t k = 0; k < es; ++k) all = all && bytes[i + k] == pattern;
    if (all) return false;
  }
  return true;
}

bool small_shapes_only() {
  const char* e = std::getenv("DFUSE_GPU_TEST_SMALL");
  return e && *e && std::string(e) != "0";
}

}  // namespace dfuse::test
