"""torch.distributed on tessera.

Importing this package registers the backend "tessera" for CPU and CUDA tensors; the package's
entry point (group "torch.distributed.backends") registers it too, so that
``init_process_group("tessera")`` works in a script that never imports it (torchrun).

    import torch.distributed as dist
    dist.init_process_group("tessera")                 # CPU and CUDA tensors on tessera
    dist.init_process_group("cpu:tessera,cuda:nccl")   # CPU tensors on tessera, CUDA on NCCL

What runs where, and the variables that tune it: the README of tessera, section "PyTorch".
"""

import zlib

import torch  # noqa: F401  (loads torch's libraries before the extension)
import torch.distributed as dist

from . import _C
from ._C import TesseraBackend

__all__ = ["TesseraBackend", "register", "version", "built_with_cuda"]


def version():
    """libtessera's version code (major * 10000 + minor * 100 + patch)."""
    return _C.version()


def built_with_cuda():
    """Whether this build takes CUDA tensors (torch and the CUDA toolkit had CUDA at build time)."""
    return _C.built_with_cuda()


def _create(opts, backend_options):
    """The backend of one process group (torch calls it with extended_api=True).

    A group made while the default group's backend is ours and eagerly initialised
    (``init_process_group(device_id=...)``) is a split of the default group's communicator
    (tsrCommSplit; the ranks outside it take part through ``perform_nocolor_split``). Any other
    group makes a communicator of its own through the group's store.
    """
    parent = getattr(opts, "split_from", None)
    if isinstance(parent, TesseraBackend):
        ranks = list(opts.global_ranks_in_group) or list(range(opts.group_size))
        # One color per member set, the same on every member: the set's checksum (tsrCommSplit
        # takes non-negative colors).
        color = zlib.crc32(",".join(map(str, ranks)).encode()) & 0x7FFFFFFF
        return parent._split(color, opts.group_rank, opts.group_size, opts.timeout, opts.group_id)
    return _C._create_backend(
        opts.store, opts.group_rank, opts.group_size, opts.timeout, opts.group_id
    )


def register():
    """Registers the backend "tessera" with torch.distributed (for devices cpu and cuda)."""
    dist.Backend.register_backend("tessera", _create, extended_api=True, devices=["cpu", "cuda"])


register()
