// The simulator's command line: run, bench, validate, describe.
#pragma once

namespace mprdma::sim {

int run_cli(int argc, char** argv);

}  // namespace mprdma::sim
