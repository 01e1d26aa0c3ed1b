// dfuse: the command-line tool. See cli_app.h.
#include <iostream>

#include "dfuse/cli_app.h"

int main(int argc, char** argv) {
  return dfuse::cli::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
