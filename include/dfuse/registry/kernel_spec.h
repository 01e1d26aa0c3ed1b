// dfuse registry: KernelSpec, the metadata that describes one implementation of one op.
// Registration is metadata only: building, listing and selecting specs loads no kernel and
// needs no GPU. KernelSpec::load() is the one place a backend is resolved.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/policy/contract.h"
#include "dfuse/policy/quality.h"

namespace dfuse {

// Backends are named by provenance, not by device.
enum class Backend : uint8_t {
  host,      // portable C++ in the core library
  cuda,      // hand-written CUDA C++, compiled ahead of time into the CUDA backend library
  jit,       // NVRTC specializations (reserved)
  cublaslt,  // cuBLASLt GEMM epilogues (reserved)
};
std::string_view backend_name(Backend b);
Backend parse_backend(std::string_view s);  // throws InvalidArgument listing valid names

// Memory layouts an implementation accepts, as a bit set.
enum Layout : uint32_t {
  layout_contiguous = 1u << 0,        // dense row-major
  layout_last_dim_contiguous = 1u << 1,  // rows with arbitrary outer strides (chunk(6) views)
  layout_broadcast = 1u << 2,         // zero strides (per-batch / per-frame operands)
  layout_strided = 1u << 3,           // any strides
  layout_channels_last = 1u << 4,
};
std::string layout_names(uint32_t layouts);  // "contiguous|last-dim-contiguous"

struct SmVersion {
  int major = 0;
  int minor = 0;
  auto operator<=>(const SmVersion&) const = default;
};

// What a platform must provide for an implementation to run there.
struct Capabilities {
  std::vector<DeviceKind> devices;  // empty: runs anywhere
  std::optional<SmVersion> min_sm;  // inclusive; CUDA only
  std::optional<SmVersion> max_sm;  // inclusive; CUDA only
  std::vector<DType> dtypes;
  uint32_t layouts = layout_contiguous;
};

// The platform the process runs on (what select_kernel filters by).
struct Platform {
  DeviceKind device = DeviceKind::host;
  std::optional<SmVersion> sm;  // set for CUDA
  // Detected once per process: CUDA when the CUDA backend loads and reports a device, else
  // host. Never throws.
  static const Platform& detect();
};

struct LoadedKernel;

struct KernelSpec {
  std::string op;       // "diffusion.modulate_scale_shift"
  Backend backend = Backend::host;
  std::string symbol;   // entry point in the backend's symbol table
  Capabilities capabilities;
  Contract contract = Contract::bit_exact;
  Quality tier = Quality::lossless;  // lowest quality tier at which it is mounted
  std::string replaces;              // the eager chain, as model code writes it
  std::vector<std::string> models;   // models that use it
  std::string family;                // "adaln", "normalization", "rope", ...
  std::string description;

  std::string_view name() const;  // op without the "diffusion." group
  bool supports(const Platform& p) const;
  bool supports_dtype(DType t) const;
  // Resolves the entry point: host symbols from the core library, CUDA symbols from the CUDA
  // backend library (loaded on first use). Throws BackendUnavailable or SelectionError.
  LoadedKernel load() const;
};

struct LoadedKernel {
  const KernelSpec* spec = nullptr;
  void* entry = nullptr;
  template <typename Fn>
  Fn as() const {
    return reinterpret_cast<Fn>(entry);
  }
};

}  // namespace dfuse
