#!/usr/bin/env bash
# Webhook throughput and latency: capmaas against a Go webhook doing the same validation
# with the standard library only (the stack controller-runtime serves webhooks on) and
# nginx returning a fixed body, same machine, same certificate, same client, same run.
#
#   bench/webhook.sh [REQUESTS] [ROUNDS]   (default 30000 requests, 5 rounds per server)
#
# Request: the CREATE review of a realistic MaasMachineTemplate (about 1.7 KB, with a
# kubectl last-applied-configuration annotation: tests/fixtures/admission/
# maasmachinetemplate_create.json), POSTed to the validating endpoint.
# Client: h2load --h1, 16 keep-alive connections, one thread. Servers are pinned to CPU 0
# and the client to CPU 1 (when there are two), and each server runs as many workers as it
# would by default on the one CPU it is given: capmaas --webhooks-only one event loop
# (--webhook-threads 0 counts its affinity mask), the Go webhook GOMAXPROCS 1 (the runtime
# counts the same mask), nginx 1 worker (its default). Two loops time-sharing one CPU take
# turns a scheduler tick (4 ms) at a time, which is what the p99 measures (docs/
# performance.md, "p99 and the thread count"); CAPMAAS_BENCH_ARGS='--webhook-threads 2'
# shows it. Rounds
# alternate the servers; each figure is the median over the rounds. p99_ms is capmaas's p99
# at half its peak rate (h2load --rps, 16 connections), from h2load's per-request log.
#
# MAAS checks (beyond.md B1): a second capmaas ("capmaas-maas") runs the same review with
# the admission MAAS checks on, against maas-sim holding a 1000-machine inventory in which
# the review's pool, zone, tags and image exist (warm cache: every request reads the
# snapshot and scans the machines); its figures are reported beside capmaas's, and
# ratio_maas = capmaas-maas / capmaas (the target is >= 0.90).
# Each server's line also gives its CPU time (user + system) per request, median over the
# rounds, and a line before the last compares them (go/capmaas: how many times the CPU Go
# spends per request). The last line is:
#   webhook: capmaas=<req/s> go=<req/s> nginx=<req/s> ratio_go=<capmaas/go> p99_ms=<…>
#            capmaas_maas=<req/s> ratio_maas=<capmaas-maas/capmaas> p99_maas_ms=<…>
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-30000}
rounds=${2:-5}
bench_setup golang-go
(cd bench/go-webhook && GO111MODULE=off GOCACHE="$work/gocache" go build -o "$work/go-webhook" .)
review=tests/fixtures/admission/maasmachinetemplate_create.json
path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate

cport=$(free_port)
start_capmaas "$cport"

# maas-sim with 1000 machines, a tenth of them matching the review's template, and a second
# capmaas with the MAAS checks on.
cmake --build "$bdir" -j"$(nproc)" --target maas-sim >/dev/null
awk 'BEGIN {
  print "zones: [{name: zone-a}, {name: zone-b}]"
  print "pools: [{name: k8s-workers}, {name: k8s-cp}]"
  print "tags: [{name: gpu}, {name: ssd}, {name: rack-12}, {name: rack-13}]"
  print "boot_resources: [{name: ubuntu/jammy, type: Synced, architecture: amd64/ga-22.04}]"
  print "machines:"
  for (i = 0; i < 1000; i++) {
    m = i % 10 == 0
    printf "  - {system_id: m%05d, cpu_count: %d, memory: %d, zone: %s, pool: %s, tags: [%s]}\n",
      i, m ? 16 : 4, m ? 65536 : 8192, m || i % 2 ? "zone-a" : "zone-b",
      m || i % 3 ? "k8s-workers" : "k8s-cp", m ? "gpu, ssd, rack-12" : "ssd, rack-13"
  }
}' >"$work/inventory.yaml"
"$bdir"/maas-sim --port 0 --inventory "$work/inventory.yaml" --api-key ck:tk:bench \
  >"$work/maas-sim.out" 2>"$work/maas-sim.err" &
