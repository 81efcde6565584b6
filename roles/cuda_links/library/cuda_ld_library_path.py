#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module cuda_ld_library_path: remove given directories from LD_LIBRARY_PATH / PATH assignments in a file."""

DOCUMENTATION = r"""
---
module: cuda_ld_library_path
short_description: Remove directories from the LD_LIBRARY_PATH or PATH assignments of one shell or pam_env file
description:
  - Rewrites every line of I(path) that assigns I(variable) (C(LD_LIBRARY_PATH=...),
    C(export LD_LIBRARY_PATH=...), C(declare -x LD_LIBRARY_PATH=...)) without the directories in I(remove).
    Other entries, the inherited C($LD_LIBRARY_PATH) and C(${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}) are kept.
  - With I(substitute), the first removed entry of a line is replaced by that directory (unless the line
    already names it), so C(PATH=/usr/local/cuda-11.8/bin:$PATH) becomes C(PATH=/usr/local/cuda/bin:$PATH).
  - A line left assigning nothing but the inherited value is disabled - commented out in pam_env files
    (C(/etc/environment)), replaced by the no-op C(:) and a comment in shell files so that an C(if) body
    stays valid. Shell files are checked with C(sh -n) before they replace the old one.
  - Part of the C(cuda_links) role, which saves the file before calling this module.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  path:
    description: File to edit.
    type: path
    required: true
  remove:
    description: Directories to take out of LD_LIBRARY_PATH (compared without a trailing slash).
    type: list
    elements: str
    required: true
  variable:
    description: The variable whose assignments are edited.
    type: str
    choices: [LD_LIBRARY_PATH, PATH]
    default: LD_LIBRARY_PATH
  substitute:
    description: Directory put where the first removed entry of a line was (see above).
    type: str
  syntax:
    description: C(pam_env) for /etc/environment, C(shell) for profile scripts; C(auto) decides from I(path).
    type: str
    choices: [auto, shell, pam_env]
    default: auto
notes:
  - Supports check mode and diff mode. A missing file is not an error (nothing to remove).
extends_documentation_fragment:
  - gpufleet_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Take CUDA 11.8 out of the global LD_LIBRARY_PATH
  cuda_ld_library_path:
    path: /etc/profile.d/cuda.sh
    remove: [/usr/local/cuda-11.8/lib64]

- name: Let nvcc on PATH follow /usr/local/cuda instead of CUDA 11.8
  cuda_ld_library_path:
    path: /etc/profile.d/cuda.sh
    variable: PATH
    remove: [/usr/local/cuda-11.8/bin]
    substitute: /usr/local/cuda/bin
"""

RETURN = r"""
removed:
  description: The entries removed, with the line they were on.
  returned: always
  type: list
  elements: dict
  sample: [{line: 2, path: /usr/local/cuda-11.8/lib64}]
disabled_lines:
  description: Line numbers disabled because they assigned nothing but the inherited value any more.
  returned: always
  type: list
  elements: int
"""

# Ansible module anatomy: the documentation strings come first (library/*.py have E402 ignored in pyproject.toml).
import os  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

MARKS = {
    "LD_LIBRARY_PATH": "disabled by gpufleet cuda_links: system CUDA on a global LD_LIBRARY_PATH shadows pip's CUDA "
                       "libraries",
    "PATH": "disabled by gpufleet cuda_links: it put another CUDA toolkit's bin on PATH",
}
_PATTERNS = {}


def patterns(variable):
    """(assignment, inherited-append, inherited) regexes for ``variable``."""
    if variable not in _PATTERNS:
        v = re.escape(variable)
        _PATTERNS[variable] = (
            re.compile(r"^(\s*)((?:export\s+|declare\s+-x\s+)?%s=)(.*?)(\s*(?:[;#].*)?)$" % v),
            re.compile(r"\$\{%s:\+:?\$\{?%s\}?\}" % (v, v)),
            re.compile(r"^\$\{?%s(?::[+-][^}]*)?\}?$" % v))
    return _PATTERNS[variable]


APPEND_RE = patterns("LD_LIBRARY_PATH")[1]


