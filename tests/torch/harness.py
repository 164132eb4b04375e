"""Runs a function on N ranks, each a process of its own, under torch.distributed.

The function runs in a spawned process (so it must be a module-level function of an importable
module) with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set for env:// init, and returns a
picklable value or raises. run_ranks returns the values by rank, or fails the test with every
rank's traceback; a rank that has not answered by the deadline is killed and named.

The processes are kept for the next call of the same world size and environment (importing
torch takes most of a rank's start, 2-3 s here): one pool of ranks per (world, env) in a pytest
process. A call whose rank failed, died or ran late ends its pool (the next call starts fresh
ranks), as does a call that may lose ranks on purpose (allow_dead: fresh ranks, never kept). After
each call a rank destroys whatever process group the function left, so every call starts from no
group; what a process keeps beyond that (tessera's process-wide state, as a framework's process
keeps it between groups) is shared by the calls of a pool.
"""

import atexit
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


def _set_rank_env(env, rank, world, port):
    os.environ.update(env)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )


def _child(fn, rank, world, port, args, results, env):
    _set_rank_env(env, rank, world, port)
    try:
        results.put((rank, "ok", fn(rank, world, *args)))
    except BaseException:  # noqa: BLE001  (the parent reports it)
        results.put((rank, "fail", traceback.format_exc()))


def _pool_rank(rank, tasks, results, env):
    """A kept rank: runs (call, fn, world, port, args) tasks until it gets None."""
    os.environ.update(env)
    while True:
        task = tasks.get()
        if task is None:
            return
        call, fn, world, port, args = task
        _set_rank_env(env, rank, world, port)
        try:
            answer = (call, rank, "ok", fn(rank, world, *args))
        except BaseException:  # noqa: BLE001  (the parent reports it)
            answer = (call, rank, "fail", traceback.format_exc())
        # The next call starts from no process group, whatever this one left.
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except BaseException:  # noqa: BLE001
            answer = (call, rank, "fail", answer[3] if answer[2] == "fail" else
                      "destroying the group the function left failed:\n" + traceback.format_exc())
        results.put(answer)


class _Pool:
    def __init__(self, world, env):
        ctx = multiprocessing.get_context("spawn")
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(world)]
        self.procs = [
            ctx.Process(target=_pool_rank, args=(r, self.tasks[r], self.results, env), daemon=True)
            for r in range(world)
        ]
        for p in self.procs:
            p.start()

    def close(self, kill):
        for q in self.tasks:
            try:
                q.put(None)
            except Exception:  # noqa: BLE001
                pass
        for p in self.procs:
            p.join(timeout=0.1 if kill else 5.0)
            if p.is_alive():
                p.kill()
                p.join()


_pools = {}
_calls = 0


@atexit.register
def _close_pools():
    for pool in _pools.values():
        pool.close(kill=False)
    _pools.clear()


def _collect(get, procs, world, timeout, allow_dead):
    """(answers by rank, ranks still waited for) within `timeout`."""
    answers = {}
    deadline = time.monotonic() + timeout
    waiting = set(range(world)) - set(allow_dead)
    while waiting and time.monotonic() < deadline:
        try:
            rank, status, value = get(0.5)
        except queue.Empty:
            for r in list(waiting):
                if not procs[r].is_alive() and procs[r].exitcode not in (0, None):
                    answers[r] = ("fail", f"rank {r} died with exit code {procs[r].exitcode}")
                    waiting.discard(r)
            continue
        answers[rank] = (status, value)
        waiting.discard(rank)
    return answers, waiting


def run_ranks(fn, world, *args, timeout=240, env=None, allow_dead=()):
    """fn(rank, world, *args) on `world` processes; the list of their return values.

    allow_dead: ranks that may end without answering (a test kills them on purpose).
    """
    global _calls
    port = free_port()
    env = dict(env or {})
    env.setdefault("TESSERA_TUNER_CACHE", "0")
    if allow_dead:
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        procs = [
            ctx.Process(target=_child, args=(fn, r, world, port, args, results, env), daemon=True)
            for r in range(world)
        ]
        for p in procs:
            p.start()
        answers, waiting = _collect(lambda t: results.get(timeout=t), procs, world, timeout,
                                    allow_dead)
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()) if not waiting else 1.0)
            if p.is_alive():
                p.kill()
                p.join()
    else:
        key = (world, tuple(sorted(env.items())))
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = _Pool(world, env)
        _calls += 1
        call = _calls
        for q in pool.tasks:
            q.put((call, fn, world, port, args))

        def get(t):
            while True:  # an answer of an earlier call cannot arrive (its pool ended), but be sure
                c, rank, status, value = pool.results.get(timeout=t)
                if c == call:
                    return rank, status, value

        answers, waiting = _collect(get, pool.procs, world, timeout, ())
        if waiting or any(s != "ok" for s, _ in answers.values()):
            _pools.pop(key, None)
            pool.close(kill=True)
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
