"""A peer that dies mid-call: the survivor's wait() raises tessera's sentence within the group's
timeout, and destroy_process_group / abort return without waiting for the dead peer."""

import os
import signal
import time

import pytest
import torch

from harness import init, run_ranks

TIMEOUT_S = 10


def _killed_peer_worker(rank, world, how):
    dist = init(timeout_s=TIMEOUT_S)
    t = torch.ones(1 << 22)  # 16 MiB: a call that takes a while
    dist.all_reduce(t)  # connections made, both alive
    if rank == world - 1:
        w = dist.all_reduce(t, async_op=True)
        time.sleep(0.002)  # on purpose: the death lands inside the call
        os.kill(os.getpid(), signal.SIGKILL)
        w.wait()
    start = time.monotonic()
    error = None
    try:
        dist.all_reduce(t, async_op=True).wait()
        dist.all_reduce(t)  # in case the first one finished before the peer died
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    took = time.monotonic() - start
    start = time.monotonic()
    if how == "destroy":
        dist.destroy_process_group()
    else:
        dist.distributed_c10d._abort_process_group()
    ended = time.monotonic() - start
    return error, took, ended


@pytest.mark.parametrize("how", ["destroy", "abort"])
def test_peer_killed_mid_call(how):
    world = 2
    results = run_ranks(_killed_peer_worker, world, how, timeout=120, allow_dead=(world - 1,))
    error, took, ended = results[0]
    print(f"survivor: raised after {took:.2f} s, {how} took {ended:.2f} s: {error}")
    assert error is not None, "the survivor's call did not fail"
    assert "tessera" in error, error
    assert took < TIMEOUT_S + 5, f"the error took {took:.1f} s (timeout {TIMEOUT_S} s)"
    assert ended < TIMEOUT_S + 5, f"{how} took {ended:.1f} s"
