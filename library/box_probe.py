#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module box_probe: the disk and network the renter pays for, measured in seconds."""

DOCUMENTATION = r"""
---
module: box_probe
short_description: Measure the data disk and the network of a rented box in a few seconds, installing nothing
description:
  - Disk - finds the file system that holds I(data_path) (C(/proc/self/mountinfo), the longest mount point that
    contains it) and its free and total bytes, then writes a temporary file of its own there (at most I(disk_bytes),
    removed at the end whatever happens) - a sequential write and read with C(O_DIRECT), and random 32 KiB reads
    from 8 threads, each test stopped at I(disk_seconds). Where C(O_DIRECT) is refused (FUSE, tmpfs before Linux
    6.6) it writes buffered and times each block with C(fdatasync), and reads after C(POSIX_FADV_DONTNEED); it says
    which method it used. The page cache is never measured.
  - torch's files - with I(python), asks that interpreter where its torch package lies (without importing torch)
    and times the open and read of up to 2,000 of its C(.py) and C(.so) files, the small-file cost of
    C(import torch) (slow on network file systems).
  - Network - times C(getaddrinfo) for I(dns_names), each abandoned at I(dns_timeout_s); downloads one stream of
    I(download_url) until I(download_max_bytes) or I(download_max_s); with I(upload_url), uploads one body the same
    way. Proxies are the environment's. A transfer that fails has an error text and a null rate, never 0.
  - Returns C(box) (docs/box-probe.md). MB is 10^6 bytes. URLs in the result carry no credentials and no query;
    I(download_url) and I(upload_url) are C(no_log) where they carry either. Credentials in a URL are sent to its own
    scheme, host and port only, never on to where a redirect points.
  - Changes nothing on the host but for the temporary file, which it removes; one it could not remove is listed in
    C(box.left_behind).
version_added: "1.2.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  data_path:
    description:
      - Absolute path of the folder whose disk is measured, where the renter's data goes. Default, C(/workspace)
        when it is a folder, else the home of the SSH user (C(SUDO_USER) when the module runs through sudo).
    type: path
  python:
    description: The renter's interpreter; its torch package's files are timed. Unset, that test is skipped.
    type: path
  disk_bytes:
    description: Bytes of the temporary file (rounded up to 4 KiB). The test needs twice as much free space.
    type: int
    default: 67108864
  disk_seconds:
    description:
      - Seconds each disk test may run (write, read, random read, torch's files); less data is used then.
      - Also the limit of I(python)'s answer to where its torch lies (killed past it, the error said).
    type: float
    default: 3
  download_url:
    description:
      - An http or https URL of a large file; only its first I(download_max_bytes) are read. Default, torch's CUDA
        wheel on C(download.pytorch.org), a file the renter fetches anyway. An empty string skips the download.
      - C(no_log) when it carries credentials or a query (a signed URL); a plain URL is shown as given.
    type: str
  download_max_bytes:
    description: Bytes the download (and the upload) reads or sends at most.
    type: int
    default: 50000000
  download_max_s:
    description: Seconds the download (and the upload) may take, connection included.
    type: float
    default: 5
  upload_url:
    description: An http or https URL that accepts an upload (a presigned URL of the renter's bucket). Unset, no upload.
    type: str
  upload_method:
    description: HTTP method of the upload.
    type: str
    choices: [POST, PUT]
    default: POST
  dns_names:
    description: Names looked up with C(getaddrinfo), at the same time. An empty list skips the lookups.
    type: list
    elements: str
    default: [huggingface.co, download.pytorch.org, pypi.org]
  dns_timeout_s:
    description: Seconds a lookup may take before it is abandoned.
    type: float
    default: 3
notes:
  - Supports check mode; the module does the same under C(--check) (its temporary file is removed either way).
  - Plain Python 3.8 or later, standard library only; no package is installed and no command but I(python) is run.
  - On vast.ai the download is billed at the host's C(inet_down_cost).
seealso:
  - name: docs/box-probe.md
    description: What is measured, how, its units, limits and sources.
    link: https://github.com/gpufleet/gpufleet/blob/main/docs/box-probe.md
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.read_only
"""

