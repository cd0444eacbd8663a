#include "vp/fabric/fabric.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <stdexcept>

namespace mprdma::fabric {

namespace {

// The fabric's `link:` section: the LinkConfig keys that make sense for
// every link of a generated topology (names and rates come from the
// topology, captures from `pcap`).
struct LinkDefaults {
  LinkConfig& cfg;
  void bind(core::Binder& b) {
    b.field("delay", cfg.delay,
            "Propagation delay of every link, last bit sent to last bit received, excluding "
            "serialisation (cable plus PHY latency of both ends).");
    b.field("loss", cfg.loss,
            "Probability that a frame is lost, drawn independently per frame and direction from "
            "the seeded stream link.<name>.<dir>.loss, on every link.",
            0.0, 1.0, "probability");
    cfg.bind_loss_modes(b);
    b.field("pcap_snaplen", cfg.pcap_snaplen,
            "Bytes of each frame kept in the captures of the links named in 'pcap'; 0 keeps "
            "whole frames.",
            0, 262144);
  }
};

int side_of_dir(LinkEventConfig::Dir dir) {
  if (dir == LinkEventConfig::Dir::a2b) return 0;
  if (dir == LinkEventConfig::Dir::b2a) return 1;
  return EthLink::kBothSides;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',' || c == ' ' || c == '\t') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

void FabricNodeEntry::bind(core::Binder& b) {
  b.field("name", name, "Node name, unique; links, jobs and hosts: entries refer to it.");
  b.choice("kind", kind, {{"host", Kind::host}, {"switch", Kind::switch_node}},
           "A host (one NIC, one link) or a switch.");
  b.field("ip", ip,
          "Hosts: IPv4 address (e.g. 10.0.0.7); empty assigns the automatic address of the "
          "host's position.");
  b.field("mac", mac,
          "Hosts: MAC address (e.g. 02:00:00:00:00:07); empty assigns the automatic one.");
  if (!b.reading()) return;
  if (name.empty()) b.error("every node needs a name");
  if (kind == Kind::switch_node && (!ip.empty() || !mac.empty()))
    b.error("switch '" + name + "': only hosts take ip and mac");
  if (!ip.empty() && !parse_ip(ip))
    b.error("node '" + name + "': '" + ip + "' is not an IPv4 address");
  if (!mac.empty() && !parse_mac(mac))
    b.error("node '" + name + "': '" + mac + "' is not a MAC address (aa:bb:cc:dd:ee:ff)");
}

void FabricLinkEntry::bind(core::Binder& bb) {
  bb.field("name", name, "Link name; empty: \"<a>-<b>\". Must not contain '.'.");
  bb.field("a", a, "Node at side 0 (a2b is the direction from a to b).");
  bb.field("b", b, "Node at side 1.");
  bb.field("a_port", a_port, "Port of a if it is a switch; -1 takes its lowest free port.", -1,
           65535);
  bb.field("b_port", b_port, "Port of b if it is a switch; -1 takes its lowest free port.", -1,
           65535);
  bb.field("rate", rate, "Line rate (e.g. 40Gbps); empty: the fabric's access_rate.");
  bb.field("delay", delay, "Propagation delay (e.g. 200ns); empty: the fabric's link.delay.");
  if (!bb.reading()) return;
  try {
    if (!rate.empty() && !(core::parse_bandwidth(rate).bps > 0))
      bb.error("link '" + name + "': rate must be positive");
  } catch (const core::UnitError& e) {
    bb.error("link rate '" + rate + "': " + e.what());
  }
  try {
    if (!delay.empty()) core::parse_duration(delay);
  } catch (const core::UnitError& e) {
    bb.error("link delay '" + delay + "': " + e.what());
  }
}

void LinkEventConfig::bind(core::Binder& b) {
  b.field("at", at, "Simulated time of the change.");
  b.field("link", link, "Link name (see the fabric's naming scheme in vp/fabric/fabric.md).");
  b.choice("action", action, actions(),
           "down: frames in flight are lost and frames sent are lost (the transmitter keeps "
           "its pace); up: frames sent from now on arrive; rate: new line rate (a frame being "
           "sent finishes at the old one); loss: random loss probability; loss_ip_id: drop IPv4 "
           "frames with ip_id % N == 0 (0: off).");
  b.field("value", value,
          "rate: a bandwidth (\"1Gbps\"); loss: a probability (\"0.01\"); loss_ip_id: N; "
          "down/up: none.");
  b.choice("dir", dir, {{"both", Dir::both}, {"a2b", Dir::a2b}, {"b2a", Dir::b2a}},
           "Direction(s) changed.");
  if (!b.reading()) return;
  try {
    change();
  } catch (const std::invalid_argument& e) {
    b.error(e.what());
  }
}

const std::vector<std::pair<const char*, LinkEventConfig::Action>>& LinkEventConfig::actions() {
  static const std::vector<std::pair<const char*, Action>> a = {{"down", Action::down},
                                                                {"up", Action::up},
                                                                {"rate", Action::rate},
                                                                {"loss", Action::loss},
                                                                {"loss_ip_id", Action::loss_ip_id}};
  return a;
}

const char* LinkEventConfig::action_name(Action a) {
  for (const auto& [name, value] : actions())
    if (value == a) return name;
  return "?";
}

LinkChange LinkEventConfig::change() const {
  LinkChange c;
  c.side = side_of_dir(dir);
  const std::string what = std::string(action_name(action)) + " event on link '" + link + "'";
  if (action == Action::down || action == Action::up) {
    c.kind = action == Action::down ? LinkChange::Kind::kDown : LinkChange::Kind::kUp;
    if (!value.empty()) throw std::invalid_argument(what + " takes no value");
    return c;
  }
  if (value.empty()) throw std::invalid_argument(what + " needs a value");
  if (action == Action::rate) {
    c.kind = LinkChange::Kind::kRate;
    try {
      c.rate = core::parse_bandwidth(value);
    } catch (const core::UnitError& e) {
      throw std::invalid_argument(what + ": '" + value + "': " + e.what());
    }
    if (!(c.rate.bps > 0)) throw std::invalid_argument(what + ": the rate must be positive");
    return c;
  }
  char* end = nullptr;
  if (action == Action::loss) {
    c.kind = LinkChange::Kind::kLoss;
    c.loss = std::strtod(value.c_str(), &end);
    if (*end || end == value.c_str() || !(c.loss >= 0.0 && c.loss <= 1.0))
      throw std::invalid_argument(what + ": '" + value + "' is not a probability in [0, 1]");
    return c;
  }
  if (action == Action::loss_ip_id) {
    c.kind = LinkChange::Kind::kLossIpId;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (*end || end == value.c_str() || n < 0 || n > 65536)
      throw std::invalid_argument(what + ": '" + value + "' is not an integer in [0, 65536]");
    c.ip_id_modulo = static_cast<uint64_t>(n);
    return c;
  }
  throw std::invalid_argument(what + ": unknown action");
}

void EcnOverride::bind(core::Binder& b) {
  b.field("link", link, "Link name (the fabric's naming scheme).");
  b.field("dir", dir,
          "a2b or b2a: the direction of the link whose sender, a switch egress port, uses "
          "this ECN configuration (a2b is upward in generated topologies).");
  b.field("enabled", enabled, "true or false; empty: switch.ecn.enabled.");
  b.field("kmin", kmin, "RED kmin of this port (e.g. 240KB); empty: switch.ecn.kmin.");
  b.field("kmax", kmax, "RED kmax of this port; empty: switch.ecn.kmax.");
  b.field("pmax", pmax, "Marking probability at kmax, in [0, 1]; empty: switch.ecn.pmax.");
  b.field("queue", queue, "instantaneous or average; empty: switch.ecn.queue.");
  b.field("weight", weight, "EWMA weight in (0, 1]; empty: switch.ecn.weight.");
  if (!b.reading()) return;
  if (link.empty()) b.error("an ECN override needs a link");
  if (dir != "a2b" && dir != "b2a")
    b.error("ECN override of link '" + link + "': dir must be a2b or b2a (got '" + dir + "')");
  // Values that do not parse; kmin against kmax is judged by the fabric
  // once merged with switch.ecn (FabricConfig::problems()).
  EcnConfig wide;
  wide.kmin = core::Bytes{0};
  wide.kmax = core::Bytes{UINT64_MAX};
  try {
    apply(wide);
  } catch (const std::invalid_argument& e) {
    b.error(e.what());
  }
}

EcnConfig EcnOverride::apply(const EcnConfig& base) const {
  EcnConfig e = base;
  const std::string what = "ECN override of link '" + link + "' " + dir;
  auto bad = [&](const char* key, const std::string& v, const std::string& why) {
    return std::invalid_argument(what + ": " + key + " '" + v + "' " + why);
  };
  if (!enabled.empty()) {
    if (enabled == "true")
      e.enabled = true;
    else if (enabled == "false")
      e.enabled = false;
    else
      throw bad("enabled", enabled, "is not true or false");
  }
  auto bytes = [&](const char* key, const std::string& v, core::Bytes& out) {
    if (v.empty()) return;
    try {
      out = core::parse_bytes(v);
    } catch (const core::UnitError& err) {
      throw bad(key, v, err.what());
    }
  };
  bytes("kmin", kmin, e.kmin);
  bytes("kmax", kmax, e.kmax);
  auto number = [&](const char* key, const std::string& v, double& out, bool zero_ok) {
    if (v.empty()) return;
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (*end || end == v.c_str() || !(zero_ok ? x >= 0.0 : x > 0.0) || !(x <= 1.0))
      throw bad(key, v, zero_ok ? "is not a number in [0, 1]" : "is not a number in (0, 1]");
    out = x;
  };
  number("pmax", pmax, e.pmax, true);
  number("weight", weight, e.weight, false);
  if (!queue.empty()) {
    if (queue != "instantaneous" && queue != "average")
      throw bad("queue", queue, "is not instantaneous or average");
    e.queue = queue == "average" ? EcnConfig::Queue::average : EcnConfig::Queue::instantaneous;
  }
  if (e.enabled && e.kmin.n > e.kmax.n)
    throw std::invalid_argument(what + ": kmin (" + core::to_string(e.kmin) + ") exceeds kmax (" +
                                core::to_string(e.kmax) + ")");
  return e;
}

void FabricConfig::bind(core::Binder& b) {
  b.choice("topology", topology, topologies(),
           "none: no fabric, the scenario's hosts and links cable the NICs. back_to_back: h0 and "
           "h1 on one link; mp_rdma_testbed: the MP-RDMA testbed (ToRs t<i>, spines s<j>, hosts "
           "t<i>h<j>); leaf_spine: leaves l<i>, spines s<j>, hosts l<i>h<j>; fat_tree: 3 tiers "
           "of parameter k (hosts p<pod>e<edge>h<j>); explicit: the nodes and links lists. "
           "Names, ports and addresses: vp/fabric/fabric.md.");
  b.field("spines", spines, "Spine switches (mp_rdma_testbed, leaf_spine).", 1, 4096);
  b.field("leaves", leaves, "Leaf (ToR) switches (mp_rdma_testbed, leaf_spine).", 1, 4096);
  b.field("hosts_per_leaf", hosts_per_leaf, "Hosts under each leaf (mp_rdma_testbed, leaf_spine).",
          1, 4096);
  b.field("k", k,
          "Fat-tree parameter: k pods, k/2 edge and k/2 aggregation switches per pod, "
          "(k/2)^2 cores, k^3/4 hosts; even.",
          2, 64);
  b.field("access_rate", access_rate,
          "Rate of host links (explicit topologies: of links that give no rate).");
  b.field("uplink_rate", uplink_rate, "Rate of switch-to-switch links.");
  LinkDefaults link_defaults{link};
  b.section("link", link_defaults, "Properties shared by every link of the fabric.");
  b.section("switch", sw, "Configuration of every switch.");
  b.list("nodes", nodes, "explicit: the hosts and switches, hosts in host order.");
  b.list("links", links, "explicit: the links.");
  b.list("events", events, "Timeline of link changes.");
  b.list("ecn_overrides", ecn_overrides,
         "Per-port ECN: the switch egress port sending into one direction of a link uses the "
         "entry's fields instead of switch.ecn (fields left empty keep switch.ecn's). "
         "vp/fabric/fabric.md.");
  b.field("reroute", reroute,
          "Routing reacts to down/up events: switches get shortest-path routes over the links "
          "that are up (a converged routing protocol). Off: routes stay as built and traffic "
          "to a failed link is lost.");
  b.field("reroute_delay", reroute_delay,
          "Time from a link going down or up to the new routes (routing convergence).");
  b.field("deadlock_check", deadlock_check,
          "With PFC on: how often the deadlock detector looks for a cyclic buffer dependency "
          "among paused egress queues (0 turns it off).");
  b.field("deadlock_confirm", deadlock_confirm,
          "Consecutive checks a cycle must persist to be reported as a deadlock.", 1, 1000);
  b.field("pcap", pcap,
          "Links to capture to <out>/<link>.pcap, separated by commas or spaces (\"t0-s0, "
          "t0-s1\"); \"*\" captures every link.");
  if (!b.reading()) return;
  for (const std::string& p : problems()) b.error(p);
}

const std::vector<std::pair<const char*, FabricConfig::Kind>>& FabricConfig::topologies() {
  static const std::vector<std::pair<const char*, Kind>> t = {
      {"none", Kind::none},
      {"back_to_back", Kind::back_to_back},
      {"mp_rdma_testbed", Kind::mp_rdma_testbed},
      {"leaf_spine", Kind::leaf_spine},
      {"fat_tree", Kind::fat_tree},
      {"explicit", Kind::explicit_graph}};
  return t;
}

const char* FabricConfig::topology_name(Kind k) {
  for (const auto& [name, value] : topologies())
    if (value == k) return name;
  return "?";
}

Topology FabricConfig::build_topology() const {
  const int S = static_cast<int>(spines), L = static_cast<int>(leaves),
            H = static_cast<int>(hosts_per_leaf);
  switch (topology) {
    case Kind::back_to_back:
      return make_back_to_back(access_rate, link.delay);
    case Kind::mp_rdma_testbed:
      return make_mp_rdma_testbed(L, S, H, access_rate, uplink_rate, link.delay);
    case Kind::leaf_spine:
      return make_leaf_spine(S, L, H, access_rate, uplink_rate, link.delay);
    case Kind::fat_tree:
      return make_fat_tree(static_cast<int>(k), access_rate, uplink_rate, link.delay);
    case Kind::none:
      throw TopologyError("no topology (topology: none)");
    case Kind::explicit_graph:
      break;
  }
  Topology t;
  for (const FabricNodeEntry& n : nodes) {
    if (n.kind == FabricNodeEntry::Kind::switch_node) {
      t.add_switch(n.name);
      continue;
    }
    std::optional<uint32_t> ip;
    std::optional<MacBytes> mac;
    if (!n.ip.empty()) {
      ip = parse_ip(n.ip);
      if (!ip) throw TopologyError("node '" + n.name + "': '" + n.ip + "' is not an IPv4 address");
    }
    if (!n.mac.empty()) {
      mac = parse_mac(n.mac);
      if (!mac) throw TopologyError("node '" + n.name + "': '" + n.mac + "' is not a MAC address");
    }
    t.add_host(n.name, ip, mac);
  }
  for (const FabricLinkEntry& l : links) {
    const std::string name = l.name.empty() ? l.a + "-" + l.b : l.name;
    core::Bandwidth rate = access_rate;
    core::Duration delay = link.delay;
    try {
      if (!l.rate.empty()) rate = core::parse_bandwidth(l.rate);
      if (!l.delay.empty()) delay = core::parse_duration(l.delay);
    } catch (const core::UnitError& e) {
      throw TopologyError("link '" + name + "': " + e.what());
    }
    t.add_link(l.a, l.b, rate, delay, static_cast<int>(l.a_port), static_cast<int>(l.b_port), name);
  }
  t.finalize();
  return t;
}

std::vector<std::string> FabricConfig::pcap_links(const Topology& topo) const {
  std::vector<std::string> names = split_names(pcap);
  if (std::find(names.begin(), names.end(), "*") != names.end()) {
    names.clear();
    for (const TopoLink& l : topo.links()) names.push_back(l.name);
  }
  return names;
}

std::vector<std::string> FabricConfig::problems() const {
  std::vector<std::string> out;
  if (!enabled()) {
    if (!nodes.empty() || !links.empty() || !events.empty())
      out.push_back("nodes, links and events need a topology (topology: none)");
    return out;
  }
  if (topology != Kind::explicit_graph && (!nodes.empty() || !links.empty()))
    out.push_back("nodes and links are only for topology: explicit (this is " +
                  std::string(topology_name(topology)) + ")");
  std::optional<Topology> topo;
  try {
    topo = build_topology();
  } catch (const std::invalid_argument& e) {
    out.push_back(e.what());
  }

  // Every switch gets this configuration; a threshold above the shared
  // buffer could never be reached (or would admit more than the chip has).
  std::string which = "every switch";
  if (topo) {
    if (topo->switches().empty()) {
      which.clear();
    } else {
      which = "switch '" + topo->nodes()[topo->switches().front()].name + "'";
      if (topo->switches().size() > 1) which += " (and every other switch)";
    }
  }
  if (!which.empty()) {
    const uint64_t buffer = sw.buffer.n;
    auto check = [&](const char* key, const core::Bytes& v, bool active) {
      if (active && v.n > buffer)
        out.push_back(which + ": " + key + " (" + core::to_string(v) +
                      ") is above the buffer size (" + core::to_string(sw.buffer) + ")");
    };
    // The same limits the Switch checks when it is built (switch.md), here
    // so that the scenario loader reports them with the file and line.
    check("switch.ecn.kmin", sw.ecn.kmin, sw.ecn.enabled);
    check("switch.ecn.kmax", sw.ecn.kmax, sw.ecn.enabled);
    check("switch.pfc.xoff", sw.pfc.xoff, sw.pfc.enabled);
    if (sw.pfc.xoff.n <= buffer)
      check("switch.pfc.xoff + switch.pfc.headroom", core::Bytes{sw.pfc.xoff.n + sw.pfc.headroom.n},
            sw.pfc.enabled);
  }

  if (topo) {
    for (const std::string& name : pcap_links(*topo))
      if (topo->find_link(name) < 0) out.push_back("pcap names unknown link '" + name + "'");
  }
  std::set<std::string> overridden;
  for (size_t i = 0; i < ecn_overrides.size(); ++i) {
    const EcnOverride& o = ecn_overrides[i];
    const std::string where =
        "ecn_overrides[" + std::to_string(i) + "] (link '" + o.link + "' " + o.dir + ")";
    if (o.dir != "a2b" && o.dir != "b2a") {
      out.push_back(where + ": dir must be a2b or b2a");
      continue;
    }
    if (!overridden.insert(o.link + "." + o.dir).second)
      out.push_back(where + ": a second override of the same port");
    EcnConfig e;
    try {
      e = o.apply(sw.ecn);
    } catch (const std::invalid_argument& err) {
      out.push_back("ecn_overrides[" + std::to_string(i) + "]: " + err.what());
      continue;
    }
    if (e.enabled && e.kmax.n > sw.buffer.n)
      out.push_back(where + ": kmax (" + core::to_string(e.kmax) + ") is above the buffer size (" +
                    core::to_string(sw.buffer) + ")");
    if (!topo) continue;
    const int l = topo->find_link(o.link);
    if (l < 0) {
      out.push_back(where + " names unknown link '" + o.link + "'");
      continue;
    }
    const int sender = topo->links()[l].node[o.dir == "a2b" ? 0 : 1];
    if (topo->nodes()[sender].kind != NodeKind::kSwitch)
      out.push_back(where + ": that direction is sent by host '" + topo->nodes()[sender].name +
                    "'; only switch egress ports mark ECN");
  }
  for (size_t i = 0; i < events.size(); ++i) {
    const LinkEventConfig& e = events[i];
    const std::string where = "events[" + std::to_string(i) + "]";
    if (topo && topo->find_link(e.link) < 0)
      out.push_back(where + " names unknown link '" + e.link + "'");
    try {
      e.change();
    } catch (const std::invalid_argument& err) {
      out.push_back(where + ": " + err.what());
    }
  }
  return out;
}

Fabric::Fabric(sc_core::sc_module_name name, const FabricConfig& cfg, core::SimEnv& env)
    : sc_core::sc_module(name), cfg_(cfg), log_(core::Log::channel("fabric")) {
  const std::vector<std::string> problems = cfg_.problems();
  if (!problems.empty()) throw std::invalid_argument("fabric: " + join(problems, "; "));
  topo_ = cfg_.build_topology();
  routing_ = std::make_unique<Routing>(topo_);

  const std::vector<std::string> taps = cfg_.pcap_links(topo_);
  const std::set<std::string> tapped(taps.begin(), taps.end());
  for (const TopoLink& tl : topo_.links()) {
    LinkConfig lc = cfg_.link;
    lc.name = tl.name;
    lc.rate = tl.rate;
    lc.delay = tl.delay;
    lc.pcap = tapped.count(tl.name) > 0;
    links_.push_back(std::make_unique<EthLink>(tl.name.c_str(), lc, env));
    link_ptrs_.push_back(links_.back().get());
  }

  switch_of_node_.assign(topo_.nodes().size(), nullptr);
  for (int n : topo_.switches()) {
    const TopoNode& node = topo_.nodes()[n];
    std::unique_ptr<Switch> s;
    try {
      s = std::make_unique<Switch>(node.name.c_str(), static_cast<int>(node.port_link.size()),
                                   cfg_.sw, env);
    } catch (const std::invalid_argument& e) {
      // The Switch names itself and the parameter.
      throw std::invalid_argument(std::string("fabric: ") + e.what());
    }
    for (size_t p = 0; p < node.port_link.size(); ++p) {
      const int l = node.port_link[p];
      if (l >= 0) s->attach(static_cast<int>(p), link_ptrs_[l], topo_.side_of(l, n));
    }
    // A stream per switch: the scenario seed moves every switch's hash,
    // and adding a switch does not move the others'.
    s->set_ecmp_seed(env.random.stream("switch." + node.name + ".ecmp").next_u64());
    for (const EcnOverride& o : cfg_.ecn_overrides) {
      const int l = topo_.find_link(o.link);
      const int side = o.dir == "a2b" ? 0 : 1;
      if (topo_.links()[l].node[side] != n) continue;
      try {
        s->set_port_ecn(topo_.links()[l].port[side], o.apply(cfg_.sw.ecn));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("fabric: ") + e.what());
      }
      MPR_LOG(log_, info,
              "switch " << node.name << " port " << topo_.links()[l].port[side] << " (link "
                        << o.link << " " << o.dir << "): ECN overridden");
    }
    switch_of_node_[n] = s.get();
    switches_.push_back(std::move(s));
  }
  down_.assign(topo_.links().size(), false);
  install_routes();

