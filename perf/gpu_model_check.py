#!/usr/bin/env python3
"""tessera_sim's compute model against the kernels it models, timed on the lent GPU.

The workload simulator (docs/WORKLOADS.md) predicts each GEMM from its shape (tiles, waves and one
efficiency per GPU) and each memory-bound kernel from its bytes (at a copy's measured bandwidth:
90% of HBM on Hopper). This script times the same operations on a GPU with PyTorch, so a GPU
session can say how far those predictions are from that GPU, op by op, and how far a whole
transformer layer run by PyTorch is from the sum of its kernels (what the model leaves out as
framework overhead). Three steps:

  prepare DIR    here (needs tessera_sim): the generator's steps for CONFIGS, written as
                 workload JSON into DIR (scripts/gpu_bundle.sh puts them in the bundle)
  measure DIR    on the GPU (needs PyTorch with CUDA): each distinct compute op of each workload
                 timed alone (CUDA events; median, min and max of --reps launches after warm-up),
                 and CONFIGS' `layer` entries run as a PyTorch layer, forward and backward (with
                 recomputation where the workload has it); writes DIR/measured.json (perf/gpu_check.sh's `model` stage)
  compare DIR    here: tessera_sim's prediction of the same ops for the GPU that measured them
                 (its --trace), side by side with the measurements; prints the table, and each
                 workload's step with the model's kernel times and with the measured ones
                 (tessera_sim --kernel-times DIR/measured.json, which any workload can take)

A memory-bound op is timed as a copy moving its bytes (read and written), at most 2 GiB a copy,
scaled linearly beyond: it checks the model's bandwidth, not each kernel's access pattern.
GEMMs are bf16, A (m x k) times the transpose of a contiguous (n x k) weight, as torch's linear
does; batched ones through bmm. `selftest` runs all three on the CPU at toy sizes (the test
suite's check that the script works; its times mean nothing).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# name, the generator's arguments, whether to time its layer as a PyTorch module too (with TP,
# one TP rank's share of it: its heads and FFN columns, without the TP collectives).
CONFIGS = [
    # Megatron-LM's 1.7B row of Table 1 (micro-batch 16): one GPU's whole step.
    ("gpt1.7b-mb16", "--layers 1 --hidden 2304 --heads 24 --seq 2048 --micro-batch 16 "
     "--global-batch 16 --recompute", True),
    # Domino's GPT-3 6.7B, one TP rank of 8 (its collectives are not timed here).
    ("gpt6.7b-tp8", "--layers 1 --hidden 4096 --heads 32 --seq 1024 --micro-batch 8 "
     "--global-batch 8 --tp 8", True),
    # Korthikanti et al.'s 22B layer (their Table 4: on A100 it took 8-11% longer than the
    # model says, forward and backward alike), one TP rank of 8, micro-batch 4.
    ("gpt22b-tp8", "--layers 1 --hidden 6144 --heads 64 --seq 2048 --micro-batch 4 "
     "--global-batch 4 --tp 8", True),
    # The 1T row's shapes, one TP rank of 8, micro-batch 1.
    ("gpt1t-tp8", "--layers 1 --hidden 25600 --heads 160 --seq 2048 --micro-batch 1 "
     "--global-batch 1 --tp 8 --recompute", True),
]
SELFTEST = [("toy", "--layers 1 --hidden 64 --heads 4 --seq 32 --micro-batch 2 --global-batch 2 "
             "--vocab 128 --recompute", True),
            ("toy-tp2", "--layers 1 --hidden 64 --heads 4 --seq 32 --micro-batch 2 "
             "--global-batch 2 --vocab 128 --tp 2", True)]
COPY_CAP = 2 << 30


def sim_path(build):
    p = os.path.join(build, "src", "tools", "tessera_sim")
    if not os.access(p, os.X_OK):
        raise SystemExit(f"gpu_model_check: {p} is not built (needs SimGrid)")
    return p


def op_key(op):
    if op["op"] == "gemm":
        return ("gemm", op["m"], op["n"], op["k"], op.get("batch", 1))
    if op["op"] == "memory":
        return ("memory", int(op["bytes"]))
    return None  # collectives, sends, attention kernels: not timed here


def describe(key):
    if key[0] == "gemm":
        b = f" x{key[4]}" if key[4] > 1 else ""
        return f"gemm {key[1]}x{key[2]}x{key[3]}{b}"
    return f"memory {key[1] / 2**20:.1f} MiB"


def distinct_ops(workload):
    """Rank 0's compute ops by shape: {key: (first id, count)}."""
    seen = {}
    for op in workload["ranks"][0]["ops"]:
        k = op_key(op)
        if k is None:
            continue
        first, n = seen.get(k, (op["id"], 0))
        seen[k] = (first, n + 1)
    return seen


