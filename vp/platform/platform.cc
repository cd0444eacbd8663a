#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "vp/platform/platform.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "vp/nic/transport/engine_registry.h"
#include "vp/nic/transport/transport_mux.h"
#include "vp/platform/series_metrics.h"

namespace mprdma::platform {

// One thread per job, started in scenario order; a job waits for its start
// time and, unless told otherwise, for the previous job to end.
struct Platform::JobRunner : sc_core::sc_module {
  JobRunner(sc_core::sc_module_name name, Platform& p) : sc_core::sc_module(name), platform(p) {
    const auto& jobs = p.cfg_.jobs;
    done.resize(jobs.size(), false);
    events.resize(jobs.size());
    for (auto& e : events) e = std::make_unique<sc_core::sc_event>();
    for (size_t i = 0; i < jobs.size(); ++i)
      sc_core::sc_spawn([this, i] { run_job(i); }, sc_core::sc_gen_unique_name("job"));
  }

  void run_job(size_t i) {
    const host::JobConfig& cfg = platform.cfg_.jobs[i];
    if (cfg.start.ps) sc_core::wait(cfg.start.sc());
    if (cfg.after_previous && i > 0)
      while (!done[i - 1]) sc_core::wait(*events[i - 1]);
    JobOutcome& out = platform.outcomes_[i];
    out.started = true;
    out.start_s = sc_core::sc_time_stamp().to_seconds();
    out.run_from_s = std::max(out.start_s, cfg.run_at.sc().to_seconds());
    if (cfg.qps > 1) {
      out.results = {run_connections(cfg)};
    } else {
      host::PerfTest test(cfg, platform.modeled_host(cfg.client), platform.modeled_host(cfg.server),
                          platform.env_);
      test.run();
      out.results = test.results();
    }
    out.finished = true;
    out.end_s = sc_core::sc_time_stamp().to_seconds();
    done[i] = true;
    ++finished;
    if (finished == platform.cfg_.jobs.size())
      for (auto& [name, probe] : platform.bottlenecks_) probe->jobs_ended();
    events[i]->notify(sc_core::SC_ZERO_TIME);
  }

  // A job with qps > 1: that many copies of the test, each set up in turn
  // (the drivers serialise their admin commands anyway), then all started
  // at the same instant; one aggregate result.
  host::SizeResult run_connections(const host::JobConfig& cfg) {
    const size_t n = static_cast<size_t>(cfg.qps);
    std::vector<std::unique_ptr<host::PerfTest>> tests;
    for (size_t k = 0; k < n; ++k)
      tests.push_back(std::make_unique<host::PerfTest>(cfg, platform.modeled_host(cfg.client),
                                                       platform.modeled_host(cfg.server),
                                                       platform.env_, static_cast<int>(k)));
    host::SizeResult agg;
    agg.bytes = cfg.sizes.at(0).n;
    for (size_t k = 0; k < n; ++k)
      if (!tests[k]->prepare()) {
        agg.error = "connection " + std::to_string(k) + ": " + tests[k]->results().at(0).error;
        return agg;
      }
    const sc_core::sc_time t0 = std::max(sc_core::sc_time_stamp(), cfg.run_at.sc());
    sc_core::sc_event all_done;
    size_t running = n;
    for (size_t k = 0; k < n; ++k)
      sc_core::sc_spawn(
          [&, k] {
            tests[k]->run();
            if (--running == 0) all_done.notify(sc_core::SC_ZERO_TIME);
          },
          sc_core::sc_gen_unique_name("connection"));
    sc_core::wait(all_done);
    agg.seconds = (sc_core::sc_time_stamp() - t0).to_seconds();
    agg.data_ok = true;
    for (size_t k = 0; k < n; ++k) {
      const std::vector<host::SizeResult>& r = tests[k]->results();
      if (r.empty()) {
        agg.data_ok = false;
        if (agg.error.empty()) agg.error = "connection " + std::to_string(k) + ": no result";
        continue;
      }
      agg.iterations += r[0].iterations;
      agg.payload += r[0].payload;
      agg.sync_messages += r[0].sync_messages;
      agg.data_ok = agg.data_ok && r[0].data_ok;
      if (agg.error.empty() && !r[0].error.empty())
        agg.error = "connection " + std::to_string(k) + ": " + r[0].error;
    }
    // write_flows: the flow completion times of all connections.
    const core::Histogram* h = platform.env_.stats.find_histogram("flow." + cfg.name + ".fct_us");
    if (h && cfg.app == host::JobConfig::App::write_flows && h->count()) {
      agg.t_min = h->min();
      agg.t_max = h->max();
      agg.t_avg = h->mean();
      agg.t_typical = h->percentile(50);
      agg.t_p99 = h->percentile(99);
      agg.t_p999 = h->percentile(99.9);
    }
    if (agg.seconds > 0) {
      const double bytes = agg.payload_bytes();
      agg.bw_gbps = bytes * 8 / agg.seconds / 1e9;
      agg.bw_MBps = bytes / agg.seconds / (1 << 20);
      agg.msg_rate_mpps = static_cast<double>(agg.iterations) / agg.seconds / 1e6;
    }
    return agg;
  }

