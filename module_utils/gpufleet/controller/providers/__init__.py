# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rented GPU hosts as the providers list them: API responses in, inventory host records out.

The logic behind the inventory plugins ``vastai``, ``runpod`` and ``lambda_cloud``
(inventory_plugins/): fetch the provider's JSON (bounded retries, clear errors), parse each
instance into a host record (SSH endpoint resolved the way the provider's own client does it,
price, claimed GPUs, status) and judge its readiness. Plain Python (>= 3.8, stdlib only).

Layout: ``client`` is the shared client (HTTP with retries and rate limits, errors, type checks, the common host
record); ``vastai``, ``runpod`` and ``lambda_cloud`` parse one provider's answer each (their sources are in their
docstrings); ``fleet`` parses, selects and describes records of any provider and says how to give a box back;
``inventory`` is what the three inventory plugins share. This file names what callers use (``providers.<name>``).

Readiness: the provider says running AND there is an SSH endpoint that carries exec and file transfer.
Every other listed host is kept, in a state that says why it is not ready (``provisioning``, ``failed``,
``proxy_only``, ``stopped``), so a paid-for box nobody can reach is never silently dropped.

The API key is only ever put in the Authorization header: no message, record or exception carries it
(``scrub`` removes it from any provider text that is quoted).
"""

from .client import (
    GONE_STATUSES,
    MAX_PAGES,
    NOT_READY_STATES,
    PROVIDERS,
    READY,
    RETRY_STATUSES,
    STATES,
    ProviderDataError,
    ProviderError,
    backoff_seconds,
    fetch_json,
    label,
    parse_json,
    retry_after_seconds,
    safe_name,
    scrub,
    shown_url,
)
from .fleet import (
    groups_of,
    host_vars,
    parse,
    return_action,
    return_requests,
    select,
)
from .inventory import (
    _FAILED,
    FAILED_TTL,
    InventoryMixin,
    list_hosts,
    populate,
)
from .lambda_cloud import (
    lambda_names,
    lambda_record,
)
from .runpod import (
    runpod_record,
    runpod_ssh,
)
from .vastai import (
    VAST_PAGE_ORDER,
    vast_fetch_all,
    vast_page,
    vast_page_url,
    vast_record,
    vast_ssh,
)

# The names callers use as providers.<name> (inventory_plugins, provider_return, the report, tests).
__all__ = [
    "READY", "STATES", "NOT_READY_STATES", "PROVIDERS", "GONE_STATUSES", "RETRY_STATUSES", "MAX_PAGES",
    "ProviderError", "ProviderDataError", "label", "scrub", "retry_after_seconds", "backoff_seconds", "shown_url",
    "fetch_json", "parse_json", "safe_name", "parse", "select", "host_vars", "groups_of", "return_action",
    "return_requests", "FAILED_TTL", "InventoryMixin", "_FAILED", "list_hosts", "populate", "lambda_names",
    "lambda_record", "runpod_record", "runpod_ssh", "VAST_PAGE_ORDER", "vast_fetch_all", "vast_page", "vast_page_url",
    "vast_record", "vast_ssh"
]
