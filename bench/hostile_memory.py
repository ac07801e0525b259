"""Hostile AdmissionReviews against a running capmaas webhook; prints the server's memory.

  hostile_memory.py PORT CA PID [CONCURRENCY] [MIB]

Rounds, each CONCURRENCY requests at once (default 8) of about MIB MiB (default 3):
  bomb      "extra": [0,0,0,...] in the request (1.5 M numbers per 3 MiB), the issue's case
  strings   a valid review carrying one MIB MiB annotation (few values, big strings)
  dense     a valid review with as many small values as the budget admits (60 000 tags
            and a string filling it up to MIB MiB)
and after each round the server's VmRSS and VmHWM (peak) from /proc/PID/status. The last
line is:  memory: idle_kib=.. peak_kib=.. peak_over_idle_mib=.. after_kib=.. statuses=..
"""
import json
import socket
import ssl
import sys
import threading

PATH = "/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachine"


def review(extra_request=None, annotations=None, spec_extra=None):
    obj = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasMachine",
        "metadata": {"name": "m1", "namespace": "default",
                     "annotations": annotations or {}},
        "spec": {"image": "ubuntu/jammy", "minCPU": 2, "minMemory": 4096},
    }
    if spec_extra:
        obj["spec"].update(spec_extra)
    req = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1",
                 "kind": "MaasMachine"},
        "operation": "CREATE", "name": "m1", "namespace": "default",
        "object": obj,
    }
    if extra_request:
        req.update(extra_request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def bomb(mib):
    # one array of small numbers: 2 bytes per value
    head = json.dumps(review()).encode()[:-2]  # strip "}}"
    n = mib * 1024 * 1024 // 2
    return head + b',"extra":[' + b",".join([b"0"] * n) + b"]}}"


def strings(mib):
    return json.dumps(review(annotations={"big": "x" * (mib * 1024 * 1024 - 1024)})).encode()


def dense(mib, values):
    # as many values as the budget admits (tags of one character), padded to mib MiB
    tags = ["a"] * max(values - 64, 1)
    body = json.dumps(review(annotations={"pad": ""}, spec_extra={"tags": tags}),
                      separators=(",", ":"))
    pad = mib * 1024 * 1024 - len(body)
    return json.dumps(review(annotations={"pad": "p" * max(pad, 0)},
                             spec_extra={"tags": tags}), separators=(",", ":")).encode()


def post(port, ctx, body, out, i):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
                          b"Content-Type: application/json\r\nConnection: close\r\n"
                          b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        status = int(data.split(b" ", 2)[1])
        out[i] = (status, data.split(b"\r\n\r\n", 1)[1][:200].decode("utf-8", "replace"))
    except Exception as e:  # noqa: BLE001 - reported as the round's status
        out[i] = (0, repr(e))


def mem(pid):
    d = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                d[k] = int(v.split()[0])
    return d


def round_(name, port, ctx, body, conc, pid):
    out = [None] * conc
    ts = [threading.Thread(target=post, args=(port, ctx, body, out, i)) for i in range(conc)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    m = mem(pid)
    codes = {}
    for st, _ in out:
        codes[st] = codes.get(st, 0) + 1
    print("%-8s %5.2f MiB x %d: statuses %s  rss %d KiB  peak %d KiB  first answer: %s" % (
        name, len(body) / 1048576, conc, codes, m["VmRSS"], m["VmHWM"], out[0][1].strip()[:120]))
    return codes


def main():
    port, ca, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    conc = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    mib = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    ctx = ssl.create_default_context(cafile=ca)
    idle = mem(pid)
    print("idle: rss %d KiB  peak %d KiB" % (idle["VmRSS"], idle["VmHWM"]))
    statuses = {}
    for name, body in (("bomb", bomb(mib)), ("strings", strings(mib)),
                       ("dense", dense(mib, 60000)), ("bomb", bomb(mib))):
        for k, v in round_(name, port, ctx, body, conc, pid).items():
            statuses[k] = statuses.get(k, 0) + v
    end = mem(pid)
    print("memory: idle_kib=%d peak_kib=%d peak_over_idle_mib=%.1f after_kib=%d statuses=%s" % (
        idle["VmRSS"], end["VmHWM"], (end["VmHWM"] - idle["VmRSS"]) / 1024, end["VmRSS"],
        ",".join("%s:%d" % kv for kv in sorted(statuses.items()))))


if __name__ == "__main__":
    main()
