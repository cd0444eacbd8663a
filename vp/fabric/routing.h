// Shortest-path routing with every equal-cost next hop, computed from a
// Topology: for each switch and each destination host, the ports whose
// neighbour is one hop closer to that host (breadth-first search by hop
// count, hosts are never transit). The Fabric installs these as the
// switches' ECMP groups (Switch::set_route); trace() replays the choice a
// packet's 5-tuple makes at each switch, for tests and path accounting.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vp/fabric/topology.h"

namespace mprdma::fabric {

struct FiveTuple {
  uint32_t src_ip = 0, dst_ip = 0;  // host byte order
  uint8_t proto = 17;               // UDP
  uint16_t sport = 0xC000;
  uint16_t dport = 4791;  // RoCEv2
};

// One link crossed by a packet: the link and the side that sent it (0: the
// a2b direction).
struct Hop {
  int link = -1;
  int from_side = 0;
  bool operator==(const Hop& o) const { return link == o.link && from_side == o.from_side; }
};

class Routing {
 public:
  // `topo` must be finalized and outlive the Routing. Links whose index is
  // set in `down` are left out (routes after a failure); a host cut off
  // from a switch then has no next hop there.
  explicit Routing(const Topology& topo, const std::vector<bool>& down = {});

  // Equal-cost next-hop ports of switch node `sw` towards host node `dst`,
  // ascending.
  const std::vector<int>& next_hops(int sw, int dst) const;
  // Hops (links) from `node` to host node `dst`.
  int distance(int node, int dst) const;
  // The host node with this address, or -1.
  int host_by_ip(uint32_t ip) const;

  // Calls `install(switch_node, dst_ip, ports)` for every switch and every
  // host, in node order then host order.
  void for_each_route(const std::function<void(int sw, uint32_t dst_ip,
                                               const std::vector<int>& ports)>& install) const;

  // Picks one of `ports` (a next-hop group of switch node `sw`) for `ft`; a
  // Switch's ecmp_pick() in the Fabric.
  using Picker = std::function<int(int sw, const FiveTuple& ft, const std::vector<int>& ports)>;
  // The links a packet of `ft` crosses from its source host to its
  // destination host, each switch choosing with `pick`. Throws
  // std::invalid_argument for an address that is no host's, or a pick
  // outside the group.
  std::vector<Hop> trace(const FiveTuple& ft, const Picker& pick) const;

 private:
  const Topology& topo_;
  std::vector<int> host_index_;                      // node -> host order index (-1: switch)
  std::vector<int> switch_index_;                    // node -> switch order index (-1: host)
  std::vector<std::vector<int>> dist_;               // [host index][node]
  std::vector<std::vector<std::vector<int>>> next_;  // [switch index][host index] -> ports
  std::unordered_map<uint32_t, int> by_ip_;
};

}  // namespace mprdma::fabric