pids+=("$!")
for _ in $(seq 100); do grep -qs '^listening on' "$work/maas-sim.out" && break; sleep 0.05; done
mport=$(free_port)
# shellcheck disable=SC2086 # word splitting of CAPMAAS_BENCH_ARGS is the point
MAAS_ENDPOINT=$(sed -n 's/^listening on //p' "$work/maas-sim.out") MAAS_API_KEY=ck:tk:bench \
  "${server_cpu[@]}" "$bdir"/capmaas --webhooks-only --webhook-host 127.0.0.1 \
  --webhook-port "$mport" --webhook-cert-dir "$work/certs" \
  --health-addr 0 --diagnostics-address 0 ${CAPMAAS_BENCH_ARGS:-} 2>"$work/capmaas-maas.log" &
pids+=("$!")
for _ in $(seq 100); do grep -qs 'MAAS inventory refreshed' "$work/capmaas-maas.log" && break; sleep 0.05; done
grep -qs 'MAAS inventory refreshed' "$work/capmaas-maas.log" ||
  { echo "capmaas with MAAS checks did not load the inventory" >&2; cat "$work/capmaas-maas.log" >&2; exit 1; }

gport=$(free_port)
"${server_cpu[@]}" "$work/go-webhook" -addr "127.0.0.1:$gport" \
  -cert "$work/certs/tls.crt" -key "$work/certs/tls.key" >"$work/go.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do grep -qs '^serving' "$work/go.log" && break; sleep 0.05; done

nport=$(free_port)
start_nginx "$nport"

# Every webhook must allow the review (same validation, same answer), capmaas-maas without
# a warning (the MAAS checks ran and passed).
curl -sS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
  --data-binary @"$review" "https://127.0.0.1:$mport$path" >"$work/maas-answer.json"
if ! grep -q '"allowed":true' "$work/maas-answer.json" || grep -q '"warnings"' "$work/maas-answer.json"; then
  echo "capmaas-maas did not allow the review cleanly:" >&2; cat "$work/maas-answer.json" >&2; exit 1
fi
for port in "$cport" "$gport"; do
  curl -sS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$review" "https://127.0.0.1:$port$path" | grep -q '"allowed":true' ||
    { echo "webhook on port $port did not allow the review" >&2; exit 1; }
done

bench_warmup "$cport" "$mport" "$gport" "$nport"
for r in $(seq "$rounds"); do
  bench_round capmaas "$cport" "$r" >>"$work/capmaas.rounds"
  bench_round capmaas-maas "$mport" "$r" >>"$work/capmaas-maas.rounds"
  bench_round go "$gport" "$r" >>"$work/go.rounds"
  bench_round nginx "$nport" "$r" >>"$work/nginx.rounds"
done
bench_report capmaas; crps=$rps; ccpu=$cpu
bench_report capmaas-maas; mrps=$rps
bench_report go; grps=$rps; gcpu=$cpu
bench_report nginx; nrps=$rps; ncpu=$cpu

# Latency at half the peak rate: h2load --rps is per connection.
half=$(awk -v r="$crps" 'BEGIN {v = r / 2 / 16; printf "%d", (v < 1 ? 1 : v)}')
read -r _ hp50 hp99 _ < <(bench_round capmaas-half "$cport" 1 --rps "$half")
printf 'capmaas at half peak (%d req/s/conn x 16): p50 %.3f ms  p99 %.3f ms\n' "$half" "$hp50" "$hp99"
read -r _ mp50 mp99 _ < <(bench_round capmaas-maas-half "$mport" 1 --rps "$half")
printf 'capmaas-maas at the same rate: p50 %.3f ms  p99 %.3f ms\n' "$mp50" "$mp99"
ratio=$(awk -v a="$crps" -v b="$grps" 'BEGIN {printf "%.2f", a/b}')
ratio_maas=$(awk -v a="$mrps" -v b="$crps" 'BEGIN {printf "%.2f", a/b}')
# CPU time per request (less sensitive to other load on the machine than req/s).
printf 'webhook-cpu-us-per-req: capmaas=%s go=%s nginx=%s go/capmaas=%s\n' "$ccpu" "$gcpu" "$ncpu" \
  "$(awk -v a="$gcpu" -v b="$ccpu" 'BEGIN {printf "%.2f", a/b}')"
printf 'webhook: capmaas=%.0f go=%.0f nginx=%.0f ratio_go=%s p99_ms=%s capmaas_maas=%.0f ratio_maas=%s p99_maas_ms=%s\n' \
  "$crps" "$grps" "$nrps" "$ratio" "$hp99" "$mrps" "$ratio_maas" "$mp99"
