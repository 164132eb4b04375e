#!/usr/bin/env python3
"""tessera_sim's GEMM model against a published table of measured GEMM kernels (a benchmark;
issue 30's compute model).

The published figures: OpenXLA's matmul performance table for sm_90 (H100 SXM), bf16 x bf16 ->
bf16, the kernel's throughput for 300 shapes (batch 1/2/4, M, N, K from 256 to 4,096):
tensorflow/tensorflow, third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h
(kDefaultMatmulPTable, commit 372d578b). The 32 rows below were taken from it as published
(FLOP/s), covering each size class. tessera_sim's GEMM model (workload/compute.cpp): tile and
wave quantization on the SMs at the best measured efficiency (Bekman's MAMF finder), the tile
shape (128 x 256 or 128 x 128) and split of K that take least time, split-K's partial sums
written and read back, the bytes at the HBM rate when they take longer, and a fixed time per
kernel. That fixed time (kGemmFixedUs) was fitted to the even rows (least squares of the
relative error, 0.25 us steps); the odd rows are held out, a prediction. Each op also carries
the preset's launch gap, which this script takes off (a 1-byte memory op's time) so that kernel
is compared with kernel.

  python3 perf/sim_gemm_validate.py [--build build] [--check PCT]

--check PCT exits 1 when a held-out row, or a kernel of 50 us or more, is modelled more than PCT
percent off, or when kGemmFixedUs is no longer the fit on the even rows (ctest runs it with 20:
the model against a table from outside the project).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# batch, M, N, K, published FLOP/s (bf16).
PUBLISHED = [
    (1, 256, 256, 256, 6452775384615),
    (1, 512, 512, 512, 40721398058252),
    (1, 1024, 1024, 1024, 236298816901408),
    (4, 1024, 1024, 1024, 489845722627737),
    (1, 2048, 2048, 2048, 631984593290170),
    (2, 2048, 2048, 2048, 717741860962566),
    (4, 2048, 2048, 2048, 725746417032781),
    (1, 4096, 4096, 4096, 783328793548203),
    (2, 4096, 4096, 4096, 807671014191940),
    (4, 4096, 4096, 4096, 793131337247852),
    (1, 4096, 4096, 256, 392162828341855),
    (1, 4096, 4096, 512, 543116754678806),
    (1, 4096, 4096, 1024, 677439636593059),
    (1, 4096, 4096, 2048, 738736406437117),
    (1, 256, 4096, 4096, 412026793553338),
    (1, 4096, 256, 4096, 376223484232655),
    (1, 256, 256, 4096, 84307618090452),
    (1, 2048, 256, 4096, 307486203894616),
    (1, 512, 4096, 4096, 644116271145770),
    (1, 4096, 512, 4096, 649964784503632),
    (1, 1024, 1024, 4096, 470114633975481),
    (1, 1024, 4096, 4096, 738474431911967),
    (1, 4096, 1024, 4096, 738474431911967),
    (1, 2048, 2048, 4096, 737966889347079),
    (1, 4096, 2048, 4096, 758434522012648),
    (1, 1024, 4096, 1024, 490293070319634),
    (1, 4096, 1024, 1024, 488064465454545),
    (1, 2048, 4096, 1024, 594212409518539),
    (1, 4096, 2048, 512, 447019910074937),
    (1, 512, 2048, 2048, 342392163265306),
    (1, 1024, 2048, 2048, 524288000000000),
    (1, 2048, 1024, 2048, 523265996101364),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--check", type=float, default=None, metavar="PCT")
    args = ap.parse_args()
    sim = os.path.join(args.build, "src", "tools", "tessera_sim")
    if not os.access(sim, os.X_OK):
        sys.exit(f"sim_gemm_validate: {sim} is not built (needs SimGrid)")
    ops = [{"op": "memory", "id": "gap", "bytes": 1}]
    for i, (b, m, n, k, _) in enumerate(PUBLISHED):
        ops.append({"op": "gemm", "id": f"g{i}", "m": m, "n": n, "k": k, "batch": b,
                    "dtype": "bf16"})
    workload = {"format": "tessera-workload", "version": 1, "name": "xla-sm90-gemms",
                "gpu": "h100", "platform": "dgx-h100", "nodes": 1,
                "ranks": [{"gpu": 0, "ops": ops}]}
    with tempfile.TemporaryDirectory() as d:
        wpath, tpath = os.path.join(d, "w.json"), os.path.join(d, "t.json")
        with open(wpath, "w") as f:
            json.dump(workload, f)
        subprocess.run([sim, "--workload", wpath, "--trace", tpath], check=True,
                       stdout=subprocess.DEVNULL)
        with open(tpath) as f:
            ev = json.load(f)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    dur = {e["name"]: e["dur"] for e in ev if e.get("ph") == "X"}
    gap = dur["gap"]
    print(f"# tessera_sim's h100 GEMM model against OpenXLA's measured sm_90 bf16 table "
          f"(kernel time; the model's {gap:.1f} us launch gap taken off)")
    print(f"{'batch x M x N x K':>24} {'published':>12} {'simulated':>12} {'error':>8}"
          f" {'TFLOP/s pub':>12} {'sim':>7}  row")
    errors = {"fit": [], "held": [], "large": []}
    times = []
    for i, (b, m, n, k, flops) in enumerate(PUBLISHED):
        work = 2.0 * b * m * n * k
        pub = work / flops * 1e6
        sim_us = dur[f"g{i}"] - gap
        err = (sim_us - pub) / pub * 100
        times.append((pub, sim_us))
        use = "fit" if i % 2 == 0 else "held"
        errors[use].append(err)
        # "large": at least 50 us measured, the size of a training step's GEMMs and above.
        if pub >= 50:
            errors["large"].append(err)
        print(f"{b:>4} x {m:>4} x {n:>4} x {k:>4}   {pub:9.2f} us {sim_us:9.2f} us {err:+7.1f}%"
              f" {flops / 1e12:12.1f} {work / sim_us / 1e6:7.1f}  "
              f"{'fitted' if use == 'fit' else 'held out'}")
    for name, what in (("fit", "the fitted rows"), ("held", "the held-out rows"),
                       ("large", "kernels of 50 us and more")):
        e = sorted(errors[name])
        rms = (sum(x * x for x in e) / len(e)) ** 0.5
        within = sum(abs(x) <= 10 for x in e)
        print(f"# {what}: {len(e)}, error median {e[len(e) // 2]:+.1f}% (min {e[0]:+.1f}%, "
              f"max {e[-1]:+.1f}%), rms {rms:.1f}%, {within} within 10%")
    # The fit, reproduced: the fixed cost is added to every kernel, so the fitted rows' best
    # constant is the model's plus the shift (0.25 us steps) that minimises their relative error.
    fit_rows = [(pub_us, sim_us) for i, (pub_us, sim_us) in enumerate(times) if i % 2 == 0]

    def rms(shift):
        return (sum(((s + shift - p) / p) ** 2 for p, s in fit_rows) / len(fit_rows)) ** 0.5

    shift = min((0.25 * j for j in range(-40, 41)), key=rms)
    print(f"# refitting the fixed cost on the fitted rows moves it by {shift:+.2f} us "
          f"(0 when workload/compute.cpp's kGemmFixedUs is the fit)")
    if args.check is not None:
        if shift != 0:
            sys.exit(f"sim_gemm_validate: the GEMM model changed; refit kGemmFixedUs "
                     f"({shift:+.2f} us) on the fitted rows")
        off = [e for e in errors["held"] + errors["large"] if abs(e) > args.check]
        if off:
            sys.exit(f"sim_gemm_validate: {len(off)} held-out or large rows are modelled more "
                     f"than {args.check}% off the published table")
        print(f"sim_gemm_validate: every held-out row and every kernel of 50 us and more within "
              f"{args.check}%")


if __name__ == "__main__":
    main()
