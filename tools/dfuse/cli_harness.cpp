#include "dfuse/cli_harness.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <thread>

#include "dfuse/core/error.h"
#include "dfuse/registry/registry.h"

namespace dfuse::cli {

std::vector<std::string> select_ops(const std::optional<std::string>& name) {
  std::vector<std::string> ops = Registry::global().ops();
  if (!name) return ops;
  for (const auto& op : ops) {
    if (op == *name || short_op_name(op) == *name) return {op};
  }
  std::string registered;
  for (const auto& op : ops) registered += (registered.empty() ? "" : ", ") + op;
  throw InvalidArgument("unknown op \"" + *name + "\"; registered: " + registered);
}

bool op_runs_on(const std::string& op, Device device) {
  // The detected GPU for CUDA; the host platform otherwise.
  const Platform platform = device.is_cuda() ? Platform::detect() : Platform{};
  auto specs = Registry::global().specs(op);
  return std::any_of(specs.begin(), specs.end(), [&](const KernelSpec& s) { return s.supports(platform); });
}

std::string short_op_name(const std::string& op) {
  auto dot = op.find('.');
  return dot == std::string::npos ? op : op.substr(dot + 1);
}

namespace {

// splitmix64's finalizer: consecutive inputs give independent-looking outputs, so element i's
// value depends only on (seed, i) and the buffer can be filled in parallel.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct FloatLimits {
  double smallest_subnormal, largest_finite;
};

FloatLimits limits_of(DType t) {
  switch (t) {
    case DType::bf16:
      return {std::ldexp(1.0, -133), std::ldexp(255.0, 120)};  // 0x0001, 0x7F7F
    case DType::f16:
      return {std::ldexp(1.0, -24), 65504.0};
    case DType::f32:
      return {std::ldexp(1.0, -149), double(FLT_MAX)};
    default:
      return {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max()};
  }
}

double random_value(uint64_t h, const FloatLimits& limits, Values values) {
  if (values == Values::specials && (h >> 56) < 4) {
    const double inf = std::numeric_limits<double>::infinity();
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                               inf,
                               -inf,
                               0.0,
                               -0.0,
                               limits.smallest_subnormal,
                               limits.largest_finite};
    return specials[(h >> 8) % std::size(specials)];
  }
  const double sign = (h & 1) ? -1.0 : 1.0;
  const int exponent = int((h >> 1) % 17) - 12;
  const double mantissa = 1.0 + std::ldexp(double(h >> 12), -52);
  return sign * std::ldexp(mantissa, exponent);
}

}  // namespace

void fill_random(void* host, DType dtype, int64_t elements, uint64_t seed, Values values) {
  const FloatLimits limits = limits_of(dtype);
  const int64_t per_thread_minimum = int64_t(1) << 20;
  const int64_t threads = std::clamp<int64_t>(elements / per_thread_minimum, 1,
                                              std::max(1u, std::thread::hardware_concurrency()));
  const int64_t chunk = (elements + threads - 1) / threads;
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      store_from_double(host, dtype, i,
                        random_value(mix(seed + uint64_t(i) * 0x9E3779B97F4A7C15ull), limits, values));
    }
  };
  std::vector<std::jthread> workers;
  for (int64_t t = 1; t < threads; ++t)
    workers.emplace_back(fill, t * chunk, std::min(elements, (t + 1) * chunk));
  fill(0, std::min(elements, chunk));
}

namespace {

bool both_f32_nan(const unsigned char* a, const unsigned char* e) {
  float x, y;
  std::memcpy(&x, a, 4);
  std::memcpy(&y, e, 4);
  return std::isnan(x) && std::isnan(y);
}

}  // namespace

BitComparison compare_bits(const void* actual, const void* expected, int64_t elements, size_t element_bytes,
                           bool any_nan_f32) {
  const auto* a = static_cast<const unsigned char*>(actual);
  const auto* e = static_cast<const unsigned char*>(expected);
  BitComparison result;
  // Whole blocks first: outputs are large and almost always equal.
  const int64_t block = 4096;
  for (int64_t begin = 0; begin < elements; begin += block) {
    const int64_t end = std::min(elements, begin + block);
    const size_t offset = size_t(begin) * element_bytes;
    if (std::memcmp(a + offset, e + offset, size_t(end - begin) * element_bytes) == 0) continue;
    for (int64_t i = begin; i < end; ++i) {
      const unsigned char* ai = a + i * element_bytes;
      const unsigned char* ei = e + i * element_bytes;
      const bool nan_pair = any_nan_f32 && element_bytes == 4 && both_f32_nan(ai, ei);
      if (std::memcmp(ai, ei, element_bytes) != 0 && !nan_pair) {
        if (result.first_mismatch < 0) result.first_mismatch = i;
        ++result.mismatches;
      }
    }
  }
  return result;
}

