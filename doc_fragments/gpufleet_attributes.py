# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The module attributes gpufleet's modules share: one text, not a copy of it in every module.

A module names the parts that apply to it, in this order:

  extends_documentation_fragment:
    - gpufleet_attributes               # what check_mode and diff_mode mean
    - gpufleet_attributes.facts         # what the facts attribute means
    - gpufleet_attributes.read_only     # the support of a module that only reads: check mode full, no diff
    - gpufleet_attributes.facts_module  # and its support of facts, where it returns them

and a module that changes things sets its own ``attributes: {check_mode: {support: ...}, diff_mode: ...}``.
In the checkout the short name resolves through ansible.cfg's doc_fragment_plugins; scripts/build-collection
writes it as gpufleet.fleet.gpufleet_attributes in the collection.
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run with C(--check) and then reports what it would change without changing the host.
  diff_mode:
    description: Returns what it changed (or would change under C(--check)) when run with C(--diff).
"""

    FACTS = r"""
options: {}
attributes:
  facts:
    description: Returns an C(ansible_facts) dictionary that is merged into the host's facts.
"""

    # A module that only reads (or measures, as box_probe): check mode full, no diff.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - The module only reads (or measures); it does the same work under C(--check).
  diff_mode:
    support: none
"""

    # With READ_ONLY, for a module that returns facts.
    FACTS_MODULE = r"""
options: {}
attributes:
  facts:
    support: full
"""