  Platform& platform;
  std::vector<bool> done;
  std::vector<std::unique_ptr<sc_core::sc_event>> events;
  size_t finished = 0;
};

namespace {

// Time series are kept in memory until the run ends: refuse a sample
// interval that would fill it long before (e.g. 10 ps over 3 ms for a few
// hundred series is hundreds of GiB), saying what would fit.
void check_series_memory(const core::RateSampler& sampler, core::Duration end_time) {
  constexpr double kMaxBytes = 4.0 * (uint64_t{1} << 30);
  const double per_point = sizeof(core::TimeSeries::Point);
  const double samples = double(end_time.ps) / double(sampler.interval().ps);
  const double bytes = samples * double(sampler.series_count()) * per_point;
  if (bytes <= kMaxBytes) return;
  const double min_ps =
      double(end_time.ps) * double(sampler.series_count()) * per_point / kMaxBytes;
  std::ostringstream m;
  m << "sample_interval " << core::to_string(sampler.interval()) << ": " << sampler.series_count()
    << " time series sampled over end_time " << core::to_string(end_time) << " would take "
    << std::lround(bytes / double(uint64_t{1} << 30))
    << " GiB (at most 4 GiB): use an interval of at least "
    << core::to_string(core::Duration{static_cast<uint64_t>(std::ceil(min_ps))})
    << ", a shorter end_time, or 0 (no time series)";
  throw std::invalid_argument(m.str());
}

// The jobs' buffers live in the modeled hosts' memory, which is this
// process's: each connection has a send and a receive half on both hosts,
// written in full (source pattern, cleared destination). Refuse, before the
// run, jobs that need more than this machine has available, rather than be
// killed by the kernel part-way (the estimate leaves out the hosts' own
// tables, a few tens of MiB each).
void check_job_memory(const std::vector<host::JobConfig>& jobs) {
  double need = 0, largest = 0;
  std::string largest_job;
  for (const host::JobConfig& j : jobs) {
    const double copies = double(std::max<int64_t>(j.qps, 1));
    double bytes = 4.0 * double(host::PerfTest::buffer_bytes(j)) * copies;
    // write_flows writes the source pattern up to its largest flow, and the
    // destination as far: at most what the job offers in its duration.
    if (j.app == host::JobConfig::App::write_flows)
      bytes = 2.0 * copies *
              std::min(double(host::PerfTest::buffer_bytes(j)),
                       j.rate.bps / 8.0 * j.duration.sc().to_seconds() / copies);
    need += bytes;
    if (bytes > largest) largest = bytes, largest_job = j.name;
  }
  std::ifstream meminfo("/proc/meminfo");  // lines "MemAvailable:   22946920 kB"
  std::string line;
  uint64_t kib = 0;
  while (std::getline(meminfo, line))
    if (line.rfind("MemAvailable:", 0) == 0) kib = std::strtoull(line.c_str() + 13, nullptr, 10);
  if (!kib || need <= 0.9 * double(kib) * 1024) return;
  const double gib = double(uint64_t{1} << 30);
  std::ostringstream m;
  m.precision(3);
  m << "the jobs' buffers need about " << need / gib << " GiB of this machine's memory (job '"
    << largest_job << "' alone " << largest / gib << " GiB: a send and a receive half per "
    << "connection on both hosts), more than the " << double(kib) * 1024 / gib
    << " GiB available: use smaller sizes, fewer connections or fewer jobs";
  throw std::invalid_argument(m.str());
}

// A UDP port on the loopback that is free now (the kernel picks it). QEMU
// binds it a moment later; another process taking it in between would make
// QEMU fail to start, which is reported by name.
uint16_t free_udp_port() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) throw std::runtime_error("cannot create a UDP socket to pick a port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  if (!port) throw std::runtime_error("cannot pick a free UDP port for the guest network");
  return port;
}

// The guests' IP network for out-of-band exchanges: a point-to-point UDP
// pair for two guests, a multicast group for more, a closed user network
// for one.
std::vector<std::string> guest_netdevs(size_t guests) {
  std::vector<std::string> out(guests);
  if (guests == 2) {
    const uint16_t p0 = free_udp_port(), p1 = free_udp_port();
    auto spec = [](uint16_t local, uint16_t remote) {
      return "dgram,local.type=inet,local.host=127.0.0.1,local.port=" + std::to_string(local) +
             ",remote.type=inet,remote.host=127.0.0.1,remote.port=" + std::to_string(remote);
    };
    out[0] = spec(p0, p1);
    out[1] = spec(p1, p0);
  } else if (guests == 1) {
    // A lone guest (its peers are modeled hosts) still needs an interface:
    // the RoCE port's GIDs come from it. QEMU's user network, closed to
    // the outside.
    out[0] = "user,restrict=on";
  } else if (guests > 2) {
    const std::string group = "socket,mcast=230.0.0.1:" + std::to_string(free_udp_port());
    for (auto& o : out) o = group;
  }
  return out;
}

}  // namespace

