// The fabric as a graph: hosts and switches (nodes) joined by full-duplex
// links with a rate and a delay. Pure data, no SystemC: the scenario loader
// builds it to validate a fabric, the routing computes next hops on it and
// the Fabric module instantiates it.
//
// Conventions (fabric.md has the full naming scheme):
//   - a link's side 0 ("a") is the node closer to the hosts, so the a2b
//     direction always carries traffic up the tree;
//   - a host has one NIC, hence exactly one link, on port 0;
//   - a switch's ports are numbered 0.. in a fixed order per builder (down
//     ports first, then up ports);
//   - host i (in host order) gets IPv4 host_ip(i) and MAC host_mac(i)
//     unless an explicit topology gives them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "vp/core/units.h"

namespace mprdma::fabric {

using MacBytes = std::array<uint8_t, 6>;

// A topology that cannot be built: the message names the bad node, link,
// port or address.
struct TopologyError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class NodeKind { kHost, kSwitch };

struct TopoNode {
  std::string name;
  NodeKind kind = NodeKind::kHost;
  // What the node is in its topology: host, tor, leaf, spine, edge,
  // aggregation, core or switch (explicit topologies).
  std::string role;
  uint32_t ip = 0;  // hosts: IPv4 address, host byte order
  MacBytes mac{};   // hosts
  // Link index on each port (-1: nothing attached). Hosts have one port.
  std::vector<int> port_link;
};

struct TopoLink {
  std::string name;
  int node[2] = {-1, -1};  // side 0 (a), side 1 (b)
  int port[2] = {-1, -1};  // port on each node
  core::Bandwidth rate;
  core::Duration delay;
};

// Links that make up one group of equal-cost paths for observability, e.g.
// in the MP-RDMA testbed, path i is every link through spine i.
struct PathGroup {
  std::string name;
  std::vector<int> links;
};

class Topology {
 public:
  // Adds a host; `ip`/`mac` pin its addresses (else finalize() assigns
  // them). Throws TopologyError for a duplicate or empty name.
  int add_host(const std::string& name, std::optional<uint32_t> ip = {},
               std::optional<MacBytes> mac = {});
  int add_switch(const std::string& name, const std::string& role = "switch");
  // Joins nodes `a` (side 0) and `b` (side 1). A switch port of -1 is
  // assigned by finalize() (the lowest free port, in link order); a host
  // always uses port 0. An empty name becomes "<a>-<b>". Throws
  // TopologyError naming an unknown node.
  int add_link(const std::string& a, const std::string& b, core::Bandwidth rate,
               core::Duration delay, int a_port = -1, int b_port = -1, std::string name = "");
  void add_path_group(PathGroup group) { paths_.push_back(std::move(group)); }

  // Numbers ports, assigns addresses and checks the graph; throws
  // TopologyError naming the problem: a link joining a node to itself, a
  // port used twice, a host without a link or with more than one (its NIC
  // has one port), a host or switch not connected to the others, a
  // duplicate address, no host at all.
  void finalize();

  const std::vector<TopoNode>& nodes() const { return nodes_; }
  const std::vector<TopoLink>& links() const { return links_; }
  // Node indices of the hosts, in host order (the order they were added).
  const std::vector<int>& hosts() const { return hosts_; }
  const std::vector<int>& switches() const { return switches_; }
  const std::vector<PathGroup>& path_groups() const { return paths_; }
  // -1 if absent.
  int find_node(const std::string& name) const;
  int find_link(const std::string& name) const;
  // The link of a host node and the side the host is on.
  int host_link(int host_node) const;
  int host_side(int host_node) const;
  // The node at the other end of `link` from `node`.
  int peer(int link, int node) const;
  int side_of(int link, int node) const;
  // Switches on a shortest path between nodes `a` and `b`, the ends not
  // counted (0 for two hosts
  // cabled to each other; 1 under one switch; 3 across a leaf-spine); -1
  // if none joins them. A walk through the graph: for set-up, not per packet.
  int switches_between(int a, int b) const;

 private:
  int add_node(TopoNode n);
  std::vector<TopoNode> nodes_;
  std::vector<TopoLink> links_;
  std::vector<int> hosts_, switches_;
  std::vector<PathGroup> paths_;
  std::map<std::string, int> node_index_, link_index_;
  bool finalized_ = false;
};

// Automatic addresses of the host at `index` (0-based host order):
// IPv4 10.b.c.d counting from 10.0.0.1 but skipping d = 0 and d = 255
// (so the first 254 hosts share 10.0.0.0/24, as the two-host platform
// always had: host i is 10.0.0.<i+1>), and MAC 02:00:<index+1, 32 bits
// big-endian> (02:00:00:00:00:01 for the first).
uint32_t host_ip(size_t index);
MacBytes host_mac(size_t index);
std::string ip_text(uint32_t ip);
std::string mac_text(const MacBytes& mac);
// Parses "10.0.0.1" / "02:00:00:00:00:01"; std::nullopt on bad text.
std::optional<uint32_t> parse_ip(const std::string& text);
std::optional<MacBytes> parse_mac(const std::string& text);

// --- builders (each returns a finalized topology) ---

// h0 -- h1, one link "h0-h1".
Topology make_back_to_back(core::Bandwidth rate, core::Duration delay);

// The MP-RDMA testbed (NSDI'18 Fig. 10): `tors` ToR switches t0.. with
// `hosts_per_tor` hosts t<i>h<j> each, every ToR linked to each of
// `spines` spine switches s0..; path group i = the links through spine i.
Topology make_mp_rdma_testbed(int tors, int spines, int hosts_per_tor, core::Bandwidth access,
                              core::Bandwidth uplink, core::Duration delay);

// A two-tier leaf-spine: leaves l0.. with hosts l<i>h<j>, spines s0..;
// path group i = the links through spine i.
Topology make_leaf_spine(int spines, int leaves, int hosts_per_leaf, core::Bandwidth access,
                         core::Bandwidth uplink, core::Duration delay);

// A 3-tier fat tree of even parameter k: k pods p0.., each with k/2 edge
// switches p<p>e<i> and k/2 aggregation switches p<p>a<i>, (k/2)^2 cores
// c0.., k/2 hosts p<p>e<i>h<j> per edge switch (k^3/4 hosts). Aggregation
// switch i of every pod connects to cores i*k/2 .. i*k/2 + k/2 - 1. Path
// group i = the links through core i.
Topology make_fat_tree(int k, core::Bandwidth access, core::Bandwidth uplink, core::Duration delay);

}  // namespace mprdma::fabric
