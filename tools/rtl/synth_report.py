#!/usr/bin/env python3
"""Synthesises the transport engine RTL with Yosys and writes what it costs:
LUTs, flip-flops and block RAM per engine, at the default number of context
rows (the QP-context cache's 256 connections on chip) and at the most the
NIC's SRAM budget could hold (nic.sram.size given to that engine's rows
alone, rounded down to a power of two), beside the context bits per
connection. Writes docs/rtl-synthesis.md (or --out); --check compares with
the file instead and fails when it is stale.

    synth_report.py --yosys yosys --sim mprdma-vp-sim --rtl-dir vp/nic/rtl
        [--out F | --check F]

The target is a Xilinx UltraScale+ part (`synth_xilinx -family xcup
-flatten`, Yosys 0.23 from Debian): the figures are a size estimate for an
FPGA prototype, not a sign-off netlist.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# One engine per entry: its top module, its sources after the package, its
# row-width parameter in the package and what the row holds.
ENGINES = [
    {
        "name": "MP-RDMA receiver",
        "top": "mp_rdma_rx_engine",
        "sources": ["mprdma_ctx_ram.sv", "mp_rdma_rx_engine.sv"],
        "row_bits": "RX_CTX_W",
        "row": "tracking bitmap (2 bits x L slots), rcv_nxt, the synchronise-NACK flag and the "
               "rcv_nxt it went for, the same for the once-per-head overflow NACK",
        "baseline": "24 bits are RoCEv2's expected PSN",
    },
    {
        "name": "MP-RDMA sender",
        "top": "mp_rdma_tx_engine",
        "sources": ["mprdma_ctx_ram.sv", "mprdma_divider.sv", "mp_rdma_tx_engine.sv"],
        "row_bits": "TX_CTX_W",
        "row": "snd_una, snd_nxt, end of data, cwnd (Q16.16), inflate, snd_ooh, the recovery "
               "flag and point, snd_retx, the head of the last rewinding NACK, the early-"
               "retransmission pointer, six 48-bit cycle stamps (last send, burst timer, next "
               "probe, previous synchronise message, RTO, RNR wait end) with a valid bit for "
               "the burst timer and the RTO, ever-sent and synchronise-armed flags",
        "baseline": "169 bits are RoCEv2's (snd_una, snd_nxt, end of data, the RTO with its "
                    "valid bit, the RNR wait's end)",
    },
    {
        "name": "go-back-N",
        "top": "gbn_qp_engine",
        "sources": ["mprdma_ctx_ram.sv", "gbn_qp_engine.sv"],
        "row_bits": "GBN_CTX_W",
        "row": "requester flag, snd_una, snd_nxt, end of data, highest PSN sent, retry and RNR "
               "budgets (8 bits each), the RTO (48-bit stamp and valid bit), the RNR or go-back "
               "wait's end (48 bits), the rewound-for-a-lost-response flag, the responder's ePSN, "
               "NAK-sent flag and ACK-coalescing count (32 bits), and the QP's parameters: "
               "retry_cnt, rnr_retry, ACK timeout (48 bits), UDP source port, ACK coalescing",
        "baseline": "all are RoCEv2's (GbnEngine counts 24 B: its timer stamps at 4 B, its "
                    "budgets at 1 B, the parameters in the QP context outside it)",
    },
]
PACKAGE = "mprdma_rtl_pkg.sv"
# nic.sram.size's default (vp/nic/uarch_config.h): 2 MiB.
SRAM_BYTES = 2 << 20

CELL = re.compile(r"^\s+(\S+)\s+(\d+)\s*$")


def package_params(path):
    """NAME -> value of the package's `localparam int`, via gen_params.py."""
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.h")
        subprocess.run([sys.executable, os.path.join(here, "gen_params.py"), path, out],
                       check=True)
        with open(out, encoding="utf-8") as fh:
            return {m.group(1): int(m.group(2)) for m in
                    re.finditer(r"constexpr uint32_t (\w+) = (\d+);", fh.read())}


def synthesise(yosys, sources, top, qp_w):
    """Cell counts of one synthesis (cell type -> number)."""
    with tempfile.TemporaryDirectory() as tmp:
        stat = os.path.join(tmp, "stat.txt")
        script = (f"read_verilog -sv {' '.join(sources)}; chparam -set QP_W {qp_w} {top}; "
                  f"synth_xilinx -family xcup -flatten -top {top}; tee -q -o {stat} stat")
        r = subprocess.run([yosys, "-q", "-p", script], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"synth_report.py: yosys failed on {top} (QP_W={qp_w}):\n{r.stdout}{r.stderr}")
        cells = {}
        with open(stat, encoding="utf-8") as fh:
            for line in fh:
                m = CELL.match(line)
                if m and not m.group(1).startswith("$"):
                    cells[m.group(1)] = int(m.group(2))
        return cells


