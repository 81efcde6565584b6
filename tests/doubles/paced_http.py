#!/usr/bin/env python3
"""An HTTP server on loopback that holds a known rate: the slow network double of box_probe's tests and the demo.

    python tests/doubles/paced_http.py --port 8765 --rate-mb-s 5 --size-mb 50

serves ``GET /file.bin`` (``--size-mb`` MB of bytes, MB = 10^6) at ``--rate-mb-s`` MB/s: it writes 64 KiB at a time
and sleeps until the bytes sent over the seconds since the first one match the rate (measured: a 5 MB/s target reads
5.0 MB/s, renter-disk-network.md 5). ``POST`` or ``PUT /upload`` reads the body at the same rate and answers 200 with
the byte count; ``GET /stall`` sends its headers and then nothing for ``--stall-s`` seconds; any other path is 404.
Every request is logged to stderr with its query string cut off. Importable: ``PacedServer(rate_mb_s=5,
size_mb=50)`` is a context manager with ``.url`` (``http://127.0.0.1:PORT``). Loopback only; a test double.
"""

import argparse
import http.server
import sys
import threading
import time

CHUNK = 64 * 1024
MB = 1000000.0


def pace(start, done, rate_mb_s):
    """Sleep until ``done`` bytes since ``start`` are no faster than ``rate_mb_s``."""
    ahead = start + done / (rate_mb_s * MB) - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)


def handler_for(rate_mb_s, size_bytes, stall_s):
    class Paced(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            sys.stderr.write("paced_http %s %s\n" % (self.command, self.path.split("?", 1)[0]))

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/stall":
                self.send_response(200)
                self.send_header("Content-Length", str(size_bytes))
                self.end_headers()
                self.wfile.flush()
                time.sleep(stall_s)
                return
            if path != "/file.bin":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size_bytes))
            self.end_headers()
            block = b"\x5a" * CHUNK
            sent = 0
            start = time.monotonic()
            try:
                while sent < size_bytes:
                    n = min(CHUNK, size_bytes - sent)
                    self.wfile.write(block[:n])
                    sent += n
                    pace(start, sent, rate_mb_s)
            except (BrokenPipeError, ConnectionResetError):  # the client read what it wanted and left
                pass

        def _receive(self):
            if self.path.split("?", 1)[0] != "/upload":
                self.send_error(404)
                return
            left = int(self.headers.get("Content-Length") or 0)
            got = 0
            start = time.monotonic()
            while left > 0:
                data = self.rfile.read(min(CHUNK, left))
                if not data:
                    break
                got += len(data)
                left -= len(data)
                pace(start, got, rate_mb_s)
            body = str(got).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_PUT = _receive

    return Paced


class PacedServer:
    """The server in a thread: ``with PacedServer(rate_mb_s=5, size_mb=50) as srv: urlopen(srv.url + "/file.bin")``."""

    def __init__(self, rate_mb_s=5.0, size_mb=50.0, port=0, stall_s=30.0, host="127.0.0.1"):
        self.server = http.server.ThreadingHTTPServer((host, port), handler_for(rate_mb_s, int(size_mb * MB), stall_s))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = "http://%s:%d" % (host, self.port)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.server.shutdown()
        self.server.server_close()
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one, printed)")
    ap.add_argument("--rate-mb-s", type=float, default=5.0, help="MB/s (10^6 B) to hold")
    ap.add_argument("--size-mb", type=float, default=50.0, help="size of /file.bin in MB")
    ap.add_argument("--stall-s", type=float, default=30.0, help="how long /stall stays silent")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    args = ap.parse_args(argv)
    srv = PacedServer(args.rate_mb_s, args.size_mb, args.port, args.stall_s, args.host)
    print("serving %s/file.bin (%s MB at %s MB/s)" % (srv.url, args.size_mb, args.rate_mb_s), flush=True)
    try:
        srv.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server.server_close()


if __name__ == "__main__":
    main()
