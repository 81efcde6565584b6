"""A key login with Paramiko (the release pinned in requirements.txt, from the controller venv): what Ansible's
paramiko connection, IDE plugins and notebook tools use. Prints one JSON line: ok, user, kex, cipher, mac,
error, and mlkem (whether this Paramiko offers mlkem768x25519-sha256).

  python paramiko_login.py HOST USER KEY_FILE HOST_KEY_PUB

The host must show HOST_KEY_PUB (its ed25519 key as saved before converge); any other host key is refused.
"""
import base64
import json
import logging
import sys

import paramiko


class Agreed(logging.Handler):
    """Keeps the algorithms Paramiko logs as agreed ("Kex: ...", "Cipher: ...", "MAC: ...")."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = {}

    def emit(self, record):
        message = record.getMessage()
        for name in ("Kex", "Cipher", "MAC"):
            if message.startswith(name + ": "):
                self.seen[name.lower()] = message.split(": ", 1)[1]


def main():
    host, user, key, host_key_pub = sys.argv[1:5]
    agreed = Agreed()
    logger = logging.getLogger("paramiko")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(agreed)
    result = {"paramiko": paramiko.__version__, "ok": False, "user": "", "error": "",
              "mlkem": "mlkem768x25519-sha256" in paramiko.Transport._preferred_kex}
    client = paramiko.SSHClient()
    with open(host_key_pub) as handle:
        key_type, key_b64 = handle.read().split()[:2]
    client.get_host_keys().add(host, key_type, paramiko.PKey.from_type_string(key_type, base64.b64decode(key_b64)))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(host, username=user, key_filename=key, look_for_keys=False, allow_agent=False, timeout=10,
                       banner_timeout=10, auth_timeout=10)
        _, stdout, _ = client.exec_command("id -un", timeout=10)
        result["user"] = stdout.read().decode().strip()
        result["ok"] = result["user"] == user
    except (paramiko.SSHException, OSError) as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        client.close()
    result.update(agreed.seen)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
