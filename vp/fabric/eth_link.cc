#include "vp/fabric/eth_link.h"

#include <filesystem>
#include <stdexcept>
#include <vector>

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

void LinkConfig::bind_loss_modes(core::Binder& b) {
  b.field("loss_ip_id_modulo", loss_ip_id_modulo,
          "Drop every IPv4 frame whose identification field is a multiple of N (ip_id % N == 0), "
          "as the MP-RDMA paper did with its switch's iCAP; frames that are not IPv4 pass. "
          "Counted in link.<name>.<dir>.ip_id_drops. 0 turns it off.",
          0, 65536);
  b.choice("loss_dir", loss_dir,
           {{"both", LossDir::both}, {"a2b", LossDir::a2b}, {"b2a", LossDir::b2a}},
           "Directions that 'loss' and 'loss_ip_id_modulo' apply to.");
}

namespace {

// Checked before any member module exists, so a bad configuration leaves no
// half-built hierarchy behind.
const LinkConfig& validated(const LinkConfig& cfg) {
  if (!(cfg.rate.bps > 0))
    throw std::invalid_argument("link " + cfg.name + ": rate must be positive");
  if (!(cfg.loss >= 0.0 && cfg.loss <= 1.0))
    throw std::invalid_argument("link " + cfg.name + ": loss must be in [0, 1]");
  if (cfg.loss_ip_id_modulo < 0)
    throw std::invalid_argument("link " + cfg.name + ": loss_ip_id_modulo must not be negative");
  return cfg;
}

// The IPv4 identification of an Ethernet frame (untagged or with one
// 802.1Q tag), or false if the frame does not carry IPv4.
bool ipv4_id(const std::vector<uint8_t>& f, uint16_t* id) {
  size_t ip = net::kEthHeaderBytes;
  if (f.size() < ip) return false;
  uint16_t type = static_cast<uint16_t>(f[12] << 8 | f[13]);
  if (type == 0x8100) {  // a VLAN tag (priority code point) before the type
    ip += 4;
    if (f.size() < ip) return false;
    type = static_cast<uint16_t>(f[16] << 8 | f[17]);
  }
  if (type != net::kEtherTypeIpv4 || f.size() < ip + 20 || (f[ip] >> 4) != 4) return false;
  *id = static_cast<uint16_t>(f[ip + 4] << 8 | f[ip + 5]);
  return true;
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
    d.drops = &env.stats.counter(base + "drops", "packets",
                                 "frames lost on the wire, whatever the cause");
    d.down_drops = &env.stats.counter(base + "down_drops", "packets",
                                      "frames lost because the direction was down (in flight "
                                      "when it went down, or sent while down)");
    d.ip_id_drops = &env.stats.counter(base + "ip_id_drops", "packets",
                                       "frames dropped by the IP-ID rule (ip_id % N == 0)");
    d.busy_ps = &env.stats.counter(base + "busy_ps", "ps", "time the transmitter was busy");
    d.rate = cfg_.rate;
    using LossDir = LinkConfig::LossDir;
    const bool lossy =
        cfg_.loss_dir == LossDir::both || cfg_.loss_dir == (s == 0 ? LossDir::a2b : LossDir::b2a);
    d.loss_p = lossy ? cfg_.loss : 0.0;
    d.ip_id_modulo = lossy ? static_cast<uint64_t>(cfg_.loss_ip_id_modulo) : 0;
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

void EthLink::attach(int side, net::EthPortIf* port) {
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
  size_t n = 0;
  for (const net::PacketPtr& p : dir_[side].in_flight) n += p != nullptr;
  return n;
}

template <class F>
void EthLink::for_sides(int side, F&& f) {
  if (side == kBothSides) {
    for (Direction& d : dir_) f(d);
    return;
  }
  check_side(side);
  f(dir_[side]);
}

void EthLink::set_up(bool up, int side) {
  for_sides(side, [&](Direction& d) {
    if (d.up == up) return;
    d.up = up;
    if (up) {
      MPR_LOG(log_, info, d.tag << " up");
      return;
    }
    // The frames on the wire never arrive: their arrival actions stay
    // scheduled and find a null packet.
    uint64_t lost = 0;
    for (net::PacketPtr& p : d.in_flight)
      if (p) {
        p.reset();
        ++lost;
      }
    d.down_drops->add(lost);
    d.drops->add(lost);
    MPR_LOG(log_, info, d.tag << " down, " << lost << " frames in flight lost");
  });
}

bool EthLink::is_up(int side) const {
  check_side(side);
  return dir_[side].up;
}

void EthLink::set_rate(core::Bandwidth rate, int side) {
  if (!(rate.bps > 0)) throw std::invalid_argument("link " + cfg_.name + ": rate must be positive");
  for_sides(side, [&](Direction& d) {
    d.rate = rate;
    MPR_LOG(log_, info, d.tag << " rate " << core::to_string(rate));
  });
}

core::Bandwidth EthLink::rate(int side) const {
  check_side(side);
  return dir_[side].rate;
}

void EthLink::set_loss(double probability, int side) {
  if (!(probability >= 0.0 && probability <= 1.0))
    throw std::invalid_argument("link " + cfg_.name + ": loss must be in [0, 1]");
  for_sides(side, [&](Direction& d) { d.loss_p = probability; });
}

double EthLink::loss(int side) const {
  check_side(side);
  return dir_[side].loss_p;
}

void EthLink::set_loss_ip_id_modulo(uint64_t n, int side) {
  for_sides(side, [&](Direction& d) { d.ip_id_modulo = n; });
}

uint64_t EthLink::loss_ip_id_modulo(int side) const {
  check_side(side);
  return dir_[side].ip_id_modulo;
}

void EthLink::apply(const LinkChange& c) {
  switch (c.kind) {
    case LinkChange::Kind::kDown:
      set_up(false, c.side);
      break;
    case LinkChange::Kind::kUp:
      set_up(true, c.side);
      break;
    case LinkChange::Kind::kRate:
      set_rate(c.rate, c.side);
      break;
    case LinkChange::Kind::kLoss:
      set_loss(c.loss, c.side);
      break;
    case LinkChange::Kind::kLossIpId:
      set_loss_ip_id_modulo(c.ip_id_modulo, c.side);
      break;
  }
}

void EthLink::schedule(const sc_core::sc_time& when, const LinkChange& change) {
  if (change.side != kBothSides) check_side(change.side);
  // Checked now, so a bad value fails where it is scheduled, not later.
  if (change.kind == LinkChange::Kind::kRate && !(change.rate.bps > 0))
    throw std::invalid_argument("link " + cfg_.name + ": rate must be positive");
  if (change.kind == LinkChange::Kind::kLoss && !(change.loss >= 0.0 && change.loss <= 1.0))
    throw std::invalid_argument("link " + cfg_.name + ": loss must be in [0, 1]");
  arrivals_.at(when, [this, change] { apply(change); });
}

sc_core::sc_time EthLink::transmit(int side, net::PacketPtr pkt) {
  check_side(side);
  if (!pkt) throw std::invalid_argument(std::string(name()) + ": transmit of a null packet");
  Direction& d = dir_[side];
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (now < d.free_at)
    throw std::logic_error(std::string(name()) + ": transmit on side " + std::to_string(side) +
                           " at " + now.to_string() + " while busy until " + d.free_at.to_string());
  if (!ports_[1 - side])
    throw std::logic_error(std::string(name()) + ": no port attached on side " +
                           std::to_string(1 - side));

  const uint64_t wire = pkt->wire_bytes();
  const uint64_t busy = d.rate.serialize_ps(wire);
  d.free_at = now + sc_core::sc_time::from_value(busy);
  d.tx_packets->add();
  d.tx_bytes->add(wire);
  d.busy_ps->add(busy);
  if (pcap_) pcap_->write(now.value(), pkt->data.data(), pkt->data.size());

  if (!d.up) {
    d.down_drops->add();
    d.drops->add();
    MPR_LOG(log_, debug, d.tag << " down: packet " << pkt->id << " lost");
    return d.free_at;
  }
  uint16_t ip_id = 0;
  if (d.ip_id_modulo && ipv4_id(pkt->data, &ip_id) && ip_id % d.ip_id_modulo == 0) {
    d.ip_id_drops->add();
    d.drops->add();
    MPR_LOG(log_, debug, d.tag << " dropped packet " << pkt->id << " by IP ID " << ip_id);
    return d.free_at;
  }
  if (d.loss->bernoulli(d.loss_p)) {
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
  if (!pkt) return;  // lost when the direction went down (counted then)
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
