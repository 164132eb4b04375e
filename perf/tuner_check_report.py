#!/usr/bin/env python3
"""The table of perf/tuner_check.sh: per collective, process count and size, the family the
tuner chose (from its TUNING log line), the median time of the tuner's launches and of the
fastest forced family's, and the median over rounds of (fastest forced family's time / the
tuner's time) in the same round (1.00 or more: the tuner's choice was the fastest).
Arguments: work folder, collectives, process counts, rounds, JSON file ('' for none)."""
import json
import os
import re
import statistics
import sys

FAMILIES = {"allreduce": "ring tree rhd oneshot twoshot", "allgather": "ring rhd oneshot",
            "reducescatter": "ring rhd twoshot", "broadcast": "ring oneshot",
            "reduce": "ring oneshot"}


def rows(path):
    """size -> (out-of-place time in us, busbw in GB/s) of one perf binary's output."""
    d = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) > 8 and p[0].isdigit():
                d[int(p[0])] = (float(p[5]), float(p[7]))
    return d


def choices(path, coll):
    """size -> family of the first TUNING line per size (the staged plan's choice)."""
    d = {}
    pattern = re.compile(r"TUNING %s (\d+) B n=\d+: (\w+) \(pipeline" % coll)
    with open(path) as f:
        for line in f:
            m = pattern.search(line)
            if m and int(m.group(1)) not in d:
                d[int(m.group(1))] = m.group(2)
    return d


def main():
    work, colls, nps, rounds, out = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), \
        int(sys.argv[4]), sys.argv[5]
    report, worst = [], None
    for c in colls:
        for np in nps:
            runs = {f: [rows(os.path.join(work, f"{c}.{np}.{f}.{r}")) for r in range(rounds)]
                    for f in ["tuner"] + FAMILIES[c].split()}
            chose = choices(os.path.join(work, f"{c}.{np}.tuner.0.log"), c)
            print(f"# {c}, {np} processes: out-of-place time (us) and busbw (GB/s), "
                  f"medians of {rounds} rounds")
            print(f"# {'size':>10} {'tuner chose':>12} {'time':>10} {'busbw':>7} "
                  f"{'fastest':>12} {'time':>10} {'busbw':>7} {'fastest/tuner':>13}")
            # (the last column is the median of the per-round ratios, not of the two medians)
            for size in sorted(runs["tuner"][0]):
                t = {f: statistics.median(r[size][0] for r in rs if size in r)
                     for f, rs in runs.items()}
                b = {f: statistics.median(r[size][1] for r in rs if size in r)
                     for f, rs in runs.items()}
                best = min((f for f in t if f != "tuner"), key=lambda f: t[f])
                # Per round: the fastest forced family over the tuner, then the median.
                per_round = []
                for r in range(rounds):
                    forced = [runs[f][r][size][0] for f in runs
                              if f != "tuner" and size in runs[f][r]]
                    tuner = runs["tuner"][r].get(size, (0, 0))[0]
                    if forced and tuner > 0:
                        per_round.append(min(forced) / tuner)
                ratio = statistics.median(per_round) if per_round else 0
                print(f"  {size:>10} {chose.get(size, '?'):>12} {t['tuner']:>10.2f} "
                      f"{b['tuner']:>7.2f} {best:>12} {t[best]:>10.2f} {b[best]:>7.2f} "
                      f"{ratio:>13.2f}")
                report.append({"collective": c, "nranks": int(np), "bytes": size,
                               "tuner": chose.get(size, "?"), "tunerUs": t["tuner"],
                               "fastest": best, "fastestUs": t[best], "ratio": ratio,
                               "us": t, "busbw": b})
                worst = ratio if worst is None else min(worst, ratio)
    if worst is None:
        print("# nothing measured")
    else:
        print(f"# lowest fastest/tuner time ratio: {worst:.2f} "
              "(1.00: the tuner's choice was the fastest)")
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"# wrote {out}")


if __name__ == "__main__":
    main()
