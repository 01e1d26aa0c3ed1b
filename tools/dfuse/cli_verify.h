// dfuse verify: every op with cases against its eager chain, bit for bit, on one device.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "dfuse/cli_cases.h"
#include "dfuse/core/device.h"
#include "dfuse/eager/chains.h"

namespace dfuse::cli {

struct VerifyOptions {
  Device device;
  std::optional<std::string> op;  // all ops when absent
  bool quick = false;             // small shapes (shape_table(true))
  uint64_t seed = 0;
};

struct VerifyResult {
  int64_t elements = 0;
  int64_t mismatches = 0;
  int64_t unwritten = 0;  // poisoned elements left in either output
  std::string detail;     // why it failed; empty when it passed
  bool passed() const { return detail.empty(); }
};

// Runs the fused op and the eager chain of `c` on the same fresh inputs into outputs poisoned
// beforehand (an in-place case runs the fused op on a copy of the aliased input instead), and
// compares the outputs bit for bit.
VerifyResult verify_case(const Case& c, Device device, eager::Workspace& workspace, uint64_t seed);

// Prints a pass/fail table (and the first mismatch or error of each failed case) to `out`,
// one progress line per case to `progress`. Returns 0 when every case passes, 1 otherwise.
int run_verify(const VerifyOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace dfuse::cli
