// PcapWriter: file header, record layout, timestamps, errors.
#include "vp/net/pcap_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/files.h"

namespace mprdma::net {
namespace {

// pcap fields are in the writer's byte order; the test runs on the same host.
using test::read_file;
using test::u32;
uint16_t u16(const std::vector<uint8_t>& d, size_t at) {
  uint16_t v;
  std::memcpy(&v, &d[at], 2);
  return v;
}

std::string temp_path(const std::string& leaf) {
  return ::testing::TempDir() + "/mprdma_" + leaf + "_" + std::to_string(::getpid()) + ".pcap";
}

TEST(PcapWriter, HeaderRecordsAndTimestamps) {
  const std::string path = temp_path("writer");
  const std::vector<uint8_t> a = {1, 2, 3, 4, 5};
  const std::vector<uint8_t> b(100, 0xAB);
  {
    PcapWriter w(path);
    w.write(0, a.data(), a.size());
    // 1234.567890123456 s: stored as 1234 s + 567890123 ns (ps dropped).
    w.write(1234567890123456ull, b.data(), b.size());
    w.write(999, nullptr, 0);  // an empty record is legal
    EXPECT_EQ(w.records(), 3u);
    EXPECT_EQ(w.path(), path);
  }  // the destructor flushes
  const auto d = read_file(path);
  ASSERT_EQ(d.size(), 24u + 16 + 5 + 16 + 100 + 16);
  EXPECT_EQ(u32(d, 0), 0xa1b23c4du);  // nanosecond magic
  EXPECT_EQ(u16(d, 4), 2);
  EXPECT_EQ(u16(d, 6), 4);
  EXPECT_EQ(u32(d, 8), 0u);   // thiszone
  EXPECT_EQ(u32(d, 12), 0u);  // sigfigs
  EXPECT_EQ(u32(d, 16), PcapWriter::kSnapLen);
  EXPECT_EQ(u32(d, 20), 1u);  // LINKTYPE_ETHERNET
  size_t at = 24;
  EXPECT_EQ(u32(d, at), 0u);
  EXPECT_EQ(u32(d, at + 4), 0u);
  EXPECT_EQ(u32(d, at + 8), 5u);
  EXPECT_EQ(u32(d, at + 12), 5u);
  EXPECT_EQ(std::vector<uint8_t>(d.begin() + at + 16, d.begin() + at + 21), a);
  at += 16 + 5;
  EXPECT_EQ(u32(d, at), 1234u);
  EXPECT_EQ(u32(d, at + 4), 567890123u);
  EXPECT_EQ(u32(d, at + 8), 100u);
  EXPECT_EQ(u32(d, at + 12), 100u);
  EXPECT_EQ(d[at + 16], 0xAB);
  at += 16 + 100;
  EXPECT_EQ(u32(d, at), 0u);
  EXPECT_EQ(u32(d, at + 4), 0u);  // 999 ps rounds down to 0 ns
  EXPECT_EQ(u32(d, at + 8), 0u);
  std::remove(path.c_str());
}

TEST(PcapWriter, FlushMakesRecordsVisible) {
  const std::string path = temp_path("flush");
  PcapWriter w(path);
  const uint8_t byte = 7;
  w.write(5000, &byte, 1);
  w.flush();
  EXPECT_EQ(read_file(path).size(), 24u + 16 + 1);
  std::remove(path.c_str());
}

TEST(PcapWriter, UnopenablePathThrowsNamingIt) {
  const std::string path = "/nonexistent-dir/for/sure/x.pcap";
  try {
    PcapWriter w(path);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mprdma::net