def prepare(args, configs):
    sim = sim_path(args.build)
    os.makedirs(args.dir, exist_ok=True)
    index = []
    for name, gen, layer in configs:
        path = os.path.join(args.dir, name + ".json")
        subprocess.run([sim, "--workload", "gpt", *gen.split(), "--write", path], check=True,
                       stdout=subprocess.DEVNULL)
        index.append({"name": name, "args": gen, "layer": layer})
    with open(os.path.join(args.dir, "configs.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"gpu_model_check: {len(index)} workloads in {args.dir}")


def timer(torch, device, fn, reps, warmup=2):
    """Median, min, max of fn() in microseconds."""
    for _ in range(warmup):
        fn()
    times = []
    if device == "cuda":
        for _ in range(reps):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
    else:
        import time
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times), min(times), max(times)


def time_op(torch, device, key, reps):
    dt = torch.bfloat16
    if key[0] == "gemm":
        _, m, n, k, batch = key
        if batch > 1:
            a = torch.randn(batch, m, k, device=device, dtype=dt)
            w = torch.randn(batch, n, k, device=device, dtype=dt)
            out = torch.empty(batch, m, n, device=device, dtype=dt)
            fn = lambda: torch.bmm(a, w.transpose(1, 2), out=out)  # noqa: E731
        else:
            a = torch.randn(m, k, device=device, dtype=dt)
            w = torch.randn(n, k, device=device, dtype=dt)
            out = torch.empty(m, n, device=device, dtype=dt)
            fn = lambda: torch.matmul(a, w.t(), out=out)  # noqa: E731
        r = timer(torch, device, fn, reps)
        del a, w, out
        return r, 1.0
    total = key[1]
    half = max(2, min(total // 2, COPY_CAP))
    src = torch.empty(half // 2, device=device, dtype=dt)
    dst = torch.empty_like(src)
    r = timer(torch, device, lambda: dst.copy_(src), reps)
    del src, dst
    return r, (total / 2) / half


def layer_module(torch, h, heads, d, ffn):
    nn = torch.nn
    F = torch.nn.functional
    inner = heads * d  # h, or h / TP for one TP rank's share

    class Layer(nn.Module):
        """Megatron-LM's GPT layer of 2021 in plain PyTorch: [s, b, h] activations, attention as
        baddbmm, softmax and dropout, bmm (no FlashAttention), GeLU MLP, dropout on residuals;
        `heads` and `ffn` of one TP rank, without its collectives."""

        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * inner), nn.Linear(inner, h)
            self.fc1, self.fc2 = nn.Linear(h, ffn), nn.Linear(ffn, h)

        def forward(self, x):
            s, b, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(s, b * heads, 3, d).unbind(2)
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))  # [b a, s, d]
            scores = torch.baddbmm(torch.empty(b * heads, s, s, dtype=x.dtype, device=x.device),
                                   q, k.transpose(1, 2), beta=0.0, alpha=d ** -0.5)
            p = F.dropout(torch.softmax(scores, dim=-1), 0.1, self.training)
            ctx = torch.bmm(p, v).transpose(0, 1).reshape(s, b, inner)
            x = x + F.dropout(self.proj(ctx), 0.1, self.training)
            return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), 0.1, self.training)

    return Layer()


