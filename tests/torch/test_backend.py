"""The backend as torch.distributed uses it: init methods and registration, subgroups and splits,
async ordering and futures, send/recv with tags, receive from any source (against Gloo),
coalescing, non-contiguous tensors, errors."""

import os
import subprocess
import sys
import time
import warnings
from datetime import timedelta

import pytest
import torch

from harness import free_port, init, run_ranks

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- init methods and registration ----------------------------------------------------------


def _init_worker(rank, world, method, backend):
    import torch.distributed as dist

    import tessera_torch  # noqa: F401

    kw = {"rank": rank, "world_size": world, "timeout": timedelta(seconds=60)}
    if method != "env":
        kw["init_method"] = method
    dist.init_process_group(backend, **kw)
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [world * (world + 1) / 2] * 5, t
    name = dist.get_backend()
    dist.destroy_process_group()
    return name


@pytest.mark.parametrize("method", ["env", "tcp", "file"])
def test_init_methods(method, tmp_path):
    world = 2
    if method == "tcp":
        m = f"tcp://127.0.0.1:{free_port()}"
    elif method == "file":
        m = "file://" + str(tmp_path / "store")
    else:
        m = "env"
    names = run_ranks(_init_worker, world, m, "tessera", timeout=120)
    assert names == ["tessera"] * world


@pytest.mark.parametrize(
    "backend",
    [
        "cpu:tessera",
        pytest.param(
            "cpu:tessera,cuda:nccl",
            marks=pytest.mark.skipif(
                not torch.cuda.is_available(),
                reason="torch creates its nccl backend at init, which needs a CUDA device",
            ),
        ),
    ],
)
def test_device_backend_strings(backend):
    # CPU tensors on tessera (and CUDA tensors on NCCL where a GPU is).
    names = run_ranks(_init_worker, 2, "env", backend, timeout=120)
    assert all("tessera" in n for n in names), names


ENTRY_POINT_SCRIPT = """
import os, torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("tessera", timeout=timedelta(seconds=60))
import sys
assert "tessera_torch" in sys.modules, "the entry point did not load tessera_torch"
t = torch.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert t.tolist() == [3.0, 3.0, 3.0], t
dist.destroy_process_group()
print("entry point ok", dist.is_initialized())
"""


