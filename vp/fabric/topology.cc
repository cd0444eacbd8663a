#include "vp/fabric/topology.h"

#include <cstdio>
#include <deque>

#include "vp/net/roce_codec.h"

namespace mprdma::fabric {

int Topology::add_node(TopoNode n) {
  if (finalized_) throw std::logic_error("Topology: add after finalize()");
  if (n.name.empty()) throw TopologyError("a node needs a name");
  if (node_index_.count(n.name)) throw TopologyError("node '" + n.name + "' is defined twice");
  const int index = static_cast<int>(nodes_.size());
  node_index_[n.name] = index;
  (n.kind == NodeKind::kHost ? hosts_ : switches_).push_back(index);
  nodes_.push_back(std::move(n));
  return index;
}

int Topology::add_host(const std::string& name, std::optional<uint32_t> ip,
                       std::optional<MacBytes> mac) {
  TopoNode n;
  n.name = name;
  n.kind = NodeKind::kHost;
  n.role = "host";
  // Zero marks "assign automatically" until finalize(); an explicit 0.0.0.0
  // or all-zero MAC is rejected there as not a host address.
  if (ip && *ip == 0) throw TopologyError("host '" + name + "': 0.0.0.0 is not a host address");
  if (mac && *mac == MacBytes{})
    throw TopologyError("host '" + name + "': 00:00:00:00:00:00 is not a host address");
  n.ip = ip.value_or(0);
  n.mac = mac.value_or(MacBytes{});
  return add_node(std::move(n));
}

int Topology::add_switch(const std::string& name, const std::string& role) {
  TopoNode n;
  n.name = name;
  n.kind = NodeKind::kSwitch;
  n.role = role;
  return add_node(std::move(n));
}

int Topology::add_link(const std::string& a, const std::string& b, core::Bandwidth rate,
                       core::Duration delay, int a_port, int b_port, std::string name) {
  if (finalized_) throw std::logic_error("Topology: add after finalize()");
  if (name.empty()) name = a + "-" + b;
  TopoLink l;
  l.name = name;
  const std::string* ends[2] = {&a, &b};
  for (int s = 0; s < 2; ++s) {
    const int n = find_node(*ends[s]);
    if (n < 0) throw TopologyError("link '" + name + "' names unknown node '" + *ends[s] + "'");
    l.node[s] = n;
  }
  l.port[0] = a_port;
  l.port[1] = b_port;
  if (!(rate.bps > 0)) throw TopologyError("link '" + name + "': rate must be positive");
  l.rate = rate;
  l.delay = delay;
  if (link_index_.count(name)) throw TopologyError("link '" + name + "' is defined twice");
  // Link names become statistics paths (link.<name>.<dir>.*), split at dots.
  if (name.find('.') != std::string::npos)
    throw TopologyError("link '" + name + "': a link name must not contain '.'");
  link_index_[name] = static_cast<int>(links_.size());
  links_.push_back(std::move(l));
  return static_cast<int>(links_.size()) - 1;
}

int Topology::find_node(const std::string& name) const {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? -1 : it->second;
}

int Topology::find_link(const std::string& name) const {
  auto it = link_index_.find(name);
  return it == link_index_.end() ? -1 : it->second;
}

int Topology::host_link(int host_node) const { return nodes_.at(host_node).port_link.at(0); }

int Topology::host_side(int host_node) const { return side_of(host_link(host_node), host_node); }

int Topology::peer(int link, int node) const {
  const TopoLink& l = links_.at(link);
  return l.node[0] == node ? l.node[1] : l.node[0];
}

int Topology::switches_between(int a, int b) const {
  // Breadth-first over nodes, hosts ending the walk except at `a`: a path
  // never passes through a host (its NIC does not forward).
  std::vector<int> dist(nodes_.size(), -1);
  std::deque<int> todo{a};
  dist.at(a) = 0;
  while (!todo.empty()) {
    const int n = todo.front();
    todo.pop_front();
    if (n == b) break;
    if (n != a && nodes_[n].kind == NodeKind::kHost) continue;
    for (int l : nodes_[n].port_link) {
      if (l < 0) continue;
      const int m = peer(l, n);
      if (dist[m] >= 0) continue;
      dist[m] = dist[n] + 1;
      todo.push_back(m);
    }
  }
  // Links crossed minus one is the number of nodes between a and b.
  return dist.at(b) < 0 ? -1 : std::max(dist[b] - 1, 0);
}

int Topology::side_of(int link, int node) const {
  const TopoLink& l = links_.at(link);
  if (l.node[0] == node) return 0;
  if (l.node[1] == node) return 1;
  throw std::out_of_range("node is not on link " + l.name);
}

void Topology::finalize() {
  if (finalized_) return;
  if (hosts_.empty()) throw TopologyError("the topology has no host");

  // Ports. Hosts: port 0, one link. Switches: the ports links ask for
  // first, then the lowest free port in link order, so a switch's port
  // numbers do not depend on which of its links name a port.
  for (size_t li = 0; li < links_.size(); ++li) {
    TopoLink& l = links_[li];
    if (l.node[0] == l.node[1])
      throw TopologyError("link '" + l.name + "' connects '" + nodes_[l.node[0]].name +
                          "' to itself");
    for (int s = 0; s < 2; ++s) {
      TopoNode& n = nodes_[l.node[s]];
      if (n.kind == NodeKind::kHost) {
        if (l.port[s] > 0)
          throw TopologyError("link '" + l.name + "': host '" + n.name + "' has only port 0, not " +
                              std::to_string(l.port[s]));
        if (!n.port_link.empty())
          throw TopologyError("host '" + n.name + "' is on links '" + links_[n.port_link[0]].name +
                              "' and '" + l.name + "', but its NIC has one port");
        l.port[s] = 0;
        n.port_link.push_back(static_cast<int>(li));
        continue;
      }
      if (l.port[s] < -1)
        throw TopologyError("link '" + l.name + "': port " + std::to_string(l.port[s]) +
                            " of switch '" + n.name + "' is negative");
      if (l.port[s] < 0) continue;
      const size_t p = static_cast<size_t>(l.port[s]);
      if (n.port_link.size() <= p) n.port_link.resize(p + 1, -1);
      if (n.port_link[p] >= 0)
        throw TopologyError("port " + std::to_string(p) + " of switch '" + n.name +
                            "' is used by links '" + links_[n.port_link[p]].name + "' and '" +
                            l.name + "'");
      n.port_link[p] = static_cast<int>(li);
    }
  }
  for (size_t li = 0; li < links_.size(); ++li) {
    TopoLink& l = links_[li];
    for (int s = 0; s < 2; ++s) {
      if (l.port[s] >= 0) continue;
      TopoNode& n = nodes_[l.node[s]];
      size_t p = 0;
      while (p < n.port_link.size() && n.port_link[p] >= 0) ++p;
      if (p == n.port_link.size()) n.port_link.push_back(-1);
      n.port_link[p] = static_cast<int>(li);
      l.port[s] = static_cast<int>(p);
    }
  }
  for (int h : hosts_)
    if (nodes_[h].port_link.empty())
      throw TopologyError("host '" + nodes_[h].name + "' has no link: it is unreachable");

  // Connectivity: every node must be reachable from the first host.
  std::vector<std::vector<int>> adjacent(nodes_.size());
  for (size_t li = 0; li < links_.size(); ++li) {
    adjacent[links_[li].node[0]].push_back(links_[li].node[1]);
    adjacent[links_[li].node[1]].push_back(links_[li].node[0]);
  }
  std::vector<bool> seen(nodes_.size(), false);
  std::deque<int> queue{hosts_.front()};
  seen[hosts_.front()] = true;
  while (!queue.empty()) {
    const int n = queue.front();
    queue.pop_front();
    for (int m : adjacent[n])
      if (!seen[m]) {
        seen[m] = true;
        queue.push_back(m);
      }
  }
  const std::string& first = nodes_[hosts_.front()].name;
  for (int h : hosts_)
    if (!seen[h])
      throw TopologyError("host '" + nodes_[h].name + "' is unreachable from host '" + first +
                          "' (the fabric is not connected)");
  for (int s : switches_)
    if (!seen[s])
      throw TopologyError("switch '" + nodes_[s].name + "' is not connected to the hosts");

  // Addresses: explicit ones kept, the others from the host's position.
  std::map<uint32_t, int> by_ip;
  std::map<MacBytes, int> by_mac;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    TopoNode& n = nodes_[hosts_[i]];
    if (n.ip == 0) n.ip = host_ip(i);
    if (n.mac == MacBytes{}) n.mac = host_mac(i);
  }
  for (int h : hosts_) {
    const TopoNode& n = nodes_[h];
    auto [ip_it, ip_new] = by_ip.emplace(n.ip, h);
    if (!ip_new)
      throw TopologyError("duplicate address " + ip_text(n.ip) + ": hosts '" +
                          nodes_[ip_it->second].name + "' and '" + n.name + "'");
    auto [mac_it, mac_new] = by_mac.emplace(n.mac, h);
    if (!mac_new)
      throw TopologyError("duplicate MAC address " + mac_text(n.mac) + ": hosts '" +
                          nodes_[mac_it->second].name + "' and '" + n.name + "'");
  }
  for (const PathGroup& g : paths_)
    for (int l : g.links)
      if (l < 0 || static_cast<size_t>(l) >= links_.size())
        throw std::logic_error("path group " + g.name + " names a link that does not exist");
  finalized_ = true;
}

