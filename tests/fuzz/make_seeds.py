#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus (small valid inputs and a few edge cases).

memory_blob's seeds come from the target itself (its blobs hold per-run values, see
fuzz_memory_blob.cpp): TESSERA_FUZZ_SEEDS=tests/fuzz/corpus/memory_blob fuzz_memory_blob -runs=0
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


# socket.hpp wire address: family (1 IPv4, 2 IPv6), port, scope id, 16 address bytes.
def wire_address(family, port, addr, scope=0):
    return struct.pack("<HHI", family, port, scope) + addr.ljust(16, b"\0")


# unique_id.hpp: magic | format | flags | version | reserved | nonce | address | zeros | FNV-1a.
def unique_id(address, flags=0, version=100, nonce=0x1122334455667788, fmt=1):
    body = struct.pack("<IHHIIQ", 0x49525354, fmt, flags, version, 0, nonce) + address
    body = body.ljust(120, b"\0")
    return body + struct.pack("<Q", fnv1a64(body))


write("unique_id", "ipv4", unique_id(wire_address(1, 29500, bytes([127, 0, 0, 1]))))
write("unique_id", "ipv6_rank0", unique_id(wire_address(2, 29500, b"\0" * 15 + b"\1", 3), flags=1))
write("unique_id", "bad_family", unique_id(wire_address(7, 1, b"")))
write("unique_id", "bad_format", unique_id(wire_address(1, 1, b"\1\2\3\4"), fmt=2))

# tsrConfig_t (x86-64): size, magic, version, blocking, cgaClusterSize, minCTAs, maxCTAs,
# netName, splitShare, device, timeoutMs (56 bytes with padding). Then the netName string.
UNDEF = -2**31


def config(size=56, magic=0x7e55e2a1, version=100, blocking=UNDEF, cga=UNDEF, min_ctas=UNDEF,
           max_ctas=UNDEF, name_bit=0, split=UNDEF, device=UNDEF, timeout=UNDEF, name=b""):
    return struct.pack("<QIIiiiiQiii4x", size, magic, version, blocking, cga, min_ctas, max_ctas,
                       name_bit, split, device, timeout) + name


write("config", "initializer", config())
write("config", "all_set", config(blocking=0, cga=4, min_ctas=2, max_ctas=8, name_bit=1, split=1,
                                   device=-1, timeout=30000, name=b"socket"))
write("config", "old_header", config(size=48, timeout=5))
write("config", "bad_name", config(name_bit=1, name=b"IB"))
write("config", "min_over_max", config(min_ctas=9, max_ctas=3, device=-3))

# Bootstrap peer stream: byte 0 = (chunk << 2) | (nranks - 2), byte 1 = rank, then the stream.
NONCE = 0x6e6f6e63655a5a31


def hello(source, dest, nonce=NONCE):
    return struct.pack("<IiiIQ", 0x50525354, source, dest, 0, nonce)


def frame(source, tag, payload, declared=None):
    n = len(payload) if declared is None else declared
    return struct.pack("<IiiIQ", 0x46525354, source, tag, 0, n) + payload


write("bootstrap_wire", "two_frames", bytes([0, 0]) + hello(1, 0) + frame(1, 7, b"hello") +
      frame(1, -1, b""))
write("bootstrap_wire", "split_4", bytes([(4 << 2) | 2, 2]) + hello(3, 2) +
      frame(3, 1, bytes(range(40))) + frame(3, -3, b"x" * 9))
write("bootstrap_wire", "cut_payload", bytes([(7 << 2) | 1, 1]) + hello(0, 1) +
      frame(0, 5, b"abc", declared=1 << 20))
write("bootstrap_wire", "wrong_nonce", bytes([0, 0]) + hello(1, 0, nonce=1) + frame(1, 0, b"z"))
write("bootstrap_wire", "huge_header", bytes([1 << 2, 0]) + hello(1, 0) +
      frame(1, 0, b"", declared=(1 << 64) - 1))

# Plans: those of the unit tests (one valid, one the verifier refuses).
for name in ("allreduce_ring_n3.json", "broken_scratch_race.json"):
    d = os.path.join(CORPUS, "plan_json")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "tests/unit/collectives/plans", name), d)
write("plan_json", "not_a_plan.json", '{"format": "tessera-plan", "version": 2}')

# Workloads (tessera_sim --workload FILE): the examples of perf/workloads, and measured kernel
# times (tessera_sim --kernel-times FILE) as perf/gpu_model_check.py writes them.
for name in ("dp_beside_pp.json", "flux_gemm_rs_fused.json", "flux_ag_gemm_nccl.json"):
    d = os.path.join(CORPUS, "workload_json")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "perf/workloads", name), d)
write("workload_json", "measured.json", json.dumps({
    "device": "NVIDIA H200", "torch": "2.5", "cuda": "12.4", "reps": 10, "layers": [],
    "ops": [{"config": "toy", "key": ["gemm", 4096, 2304, 6144, 1], "id": "mb0.l0.qkv",
             "count": 2, "us": [812.5, 800.1, 830.0]},
            {"config": "toy", "key": ["memory", 100663296], "id": "mb0.l0.ln1", "count": 4,
             "us": [41.0, 40.2, 43.9]}]}))
write("workload_json", "cyclic.json", open(os.path.join(ROOT, "tests/unit/sim/data/cyclic.json")).read())

# Tuner file and TESSERA_ALGO / TESSERA_PROTO values.
tuner = {
    "tool": "tessera_tune", "host": "fuzz", "created": "2026-01-01",
    "links": {"shm": {"alphaUs": 0.4, "betaGBs": 6}, "inproc": {"alphaUs": 0.2, "betaGBs": 9}},
    "crossMemory": {"alphaUs": 2, "betaGBs": 8}, "gammaGBs": 4, "callOverheadUs": 0.3,
    "measured": [
        {"collective": "allreduce", "nranks": 2, "transport": "shm",
         "points": [{"bytes": 8, "us": {"oneshot": 0.41, "ring": 0.62}},
                    {"bytes": 4194304, "us": {"ring": 900.5, "twoshot": 950}, "crossUs": 512.0}]},
        {"collective": "allgather", "nranks": 4, "transport": "inproc",
         "points": [{"bytes": 1024, "us": {"ring": 3.5}}]},
    ],
}
write("tuner_file", "measured.json", json.dumps(tuner, indent=1))
write("tuner_file", "params_only.json", '{"gammaGBs": 12.5, "links": {"ucx": {"betaGBs": 25}}}')
write("tuner_file", "algo_filter", "allreduce:ring,tree;allgather:^ring")
write("tuner_file", "proto_filter", "^LL")
