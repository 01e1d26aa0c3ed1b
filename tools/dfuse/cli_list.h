// dfuse list: the registry as a table or as JSON. Metadata only: no kernel is loaded.
#pragma once

#include <string>
#include <vector>

#include "dfuse/registry/kernel_spec.h"

namespace dfuse::cli {

// One row per spec: op, backend, family, contract, tier, dtypes, layouts, SM window, whether
// `here` can run it, models, replaces.
std::string list_table(const std::vector<KernelSpec>& specs, const Platform& here);
// The same fields as a JSON array of objects.
std::string list_json(const std::vector<KernelSpec>& specs, const Platform& here);

}  // namespace dfuse::cli
