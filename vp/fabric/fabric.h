// The datacenter fabric of a scenario: a topology (back to back, the
// MP-RDMA testbed, leaf-spine, fat tree or an explicit node/link list)
// instantiated as Switch and EthLink modules, shortest-path ECMP routes in
// every switch, a timeline of link events (down, up, rate, loss) and pcap
// taps. The platform cables each host's NIC to the link and side the fabric
// gives it. See fabric.md for the naming scheme, addresses and ports.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <systemc>
#include <utility>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/config.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/fabric/deadlock_detector.h"
#include "vp/fabric/eth_link.h"
#include "vp/fabric/routing.h"
#include "vp/fabric/switch.h"
#include "vp/fabric/topology.h"

namespace mprdma::fabric {

// A node of an explicit topology.
struct FabricNodeEntry {
  std::string name;
  enum class Kind { host, switch_node };
  Kind kind = Kind::host;
  std::string ip;   // hosts: "" assigns one automatically
  std::string mac;  // hosts: "" assigns one automatically
  void bind(core::Binder& b);
};

// A link of an explicit topology.
struct FabricLinkEntry {
  std::string name;                  // "" -> "<a>-<b>"
  std::string a, b;                  // node names; side 0 and side 1
  int64_t a_port = -1, b_port = -1;  // switch ports; -1 assigns the lowest free one
  std::string rate;                  // "" -> the fabric's access_rate
  std::string delay;                 // "" -> the fabric's link.delay
  void bind(core::Binder& b);
};

// One entry of the link timeline.
struct LinkEventConfig {
  core::Duration at;
  std::string link;
  enum class Action { down, up, rate, loss, loss_ip_id };
  static const std::vector<std::pair<const char*, Action>>& actions();
  static const char* action_name(Action a);
  Action action = Action::down;
  std::string value;  // rate: "1Gbps"; loss: "0.01"; loss_ip_id: N
  enum class Dir { both, a2b, b2a };
  Dir dir = Dir::both;
  void bind(core::Binder& b);
  // The change this entry makes; throws std::invalid_argument naming the
  // bad value.
  LinkChange change() const;
};

// ECN of the switch egress port that sends into one direction of a link,
// replacing the fabric's switch.ecn there (e.g. a mis-configured port). A
// field left empty keeps the value of switch.ecn.
struct EcnOverride {
  std::string link;  // link name
  std::string dir;   // a2b | b2a: the direction whose sender (a switch) marks
  std::string enabled, kmin, kmax, pmax, queue, weight;  // "" = switch.ecn's
  void bind(core::Binder& b);
  // `base` with this entry's fields; throws std::invalid_argument naming
  // the field and value that do not parse or are out of range.
  EcnConfig apply(const EcnConfig& base) const;
};

struct FabricConfig {
  // none: no fabric (the scenario's hosts/links cable the NICs).
  enum class Kind { none, back_to_back, mp_rdma_testbed, leaf_spine, fat_tree, explicit_graph };
  static const std::vector<std::pair<const char*, Kind>>& topologies();
  static const char* topology_name(Kind k);
  Kind topology = Kind::none;
  // Generated topologies. The defaults are the MP-RDMA testbed.
  int64_t spines = 4;
  int64_t leaves = 2;  // ToR switches of the testbed
  int64_t hosts_per_leaf = 5;
  int64_t k = 4;                      // fat_tree
  core::Bandwidth access_rate{40e9};  // host links (explicit: links without a rate)
  core::Bandwidth uplink_rate{40e9};  // switch-to-switch links
  // Properties of every link (delay, loss, loss modes, pcap_snaplen); its
  // name, rate and pcap keys are not used.
  LinkConfig link;
  SwitchConfig sw;                     // bound as "switch": every switch's configuration
  std::vector<FabricNodeEntry> nodes;  // explicit
  std::vector<FabricLinkEntry> links;  // explicit
  std::vector<LinkEventConfig> events;
  // Per-port ECN: the egress port sending into link.dir uses its entry.
  std::vector<EcnOverride> ecn_overrides;
  // Routing reacts to link failures and repairs (down/up events): after
  // `reroute_delay` every switch gets shortest-path routes over the links
  // that are up, as a converged routing protocol would install.
  bool reroute = true;
  core::Duration reroute_delay{0};
  // PFC deadlock detection (when PFC is on): look for a cyclic buffer
  // dependency every `deadlock_check` (0 turns it off) and report one that
  // persists over `deadlock_confirm` consecutive checks.
  core::Duration deadlock_check{100'000'000};  // 100 us in ps
  int64_t deadlock_confirm = 3;
  // Links to capture, separated by commas or spaces; "*" captures all.
  std::string pcap;

