"""Runs a function on N ranks, each a process of its own, under torch.distributed.

The function runs in a spawned process (so it must be a module-level function of an importable
module) with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set for env:// init, and returns a
picklable value or raises. run_ranks returns the values by rank, or fails the test with every
rank's traceback; a rank that has not answered by the deadline is killed and named.
"""

import multiprocessing
import os
import queue
import socket
import time
import traceback

import pytest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, rank, world, port, args, results, env):
    os.environ.update(env)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )
    try:
        results.put((rank, "ok", fn(rank, world, *args)))
    except BaseException:  # noqa: BLE001  (the parent reports it)
        results.put((rank, "fail", traceback.format_exc()))


def run_ranks(fn, world, *args, timeout=240, env=None, allow_dead=()):
    """fn(rank, world, *args) on `world` processes; the list of their return values.

    allow_dead: ranks that may end without answering (a test kills them on purpose).
    """
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    env = dict(env or {})
    env.setdefault("TESSERA_TUNER_CACHE", "0")
    procs = [
        ctx.Process(target=_child, args=(fn, r, world, port, args, results, env), daemon=True)
        for r in range(world)
    ]
    for p in procs:
        p.start()
    answers = {}
    deadline = time.monotonic() + timeout
    waiting = set(range(world)) - set(allow_dead)
    while waiting and time.monotonic() < deadline:
        try:
            rank, status, value = results.get(timeout=0.5)
        except queue.Empty:
            for r in list(waiting):
                if not procs[r].is_alive() and procs[r].exitcode not in (0, None):
                    answers[r] = ("fail", f"rank {r} died with exit code {procs[r].exitcode}")
                    waiting.discard(r)
            continue
        answers[rank] = (status, value)
        waiting.discard(rank)
    for p in procs:
        p.join(timeout=max(1.0, deadline - time.monotonic()) if not waiting else 1.0)
        if p.is_alive():
            p.kill()
            p.join()
    if waiting:
        pytest.fail(
            f"ranks {sorted(waiting)} did not answer within {timeout} s; the others said: "
            + "; ".join(f"rank {r}: {answers[r][0]}" for r in sorted(answers))
        )
    failed = {r: v for r, (s, v) in answers.items() if s != "ok"}
    if failed:
        pytest.fail("\n".join(f"--- rank {r} ---\n{v}" for r, v in sorted(failed.items())))
    return [answers[r][1] if r in answers else None for r in range(world)]


def init(backend="tessera", timeout_s=60, **kw):
    """init_process_group over env:// with a timeout that bounds every wait of the test."""
    from datetime import timedelta

    import torch.distributed as dist

    import tessera_torch  # noqa: F401  (registers the backend)

    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s), **kw)
    return dist
