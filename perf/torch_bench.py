#!/usr/bin/env python3
"""torch.distributed on tessera beside Gloo, in the same run.

For 2 and 4 processes (-n), times all_reduce, all_gather_into_tensor and reduce_scatter_tensor on
CPU float32 tensors from 8 B to 256 MiB through torch.distributed, tessera and Gloo alternating
round by round in the same processes (a default group on tessera and a Gloo group of the same
ranks), and a DDP training step of a ~50 M-parameter model on each. A call's time is the slowest
rank's average over the round's iterations (as nccl-tests times); each row is the median of the
rounds of every launch (--launches, new processes each) with their min and max, and the speedup
the median of the rounds' Gloo / tessera ratios; busbw follows nccl-tests (all-reduce:
algbw * 2(n-1)/n; the gathers: algbw * (n-1)/n, algbw = the bytes of the larger buffer / time).
The 8 B all-reduce is also timed call by call (rank 0's median of --latency-calls calls), the
latency a training step sees. Prints tables, writes --json and a --plot PNG.

--device cuda times CUDA tensors (rank r on GPU r % the GPU count; the device executor) beside
NCCL, or beside Gloo where there are fewer GPUs than ranks (NCCL refuses two ranks on one GPU);
--baseline chooses. Each timed loop ends with torch.cuda.synchronize(). This mode has not yet run
on a GPU.

  PYTHONPATH=build/python python3 perf/torch_bench.py -n 2,4 --json out.json --plot out.png
"""

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
import time

SIZES = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]
COLLS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"]


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def busbw_factor(coll, n):
    return 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n


def iterations(size, scale):
    return max(2, min(200, int(scale * (1 << 25) / max(size, 1 << 12))))


