"""CUDA tensors on the device executor, ordered on the current stream (skipped without a GPU).

Ranks share the GPUs there are (rank r on cuda:r % count): tessera runs several ranks on one GPU,
so one GPU tests the multi-rank paths. Results are checked against Gloo's on the same inputs
(copied to the host)."""

import pytest
import torch

from harness import init, run_ranks

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine: the CUDA paths did not run"
)


def _cuda_worker(rank, world):
    import os

    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist = init()
    import tessera_torch

    assert tessera_torch.built_with_cuda(), "tessera_torch was built without CUDA"
    gloo = dist.new_group(backend="gloo")
    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            g = torch.Generator().manual_seed(rank * 100 + 7)
            host = (torch.randint(-3, 4, (4099,), generator=g)).to(dtype)
            d = host.to(dev)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):  # ordered on the current stream
                w = dist.all_reduce(d, op=op, async_op=True)
                w.wait()
                d.mul_(1)  # after the collective on this stream
            s.synchronize()
            ref = host.clone()
            dist.all_reduce(ref, op=op, group=gloo)
            assert torch.equal(d.cpu(), ref), (dtype, op)
    # Gathers, reduce-scatter, broadcast, all-to-all (equal and uneven), send/recv.
    x = torch.arange(8, dtype=torch.float32, device=dev) + 10 * rank
    ag = torch.empty(8 * world, device=dev)
    dist.all_gather_into_tensor(ag, x)
    assert torch.equal(ag.cpu(), torch.cat([torch.arange(8.0) + 10 * r for r in range(world)]))
    rs = torch.empty(8 // world * 1, device=dev) if 8 % world == 0 else None
    if rs is not None:
        dist.reduce_scatter_tensor(rs, x)
        full = sum(torch.arange(8.0) + 10 * r for r in range(world))
        assert torch.equal(rs.cpu(), full.chunk(world)[rank])
    b = x.clone()
    dist.broadcast(b, src=0)
    assert torch.equal(b.cpu(), torch.arange(8.0))
    ins = [(rank + p) % 3 for p in range(world)]
    outs = [(p + rank) % 3 for p in range(world)]
    src = torch.full((sum(ins),), float(rank), device=dev)
    dst = torch.empty(sum(outs), device=dev)
    dist.all_to_all_single(dst, src, outs, ins)
    want = torch.cat([torch.full((outs[p],), float(p)) for p in range(world)])
    assert torch.equal(dst.cpu(), want)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    r = torch.empty(1000, device=dev)
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x.repeat(125), nxt, tag=4),
                                    dist.P2POp(dist.irecv, r, prv, tag=4)]):
        w.wait()
    assert torch.equal(r.cpu(), (torch.arange(8.0) + 10 * prv).repeat(125))
    dist.barrier()
    dist.destroy_process_group()
    out["ok"] = True
    return out


def run_cuda_checks():
    for world in (2, 4):
        assert all(r["ok"] for r in run_ranks(_cuda_worker, world, timeout=300))


def test_cuda_collectives_and_p2p():
    run_cuda_checks()


def _cpu_only_worker(rank, world):
    dist = init(backend="cpu:tessera")
    with pytest.raises(Exception):
        dist.all_reduce(torch.ones(4, device="cuda"))
    dist.destroy_process_group()
    return True


def test_cuda_tensor_on_cpu_only_group():
    assert run_ranks(_cpu_only_worker, 2, timeout=120) == [True, True]
