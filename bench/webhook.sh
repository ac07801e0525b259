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
# Client: h2load --h1, 16 keep-alive connections, one thread. capmaas runs with
# --webhooks-only and 2 server threads; the Go webhook with GOMAXPROCS=2; nginx with 2
# workers. Servers are pinned to CPU 0 and the client to CPU 1 (when there are two); rounds
# alternate the servers; each figure is the median over the rounds. p99_ms is capmaas's p99
# at half its peak rate (h2load --rps, 16 connections), from h2load's per-request log.
# The last line is:
#   webhook: capmaas=<req/s> go=<req/s> nginx=<req/s> ratio_go=<capmaas/go> p99_ms=<…>
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

gport=$(free_port)
GOMAXPROCS=2 "${server_cpu[@]}" "$work/go-webhook" -addr "127.0.0.1:$gport" \
  -cert "$work/certs/tls.crt" -key "$work/certs/tls.key" >"$work/go.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do grep -qs '^serving' "$work/go.log" && break; sleep 0.05; done

nport=$(free_port)
start_nginx "$nport"

# Both webhooks must allow the review (same validation, same answer).
for port in "$cport" "$gport"; do
  curl -sS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$review" "https://127.0.0.1:$port$path" | grep -q '"allowed":true' ||
    { echo "webhook on port $port did not allow the review" >&2; exit 1; }
done

bench_warmup "$cport" "$gport" "$nport"
for r in $(seq "$rounds"); do
  bench_round capmaas "$cport" "$r" >>"$work/capmaas.rounds"
  bench_round go "$gport" "$r" >>"$work/go.rounds"
  bench_round nginx "$nport" "$r" >>"$work/nginx.rounds"
done
bench_report capmaas; crps=$rps
bench_report go; grps=$rps
bench_report nginx; nrps=$rps

# Latency at half the peak rate: h2load --rps is per connection.
half=$(awk -v r="$crps" 'BEGIN {v = r / 2 / 16; printf "%d", (v < 1 ? 1 : v)}')
read -r _ hp50 hp99 < <(bench_round capmaas-half "$cport" 1 --rps "$half")
printf 'capmaas at half peak (%d req/s/conn x 16): p50 %.3f ms  p99 %.3f ms\n' "$half" "$hp50" "$hp99"
ratio=$(awk -v a="$crps" -v b="$grps" 'BEGIN {printf "%.2f", a/b}')
printf 'webhook: capmaas=%.0f go=%.0f nginx=%.0f ratio_go=%s p99_ms=%s\n' "$crps" "$grps" "$nrps" \
  "$ratio" "$hp99"
