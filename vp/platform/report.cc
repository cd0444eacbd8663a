#include "vp/platform/report.h"

#include <cstdio>

#include "vp/core/config.h"
#include "vp/core/results.h"

namespace mprdma::platform {
namespace {

const char* kRule =
    "---------------------------------------------------------------------------------------";

}  // namespace

void print_job_tables(std::ostream& os, const Platform& p) {
  const ScenarioConfig& cfg = p.config();
  for (const GuestOutcome& g : p.guests()) {
    os << kRule << "\n guest " << g.name;
    if (g.run_exit)
      os << ": run script exited with status " << *g.run_exit;
    else if (!g.ready)
      os << ": never became ready";
    else
      os << ": run script did not finish";
    os << "\n" << kRule << "\n";
    for (const std::string& line : g.run_output) os << line << "\n";
    if (!g.exit_report.empty() && !(g.run_exit && *g.run_exit == 0))
      os << " QEMU: " << g.exit_report << "\n";
    if (!g.console_log.empty()) os << " (console: " << g.console_log << ")\n";
  }
  for (size_t i = 0; i < cfg.jobs.size(); ++i) {
    const host::JobConfig& job = cfg.jobs[i];
    const JobOutcome& out = p.outcomes()[i];
    os << kRule << "\n"
       << " " << host::JobConfig::app_name(job.app) << "  job '" << job.name << "'  " << job.client
       << " -> " << job.server << "   ("
       << (job.transport == host::JobConfig::QpType::ud ? "UD" : "RC") << ", MTU " << job.mtu.n
       << ", tx_depth " << job.tx_depth << ", " << (job.events ? "events" : "polling") << ")\n"
       << kRule << "\n";
    char line[256];
    if (job.is_latency()) {
      os << " #bytes #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]"
            "  t_stdev[usec]  99%[usec]  99.9%[usec]\n";
      for (const host::SizeResult& r : out.results) {
        if (!r.error.empty() && r.iterations == 0) continue;
        std::snprintf(line, sizeof line,
                      " %-6llu %-11llu  %-11.2f  %-11.2f  %-15.2f  %-11.2f  %-13.2f  %-9.2f  "
                      "%-11.2f\n",
                      static_cast<unsigned long long>(r.bytes),
                      static_cast<unsigned long long>(r.iterations), r.t_min, r.t_max, r.t_typical,
                      r.t_avg, r.t_stdev, r.t_p99, r.t_p999);
        os << line;
      }
    } else if (job.app == host::JobConfig::App::write_flows) {
      os << " #flows     payload[MB]    BW[Gb/sec]    FCT avg[usec]  p50[usec]    p99[usec]"
            "    p99.9[usec]\n";
      for (const host::SizeResult& r : out.results) {
        std::snprintf(line, sizeof line, " %-10llu %-14.3f %-13.2f %-14.2f %-12.2f %-12.2f %-.2f\n",
                      static_cast<unsigned long long>(r.iterations), r.payload_bytes() / 1e6,
                      r.bw_gbps, r.t_avg, r.t_typical, r.t_p99, r.t_p999);
        os << line;
      }
    } else {
      os << " #bytes     #iterations    BW[Gb/sec]    BW[MB/sec]    MsgRate[Mpps]\n";
      for (const host::SizeResult& r : out.results) {
        std::snprintf(line, sizeof line, " %-10llu %-14llu %-13.2f %-13.2f %-12.6f\n",
                      static_cast<unsigned long long>(r.bytes),
                      static_cast<unsigned long long>(r.iterations), r.bw_gbps, r.bw_MBps,
                      r.msg_rate_mpps);
        os << line;
      }
    }
    for (const host::SizeResult& r : out.results)
      if (!r.error.empty()) os << " ERROR at " << r.bytes << " bytes: " << r.error << "\n";
    if (!out.finished) os << " ERROR: the job did not finish before end_time\n";
    os << kRule << "\n";
  }
}

nlohmann::json results_document(const Platform& p, const core::SimEnv& env,
                                const std::string& scenario_file) {
  const ScenarioConfig& cfg = p.config();
  core::RunMeta meta;
  meta.scenario_name = cfg.name;
  meta.scenario_file = scenario_file;
  meta.seed = static_cast<uint64_t>(cfg.seed);
  meta.sim_time_ps = p.sim_time_ps();
  ScenarioConfig copy = cfg;
  core::JsonBinder jb;
  nlohmann::json config = jb.dump(copy);
  std::vector<std::string> missing;
  nlohmann::json doc = core::build_results(meta, env.stats, p.metrics(&missing), config);
  // Name-valued metrics sit beside the numbers; their evidence (every
  // resource's utilisation) goes under "bottlenecks".
  for (const auto& [name, label] : p.labels(&missing)) doc["metrics"][name] = label;
  if (const nlohmann::json b = p.bottlenecks_json(); !b.is_null()) doc["bottlenecks"] = b;
  doc["flows"] = p.flows_json();
  if (p.fabric()) doc["fabric"] = p.fabric_json();
  doc["missing_metrics"] = missing;
  doc["ok"] = p.all_ok();
  return doc;
}

}  // namespace mprdma::platform
