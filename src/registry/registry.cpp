#include "dfuse/registry/registry.h"

#include <algorithm>
#include <set>

#include "dfuse/core/error.h"

namespace dfuse {

void register_inventory(Registry& r);  // src/registry/inventory.cpp

Registry& Registry::global() {
  static Registry* r = [] {
    auto* reg = new Registry;
    register_inventory(*reg);
    return reg;
  }();
  return *r;
}

void Registry::add(KernelSpec spec) {
  std::lock_guard lock(mu_);
  for (auto& s : specs_) {
    if (s.op == spec.op && s.backend == spec.backend) {
      s = std::move(spec);
      return;
    }
  }
  specs_.push_back(std::move(spec));
}

std::vector<std::string> Registry::ops() const {
  std::lock_guard lock(mu_);
  std::set<std::string> names;
  for (const auto& s : specs_) names.insert(s.op);
  return {names.begin(), names.end()};
}

std::vector<KernelSpec> Registry::specs(std::string_view op) const {
  std::lock_guard lock(mu_);
  std::vector<KernelSpec> out;
  for (const auto& s : specs_)
    if (s.op == op) out.push_back(s);
  return out;
}

std::vector<KernelSpec> Registry::all() const {
  std::vector<KernelSpec> out;
  {
    std::lock_guard lock(mu_);
    out = specs_;
  }
  std::sort(out.begin(), out.end(),
            [](const KernelSpec& a, const KernelSpec& b) { return std::tie(a.op, a.backend) < std::tie(b.op, b.backend); });
  return out;
}

bool Registry::has(std::string_view op) const {
  std::lock_guard lock(mu_);
  return std::any_of(specs_.begin(), specs_.end(), [&](const KernelSpec& s) { return s.op == op; });
}

namespace {
std::string backend_list(const std::vector<KernelSpec>& specs) {
  std::string s;
  for (const auto& k : specs) s += (s.empty() ? "" : ", ") + std::string(backend_name(k.backend));
  return s;
}
}  // namespace

KernelSpec select_kernel(std::string_view op, std::optional<Backend> backend, const Platform& platform,
                         const Registry& registry) {
  auto specs = registry.specs(op);
  if (specs.empty()) throw SelectionError("no kernel registered for op \"" + std::string(op) + "\"");
  if (backend) {
    for (auto& s : specs)
      if (s.backend == *backend) return s;
    throw SelectionError("op \"" + std::string(op) + "\" has no " + std::string(backend_name(*backend)) +
                         " backend; registered: " + backend_list(specs));
  }
  if (specs.size() == 1) return specs.front();
  std::vector<KernelSpec> eligible;
  for (auto& s : specs)
    if (s.supports(platform)) eligible.push_back(s);
  if (eligible.size() == 1) return eligible.front();
  if (eligible.empty())
    throw SelectionError("op \"" + std::string(op) + "\": none of the registered backends (" + backend_list(specs) +
                         ") runs on " + std::string(device_kind_name(platform.device)));
  throw SelectionError("op \"" + std::string(op) + "\": several backends run here (" + backend_list(eligible) +
                       "); pass backend=...");
}

}  // namespace dfuse
