#!/usr/bin/env python3
"""Generates the C++ header of the RTL's constants from its SystemVerilog
package: every `localparam int NAME = EXPR;` of vp/nic/rtl/mprdma_rtl_pkg.sv
becomes `constexpr uint32_t NAME = <value>;` in namespace mprdma::rtl, so the
C++ side (lockstep, the SystemC wrapper, the synthesis report) takes its
constants from the one source the RTL is built from.

    gen_params.py PACKAGE.sv OUT.h

Expressions may use integers, earlier names, + - * / ( ) and $clog2(); any
other line that declares a localparam is an error naming it.
"""
import re
import sys

DECL = re.compile(r"^\s*localparam\s+int\s+([A-Z][A-Z0-9_]*)\s*=\s*(.+?)\s*;")
ANY_DECL = re.compile(r"^\s*localparam\b")
SAFE = re.compile(r"^[A-Z0-9_+\-*/() ]*$")


def clog2(v):
    return max(0, (int(v) - 1).bit_length())


def evaluate(name, expr, known, where):
    expr = expr.split("//", 1)[0].strip()
    text = expr.replace("$clog2", "CLOG2")
    if not SAFE.match(text.replace("CLOG2", "")):
        sys.exit(f"{where}: localparam {name} = {expr}: only integers, names, + - * / ( ) "
                 "and $clog2() are understood")
    try:
        value = eval(text.replace("/", "//"), {"__builtins__": {}},  # noqa: S307
                     dict(known, CLOG2=clog2))
    except NameError as e:
        sys.exit(f"{where}: localparam {name} = {expr}: {e}")
    if not isinstance(value, int) or value < 0 or value >= 2**32:
        sys.exit(f"{where}: localparam {name} = {expr} gives {value}, not a 32-bit unsigned")
    return value


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    known, lines = {}, []
    comment = []
    with open(src, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            where = f"{src}:{n}"
            stripped = line.strip()
            if stripped.startswith("//"):
                comment.append(stripped[2:].strip())
                continue
            m = DECL.match(line)
            if m:
                name, expr = m.groups()
                known[name] = evaluate(name, expr, known, where)
                if comment:
                    lines += [f"// {c}" if c else "//" for c in comment]
                trailing = line.split(";", 1)[1].strip()
                trailing = f"  {trailing}" if trailing.startswith("//") else ""
                lines.append(f"constexpr uint32_t {name} = {known[name]};{trailing}")
            elif ANY_DECL.match(line):
                sys.exit(f"{where}: a localparam that is not `localparam int NAME = EXPR;`")
            comment = []
    if not known:
        sys.exit(f"{src}: no `localparam int` found")
    text = "\n".join([
        f"// Generated from {src.rsplit('/vp/', 1)[-1] if '/vp/' in src else src} by "
        "tools/rtl/gen_params.py; do not edit.",
        "#pragma once", "", "#include <cstdint>", "", "namespace mprdma::rtl {", ""]
        + lines + ["", "}  // namespace mprdma::rtl", ""])
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