def _worker(rank, world, port, args, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist

    import tessera_torch  # noqa: F401

    torch.set_num_threads(1)  # one core per rank: the ranks share this machine's cores
    from datetime import timedelta

    dev = torch.device("cpu")
    if args.device == "cuda":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    dist.init_process_group("tessera", timeout=timedelta(seconds=600))
    gloo = dist.new_group(backend="gloo")  # also the timing's own group (CPU scalars, barriers)
    base = gloo if args.baseline == "gloo" else dist.new_group(backend=args.baseline)
    groups = {"tessera": None, args.baseline: base}
    out = {"collectives": {}, "ddp": {}, "baseline": args.baseline, "device": args.device}

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def timed(fn, iters):
        dist.barrier(group=gloo)
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        return (time.perf_counter() - t0) / iters

    def slowest(seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return t.item()

    for coll in args.colls:
        rows = []
        for size in args.sizes:
            n = max(1, size // 4)  # float32 elements of the call's larger buffer
            if coll == "all_reduce":
                a = torch.ones(n, device=dev)
                calls = {k: (lambda g=g: dist.all_reduce(a, group=g)) for k, g in groups.items()}
            elif coll == "all_gather_into_tensor":
                per = max(1, n // world)
                src, dst = torch.ones(per, device=dev), torch.empty(per * world, device=dev)
                calls = {k: (lambda g=g: dist.all_gather_into_tensor(dst, src, group=g))
                         for k, g in groups.items()}
            else:
                per = max(1, n // world)
                src, dst = torch.ones(per * world, device=dev), torch.empty(per, device=dev)
                calls = {k: (lambda g=g: dist.reduce_scatter_tensor(dst, src, group=g))
                         for k, g in groups.items()}
            bytes_ = (per * world if coll != "all_reduce" else n) * 4
            iters = iterations(bytes_, args.scale)
            times = {k: [] for k in groups}
            for k in groups:  # warm-up: connections, plans
                timed(calls[k], 2)
            for r in range(args.rounds):
                order = list(groups) if r % 2 == 0 else list(reversed(groups))
                for k in order:
                    times[k].append(slowest(timed(calls[k], iters)))
            rows.append({"bytes": bytes_, "iters": iters, "times": times})
        out["collectives"][coll] = rows

    if args.latency_calls > 0:
        # Call by call: the median latency of one small call (the loop average above also holds
        # the rare slow calls of a shared machine).
        a = torch.ones(2, device=dev)
        lat = {k: [] for k in groups}
        for k, g in groups.items():
            for _ in range(50):
                dist.all_reduce(a, group=g)
        for r in range(2 * 4):
            k = list(groups)[r % 2]
            dist.barrier(group=gloo)
            for _ in range(args.latency_calls // 4):
                t0 = time.perf_counter()
                dist.all_reduce(a, group=groups[k])
                sync()
                lat[k].append(time.perf_counter() - t0)
        out["latency"] = {k: statistics.median(v) for k, v in lat.items()}

    if args.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP

        def model():
            torch.manual_seed(0)
            w = args.ddp_width
            layers = [torch.nn.Linear(w, w) for _ in range(args.ddp_layers)]
            return torch.nn.Sequential(*layers).to(dev)

        x = torch.randn(args.ddp_batch, args.ddp_width, device=dev)
        steps = {}
        for k, g in groups.items():
            m = DDP(model(), process_group=g)
            opt = torch.optim.SGD(m.parameters(), lr=1e-4)
            steps[k] = (m, opt)
        params = sum(p.numel() for p in steps["tessera"][0].parameters())
        ddp_times = {k: [] for k in groups}

        def step(m, opt):
            opt.zero_grad()
            m(x).square().mean().backward()
            opt.step()

        for k in groups:
            for _ in range(2):
                step(*steps[k])
        for r in range(args.ddp_steps):
            order = list(groups) if r % 2 == 0 else list(reversed(groups))
            for k in order:
                ddp_times[k].append(slowest(timed(lambda: step(*steps[k]), 1)))
        out["ddp"] = {"params": params, "times": ddp_times}

    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        results.put(out)


def run_world(world, args):
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=_worker, args=(r, world, port, args, results)) for r in range(world)]
    for p in procs:
        p.start()
    out = results.get(timeout=args.timeout)
    for p in procs:
        p.join(timeout=60)
        if p.exitcode not in (0, None):
            sys.exit(f"rank {procs.index(p)} of {world} failed with exit code {p.exitcode}")
    return out


def fmt_size(b):
    for unit, f in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f}{unit}"
    return str(b)


def merge(outs):
    """The rounds and steps of several launches as one launch's."""
    merged = outs[0]
    for o in outs[1:]:
        for coll, rows in o["collectives"].items():
            for mine, theirs in zip(merged["collectives"][coll], rows):
                for k in mine["times"]:
                    mine["times"][k] += theirs["times"][k]
        if o.get("ddp"):
            for k in merged["ddp"]["times"]:
                merged["ddp"]["times"][k] += o["ddp"]["times"][k]
    if all(o.get("latency") for o in outs):
        merged["latency"] = {
            k: [o["latency"][k] for o in outs] for k in outs[0]["latency"]
        }
    return merged


def summarize(world, out, launches):
    b = out["baseline"]
    report = {"world": world, "launches": launches, "device": out["device"], "baseline": b,
              "collectives": {}, "ddp": None}
    for coll, rows in out["collectives"].items():
        table = []
        print(f"\n# {coll}, {world} processes, float32 {out['device']} tensors (median [min, max] of the rounds of {launches} launches; time in us, busbw in GB/s)")
        print(f"{'size':>6} {'tessera us':>24} {b + ' us':>24} {'tessera busbw':>14} {b + ' busbw':>11} {'speedup':>8}")
        for row in rows:
            entry = {"bytes": row["bytes"], "iters": row["iters"]}
            for k in ("tessera", b):
                ts = row["times"][k]
                med = statistics.median(ts)
                entry[k] = {
                    "us": med * 1e6, "us_min": min(ts) * 1e6, "us_max": max(ts) * 1e6,
                    "busbw": row["bytes"] / med / 1e9 * busbw_factor(coll, world),
                    "busbw_min": row["bytes"] / max(ts) / 1e9 * busbw_factor(coll, world),
                    "busbw_max": row["bytes"] / min(ts) / 1e9 * busbw_factor(coll, world),
                }
            # The ratio of each round's pair, then their median (same round, same machine state).
            ratios = [g / t for t, g in zip(row["times"]["tessera"], row["times"][b])]
            entry["speedup"] = statistics.median(ratios)
            entry["speedup_min"], entry["speedup_max"] = min(ratios), max(ratios)
            t, g = entry["tessera"], entry[b]
            print(f"{fmt_size(row['bytes']):>6} {t['us']:>10.1f} [{t['us_min']:.1f}, {t['us_max']:.1f}]"
                  f" {g['us']:>10.1f} [{g['us_min']:.1f}, {g['us_max']:.1f}]"
                  f" {t['busbw']:>14.3f} {g['busbw']:>11.3f} {entry['speedup']:>7.1f}x")
            table.append(entry)
        report["collectives"][coll] = table
    if out.get("latency"):
        lat = out["latency"]
        t, g = lat["tessera"], lat[b]
        report["latency_8B"] = {"tessera_us": [x * 1e6 for x in t], f"{b}_us": [x * 1e6 for x in g]}
        print(f"\n# 8 B all_reduce call by call, {world} processes: rank 0's median per launch, us")
        print(f"tessera {statistics.median(t) * 1e6:.1f} [{min(t) * 1e6:.1f}, {max(t) * 1e6:.1f}]"
              f"   {b} {statistics.median(g) * 1e6:.1f} [{min(g) * 1e6:.1f}, {max(g) * 1e6:.1f}]"
              f"   ratio {statistics.median(g) / statistics.median(t):.1f}x")
    if out.get("ddp"):
        d = out["ddp"]
        t, g = d["times"]["tessera"], d["times"][b]
        ratios = [y / x for x, y in zip(t, g)]
        report["ddp"] = {
            "params": d["params"],
            "tessera_ms": statistics.median(t) * 1e3, "tessera_ms_min": min(t) * 1e3,
            "tessera_ms_max": max(t) * 1e3,
            "baseline_ms": statistics.median(g) * 1e3, "baseline_ms_min": min(g) * 1e3,
            "baseline_ms_max": max(g) * 1e3,
            "speedup": statistics.median(ratios),
        }
        r = report["ddp"]
        print(f"\n# DDP step, {world} processes, {d['params'] / 1e6:.1f} M parameters (median [min, max] of {len(t)} steps over {launches} launches)")
        print(f"tessera {r['tessera_ms']:.1f} ms [{r['tessera_ms_min']:.1f}, {r['tessera_ms_max']:.1f}]"
              f"   {b} {r['baseline_ms']:.1f} ms [{r['baseline_ms_min']:.1f}, {r['baseline_ms_max']:.1f}]"
              f"   speedup {r['speedup']:.2f}x")
    return report


def plot(reports, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return
    colls = COLLS
    fig, axes = plt.subplots(len(reports), len(colls), figsize=(5 * len(colls), 4 * len(reports)),
                             squeeze=False)
    for i, rep in enumerate(reports):
        for j, coll in enumerate(colls):
            ax = axes[i][j]
            rows = rep["collectives"].get(coll, [])
            if not rows:
                ax.set_visible(False)
                continue
            x = [r["bytes"] for r in rows]
            for k, color in (("tessera", "tab:blue"), (rep["baseline"], "tab:orange")):
                ax.plot(x, [r[k]["busbw"] for r in rows], marker="o", color=color, label=k)
                ax.fill_between(x, [r[k]["busbw_min"] for r in rows],
                                [r[k]["busbw_max"] for r in rows], color=color, alpha=0.2)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{coll}, {rep['world']} processes, {rep['device']}")
            ax.set_xlabel("bytes")
            ax.set_ylabel("busbw (GB/s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--nprocs", default="2,4", help="process counts (default 2,4)")
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="256M")
    ap.add_argument("--colls", default=",".join(COLLS))
    ap.add_argument("--rounds", type=int, default=3, help="rounds per size and launch (default 3)")
    ap.add_argument("--launches", type=int, default=3, help="launches per process count (default 3)")
    ap.add_argument("--latency-calls", type=int, default=4000,
                    help="8 B all-reduces timed one by one (0: none)")
    ap.add_argument("--scale", type=float, default=1.0, help="scales the iterations per round")
    ap.add_argument("--no-ddp", dest="ddp", action="store_false")
    ap.add_argument("--ddp-width", type=int, default=4096)
    ap.add_argument("--ddp-layers", type=int, default=3, help="Linear(width, width) layers")
    ap.add_argument("--ddp-batch", type=int, default=8)
    ap.add_argument("--ddp-steps", type=int, default=6, help="timed steps per launch")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="the tensors' device")
    ap.add_argument("--baseline", choices=("gloo", "nccl"),
                    help="beside tessera (default: gloo on cpu; on cuda nccl, or gloo where there"
                         " are fewer GPUs than ranks)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="write a busbw plot (PNG) here")
    args = ap.parse_args()
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    args.sizes = [s for s in SIZES if lo <= s <= hi]
    args.colls = args.colls.split(",")
    worlds = [int(x) for x in args.nprocs.split(",")]
    if args.baseline is None:
        args.baseline = "gloo"
        if args.device == "cuda":
            import torch

            gpus = torch.cuda.device_count()
            if gpus >= max(worlds):
                args.baseline = "nccl"
            else:
                print(f"{gpus} GPU(s) for up to {max(worlds)} ranks: NCCL refuses two ranks on one"
                      " GPU, so the baseline is Gloo on the same CUDA tensors")
    reports = []
    for world in worlds:
        outs = [run_world(world, args) for _ in range(args.launches)]
        reports.append(summarize(world, merge(outs), args.launches))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reports": reports, "sizes": args.sizes, "rounds": args.rounds,
                       "launches": args.launches}, f, indent=1)
    if args.plot:
        plot(reports, args.plot)


if __name__ == "__main__":
    main()
