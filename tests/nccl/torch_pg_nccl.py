"""PyTorch's ProcessGroupNCCL over tessera's NCCL drop-in (LD_PRELOAD=libnccl.so.2), on GPU 0.

Run by perf/gpu_check.sh where a GPU is: `python3 torch_pg_nccl.py NPROCS`. Every process is a
rank on cuda:0 (tessera allows several ranks per GPU; NVIDIA's NCCL would not), all-reduces a
tensor of each size and checks it against the closed-form sum; prints one line per size with the
median time of 5 calls. Exits non-zero on a wrong result.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", 0))
    for numel in (1, 1 << 10, 1 << 20, 1 << 24):
        x = torch.full((numel,), float(rank + 1), device="cuda")
        times = []
        for _ in range(5):
            y = x.clone()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dist.all_reduce(y)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        want = world * (world + 1) / 2
        ok = bool(torch.all(y == want))
        if rank == 0:
            times.sort()
            print(f"ProcessGroupNCCL over tessera: all_reduce {numel * 4} B on {world} ranks: "
                  f"{'right' if ok else 'WRONG'}, median {times[2] * 1e6:.1f} us", flush=True)
        if not ok:
            sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    mp.spawn(run, args=(world, 29500 + os.getpid() % 1000), nprocs=world, join=True)
