// dfuse bench: fused op vs its eager chain, against the copy bandwidth measured in the same run.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "dfuse/core/device.h"

namespace dfuse::cli {

struct BenchOptions {
  Device device;
  std::optional<std::string> op;         // all ops when absent
  bool quick = false;                    // small shapes (shape_table(true))
  int iters = 0;                         // timed runs per measurement
  std::optional<std::string> json_path;  // also write the results there
};

// Median of `samples` (copied, so the caller's order is kept).
double median(std::vector<double> samples);

// Prints one progress line per case to `progress`, then the table to `out`. Returns 0, or 1
// when a case failed to run or the JSON file could not be written.
int run_bench(const BenchOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace dfuse::cli
