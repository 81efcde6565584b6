"""Jupyter access: input checks, password hashing on the controller, and the server config.

Used by the ``jupyter`` role's filter plugin on the controller, and copied to the host as the
config checker the role's ``template`` task runs before the file replaces the old one
(``python jupyter.py CONFIG.json``; stdlib only, plus traitlets' own loader when it is there).

Facts this relies on (jupyter_server 2.x, ``shared/reference/security-reliability.md`` section 2):

* ``jupyter_server.auth.passwd()`` hashes with argon2id, ``PasswordHasher(memory_cost=10240,
  time_cost=10, parallelism=8)``, and writes ``argon2:$argon2id$v=19$m=10240,t=10,p=8$<salt>$<hash>``;
  ``passwd_check`` still accepts the legacy ``sha1:<salt>:<hex>`` form, which we refuse.
* ``PasswordIdentityProvider.cookie_secret_hook`` mixes the hashed password into the cookie
  secret, so a new password (a new hash) ends every old login; keeping the old hash while the
  password is unchanged keeps users logged in and the role idempotent.
* An empty token and an empty password together disable authentication; ``allow_origin='*'``
  allows any site; ``disable_check_xsrf`` turns XSRF protection off; ``allow_root`` lets the server
  run as uid 0. The role owns all of these settings, so extra config may not set them.

No message below ever repeats a password or a hash: a value in the wrong variable may be a
plain password.
"""

import ipaddress
import json
import posixpath
import re
import sys

# The jupyter_server floor: 2.20.0 fixes GHSA-fcw5-x6j4-ccmp (stored XSS via nbconvert); the fix of
# GHSA-c3mw-737p-c7g2 (token leaked through the Referer header into the server log) was checked
# in 2.21.1's jupyter_server/log.py. Earlier releases carry published advisories (reference 2.2).
SERVER_FLOOR = (2, 21, 1)
# The parameters jupyter_server.auth.passwd() uses.
ARGON2_PARAMS = {"memory_cost": 10240, "time_cost": 10, "parallelism": 8}
ARGON2_PREFIX = "argon2:"
ARGON2_RE = re.compile(
    r"^argon2:\$argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{11,}={0,2}\$[A-Za-z0-9+/]{16,}={0,2}$")
LEGACY_RE = re.compile(r"^(?:sha1|sha256|sha512|md5|[a-z0-9_]+):[0-9a-fA-F]*:[0-9a-fA-F]+$")
MIN_PASSWORD_LENGTH = 8
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
ORIGIN_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?$")
VERSION_RE = re.compile(r"^[0-9]+(?:\.[0-9]+)*$")
# Folders a notebook server must never serve as its root (the whole system, or system trees).
SYSTEM_DIRS = frozenset(["/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run",
                         "/sbin", "/sys", "/usr", "/var"])

# Settings the role owns: extra config may not set them, and why.
OWNED = {
    "allow_root": "Jupyter must not run as root (allow_root); the role runs it as jupyter_user",
    "disable_check_xsrf": "XSRF protection stays on (disable_check_xsrf)",
    "allow_origin": "cross-origin access is set with jupyter_allow_origin, never '*'",
    "allow_origin_pat": "cross-origin access is set with jupyter_allow_origin (allow_origin_pat)",
    "allow_credentials": "cross-origin credentials stay off (allow_credentials)",
    "token": "tokens are not used: the password variables set the login (token)",
    "password": "the password is set with jupyter_password or jupyter_password_hash (password)",
    "hashed_password": "the password is set with jupyter_password or jupyter_password_hash (hashed_password)",
    "password_required": "a password is always required (password_required)",
    "allow_password_change": "the password is changed by the role only (allow_password_change)",
    "allow_unauthenticated_access": "every endpoint needs a login (allow_unauthenticated_access)",
    "ip": "the bind address is set with jupyter_ip (ip)",
    "port": "the port is set with jupyter_port (port)",
    "certfile": "TLS is set with jupyter_tls_* (certfile)",
    "keyfile": "TLS is set with jupyter_tls_* (keyfile)",
    "root_dir": "the notebook folder is set with jupyter_root_dir (root_dir)",
    "notebook_dir": "the notebook folder is set with jupyter_root_dir (notebook_dir)",
    "identity_provider_class": "the login is the role's password login (identity_provider_class)",
    "login_handler_class": "the login is the role's password login (login_handler_class)",
    "transport_encryption": "kernel transport encryption is set with jupyter_kernel_transport_encryption",
}
# KernelManager transport encryption (CurveZMQ, jupyter_server 2.20+): without it any local process can
# talk to a kernel's ZMQ ports; "auto" encrypts kernels whose kernelspec supports it (ipykernel does).
TRANSPORT_ENCRYPTION = ("disabled", "auto", "required")


