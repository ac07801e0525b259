#!/usr/bin/python3
"""Start-to-serving time of a webhook server, for bench/startup.sh: starts COMMAND, then
POSTs the review to https://127.0.0.1:PORT/PATH every millisecond until one is answered
200, and prints the milliseconds from the start of the process to that answer. ROUNDS
times; prints one figure per round.

    bench/startup.py PORT PATH REVIEW CA ROUNDS -- COMMAND...
"""
import http.client
import ssl
import subprocess
import sys
import time


def first_answer(port, path, body, ctx, deadline):
    while time.monotonic() < deadline:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=1)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            if conn.getresponse().status == 200:
                return True
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.001)
    return False


def main():
    sep = sys.argv.index("--")
    port, path, review, ca, rounds = sys.argv[1:sep]
    cmd = sys.argv[sep + 1:]
    body = open(review, "rb").read()
    ctx = ssl.create_default_context(cafile=ca)
    for _ in range(int(rounds)):
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ok = first_answer(int(port), path, body, ctx, t0 + 10)
        ms = (time.monotonic() - t0) * 1000
        p.terminate()
        p.wait(10)
        if not ok:
            sys.exit("no answer within 10 s from: " + " ".join(cmd))
        print(f"{ms:.1f}")


main()