def test_entry_point_without_import():
    """A script that never imports tessera_torch (torchrun's case) finds it by its entry point."""
    port = free_port()
    procs = []
    for r in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE="2", TESSERA_TUNER_CACHE="0")
        procs.append(subprocess.Popen([sys.executable, "-c", ENTRY_POINT_SCRIPT], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
        assert "entry point ok" in out, out


def test_torchrun(tmp_path):
    script = str(tmp_path / "job.py")
    with open(script, "w") as f:
        f.write(ENTRY_POINT_SCRIPT)
    # TMPDIR: torchrun's own torchelastic_* folder goes with pytest's tmp_path, not into /tmp.
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
         f"--master-port={free_port()}", script],
        capture_output=True, text=True, timeout=180,
        env=dict(os.environ, TESSERA_TUNER_CACHE="0", TMPDIR=str(tmp_path)),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("entry point ok") == 2, out.stdout


# ---- subgroups and splits -------------------------------------------------------------------


def _subgroup_worker(rank, world, eager):
    kw = {"device_id": torch.device("cpu", 0)} if eager else {}
    dist = init(**kw)
    sub = dist.new_group([0, 2])
    t = torch.full((4,), float(rank))
    if rank in (0, 2):
        assert dist.get_backend(sub) == "tessera"
        dist.all_reduce(t, group=sub)
        assert t.tolist() == [2.0] * 4, t
        assert dist.get_rank(sub) == (0 if rank == 0 else 1)
    else:
        assert sub == dist.GroupMember.NON_GROUP_MEMBER
    # split_group: tsrCommSplit of the default group's communicator.
    halves = dist.split_group(split_ranks=[[0, 1], [2, 3]])
    u = torch.full((3,), float(rank + 1))
    dist.all_reduce(u, group=halves)
    want = 3.0 if rank < 2 else 7.0
    assert u.tolist() == [want] * 3, u
    # Reversed order inside a split: the list's order is the group's rank order.
    rev = dist.split_group(split_ranks=[[3, 2, 1, 0]])
    assert dist.get_rank(rev) == 3 - rank
    v = torch.tensor([float(rank)])
    dist.broadcast(v, group_src=0, group=rev)  # group rank 0 is global rank 3
    assert v.item() == 3.0, v
    # Ranks outside every list take part in the split and get no group.
    pair = dist.split_group(split_ranks=[[1, 3]])
    if rank in (1, 3):
        z = torch.tensor([float(rank)])
        dist.all_reduce(z, group=pair)
        assert z.item() == 4.0, z
    else:
        assert pair == dist.GroupMember.NON_GROUP_MEMBER, pair
    # The world still works after all that.
    w = torch.ones(2)
    dist.all_reduce(w)
    assert w.tolist() == [4.0, 4.0]
    dist.destroy_process_group()
    return True


@pytest.mark.parametrize("eager", [False, True], ids=["store", "split_from"])
def test_subgroups_and_splits(eager):
    assert run_ranks(_subgroup_worker, 4, eager, timeout=180) == [True] * 4


# ---- asynchrony -----------------------------------------------------------------------------


def _async_worker(rank, world):
    dist = init()
    n = 64
    tensors = [torch.full((1000 + 17 * i,), float(rank + i)) for i in range(n)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    seen = []
    # A future's callback runs when the call completes (DDP's comm hooks use it).
    fut = works[5].get_future().then(lambda f: seen.append(f.value()[0][0].item()) or 42)
    for i in reversed(range(n)):  # waiting out of order still runs them in issue order
        works[i].wait()
        assert works[i].is_completed()
        want = sum(float(r + i) for r in range(world))
        assert torch.all(tensors[i] == want), (i, tensors[i][:3])
    assert fut.wait() == 42 and seen == [sum(float(r + 5) for r in range(world))], seen
    # A mix of collectives, async and not, stays in issue order on every rank.
    a = torch.ones(10)
    w1 = dist.all_reduce(a, async_op=True)
    b = torch.arange(4.0) if rank == 0 else torch.zeros(4)
    dist.broadcast(b, src=0)
    w1.wait()
    assert a.tolist() == [float(world)] * 10 and b.tolist() == [0.0, 1.0, 2.0, 3.0]
    # Work.wait with a timeout on a call a peer has not made yet: raises, the call goes on.
    if rank == 0:
        c = torch.ones(3)
        w = dist.all_reduce(c, async_op=True)
        with pytest.raises(RuntimeError, match="did not complete within"):
            w.wait(timeout=timedelta(milliseconds=300))
        dist.barrier()  # the peer makes its all_reduce after this rank's timeout
        w.wait()
        assert c.tolist() == [float(world)] * 3
    else:
        import time

        # Late on purpose: rank 0's 300 ms wait must expire before this all_reduce comes.
        time.sleep(1.0)
        c = torch.ones(3)
        dist.all_reduce(c)
        dist.barrier()
    dist.destroy_process_group()
    return True


def test_async_order_and_futures():
    assert run_ranks(_async_worker, 2, timeout=180) == [True, True]


# ---- send / recv ----------------------------------------------------------------------------


def _p2p_worker(rank, world):
    dist = init(timeout_s=30)
    peer = 1 - rank if world == 2 else (rank + 1) % world
    prev = (rank - 1) % world
    # Tags out of order: two messages to the next rank, received tag 7 first.
    if rank % 2 == 0:
        dist.send(torch.full((5,), 1.0), dst=(rank + 1) % world, tag=3)
        dist.send(torch.full((9,), 2.0), dst=(rank + 1) % world, tag=7)
    else:
        a, b = torch.zeros(9), torch.zeros(5)
        dist.recv(a, src=prev, tag=7)
        dist.recv(b, src=prev, tag=3)
        assert a.tolist() == [2.0] * 9 and b.tolist() == [1.0] * 5, (a, b)
    # Same tag twice: received in the order sent.
    if rank % 2 == 0:
        for i in range(3):
            dist.send(torch.tensor([float(i)]), dst=(rank + 1) % world, tag=11)
    else:
        got = []
        for _ in range(3):
            t = torch.zeros(1)
            dist.recv(t, src=prev, tag=11)
            got.append(t.item())
        assert got == [0.0, 1.0, 2.0], got
    # A ring in one batch, 2 MiB each way (beyond tessera's eager slots): no deadlock.
    big = torch.full((1 << 19,), float(rank))
    into = torch.empty(1 << 19)
    ops = [dist.P2POp(dist.isend, big, (rank + 1) % world, tag=5),
           dist.P2POp(dist.irecv, into, prev, tag=5)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.all(into == float(prev)), into[:3]
    # int64, bf16, a non-contiguous receive.
    x = torch.arange(12, dtype=torch.int64).reshape(3, 4) + 100 * rank
    y = torch.zeros(4, 3, dtype=torch.int64).t()  # 3 x 4, not contiguous
    ops = [dist.P2POp(dist.isend, x, peer, tag=1), dist.P2POp(dist.irecv, y, peer, tag=1)] \
        if world == 2 else [dist.P2POp(dist.isend, x, (rank + 1) % world, tag=1),
                            dist.P2POp(dist.irecv, y, prev, tag=1)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    src = peer if world == 2 else prev
    assert torch.equal(y, torch.arange(12, dtype=torch.int64).reshape(3, 4) + 100 * src), y
    # isend / irecv outside a batch, small.
    s = dist.isend(torch.tensor([rank * 1.5], dtype=torch.bfloat16), dst=(rank + 1) % world, tag=2)
    r = torch.zeros(1, dtype=torch.bfloat16)
    dist.irecv(r, src=prev, tag=2).wait()
    s.wait()
    assert r.item() == prev * 1.5
    # A receive whose message has another size fails with both sizes named; the message stays
    # (a receive of the right size gets it), and the group stays usable.
    if rank == 0:
        dist.send(torch.zeros(4), dst=1, tag=9)
    elif rank == 1:
        with pytest.raises(ValueError, match="has 16 host bytes but the receive expects 12"):
            dist.recv(torch.zeros(3), src=0, tag=9)
        kept = torch.ones(4)
        dist.recv(kept, src=0, tag=9)
        assert kept.tolist() == [0.0] * 4, kept
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(world)] * 2, t
    dist.barrier()
    # Bad input is not a fault: every rank ends in order (finalize's barrier), so none waits
    # there for its deadline (the group's timeout, 30 s) for a rank that ended alone.
    t0 = time.monotonic()
    dist.destroy_process_group()
    took = time.monotonic() - t0
    assert took < 15, f"destroy_process_group took {took:.1f} s: a rank skipped finalize"
    return True


@pytest.mark.parametrize("world", [2, 4])
def test_send_recv_tags(world):
    assert run_ranks(_p2p_worker, world, timeout=180) == [True] * world


# ---- receive from any source ------------------------------------------------------------------


def _any_source_scenario(dist, g, rank, world):
    """dist.recv / irecv without src on group g (every rank of the world, so group and global
    ranks agree); rank 0 receives. Returns what rank 0 saw, as (source, values) pairs."""
    seen = []
    # Tags that name their sender: received in the reverse of the senders' order.
    if rank != 0:
        dist.send(torch.full((rank + 1,), rank * 10.0), dst=0, tag=100 + rank, group=g)
    else:
        for r in reversed(range(1, world)):
            t = torch.zeros(r + 1)
            seen.append((dist.recv(t, tag=100 + r, group=g), t.tolist()))
    # One tag from every other rank: each message once, whatever the order (sorted here).
    if rank != 0:
        dist.send(torch.tensor([float(rank)]), dst=0, tag=5, group=g)
    else:
        got = []
        for _ in range(world - 1):
            t = torch.zeros(1)
            got.append((dist.recv(t, tag=5, group=g), t.tolist()))
        seen += sorted(got)
    # Several messages of one sender and tag: in the order sent.
    if rank == 1:
        for i in range(3):
            dist.send(torch.tensor([i + 0.5], dtype=torch.float64), dst=0, tag=6, group=g)
    elif rank == 0:
        for _ in range(3):
            t = torch.zeros(1, dtype=torch.float64)
            seen.append((dist.recv(t, tag=6, group=g), t.tolist()))
    # A message of another tag that arrives first is kept for its own receive (isend: Gloo's send
    # waits for its receive).
    if rank == world - 1:
        works = [dist.isend(torch.tensor([8.0, 8.0]), dst=0, tag=8, group=g),
                 dist.isend(torch.arange(3, dtype=torch.int32), dst=0, tag=9, group=g)]
        for w in works:
            w.wait()
    elif rank == 0:
        nine = torch.zeros(3, dtype=torch.int32)
        seen.append((dist.recv(nine, tag=9, group=g), nine.tolist()))
        eight = torch.zeros(2)
        seen.append((dist.recv(eight, tag=8, group=g), eight.tolist()))
    # irecv without src, and the Work's source rank.
    if rank == world - 1:
        dist.send(torch.tensor([7.0]), dst=0, tag=7, group=g)
    elif rank == 0:
        t = torch.zeros(1)
        w = dist.irecv(t, tag=7, group=g)
        w.wait()
        seen.append((w._source_rank(), t.tolist()))
    dist.barrier(group=g)
    return seen


def _any_source_worker(rank, world):
    dist = init(timeout_s=60)
    gloo = dist.new_group(backend="gloo")
    mine = _any_source_scenario(dist, None, rank, world)
    ref = _any_source_scenario(dist, gloo, rank, world)
    assert mine == ref, f"tessera {mine} != gloo {ref}"
    if rank == 0:
        assert len(mine) == (world - 1) * 2 + 3 + 2 + 1, mine
        assert all(src != 0 for src, _ in mine), mine
    # A message whose size differs from the receive's: both sizes named, the message kept for a
    # receive that fits, the group still usable.
    if rank == 1:
        dist.send(torch.zeros(4), dst=0, tag=12)
    elif rank == 0:
        with pytest.raises(ValueError, match="has 16 host bytes but the receive from any source "
                                             "expects 12"):
            dist.recv(torch.zeros(3), tag=12)
        kept = torch.ones(4)
        assert dist.recv(kept, tag=12) == 1
        assert kept.tolist() == [0.0] * 4, kept
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(world)] * 2, t
    dist.destroy_process_group()
    return True


@pytest.mark.parametrize("world", [2, 4])
def test_recv_any_source_as_gloo(world):
    assert run_ranks(_any_source_worker, world, timeout=180) == [True] * world


def _any_source_refused_worker(rank, world):
    dist = init(timeout_s=30)
    if rank == 0:
        with pytest.raises(ValueError, match="more than TESSERA_TORCH_ANY_SOURCE_RANKS allows"):
            dist.recv(torch.zeros(1))
    # The group works otherwise: a receive that names its source.
    if rank == 1:
        dist.send(torch.tensor([3.0]), dst=0)
    elif rank == 0:
        t = torch.zeros(1)
        assert dist.recv(t, src=1) == 1 and t.item() == 3.0
    dist.destroy_process_group()
    return True


def test_recv_any_source_refused_beyond_the_limit():
    env = {"TESSERA_TORCH_ANY_SOURCE_RANKS": "1"}
    assert run_ranks(_any_source_refused_worker, 2, timeout=120, env=env) == [True, True]


# ---- tensors as torch hands them ------------------------------------------------------------


def _layout_worker(rank, world):
    dist = init()
    # Non-contiguous tensors, as Gloo handles them: results land in the original's layout.
    t = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * (rank + 1)).t()
    dist.all_reduce(t)
    want = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * sum(range(1, world + 1))).t()
    assert torch.equal(t, want), t
    b = torch.zeros(4, 6)[:, ::2]
    if rank == 0:
        b.copy_(torch.arange(12.0).reshape(4, 3))
    dist.broadcast(b, src=0)
    assert torch.equal(b, torch.arange(12.0).reshape(4, 3)), b
    # Complex tensors through their real view.
    c = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64) * (rank + 1)
    dist.all_reduce(c)
    s = sum(range(1, world + 1))
    assert torch.equal(c, torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64) * s), c
    # PREMUL_SUM with a tensor factor.
    f = dist._make_nccl_premul_sum(torch.tensor([0.25]))
    p = torch.full((3,), 4.0)
    dist.all_reduce(p, op=f)
    assert p.tolist() == [float(world)] * 3, p
    # all_gather into tensors that are not laid out together.
    outs = [torch.empty(2, 3) for _ in range(world)]
    dist.all_gather(outs, torch.full((2, 3), float(rank)))
    assert all(torch.all(o == i) for i, o in enumerate(outs))
    dist.destroy_process_group()
    return True


