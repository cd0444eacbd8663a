#include "vp/sim/cli.h"

#include <mprdma/hw.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/config.h"
#include "vp/core/kernel.h"
#include "vp/core/log.h"
#include "vp/core/progress.h"
#include "vp/core/results.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/nic/rate_control/rate_control.h"
#include "vp/nic/transport/engine_registry.h"
#include "vp/platform/platform.h"
#include "vp/platform/report.h"
#include "vp/platform/reproduce.h"
#include "vp/platform/scenario.h"

namespace mprdma::sim {
namespace {

const char* kUsage =
    "usage: mprdma-vp-sim run SCENARIO [--out DIR] [--seed N] [--set KEY=VALUE]... [--log SPEC] "
    "[--quiet]\n"
    "                     [--trace-rtl HOST[@FROM-TO]]...\n"
    "       mprdma-vp-sim boot SCENARIO [--shell HOST] [--out DIR] [--set KEY=VALUE]... [--log "
    "SPEC]\n"
    "       mprdma-vp-sim bench SCENARIO... [--set KEY=VALUE]... [--log SPEC]\n"
    "       mprdma-vp-sim validate SCENARIO... [--set KEY=VALUE]...\n"
    "       mprdma-vp-sim config SCENARIO [--set KEY=VALUE]...\n"
    "       mprdma-vp-sim reproduce ROW|SCENARIO [--out DIR] [--jobs N] [--set KEY=VALUE]...\n"
    "                     [--scenarios DIR] [--sim PATH]\n"
    "       mprdma-vp-sim describe\n"
    "--set overrides a scenario key, e.g. --set fabric.switch.pfc.enabled=false or\n"
    "--set jobs.0.iterations=10 (the value is YAML; checked like the file).\n"
    "reproduce runs every sweep point x seed of the scenario whose row: is ROW (searched in\n"
    "--scenarios, default ./scenarios) as a child `run`, at most --jobs (2) at a time, and\n"
    "writes DIR/results.json (default DIR: out/reproduce/ROW); --sim: the simulator to run.\n"
    "--trace-rtl writes the RTL engines of HOST's NIC (nic.transport_impl rtl or lockstep) as\n"
    "DIR/rtl-HOST.fst (MP-RDMA receiver, or go-back-N) and DIR/rtl-tx-HOST.fst (MP-RDMA\n"
    "sender) for GTKWave, from simulated\n"
    "time FROM to TO (e.g. t1h0@1ms-1.01ms; either may be left out: the start or the end).\n"
    "config prints the effective scenario as JSON: every key with its value or default, the\n"
    "--set overrides applied and job_groups expanded into jobs (results.json's \"config\").\n";

struct Options {
  std::vector<std::string> files;
  std::string out;
  std::string log;
  bool has_seed = false;
  int64_t seed = 0;
  bool quiet = false;
  std::string shell;                    // boot: the guest whose console is interactive
  std::vector<std::string> overrides;   // --set KEY=VALUE, in order
  int jobs = 2;                         // reproduce: children at a time
  std::string sim;                      // reproduce: simulator executable
  std::string scenarios = "scenarios";  // reproduce: where rows are looked up
  std::map<std::string, core::SimEnv::TraceWindow> rtl_traces;  // --trace-rtl
};

// HOST[@FROM-TO] of --trace-rtl.
bool parse_trace_rtl(const std::string& v, Options& o) {
  const size_t at = v.find('@');
  const std::string host = v.substr(0, at);
  core::SimEnv::TraceWindow w;
  if (host.empty()) {
    std::cerr << "error: --trace-rtl needs HOST[@FROM-TO], got '" << v << "'\n";
    return false;
  }
  if (at != std::string::npos) {
    const std::string span = v.substr(at + 1);
    const size_t dash = span.find('-');
    if (dash == std::string::npos) {
      std::cerr << "error: --trace-rtl " << v << ": the window is FROM-TO (e.g. 1ms-1.01ms)\n";
      return false;
    }
    try {
      const std::string from = span.substr(0, dash), to = span.substr(dash + 1);
      if (!from.empty()) w.from_ps = core::parse_duration(from).ps;
      if (!to.empty()) w.to_ps = core::parse_duration(to).ps;
    } catch (const std::exception& e) {
      std::cerr << "error: --trace-rtl " << v << ": " << e.what() << "\n";
      return false;
    }
    if (w.to_ps < w.from_ps) {
      std::cerr << "error: --trace-rtl " << v << ": the window ends before it starts\n";
      return false;
    }
  }
  o.rtl_traces[host] = w;
  return true;
}

// --trace-rtl names hosts whose NIC runs on the RTL, and a directory to
// write into.
bool check_trace_rtl(const platform::ScenarioConfig& cfg, const Options& o) {
  if (o.rtl_traces.empty()) return true;
  if (o.out.empty()) {
    std::cerr << "error: --trace-rtl needs --out DIR: the waveform is written there\n";
    return false;
  }
  std::vector<std::string> names;
  for (const platform::HostEntry& h : cfg.effective_hosts()) names.push_back(h.name);
  for (const auto& [host, w] : o.rtl_traces) {
    if (std::find(names.begin(), names.end(), host) == names.end()) {
      std::cerr << "error: --trace-rtl " << host << ": the scenario has no such host\n";
      return false;
    }
    const nic::NicConfig& n = cfg.nic_of(host);
    if (n.transport_impl == "model") {
      std::cerr << "error: --trace-rtl " << host << ": its NIC runs transport " << n.transport
                << " as the C++ model (nic.transport_impl model); waveforms come from the RTL "
                   "(--set nic.transport_impl=rtl or lockstep)\n";
      return false;
    }
  }
  return true;
}

bool parse_options(int argc, char** argv, int first, Options& o) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::cerr << "error: " << flag << " needs a value\n";
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--out") {
      const char* v = value("--out");
      if (!v) return false;
      o.out = v;
    } else if (a == "--log") {
      const char* v = value("--log");
      if (!v) return false;
      o.log = v;
    } else if (a == "--trace-rtl") {
      const char* v = value("--trace-rtl");
      if (!v || !parse_trace_rtl(v, o)) return false;
    } else if (a == "--seed") {
      const char* v = value("--seed");
      if (!v) return false;
      char* end = nullptr;
      o.seed = std::strtoll(v, &end, 0);
      if (*end || o.seed < 0) {
        std::cerr << "error: --seed needs a non-negative integer, got '" << v << "'\n";
        return false;
      }
      o.has_seed = true;
    } else if (a == "--shell") {
      const char* v = value("--shell");
      if (!v) return false;
      o.shell = v;
    } else if (a == "--set") {
      const char* v = value("--set");
      if (!v) return false;
      o.overrides.push_back(v);
    } else if (a == "--jobs") {
      const char* v = value("--jobs");
      if (!v) return false;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end || n < 1 || n > 64) {
        std::cerr << "error: --jobs needs an integer from 1 to 64, got '" << v << "'\n";
        return false;
      }
      o.jobs = static_cast<int>(n);
    } else if (a == "--sim") {
      const char* v = value("--sim");
      if (!v) return false;
      o.sim = v;
    } else if (a == "--scenarios") {
      const char* v = value("--scenarios");
      if (!v) return false;
      o.scenarios = v;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "error: unknown option '" << a << "'\n" << kUsage;
      return false;
    } else {
      o.files.push_back(a);
    }
  }
  return true;
}

