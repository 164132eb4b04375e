#!/usr/bin/env python3
"""A what-if sweep of tessera_sim --workload (--sweep or --compare-schedules with --csv FILE):
step time and TFLOP/s per GPU per configuration, the exposed communication stacked inside the
step. Usage: perf/plot_workload.py sweep.csv -o sweep.png [--title TEXT]"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("-o", dest="out", default="workload.png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    with open(a.csv) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"plot_workload: {a.csv} has no rows")
    labels = [r["config"] for r in rows]
    step = [float(r["step_ms"]) for r in rows]
    exposed = [float(r["exposed_ms"]) for r in rows]
    tflops = [float(r["tflops_per_gpu"]) for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(rows) + 4), 4))
    x = range(len(rows))
    left.bar(x, [s - e for s, e in zip(step, exposed)], label="computing (or idle)")
    left.bar(x, exposed, bottom=[s - e for s, e in zip(step, exposed)],
             label="exposed communication")
    left.set_ylabel("step time (ms, simulated)")
    left.legend(fontsize=8)
    right.bar(x, tflops, color="tab:green")
    right.set_ylabel("TFLOP/s per GPU (simulated)")
    for ax in (left, right):
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    fig.suptitle(a.title or a.csv)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"plot_workload: wrote {a.out}")


if __name__ == "__main__":
    main()