  void bind(core::Binder& b);
  bool enabled() const { return topology != Kind::none; }
  // The finalized graph; throws TopologyError (std::invalid_argument)
  // naming the problem.
  Topology build_topology() const;
  // The pcap list as names (every link for "*"); needs the topology.
  std::vector<std::string> pcap_links(const Topology& topo) const;
  // Every problem of this configuration, each naming what is wrong (an
  // empty list when it is fine). Used by bind() and by Fabric.
  std::vector<std::string> problems() const;
};

class Fabric : public sc_core::sc_module {
 public:
  // Where a host's NIC plugs in, and its addresses.
  struct HostPort {
    std::string name;
    uint32_t ip = 0;
    MacBytes mac{};
    EthLink* link = nullptr;
    int side = 0;
    core::Bandwidth rate;  // of its access link
  };

  // Throws std::invalid_argument naming the problem (see
  // FabricConfig::problems(); a switch that rejects its configuration is
  // named in the message).
  Fabric(sc_core::sc_module_name name, const FabricConfig& cfg, core::SimEnv& env);
  ~Fabric() override;

  const FabricConfig& config() const { return cfg_; }
  const Topology& topology() const { return topo_; }
  const Routing& routing() const { return *routing_; }
  // In host order (the topology's).
  const std::vector<HostPort>& hosts() const { return hosts_; }
  // In the topology's link order.
  const std::vector<EthLink*>& links() const { return link_ptrs_; }
  EthLink* link(const std::string& name) const;         // nullptr if absent
  Switch* switch_named(const std::string& name) const;  // nullptr if absent
  // The switch port that transmits into direction `dir` (a2b | b2a) of
  // `link`: {switch, port}, or {nullptr, -1} for an unknown link or
  // direction, or when that side is a host.
  std::pair<Switch*, int> egress_port(const std::string& link, const std::string& dir) const;
  const std::vector<PathGroup>& paths() const { return topo_.path_groups(); }
  // The links a packet of `ft` crosses, as the switches' ECMP hashes choose.
  std::vector<Hop> path_of(const FiveTuple& ft) const;
  // The PFC deadlock detector (nullptr when PFC or detection is off).
  // The platform's run loop lets it look (it is a core::Observer).
  const DeadlockDetector* deadlock_detector() const { return deadlock_.get(); }
  DeadlockDetector* deadlock_detector() { return deadlock_.get(); }

  // The "fabric" section of results.json: topology, hosts with addresses
  // and attachment, switches with their ports, links, path groups; with
  // `active_s` > 0 also each link direction's average wire rate over it.
  nlohmann::json describe(const core::StatsRegistry& stats, double active_s) const;
  // One CSV row per connected switch port (switch, port, peer, link,
  // direction, rate, average tx Gb/s and utilisation over `active_s`,
  // frames, ECN marks, PAUSE sent/received, drops, largest queue): the
  // per-port table users load into a spreadsheet or pandas.
  void write_port_table(std::ostream& os, const core::StatsRegistry& stats, double active_s) const;

 private:
  FabricConfig cfg_;
  core::LogChannel& log_;
  Topology topo_;
  std::unique_ptr<Routing> routing_;
  std::vector<std::unique_ptr<EthLink>> links_;
  std::vector<EthLink*> link_ptrs_;
  std::vector<std::unique_ptr<Switch>> switches_;
  std::vector<Switch*> switch_of_node_;  // node index -> switch (nullptr for hosts)
  std::vector<HostPort> hosts_;
  // Rerouting: links down as the timeline says, and the routing in force.
  void install_routes();
  void reroute_after(size_t event);
  std::vector<bool> down_;
  std::unique_ptr<core::Calendar> calendar_;
  core::Counter* reroutes_ = nullptr;
  std::unique_ptr<DeadlockDetector> deadlock_;
};

// The metric term "link.<name>.<dir>.avg_gbps": wire bits sent in that
// direction divided by `active_s`, in Gb/s.
double link_avg_gbps(const core::StatsRegistry& stats, const std::string& link,
                     const std::string& dir, double active_s);

// The metric term "link.<name>.<dir>.ecn_mark_ratio": ECN marks over
// ECN-capable frames judged by RED at the switch port sending into that
// direction (0 when it judged none); std::out_of_range when that side is
// not a switch port.
double link_ecn_mark_ratio(const Fabric& fabric, const core::StatsRegistry& stats,
                           const std::string& link, const std::string& dir);

// "switch.<switch>.port<p>.": the statistics prefix of the switch port
// sending into that direction of a link (its ecn_marks, ecn_capable, ...);
// std::out_of_range when that side is not a switch port.
std::string link_egress_stat_prefix(const Fabric& fabric, const std::string& link,
                                    const std::string& dir);

}  // namespace mprdma::fabric