uint32_t host_ip(size_t index) {
  const uint64_t d = index % 254 + 1;
  const uint64_t rest = index / 254;
  if (rest >= 256 * 256) throw TopologyError("too many hosts for automatic 10.x.y.z addresses");
  return (10u << 24) | static_cast<uint32_t>(rest << 8) | static_cast<uint32_t>(d);
}

MacBytes host_mac(size_t index) {
  const uint64_t v = index + 1;
  if (v >> 32) throw TopologyError("too many hosts for automatic MAC addresses");
  return {0x02,
          0x00,
          static_cast<uint8_t>(v >> 24),
          static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

std::string ip_text(uint32_t ip) { return net::ipv4_text(ip); }

std::string mac_text(const MacBytes& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return buf;
}

std::optional<uint32_t> parse_ip(const std::string& text) {
  unsigned v[4];
  char tail;
  if (std::sscanf(text.c_str(), "%u.%u.%u.%u%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4)
    return std::nullopt;
  uint32_t ip = 0;
  for (unsigned x : v) {
    if (x > 255) return std::nullopt;
    ip = ip << 8 | x;
  }
  return ip;
}

std::optional<MacBytes> parse_mac(const std::string& text) {
  unsigned v[6];
  char tail;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &tail) != 6 ||
      text.size() != 17)
    return std::nullopt;
  MacBytes m;
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 255) return std::nullopt;
    m[i] = static_cast<uint8_t>(v[i]);
  }
  return m;
}