namespace {

// Forwards this process's stdin to an interactive guest console from the
// run loop (it polls fd 0 with the guests' fds). Ctrl-] ends the session.
class StdinForwarder : public pcie::QemuRunLoop::Participant {
 public:
  explicit StdinForwarder(host::QemuHost& h) : host_(h) {}
  void service() override {
    pollfd p{0, POLLIN, 0};
    while (!stop_ && ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP))) {
      char buf[256];
      const ssize_t n = ::read(0, buf, sizeof buf);
      if (n <= 0) {
        stop_ = true;  // stdin closed
        return;
      }
      for (ssize_t i = 0; i < n; ++i)
        if (buf[i] == 0x1d) {  // Ctrl-]
          stop_ = true;
          return;
        }
      host_.write_console(buf, static_cast<size_t>(n));
    }
  }
  sc_core::sc_time horizon() const override { return sc_core::sc_max_time(); }
  bool busy() const override { return false; }
  bool take_kick() override { return false; }
  double pacing_ratio() const override { return 0; }
  void wait_fds(std::vector<int>* fds) const override {
    if (!stop_) fds->push_back(0);
  }
  bool stop_requested() const override { return stop_; }

 private:
  host::QemuHost& host_;
  bool stop_ = false;
};

}  // namespace

Platform::Platform(const ScenarioConfig& cfg, core::SimEnv& env) : Platform(cfg, env, "") {}

