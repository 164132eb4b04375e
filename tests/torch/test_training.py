"""Training on the backend: DDP gives the parameters the same run on Gloo gives, and FSDP2
(fully_shard) runs on CPU tensors over it."""

import pytest
import torch

from harness import init, run_ranks

STEPS = 20


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 8),
    )


def _batches(rank):
    g = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)) for _ in range(STEPS)]


def _train(model, rank):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for x, y in _batches(rank):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _ddp_worker(rank, world):
    dist = init()
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    start = [p.detach().clone() for p in _model(7).parameters()]
    # Small buckets: several all-reduces per step, overlapping the backward pass.
    ours = _train(DDP(_model(7), bucket_cap_mb=0.01), rank)
    theirs = _train(DDP(_model(7), process_group=gloo, bucket_cap_mb=0.01), rank)
    diff = max((a - b).abs().max().item() for a, b in zip(ours, theirs))
    moved = max((a - b).abs().max().item() for a, b in zip(ours, start))
    # Every rank holds the same parameters.
    flat = torch.cat([p.reshape(-1) for p in ours])
    first = flat.clone()
    dist.broadcast(first, src=0)
    assert torch.equal(flat, first)
    dist.destroy_process_group()
    return diff, moved


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_matches_gloo(world):
    results = run_ranks(_ddp_worker, world, timeout=300)
    print(f"DDP {STEPS} steps on {world} processes, max |tessera - gloo| per rank: "
          f"{[d for d, _ in results]}, max |moved|: {[m for _, m in results]}")
    for diff, moved in results:
        assert moved > 1e-3, "training did not change the parameters"
        assert diff <= 1e-6, f"DDP on tessera differs from DDP on Gloo by {diff}"


def _fsdp_worker(rank, world):
    dist = init()
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (None, gloo):
        model = _model(11)
        mesh = DeviceMesh.from_group(group or dist.group.WORLD, "cpu")
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        params = _train(model, rank)
        results.append(torch.cat([p.full_tensor().reshape(-1) for p in params]))
    diff = (results[0] - results[1]).abs().max().item()
    dist.destroy_process_group()
    return diff


def test_fsdp2_on_cpu():
    diffs = run_ranks(_fsdp_worker, 2, timeout=300)
    print(f"FSDP2 {STEPS} steps on 2 processes, max |tessera - gloo| per rank: {diffs}")
    for diff in diffs:
        assert diff <= 1e-6, f"FSDP2 on tessera differs from FSDP2 on Gloo by {diff}"