EXAMPLES = r"""
- name: Measure the disk and the network the renter pays for
  box_probe:
    python: "{{ __check_found.torch | default(omit, true) }}"
  register: __box

- name: Say the disk and download rates
  ansible.builtin.debug:
    msg: "{{ __box.box.fstype }} {{ __box.box.disk.write_mb_s }} MB/s write, {{ __box.box.download.mb_s }} MB/s down"

- name: Measure a volume, no download, with an upload to one's own bucket
  box_probe:
    data_path: /data
    download_url: ""
    upload_url: "{{ presigned_put_url }}"
    upload_method: PUT
"""

RETURN = r"""
box:
  description: What was measured (docs/box-probe.md). Rates are MB/s (10^6 bytes); null when not measured.
  returned: always
  type: dict
  contains:
    data_path:
      description: The folder measured.
      type: str
      sample: /workspace
    data_path_source:
      description: Where I(data_path) came from - C(workspace), C(home) or C(variable) (given).
      type: str
    fstype:
      description: File system type from C(/proc/self/mountinfo) (overlay, ext4, xfs, fuse.mfs, nfs4, virtiofs, tmpfs).
      type: str
    mount_point:
      description: The mount point that holds I(data_path).
      type: str
    free_bytes:
      description: Bytes free to an unprivileged user (statvfs); on overlay or MooseFS often the whole host or cluster.
      type: int
    total_bytes:
      description: Size of that file system in bytes (statvfs).
      type: int
    disk:
      description:
        - method (C(O_DIRECT) or C(fdatasync)), why_method, bytes written, write_mb_s, read_mb_s, rand_read_mb_s,
          rand_block_kib, rand_threads, seconds (write, read, rand), error.
      type: dict
    torch_files:
      description:
        - Null without I(python). path, files (opened), listed, list_s, total_s, p90_ms (open and read of one file),
          missing_p90_ms (stat of a missing name), fstype, error.
      type: dict
    dns:
      description: One per name - name, ms, ok, error.
      type: list
      elements: dict
    download:
      description:
        - Null when skipped. url (no credentials, no query), host, bytes, seconds (the body's), start_s (to the
          response headers), mb_s, streams (1), status (HTTP), stopped_by (bytes, time, end), error.
      type: dict
    upload:
      description: Null without I(upload_url); else as C(download) (seconds from the first byte sent to the answer).
      type: dict
    left_behind:
      description: Paths the module created and could not remove; empty normally.
      type: list
      elements: str
    duration_s:
      description: Seconds the module took.
      type: float
"""

import os
import pwd
import time
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.host.box import disk as boxdisk
from ansible.module_utils.gpufleet.host.box import net as boxnet
from ansible.module_utils.gpufleet.host.system import hostctx

WORKSPACE = "/workspace"  # vast's and RunPod's data folder (renter-disk-network.md, "Where the renter's data lives")
MOUNTINFO = "/proc/self/mountinfo"


def _home():
    user = os.environ.get("SUDO_USER")
    if user:
        try:
            return pwd.getpwnam(user).pw_dir
        except KeyError:
            pass
    return os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir  # what ~ means for the login user


def choose_data_path(given):
    """(path, source): the given path ("variable"), else /workspace when it is a folder, else the SSH user's home."""
    if given:
        return given, "variable"
    if os.path.isdir(WORKSPACE):
        return WORKSPACE, "workspace"
    return _home(), "home"