Platform::Platform(const ScenarioConfig& cfg, core::SimEnv& env, const std::string& shell_host)
    : cfg_(cfg), env_(env), shell_host_(shell_host) {
  check_job_memory(cfg_.jobs);
  if (cfg_.has_fabric()) {
    // The fabric makes the hosts: their order, names and addresses.
    fabric_ = std::make_unique<fabric::Fabric>("fabric", cfg_.fabric, env_);
    host_list_ = cfg_.effective_hosts();
    for (size_t i = 0; i < host_list_.size(); ++i) {
      const fabric::Fabric::HostPort& hp = fabric_->hosts()[i];
      nic::NicConfig n = cfg_.nic_of(host_list_[i].name);
      n.name = hp.name;
      n.mac = hp.mac;
      n.ip = hp.ip;
      // The NIC's port speed follows its access link.
      n.port_speed_mbps = static_cast<uint32_t>(hp.rate.bps / 1e6);
      nic_cfgs_.push_back(n);
    }
  } else {
    host_list_ = cfg_.hosts;
    for (size_t i = 0; i < host_list_.size(); ++i) {
      nic::NicConfig n = cfg_.nic_of(host_list_[i].name);
      n.name = host_list_[i].name;
      n.mac = fabric::host_mac(i);
      n.ip = fabric::host_ip(i);
      nic_cfgs_.push_back(n);
    }
    for (const LinkEntry& l : cfg_.links) {
      // The NIC's port speed follows the link it is cabled to.
      for (size_t i = 0; i < host_list_.size(); ++i)
        if (host_list_[i].name == l.a || host_list_[i].name == l.b)
          nic_cfgs_[i].port_speed_mbps = static_cast<uint32_t>(l.link.rate.bps / 1e6);
    }
  }
  size_t n_guests = 0;
  for (const HostEntry& h : host_list_) n_guests += h.kind == "qemu";
  const std::vector<std::string> netdevs = guest_netdevs(n_guests);
  size_t guest = 0;
  for (size_t i = 0; i < host_list_.size(); ++i) {
    const HostEntry& h = host_list_[i];
    if (h.kind == "modeled") {
      hosts_[h.name] = std::make_unique<host::ModeledHost>(h.name.c_str(), cfg_.host, nic_cfgs_[i],
                                                           cfg_.pcie, env_);
      continue;
    }
    host::QemuHostConfig q = cfg_.qemu;
    if (q.image_dir.empty() && q.kernel.empty()) {
      // ./mprdma-vp builds the guest image and says where it is.
      const char* dir = std::getenv("MPRDMA_GUEST_IMAGE");
      if (!dir || !*dir)
        throw std::runtime_error("host '" + h.name +
                                 "': no guest image (set qemu.image_dir, or run through "
                                 "./mprdma-vp, which builds it)");
      q.image_dir = dir;
    }
    if (q.netdev.empty()) q.netdev = netdevs[guest];
    const bool shell = h.name == shell_host_;
    if (shell) q.console_tap_fd = 1;
    if (!h.run.empty() && !shell) {
      // The run script reaches the guest through its 9p share.
      const std::string base = env_.out_dir.empty()
                                   ? std::filesystem::temp_directory_path().string() +
                                         "/mprdma-vp-" + std::to_string(::getpid())
                                   : env_.out_dir;
      q.share_dir = base + "/" + h.name + ".share";
      std::filesystem::create_directories(q.share_dir);
      std::ofstream(q.share_dir + "/run.sh") << "#!/bin/sh\n" << h.run << "\n";
      std::filesystem::permissions(q.share_dir + "/run.sh",
                                   std::filesystem::perms::owner_all |
                                       std::filesystem::perms::group_read |
                                       std::filesystem::perms::others_read);
      q.append += std::string(q.append.empty() ? "" : " ") + "mprdma.run=/host/run.sh";
    }
    auto qh = std::make_unique<host::QemuHost>(h.name.c_str(), q, nic_cfgs_[i], cfg_.pcie, env_);
    qemu_hosts_.push_back(qh.get());
    run_scripts_.push_back(shell ? std::string() : h.run);
    if (shell) shell_ = qh.get();
    hosts_[h.name] = std::move(qh);
    ++guest;
  }
  if (!shell_host_.empty() && !shell_)
    throw std::invalid_argument("--shell: '" + shell_host_ + "' is not a qemu host");
  for (const LinkEntry& l : cfg_.links) {
    links_.push_back(std::make_unique<fabric::EthLink>(l.link.name.c_str(), l.link, env_));
    host(l.a).nic().attach(links_.back().get(), 0);
    host(l.b).nic().attach(links_.back().get(), 1);
  }
  if (fabric_)
    for (const fabric::Fabric::HostPort& hp : fabric_->hosts())
      host(hp.name).nic().attach(hp.link, hp.side);
  // A job's `via` becomes the lowest UDP source port from 0xC000 whose
  // ECMP path from client to server crosses that link.
  for (host::JobConfig& j : cfg_.jobs) {
    if (j.via.empty()) continue;
    if (!fabric_) throw std::invalid_argument("job '" + j.name + "': via needs a fabric");
    j.udp_sport = via_udp_sport(j.client, j.server, j.via);
  }
  outcomes_.resize(cfg_.jobs.size());
  for (size_t i = 0; i < cfg_.jobs.size(); ++i) outcomes_[i].name = cfg_.jobs[i].name;
  runner_ = std::make_unique<JobRunner>("jobs", *this);

  // What the metric terms read beyond the usual series, looked at only where
  // a term names it (a large fabric has hundreds of ports): the NIC
  // counters of rate() terms and RED's verdicts on the ports of windowed
  // ecn_mark_ratio terms (both sampled), and the histograms of windowed
  // pct() terms (tallied at the windows' edges).
  std::set<std::string> rate_counters, ecn_ports;
  hist_windows_ = std::make_unique<HistogramWindows>(env_.stats);
  for (const auto& [name, expr] : cfg_.metrics) {
    if (parse_metric_aggregate(expr) || parse_bottleneck_metric(expr)) continue;
    for (const MetricTerm& t : parse_metric(expr)) {
      if (t.kind == MetricTerm::Kind::kCounterRate) rate_counters.insert(t.counter);
      if (t.kind == MetricTerm::Kind::kEcnRatio && t.windowed && fabric_)
        ecn_ports.insert(fabric::link_egress_stat_prefix(*fabric_, t.link, t.dir));
      if (t.kind == MetricTerm::Kind::kHistPct && t.windowed)
        hist_windows_->add(t.counter, t.from.ps, t.to.ps);
    }
  }
  if (cfg_.sample_interval.ps) {
    // Throughput over time of every link direction, NIC port and PCIe
    // direction, in Gb/s.
    sampler_ = std::make_unique<core::RateSampler>(env_.stats, cfg_.sample_interval);
    constexpr double kBytesPerGbit = 1e9 / 8;
    std::vector<std::string> link_names;
    for (const LinkEntry& l : cfg_.links) link_names.push_back(l.link.name);
    if (fabric_)
      for (const fabric::TopoLink& l : fabric_->topology().links()) link_names.push_back(l.name);
    for (const std::string& name : link_names)
      for (const char* dir : {"a2b", "b2a"})
        sampler_->add("link." + name + "." + dir + ".tx_bytes",
                      "link." + name + "." + dir + ".gbps", "Gb/s", kBytesPerGbit,
                      "Wire throughput (frame bytes incl. preamble, FCS and gap)");
    for (const HostEntry& h : host_list_) {
      for (const char* d : {"tx", "rx"})
        sampler_->add("nic." + h.name + ".mac." + d + "_bytes",
                      "nic." + h.name + ".mac." + d + "_gbps", "Gb/s", kBytesPerGbit,
                      "NIC port throughput (frame bytes)");
      for (const char* d : {"upstream", "downstream"})
        sampler_->add("pcie." + h.name + "." + d + ".bytes", "pcie." + h.name + "." + d + ".gbps",
                      "Gb/s", kBytesPerGbit, "PCIe throughput including TLP overheads");
      // Levels the NIC's engines offer (MP-RDMA: windows and recovery), as
      // nic.<host>.transport.<name>.
      const auto* mux = dynamic_cast<const nic::TransportMux*>(&host(h.name).nic().engine());
      for (const nic::EngineEntry& e : nic::EngineRegistry::instance().entries()) {
        const nic::TransportEngine* engine = mux ? mux->find(e.kind) : nullptr;
        if (!engine || !e.gauges) continue;
        for (nic::EngineGauge& g : e.gauges(*engine))
          sampler_->add_gauge("nic." + h.name + ".transport." + g.name, g.unit, g.doc,
                              std::move(g.read));
      }
    }
    for (const std::string& c : rate_counters)
      if (env_.stats.find_counter(c))  // else the metric is missing
        sampler_->add(c, c + ".per_s", "1/s", 1.0, "Growth of the counter per second");
    if (fabric_) {
      for (const std::string& pb : ecn_ports)
        for (const char* c : {"ecn_marks", "ecn_capable"})
          sampler_->add(pb + c, pb + c + "_mps", "M/s", 1e6,
                        "RED verdicts per second on this egress port (see the counter)");
      // Switch queues over time: each egress port (all priorities) and the
      // shared buffer, as levels at the end of each interval.
      for (int n : fabric_->topology().switches()) {
        const std::string& sname = fabric_->topology().nodes()[n].name;
        const fabric::Switch* sw = fabric_->switch_named(sname);
        for (int p = 0; p < sw->ports(); ++p) {
          if (fabric_->topology().nodes()[n].port_link[p] < 0) continue;
          sampler_->add_gauge("switch." + sname + ".port" + std::to_string(p) + ".queue_bytes",
                              "bytes", "Egress queue length of the port, all priorities", [sw, p] {
                                uint64_t q = 0;
                                for (int prio = 0; prio < fabric::kNumPriorities; ++prio)
                                  q += sw->queue_bytes(p, prio);
                                return static_cast<double>(q);
                              });
        }
        sampler_->add_gauge("switch." + sname + ".buffer_bytes", "bytes", "Shared buffer in use",
                            [sw] { return double(sw->buffer_used()); });
      }
    }
    check_series_memory(*sampler_, cfg_.end_time);
    sampler_->start();
    observers_.add(sampler_.get());
  }
  if (fabric_ && fabric_->deadlock_detector()) observers_.add(fabric_->deadlock_detector());
  if (!hist_windows_->empty()) observers_.add(hist_windows_.get());
  for (const auto& [name, expr] : cfg_.metrics) {
    std::optional<BottleneckSpec> spec = parse_bottleneck_metric(expr);
    if (!spec) continue;
    // A window to the jobs' end starts where their measured parts do.
    if (spec->until_jobs_end)
      for (const host::JobConfig& j : cfg_.jobs)
        spec->from.ps = std::max(spec->from.ps, j.run_at.ps);
    const nic::Nic& n = host(spec->host).nic();
    HostCapacity cap;
    cap.pcie_bytes_per_s = cfg_.pcie.link_bytes_per_sec();
    cap.port_tx_bps = n.port().tx_rate().bps;
    cap.port_rx_bps = n.port().rx_rate().bps;
    cap.clock_hz = n.config().clock.hz;
    cap.pus = static_cast<uint32_t>(n.config().pu.count);
    cap.tx_schedule_cycles = n.config().latency.tx_schedule;
    cap.rx_parse_cycles = n.config().latency.rx_parse;
    cap.cqe_cycles = n.config().latency.cqe;
    cap.atomic_buffers = n.config().atomics.max_outstanding;
    auto probe =
        std::make_unique<BottleneckProbe>(env_.stats, *spec, cap, &n.atomic_lock_held_ps());
    observers_.add(probe.get());
    bottlenecks_[name] = std::move(probe);
  }
}

