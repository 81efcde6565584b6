# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Options the three provider inventory plugins (vastai, runpod, lambda_cloud) share: one text for all three."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds to wait for one HTTP answer.
    type: int
    default: 30
  retries:
    description:
      - Retries of one request after HTTP 429, a 5xx answer or a timeout.
      - Waits C(Retry-After) when the provider sends it, else 1, 2, 4... seconds, at most O(retry_max_wait).
    type: int
    default: 3
  retry_max_wait:
    description: The longest wait before one retry, in seconds.
    type: int
    default: 60
  ready_group:
    description: The group of the hosts playbooks should run on.
    type: str
    default: gpufleet_ready
"""
