# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's probes that run in another interpreter: ``TORCH_PROBE`` in the target Python (what torch itself
says about CUDA) and ``CUINIT_PROBE`` (cuInit through libcuda.so.1) in a child, each under a timeout, so a hang
or a crash is evidence, not the doctor's end. ``doctor_probe.gather`` runs them.
"""

import json
import re

# Run in the target interpreter: what torch itself says about CUDA. Prints one JSON object.
TORCH_PROBE = r'''
import json, os, sys, traceback, warnings
out = {"importable": False, "import_error": None, "version": None, "cuda": None, "hip": None,
       "is_available": None, "device_count": None, "arch_list": None, "warning": None, "error": None,
       "cudnn_version": None, "nccl_version": None, "torchrun": None, "executable": sys.executable}
try:
    import torch
except BaseException:
    out["import_error"] = traceback.format_exc()[-4000:]
    print(json.dumps(out))
    sys.exit(0)
out.update(importable=True, version=str(torch.__version__), cuda=torch.version.cuda,
           hip=getattr(torch.version, "hip", None))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        out["is_available"] = bool(torch.cuda.is_available())
        out["device_count"] = int(torch.cuda.device_count())
        out["arch_list"] = list(torch.cuda.get_arch_list())
        if out["is_available"]:
            (torch.ones(4, device="cuda") * 2).sum().item()  # a kernel runs: catches "no kernel image"
    except BaseException:
        out["error"] = traceback.format_exc()[-4000:]
out["warning"] = "\n".join(str(w.message) for w in caught)[-4000:] or None
try:
    out["cudnn_version"] = torch.backends.cudnn.version()
except BaseException:
    pass
try:
    nccl = torch.cuda.nccl.version()
    out["nccl_version"] = ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else str(nccl)
except BaseException:
    pass
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
out["torchrun"] = torchrun if os.path.exists(torchrun) else None
print(json.dumps(out))
'''

# Run in a child: cuInit(0) through libcuda.so.1, and which file that libcuda is.
CUINIT_PROBE = r'''
import ctypes, json
out = {"result": None, "libcuda_path": None, "stub": None, "forward_compat": None, "error": None}
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["error"] = str(exc)
else:
    out["result"] = int(lib.cuInit(0))
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "/libcuda.so" in path:
                out["libcuda_path"] = path
                break
    path = out["libcuda_path"] or ""
    out["stub"] = "/stubs/" in path or out["result"] == 34
    out["forward_compat"] = "/compat/" in path
print(json.dumps(out))
'''


def _json_from(res, what, errors):
    if res is None:
        errors.append("%s: interpreter not found" % what)
        return None
    rc, out, err = res
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else (out or "")
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    err = err.decode("utf-8", "replace") if isinstance(err, bytes) else (err or "")
    why = "timed out" if rc in (124, 137) else "rc=%s" % rc
    errors.append("%s: %s %s" % (what, why, (err.strip() or text.strip())[-500:]))
    return {"crashed": True, "rc": rc, "stderr": err.strip()[-2000:]}


def probe_torch(host, python, env_update, timeout, errors):
    """torch evidence from ``python``, or None when that interpreter or torch is not installed."""
    if not python or not host.exists(python):
        return None, "interpreter %s not found" % python
    res = host.run([python, "-c", TORCH_PROBE], env=env_update, timeout=timeout)
    data = _json_from(res, "torch probe", errors)
    if data is None:
        return None, "torch probe could not run"
    if data.get("crashed"):
        # The interpreter died while importing torch or touching CUDA (a segfault, a hang): that is evidence.
        # timed_out: killed by the timeout (timeout(1)'s 124, or 137 after its -k): `import torch` never returned.
        return {"importable": None, "import_error": None, "version": None, "cuda": None, "is_available": None,
                "timed_out": data.get("rc") in (124, 137), "timeout_s": timeout,
                "error": "torch probe died (%s): %s" % (data.get("rc"), data.get("stderr"))}, None
    import_error = (data.get("import_error") or "").strip()
    if not data.get("importable") and re.search(r"No module named '?torch'?$", import_error):
        return None, "torch is not installed in %s" % python
    return data, None


def probe_cuinit(host, python, env_update, timeout, errors):
    res = host.run([python, "-c", CUINIT_PROBE], env=env_update, timeout=timeout)
    data = _json_from(res, "cuInit probe", errors)
    if data is not None and data.get("crashed"):
        return {"result": None, "libcuda_path": None, "stub": None, "forward_compat": None,
                "error": "cuInit probe died (%s): %s" % (data.get("rc"), data.get("stderr"))}
    return data