  for (int h : topo_.hosts()) {
    const TopoNode& node = topo_.nodes()[h];
    HostPort hp;
    hp.name = node.name;
    hp.ip = node.ip;
    hp.mac = node.mac;
    const int l = topo_.host_link(h);
    hp.link = link_ptrs_[l];
    hp.side = topo_.side_of(l, h);
    hp.rate = topo_.links()[l].rate;
    hosts_.push_back(hp);
    MPR_LOG(log_, info,
            "host " << hp.name << " " << ip_text(hp.ip) << " " << mac_text(hp.mac) << " on link "
                    << topo_.links()[l].name << " side " << hp.side);
  }

  reroutes_ = &env.stats.counter("fabric.reroutes", "events",
                                 "Route recomputations after link failures or repairs");
  calendar_ = std::make_unique<core::Calendar>("calendar");
  for (size_t i = 0; i < cfg_.events.size(); ++i) {
    const LinkEventConfig& e = cfg_.events[i];
    link(e.link)->schedule(e.at.sc(), e.change());
    using Action = LinkEventConfig::Action;
    if (cfg_.reroute && (e.action == Action::down || e.action == Action::up))
      calendar_->at(e.at.sc() + cfg_.reroute_delay.sc(), [this, i] { reroute_after(i); });
  }
  if (cfg_.sw.pfc.enabled && cfg_.sw.pfc.lossless_mask && cfg_.deadlock_check.ps)
    deadlock_ = std::make_unique<DeadlockDetector>(topo_, switch_of_node_, cfg_.deadlock_check,
                                                   static_cast<int>(cfg_.deadlock_confirm), env);
}

void Fabric::install_routes() {
  routing_->for_each_route([&](int sw, uint32_t ip, const std::vector<int>& ports) {
    // An empty group (destination cut off) drops at this switch, counted
    // as a route miss.
    switch_of_node_[sw]->set_route(ip, ports);
  });
}

void Fabric::reroute_after(size_t event) {
  // The timeline, not the links' state, says what is down: a direction
  // that is down counts as a failed link for routing.
  const LinkEventConfig& e = cfg_.events[event];
  down_[topo_.find_link(e.link)] = e.action == LinkEventConfig::Action::down;
  routing_ = std::make_unique<Routing>(topo_, down_);
  install_routes();
  reroutes_->add();
  MPR_LOG(log_, info,
          "rerouted after link " << e.link << " went " << LinkEventConfig::action_name(e.action));
}

Fabric::~Fabric() = default;

EthLink* Fabric::link(const std::string& name) const {
  const int l = topo_.find_link(name);
  return l < 0 ? nullptr : link_ptrs_[l];
}

Switch* Fabric::switch_named(const std::string& name) const {
  const int n = topo_.find_node(name);
  return n < 0 ? nullptr : switch_of_node_[n];
}

std::pair<Switch*, int> Fabric::egress_port(const std::string& link, const std::string& dir) const {
  const int l = topo_.find_link(link);
  if (l < 0 || (dir != "a2b" && dir != "b2a")) return {nullptr, -1};
  const TopoLink& tl = topo_.links()[l];
  const int side = dir == "a2b" ? 0 : 1;
  Switch* s = switch_of_node_[tl.node[side]];
  return s ? std::pair<Switch*, int>{s, tl.port[side]} : std::pair<Switch*, int>{nullptr, -1};
}

std::string link_egress_stat_prefix(const Fabric& fabric, const std::string& link,
                                    const std::string& dir) {
  const auto [sw, port] = fabric.egress_port(link, dir);
  if (!sw) throw std::out_of_range("no switch port sends into " + link + "." + dir);
  return "switch." + std::string(sw->basename()) + ".port" + std::to_string(port) + ".";
}

double link_ecn_mark_ratio(const Fabric& fabric, const core::StatsRegistry& stats,
                           const std::string& link, const std::string& dir) {
  const std::string base = link_egress_stat_prefix(fabric, link, dir);
  const core::Counter* marks = stats.find_counter(base + "ecn_marks");
  const core::Counter* judged = stats.find_counter(base + "ecn_capable");
  if (!marks || !judged) throw std::out_of_range("no ECN counters for " + base);
  return judged->value() ? static_cast<double>(marks->value()) / judged->value() : 0.0;
}

std::vector<Hop> Fabric::path_of(const FiveTuple& ft) const {
  return routing_->trace(ft, [this](int sw, const FiveTuple& t, const std::vector<int>& group) {
    return switch_of_node_[sw]->ecmp_pick(t.src_ip, t.dst_ip, t.proto, t.sport, t.dport, group);
  });
}

double link_avg_gbps(const core::StatsRegistry& stats, const std::string& link,
                     const std::string& dir, double active_s) {
  const core::Counter* c = stats.find_counter("link." + link + "." + dir + ".tx_bytes");
  if (!c) throw std::out_of_range("no link direction " + link + "." + dir);
  return active_s > 0 ? static_cast<double>(c->value()) * 8.0 / active_s / 1e9 : 0.0;
}

void Fabric::write_port_table(std::ostream& os, const core::StatsRegistry& stats,
                              double active_s) const {
  os << "switch,port,peer,link,dir,rate_gbps,tx_gbps,utilisation,tx_packets,tx_data_bytes,"
        "ecn_marks,pause_tx,pause_rx,drops,queue_max_bytes,ecn_capable\n";
  const auto& nodes = topo_.nodes();
  auto value = [&](const std::string& path) -> uint64_t {
    const core::Counter* c = stats.find_counter(path);
    return c ? c->value() : 0;
  };
  for (int s : topo_.switches()) {
    for (size_t p = 0; p < nodes[s].port_link.size(); ++p) {
      const int l = nodes[s].port_link[p];
      if (l < 0) continue;
      const TopoLink& tl = topo_.links()[l];
      // This port transmits in the direction leaving its side.
      const char* dir = topo_.side_of(l, s) == 0 ? "a2b" : "b2a";
      const std::string base = "switch." + nodes[s].name + ".port" + std::to_string(p) + ".";
      const double gbps = link_avg_gbps(stats, tl.name, dir, active_s);
      os << nodes[s].name << ',' << p << ',' << nodes[topo_.peer(l, s)].name << ',' << tl.name
         << ',' << dir << ',' << tl.rate.gbps() << ',' << gbps << ','
         << (tl.rate.bps > 0 ? gbps / tl.rate.gbps() : 0.0) << ',' << value(base + "tx_packets")
         << ',' << value(base + "tx_data_bytes") << ',' << value(base + "ecn_marks") << ','
         << value(base + "pause_tx") << ',' << value(base + "pause_rx") << ','
         << value(base + "drops") << ',' << value(base + "queue_max_bytes") << ','
         << value(base + "ecn_capable") << '\n';
    }
  }
}

nlohmann::json Fabric::describe(const core::StatsRegistry& stats, double active_s) const {
  nlohmann::json j;
  j["topology"] = cfg_.topology;
  const auto& nodes = topo_.nodes();
  nlohmann::json hosts = nlohmann::json::array();
  for (int h : topo_.hosts()) {
    const int l = topo_.host_link(h);
    const int peer = topo_.peer(l, h);
    const TopoLink& tl = topo_.links()[l];
    hosts.push_back({{"name", nodes[h].name},
                     {"ip", ip_text(nodes[h].ip)},
                     {"mac", mac_text(nodes[h].mac)},
                     {"link", tl.name},
                     {"side", topo_.side_of(l, h)},
                     {"peer", nodes[peer].name},
                     {"peer_port", tl.port[topo_.side_of(l, peer)]}});
  }
  j["hosts"] = hosts;
  nlohmann::json switches = nlohmann::json::array();
  for (int s : topo_.switches()) {
    nlohmann::json ports = nlohmann::json::array();
    for (size_t p = 0; p < nodes[s].port_link.size(); ++p) {
      const int l = nodes[s].port_link[p];
      if (l < 0) continue;
      ports.push_back({{"port", p},
                       {"link", topo_.links()[l].name},
                       {"side", topo_.side_of(l, s)},
                       {"peer", nodes[topo_.peer(l, s)].name}});
    }
    switches.push_back({{"name", nodes[s].name}, {"role", nodes[s].role}, {"ports", ports}});
  }
  j["switches"] = switches;
  nlohmann::json links = nlohmann::json::array();
  for (const TopoLink& tl : topo_.links()) {
    nlohmann::json lj = {{"name", tl.name},
                         {"a", nodes[tl.node[0]].name},
                         {"a_port", tl.port[0]},
                         {"b", nodes[tl.node[1]].name},
                         {"b_port", tl.port[1]},
                         {"rate", core::to_string(tl.rate)},
                         {"delay", core::to_string(tl.delay)}};
    if (active_s > 0)
      for (const char* dir : {"a2b", "b2a"})
        lj["avg_gbps"][dir] = link_avg_gbps(stats, tl.name, dir, active_s);
    links.push_back(lj);
  }
  j["links"] = links;
  nlohmann::json paths = nlohmann::json::array();
  for (const PathGroup& g : topo_.path_groups()) {
    nlohmann::json names = nlohmann::json::array();
    for (int l : g.links) names.push_back(topo_.links()[l].name);
    nlohmann::json pj = {{"name", g.name}, {"links", names}};
    if (active_s > 0) {
      // Utilisation of the path: wire bits its links carried (both
      // directions) over what they could have carried in the active time.
      double bits = 0, capacity = 0;
      for (int l : g.links)
        for (const char* dir : {"a2b", "b2a"}) {
          bits += link_avg_gbps(stats, topo_.links()[l].name, dir, active_s) * 1e9;
          capacity += topo_.links()[l].rate.bps;
        }
      pj["avg_gbps"] = bits / 1e9 / (2.0 * static_cast<double>(g.links.size()));
      pj["utilisation"] = capacity > 0 ? bits / capacity : 0.0;
    }
    paths.push_back(pj);
  }
  j["paths"] = paths;
  nlohmann::json deadlocks = nlohmann::json::array();
  if (deadlock_)
    for (const DeadlockRecord& d : deadlock_->deadlocks())
      deadlocks.push_back({{"at_s", d.at_s}, {"cycle", d.cycle}});
  j["deadlocks"] = deadlocks;
  j["active_time_s"] = active_s;
  return j;
}

}  // namespace mprdma::fabric
