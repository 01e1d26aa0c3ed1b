// The dfuse command line: list | verify | bench. main() only forwards here, so tests can run
// every subcommand in process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace dfuse::cli {

// `args` without the program name. Results go to `out`; progress, notes and errors to `err`.
// Returns the exit status: 0 success, 1 a failed case, 2 a usage or environment error.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dfuse::cli
