#!/usr/bin/python3
"""Waits until N MaasMachines are Ready, watching (not listing) the API server.

Used by bench/scale.sh and bench/maas_load.sh. Listing 10 000 MaasMachines once a second
costs the API server and the machine more than the provider under test does; two watches
(kubectl get --watch) see each change once. For each MaasMachine it records when its
Machine first carried bootstrap data (spec.bootstrap.dataSecretName: the moment the
provider may start) and when the MaasMachine first reported status.ready.

    ready_watch.py N TIMEOUT_S KUBECTL_WORD...

Prints progress on stderr every 5 s; on success prints one line on stdout,
    ready=<n> seconds=<s since start> bootstrap_to_ready_p50=<s> bootstrap_to_ready_max=<s>
and exits 0; exits 1 after TIMEOUT_S.
"""
import statistics
import subprocess
import sys
import threading
import time

N = int(sys.argv[1])
TIMEOUT = float(sys.argv[2])
KUBECTL = sys.argv[3:]
T0 = time.time()
lock = threading.Lock()
done = threading.Event()
boot = {}   # MaasMachine name -> first time its Machine had bootstrap data
ready = {}  # MaasMachine name -> first time it was Ready


def watch(resource, template, record):
    """Runs one kubectl watch after another (a server ends a watch now and then)."""
    while not done.is_set():
        p = subprocess.Popen(KUBECTL + ["--request-timeout=0", "get", resource, "--watch",
                                        "-o", "jsonpath=" + template],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in p.stdout:
            words = line.split()
            if len(words) == 2:
                with lock:
                    record(words[0], words[1])
            if done.is_set():
                break
        p.kill()
        p.wait()
        if not done.is_set():
            time.sleep(0.2)


def on_maasmachine(name, is_ready):
    if is_ready == "true" and name not in ready:
        ready[name] = time.time()
        if len(ready) >= N:
            done.set()


def on_machine(infra, secret):
    if secret and infra not in boot:
        boot[infra] = time.time()


threads = [
    threading.Thread(target=watch, daemon=True, args=(
        "maasmachines", '{.metadata.name}{" "}{.status.ready}{"\\n"}', on_maasmachine)),
    threading.Thread(target=watch, daemon=True, args=(
        "machines.cluster.x-k8s.io",
        '{.spec.infrastructureRef.name}{" "}{.spec.bootstrap.dataSecretName}{"\\n"}',
        on_machine)),
]
for t in threads:
    t.start()
while not done.wait(5):
    with lock:
        n = len(ready)
    print("# %d/%d Ready after %d s" % (n, N, time.time() - T0), file=sys.stderr)
    if time.time() - T0 > TIMEOUT:
        print("ready_watch: %d/%d Ready after %d s" % (n, N, TIMEOUT), file=sys.stderr)
        sys.exit(1)
end = max(ready.values())
with lock:
    lat = sorted(ready[k] - boot[k] for k in ready if k in boot)
if not lat:
    lat = [float("nan")]
print("ready=%d seconds=%.1f bootstrap_to_ready_p50=%.1f bootstrap_to_ready_max=%.1f" %
      (len(ready), end - T0, statistics.median(lat), lat[-1]))
