# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the inventory plugins vastai, runpod and lambda_cloud share: listing an account once per parse (an error
is remembered for the 'auto' plugin's second try), adding the selected records to the inventory with their
groups and variables, and the plugins' parse() and verify_file() (``InventoryMixin``).
"""

import re
import time

from .client import NOT_READY_STATES, PROVIDERS, READY, ProviderError, fetch_json, label, scrub, shown_url
from .fleet import groups_of, host_vars, parse, select
from .vastai import vast_fetch_all

# Errors of this process by inventory source: Ansible's 'auto' plugin and the plugin itself both try a
# config file, one right after the other, so a failing provider would be asked twice (and its retries
# waited twice). source identifies one parse of one file (the plugin passes its path and the inventory
# object); an error is reused for that parse only, and for at most FAILED_TTL seconds (a later
# meta: refresh_inventory asks again).
_FAILED = {}
FAILED_TTL = 30.0


def list_hosts(provider, api_url, api_key, timeout=30, retries=3, max_wait=60.0, page_size=25, source=None,
               clock=time.monotonic):
    """Every host record of the account (unfiltered); raises ProviderError with the key scrubbed."""
    memo = (provider, source, api_url)
    if source is not None and memo in _FAILED:
        message, when = _FAILED[memo]
        if clock() - when <= FAILED_TTL:
            raise ProviderError(message)
        del _FAILED[memo]

    def get_json(url):
        return fetch_json(provider, url, api_key, timeout=timeout, retries=retries, max_wait=max_wait)

    try:
        if provider == "vastai":
            return parse(provider, vast_fetch_all(get_json, api_url, page_size), api_url)
        return parse(provider, get_json(api_url), api_url)
    except ProviderError as exc:
        message = scrub(exc, api_key)
    except Exception as exc:  # noqa: BLE001 - never let a message carry the key
        message = scrub("%s: unexpected error while listing hosts: %s: %s" % (label(provider), type(exc).__name__, exc),
                        api_key)
    if source is not None:
        _FAILED[memo] = (message, clock())
    raise ProviderError(message)


def populate(plugin, provider, records, statuses=None, name_regex=None, ready_group="gpufleet_ready", api_url=None):
    """Add the selected records to plugin.inventory (an Ansible inventory plugin with Constructable): groups,
    host variables, then compose/groups/keyed_groups; returns the warnings to show. api_url, when given, is kept
    as gpufleet_provider_api_url (playbooks/return.yml sends its calls there)."""
    name = label(provider)
    try:
        chosen = select(records, statuses, name_regex)
    except re.error as exc:
        raise ProviderError("%s: name_regex %r is not a valid regular expression: %s"
                            % (name, name_regex, exc)) from None
    inventory = plugin.inventory
    for group in (ready_group, PROVIDERS[provider]["group"], "gpufleet_not_ready"):
        inventory.add_group(group)
    for state in NOT_READY_STATES:
        inventory.add_group("gpufleet_%s" % state)
        inventory.add_child("gpufleet_not_ready", "gpufleet_%s" % state)
    strict = plugin.get_option("strict")
    for rec in chosen:
        host = rec["name"]
        inventory.add_host(host)
        for group in groups_of(rec, ready_group):
            inventory.add_host(host, group=group)
        for var, value in host_vars(rec).items():
            inventory.set_variable(host, var, value)
        # What the provider lists beside the GPU (gpufleet_listing_*: disk read MB/s, network Mbit/s, disk GB, whose
        # figures; docs/inventories.md), where the provider's record has it.
        for var, value in sorted((rec.get("listing") or {}).items()):
            inventory.set_variable(host, var, value)
        if api_url:
            inventory.set_variable(host, "gpufleet_provider_api_url", shown_url(api_url))
        hostvars = inventory.get_host(host).get_vars()
        plugin._set_composite_vars(plugin.get_option("compose"), hostvars, host, strict=strict)
        plugin._add_host_to_composed_groups(plugin.get_option("groups"), hostvars, host, strict=strict)
        plugin._add_host_to_keyed_groups(plugin.get_option("keyed_groups"), hostvars, host, strict=strict)
    warnings = []
    if not records:
        warnings.append("%s: the account has no instances; the inventory is empty." % name)
    elif not chosen:
        warnings.append("%s: %d instance(s) listed, none matches statuses/name_regex; the inventory is empty."
                        % (name, len(records)))
    not_ready = [r for r in chosen if r["state"] != READY]
    if not_ready:
        warnings.append("%s: %d host(s) not ready, kept out of %s (group gpufleet_not_ready): %s" % (
            name, len(not_ready), ready_group,
            "; ".join("%s %s: %s" % (r["name"], r["state"], r["reason"]) for r in not_ready[:10])
            + (" ..." if len(not_ready) > 10 else "")))
    return warnings


class InventoryMixin:
    """parse() and verify_file() of the three inventory plugins (vastai, runpod, lambda_cloud), before Ansible's
    BaseInventoryPlugin, Constructable and Cacheable in the plugin's bases. The plugin class names NAME, PROVIDER,
    FILE_SUFFIXES and ERROR (AnsibleParserError: this module imports nothing of Ansible's)."""

    NAME = PROVIDER = ERROR = None
    FILE_SUFFIXES = ()

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(tuple(self.FILE_SUFFIXES))

    def _api_key(self):
        key = self.get_option("api_key")
        if key is not None and self.templar.is_template(key):
            key = self.templar.template(key)
        return str(key).strip() if key else ""

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update_cache = self.get_option("cache") and not cache
        records = None
        if use_cache:
            try:
                records = self._cache[cache_key]
            except KeyError:
                update_cache = True
        try:
            if records is None:
                records = list_hosts(
                    self.PROVIDER, self.get_option("api_url"), self._api_key(), timeout=self.get_option("timeout"),
                    retries=self.get_option("retries"), max_wait=float(self.get_option("retry_max_wait")),
                    page_size=self.get_option("page_size") if "page_size" in self._options else 25,
                    source=(path, id(getattr(inventory, "__wrapped__", inventory))))  # one parse of this file
            if update_cache:  # host records only: no API key, no tokens, no raw answer
                self._cache[cache_key] = records
            warnings = populate(self, self.PROVIDER, records, self.get_option("statuses"),
                                self.get_option("name_regex"), self.get_option("ready_group"),
                                api_url=self.get_option("api_url"))
        except ProviderError as exc:
            raise self.ERROR(str(exc)) from None
        for warning in warnings:
            self.display.warning(warning)
