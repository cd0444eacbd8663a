// Routing: every equal-cost next hop and only those, on the testbed, a
// leaf-spine and a fat tree; path tracing with a given ECMP choice.
#include "vp/fabric/routing.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "vp/fabric/topology.h"

namespace mprdma::fabric {
namespace {

const core::Bandwidth k40{40e9};
const core::Duration kDelay = core::Duration::from_ns(200);

std::vector<std::string> port_peers(const Topology& t, int sw, const std::vector<int>& ports) {
  std::vector<std::string> out;
  for (int p : ports) out.push_back(t.nodes()[t.peer(t.nodes()[sw].port_link[p], sw)].name);
  return out;
}

TEST(Routing, TestbedTorHasFourNextHopsToTheOtherTor) {
  const Topology t = make_mp_rdma_testbed(2, 4, 5, k40, k40, kDelay);
  const Routing r(t);
  const int t0 = t.find_node("t0"), t1 = t.find_node("t1");
  const std::vector<int>& up = r.next_hops(t0, t.find_node("t1h3"));
  EXPECT_EQ(up, (std::vector<int>{5, 6, 7, 8}));
  EXPECT_EQ(port_peers(t, t0, up), (std::vector<std::string>{"s0", "s1", "s2", "s3"}));
  // A local host: its own port only.
  EXPECT_EQ(r.next_hops(t0, t.find_node("t0h3")), std::vector<int>{3});
  // A spine goes straight down to the destination's ToR.
  const int s2 = t.find_node("s2");
  EXPECT_EQ(port_peers(t, s2, r.next_hops(s2, t.find_node("t1h0"))),
            std::vector<std::string>{"t1"});
  EXPECT_EQ(port_peers(t, s2, r.next_hops(s2, t.find_node("t0h0"))),
            std::vector<std::string>{"t0"});
  EXPECT_EQ(r.next_hops(t1, t.find_node("t1h4")), std::vector<int>{4});
  EXPECT_EQ(r.distance(t.find_node("t0h0"), t.find_node("t1h0")), 4);
}

// For every switch and host: the next hops are exactly the neighbours one
// hop closer (checked against distances computed here independently).
void expect_complete_and_correct(const Topology& t) {
  const Routing r(t);
  for (int dst : t.hosts()) {
    std::map<int, int> dist{{dst, 0}};
    std::vector<int> frontier{dst};
    while (!frontier.empty()) {
      std::vector<int> next;
      for (int n : frontier) {
        if (n != dst && t.nodes()[n].kind == NodeKind::kHost) continue;
        for (int l : t.nodes()[n].port_link) {
          const int m = t.peer(l, n);
          if (!dist.count(m)) {
            dist[m] = dist[n] + 1;
            next.push_back(m);
          }
        }
      }
      frontier = next;
    }
    for (int sw : t.switches()) {
      std::vector<int> want;
      const auto& pl = t.nodes()[sw].port_link;
      for (size_t p = 0; p < pl.size(); ++p) {
        const int m = t.peer(pl[p], sw);
        if ((m == dst || t.nodes()[m].kind == NodeKind::kSwitch) && dist.at(m) == dist.at(sw) - 1)
          want.push_back(static_cast<int>(p));
      }
      EXPECT_FALSE(want.empty());
      EXPECT_EQ(r.next_hops(sw, dst), want) << t.nodes()[sw].name << " -> " << t.nodes()[dst].name;
    }
  }
}

TEST(Routing, NextHopsAreCompleteAndCorrectOnEveryBuilder) {
  expect_complete_and_correct(make_mp_rdma_testbed(2, 4, 5, k40, k40, kDelay));
  expect_complete_and_correct(make_leaf_spine(3, 4, 2, k40, k40, kDelay));
  expect_complete_and_correct(make_fat_tree(4, k40, k40, kDelay));
}

TEST(Routing, FatTreeGroupSizesMatchTheTiers) {
  const Topology t = make_fat_tree(4, k40, k40, kDelay);
  const Routing r(t);
  const int other_pod = t.find_node("p3e1h0");
  EXPECT_EQ(r.next_hops(t.find_node("p0e0"), other_pod).size(), 2u);  // both aggregations
  EXPECT_EQ(r.next_hops(t.find_node("p0a1"), other_pod).size(), 2u);  // both its cores
  EXPECT_EQ(r.next_hops(t.find_node("c2"), other_pod).size(), 1u);    // down to pod 3
  EXPECT_EQ(r.next_hops(t.find_node("p3a0"), other_pod).size(), 1u);  // down to p3e1
  // Same pod, other edge: up to either aggregation, not to a core.
  const int same_pod = t.find_node("p0e1h1");
  EXPECT_EQ(port_peers(t, t.find_node("p0e0"), r.next_hops(t.find_node("p0e0"), same_pod)),
            (std::vector<std::string>{"p0a0", "p0a1"}));
  EXPECT_EQ(r.distance(t.find_node("p0e0h0"), other_pod), 6);
}

TEST(Routing, ParallelLinksAreEqualCostPorts) {
  Topology t;
  t.add_host("a");
  t.add_host("b");
  t.add_switch("x");
  t.add_switch("y");
  t.add_link("a", "x", k40, kDelay);
  t.add_link("b", "y", k40, kDelay);
  t.add_link("x", "y", k40, kDelay, -1, -1, "x-y-0");
  t.add_link("x", "y", k40, kDelay, -1, -1, "x-y-1");
  t.finalize();
  const Routing r(t);
  EXPECT_EQ(r.next_hops(t.find_node("x"), t.find_node("b")), (std::vector<int>{1, 2}));
}

TEST(Routing, TraceFollowsThePickAndNamesEveryLink) {
  const Topology t = make_mp_rdma_testbed(2, 4, 5, k40, k40, kDelay);
  const Routing r(t);
  FiveTuple ft;
  ft.src_ip = t.nodes()[t.find_node("t0h1")].ip;
  ft.dst_ip = t.nodes()[t.find_node("t1h2")].ip;
  int asked = 0;
  // The picker is asked only where there is a choice (at t0), and its
  // pick is followed.
  const auto hops = r.trace(ft, [&](int sw, const FiveTuple&, const std::vector<int>& group) {
    ++asked;
    EXPECT_EQ(t.nodes()[sw].name, "t0");
    return group[2];
  });
  ASSERT_EQ(hops.size(), 4u);
  EXPECT_EQ(asked, 1);
  const std::vector<std::string> names = {"t0h1-t0", "t0-s2", "t1-s2", "t1h2-t1"};
  const std::vector<int> sides = {0, 0, 1, 1};  // up, up, down, down
  for (size_t i = 0; i < hops.size(); ++i) {
    EXPECT_EQ(t.links()[hops[i].link].name, names[i]);
    EXPECT_EQ(hops[i].from_side, sides[i]) << names[i];
  }
  EXPECT_THROW(r.trace(ft, [](int, const FiveTuple&, const std::vector<int>&) { return 0; }),
               std::invalid_argument);  // port 0 is a host port, not a next hop
  ft.dst_ip = 0x0B000001;
  EXPECT_THROW(r.trace(ft, nullptr), std::invalid_argument);
}

TEST(Routing, InstallsOneRoutePerSwitchAndHost) {
  const Topology t = make_leaf_spine(2, 3, 2, k40, k40, kDelay);
  const Routing r(t);
  std::map<int, std::set<uint32_t>> seen;
  r.for_each_route([&](int sw, uint32_t ip, const std::vector<int>& ports) {
    EXPECT_TRUE(seen[sw].insert(ip).second);
    EXPECT_FALSE(ports.empty());
  });
  EXPECT_EQ(seen.size(), t.switches().size());
  for (const auto& [sw, ips] : seen) EXPECT_EQ(ips.size(), t.hosts().size());
}

}  // namespace
}  // namespace mprdma::fabric
