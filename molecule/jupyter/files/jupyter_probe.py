"""Logs into a Jupyter server the way a browser does and reports what it saw, as JSON on stdout.

  jupyter_probe.py BASE_URL [CA_FILE] < password

Runs in the gpufleet venv (requests, websocket-client come with jupyter_server). The password is
read from stdin, never from the command line. Steps: anonymous API call and page; login with a
wrong password; login with the right one (the _xsrf cookie echoed in the form), then the API; a
kernel started over the API runs code over its websocket (what a notebook cell does) and is shut down.
"""
import json
import socket
import ssl
import sys
import time
import uuid
from urllib.parse import urlparse

import requests
import websocket

# The kernel's own view: its interpreter and torch, then who it runs as and whether anything of the
# provisioning SSH session leaked into its environment (a kernel must see the service user's, nothing else).
CODE = ("import getpass, os, sys\ntry:\n    import torch; t = torch.__version__\n"
        "except ImportError as e:\n    t = 'no torch: %s' % e\nprint(sys.executable, t)\n"
        "print('kernel-user=%s logname=%s ssh-vars=%s' % (getpass.getuser(), os.environ.get('LOGNAME'),\n"
        "      ','.join(sorted(k for k in os.environ if k.startswith('SSH_'))) or 'none'))")


def login(base, verify, password):
    session = requests.Session()
    session.verify = verify
    page = session.get(base + "/login", timeout=30)
    xsrf = session.cookies.get("_xsrf")
    answer = session.post(base + "/login", data={"password": password, "_xsrf": xsrf},
                          allow_redirects=False, timeout=60)
    return session, page.status_code, answer.status_code


def run_code(base, session, verify):
    xsrf = session.cookies.get("_xsrf")
    started = session.post(base + "/api/kernels", json={"name": "python3"}, headers={"X-XSRFToken": xsrf}, timeout=60)
    result = {"kernel_start": started.status_code}
    if started.status_code != 201:
        return result
    kernel = started.json()["id"]
    url = base.replace("http", "ws", 1) + "/api/kernels/%s/channels?session_id=%s" % (kernel, uuid.uuid4().hex)
    cookie = "; ".join("%s=%s" % (c.name, c.value) for c in session.cookies)
    sslopt = {"ca_certs": verify} if isinstance(verify, str) else {}
    ws = websocket.create_connection(url, header=["Cookie: " + cookie], origin=base, sslopt=sslopt, timeout=120)
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({
        "header": {"msg_id": msg_id, "username": "probe", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": CODE, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    # The reply comes on the shell channel, the output on iopub: the two are not ordered, so under load a stream
    # message can arrive after execute_reply. Done is execute_reply AND iopub's status 'idle' for this request (what
    # jupyter_client's execute_interactive waits for).
    output, deadline, replied, idle = [], time.time() + 120, False, False
    while time.time() < deadline and not (replied and idle):
        msg = json.loads(ws.recv())
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = msg["header"]["msg_type"]
        if kind == "stream":
            output.append(msg["content"]["text"])
        elif kind == "error":
            output.append("\n".join(msg["content"]["traceback"]))
        elif kind == "execute_reply":
            result["execute_status"] = msg["content"]["status"]
            replied = True
        elif kind == "status" and msg["content"].get("execution_state") == "idle":
            idle = True
    ws.close()
    result["output"] = "".join(output).strip()
    result["kernel_stop"] = session.delete(base + "/api/kernels/" + kernel, headers={"X-XSRFToken": xsrf},
                                           timeout=60).status_code
    return result


def main():
    base = sys.argv[1].rstrip("/")
    verify = sys.argv[2] if len(sys.argv) > 2 else True
    password = sys.stdin.read().rstrip("\n")
    report = {}
    anonymous = requests.Session()
    anonymous.verify = verify
    report["anon_api_status"] = anonymous.get(base + "/api/status", timeout=30).status_code
    report["anon_api_kernels"] = anonymous.get(base + "/api/kernels", timeout=30).status_code
    lab = anonymous.get(base + "/lab", allow_redirects=False, timeout=30)
    report["anon_lab"] = [lab.status_code, lab.headers.get("Location", "")]
    wrong, report["login_page"], report["wrong_login"] = login(base, verify, password + "-wrong")
    report["wrong_then_api"] = wrong.get(base + "/api/status", timeout=30).status_code
    right, _, report["right_login"] = login(base, verify, password)
    report["api_status"] = right.get(base + "/api/status", timeout=30).status_code
    report["api_kernels"] = right.get(base + "/api/kernels", timeout=30).status_code
    report.update(run_code(base, right, verify))
    if urlparse(base).scheme == "https":
        host, port = urlparse(base).hostname, urlparse(base).port
        served = ssl.get_server_certificate((host, port))
        report["served_cert"] = ssl.DER_cert_to_PEM_cert(ssl.PEM_cert_to_DER_cert(served))
        context = ssl.create_default_context(cafile=verify)
        with context.wrap_socket(socket.create_connection((host, port), timeout=30),
                                 server_hostname=host) as tls:
            report["tls_version"] = tls.version()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
