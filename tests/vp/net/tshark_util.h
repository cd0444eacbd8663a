// Shared by the tests that run the external tshark (Debian package tshark)
// on a generated capture: where it is, running a command, splitting output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace mprdma::net::test {

constexpr const char* kTshark = "/usr/bin/tshark";

struct CmdResult {
  int status = -1;
  std::string out;
};

// Runs a shell command and returns its exit status and standard output.
inline CmdResult run(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The non-empty lines of `text`.
inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) v.push_back(l);
  return v;
}

}  // namespace mprdma::net::test
