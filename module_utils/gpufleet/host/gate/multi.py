# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark gate's multi-GPU tests: P2P copies, the NCCL all-reduce (one process, one tensor per GPU) and
its cpu-mode stand-in, a gloo all-reduce between two processes on 127.0.0.1, with the entries ``gate_bench.run``
records for them.
"""

import json
import os
import socket
import subprocess
import sys
import time

from . import rules as gate
from .measure import _repeat, _sizes, _Timer, telemetry


def _p2p(torch, src_i, dst_i, size, params, share_s, probe=None, budget=None):
    nbytes = size["buffer_mib"] * 2 ** 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", src_i)).fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", dst_i))
    details = {"size": "%d MiB" % size["buffer_mib"], "peer": dst_i,
               "peer_access": bool(torch.cuda.can_device_access_peer(src_i, dst_i))}
    wall = _Timer(torch, "cuda", events=False)
    figures = _repeat(wall, lambda: dst.copy_(src), (src_i, dst_i), float(nbytes), 1e9, params, share_s, probe, budget)
    return figures, details


def _allreduce(torch, count, size, params, share_s, budget=None):
    from torch.cuda import nccl  # single process, one tensor per GPU

    n = size["buffer_mib"] * 2 ** 20 // 4
    tensors = [torch.ones(n, device=torch.device("cuda", i)) for i in range(count)]
    work = gate.allreduce_bus_bytes(n * 4, count)
    wall = _Timer(torch, "cuda", events=False)
    figures = _repeat(wall, lambda: nccl.all_reduce(tensors), tuple(range(count)), work, 1e9, params, share_s,
                      budget=budget)
    return figures, {"size": "%d MiB float32 per GPU" % size["buffer_mib"], "gpus": count, "scope": "host",
                     "backend": "nccl", "bus_bytes": work}


# The cpu mode's stand-in for NCCL: one of two processes in a gloo all-reduce over 127.0.0.1. Rank 0
# decides when to stop (repetitions or share spent) and tells rank 1, so both leave the loop together.
# Wall time: an all-reduce is mostly waiting for the other rank, which thread CPU time would not count.
_GLOO_CHILD = r"""
import json, sys, time
import torch
import torch.distributed as dist
rank, port, n, warmup, reps, share = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                      int(sys.argv[5]), float(sys.argv[6]))
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
t = torch.ones(n)
dist.all_reduce(t)
if float(t[0]) != 2.0 or float(t[-1]) != 2.0:
    raise SystemExit("all-reduce returned %r, expected 2.0" % float(t[0]))
for _ in range(warmup):
    dist.all_reduce(t)
seconds, started = [], time.monotonic()
while True:
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    seconds.append(time.perf_counter() - t0)
    stop = torch.tensor([int(len(seconds) >= reps or (len(seconds) >= 3 and time.monotonic() - started > share))])
    dist.broadcast(stop, 0)
    if int(stop[0]):
        break
dist.destroy_process_group()
print(json.dumps({"rank": rank, "seconds": seconds}))
"""


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _allreduce_gloo(size, params, share_s, timeout_s, python=None):
    """(figures, details): the gloo all-reduce between two processes; busbw through allreduce_bus_bytes."""
    n = size["allreduce_mib"] * 2 ** 20 // 4
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    argv = [python or sys.executable, "-c", _GLOO_CHILD]
    args = [str(port), str(n), str(params["warmup"]), str(params["repetitions"]), "%.3f" % share_s]
    # two ranks at once, each killed on the budget: run_command runs one command to its end
    procs = [subprocess.Popen(argv + [str(rank)] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                              env=env, text=True) for rank in (0, 1)]
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=max(1.0, timeout_s)))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise RuntimeError("the gloo all-reduce did not finish within the %.1f s the budget left" % timeout_s) from None
    for proc, (_unused, err) in zip(procs, outs):
        if proc.returncode != 0:
            raise RuntimeError("gloo rank exited %s: %s" % (proc.returncode, (err.strip().splitlines() or [""])[-1]))
    seconds = json.loads(outs[0][0].strip().splitlines()[-1])["seconds"]
    work = gate.allreduce_bus_bytes(n * 4, 2)
    figures = [work / sec / 1e9 for sec in seconds if sec > 0]
    return figures, {"size": "%d MiB float32 per process" % size["allreduce_mib"], "gpus": 2, "scope": "host",
                     "backend": "gloo (2 processes on 127.0.0.1, stands in for NCCL)", "bus_bytes": work,
                     "seconds": [round(sec, 6) for sec in seconds]}


def _allreduce_entries(torch, device, gpus, count, params, share, budget, reserved, pynvml, handles):
    t0 = time.monotonic()
    try:
        if device == "cpu":
            size = _sizes(torch, device, 0, params)
            figures, details = _allreduce_gloo(size, params, share, budget.left() - reserved)
        else:
            size = min((_sizes(torch, device, i, params) for i in gpus), key=lambda s: s["buffer_mib"])
            figures, details = _allreduce(torch, count, size, params, share * count, budget)
        error = None
    except Exception as exc:
        figures, details, error = [], {}, "nccl_allreduce failed: %s: %s" % (type(exc).__name__, str(exc)[:300])
    out = []
    for i in sorted(gpus):
        entry = {"index": i, "test": "nccl_allreduce", "device": gpus[i]["name"], "mode": device,
                 "figures": list(figures), "duration_s": round(time.monotonic() - t0, 3)}
        entry.update(details)
        if error:
            entry["error"] = error
        entry.update(telemetry(pynvml, handles.get(i)))
        out.append(entry)
    return out
