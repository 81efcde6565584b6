#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module ctk_config: merge the NVIDIA runtime into Docker's daemon.json, keeping every other key."""

DOCUMENTATION = r"""
---
module: ctk_config
short_description: Register the NVIDIA runtime in Docker's daemon.json by merging, never by replacing the file
description:
  - Reads C(daemon.json), merges in C(runtimes.<runtime_name>) (its C(path) and empty C(args)) the way
    C(nvidia-ctk runtime configure --runtime=docker) does (C(gpufleet.host.cuda.ctk.merge_daemon_json)), optionally
    C(default-runtime) and C(features.cdi), and keeps every other key with its value.
  - The result is deterministic (sorted keys, 4-space indentation, as C(nvidia-ctk) writes it), so a second
    run changes nothing. The merged text is parsed as JSON again before it replaces the file; the old file
    is kept as a timestamped backup beside it.
  - A file that is not a JSON object (invalid JSON, not UTF-8, a list, C(runtimes) that is not an object) is
    never touched; the module fails and says why.
  - It does not restart Docker; notify a handler on C(changed).
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  path:
    description: The Docker daemon configuration file. Created (with its folder) when missing.
    type: path
    default: /etc/docker/daemon.json
  runtime_path:
    description: Path of the runtime binary written under C(runtimes.<runtime_name>.path).
    type: str
    default: /usr/bin/nvidia-container-runtime
  runtime_name:
    description: Name of the runtime entry (C(docker run --runtime=NAME)).
    type: str
    default: nvidia
  set_default:
    description:
      - Also set C(default-runtime) to I(runtime_name). When false an existing C(default-runtime) is left alone.
    type: bool
    default: false
  enable_cdi:
    description: Also set C(features.cdi = true) (Docker 25+ reads CDI specs from C(/etc/cdi)).
    type: bool
    default: false
  backup:
    description: Keep the replaced file as a timestamped backup beside it.
    type: bool
    default: true
  mode:
    description: Mode of a newly created file, octal (C(0644)); an existing file keeps its mode and owner.
    type: str
    default: "0644"
notes:
  - Supports check mode and diff mode. In check mode a file that cannot be merged still fails, so a check run
    can be used to verify the file before anything changes.
seealso:
  - module: gpufleet.fleet.ctk_packages
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
extends_documentation_fragment:
  - gpufleet_attributes
"""

EXAMPLES = r"""
- name: Register the NVIDIA runtime in daemon.json
  ctk_config:
    path: /etc/docker/daemon.json
  notify: docker restart

- name: Make it Docker's default runtime and enable CDI
  ctk_config:
    set_default: true
    enable_cdi: true
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/docker/daemon.json
backup_file:
  description: The backup of the replaced file, when one was made.
  returned: changed and a file existed and backup is true
  type: str
  sample: /etc/docker/daemon.json.12345.2026-01-01@10:00:00~
created:
  description: The file did not exist before.
  returned: always
  type: bool
runtimes:
  description: The C(runtimes) object of the resulting file.
  returned: always
  type: dict
  sample: {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}
kept_keys:
  description: Top-level keys of the old file other than those this module sets, all kept with their values.
  returned: always
  type: list
  elements: str
  sample: [data-root, log-driver, log-opts]
"""

import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.module_utils.gpufleet.host.cuda import ctk

_OWN_KEYS = ("runtimes", "default-runtime", "features")


def _write(module, path, text, created):
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(text))
        with open(tmp, "rb") as handle:  # the bytes on disk parse as a JSON object, or nothing is replaced
            ctk.parse_daemon_json(handle.read())
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if created:
        module.set_mode_if_different(path, module.params["mode"], False)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/docker/daemon.json"),
            runtime_path=dict(type="str", default=ctk.DEFAULT_RUNTIME_PATH),
            runtime_name=dict(type="str", default="nvidia"),
            set_default=dict(type="bool", default=False),
            enable_cdi=dict(type="bool", default=False),
            backup=dict(type="bool", default=True),
            mode=dict(type="str", default="0644"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not re.match(r"^0?[0-7]{3,4}$", p["mode"] or ""):
        module.fail_json(msg="mode %r is not an octal file mode such as 0644: nothing was changed" % p["mode"])
    path = p["path"]
    created = not os.path.exists(path)
    old_text = None
    if not created:
        if not os.path.isfile(path):
            module.fail_json(msg="%s exists and is not a regular file: not touching it" % path, path=path)
        with open(path, "rb") as handle:
            old_text = handle.read()
    try:
        old = ctk.parse_daemon_json(old_text)
        new_text, changed = ctk.merge_daemon_json(old_text, runtime_path=p["runtime_path"],
                                                  set_default=p["set_default"], runtime_name=p["runtime_name"],
                                                  enable_cdi=p["enable_cdi"])
        new = ctk.parse_daemon_json(new_text)
    except ctk.CtkError as exc:
        module.fail_json(msg="%s: %s" % (path, exc), path=path)
    changed = changed or created
    result = dict(changed=changed, path=path, created=created, runtimes=new.get("runtimes", {}),
                  kept_keys=sorted(k for k in old if k not in _OWN_KEYS))
    if module._diff and changed:
        before = old_text.decode("utf-8") if isinstance(old_text, bytes) else (old_text or "")
        result["diff"] = dict(before=before, after=to_native(new_text), before_header=path, after_header=path)
    if changed and not module.check_mode:
        folder = os.path.dirname(path)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        if p["backup"] and not created:
            result["backup_file"] = module.backup_local(path)
        _write(module, path, new_text, created)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
