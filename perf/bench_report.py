#!/usr/bin/env python3
"""The tables of scripts/bench.sh from the launches it saved (BENCH_OUT/raw): per collective and
process count, per size, tessera's out-of-place busbw (median, min and max over the default
launches), Open MPI's with its defaults (the same launches: --baseline mpi), and Open MPI's best
tuned algorithm for that size, each algorithm compared with tessera in the launches that forced
it (Open MPI's time over tessera's, median over launches; the best is the lowest); for sizes up to
4 KiB the times too. Writes every figure to the JSON file (-J)."""
import argparse
import glob
import json
import os
import re
import statistics

ALGORITHMS = {
    "allreduce": {1: "basic_linear", 2: "nonoverlapping", 3: "recursive_doubling", 4: "ring",
                  5: "segmented_ring", 6: "rabenseifner"},
    "allgather": {1: "linear", 2: "bruck", 3: "recursive_doubling", 4: "ring", 5: "neighbor",
                  6: "two_proc"},
    "reducescatter": {1: "non-overlapping", 2: "recursive_halving", 3: "ring", 4: "butterfly"},
}


def parse(path):
    """size -> dict(t, bw, mt, mbw, wrong) of one launch; rows whose check failed are dropped."""
    rows = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 16 or not p[0].isdigit():
                continue
            if p[8] not in ("0", "N/A"):
                raise SystemExit(f"{path}: {p[0]} bytes: {p[8]} wrong elements")
            rows[int(p[0])] = {"t": float(p[5]), "bw": float(p[7]), "mt": float(p[13]),
                               "mbw": float(p[14])}
    return rows


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def fmt(s):
    return f"{s['median']:7.2f} [{s['min']:.2f}-{s['max']:.2f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--nps", default="2 4")
    ap.add_argument("--colls", default="allreduce allgather reducescatter")
    ap.add_argument("-J", dest="json")
    a = ap.parse_args()
    raw = os.path.join(a.out, "raw")
    report = []
    for c in a.colls.split():
        for np in a.nps.split():
            default = [parse(p) for p in sorted(glob.glob(f"{raw}/{c}.np{np}.default.*.txt"))]
            algs = {}
            for path in glob.glob(f"{raw}/{c}.np{np}.alg*.txt"):
                n = int(re.search(r"\.alg(\d+)\.", path).group(1))
                algs.setdefault(n, []).append(parse(path))
            if not default:
                continue
            print(f"# {c}, {np} processes: out-of-place busbw in GB/s, median [min-max] of "
                  f"{len(default)} launches; Open MPI tuned: the best algorithm per size")
            print(f"# {'size':>10}  {'tessera':>21}  {'Open MPI default':>21} {'x':>6}  "
                  f"{'Open MPI best tuned':>28} {'x':>6}  {'time tessera / MPI (us)':>24}")
            for size in sorted(default[0]):
                if size == 0:
                    continue  # no element per rank at this size: nothing to compare
                tess = spread([d[size]["bw"] for d in default if size in d])
                tess_t = spread([d[size]["t"] for d in default if size in d])
                mdef = spread([d[size]["mbw"] for d in default if size in d])
                mdef_t = spread([d[size]["mt"] for d in default if size in d])
                # Each tuned algorithm against tessera in the same launches (the machine's speed
                # moves between launches): the median of Open MPI's time over tessera's.
                best, best_name, best_x = None, "", None
                per_alg = {}
                for n, runs in sorted(algs.items()):
                    same = [r[size] for r in runs if size in r and r[size]["mt"] > 0]
                    if not same:
                        continue
                    s = spread([r["mbw"] for r in same])
                    s["time"] = statistics.median(r["mt"] for r in same)
                    s["overTessera"] = statistics.median(r["mt"] / r["t"] for r in same if r["t"] > 0)
                    per_alg[ALGORITHMS[c].get(n, str(n))] = s
                    if best_x is None or s["overTessera"] < best_x:
                        best, best_name, best_x = s, ALGORITHMS[c].get(n, str(n)), s["overTessera"]
                # Open MPI's time over tessera's, launch by launch (= tessera's busbw over Open
                # MPI's), then the median.
                ratio_def = statistics.median(d[size]["mt"] / d[size]["t"] for d in default
                                              if size in d and d[size]["t"] > 0)
                tail = ""
                if size <= 4096:
                    tail = f"{tess_t['median']:8.2f} / {mdef_t['median']:8.2f}"
                best_txt = f"{best_name:>18} {best['median']:7.2f}" if best else f"{'-':>26}"
                print(f"  {size:>10}  {fmt(tess):>21}  {fmt(mdef):>21} {ratio_def:6.2f}  "
                      f"{best_txt:>28} {best_x or 0:6.2f}  {tail:>24}")
                report.append({"collective": c, "nranks": int(np), "bytes": size,
                               "tessera": tess, "tesseraUs": tess_t, "ompiDefault": mdef,
                               "ompiDefaultUs": mdef_t, "ompiBest": best_name,
                               "ompiBestBusbw": best["median"] if best else 0,
                               "ompiBestUs": best["time"] if best else 0,
                               "ompiTuned": per_alg,
                               "vsDefault": ratio_def, "vsBestByTime": best_x or 0})
            print("#  x: Open MPI's time over tessera's in the same launch (so tessera's busbw over "
                  "Open MPI's), median over launches; tuned: the algorithm with the lowest such "
                  "median, and that median")
            print()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
