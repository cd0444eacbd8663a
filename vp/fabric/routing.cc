#include "vp/fabric/routing.h"

#include <deque>
#include <stdexcept>

namespace mprdma::fabric {

Routing::Routing(const Topology& topo, const std::vector<bool>& down) : topo_(topo) {
  auto is_down = [&](int link) {
    return link >= 0 && static_cast<size_t>(link) < down.size() && down[link];
  };
  const auto& nodes = topo.nodes();
  host_index_.assign(nodes.size(), -1);
  switch_index_.assign(nodes.size(), -1);
  for (size_t i = 0; i < topo.hosts().size(); ++i) {
    host_index_[topo.hosts()[i]] = static_cast<int>(i);
    by_ip_[nodes[topo.hosts()[i]].ip] = topo.hosts()[i];
  }
  for (size_t i = 0; i < topo.switches().size(); ++i)
    switch_index_[topo.switches()[i]] = static_cast<int>(i);

  dist_.resize(topo.hosts().size());
  next_.assign(topo.switches().size(), std::vector<std::vector<int>>(topo.hosts().size()));
  for (size_t hi = 0; hi < topo.hosts().size(); ++hi) {
    const int dst = topo.hosts()[hi];
    std::vector<int>& dist = dist_[hi];
    dist.assign(nodes.size(), -1);
    dist[dst] = 0;
    std::deque<int> queue{dst};
    while (!queue.empty()) {
      const int n = queue.front();
      queue.pop_front();
      // Another host is an end, never a way through.
      if (n != dst && nodes[n].kind == NodeKind::kHost) continue;
      for (int link : nodes[n].port_link) {
        if (link < 0 || is_down(link)) continue;
        const int m = topo.peer(link, n);
        if (dist[m] < 0) {
          dist[m] = dist[n] + 1;
          queue.push_back(m);
        }
      }
    }
    for (size_t si = 0; si < topo.switches().size(); ++si) {
      const int sw = topo.switches()[si];
      std::vector<int>& ports = next_[si][hi];
      if (dist[sw] < 0) continue;  // finalize() guarantees a connected graph
      const auto& port_link = nodes[sw].port_link;
      for (size_t p = 0; p < port_link.size(); ++p) {
        if (port_link[p] < 0 || is_down(port_link[p])) continue;
        const int m = topo.peer(port_link[p], sw);
        const bool transit = nodes[m].kind == NodeKind::kSwitch || m == dst;
        if (transit && dist[m] == dist[sw] - 1) ports.push_back(static_cast<int>(p));
      }
    }
  }
}

const std::vector<int>& Routing::next_hops(int sw, int dst) const {
  const int si = switch_index_.at(sw), hi = host_index_.at(dst);
  if (si < 0) throw std::invalid_argument("node " + topo_.nodes()[sw].name + " is not a switch");
  if (hi < 0) throw std::invalid_argument("node " + topo_.nodes()[dst].name + " is not a host");
  return next_[si][hi];
}

int Routing::distance(int node, int dst) const {
  const int hi = host_index_.at(dst);
  if (hi < 0) throw std::invalid_argument("node " + topo_.nodes()[dst].name + " is not a host");
  return dist_[hi].at(node);
}

int Routing::host_by_ip(uint32_t ip) const {
  auto it = by_ip_.find(ip);
  return it == by_ip_.end() ? -1 : it->second;
}

void Routing::for_each_route(
    const std::function<void(int, uint32_t, const std::vector<int>&)>& install) const {
  for (size_t si = 0; si < topo_.switches().size(); ++si)
    for (size_t hi = 0; hi < topo_.hosts().size(); ++hi)
      install(topo_.switches()[si], topo_.nodes()[topo_.hosts()[hi]].ip, next_[si][hi]);
}

std::vector<Hop> Routing::trace(const FiveTuple& ft, const Picker& pick) const {
  const int src = host_by_ip(ft.src_ip), dst = host_by_ip(ft.dst_ip);
  if (src < 0) throw std::invalid_argument("no host has source address " + ip_text(ft.src_ip));
  if (dst < 0) throw std::invalid_argument("no host has destination address " + ip_text(ft.dst_ip));
  std::vector<Hop> hops;
  if (src == dst) return hops;
  const auto& nodes = topo_.nodes();
  int at = src;
  int link = topo_.host_link(src);
  // Every hop gets one closer, so a path is at most as long as the node
  // count; the bound only guards against a broken table.
  for (size_t step = 0; step <= nodes.size(); ++step) {
    hops.push_back({link, topo_.side_of(link, at)});
    at = topo_.peer(link, at);
    if (at == dst) return hops;
    if (nodes[at].kind == NodeKind::kHost)
      throw std::logic_error("route to " + nodes[dst].name + " ends at host " + nodes[at].name);
    const std::vector<int>& group = next_hops(at, dst);
    if (group.empty())
      throw std::logic_error("switch " + nodes[at].name + " has no route to " + nodes[dst].name);
    const int port = group.size() == 1 ? group[0] : pick(at, ft, group);
    bool member = false;
    for (int p : group) member |= p == port;
    if (!member)
      throw std::invalid_argument("switch " + nodes[at].name + " picked port " +
                                  std::to_string(port) + ", which is not a next hop to " +
                                  nodes[dst].name);
    link = nodes[at].port_link[port];
  }
  throw std::logic_error("routing loop towards " + nodes[dst].name);
}

}  // namespace mprdma::fabric
