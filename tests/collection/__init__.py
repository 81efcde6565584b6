"""What the collection tests (tests/unit/test_collection.py, tests/e2e/test_collection_fqcn.py) share."""

import os
from pathlib import Path


def empty_config(collections):
    """An ansible.cfg with nothing in it, beside the collections: Ansible's defaults, none of the checkout's."""
    path = Path(collections) / "ansible.cfg"
    if not path.exists():
        path.write_text("# empty on purpose: Ansible's defaults, not the checkout's ansible.cfg\n[defaults]\n")
    return path


def ansible_env(collections, **extra):
    """An Ansible that knows nothing of the checkout (no ansible.cfg, so no library/, roles_path or plugin paths),
    with only the collections under `collections`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_CONFIG=str(empty_config(collections)))
    env.update(extra)
    return env