class JupyterInputError(ValueError):
    """A Jupyter setting the role refuses, or a missing controller library."""


def is_loopback(ip):
    """True when ``ip`` (an address or ``localhost``) only listens on this host."""
    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def hash_problems(value):
    """Why ``value`` is not an argon2 hash as ``jupyter_server.auth.passwd()`` writes it (empty: fine)."""
    if ARGON2_RE.match(value):
        return []
    if value.startswith("$argon2"):
        return ["jupyter_password_hash lacks the 'argon2:' prefix jupyter_server expects (argon2:$argon2id$...)"]
    if LEGACY_RE.match(value):
        return ["jupyter_password_hash is a legacy salted hash (algorithm:salt:digest), quick to brute-force; "
                "give an argon2 hash from jupyter_server.auth.passwd()"]
    return ["jupyter_password_hash does not look like a hash (a plain password?): give an argon2 hash "
            "(argon2:$argon2id$...) from jupyter_server.auth.passwd(), or the plain password, vaulted, as "
            "jupyter_password"]


def _path_problems(name, path):
    if not path.startswith("/") or "\n" in path:
        return ["%s must be an absolute path" % name]
    if ".." in path.split("/"):
        return ["%s must not contain '..'" % name]
    return []


def version_tuple(version):
    return tuple(int(part) for part in version.split("."))


def _root_dir_problems(root_dir, home):
    problems = _path_problems("jupyter_root_dir", root_dir)
    if problems:
        return problems
    root = posixpath.normpath(root_dir)
    if root in SYSTEM_DIRS:
        return ["jupyter_root_dir %s would serve a system folder to every notebook user; give a folder "
                "of its own (default: ~/notebooks)" % root]
    home = posixpath.normpath(home)
    if home == root or home.startswith(root.rstrip("/") + "/"):
        return ["jupyter_root_dir %s holds the home of the Jupyter user (%s), whose runtime folder keeps the "
                "kernels' connection keys and the cookie secret (CVE-2022-29241); give a folder below it"
                % (root, home)]
    return []


def _extra_config_problems(extra):
    if not isinstance(extra, dict) or not all(isinstance(v, dict) for v in extra.values()):
        return ["jupyter_extra_config must map class names (ServerApp, ...) to dicts of settings"]
    problems = []
    for section, settings in sorted(extra.items()):
        for key in sorted(settings):
            if key in OWNED:
                problems.append("jupyter_extra_config %s.%s refused: %s" % (section, key, OWNED[key]))
    return problems


