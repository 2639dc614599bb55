"""Which uid layouts let a CUDA IPC handle made by one process be opened by another (issue 26, H200).

The verifier's judge shares its input and output buffers with the two runners through CUDA IPC. Run as root on a
GPU host: `python3 benchmarks/cuda_ipc_uid.py`. On the H200 (2026-12-02) every layout within one uid opened the
buffer, dumpable or not, and two uids failed (cudaErrorMapBufferObjectFailed): hence one uid per evaluation.
"""

import ctypes
import glob
import json
import os
import pickle
import select
import stat

import torch
from torch.multiprocessing.reductions import reduce_tensor

PR_SET_DUMPABLE = 4
libc = ctypes.CDLL(None, use_errno=True)


def become(uid, nondump):
    if uid is not None:
        groups = sorted({os.stat(n).st_gid for n in glob.glob("/dev/nvidia*")})
        os.setgroups(groups)
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if nondump:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def trial(exp_uid, exp_nd, imp_uid, imp_nd):
    data_r, data_w = os.pipe()
    done_r, done_w = os.pipe()
    res_r, res_w = os.pipe()
    e = os.fork()
    if e == 0:
        try:
            become(exp_uid, exp_nd)
            t = torch.full((1 << 20,), 7.0, device="cuda")
            torch.cuda.synchronize()
            os.write(data_w, pickle.dumps(reduce_tensor(t)) + b"\n")
        except Exception as ex:
            os.write(data_w, b"ERR " + repr(ex).encode()[:200] + b"\n")
        os.read(done_r, 1)
        os._exit(0)
    i = os.fork()
    if i == 0:
        try:
            become(imp_uid, imp_nd)
            raw = b""
            while not raw.endswith(b"\n"):
                raw += os.read(data_r, 1 << 16)
            if raw.startswith(b"ERR"):
                msg = "exporter " + raw.decode()
            else:
                fn, args = pickle.loads(raw[:-1])
                t = fn(*args)
                msg = f"ok sum={t.sum().item()}"
        except Exception as ex:
            msg = "importer " + repr(ex)[:300]
        os.write(res_w, msg.encode())
        os._exit(0)
    os.close(res_w)
    out = b""
    if select.select([res_r], [], [], 60)[0]:
        out = os.read(res_r, 4096)
    os.write(done_w, b"x")
    for p in (e, i):
        try:
            os.waitpid(p, 0)
        except ChildProcessError:
            pass
    return out.decode() or "no answer (importer died or hung)"


U = 0x7E000000 + 4242
cases = {
    "root->root": (None, False, None, False),
    "U->U": (U, False, U, False),
    "U(nondumpable)->U": (U, True, U, False),
    "U->U(nondumpable)": (U, False, U, True),
    "U(nd)->U(nd)": (U, True, U, True),
    "U->V (two uids)": (U, False, U + 1, False),
}
print(
    "device nodes:", [(n, stat.filemode(os.stat(n).st_mode), os.stat(n).st_gid) for n in glob.glob("/dev/nvidia*")][:6]
)
res = {name: trial(*c) for name, c in cases.items()}
print(json.dumps(res, indent=1))