void sort_rows(void* data, int64_t elements, int64_t row_elements, size_t element_bytes) {
  auto* bytes = static_cast<unsigned char*>(data);
  const size_t row_bytes = static_cast<size_t>(row_elements) * element_bytes;
  std::vector<unsigned char> row(row_bytes);
  std::vector<size_t> order(static_cast<size_t>(row_elements));
  const auto element_less = [&](size_t a, size_t b) {
    return std::memcmp(&row[a * element_bytes], &row[b * element_bytes], element_bytes) < 0;
  };
  for (int64_t begin = 0; begin < elements; begin += row_elements) {
    unsigned char* target = bytes + begin * int64_t(element_bytes);
    std::memcpy(row.data(), target, row_bytes);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), element_less);
    for (size_t i = 0; i < order.size(); ++i)
      std::memcpy(target + i * element_bytes, &row[order[i] * element_bytes], element_bytes);
  }
}

int64_t count_poisoned(const void* data, int64_t elements, size_t element_bytes) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  int64_t count = 0;
  for (int64_t i = 0; i < elements; ++i) {
    const unsigned char* element = bytes + i * element_bytes;
    count += std::all_of(element, element + element_bytes, [](unsigned char b) { return b == kPoisonByte; });
  }
  return count;
}

std::string element_hex(const void* data, int64_t index, size_t element_bytes) {
  constexpr char kHex[] = "0123456789abcdef";
  const auto* element = static_cast<const unsigned char*>(data) + index * element_bytes;
  std::string text = "0x";
  for (size_t b = element_bytes; b-- > 0;) {
    text += kHex[element[b] >> 4];
    text += kHex[element[b] & 0xF];
  }
  return text;
}

std::vector<TensorView> input_views(const Case& c, const std::vector<DeviceBuffer>& storage) {
  std::vector<TensorView> views;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const OperandSpec& operand = c.inputs[k];
    auto* base = static_cast<unsigned char*>(storage[k].data());
    const DType dtype = operand.dtype_in(c.dtype);
    views.emplace_back(base + operand.offset * int64_t(dtype_size(dtype)), dtype, operand.sizes.data(),
                       operand.strides.data(), int(operand.sizes.size()), storage[k].device());
  }
  return views;
}

TensorView output_view(const Case& c, const DeviceBuffer& buffer) {
  return TensorView::contiguous(buffer.data(), c.output_dtype(), c.out_sizes.data(), int(c.out_sizes.size()),
                                buffer.device());
}

DeviceInputs upload_inputs(const Case& c, Device device, uint64_t seed) {
  DeviceInputs inputs;
  Runtime& rt = runtime(device);
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const DType dtype = c.inputs[k].dtype_in(c.dtype);
    const size_t bytes = size_t(c.inputs[k].storage_elements) * dtype_size(dtype);
    auto host = std::make_unique_for_overwrite<unsigned char[]>(bytes);
    if (const auto& values = c.inputs[k].index_values) {
      if (int64_t(values->size()) != c.inputs[k].storage_elements)
        throw InvalidArgument("operand " + c.inputs[k].name + ": " + std::to_string(values->size()) +
                              " index values for " + std::to_string(c.inputs[k].storage_elements) +
                              " storage elements");
      for (size_t i = 0; i < values->size(); ++i)
        store_from_double(host.get(), dtype, int64_t(i), double((*values)[i]));
    } else {
      fill_random(host.get(), dtype, c.inputs[k].storage_elements, mix(seed + k), c.values);
    }
    DeviceBuffer buffer(device, bytes);
    rt.copy_to_device(buffer.data(), host.get(), bytes);
    inputs.storage.push_back(std::move(buffer));
  }
  inputs.views = input_views(c, inputs.storage);
  return inputs;
}

std::vector<Case> collect_cases(const std::optional<std::string>& name, Device device, const CaseRequest& request,
                                std::vector<std::string>& notes) {
  std::vector<Case> cases;
  for (const auto& op : select_ops(name)) {
    const CaseGenerator generate = find_cases(op);
    if (!generate) {
      notes.push_back(op + ": no cases");
    } else if (!op_runs_on(op, device)) {
      notes.push_back(op + ": no spec runs on " + device.str());
    } else {
      for (auto& c : generate(request)) cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace dfuse::cli