// `base_only`: the caller runs the base scenario, not the sweep: sweep
// points that the overrides made invalid are a note, not an error.
bool load(const std::string& file, const Options& o, platform::ScenarioConfig& cfg,
          bool base_only = false) {
  // --seed is applied with the overrides, before the scenario is checked:
  // what the seed decides at load time (a permutation job group's pairs)
  // follows it.
  std::vector<std::string> overrides = o.overrides;
  if (o.has_seed) overrides.push_back("seed=" + std::to_string(o.seed));
  try {
    std::vector<std::string> point_errors;
    const bool lenient = base_only && !o.overrides.empty();
    cfg = platform::load_scenario(file, overrides, lenient ? &point_errors : nullptr);
    if (!point_errors.empty() && !o.quiet)
      std::cerr << "note: with the --set overrides, " << point_errors.size()
                << " check(s) of the sweep's points fail (the base scenario, which this "
                   "command runs, passes; `reproduce` would stop), the first: "
                << point_errors.front() << "\n";
    return true;
  } catch (const core::ConfigError& e) {
    for (const std::string& line : e.errors()) std::cerr << "error: " << line << "\n";
    return false;
  }
}

uint64_t peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss);
}

struct RunFigures {
  bool complete = false;
  bool ok = false;
  double wall_s = 0, sim_s = 0;
  uint64_t actions = 0, activations = 0;
};

