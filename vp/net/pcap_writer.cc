#include "vp/net/pcap_writer.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mprdma::net {
namespace {

struct GlobalHeader {
  uint32_t magic;
  uint16_t version_major;
  uint16_t version_minor;
  int32_t thiszone;
  uint32_t sigfigs;
  uint32_t snaplen;
  uint32_t network;
};
static_assert(sizeof(GlobalHeader) == 24, "pcap global header is 24 bytes");

struct RecordHeader {
  uint32_t ts_sec;
  uint32_t ts_frac;  // nanoseconds with the 0xa1b23c4d magic
  uint32_t incl_len;
  uint32_t orig_len;
};
static_assert(sizeof(RecordHeader) == 16, "pcap record header is 16 bytes");

}  // namespace

PcapWriter::PcapWriter(const std::string& path, uint32_t snaplen)
    : path_(path), snaplen_(snaplen ? snaplen : kSnapLen) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_)
    throw std::runtime_error("cannot open pcap file '" + path + "': " + std::strerror(errno));
  const GlobalHeader h{kMagicNanoseconds, 2, 4, 0, 0, snaplen_, kLinkTypeEthernet};
  put(&h, sizeof h);
}

PcapWriter::~PcapWriter() {
  if (file_) std::fclose(file_);  // flushes; a destructor has nowhere to report errors
}

void PcapWriter::put(const void* bytes, size_t n) {
  if (std::fwrite(bytes, 1, n, file_) != n)
    throw std::runtime_error("cannot write pcap file '" + path_ + "': " + std::strerror(errno));
}

void PcapWriter::write(uint64_t time_ps, const uint8_t* data, size_t len) {
  const uint64_t ns = time_ps / 1000;
  const uint32_t incl = static_cast<uint32_t>(len < snaplen_ ? len : snaplen_);
  const RecordHeader r{static_cast<uint32_t>(ns / 1000000000ull),
                       static_cast<uint32_t>(ns % 1000000000ull), incl, static_cast<uint32_t>(len)};
  put(&r, sizeof r);
  if (incl) put(data, incl);
  ++records_;
}

void PcapWriter::flush() {
  if (std::fflush(file_) != 0)
    throw std::runtime_error("cannot write pcap file '" + path_ + "': " + std::strerror(errno));
}

}  // namespace mprdma::net