def input_problems(s):
    """Every reason to refuse the role's settings ``s`` (a dict of the role's variables, unprefixed)."""
    problems = []
    password, password_hash = s.get("password") or "", s.get("password_hash") or ""
    if not password and not password_hash:
        problems.append("no password: set jupyter_password (vaulted) or jupyter_password_hash; an empty password "
                        "with an empty token lets anyone who reaches the port run code")
    elif password and password_hash:
        problems.append("set jupyter_password or jupyter_password_hash, not both")
    elif password:
        if len(password) < MIN_PASSWORD_LENGTH or not password.strip():
            problems.append("jupyter_password is shorter than %d characters" % MIN_PASSWORD_LENGTH)
    else:
        problems += hash_problems(password_hash)

    user = s.get("user") or ""
    if user == "root":
        problems.append("jupyter_user root refused: Jupyter must not run as root (allow_root); give a plain user")
    elif not USER_RE.match(user):
        problems.append("jupyter_user must be a plain login name (lowercase letters, digits, '_', '-')")

    ip = s.get("ip")
    if ip != "localhost":
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            problems.append("jupyter_ip must be an IP address or localhost")
    port = s.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        problems.append("jupyter_port must be a number from 1 to 65535")

    certfile, keyfile = s.get("tls_certfile") or "", s.get("tls_keyfile") or ""
    if bool(certfile) != bool(keyfile):
        problems.append("give both jupyter_tls_certfile and jupyter_tls_keyfile, or neither (a self-signed "
                        "certificate is then made on the host)")
    for name, path in (("jupyter_tls_certfile", certfile), ("jupyter_tls_keyfile", keyfile)):
        if path:
            problems += _path_problems(name, path)
    if (certfile or keyfile) and not s.get("tls_enabled"):
        problems.append("jupyter_tls_certfile/keyfile are set but jupyter_tls_enabled is false")
    if ip not in (None, "") and not is_loopback(ip) and not s.get("tls_enabled"):
        problems.append("jupyter_ip %s is not a loopback address: a public bind needs jupyter_tls_enabled "
                        "(the password would cross the network in clear); or keep 127.0.0.1 and use an SSH "
                        "tunnel" % ip)

    origin = s.get("allow_origin") or ""
    if origin == "*":
        problems.append("jupyter_allow_origin '*' refused: any web site could drive the server with a logged-in "
                        "browser; name one origin (https://host[:port]) or leave it empty")
    elif origin and not ORIGIN_RE.match(origin):
        problems.append("jupyter_allow_origin must be empty or one origin, scheme://host[:port]")

    home = s.get("home") or "/home/%s" % user
    problems += _root_dir_problems(s.get("root_dir") or posixpath.join(home, "notebooks"), home)
    problems += _extra_config_problems(s.get("extra_config") or {})

    for name in ("lab_version", "server_version"):
        if not VERSION_RE.match(str(s.get(name) or "")):
            problems.append("jupyter_%s must be an exact release (X.Y.Z)" % name)
    if VERSION_RE.match(str(s.get("server_version") or "")) and version_tuple(s["server_version"]) < SERVER_FLOOR:
        problems.append("jupyter_server_version %s has published advisories; use %s or later"
                        % (s["server_version"], ".".join(map(str, SERVER_FLOOR))))
    if s.get("kernel_transport_encryption", "auto") not in TRANSPORT_ENCRYPTION:
        problems.append("jupyter_kernel_transport_encryption must be one of %s" % ", ".join(TRANSPORT_ENCRYPTION))
    index = s.get("pip_index_url") or ""
    if index and not index.startswith("https://"):
        problems.append("jupyter_pip_index_url must be https")
    return problems


def _hasher(argon2=None):
    if argon2 is None:
        try:
            import argon2  # noqa: PLC0415 - optional, only where a plain password is hashed
        except ImportError as exc:
            raise JupyterInputError(
                "jupyter_password is hashed on the controller with argon2-cffi, which is not installed "
                "in the controller's Python; install it (requirements.txt) or give jupyter_password_hash") from exc
    return argon2


def verify_password(hashed, password, argon2=None):
    """True when ``password`` matches the argon2 ``hashed`` (as jupyter_server's passwd_check says)."""
    if not hashed.startswith(ARGON2_PREFIX) or not password:
        return False
    argon2 = _hasher(argon2)
    try:
        return argon2.PasswordHasher().verify(hashed[len(ARGON2_PREFIX):], password)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
        return False


def hash_password(password, current="", argon2=None):
    """The argon2 hash for ``password``: ``current`` when it already matches (no new salt each run)."""
    if not password:
        raise JupyterInputError("jupyter_password is empty")
    if current and verify_password(current, password, argon2):
        return current
    argon2 = _hasher(argon2)
    return ARGON2_PREFIX + argon2.PasswordHasher(**ARGON2_PARAMS).hash(password)