// Runs one scenario in this process's SystemC kernel. Writes results when
// `out` is not empty.
RunFigures simulate(const platform::ScenarioConfig& cfg, const std::string& file, const Options& o,
                    bool print_tables) {
  core::reset_kernel();
  core::Log::reset();
  core::Log::configure(cfg.log);
  if (!o.log.empty()) core::Log::configure(o.log);
  core::SimEnv env(static_cast<uint64_t>(cfg.seed));
  env.out_dir = o.out;
  env.rtl_traces = o.rtl_traces;
  if (!o.out.empty()) std::filesystem::create_directories(o.out);
  RunFigures f;
  const uint64_t actions0 = core::Calendar::total_dispatched();
  const uint64_t activations0 = core::Calendar::total_activations();
  const auto wall0 = std::chrono::steady_clock::now();
  {
    platform::Platform p(cfg, env, o.shell);
    core::ProgressReporter progress(std::cerr, !o.quiet && isatty(STDERR_FILENO));
    f.complete = p.run(
        [&](uint64_t ps) { progress.update(ps, core::Calendar::total_dispatched() - actions0); });
    progress.finish();
    f.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    f.sim_s = static_cast<double>(p.sim_time_ps()) * 1e-12;
    f.actions = core::Calendar::total_dispatched() - actions0;
    f.activations = core::Calendar::total_activations() - activations0;
    f.ok = p.all_ok();
    if (print_tables) {
      std::cout << "scenario " << cfg.name << ": " << cfg.description << "\n";
      platform::print_job_tables(std::cout, p);
    }
    if (!o.out.empty()) {
      nlohmann::json doc = platform::results_document(p, env, file);
      core::write_results(o.out, doc, env.stats);
      if (p.fabric()) {
        std::ofstream ports(o.out + "/fabric_ports.csv");
        p.fabric()->write_port_table(ports, env.stats, p.active_time_s());
      }
      nlohmann::json info;
      info["wall_time_s"] = f.wall_s;
      info["sim_time_s"] = f.sim_s;
      info["slowdown"] = f.sim_s > 0 ? f.wall_s / f.sim_s : 0.0;
      info["calendar_actions"] = f.actions;
      info["kernel_activations"] = f.activations;
      info["actions_per_wall_s"] = f.wall_s > 0 ? double(f.actions) / f.wall_s : 0.0;
      info["peak_rss_kib"] = peak_rss_kib();
      core::write_run_info(o.out, info);
      if (print_tables) {
        if (!doc["metrics"].empty()) {
          std::cout << "metrics:\n";
          for (const auto& [k, v] : doc["metrics"].items()) {
            std::cout << "  " << k << " = ";
            if (v.is_string()) {
              // The name, then the three busiest resources' utilisations.
              std::cout << v.get<std::string>();
              if (doc.contains("bottlenecks") && doc["bottlenecks"].contains(k)) {
                const nlohmann::json& u = doc["bottlenecks"][k]["utilisation"];
                for (size_t i = 0; i < u.size() && i < 3; ++i) {
                  std::cout << (i ? ", " : " (") << u[i]["resource"].get<std::string>() << " "
                            << std::lround(100 * u[i]["utilisation"].get<double>()) << " %";
                  if (u[i].contains("credit_stall"))
                    std::cout << " [" << std::lround(100 * u[i]["credit_stall"].get<double>())
                              << " % waiting for credits]";
                }
                if (!u.empty()) std::cout << ")";
              }
              std::cout << "\n";
            } else
              std::cout << v.get<double>() << "\n";
          }
        }
        std::cout << "results: " << o.out << "/results.json\n";
      }
    }
    if (print_tables && !f.complete)
      std::cout << "ERROR: end_time reached before every job finished\n";
  }
  return f;
}

