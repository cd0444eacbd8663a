// Topology: builder sizes, the naming scheme, port numbering, automatic
// addresses, and the errors a bad graph raises (each naming the bad thing).
#include "vp/fabric/topology.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>

namespace mprdma::fabric {
namespace {

const core::Bandwidth k40{40e9};
const core::Bandwidth k100{100e9};
const core::Duration kDelay = core::Duration::from_ns(200);

size_t count_role(const Topology& t, const std::string& role) {
  size_t n = 0;
  for (const TopoNode& node : t.nodes()) n += node.role == role;
  return n;
}

// Every host and MAC address differs, and each host has exactly one link.
void expect_unique_addresses(const Topology& t) {
  std::set<uint32_t> ips;
  std::set<MacBytes> macs;
  for (int h : t.hosts()) {
    EXPECT_TRUE(ips.insert(t.nodes()[h].ip).second) << ip_text(t.nodes()[h].ip);
    EXPECT_TRUE(macs.insert(t.nodes()[h].mac).second) << mac_text(t.nodes()[h].mac);
    EXPECT_EQ(t.nodes()[h].port_link.size(), 1u) << t.nodes()[h].name;
  }
}

// Each switch's ports are 0..n-1 with no gap, and each link's recorded
// port points back at it.
void expect_consistent_ports(const Topology& t) {
  for (size_t li = 0; li < t.links().size(); ++li) {
    const TopoLink& l = t.links()[li];
    for (int s = 0; s < 2; ++s)
      EXPECT_EQ(t.nodes()[l.node[s]].port_link.at(l.port[s]), static_cast<int>(li)) << l.name;
  }
  for (int s : t.switches())
    for (int link : t.nodes()[s].port_link) EXPECT_GE(link, 0) << t.nodes()[s].name;
}

TEST(Topology, BackToBackIsTwoHostsOnOneLink) {
  const Topology t = make_back_to_back(k40, kDelay);
  ASSERT_EQ(t.hosts().size(), 2u);
  EXPECT_TRUE(t.switches().empty());
  ASSERT_EQ(t.links().size(), 1u);
  EXPECT_EQ(t.links()[0].name, "h0-h1");
  // The same addresses the two-host platform always gave.
  EXPECT_EQ(ip_text(t.nodes()[t.find_node("h0")].ip), "10.0.0.1");
  EXPECT_EQ(ip_text(t.nodes()[t.find_node("h1")].ip), "10.0.0.2");
  EXPECT_EQ(mac_text(t.nodes()[t.find_node("h1")].mac), "02:00:00:00:00:02");
}

TEST(Topology, MpRdmaTestbedHasTheNamesPortsAndPathsOfTheScheme) {
  const Topology t = make_mp_rdma_testbed(2, 4, 5, k40, k40, kDelay);
  EXPECT_EQ(t.hosts().size(), 10u);
  EXPECT_EQ(t.switches().size(), 6u);
  EXPECT_EQ(count_role(t, "tor"), 2u);
  EXPECT_EQ(count_role(t, "spine"), 4u);
  EXPECT_EQ(t.links().size(), 10u + 8u);
  // Host order: every host of t0, then of t1; addresses follow it.
  EXPECT_EQ(t.nodes()[t.hosts()[0]].name, "t0h0");
  EXPECT_EQ(t.nodes()[t.hosts()[9]].name, "t1h4");
  EXPECT_EQ(ip_text(t.nodes()[t.hosts()[9]].ip), "10.0.0.10");
  // ToR ports: hosts 0..4, then spines 5..8. Spine port i: ToR i.
  const TopoNode& t0 = t.nodes()[t.find_node("t0")];
  ASSERT_EQ(t0.port_link.size(), 9u);
  EXPECT_EQ(t.links()[t0.port_link[2]].name, "t0h2-t0");
  EXPECT_EQ(t.links()[t0.port_link[5 + 3]].name, "t0-s3");
  const TopoNode& s2 = t.nodes()[t.find_node("s2")];
  ASSERT_EQ(s2.port_link.size(), 2u);
  EXPECT_EQ(t.links()[s2.port_link[1]].name, "t1-s2");
  // Side 0 is the lower tier: a2b goes up.
  const TopoLink& up = t.links()[t.find_link("t0-s3")];
  EXPECT_EQ(t.nodes()[up.node[0]].name, "t0");
  EXPECT_EQ(t.host_side(t.find_node("t1h4")), 0);
  // Path group i is the links through spine i.
  ASSERT_EQ(t.path_groups().size(), 4u);
  EXPECT_EQ(t.path_groups()[1].name, "s1");
  ASSERT_EQ(t.path_groups()[1].links.size(), 2u);
  EXPECT_EQ(t.links()[t.path_groups()[1].links[0]].name, "t0-s1");
  EXPECT_EQ(t.links()[t.path_groups()[1].links[1]].name, "t1-s1");
  expect_unique_addresses(t);
  expect_consistent_ports(t);
}

TEST(Topology, LeafSpineCountsAndRates) {
  // Row M5: 4 spines, 32 leaves, 10 hosts each, 40G access, 100G uplinks.
  const Topology t = make_leaf_spine(4, 32, 10, k40, k100, kDelay);
  EXPECT_EQ(t.hosts().size(), 320u);
  EXPECT_EQ(count_role(t, "leaf"), 32u);
  EXPECT_EQ(count_role(t, "spine"), 4u);
  EXPECT_EQ(t.links().size(), 320u + 32u * 4u);
  EXPECT_EQ(t.links()[t.find_link("l31h9-l31")].rate.bps, 40e9);
  EXPECT_EQ(t.links()[t.find_link("l31-s3")].rate.bps, 100e9);
  EXPECT_EQ(t.nodes()[t.find_node("s0")].port_link.size(), 32u);
  EXPECT_EQ(t.nodes()[t.find_node("l7")].port_link.size(), 14u);
  // Past 254 hosts the addresses leave 10.0.0.0/24 and skip .0 and .255.
  EXPECT_EQ(ip_text(t.nodes()[t.hosts()[253]].ip), "10.0.0.254");
  EXPECT_EQ(ip_text(t.nodes()[t.hosts()[254]].ip), "10.0.1.1");
  expect_unique_addresses(t);
  expect_consistent_ports(t);
}

TEST(Topology, FatTreeK4Has16HostsAnd20Switches) {
  const Topology t = make_fat_tree(4, k40, k40, kDelay);
  EXPECT_EQ(t.hosts().size(), 16u);
  EXPECT_EQ(t.switches().size(), 20u);
  EXPECT_EQ(count_role(t, "edge"), 8u);
  EXPECT_EQ(count_role(t, "aggregation"), 8u);
  EXPECT_EQ(count_role(t, "core"), 4u);
  EXPECT_EQ(t.links().size(), 16u + 16u + 16u);
  // Every switch has k = 4 ports.
  for (int s : t.switches()) EXPECT_EQ(t.nodes()[s].port_link.size(), 4u) << t.nodes()[s].name;
  // Aggregation i of each pod reaches cores i*k/2 .. i*k/2 + k/2 - 1.
  EXPECT_GE(t.find_link("p3a1-c2"), 0);
  EXPECT_GE(t.find_link("p3a1-c3"), 0);
  EXPECT_LT(t.find_link("p3a1-c0"), 0);
  // Core port p is pod p.
  const TopoNode& c3 = t.nodes()[t.find_node("c3")];
  EXPECT_EQ(t.links()[c3.port_link[2]].name, "p2a1-c3");
  EXPECT_EQ(t.nodes()[t.hosts()[5]].name, "p1e0h1");
  ASSERT_EQ(t.path_groups().size(), 4u);
  EXPECT_EQ(t.path_groups()[0].links.size(), 4u);  // one link per pod
  expect_unique_addresses(t);
  expect_consistent_ports(t);
}

TEST(Topology, SwitchesBetweenCountTheShortestPath) {
  const Topology ft = make_fat_tree(4, k40, k40, kDelay);
  auto between = [](const Topology& t, const char* a, const char* b) {
    return t.switches_between(t.find_node(a), t.find_node(b));
  };
  EXPECT_EQ(between(ft, "p0e0h0", "p0e0h1"), 1) << "one edge switch";
  EXPECT_EQ(between(ft, "p0e0h0", "p0e1h0"), 3) << "edge, aggregation, edge";
  EXPECT_EQ(between(ft, "p0e0h0", "p3e1h1"), 5) << "through a core";
  EXPECT_EQ(between(ft, "p3e1h1", "p0e0h0"), 5);
  EXPECT_EQ(between(ft, "p0e0h0", "p0e0h0"), 0);
  const Topology ls = make_leaf_spine(4, 4, 10, k40, k100, kDelay);
  EXPECT_EQ(between(ls, "l0h0", "l0h9"), 1);
  EXPECT_EQ(between(ls, "l0h0", "l3h2"), 3);
  EXPECT_EQ(between(ls, "l0h0", "s2"), 1) << "the ends do not count";
  EXPECT_EQ(between(make_back_to_back(k40, kDelay), "h0", "h1"), 0);
  // A path never runs through a host: h1 reaches h2 only through sw.
  Topology t;
  t.add_host("h0");
  t.add_host("h1");
  t.add_switch("sw");
  t.add_link("h0", "sw", k40, kDelay);
  t.add_link("h1", "sw", k40, kDelay);
  t.finalize();
  EXPECT_EQ(between(t, "h0", "h1"), 1);
}

TEST(Topology, FatTreeSizesFollowK) {
  for (int k : {2, 6, 8}) {
    const Topology t = make_fat_tree(k, k40, k40, kDelay);
    EXPECT_EQ(t.hosts().size(), size_t(k * k * k / 4)) << k;
    EXPECT_EQ(t.switches().size(), size_t(k * k + k * k / 4)) << k;
  }
  EXPECT_THROW(make_fat_tree(5, k40, k40, kDelay), TopologyError);
}

std::string error_of(const std::function<void()>& build) {
  try {
    build();
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "";
}

TEST(Topology, ExplicitPortsAreKeptAndTheRestFilledInOrder) {
  Topology t;
  t.add_host("a");
  t.add_host("b");
  t.add_host("c");
  t.add_switch("sw");
  t.add_link("a", "sw", k40, kDelay);             // lowest free: 0
  t.add_link("b", "sw", k40, kDelay, -1, 0 + 2);  // asks for 2
  t.add_link("c", "sw", k40, kDelay);             // lowest free: 1
  t.finalize();
  EXPECT_EQ(t.links()[0].port[1], 0);
  EXPECT_EQ(t.links()[1].port[1], 2);
  EXPECT_EQ(t.links()[2].port[1], 1);
  EXPECT_EQ(t.links()[1].name, "b-sw");
}

TEST(Topology, ErrorsNameTheBadNodeLinkPortOrAddress) {
  EXPECT_NE(error_of([] {
              Topology t;
              t.add_host("a");
              t.add_link("a", "nowhere", k40, kDelay);
            }).find("link 'a-nowhere' names unknown node 'nowhere'"),
            std::string::npos);
  const std::string unreachable = error_of([] {
    Topology t;
    t.add_host("a");
    t.add_host("b");
    t.add_host("c");
    t.add_host("d");
    t.add_switch("x");
    t.add_switch("y");
    t.add_link("a", "x", k40, kDelay);
    t.add_link("b", "x", k40, kDelay);
    t.add_link("c", "y", k40, kDelay);
    t.add_link("d", "y", k40, kDelay);
    t.finalize();
  });
  EXPECT_NE(unreachable.find("host 'c' is unreachable"), std::string::npos) << unreachable;
  EXPECT_NE(error_of([] {
              Topology t;
              t.add_host("a");
              t.add_host("b");
              t.add_switch("x");
              t.add_link("a", "x", k40, kDelay);
              t.finalize();
            }).find("host 'b' has no link"),
            std::string::npos);
  const std::string dup = error_of([] {
    Topology t;
    t.add_host("a", parse_ip("10.1.1.1"));
    t.add_host("b", parse_ip("10.1.1.1"));
    t.add_switch("x");
    t.add_link("a", "x", k40, kDelay);
    t.add_link("b", "x", k40, kDelay);
    t.finalize();
  });
  EXPECT_NE(dup.find("duplicate address 10.1.1.1: hosts 'a' and 'b'"), std::string::npos) << dup;
  // An explicit address equal to another host's automatic one.
  const std::string dup_auto = error_of([] {
    Topology t;
    t.add_host("a");                        // automatic: 10.0.0.1
    t.add_host("b", parse_ip("10.0.0.1"));  // pinned to the same
    t.add_link("a", "b", k40, kDelay);
    t.finalize();
  });
  EXPECT_NE(dup_auto.find("duplicate address 10.0.0.1"), std::string::npos) << dup_auto;
  const std::string port = error_of([] {
    Topology t;
    t.add_host("a");
    t.add_host("b");
    t.add_switch("x");
    t.add_link("a", "x", k40, kDelay, -1, 3);
    t.add_link("b", "x", k40, kDelay, -1, 3);
    t.finalize();
  });
  EXPECT_NE(port.find("port 3 of switch 'x' is used by links 'a-x' and 'b-x'"), std::string::npos)
      << port;
  const std::string two_links = error_of([] {
    Topology t;
    t.add_host("a");
    t.add_switch("x");
    t.add_switch("y");
    t.add_link("a", "x", k40, kDelay);
    t.add_link("a", "y", k40, kDelay);
    t.finalize();
  });
  EXPECT_NE(two_links.find("host 'a' is on links 'a-x' and 'a-y'"), std::string::npos) << two_links;
  EXPECT_NE(error_of([] {
              Topology t;
              t.add_host("a");
              t.add_host("a");
            }).find("node 'a' is defined twice"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Topology t;
              t.add_host("a");
              t.add_switch("x");
              t.add_link("a", "x", k40, kDelay, 0, 0, "a.x");
            }).find("must not contain '.'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Topology t;
              t.add_switch("x");
              t.finalize();
            }).find("no host"),
            std::string::npos);
}

TEST(Topology, AddressTextRoundTrips) {
  EXPECT_EQ(parse_ip("10.2.3.4"), std::optional<uint32_t>(0x0A020304u));
  EXPECT_FALSE(parse_ip("10.2.3"));
  EXPECT_FALSE(parse_ip("10.2.3.256"));
  EXPECT_FALSE(parse_ip("10.2.3.4x"));
  const auto mac = parse_mac("02:00:0a:0b:0c:ff");
  ASSERT_TRUE(mac);
  EXPECT_EQ(mac_text(*mac), "02:00:0a:0b:0c:ff");
  EXPECT_FALSE(parse_mac("02:00:0a:0b:0c"));
  EXPECT_EQ(mac_text(host_mac(0)), "02:00:00:00:00:01");
  EXPECT_EQ(mac_text(host_mac(0x1234)), "02:00:00:00:12:35");
  EXPECT_EQ(ip_text(host_ip(254 * 256)), "10.1.0.1");
}

}  // namespace
}  // namespace mprdma::fabric