Topology make_back_to_back(core::Bandwidth rate, core::Duration delay) {
  Topology t;
  t.add_host("h0");
  t.add_host("h1");
  t.add_link("h0", "h1", rate, delay);
  t.finalize();
  return t;
}

namespace {

void check_count(const char* what, int n, int min) {
  if (n < min)
    throw TopologyError(std::string(what) + " must be at least " + std::to_string(min) + ", not " +
                        std::to_string(n));
}

// Two tiers: `leaves` leaf switches named <leaf_prefix><i> with `hosts`
// hosts each, all joined to every spine s<j>. Leaf ports: hosts first, then
// spines in order; spine port i is leaf i.
Topology two_tier(const std::string& leaf_prefix, const std::string& leaf_role, int spines,
                  int leaves, int hosts, core::Bandwidth access, core::Bandwidth uplink,
                  core::Duration delay) {
  Topology t;
  for (int l = 0; l < leaves; ++l)
    for (int h = 0; h < hosts; ++h)
      t.add_host(leaf_prefix + std::to_string(l) + "h" + std::to_string(h));
  for (int l = 0; l < leaves; ++l) t.add_switch(leaf_prefix + std::to_string(l), leaf_role);
  for (int s = 0; s < spines; ++s) t.add_switch("s" + std::to_string(s), "spine");
  for (int l = 0; l < leaves; ++l) {
    const std::string leaf = leaf_prefix + std::to_string(l);
    for (int h = 0; h < hosts; ++h)
      t.add_link(leaf + "h" + std::to_string(h), leaf, access, delay, 0, h);
  }
  std::vector<PathGroup> groups(static_cast<size_t>(spines));
  for (int l = 0; l < leaves; ++l)
    for (int s = 0; s < spines; ++s) {
      const int li = t.add_link(leaf_prefix + std::to_string(l), "s" + std::to_string(s), uplink,
                                delay, hosts + s, l);
      groups[s].links.push_back(li);
    }
  for (int s = 0; s < spines; ++s) {
    groups[s].name = "s" + std::to_string(s);
    t.add_path_group(std::move(groups[s]));
  }
  t.finalize();
  return t;
}

}  // namespace

