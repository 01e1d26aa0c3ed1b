// Backend entry points. Each kernel entry (host kernels in libdfuse, CUDA kernels in
// libdfuse_cuda) registers itself by name in one process-wide table at load time; a
// KernelSpec's `symbol` names its entry. Looking up a CUDA entry loads the CUDA backend first.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "dfuse/core/device.h"
#include "dfuse/core/runtime.h"
#include "dfuse/registry/kernel_spec.h"

namespace dfuse::detail {

// Adds an entry; called from static initializers (DFUSE_REGISTER_ENTRY).
void register_entry(Backend backend, const char* symbol, void* entry);
// Finds an entry, loading the CUDA backend if needed. Throws BackendUnavailable when the
// backend cannot load, SelectionError when the symbol is missing.
void* find_entry(Backend backend, std::string_view symbol);

// The CUDA backend registers its runtime factory the same way.
using RuntimeFactory = Runtime* (*)(int device_index);
void register_cuda_runtime(RuntimeFactory factory);
// Creates the CUDA runtime of a device through the registered factory (loads the backend).
Runtime* make_cuda_runtime(int device_index);

// Loads the CUDA backend library once; throws BackendUnavailable with the reason.
void ensure_cuda_backend();

// Host kernels for host tensors, CUDA kernels for CUDA tensors.
Backend backend_for(Device d);

// Per-op cache of resolved entries (one per backend), so that a call pays one atomic load.
class OpEntry {
 public:
  explicit OpEntry(const char* op) : op_(op) {}
  template <typename Fn>
  Fn get(Device d) {
    return reinterpret_cast<Fn>(resolve(backend_for(d)));
  }

 private:
  void* resolve(Backend b);
  const char* op_;
  std::atomic<void*> cache_[4] = {};
};

struct EntryRegistration {
  EntryRegistration(Backend b, const char* symbol, void* entry) { register_entry(b, symbol, entry); }
};

}  // namespace dfuse::detail

#define DFUSE_CONCAT_INNER(a, b) a##b
#define DFUSE_CONCAT(a, b) DFUSE_CONCAT_INNER(a, b)
// Registers `fn` as the entry `symbol` of `backend` (a dfuse::Backend enumerator name).
#define DFUSE_REGISTER_ENTRY(backend, symbol, fn)                                             \
  static const ::dfuse::detail::EntryRegistration DFUSE_CONCAT(dfuse_entry_, __COUNTER__)( \
      ::dfuse::Backend::backend, symbol, reinterpret_cast<void*>(fn))
