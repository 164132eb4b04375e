"""Every collective x dtype x reduce op on tessera, checked against Gloo's result on the same
inputs and a float64 serial reference (cases.py says how), over 2 and 4 processes: every
combination at small sizes, and a seeded random sample at large ones (the seed is printed;
TESSERA_TEST_SEED=<seed> replays it)."""

import os
import random
import warnings
import time

import pytest
import torch

import cases as C
from harness import init, run_ranks

SEED = int(os.environ.get("TESSERA_TEST_SEED", str(int(time.time()) % 100000)))
SMALL = [0, 1, 7, 1000]
LARGE = [65537, 262147, 1048573]


def _call(dist, group, case, inputs, rank, world):
    """Runs one case on `group`; what this rank has to compare (None: nothing)."""
    op, dtype, redop, n, _ = case
    me = inputs[rank].clone()
    if op == "all_reduce":
        dist.all_reduce(me, op=C.redop_of(redop, dtype), group=group)
        return me
    if op == "reduce":
        dist.reduce(me, dst=world - 1, op=C.redop_of(redop, dtype), group=group)
        return me if rank == world - 1 else None
    if op == "reduce_scatter":
        out = torch.empty(n, dtype=me.dtype)
        dist.reduce_scatter(out, list(me.chunk(world)), op=C.redop_of(redop, dtype), group=group)
        return out
    if op == "reduce_scatter_tensor":
        out = torch.empty(n, dtype=me.dtype)
        dist.reduce_scatter_tensor(out, me, op=C.redop_of(redop, dtype), group=group)
        return out
    if op == "reduce_scatter_tensor_inplace":
        out = me[rank * n : (rank + 1) * n]
        dist.reduce_scatter_tensor(out, me, op=C.redop_of(redop, dtype), group=group)
        return out.clone()
    if op == "all_reduce_coalesced":
        parts = [me[: n // 2].clone(), me[n // 2 :].clone()]
        with dist._coalescing_manager(group=group):
            for p in parts:
                dist.all_reduce(p, op=C.redop_of(redop, dtype), group=group)
        return torch.cat(parts)
    if op == "broadcast":
        dist.broadcast(me, src=world - 1, group=group)
        return me
    if op == "all_gather":
        outs = [torch.empty_like(me) for _ in range(world)]
        dist.all_gather(outs, me, group=group)
        return torch.cat(outs)
    if op == "all_gather_into_tensor":
        out = torch.empty(n * world, dtype=me.dtype)
        dist.all_gather_into_tensor(out, me, group=group)
        return out
    if op == "all_gather_into_tensor_inplace":
        out = torch.empty(n * world, dtype=me.dtype)
        out[rank * n : (rank + 1) * n] = me
        dist.all_gather_into_tensor(out, out[rank * n : (rank + 1) * n], group=group)
        return out
    if op == "all_gather_into_tensor_coalesced":
        halves = [me[: n // 2].clone(), me[n // 2 :].clone()]
        outs = [torch.empty(h.numel() * world, dtype=me.dtype) for h in halves]
        with dist._coalescing_manager(group=group):
            for o, h in zip(outs, halves):
                dist.all_gather_into_tensor(o, h, group=group)
        return torch.cat([o.view(world, -1) for o in outs], dim=1).reshape(-1)
    if op == "all_gather_coalesced":
        # Two inputs of another shape each; outs[r][i] is input i of rank r (Gloo's layout).
        parts = [me[: n // 2].clone(), me[n // 2 :].clone().reshape(-1, 1)]
        outs = [[torch.empty_like(p) for p in parts] for _ in range(world)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch: "will be deprecated"
            dist.all_gather_coalesced(outs, parts, group=group)
        return torch.cat([torch.cat([o.reshape(-1) for o in l]) for l in outs])
    if op == "all_to_all_single":
        out = torch.empty_like(me)
        dist.all_to_all_single(out, me, group=group)
        return out
    if op == "all_to_all_single_uneven":
        ins = [_rows(rank, p) for p in range(world)]
        outs = [_rows(p, rank) for p in range(world)]
        src = me[: sum(ins) * 3].reshape(-1, 3)
        out = torch.empty(sum(outs), 3, dtype=me.dtype)
        dist.all_to_all_single(out, src, outs, ins, group=group)
        return out.reshape(-1)
    if op == "all_to_all":
        outs = [torch.empty(n, dtype=me.dtype) for _ in range(world)]
        dist.all_to_all(outs, list(me.chunk(world)), group=group)
        return torch.cat(outs)
    if op == "gather":
        outs = [torch.empty_like(me) for _ in range(world)] if rank == 0 else None
        dist.gather(me, outs, dst=0, group=group)
        return torch.cat(outs) if rank == 0 else None
    if op == "scatter":
        out = torch.empty(n, dtype=me.dtype)
        src = list(me.chunk(world)) if rank == world - 1 else None
        dist.scatter(out, src, src=world - 1, group=group)
        return out
    raise AssertionError(op)


def _rows(src, dst):
    """Rows rank src sends rank dst in the uneven all-to-all (0 included)."""
    return (2 * src + dst) % 3


def _input_elements(op, n, world):
    if op.startswith("reduce_scatter") or op in ("all_to_all_single", "all_to_all", "scatter"):
        return n * world
    if op == "all_to_all_single_uneven":
        return max(sum(_rows(r, p) for p in range(world)) for r in range(world)) * 3
    return n


def _expected(case, inputs, rank, world):
    """(expected tensor, error bound or None for exact) for this rank."""
    op, dtype, redop, n, _ = case
    if redop is not None:
        ref, bound = C.reduce_ref(inputs, dtype, redop)
        if op.startswith("reduce_scatter"):
            ref = ref[rank * n : (rank + 1) * n]
            bound = None if bound is None else bound[rank * n : (rank + 1) * n]
        return ref, bound
    if op == "broadcast":
        return inputs[world - 1], None
    if op.startswith("all_gather") or op == "gather":
        return torch.cat(inputs), None
    if op in ("all_to_all_single", "all_to_all"):
        return torch.cat([x[rank * n : (rank + 1) * n] for x in inputs]), None
    if op == "all_to_all_single_uneven":
        blocks = []
        for p in range(world):
            start = sum(_rows(p, q) for q in range(rank)) * 3
            blocks.append(inputs[p][start : start + _rows(p, rank) * 3])
        return torch.cat(blocks), None
    if op == "scatter":
        return inputs[world - 1][rank * n : (rank + 1) * n], None
    raise AssertionError(op)


def _check(name, result, expected, bound):
    """A sentence when `result` is wrong, else None."""
    if result is None:
        return None
    if bound is None:
        want = expected if expected.dtype == result.dtype else C.narrow(expected, result)
        if C.same(result, want):
            return None
        return f"{name}: differs from the expected {want.flatten()[:8].tolist()} (got {result.flatten()[:8].tolist()})"
    if result.dtype != torch.bool and not result.is_complex() and not result.dtype.is_floating_point:
        if C.same(result, C.narrow(expected, result)):
            return None
        return f"{name}: differs from the reference"
    if C.within(result, expected, bound):
        return None
    return f"{name}: beyond the documented bound"


def _matrix_worker(rank, world, seed, cases):
    dist = init()
    gloo = dist.new_group(backend="gloo")
    failures, counts = [], {"cases": 0, "gloo": 0, "gloo_na": 0}
    for i, case in enumerate(cases):
        op, dtype, redop, n, exact = case
        name = f"{op} {dtype} {redop or ''} n={n} {'exact' if exact else 'random'} (case {i}, seed {seed})"
        elems = _input_elements(op, n, world)
        inputs = [C.gen(seed, r, f"{i}", elems, dtype, exact) for r in range(world)]
        expected, bound = _expected(case, inputs, rank, world)
        exact_result = bound is None or exact
        try:
            got = _call(dist, None, case, inputs, rank, world)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name}: tessera raised {type(e).__name__}: {e}")
            continue
        counts["cases"] += 1
        if exact_result and bound is not None:
            bound = None  # exact data: the exact result
        err = _check(name + " (tessera vs reference)", got, expected, bound)
        if err:
            failures.append(err)
        try:
            ref_gloo = _call(dist, gloo, case, inputs, rank, world)
        except Exception:  # noqa: BLE001  (Gloo lacks this dtype or op)
            counts["gloo_na"] += 1
            continue
        counts["gloo"] += 1
        if got is None:
            continue
        if bound is None:
            if not C.same(got, ref_gloo):
                failures.append(f"{name}: not bit-equal to Gloo ({got.flatten()[:6].tolist()} vs {ref_gloo.flatten()[:6].tolist()})")
        elif not C.within(got, C._wide(ref_gloo), 2 * bound):
            failures.append(f"{name}: further from Gloo than twice the documented bound")
    dist.barrier()
    dist.destroy_process_group()
    return failures, counts


def _run(world, cases, seed, whole_matrix):
    print(f"torch backend matrix: {len(cases)} cases on {world} processes, seed {seed}")
    results = run_ranks(_matrix_worker, world, seed, cases, timeout=600)
    failures = [f for fs, _ in results for f in fs]
    counts = results[0][1]
    print(f"rank 0: {counts}")
    if whole_matrix:  # Gloo checked most cases (a sample may draw mostly what Gloo lacks)
        assert counts["gloo"] > counts["gloo_na"], counts
    for f in failures[:60]:
        print("FAIL", f)
    assert not failures, f"{len(failures)} failures (printed above)"


@pytest.mark.parametrize("world", [2, 4])
def test_matrix_small_sizes(world):
    _run(world, C.all_cases(SMALL), SEED, True)


@pytest.mark.parametrize("world", [2, 4])
def test_matrix_large_sample(world):
    rng = random.Random(SEED * 10 + world)
    sample = rng.sample(C.all_cases([LARGE[0]]), 12)
    sample = [(op, dt, rd, rng.choice(LARGE), ex) for op, dt, rd, _, ex in sample]
    _run(world, sample, SEED, False)