Platform::~Platform() = default;

uint16_t Platform::via_udp_sport(const std::string& client, const std::string& server,
                                 const std::string& link) const {
  const fabric::Topology& topo = fabric_->topology();
  const int client_node = topo.find_node(client), server_node = topo.find_node(server);
  int link_index = -1;
  for (size_t l = 0; l < topo.links().size(); ++l)
    if (topo.links()[l].name == link) link_index = static_cast<int>(l);
  if (client_node < 0 || server_node < 0 || link_index < 0)
    throw std::invalid_argument("via: unknown host or link '" + link + "'");
  fabric::FiveTuple ft;
  ft.src_ip = topo.nodes()[client_node].ip;
  ft.dst_ip = topo.nodes()[server_node].ip;
  for (uint32_t port = 0xC000; port <= 0xFFFF; ++port) {
    ft.sport = static_cast<uint16_t>(port);
    for (const fabric::Hop& h : fabric_->path_of(ft))
      if (h.link == link_index) return ft.sport;
  }
  throw std::invalid_argument("no UDP source port takes " + client + " -> " + server +
                              " across link '" + link + "'");
}

host::Host& Platform::host(const std::string& name) {
  auto it = hosts_.find(name);
  if (it == hosts_.end()) throw std::out_of_range("no host named '" + name + "'");
  return *it->second;
}

host::ModeledHost& Platform::modeled_host(const std::string& name) {
  auto* h = dynamic_cast<host::ModeledHost*>(&host(name));
  if (!h) throw std::invalid_argument("host '" + name + "' is not a modeled host");
  return *h;
}

uint64_t Platform::sim_time_ps() const { return sc_core::sc_time_stamp().value(); }

bool Platform::run(const std::function<void(uint64_t)>& progress) {
  const sc_core::sc_time end = cfg_.end_time.sc();
  // Slices only bound how often progress is reported; they add one kernel
  // wake-up each, negligible against the model's events. With QEMU hosts
  // the run loop also paces simulated time and serves the guests between
  // slices.
  const sc_core::sc_time slice(100, sc_core::SC_US);
  pcie::QemuRunLoop loop;
  for (host::QemuHost* q : qemu_hosts_) loop.add(q);
  std::unique_ptr<StdinForwarder> keyboard;
  if (shell_) {
    keyboard = std::make_unique<StdinForwarder>(*shell_);
    loop.add(keyboard.get());
  }
  auto guests_done = [&] {
    if (shell_) return shell_->qemu_exited();  // the interactive session decides
    for (size_t i = 0; i < qemu_hosts_.size(); ++i)
      if (!run_scripts_[i].empty() && !qemu_hosts_[i]->qemu_exited()) return false;
    // A guest without a run script (an interactive shell) runs until
    // end_time or until its QEMU exits.
    for (size_t i = 0; i < qemu_hosts_.size(); ++i)
      if (run_scripts_[i].empty() && !qemu_hosts_[i]->qemu_exited()) return false;
    return true;
  };
  while ((runner_->finished < cfg_.jobs.size() || !guests_done()) &&
         sc_core::sc_time_stamp() < end) {
    // Stop at the next observer's due time too: observers (time series,
    // the deadlock detector) look between kernel runs and add no events.
    observers_.run_due();  // those due now have looked: every due time is ahead
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    const sc_core::sc_time due = observers_.next_due();
    std::optional<sc_core::sc_time> step = loop.next_step(std::min({slice, end - now, due - now}));
    if (!step) break;  // a QEMU ended and its host asked to stop
    sc_core::sc_start(*step);
    if (progress) progress(sim_time_ps());
    if (sc_core::sc_get_status() == sc_core::SC_STOPPED) break;
  }
  // Guests still running at the end are stopped, so nothing outlives us.
  for (host::QemuHost* q : qemu_hosts_)
    if (!q->qemu_exited()) q->stop_qemu();
  collect_guests();
  return runner_->finished == cfg_.jobs.size() && guests_done();
}

