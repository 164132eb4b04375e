#!/usr/bin/env bash
# torch loads tessera's libnccl.so.2 with LD_PRELOAD (its RPATH into the nvidia-nccl wheel cannot
# be redirected with LD_LIBRARY_PATH) and its NCCL calls reach the shim:
#   check_torch_preload.sh LIBNCCL PYTHON EXPECTED_VERSION_CODE
# torch also maps the wheel's libnccl.so.2 (torch/__init__.py preloads it by path, RTLD_LOCAL),
# but symbol lookup finds the preloaded library first. torch.cuda.nccl.version() is the header
# torch was compiled with, not a call; torch.cuda.nccl.unique_id() calls ncclGetUniqueId, whose
# bytes say whose id it is (tessera's start with "TSRI").
set -euo pipefail
lib=$1 python=$2 want=$3
out=$(LD_PRELOAD="$lib" NCCL_DEBUG=VERSION "$python" -c '
import ctypes, torch, torch.distributed as dist
uid = torch.cuda.nccl.unique_id()
v = ctypes.c_int()
rc = ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
print("torch", torch.__version__, "distributed", dist.is_available(), "ncclGetVersion", rc, v.value,
      "unique id", len(uid), "bytes, magic", uid[:4])
' 2>&1)
echo "$out"
grep -q "tessera's NCCL drop-in" <<<"$out" || { echo "FAIL: the shim's banner is missing: torch did not call it"; exit 1; }
grep -q "ncclGetVersion 0 $want " <<<"$out" || { echo "FAIL: ncclGetVersion did not return $want"; exit 1; }
grep -q "magic b'TSRI'" <<<"$out" || { echo "FAIL: torch.cuda.nccl.unique_id() is not tessera's"; exit 1; }
echo "torch preload: OK"