def _split(value, append_re=APPEND_RE):
    """'A:B${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}' -> [('dir', 'A'), ('dir', 'B'), ('append', '${...}')]."""
    tokens, pos = [], 0
    for m in append_re.finditer(value):
        tokens.extend(("dir", t) for t in value[pos:m.start()].split(":") if t)
        tokens.append(("append", m.group(0)))
        pos = m.end()
    tokens.extend(("dir", t) for t in value[pos:].split(":") if t)
    return tokens


def _join(tokens):
    out = ""
    for kind, text in tokens:
        if kind == "append":
            out += text
        else:
            out += (":" if out else "") + text
    return out


def rewrite_line(line, remove, syntax, variable="LD_LIBRARY_PATH", substitute=None):
    """(new line, removed dirs, disabled) for one line; the line unchanged when it assigns no removed dir."""
    assign_re, append_re, inherited_re = patterns(variable)
    m = assign_re.match(line)
    if not m or line.lstrip().startswith("#"):
        return line, [], False
    indent, lhs, raw, tail = m.groups()
    quote = raw[0] if raw[:1] in ("'", '"') and raw[-1:] == raw[:1] and len(raw) >= 2 else ""
    value = raw[1:-1] if quote else raw
    wanted = {r.rstrip("/") or "/" for r in remove}
    tokens = _split(value, append_re)
    gone = [t for t in tokens if t[0] == "dir" and (t[1].rstrip("/") or "/") in wanted]
    if not gone:
        return line, [], False
    have = {t[1].rstrip("/") for t in tokens if t[0] == "dir"}
    kept = []
    for t in tokens:
        if t is gone[0] and substitute and substitute.rstrip("/") not in have:
            kept.append(("dir", substitute))
        elif t not in gone:
            kept.append(t)
    removed = [t[1] for t in gone]
    if all(k == "append" or inherited_re.match(t) for k, t in kept):
        mark = MARKS[variable]
        if syntax == "pam_env":
            return "# %s  # %s" % (line.strip(), mark), removed, True
        return "%s: # %s; was: %s" % (indent, mark, line.strip()), removed, True
    kept_value = _join(kept)
    return "%s%s%s%s%s%s" % (indent, lhs, quote, kept_value, quote, tail), removed, False


def rewrite(text, remove, syntax, variable="LD_LIBRARY_PATH", substitute=None):
    lines = text.split("\n")
    removed, disabled = [], []
    for i, line in enumerate(lines):
        new, gone, off = rewrite_line(line, remove, syntax, variable, substitute)
        lines[i] = new
        removed.extend({"line": i + 1, "path": p} for p in gone)
        if off:
            disabled.append(i + 1)
    return "\n".join(lines), removed, disabled


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            remove=dict(type="list", elements="str", required=True),
            variable=dict(type="str", choices=sorted(MARKS), default="LD_LIBRARY_PATH"),
            substitute=dict(type="str"),
            syntax=dict(type="str", choices=["auto", "shell", "pam_env"], default="auto"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    syntax = module.params["syntax"]
    if syntax == "auto":
        syntax = "pam_env" if path == "/etc/environment" else "shell"
    if not os.path.isfile(path):
        module.exit_json(changed=False, removed=[], disabled_lines=[], msg="%s does not exist" % path)
    with open(path, "rb") as fh:
        before = fh.read().decode("utf-8", "surrogateescape")
    after, removed, disabled = rewrite(before, module.params["remove"], syntax, module.params["variable"],
                                       module.params["substitute"])
    changed = after != before
    result = dict(changed=changed, removed=removed, disabled_lines=disabled)
    if module._diff:
        result["diff"] = {"before": before, "after": after, "before_header": path, "after_header": path}
    if changed and not module.check_mode:
        fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as fh:
            fh.write(after.encode("utf-8", "surrogateescape"))
        if syntax == "shell":
            rc, _out, err = module.run_command(["sh", "-n", tmp])
            if rc != 0:
                os.unlink(tmp)
                module.fail_json(msg="%s would not parse after the edit (sh -n: %s); left unchanged"
                                 % (path, err.strip()), **result)
        module.atomic_move(tmp, path)  # keeps the old file's mode, owner and SELinux context
    module.exit_json(**result)


if __name__ == "__main__":
    main()
