#!/usr/bin/env python3
"""busbw against message size from scripts/bench.sh's bench.json: one panel per collective and
process count, tessera (median, and its min-max band) beside Open MPI with its defaults and with
its best tuned algorithm per size. Usage: perf/plot.py bench.json -o bench.png"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("-o", dest="out", default="bench.png")
    a = ap.parse_args()
    with open(a.json) as f:
        rows = json.load(f)
    panels = []
    for r in rows:
        key = (r["collective"], r["nranks"])
        if key not in panels:
            panels.append(key)
    colls = sorted({c for c, _ in panels}, key=[c for c, _ in panels].index)
    nps = sorted({n for _, n in panels})
    fig, axes = plt.subplots(len(colls), len(nps), figsize=(6 * len(nps), 3.6 * len(colls)),
                             squeeze=False)
    for i, c in enumerate(colls):
        for j, n in enumerate(nps):
            ax = axes[i][j]
            sel = [r for r in rows if r["collective"] == c and r["nranks"] == n]
            if not sel:
                ax.set_visible(False)
                continue
            x = [r["bytes"] for r in sel]
            ax.plot(x, [r["tessera"]["median"] for r in sel], "o-", label="tessera", color="C0")
            ax.fill_between(x, [r["tessera"]["min"] for r in sel],
                            [r["tessera"]["max"] for r in sel], color="C0", alpha=0.2)
            ax.plot(x, [r["ompiDefault"]["median"] for r in sel], "s--",
                    label="Open MPI default", color="C1")
            ax.plot(x, [r["ompiBestBusbw"] for r in sel], "^:",
                    label="Open MPI best tuned", color="C2")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{c}, {n} processes")
            ax.set_xlabel("bytes")
            ax.set_ylabel("busbw (GB/s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"# wrote {a.out}")


if __name__ == "__main__":
    main()
