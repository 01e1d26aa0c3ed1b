#include "dfuse/registry/kernel_spec.h"

#include <algorithm>

#include "common/entries.h"
#include "dfuse/core/error.h"
#include "dfuse/core/runtime.h"

namespace dfuse {

namespace {
constexpr std::pair<Backend, std::string_view> kBackendNames[] = {
    {Backend::host, "host"}, {Backend::cuda, "cuda"}, {Backend::jit, "jit"}, {Backend::cublaslt, "cublaslt"}};
constexpr std::pair<uint32_t, std::string_view> kLayoutNames[] = {
    {layout_contiguous, "contiguous"},
    {layout_last_dim_contiguous, "last-dim-contiguous"},
    {layout_broadcast, "broadcast"},
    {layout_strided, "strided"},
    {layout_channels_last, "channels-last"}};
}  // namespace

std::string_view backend_name(Backend b) {
  for (auto& [v, n] : kBackendNames)
    if (v == b) return n;
  return "?";
}

Backend parse_backend(std::string_view s) {
  std::string valid;
  for (auto& [v, n] : kBackendNames) {
    if (s == n) return v;
    valid += (valid.empty() ? "" : ", ") + std::string(n);
  }
  throw InvalidArgument("unknown backend \"" + std::string(s) + "\"; valid: " + valid);
}

std::string layout_names(uint32_t layouts) {
  std::string s;
  for (auto& [bit, n] : kLayoutNames)
    if (layouts & bit) {
      if (!s.empty()) s += '|';
      s += n;
    }
  return s;
}

const Platform& Platform::detect() {
  static const Platform p = [] {
    Platform out;
    try {
      DeviceInfo info = runtime(Device::cuda(0)).info();
      out.device = DeviceKind::cuda;
      out.sm = SmVersion{info.sm_major, info.sm_minor};
    } catch (const Error&) {
      // No backend library, no driver or no device: this process runs on the host.
    }
    return out;
  }();
  return p;
}

std::string_view KernelSpec::name() const {
  auto dot = op.find('.');
  return dot == std::string::npos ? std::string_view(op) : std::string_view(op).substr(dot + 1);
}

bool KernelSpec::supports(const Platform& p) const {
  const auto& devs = capabilities.devices;
  if (!devs.empty() && std::find(devs.begin(), devs.end(), p.device) == devs.end()) return false;
  if (p.device == DeviceKind::cuda && p.sm) {
    if (capabilities.min_sm && *p.sm < *capabilities.min_sm) return false;
    if (capabilities.max_sm && *p.sm > *capabilities.max_sm) return false;
  }
  return true;
}

bool KernelSpec::supports_dtype(DType t) const {
  const auto& d = capabilities.dtypes;
  return std::find(d.begin(), d.end(), t) != d.end();
}

LoadedKernel KernelSpec::load() const { return LoadedKernel{this, detail::find_entry(backend, symbol)}; }

}  // namespace dfuse
