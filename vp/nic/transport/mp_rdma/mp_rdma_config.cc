#include "vp/nic/transport/mp_rdma/mp_rdma_config.h"

namespace mprdma::nic {

void MpRdmaConfig::bind(core::Binder& b) {
  const core::Duration ns1 = core::Duration::from_ps(1000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("initial_window", initial_window,
          "IW: congestion window at start and after idle, spread over IW random virtual paths "
          "(the paper: one BDP).",
          1, 65535, "packets");
  b.field("delta", delta,
          "Delta: out-of-order degree the path selection aims at; snd_ool = snd_ooh - delta "
          "(paper: 32).",
          1, 65536, "packets");
  b.field("bitmap_slots", bitmap_slots,
          "L: slots of the receiver's 2-bit tracking bitmap; a packet beyond rcv_nxt + L is "
          "dropped and NACKed (paper: 64).",
          2, 65536, "packets");
  if (bitmap_slots & (bitmap_slots - 1)) b.error("bitmap_slots must be a power of two");
  b.field("ooo_control", ooo_control,
          "Out-of-order-aware path selection: an ACK whose SACK is below snd_ool lowers cwnd "
          "by one and clocks nothing out on its path. Off: the M8 baseline.");
  b.choice(
      "overflow_nack", overflow_nack,
      {{"every_drop", MpOverflowNack::every_drop},
       {"once_per_head", MpOverflowNack::once_per_head}},
      "How the receiver answers packets it drops beyond its bitmap (the paper: \"a NACK "
      "will be generated\", not how many): every_drop NACKs each one, naming rcv_nxt, so "
      "the dropped packet's path keeps its ACK clock; once_per_head NACKs the first drop "
      "per rcv_nxt only (3 more bytes of receiver state). vp/nic/transport/transport.md, \"Two "
      "readings of section 3.4's loss recovery\", has what each does to rows M2 and M8.");
  b.choice("recovery_new_data", recovery_new_data,
           {{"after_retransmissions", MpRecoveryNewData::after_retransmissions},
            {"after_recovery", MpRecoveryNewData::after_recovery}},
           "When new data may follow in recovery mode: after_retransmissions, once the "
           "retransmissions from snd_retx have reached `recovery` (ACKs then clock out new "
           "data while they travel); after_recovery, only once snd_una passes `recovery` "
           "(section 3.4 read strictly; an ACK that finds nothing to send meanwhile shrinks "
           "cwnd by one, use it or lose it). Same section of vp/nic/transport/transport.md.");
  b.field(
      "window_reduction", window_reduction,
      "Path window reduction, \"use it or lose it\": an ACK that could clock out a packet "
      "but finds no data to send lowers cwnd by one (the paper). Off: an ablation, cwnd "
      "keeps what such ACKs opened; vp/nic/transport/transport.md, \"When the sender runs out of "
      "data\", measures both.");
  b.field("probe_probability", probe_probability,
          "p: per RTT, the probability of sending one packet to a new random virtual path "
          "instead of the ACK's (the paper gives no value; 1 %).",
          0.0, 1.0);
  b.field("max_packets_per_ack", max_packets_per_ack,
          "Burst control: packets one ACK may clock out; the rest leave on the burst timer "
          "(half an RTT) to random paths (paper: 2).",
          1, 64, "packets");
  b.field("base_rtt", base_rtt,
          "RTT the sender assumes for its burst timer, idle detection, probing period and "
          "synchronise delay (the paper measures none of them; the fabric's base RTT).",
          ns1, s1);
  b.field("idle_rtts", idle_rtts,
          "Restart from IW after this many RTTs without sending "
          "(paper: 3).",
          1, 1000, "RTTs");
  b.field("sync_alpha", sync_alpha,
          "Alpha: a synchronise message waits alpha * delta / (cwnd / RTT) after the message "
          "before it (the paper gives no value; 1).",
          0.0, 100.0);
  b.field("rto", rto,
          "Retransmission timeout: every unacknowledged packet is sent again (the paper gives "
          "no value; 1 ms, about 60 base RTTs, so that loss recovery by NACK comes first).",
          ns1, s1);
  b.field("virtual_paths", virtual_paths,
          "Virtual paths: UDP source ports 0xC000 + [0, N) (power of two, at most 16384). 1: "
          "the QP's own UDP source port (e.g. the one a job's via chose), a single-path "
          "MP-RDMA connection (the paper's SP-RDMA).",
          1, 16384);
  if (virtual_paths & (virtual_paths - 1)) b.error("virtual_paths must be a power of two");
  if (delta > bitmap_slots) b.error("delta must not exceed bitmap_slots");
}

}  // namespace mprdma::nic