def summary(cells):
    luts = sum(n for c, n in cells.items() if re.fullmatch(r"LUT\d", c))
    ffs = sum(n for c, n in cells.items() if re.fullmatch(r"FD[A-Z]+", c))
    b18, b36 = cells.get("RAMB18E2", 0), cells.get("RAMB36E2", 0)
    lutram = sum(n for c, n in cells.items() if c.startswith("RAM") and not c.startswith("RAMB"))
    return luts, ffs, b18, b36, lutram, cells.get("DSP48E2", 0)


def golden_state(sim):
    """engine -> its golden model's extra state over RoCEv2 ("57 B"), from the
    engine table the simulator's `describe` prints (the field tables)."""
    r = subprocess.run([sim, "describe"], capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and re.fullmatch(r"`\w+`", cells[0]) and cells[1].isdigit():
            out[cells[0].strip("`")] = cells[5] or "none"
    return out


def report(yosys, sim, rtl_dir):
    params = package_params(os.path.join(rtl_dir, PACKAGE))
    default_w = params["QP_IDX_W"]
    lines = [
        "<!-- Generated by tools/rtl/synth_report.py (ctest rtl.synthesis checks it); "
        "do not edit. -->",
        "",
        "# Transport engine RTL: synthesis estimate",
        "",
        "Yosys 0.23 (Debian), `synth_xilinx -family xcup -flatten`: an estimate for an "
        "UltraScale+ FPGA prototype, not a sign-off netlist. Each engine at the default number "
        f"of context rows ({1 << default_w}: the QP-context cache's connections on chip) and at "
        f"the most rows the NIC's SRAM budget ({SRAM_BYTES >> 20} MiB, `nic.sram.size`) could "
        "hold were it given to that engine's rows alone, rounded down to a power of two. "
        "Block RAM bits are the capacity of the RAMB18E2/RAMB36E2 used (18 Kib and 36 Kib). "
        "Regenerate: `./mprdma-vp docs`.",
        "",
        "| engine | context rows | bits per row | LUTs | flip-flops | DSP48E2 | RAMB18E2 | "
        "RAMB36E2 | block RAM bits | bits in rows |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for e in ENGINES:
        row_bits = params[e["row_bits"]]
        max_w = (SRAM_BYTES * 8 // row_bits).bit_length() - 1
        sources = [os.path.join(rtl_dir, PACKAGE)] + [os.path.join(rtl_dir, s)
                                                     for s in e["sources"]]
        for w in sorted({default_w, max_w}):
            luts, ffs, b18, b36, lutram, dsps = summary(synthesise(yosys, sources, e["top"], w))
            bram_bits = b18 * 18 * 1024 + b36 * 36 * 1024
            lines.append(f"| {e['name']} | {1 << w} | {row_bits} | {luts} | {ffs} | {dsps} | "
                         f"{b18} | {b36} | {bram_bits} | {(1 << w) * row_bits} |")
            if lutram:
                notes.append(f"{e['name']} at {1 << w} rows also uses {lutram} LUT-RAM cells.")
        notes.append(f"{e['name']}'s row: {e['row']}; {row_bits} bits = "
                     f"{(row_bits + 7) // 8} B per connection, of which {e['baseline']}.")
    golden = golden_state(sim)
    notes.append("The golden models' per-connection state over RoCEv2 (their field tables, "
                 "`describe`): " + ", ".join(f"{k} {v}" for k, v in golden.items() if v != "none")
                 + "; MP-RDMA's sender and receiver together, against 66 B published (NSDI'18, "
                 "Table 1). The receiver's share is its bitmap and the PSNs of its NACK "
                 "rules; the field table counts each NACK flag inside the 3 bytes of the PSN it "
                 "goes with, the RTL gives it a bit of its own (nic_rtl_mp_rdma_rx_test checks "
                 "that the two agree).")
    lines += ["", *notes, ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--yosys", default="yosys")
    ap.add_argument("--sim", required=True, help="mprdma-vp-sim (for the golden field tables)")
    ap.add_argument("--rtl-dir", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--out")
    g.add_argument("--check")
    a = ap.parse_args()
    text = report(a.yosys, a.sim, a.rtl_dir)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    with open(a.check, encoding="utf-8") as fh:
        old = fh.read()
    if old != text:
        sys.stdout.write(text)
        sys.exit(f"{a.check} is stale (the synthesis above differs): run ./mprdma-vp docs")
    print(f"{a.check} is current")


if __name__ == "__main__":
    main()