Topology make_mp_rdma_testbed(int tors, int spines, int hosts_per_tor, core::Bandwidth access,
                              core::Bandwidth uplink, core::Duration delay) {
  check_count("leaves (ToR switches)", tors, 1);
  check_count("spines", spines, 1);
  check_count("hosts_per_leaf", hosts_per_tor, 1);
  return two_tier("t", "tor", spines, tors, hosts_per_tor, access, uplink, delay);
}

Topology make_leaf_spine(int spines, int leaves, int hosts_per_leaf, core::Bandwidth access,
                         core::Bandwidth uplink, core::Duration delay) {
  check_count("leaves", leaves, 1);
  check_count("spines", spines, 1);
  check_count("hosts_per_leaf", hosts_per_leaf, 1);
  return two_tier("l", "leaf", spines, leaves, hosts_per_leaf, access, uplink, delay);
}

Topology make_fat_tree(int k, core::Bandwidth access, core::Bandwidth uplink,
                       core::Duration delay) {
  check_count("k", k, 2);
  if (k % 2) throw TopologyError("k of a fat tree must be even, not " + std::to_string(k));
  const int half = k / 2;
  Topology t;
  auto pod = [](int p) { return "p" + std::to_string(p); };
  auto edge = [&](int p, int e) { return pod(p) + "e" + std::to_string(e); };
  auto agg = [&](int p, int a) { return pod(p) + "a" + std::to_string(a); };
  auto core_name = [](int c) { return "c" + std::to_string(c); };
  for (int p = 0; p < k; ++p)
    for (int e = 0; e < half; ++e)
      for (int h = 0; h < half; ++h) t.add_host(edge(p, e) + "h" + std::to_string(h));
  for (int p = 0; p < k; ++p)
    for (int e = 0; e < half; ++e) t.add_switch(edge(p, e), "edge");
  for (int p = 0; p < k; ++p)
    for (int a = 0; a < half; ++a) t.add_switch(agg(p, a), "aggregation");
  for (int c = 0; c < half * half; ++c) t.add_switch(core_name(c), "core");
  // Edge ports: hosts 0..k/2-1, then aggregation switches. Aggregation
  // ports: edges 0..k/2-1, then its k/2 cores. Core port p: pod p.
  for (int p = 0; p < k; ++p)
    for (int e = 0; e < half; ++e)
      for (int h = 0; h < half; ++h)
        t.add_link(edge(p, e) + "h" + std::to_string(h), edge(p, e), access, delay, 0, h);
  for (int p = 0; p < k; ++p)
    for (int e = 0; e < half; ++e)
      for (int a = 0; a < half; ++a) t.add_link(edge(p, e), agg(p, a), uplink, delay, half + a, e);
  std::vector<PathGroup> groups(static_cast<size_t>(half * half));
  for (int p = 0; p < k; ++p)
    for (int a = 0; a < half; ++a)
      for (int j = 0; j < half; ++j) {
        const int c = a * half + j;
        groups[c].links.push_back(t.add_link(agg(p, a), core_name(c), uplink, delay, half + j, p));
      }
  for (int c = 0; c < half * half; ++c) {
    groups[c].name = core_name(c);
    t.add_path_group(std::move(groups[c]));
  }
  t.finalize();
  return t;
}

}  // namespace mprdma::fabric