def current_hash(config_text):
    """The hashed password in a config file's text (JSON), or '' when there is none or it is unreadable."""
    try:
        config = json.loads(config_text or "{}")
        value = config["PasswordIdentityProvider"]["hashed_password"]
    except (ValueError, KeyError, TypeError):
        return ""
    return value if isinstance(value, str) else ""


def server_config(s, hashed_password):
    """The jupyter_server_config.json for the role's settings ``s`` (already checked) and the hash."""
    home = s.get("home") or "/home/%s" % s["user"]
    server = {
        "ip": s["ip"],
        "port": s["port"],
        "port_retries": 0,
        "open_browser": False,
        "root_dir": s.get("root_dir") or posixpath.join(home, "notebooks"),
        "allow_root": False,
        "disable_check_xsrf": False,
        "allow_origin": s.get("allow_origin") or "",
        "allow_credentials": False,
        "allow_unauthenticated_access": False,
        "terminals_enabled": bool(s.get("terminals_enabled", True)),
    }
    if s.get("tls_enabled"):
        server["certfile"] = s["tls_certfile"]
        server["keyfile"] = s["tls_keyfile"]
    config = {
        "ServerApp": server,
        "IdentityProvider": {"token": ""},
        "PasswordIdentityProvider": {
            "hashed_password": hashed_password,
            "password_required": True,
            "allow_password_change": False,
        },
        "MappingKernelManager": {"transport_encryption": s.get("kernel_transport_encryption", "auto")},
    }
    for section, settings in sorted((s.get("extra_config") or {}).items()):
        config[section] = dict(config.get(section, {}), **settings)
    return config


def config_problems(config):
    """Every reason a finished jupyter_server_config (a dict) would serve Jupyter unsafely."""
    problems = []
    server = config.get("ServerApp", {})
    provider = config.get("PasswordIdentityProvider", {})
    problems += hash_problems(provider.get("hashed_password", ""))
    if provider.get("password_required") is not True or provider.get("allow_password_change") is not False:
        problems.append("password_required must be true and allow_password_change false")
    if config.get("IdentityProvider", {}).get("token", None) != "":
        problems.append("IdentityProvider.token must be set, and empty: logins go through the password")
    if not is_loopback(server.get("ip", "")) and not (server.get("certfile") and server.get("keyfile")):
        problems.append("ServerApp.ip is not loopback and no certfile/keyfile is set")
    for key, bad in (("allow_root", True), ("disable_check_xsrf", True), ("allow_origin", "*")):
        if server.get(key) == bad:
            problems.append("ServerApp.%s must not be %s" % (key, json.dumps(bad)))
    if server.get("allow_unauthenticated_access") is not False:
        problems.append("ServerApp.allow_unauthenticated_access must be false")
    if "allow_origin_pat" in server:
        problems.append("ServerApp.allow_origin_pat must not be set")
    if posixpath.normpath(server.get("root_dir", "/")) in SYSTEM_DIRS:
        problems.append("ServerApp.root_dir must be set and not a system folder")
    return problems


def check_file(path):
    """Problems of the config file at ``path``: JSON, traitlets' own loader when installed, safety."""
    try:
        with open(path) as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        return ["%s: not readable as JSON: %s" % (path, exc)]
    try:
        from traitlets.config.loader import JSONFileConfigLoader  # noqa: PLC0415 - in the host's venv
    except ImportError:
        JSONFileConfigLoader = None  # noqa: N806 - checked with json only
    if JSONFileConfigLoader is not None:
        try:
            JSONFileConfigLoader(posixpath.basename(path), posixpath.dirname(path) or ".").load_config()
        except Exception as exc:  # noqa: BLE001 - any loader error means the server would not start
            return ["%s: traitlets cannot load it: %s" % (path, exc)]
    return config_problems(config)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: %s JUPYTER_SERVER_CONFIG.json\n" % argv[0])
        return 2
    problems = check_file(argv[1])
    for problem in problems:
        sys.stderr.write(problem + "\n")
    return 1 if problems else 0


if __name__ == "__main__":  # the jupyter role runs this file on the host to check a config before it is used
    raise SystemExit(main(sys.argv))