void Platform::collect_guests() {
  guests_.clear();
  for (size_t i = 0; i < qemu_hosts_.size(); ++i) {
    host::QemuHost* q = qemu_hosts_[i];
    GuestOutcome g;
    g.name = q->basename();
    g.ready = q->guest_ready();
    g.run_exit = q->run_exit();
    g.qemu_exited = q->qemu_exited();
    g.exit_report = q->exit_report();
    g.console_log = q->config().console_log.empty() && !env_.out_dir.empty()
                        ? env_.out_dir + "/" + g.name + ".console.log"
                        : q->config().console_log;
    // The run script's output: the console lines between READY and the
    // exit marker.
    if (!g.console_log.empty()) {
      std::ifstream in(g.console_log);
      std::string line;
      bool inside = false;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find("MPRDMA-READY") != std::string::npos) {
          inside = true;
          continue;
        }
        if (line.find("MPRDMA-RUN-EXIT") != std::string::npos) inside = false;
        if (inside) g.run_output.push_back(line);
      }
    }
    guests_.push_back(std::move(g));
  }
}

bool Platform::all_ok() const {
  for (size_t i = 0; i < guests_.size(); ++i)
    if (!run_scripts_[i].empty() && (!guests_[i].run_exit || *guests_[i].run_exit != 0))
      return false;
  for (size_t i = 0; i < outcomes_.size(); ++i) {
    const JobOutcome& o = outcomes_[i];
    if (!o.finished || o.results.size() != cfg_.jobs[i].sizes.size()) return false;
    for (const host::SizeResult& r : o.results)
      if (!r.error.empty() || !r.data_ok) return false;
  }
  return true;
}

namespace {
double field_of(const host::SizeResult& r, const std::string& f) {
  if (f == "bw_gbps") return r.bw_gbps;
  if (f == "bw_MBps") return r.bw_MBps;
  if (f == "msg_rate_mpps") return r.msg_rate_mpps;
  if (f == "seconds") return r.seconds;
  if (f == "t_min") return r.t_min;
  if (f == "t_max") return r.t_max;
  if (f == "t_typical") return r.t_typical;
  if (f == "t_avg") return r.t_avg;
  if (f == "t_stdev") return r.t_stdev;
  if (f == "t_p99") return r.t_p99;
  if (f == "t_p999") return r.t_p999;
  if (f == "iterations") return static_cast<double>(r.iterations);
  if (f == "sync_messages") return static_cast<double>(r.sync_messages);
  if (f == "sync_wait_us") return r.sync_wait_us;
  throw std::invalid_argument("unknown result field '" + f + "'");
}
}  // namespace