def time_layer(torch, device, workload, reps):
    """Forward alone (as in training: autograd keeps what the backward needs), then forward and
    backward of one layer; with full recomputation (torch.utils.checkpoint) where the workload
    recomputes. Returns both (median, min, max)."""
    import torch.utils.checkpoint as cp
    ops = workload["ranks"][0]["ops"]
    qk = next(o for o in ops if o["id"].endswith(".l0.qk"))
    fc1 = next(o for o in ops if o["id"].endswith(".l0.fc1"))
    h, s, d = fc1["k"], qk["m"], qk["k"]
    b = fc1["m"] // s
    heads = qk["batch"] // b  # of this TP rank
    recompute = any(".re." in o["id"] for o in ops)
    with torch.device(device):  # initialized there: the 1T share has a billion parameters
        layer = layer_module(torch, h, heads, d, fc1["n"])
    layer = layer.to(dtype=torch.bfloat16)
    x = torch.randn(s, b, h, device=device, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(s, b, h, device=device, dtype=torch.bfloat16)

    def forward():
        return cp.checkpoint(layer, x, use_reentrant=False) if recompute else layer(x)

    def step():
        forward().backward(grad)

    return timer(torch, device, forward, reps), timer(torch, device, step, reps)


def measure(args, device=None):
    import torch
    device = device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        raise SystemExit("gpu_model_check: measure needs a CUDA GPU (PyTorch sees none)")
    with open(os.path.join(args.dir, "configs.json")) as f:
        configs = json.load(f)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    result = {"device": name, "torch": torch.__version__,
              "cuda": getattr(torch.version, "cuda", None), "reps": args.reps, "ops": [],
              "layers": []}
    for c in configs:
        with open(os.path.join(args.dir, c["name"] + ".json")) as f:
            w = json.load(f)
        for key, (first, count) in distinct_ops(w).items():
            (med, lo, hi), scale = time_op(torch, device, key, args.reps)
            result["ops"].append({"config": c["name"], "key": list(key), "id": first,
                                  "count": count, "us": [med * scale, lo * scale, hi * scale]})
            print(f"{c['name']:14s} {describe(key):32s} {med * scale:12.1f} us", flush=True)
        if c["layer"]:
            fwd, (med, lo, hi) = time_layer(torch, device, w, args.reps)
            result["layers"].append({"config": c["name"], "us": [med, lo, hi], "fwd_us": list(fwd)})
            print(f"{c['name']:14s} {'layer fwd':32s} {fwd[0]:12.1f} us", flush=True)
            print(f"{c['name']:14s} {'layer fwd+bwd':32s} {med:12.1f} us", flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()  # each config's tensors gone before the next one's
    out = os.path.join(args.dir, "measured.json") if not args.out else args.out
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"gpu_model_check: {len(result['ops'])} ops and {len(result['layers'])} layers on "
          f"{name} in {out}")


def sim_gpu(device):
    d = device.lower()
    for g in ("h200", "h800", "h100", "a800", "a100"):
        if g in d:
            return g
    return None


def predicted(sim, gen, gpu):
    """{key: predicted us} and the layer's predicted computation (its GEMMs and memory-bound
    ops, not its TP collectives), forward and backward and forward alone, from tessera_sim's
    trace."""
    with tempfile.TemporaryDirectory() as tmp:
        wpath, tpath = os.path.join(tmp, "w.json"), os.path.join(tmp, "t.json")
        subprocess.run([sim, "--workload", "gpt", *gen.split(), "--gpu", gpu, "--write", wpath,
                        "--trace", tpath], check=True, stdout=subprocess.DEVNULL)
        with open(wpath) as f:
            w = json.load(f)
        with open(tpath) as f:
            t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    dur = {e["name"]: e["dur"] for e in events if e.get("ph") == "X" and e.get("pid") == 0}
    out, layer, fwd = {}, 0.0, 0.0
    for op in w["ranks"][0]["ops"]:
        if op["id"] not in dur:
            continue
        k = op_key(op)
        if k is not None:
            out.setdefault(k, dur[op["id"]])
        if ".l0." in op["id"] and op["op"] in ("gemm", "memory", "attention"):
            layer += dur[op["id"]]
            if ".l0.re." not in op["id"] and ".l0.b." not in op["id"]:
                fwd += dur[op["id"]]
    return out, layer, fwd


def step_ms(sim, gen, gpu, kernel_times=None):
    """tessera_sim's step for `gen` on `gpu`, ms, and (measured ops, compute ops) when
    `kernel_times` (a measured.json) replaces the model's kernel times."""
    cmd = [sim, "--workload", "gpt", *gen.split(), "--gpu", gpu]
    if kernel_times:
        cmd += ["--kernel-times", kernel_times]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    ms, used = None, None
    for line in out.splitlines():
        if line.startswith("step time"):
            ms = float(line.split()[2])
        if line.startswith("# kernel times:"):
            w = line.split()
            used = (int(w[3]), int(w[5]))
    if ms is None or (kernel_times and used is None):
        raise SystemExit(f"gpu_model_check: unexpected tessera_sim output:\n{out}")
    return ms, used


def compare(args, measured_path=None):
    sim = sim_path(args.build)
    path = measured_path or args.measured or os.path.join(args.dir, "measured.json")
    with open(path) as f:
        m = json.load(f)
    with open(os.path.join(args.dir, "configs.json")) as f:
        configs = {c["name"]: c for c in json.load(f)}
    gpu = args.gpu or sim_gpu(m["device"])
    if gpu is None:
        raise SystemExit(f"gpu_model_check: no GPU preset for {m['device']!r} (give --gpu)")
    print(f"# {m['device']}, PyTorch {m['torch']}, CUDA {m['cuda']}, {m['reps']} launches each; "
          f"tessera_sim's {gpu} preset")
    print(f"{'config':14s} {'op (first of its shape)':28s} {'shape':32s} {'n':>3s} "
          f"{'predicted':>10s} {'measured (min-max) us':>28s} {'meas/pred':>9s}")
    worst = 0.0
    steps = {}
    for name in configs:
        pred, layer_pred, fwd_pred = predicted(sim, configs[name]["args"], gpu)
        tot_p = tot_m = 0.0
        for r in (r for r in m["ops"] if r["config"] == name):
            key = tuple(r["key"])
            p = pred.get(key)
            med, lo, hi = r["us"]
            if p is None:
                print(f"{name:14s} {r['id']:28s} {describe(key):32s} {r['count']:3d} "
                      f"{'-':>10s} {med:10.1f} ({lo:.1f}-{hi:.1f})  not in the prediction")
                continue
            tot_p += p * r["count"]
            tot_m += med * r["count"]
            worst = max(worst, abs(med / p - 1))
            print(f"{name:14s} {r['id']:28s} {describe(key):32s} {r['count']:3d} {p:10.1f} "
                  f"{med:10.1f} ({lo:8.1f}-{hi:8.1f}) {med / p:9.3f}")
        if tot_p > 0:
            print(f"{name:14s} {'rank 0 compute ops, summed':61s} {tot_p / 1e3:10.3f} "
                  f"{tot_m / 1e3:10.3f} ms{'':17s} {tot_m / tot_p:9.3f}")
        for lay in (x for x in m["layers"] if x["config"] == name):
            if "fwd_us" in lay:
                med, lo, hi = lay["fwd_us"]
                print(f"{name:14s} {'its layer as a PyTorch module, forward':61s} "
                      f"{fwd_pred / 1e3:10.3f} {med / 1e3:10.3f} ms ({lo / 1e3:.3f}-{hi / 1e3:.3f}) "
                      f"{med / fwd_pred:9.3f}")
            med, lo, hi = lay["us"]
            print(f"{name:14s} {'its layer as a PyTorch module, fwd+bwd':61s} {layer_pred / 1e3:10.3f} "
                  f"{med / 1e3:10.3f} ms ({lo / 1e3:.3f}-{hi / 1e3:.3f}) {med / layer_pred:9.3f}")
        # The whole (one-layer) step with the measured kernels in place of the model's
        # (tessera_sim --kernel-times): what the measurements change in a step's prediction.
        model_ms, _ = step_ms(sim, configs[name]["args"], gpu)
        meas_ms, (used, total) = step_ms(sim, configs[name]["args"], gpu, path)
        steps[name] = (used, total)
        print(f"{name:14s} {'its step, model kernels -> measured kernels':61s} {model_ms:10.3f} "
              f"{meas_ms:10.3f} ms ({used} of {total} compute ops measured) "
              f"{meas_ms / model_ms:9.3f}")
    print(f"# largest single-op error: {worst * 100:.1f}%")
    return steps


def selftest(args):
    with tempfile.TemporaryDirectory() as tmp:
        args.dir = tmp
        prepare(args, SELFTEST)
        args.reps, args.out = 2, None
        measure(args, device="cpu")
        args.gpu, args.measured = "h100", None
        steps = compare(args)
        # Without FlashAttention every compute op is a GEMM or a memory-bound one, and measure
        # timed each shape of rank 0: the step takes all of them from the measurements.
        if any(used != total or total == 0 for used, total in steps.values()):
            raise SystemExit(f"gpu_model_check selftest: measured ops used in the step {steps}; "
                             "expected all of them")
        with open(os.path.join(tmp, "measured.json")) as f:
            m = json.load(f)
        kinds = {r["key"][0] for r in m["ops"]}
        if (kinds != {"gemm", "memory"} or len(m["layers"]) != len(SELFTEST)
                or any(len(x.get("fwd_us", [])) != 3 for x in m["layers"])):
            raise SystemExit(f"gpu_model_check selftest: measured {kinds}, {len(m['layers'])} "
                             f"layers; expected gemm and memory ops and {len(SELFTEST)} layers")
    print("gpu_model_check selftest: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["prepare", "measure", "compare", "selftest"])
    ap.add_argument("dir", nargs="?", default="")
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None, help="measure: where measured.json goes")
    ap.add_argument("--measured", default=None, help="compare: a measured.json elsewhere")
    ap.add_argument("--gpu", default=None, help="compare: tessera_sim's GPU preset")
    args = ap.parse_args()
    if args.step != "selftest" and not args.dir:
        ap.error(f"{args.step} needs DIR")
    {"prepare": lambda: prepare(args, CONFIGS), "measure": lambda: measure(args),
     "compare": lambda: compare(args), "selftest": lambda: selftest(args)}[args.step]()


if __name__ == "__main__":
    sys.exit(main())