def test_tensor_layouts():
    assert run_ranks(_layout_worker, 2, timeout=120) == [True, True]


# ---- bad input ------------------------------------------------------------------------------


def _bad_input_worker(rank, world):
    dist = init(timeout_s=8)
    x = torch.ones(4)
    # Refused before anything runs, with tessera's sentence.
    with pytest.raises(ValueError, match="tessera: allreduce: ReduceOp.BAND is not a reduction"):
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(ValueError, match="tessera cannot reduce int16"):
        dist.all_reduce(torch.ones(4, dtype=torch.int16))
    with pytest.raises(ValueError, match="AVG has no meaning on bool"):
        dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match="the output has 7 elements"):
        dist.all_gather_into_tensor(torch.empty(7), torch.ones(4))
    with pytest.raises(ValueError, match="split sizes add up to 3 rows"):
        dist.all_to_all_single(torch.empty(4), torch.ones(4), [2, 2], [1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch: "will be deprecated"
        with pytest.raises(ValueError, match="one output list per rank: 1 lists for 2 ranks"):
            dist.all_gather_coalesced([[torch.empty(4)]], [x])
        with pytest.raises(ValueError, match="output list 1 has 2 tensors for 1 inputs"):
            dist.all_gather_coalesced([[torch.empty(4)], [torch.empty(4), torch.empty(1)]], [x])
        with pytest.raises(ValueError, match="tensors of 4 and 5 elements"):
            dist.all_gather_coalesced([[torch.empty(4)], [torch.empty(5)]], [x])
    # The group is still fine.
    dist.all_reduce(x)
    assert x.tolist() == [2.0] * 4
    # Sizes that differ between ranks: an error on every rank within the timeout, no hang.
    y = torch.ones(1000 if rank == 0 else 2000)
    with pytest.raises(Exception, match="tessera"):
        dist.all_reduce(y)
    dist.destroy_process_group()
    return True


def test_bad_input():
    assert run_ranks(_bad_input_worker, 2, timeout=120) == [True, True]


def _check_calls_worker(rank, world):
    dist = init(timeout_s=20)
    # The same bytes on both ranks, another dtype: only the comparison tells them apart.
    x = torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32)
    with pytest.raises(ValueError, match=r"rank \d calls allreduce (float32|int32)\[4\] SUM but "
                                         r"rank \d calls allreduce (int32|float32)\[4\] SUM"):
        dist.all_reduce(x)
    op = dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX
    with pytest.raises(ValueError, match="but rank . calls allreduce float32\\[3\\]"):
        dist.all_reduce(torch.ones(3), op=op)
    with pytest.raises(ValueError, match="root"):
        dist.broadcast(torch.ones(2), src=rank)
    # Every rank refused the same calls: the group goes on.
    y = torch.ones(5)
    dist.all_reduce(y)
    assert y.tolist() == [2.0] * 5
    dist.destroy_process_group()
    return True


def test_mismatched_calls_with_check_calls():
    assert run_ranks(_check_calls_worker, 2, timeout=120,
                     env={"TESSERA_TORCH_CHECK_CALLS": "1"}) == [True, True]
