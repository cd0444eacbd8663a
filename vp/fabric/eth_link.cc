#include "vp/fabric/eth_link.h"

#include <filesystem>
#include <stdexcept>

namespace mprdma::fabric {

void LinkConfig::bind(core::Binder& b) {
  b.field("name", name,
          "Link name: names its statistics (link.<name>.<a2b|b2a>.*), log channel "
          "(link.<name>) and pcap file (<name>.pcap).");
  b.field("rate", rate, "Line rate of each direction (e.g. 40Gbps).");
  b.field("delay", delay,
          "Propagation delay, last bit sent to last bit received, excluding serialisation: "
          "cable plus PHY latency of both ends (e.g. 200ns).");
  b.field("loss", loss,
          "Probability that a frame is lost, drawn independently per frame and direction "
          "from the seeded stream link.<name>.<dir>.loss. A lost frame still occupies the wire.",
          0.0, 1.0, "probability");
  b.field("pcap", pcap,
          "Write both directions to <out_dir>/<name>.pcap, stamped with the transmit start "
          "time (nanosecond resolution); lost frames are included.");
  b.field("pcap_snaplen", pcap_snaplen,
          "Bytes of each frame kept in the pcap; the default keeps every RoCEv2 header and "
          "drops most payload, 0 keeps whole frames.",
          0, 262144);
}

namespace {

// Checked before any member module exists, so a bad configuration leaves no
// half-built hierarchy behind.
const LinkConfig& validated(const LinkConfig& cfg) {
  if (!(cfg.rate.bps > 0))
    throw std::invalid_argument("link " + cfg.name + ": rate must be positive");
  if (!(cfg.loss >= 0.0 && cfg.loss <= 1.0))
    throw std::invalid_argument("link " + cfg.name + ": loss must be in [0, 1]");
  return cfg;
}

}  // namespace

EthLink::EthLink(sc_core::sc_module_name name, const LinkConfig& cfg, core::SimEnv& env)
    : sc_core::sc_module(name),
      cfg_(validated(cfg)),
      log_(core::Log::channel("link." + cfg.name)),
      arrivals_("arrivals"),
      delay_(cfg.delay.sc()) {
  static const char* const kTags[kSides] = {"a2b", "b2a"};
  for (int s = 0; s < kSides; ++s) {
    Direction& d = dir_[s];
    d.tag = kTags[s];
    const std::string base = "link." + cfg_.name + "." + d.tag + ".";
    d.loss = &env.random.stream(base + "loss");
    d.tx_packets = &env.stats.counter(base + "tx_packets", "packets",
                                      "frames transmitted, lost ones included");
    d.tx_bytes = &env.stats.counter(base + "tx_bytes", "bytes",
                                    "wire bytes transmitted (frame, FCS, preamble, IFG)");
    d.drops = &env.stats.counter(base + "drops", "packets", "frames lost on the wire");
    d.busy_ps = &env.stats.counter(base + "busy_ps", "ps", "time the transmitter was busy");
  }
  if (cfg_.pcap && !env.out_dir.empty()) {
    const std::string path = (std::filesystem::path(env.out_dir) / (cfg_.name + ".pcap")).string();
    pcap_ = std::make_unique<net::PcapWriter>(path, static_cast<uint32_t>(cfg_.pcap_snaplen.n));
    MPR_LOG(log_, info, "capturing to " << path);
  }
}

EthLink::~EthLink() = default;

void EthLink::check_side(int side) {
  if (side < 0 || side >= kSides)
    throw std::out_of_range("EthLink: side " + std::to_string(side) + " is not 0 or 1");
}

void EthLink::attach(int side, EthPortIf* port) {
  check_side(side);
  ports_[side] = port;
}

bool EthLink::idle(int side) const {
  check_side(side);
  return sc_core::sc_time_stamp() >= dir_[side].free_at;
}

sc_core::sc_time EthLink::idle_at(int side) const {
  check_side(side);
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  return dir_[side].free_at > now ? dir_[side].free_at : now;
}

size_t EthLink::in_flight(int side) const {
  check_side(side);
  return dir_[side].in_flight.size();
}

sc_core::sc_time EthLink::transmit(int side, net::PacketPtr pkt) {
  check_side(side);
  if (!pkt) throw std::invalid_argument(std::string(name()) + ": transmit of a null packet");
  Direction& d = dir_[side];
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (now < d.free_at)
    throw std::logic_error(std::string(name()) + ": transmit on side " + std::to_string(side) +
                           " at " + now.to_string() + " while busy until " +
                           d.free_at.to_string());
  if (!ports_[1 - side])
    throw std::logic_error(std::string(name()) + ": no port attached on side " +
                           std::to_string(1 - side));

  const uint64_t wire = pkt->wire_bytes();
  const uint64_t busy = cfg_.rate.serialize_ps(wire);
  d.free_at = now + sc_core::sc_time::from_value(busy);
  d.tx_packets->add();
  d.tx_bytes->add(wire);
  d.busy_ps->add(busy);
  if (pcap_) pcap_->write(now.value(), pkt->data.data(), pkt->data.size());

  if (d.loss->bernoulli(cfg_.loss)) {
    d.drops->add();
    MPR_LOG(log_, debug, d.tag << " lost packet " << pkt->id << " (" << wire << " wire bytes)");
    return d.free_at;
  }
  MPR_LOG(log_, trace,
          d.tag << " tx packet " << pkt->id << " (" << wire << " wire bytes) until " << d.free_at);
  d.in_flight.push_back(std::move(pkt));
  arrivals_.at(d.free_at + delay_, [this, side] { deliver(side); });
  return d.free_at;
}

void EthLink::deliver(int side) {
  Direction& d = dir_[side];
  net::PacketPtr pkt = std::move(d.in_flight.front());
  d.in_flight.pop_front();
  if (!ports_[1 - side]) {
    // Detached while the frame was on the wire: like an unplugged cable.
    d.drops->add();
    MPR_LOG(log_, warn, d.tag << " packet " << pkt->id << " arrived at a detached port");
    return;
  }
  MPR_LOG(log_, trace, d.tag << " rx packet " << pkt->id);
  ports_[1 - side]->receive(std::move(pkt));
}

}  // namespace mprdma::fabric