int cmd_run(const Options& o) {
  if (o.files.size() != 1) {
    std::cerr << kUsage;
    return 2;
  }
  platform::ScenarioConfig cfg;
  if (!load(o.files[0], o, cfg, true) || !check_trace_rtl(cfg, o)) return 2;
  if (!o.quiet && cfg.sweep.enabled())
    std::cerr << "note: " << o.files[0] << " has a sweep ("
              << platform::sweep_points(cfg.sweep).size() << " points x "
              << platform::sweep_seeds(cfg.sweep, cfg.seed).size()
              << " seeds); running its base scenario with seed " << cfg.seed
              << " (`reproduce` runs the whole sweep)\n";
  try {
    const RunFigures f = simulate(cfg, o.files[0], o, true);
    return f.complete && f.ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

// Raw terminal while the user types into a guest; restored on every exit
// path of boot.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    raw.c_oflag |= OPOST | ONLCR;  // keep our own newlines readable
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

int cmd_boot(Options o) {
  if (o.files.size() != 1) {
    std::cerr << kUsage;
    return 2;
  }
  platform::ScenarioConfig cfg;
  if (!load(o.files[0], o, cfg) || !check_trace_rtl(cfg, o)) return 2;
  if (o.shell.empty()) {
    for (const platform::HostEntry& h : cfg.hosts)
      if (h.kind == "qemu") {
        o.shell = h.name;
        break;
      }
    if (o.shell.empty()) {
      std::cerr << "error: " << o.files[0] << " has no qemu host to boot\n";
      return 2;
    }
  }
  std::cerr << "booting; the console of " << o.shell
            << " follows (Ctrl-] ends the session, 'poweroff -f' stops the guest)\n";
  o.quiet = true;  // the console owns the terminal
  try {
    RawTerminal raw;
    const RunFigures f = simulate(cfg, o.files[0], o, false);
    (void)f;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "\nsession ended\n";
  return 0;
}

int cmd_bench(Options o) {
  if (o.files.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  o.quiet = true;
  int rc = 0;
  for (const std::string& file : o.files) {
    platform::ScenarioConfig cfg;
    if (!load(file, o, cfg, true)) return 2;
    char dir[] = "/tmp/mprdma-bench-XXXXXX";
    if (!mkdtemp(dir)) {
      std::cerr << "error: cannot create a temporary directory\n";
      return 1;
    }
    Options run = o;
    run.out = dir;
    const RunFigures f = simulate(cfg, file, run, false);
    std::ifstream in(std::string(dir) + "/results.json");
    nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    uint64_t data_packets = 0, frames = 0;
    for (const auto& [nic, stats] : doc["nics"].items()) {
      if (stats.contains("requester.packets"))
        data_packets += stats["requester.packets"].get<uint64_t>();
      if (stats.contains("mac.tx_packets")) frames += stats["mac.tx_packets"].get<uint64_t>();
    }
    // Packet-hops: frames put on any link (NIC ports and switch ports),
    // the unit of work of a fabric.
    uint64_t hops = 0;
    for (const auto& [link, stats] : doc["links"].items())
      for (const char* d : {"a2b.tx_packets", "b2a.tx_packets"})
        if (stats.contains(d)) hops += stats[d].get<uint64_t>();
    // A benchmark may stop at end_time with jobs still running; a job that
    // failed (an error completion, bad data) is an error.
    int unfinished = 0, failed = 0;
    for (const auto& [job, flow] : doc["flows"].items()) {
      if (!flow.value("finished", false)) ++unfinished;
      for (const auto& [size, r] : flow["sizes"].items())
        if (r.contains("error") || !r.value("data_ok", true)) ++failed;
    }
    std::printf("bench %s (%s)\n", cfg.name.c_str(), file.c_str());
    std::printf("  simulated time        %.6f s\n", f.sim_s);
    std::printf("  wall time             %.3f s\n", f.wall_s);
    std::printf("  slowdown              %.1f (wall / simulated)\n",
                f.sim_s > 0 ? f.wall_s / f.sim_s : 0.0);
    std::printf("  request packets       %llu  (%.0f per wall second)\n",
                static_cast<unsigned long long>(data_packets),
                f.wall_s > 0 ? double(data_packets) / f.wall_s : 0.0);
    std::printf("  frames on the wire    %llu  (%.0f per wall second)\n",
                static_cast<unsigned long long>(frames),
                f.wall_s > 0 ? double(frames) / f.wall_s : 0.0);
    std::printf("  kernel activations    %llu  (%.1f per frame, %.2f M per wall second)\n",
                static_cast<unsigned long long>(f.activations),
                frames ? double(f.activations) / double(frames) : 0.0,
                f.wall_s > 0 ? double(f.activations) / f.wall_s / 1e6 : 0.0);
    std::printf("  packet-hops           %llu  (%.0f per wall second)\n",
                static_cast<unsigned long long>(hops),
                f.wall_s > 0 ? double(hops) / f.wall_s : 0.0);
    std::printf("  peak memory           %.1f MiB\n", double(peak_rss_kib()) / 1024.0);
    if (unfinished && !failed)
      std::printf("  note: %d jobs still running at end_time (a time-bounded run)\n", unfinished);
    if (failed || (!f.complete && !unfinished) || (f.complete && !f.ok)) {
      std::printf("  ERROR: the scenario did not complete successfully\n");
      rc = 1;
    }
    std::string cleanup = std::string("rm -rf ") + dir;
    if (std::system(cleanup.c_str()) != 0) std::cerr << "warning: could not remove " << dir << "\n";
  }
  return rc;
}

int cmd_validate(const Options& o) {
  if (o.files.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  int rc = 0;
  for (const std::string& file : o.files) {
    platform::ScenarioConfig cfg;
    if (load(file, o, cfg))
      std::cout << "ok: " << file << "\n";
    else
      rc = 2;
  }
  return rc;
}

int cmd_config(const Options& o) {
  if (o.files.size() != 1) {
    std::cerr << kUsage;
    return 2;
  }
  platform::ScenarioConfig cfg;
  if (!load(o.files[0], o, cfg)) return 2;
  core::JsonBinder jb;
  std::cout << jb.dump(cfg).dump(2) << "\n";
  return 0;
}

int cmd_reproduce(const Options& o) {
  if (o.files.size() != 1) {
    std::cerr << kUsage;
    return 2;
  }
  platform::ReproduceOptions r;
  r.scenario = o.files[0];
  const bool is_file =
      r.scenario.find('/') != std::string::npos ||
      (r.scenario.size() > 5 && r.scenario.compare(r.scenario.size() - 5, 5, ".yaml") == 0);
  if (!is_file) {
    try {
      r.scenario = platform::find_row_scenario(o.scenarios, o.files[0]);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    }
    if (r.scenario.empty()) {
      std::cerr << "error: no scenario under " << o.scenarios << "/ has row: " << o.files[0]
                << "\n";
      return 2;
    }
  }
  r.out = o.out;
  r.jobs = o.jobs;
  r.overrides = o.overrides;
  r.sim = o.sim;
  if (r.sim.empty()) {
    std::error_code ec;
    r.sim = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) {
      std::cerr << "error: cannot find this executable (/proc/self/exe); give --sim\n";
      return 2;
    }
  }
  return platform::run_reproduce(r, std::cout);
}

// The engine and rate-control registries, as tables: what nic.transport,
// nic.qp_transports, nic.congestion_control and a job's qp_transport accept.
void describe_plugins(std::ostream& out) {
  out << "\n## Transport engines (`nic.transport`, `nic.qp_transports`)\n\n"
      << "From the engine registry (vp/nic/transport/engine_registry.h). id: enum mpr_transport "
         "(a job's qp_transport names it as <mprdma/hw.h> does).\n\n"
      << "| engine | id | also | implementations | own window | extra state | gauges | what it "
         "is |\n|---|---|---|---|---|---|---|---|\n";
  for (const nic::EngineEntry& e : nic::EngineRegistry::instance().entries()) {
    std::string also, impls;
    for (uint8_t k : e.also_kinds)
      also += (also.empty() ? "" : ", ") + std::string(mpr_transport_name(k)) + " (" +
              std::to_string(k) + ")";
    for (const nic::EngineImpl& i : e.impls) impls += (impls.empty() ? "" : ", ") + i.name;
    size_t bytes = 0;
    if (e.state_fields)
      for (const nic::StateField& f : e.state_fields()) bytes += f.bytes;
    out << "| `" << e.name << "` | " << int(e.kind) << " | " << also << " | " << impls << " | "
        << (e.own_congestion_control ? "yes" : "no") << " | "
        << (e.state_fields ? std::to_string(bytes) + " B" : "") << " | "
        << (e.gauges ? "nic.<host>.transport.*" : "") << " | " << e.doc << " |\n";
  }
  out << "\n## Congestion controls (`nic.congestion_control`)\n\n"
      << "From the rate-control registry (vp/nic/rate_control/rate_control.h), besides "
         "`none`.\n\n| control | parameters | what it does |\n|---|---|---|\n";
  for (const nic::RateControlEntry& e : nic::RateControlRegistry::instance().entries())
    out << "| `" << e.name << "` | " << (e.make_section ? "nic." + e.name : "") << " | " << e.doc
        << " |\n";
}

int cmd_describe() {
  platform::ScenarioConfig defaults;
  core::DocBinder doc("Scenario reference");
  std::cout << "<!-- Generated by `./mprdma-vp docs` (mprdma-vp-sim describe); do not edit. -->\n\n"
            << doc.describe(defaults);
  describe_plugins(std::cout);
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = argv[1];
  Options o;
  if (cmd == "describe") return cmd_describe();
  if (!parse_options(argc, argv, 2, o)) return 2;
  if (cmd == "run") return cmd_run(o);
  if (cmd == "bench") return cmd_bench(o);
  if (cmd == "boot") return cmd_boot(o);
  if (cmd == "validate") return cmd_validate(o);
  if (cmd == "config") return cmd_config(o);
  if (cmd == "reproduce") return cmd_reproduce(o);
  std::cerr << "error: unknown command '" << cmd << "'\n" << kUsage;
  return 2;
}

}  // namespace mprdma::sim
