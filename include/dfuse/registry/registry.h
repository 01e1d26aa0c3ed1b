// dfuse registry: the process-wide inventory and kernel selection.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dfuse/registry/kernel_spec.h"

namespace dfuse {

class Registry {
 public:
  // The process-wide registry, holding every spec dfuse ships (src/registry/inventory.cpp).
  static Registry& global();

  // Adds a spec; a spec with the same (op, backend) is replaced.
  void add(KernelSpec spec);
  std::vector<std::string> ops() const;  // sorted
  std::vector<KernelSpec> specs(std::string_view op) const;  // empty when unknown
  std::vector<KernelSpec> all() const;  // sorted by op, then backend
  bool has(std::string_view op) const;

 private:
  mutable std::mutex mu_;
  std::vector<KernelSpec> specs_;
};

// Selection never ranks:
//  1. op unknown -> SelectionError;
//  2. backend given -> that spec, or SelectionError naming the registered backends;
//  3. exactly one spec -> it (even if this platform cannot run it: load() will say why);
//  4. several -> those supporting `platform`; exactly one -> it; none or several ->
//     SelectionError naming the candidates.
KernelSpec select_kernel(std::string_view op, std::optional<Backend> backend = std::nullopt,
                         const Platform& platform = Platform::detect(),
                         const Registry& registry = Registry::global());

}  // namespace dfuse