std::map<std::string, double> Platform::metrics(std::vector<std::string>* missing) const {
  std::map<std::string, double> out;
  for (const GuestMetric& m : cfg_.guest_metrics) {
    const std::regex re(m.pattern);
    bool found = false;
    for (const GuestOutcome& g : guests_) {
      if (g.name != m.host) continue;
      for (const std::string& line : g.run_output) {
        std::smatch match;
        if (std::regex_search(line, match, re)) {
          char* endp = nullptr;
          const std::string text = match[1].str();
          const double v = std::strtod(text.c_str(), &endp);
          if (endp && endp != text.c_str()) {
            out[m.name] = v;
            found = true;
          }
        }
      }
    }
    if (!found && missing) missing->push_back(m.name);
  }
  const double active_s = active_time_s();
  auto series_mean_of = [&](const std::string& sname,
                            const MetricTerm& t) -> std::optional<double> {
    const core::TimeSeries* ts = env_.stats.find_series(sname);
    if (!ts) return std::nullopt;
    return series_mean(ts->points(), cfg_.sample_interval.ps, t.from.ps, t.to.ps);
  };
  std::vector<std::string> aggregates;
  for (const auto& [name, ref] : cfg_.metrics) {
    if (parse_bottleneck_metric(ref)) continue;  // labels()
    if (parse_metric_aggregate(ref)) {
      aggregates.push_back(name);
      continue;
    }
    // A sum is reported only if every term has a figure: a partial sum
    // would look like a real (smaller) result.
    double sum = 0;
    bool complete = true;
    for (const MetricTerm& t : parse_metric(ref)) {
      bool found = false;
      const double before = sum;
      if (t.kind == MetricTerm::Kind::kSeriesAvg) {
        if (const auto v = series_mean_of(t.series.at(0), t)) {
          sum += *v;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kSeriesStdev) {
        const core::TimeSeries* ts = env_.stats.find_series(t.series.at(0));
        const auto v = ts ? series_stdev(ts->points(), cfg_.sample_interval.ps, t.from.ps, t.to.ps)
                          : std::nullopt;
        if (v) {
          sum += *v;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kSeriesReach ||
                 t.kind == MetricTerm::Kind::kSeriesSettle) {
        const BandTime kind =
            t.kind == MetricTerm::Kind::kSeriesReach ? BandTime::kReach : BandTime::kSettle;
        std::vector<const std::vector<core::TimeSeries::Point>*> inputs;
        for (const std::string& sname : t.series)
          if (const core::TimeSeries* ts = env_.stats.find_series(sname))
            inputs.push_back(&ts->points());
        std::optional<std::vector<core::TimeSeries::Point>> jain;
        if (t.band_of_jain && inputs.size() == t.series.size()) jain = jain_series(inputs);
        const std::vector<core::TimeSeries::Point>* points =
            t.band_of_jain ? (jain ? &*jain : nullptr)
                           : (inputs.size() == 1 ? inputs.front() : nullptr);
        const auto v = points ? series_band_time_ps(*points, cfg_.sample_interval.ps, t.band_lo,
                                                    t.band_hi, t.from.ps, t.to.ps, kind)
                              : std::nullopt;
        if (v) {
          sum += static_cast<double>(*v) * 1e-6;  // ps -> us
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kJain) {
        std::vector<double> means;
        for (const std::string& sname : t.series)
          if (const auto v = series_mean_of(sname, t)) means.push_back(*v);
        const auto j = means.size() == t.series.size() ? jain_index(means) : std::nullopt;
        if (j) {
          sum += *j;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kModelState) {
        // The engine's field table at its section's defaults (see
        // vp/nic/transport/transport.md).
        const nic::EngineEntry* e = nic::EngineRegistry::instance().find(t.engine);
        std::vector<nic::StateField> fields;
        if (e && e->state_fields) fields = e->state_fields();
        for (const auto& f : fields) sum += f.bytes;
        found = true;
      } else if (t.kind == MetricTerm::Kind::kDeadlocks) {
        if (fabric_) {
          const fabric::DeadlockDetector* d = fabric_->deadlock_detector();
          sum += d ? static_cast<double>(d->deadlocks().size()) : 0.0;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kBaseRtt) {
        // The smallest sample of the engine's NICs: a packet that met no
        // queue on its way out and its ACK none on the way back.
        std::optional<double> best;
        for (const nic::NicConfig& n : nic_cfgs_) {
          if (n.transport != t.engine) continue;
          const core::Histogram* h = env_.stats.find_histogram("nic." + n.name + ".requester.rtt");
          if (h && h->count() && (!best || h->min() < *best)) best = h->min();
        }
        if (best) {
          sum += *best * 1e-3;  // ns -> us
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kEcnRatio) {
        if (fabric_ && fabric_->egress_port(t.link, t.dir).first) {
          if (!t.windowed) {
            sum += fabric::link_ecn_mark_ratio(*fabric_, env_.stats, t.link, t.dir);
            found = true;
          } else {
            // Equal intervals: the ratio of the two rates' means is the
            // ratio of the counts over the window.
            const std::string pb = fabric::link_egress_stat_prefix(*fabric_, t.link, t.dir);
            const auto marks = series_mean_of(pb + "ecn_marks_mps", t);
            const auto judged = series_mean_of(pb + "ecn_capable_mps", t);
            if (marks && judged) {
              sum += *judged > 0 ? *marks / *judged : 0.0;
              found = true;
            }
          }
        }
      } else if (t.kind == MetricTerm::Kind::kCounterRate) {
        if (const auto v = series_mean_of(t.counter + ".per_s", t)) {
          sum += *v;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kCounter) {
        if (const core::Counter* c = env_.stats.find_counter(t.counter)) {
          sum += static_cast<double>(c->value());
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kHistPct) {
        const core::Histogram* h = env_.stats.find_histogram(t.counter);
        const auto v = t.windowed ? hist_windows_->percentile(t.counter, t.from.ps, t.to.ps, t.pct)
                       : t.mean
                           ? (h && h->count() ? std::optional<double>(h->mean()) : std::nullopt)
                           : histogram_percentile(h, t.pct);
        if (v) {
          sum += *v;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kGoodput) {
        // Every job's every size must have completed (as for job terms).
        double bytes = 0;
        bool all_ok = !outcomes_.empty();
        for (const JobOutcome& o : outcomes_) {
          all_ok &= o.finished && !o.results.empty();
          for (const host::SizeResult& r : o.results) {
            all_ok &= r.error.empty();
            bytes += r.payload_bytes();
          }
        }
        if (all_ok && active_s > 0) {
          sum += bytes * 8.0 / active_s / 1e9;
          found = true;
        }
      } else if (t.kind == MetricTerm::Kind::kLink) {
        if (env_.stats.find_counter("link." + t.link + "." + t.dir + ".tx_bytes")) {
          sum += fabric::link_avg_gbps(env_.stats, t.link, t.dir, active_s);
          found = true;
        }
      } else {
        for (const JobOutcome& o : outcomes_) {
          if (o.name != t.job) continue;
          for (const host::SizeResult& r : o.results)
            if (std::to_string(r.bytes) == t.size && r.error.empty()) {
              sum += field_of(r, t.field);
              found = true;
            }
        }
      }
      sum = before + t.factor * (sum - before);
      complete &= found;
    }
    if (complete)
      out[name] = sum;
    else if (missing)
      missing->push_back(name);
  }
  // min/max/average(...) of the sums: reported only when every metric they
  // stand for has a figure.
  std::vector<std::string> sums;
  for (const auto& [name, ref] : cfg_.metrics)
    if (!parse_metric_aggregate(ref) && !parse_bottleneck_metric(ref)) sums.push_back(name);
  for (const std::string& name : aggregates) {
    const MetricAggregate agg = *parse_metric_aggregate(cfg_.metrics.at(name));
    std::set<std::string> members;  // each metric once, however many arguments name it
    for (const std::string& arg : agg.args)
      for (const std::string& m : aggregate_arg_metrics(arg, sums)) members.insert(m);
    std::optional<double> v;
    double total = 0;
    bool complete = true;
    for (const std::string& m : members) {
      auto it = out.find(m);
      if (it == out.end()) {
        complete = false;
        continue;
      }
      total += it->second;
      if (!v || (agg.op == "min" ? it->second < *v : it->second > *v)) v = it->second;
    }
    if (agg.op == "average" && v) v = total / static_cast<double>(members.size());
    if (complete && v)
      out[name] = *v;
    else if (missing)
      missing->push_back(name);
  }
  return out;
}

std::map<std::string, std::string> Platform::labels(std::vector<std::string>* missing) const {
  std::map<std::string, std::string> out;
  for (const auto& [name, probe] : bottlenecks_) {
    const std::vector<ResourceUse> r = probe->ranking();
    if (!r.empty())
      out[name] = bottleneck_name(r);
    else if (missing)
      missing->push_back(name);
  }
  return out;
}

nlohmann::json Platform::bottlenecks_json() const {
  if (bottlenecks_.empty()) return nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, probe] : bottlenecks_) {
    nlohmann::json j;
    j["host"] = probe->spec().host;
    j["from_s"] = static_cast<double>(probe->spec().from.ps) * 1e-12;
    if (!probe->spec().until_jobs_end) j["to_s"] = static_cast<double>(probe->spec().to.ps) * 1e-12;
    j["until_jobs_end"] = probe->spec().until_jobs_end;
    j["utilisation"] = nlohmann::json::array();
    for (const ResourceUse& r : probe->ranking()) {
      nlohmann::json u = {{"resource", r.resource}, {"utilisation", r.utilisation}};
      if (r.credit_stall > 0) u["credit_stall"] = r.credit_stall;
      j["utilisation"].push_back(u);
    }
    out[name] = j;
  }
  return out;
}

double Platform::active_time_s() const {
  double first = -1, last = -1;
  const double now = sc_core::sc_time_stamp().to_seconds();
  for (const JobOutcome& o : outcomes_) {
    if (!o.started) continue;
    if (first < 0 || o.run_from_s < first) first = o.run_from_s;
    last = std::max(last, o.finished ? o.end_s : now);
  }
  return first < 0 ? now : last - first;
}

nlohmann::json Platform::fabric_json() const {
  if (!fabric_) return nullptr;
  return fabric_->describe(env_.stats, active_time_s());
}

nlohmann::json Platform::flows_json() const {
  nlohmann::json flows = nlohmann::json::object();
  for (const GuestOutcome& g : guests_) {
    nlohmann::json j;
    j["kind"] = "guest";
    j["ready"] = g.ready;
    if (g.run_exit) j["run_exit"] = *g.run_exit;
    j["qemu_exited"] = g.qemu_exited;
    if (!g.exit_report.empty()) j["qemu_exit"] = g.exit_report;
    j["output"] = g.run_output;
    flows["guest." + g.name] = j;
  }
  for (size_t i = 0; i < outcomes_.size(); ++i) {
    const JobOutcome& o = outcomes_[i];
    const host::JobConfig& cfg = cfg_.jobs[i];
    nlohmann::json j;
    j["app"] = host::JobConfig::app_name(cfg.app);
    j["client"] = cfg.client;
    j["server"] = cfg.server;
    if (cfg.udp_sport) j["udp_sport"] = cfg.udp_sport;
    j["finished"] = o.finished;
    j["start_s"] = o.start_s;
    j["run_from_s"] = o.run_from_s;
    j["end_s"] = o.end_s;
    nlohmann::json sizes = nlohmann::json::object();
    for (const host::SizeResult& r : o.results) {
      nlohmann::json s;
      s["bytes"] = r.bytes;
      s["iterations"] = r.iterations;
      s["data_ok"] = r.data_ok;
      if (r.payload) s["payload_bytes"] = r.payload;  // write_flows
      if (!r.error.empty()) s["error"] = r.error;
      for (const std::string& f : metric_fields()) s[f] = field_of(r, f);
      sizes[std::to_string(r.bytes)] = s;
    }
    j["sizes"] = sizes;
    flows[o.name] = j;
  }
  return flows;
}

}  // namespace mprdma::platform