def problems(p):
    """What is wrong with the parameters, before anything is written."""
    bad = []
    if p["data_path"] and not os.path.isabs(p["data_path"]):
        bad.append("data_path must be absolute, got %s" % p["data_path"])
    if p["disk_bytes"] < 4096 or p["disk_bytes"] > 16 * 1024 ** 3:
        bad.append("disk_bytes must be from 4096 to 16 GiB, got %s" % p["disk_bytes"])
    for name, top in (("disk_seconds", 60), ("download_max_s", 120), ("dns_timeout_s", 30)):
        if not 0 < p[name] <= top:
            bad.append("%s must be above 0 and at most %s, got %s" % (name, top, p[name]))
    if p["download_max_bytes"] <= 0:
        bad.append("download_max_bytes must be above 0, got %s" % p["download_max_bytes"])
    for name in ("download_url", "upload_url"):
        why = boxnet.check_url(p[name]) if p[name] else None
        if why:
            bad.append("%s: %s" % (name, why))
    return bad


def probe(p, run, left_behind):
    path, source = choose_data_path(p["data_path"])
    path = os.path.realpath(path)
    mountinfo = hostctx.read_limited(MOUNTINFO, 4 * 1024 * 1024) or ""
    box = {"data_path": path, "data_path_source": source}
    box.update(boxdisk.where(path, mountinfo))
    box["disk"] = boxdisk.measure(path, p["disk_bytes"], p["disk_seconds"], left_behind=left_behind,
                                  free_bytes=box["free_bytes"])
    box["torch_files"] = None
    if p["python"]:
        where, error = boxdisk.torch_dir(run, p["python"], timeout=p["disk_seconds"])
        if where:
            box["torch_files"] = boxdisk.torch_files(where, cap=p["disk_seconds"])
            box["torch_files"]["fstype"] = boxdisk.where(where, mountinfo)["fstype"]
        else:
            box["torch_files"] = boxdisk.torch_record(error=error)
    box["dns"] = boxnet.resolve(list(p["dns_names"]), p["dns_timeout_s"])
    url = boxnet.DEFAULT_DOWNLOAD_URL if p["download_url"] is None else p["download_url"]
    box["download"] = boxnet.download(url, p["download_max_bytes"], p["download_max_s"]) if url else None
    box["upload"] = None
    if p["upload_url"]:
        box["upload"] = boxnet.upload(p["upload_url"], p["download_max_bytes"], p["download_max_s"],
                                      method=p["upload_method"])
    return box


def main():
    module = AnsibleModule(
        argument_spec=dict(
            data_path=dict(type="path"),
            python=dict(type="path"),
            disk_bytes=dict(type="int", default=64 * 1024 * 1024),
            disk_seconds=dict(type="float", default=3),
            download_url=dict(type="str", no_log=True),
            download_max_bytes=dict(type="int", default=50000000),
            download_max_s=dict(type="float", default=5),
            upload_url=dict(type="str", no_log=True),
            upload_method=dict(type="str", choices=["POST", "PUT"], default="POST"),
            dns_names=dict(type="list", elements="str", default=list(boxnet.DEFAULT_DNS_NAMES)),
            dns_timeout_s=dict(type="float", default=3),
        ),
        supports_check_mode=True,
    )
    for name in ("download_url", "upload_url"):
        url = module.params[name]
        if url and not boxnet.has_secret(url):  # nothing to hide: the record's url and the invocation say it whole
            module.no_log_values.discard(url)
    bad = problems(module.params)
    if bad:
        module.fail_json(msg="box_probe: %s. Nothing was written." % "; ".join(bad))
    start = time.monotonic()
    left_behind = []
    run = hostctx.command_runner(timeout=30)
    try:
        box = probe(module.params, run, left_behind)
    except Exception:
        module.fail_json(msg="box_probe failed (a bug, please report it)", exception=traceback.format_exc(),
                         left_behind=left_behind)
    box["left_behind"] = left_behind
    box["duration_s"] = round(time.monotonic() - start, 3)
    module.exit_json(changed=False, box=box)


if __name__ == "__main__":
    main()
