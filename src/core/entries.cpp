// The entry table and the CUDA backend loader.
#include "common/entries.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "dfuse/core/error.h"
#include "dfuse/registry/registry.h"

namespace dfuse::detail {

namespace {

struct EntryTable {
  std::mutex mu;
  std::map<std::string, void*, std::less<>> entries;  // "cuda:modulate_scale_shift"
  RuntimeFactory cuda_runtime = nullptr;
};

EntryTable& table() {
  static EntryTable t;
  return t;
}

std::string entry_key(Backend b, std::string_view symbol) {
  return std::string(backend_name(b)) + ":" + std::string(symbol);
}

// The CUDA backend library sits beside libdfuse unless DFUSE_CUDA_BACKEND names a path.
std::string cuda_backend_path() {
  if (const char* env = std::getenv("DFUSE_CUDA_BACKEND"); env && *env) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuda_backend_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    auto slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + DFUSE_CUDA_BACKEND_NAME;
  }
  return DFUSE_CUDA_BACKEND_NAME;
}

struct CudaBackendState {
  std::once_flag once;
  std::string error;  // empty once loaded
};

CudaBackendState& cuda_state() {
  static CudaBackendState s;
  return s;
}

}  // namespace

void register_entry(Backend backend, const char* symbol, void* entry) {
  auto& t = table();
  std::lock_guard lock(t.mu);
  t.entries[entry_key(backend, symbol)] = entry;
}

void register_cuda_runtime(RuntimeFactory factory) {
  auto& t = table();
  std::lock_guard lock(t.mu);
  t.cuda_runtime = factory;
}

void ensure_cuda_backend() {
  auto& s = cuda_state();
  std::call_once(s.once, [&] {
    std::string path = cuda_backend_path();
    // RTLD_GLOBAL is not needed: the library registers its entries into this table while it
    // loads. It stays loaded for the life of the process.
    if (!dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      const char* err = dlerror();
      s.error = "cannot load the CUDA backend " + path + ": " + (err ? err : "unknown error");
    }
  });
  if (!s.error.empty()) throw BackendUnavailable(s.error);
}

void* find_entry(Backend backend, std::string_view symbol) {
  if (backend == Backend::cuda) ensure_cuda_backend();
  auto& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.entries.find(entry_key(backend, symbol));
  if (it == t.entries.end())
    throw SelectionError("backend " + std::string(backend_name(backend)) + " has no entry \"" +
                         std::string(symbol) + "\"");
  return it->second;
}

Runtime* make_cuda_runtime(int index) {
  ensure_cuda_backend();
  RuntimeFactory f;
  {
    auto& t = table();
    std::lock_guard lock(t.mu);
    f = t.cuda_runtime;
  }
  if (!f) throw BackendUnavailable("the CUDA backend library registered no runtime");
  return f(index);
}

Backend backend_for(Device d) { return d.is_cuda() ? Backend::cuda : Backend::host; }

void* OpEntry::resolve(Backend b) {
  auto& slot = cache_[static_cast<int>(b)];
  if (void* p = slot.load(std::memory_order_acquire)) return p;
  void* p = select_kernel(op_, b).load().entry;
  slot.store(p, std::memory_order_release);
  return p;
}

}  // namespace dfuse::detail
