// Writes frames to a classic pcap file that Wireshark and tshark read.
//
// Nanosecond timestamps (magic 0xa1b23c4d) because at 40 Gbps a 64-byte frame
// lasts 16.8 ns: microsecond stamps would collapse back-to-back frames.
// Link type 1 (Ethernet); frames are stored without FCS, as captured by a
// host NIC. The file is written in the host's byte order, which readers
// detect from the magic number.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace mprdma::net {

class PcapWriter {
 public:
  static constexpr uint32_t kMagicNanoseconds = 0xa1b23c4d;
  static constexpr uint32_t kLinkTypeEthernet = 1;
  // Default snapshot length: frames longer than the snapshot length are
  // stored truncated (orig_len keeps the size).
  static constexpr uint32_t kSnapLen = 262144;

  // Creates (truncates) the file and writes the global header. Throws
  // std::runtime_error naming the path and the reason if it cannot.
  // `snaplen` bytes of each frame are kept (0 means kSnapLen); 128 keeps
  // every RoCEv2 header and drops most of the payload.
  explicit PcapWriter(const std::string& path, uint32_t snaplen = 0);
  // Flushes and closes the file.
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Appends one frame captured at simulated time `time_ps` (picoseconds;
  // stored rounded down to nanoseconds). Throws std::runtime_error on a
  // write error.
  void write(uint64_t time_ps, const uint8_t* data, size_t len);
  // Pushes buffered records to the file (e.g. before reading it back).
  void flush();

  const std::string& path() const { return path_; }
  uint64_t records() const { return records_; }

 private:
  void put(const void* bytes, size_t n);

  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t records_ = 0;
  uint32_t snaplen_ = kSnapLen;
};

}  // namespace mprdma::net
