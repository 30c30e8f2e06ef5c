#!/usr/bin/env python3
"""Summarize "ucxnet bench --json" reports taken in interleaved rounds.

Usage: benchsummary.py LABEL=GLOB [LABEL=GLOB ...]

Each LABEL names a variant (e.g. "UCX_TLS=sm") and GLOB (no "=") its reports, one per
round. For every row it prints a Markdown table: per variant, the median
ucx value, the median value of the other transport (tcp) in the same runs,
and the median of the per-run ratios with their lowest and highest. Ratios
follow bench's convention: >1 means ucxnet is better (for latency and CPU,
tcp/ucx; for rates, ucx/tcp).
"""
import glob
import json
import statistics
import sys


def load(pattern):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"benchsummary: no reports match {pattern!r}")
    return [json.load(open(f)) for f in files]


def fmt(v, unit):
    if unit in ("µs", "s/GB"):
        return f"{v:.2f}" if v < 10 else f"{v:.1f}"
    return f"{v:,.0f}"


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    variants = [(a.rsplit("=", 1)[0], load(a.rsplit("=", 1)[1])) for a in args]
    rows = []
    for _, reps in variants:
        for row in reps[0]["rows"]:
            if (row["key"], row["label"], row["unit"], row["better"]) not in rows:
                rows.append((row["key"], row["label"], row["unit"], row["better"]))
    head = "| |" + "|".join(f" {lab}: ucx | Go TCP | ucx vs TCP " for lab, _ in variants) + "|"
    print(head)
    print("|---|" + "---|---|---|" * len(variants))
    for key, label, unit, better in rows:
        cells = []
        for _, reps in variants:
            us, ts, rs = [], [], []
            for rep in reps:
                vals = next((r["values"] for r in rep["rows"] if r["key"] == key), {})
                u, t = vals.get("ucx", 0), vals.get("tcp", 0)
                if u > 0 and t > 0:
                    us.append(u)
                    ts.append(t)
                    rs.append(t / u if better == "lower" else u / t)
            if not rs:
                cells.append(" - | - | - ")
                continue
            cells.append(f" {fmt(statistics.median(us), unit)} | {fmt(statistics.median(ts), unit)} | "
                         f"{statistics.median(rs):.2f}× [{min(rs):.2f}–{max(rs):.2f}] ")
        print(f"| {label} ({unit}) |" + "|".join(cells) + "|")
    for lab, reps in variants:
        via = sorted({" ".join(r.get("ucx_via") or []) + " / " + (r.get("ucx_lane") or "") for r in reps})
        print(f"\n{lab}: {len(reps)} runs; ucx conns carried by {'; '.join(via)}")


if __name__ == "__main__":
    main(sys.argv[1:])
