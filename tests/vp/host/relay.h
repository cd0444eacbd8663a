// A store-and-forward box between two links, with a filter that sees every
// frame and may change it, drop it or send it twice: the adversarial network
// of the wire fuzz test. Side 0 faces the first link (its frames come from
// the host there), side 1 the second; each direction is a FIFO drained at
// the outgoing link's rate.
#pragma once

#ifndef SC_INCLUDE_DYNAMIC_PROCESSES
#define SC_INCLUDE_DYNAMIC_PROCESSES
#endif
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <systemc>

#include "vp/fabric/eth_link.h"
#include "vp/net/eth_port.h"
#include "vp/net/packet.h"

namespace mprdma::test {

class Relay : public sc_core::sc_module {
 public:
  enum class Verdict { forward, drop, duplicate };
  // `from`: 0 for frames of the host on the first link, 1 for the other.
  using Filter = std::function<Verdict(net::Packet& frame, int from)>;

  // Attaches itself to side 1 of `first` and side 0 of `second`.
  Relay(sc_core::sc_module_name name, fabric::EthLink& first, fabric::EthLink& second)
      : sc_core::sc_module(name), links_{&first, &second} {
    for (int from = 0; from < 2; ++from) {
      ports_[from].relay = this;
      ports_[from].from = from;
      sc_core::sc_spawn([this, from] { pump(from); }, sc_core::sc_gen_unique_name("pump"));
    }
    first.attach(1, &ports_[0]);
    second.attach(0, &ports_[1]);
  }

  void set_filter(Filter f) { filter_ = std::move(f); }

  // Queues a frame of the relay's own making behind those from side `from`
  // (the filter does not see it). May be called from the filter.
  void inject(int from, net::PacketPtr pkt) {
    queue_[from].push_back(std::move(pkt));
    ready_[from].notify(sc_core::SC_ZERO_TIME);
  }

 private:
  struct Port : net::EthPortIf {
    Relay* relay = nullptr;
    int from = 0;
    void receive(net::PacketPtr pkt) override { relay->arrive(from, std::move(pkt)); }
  };

  void arrive(int from, net::PacketPtr pkt) {
    const Verdict v = filter_ ? filter_(*pkt, from) : Verdict::forward;
    if (v == Verdict::drop) return;
    if (v == Verdict::duplicate) queue_[from].push_back(std::make_unique<net::Packet>(*pkt));
    queue_[from].push_back(std::move(pkt));
    ready_[from].notify(sc_core::SC_ZERO_TIME);
  }

  // Frames from side `from` leave on the other link, towards its host.
  void pump(int from) {
    fabric::EthLink& out = *links_[1 - from];
    const int side = from == 0 ? 0 : 1;  // the relay's side of the outgoing link
    for (;;) {
      while (queue_[from].empty()) sc_core::wait(ready_[from]);
      const sc_core::sc_time at = out.idle_at(side);
      if (at > sc_core::sc_time_stamp()) sc_core::wait(at - sc_core::sc_time_stamp());
      net::PacketPtr pkt = std::move(queue_[from].front());
      queue_[from].pop_front();
      out.transmit(side, std::move(pkt));
    }
  }

  fabric::EthLink* links_[2];
  Port ports_[2];
  std::deque<net::PacketPtr> queue_[2];
  sc_core::sc_event ready_[2];
  Filter filter_;
};

}  // namespace mprdma::test
