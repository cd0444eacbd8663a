#include "vp/fabric/deadlock_detector.h"

#include <algorithm>
#include <functional>
#include <map>

namespace mprdma::fabric {

DeadlockDetector::DeadlockDetector(const Topology& topo, const std::vector<Switch*>& switch_of_node,
                                   core::Duration interval, int confirm, core::SimEnv& env)
    : topo_(topo),
      switch_of_node_(switch_of_node),
      interval_(interval),
      confirm_(std::max(1, confirm)),
      log_(core::Log::channel("fabric.deadlock")),
      found_(env.stats.counter("fabric.deadlocks", "cycles",
                               "PFC deadlocks found (cyclic buffer dependencies that persist)")) {
  due_ = sc_core::sc_time_stamp() + interval_.sc();
}

sc_core::sc_time DeadlockDetector::next_due() const {
  return interval_.ps ? due_ : sc_core::sc_max_time();
}

std::vector<std::string> DeadlockDetector::find_cycle() const {
  const auto& nodes = topo_.nodes();
  // Vertices: non-empty, paused egress queues.
  std::vector<Queue> vs;
  std::map<std::tuple<int, int, int>, size_t> index;
  for (int n : topo_.switches()) {
    const Switch* s = switch_of_node_[n];
    for (int p = 0; p < s->ports(); ++p)
      for (int q = 0; q < kNumPriorities; ++q)
        if (s->queue_bytes(p, q) && s->egress_paused(p, q)) {
          index[{n, p, q}] = vs.size();
          vs.push_back({n, p, q});
        }
  }
  std::vector<std::vector<size_t>> out(vs.size());
  for (size_t i = 0; i < vs.size(); ++i) {
    const Queue& v = vs[i];
    const int link = nodes[v.node].port_link[v.port];
    if (link < 0) continue;
    const int peer = topo_.peer(link, v.node);
    const Switch* ps = switch_of_node_[peer];
    if (!ps) continue;  // a host: it does not forward
    const auto& pl = nodes[peer].port_link;
    const int in = static_cast<int>(std::find(pl.begin(), pl.end(), link) - pl.begin());
    if (!ps->ingress_pausing(in, v.prio)) continue;
    for (int q = 0; q < ps->ports(); ++q) {
      auto it = index.find({peer, q, v.prio});
      if (it != index.end() && ps->queued_from(q, v.prio, in)) out[i].push_back(it->second);
    }
  }
  // Depth-first search for a back edge.
  std::vector<int> color(vs.size(), 0);
  std::vector<size_t> stack;
  std::vector<size_t> cycle;
  std::function<bool(size_t)> dfs = [&](size_t u) {
    color[u] = 1;
    stack.push_back(u);
    for (size_t w : out[u]) {
      if (color[w] == 1) {
        cycle.assign(std::find(stack.begin(), stack.end(), w), stack.end());
        return true;
      }
      if (color[w] == 0 && dfs(w)) return true;
    }
    color[u] = 2;
    stack.pop_back();
    return false;
  };
  for (size_t u = 0; u < vs.size() && cycle.empty(); ++u)
    if (color[u] == 0) dfs(u);
  std::vector<std::string> names;
  for (size_t i : cycle) {
    const Queue& v = vs[i];
    const int peer = topo_.peer(nodes[v.node].port_link[v.port], v.node);
    names.push_back(nodes[v.node].name + " port " + std::to_string(v.port) + " (to " +
                    nodes[peer].name + ") prio " + std::to_string(v.prio));
  }
  // Start at the smallest name so the same cycle always reads the same.
  if (!names.empty())
    std::rotate(names.begin(), std::min_element(names.begin(), names.end()), names.end());
  return names;
}

void DeadlockDetector::observe() {
  due_ += interval_.sc();
  std::vector<std::string> cycle = find_cycle();
  if (cycle.empty()) {
    seen_ = 0;
  } else if (cycle == candidate_) {
    ++seen_;
  } else {
    candidate_ = cycle;
    seen_ = 1;
  }
  if (!cycle.empty() && seen_ >= confirm_ &&
      std::find(reported_.begin(), reported_.end(), cycle) == reported_.end()) {
    reported_.push_back(cycle);
    found_.add();
    std::string text;
    for (const std::string& q : cycle) text += q + " -> ";
    text += cycle.front();
    MPR_LOG(log_, error, "PFC deadlock: cyclic buffer dependency " << text);
    records_.push_back({sc_core::sc_time_stamp().to_seconds(), cycle});
  }
}

}  // namespace mprdma::fabric
