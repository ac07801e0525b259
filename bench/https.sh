#!/usr/bin/env bash
# HTTPS throughput, CPU and latency of the capmaas webhook server against nginx, same machine,
# same certificate, same client, same run.
#
#   bench/https.sh [REQUESTS] [ROUNDS]   (default 30000 requests, 5 rounds per server)
#
# Client: h2load --h1 (Debian nghttp2-client), 16 keep-alive connections, one thread,
# a small JSON POST (an AdmissionReview, as the API server sends). capmaas runs with
# --webhooks-only; nginx (Debian nginx-light) returns a fixed JSON body. Both servers are
# pinned to CPU 0 and the client to CPU 1 (when the machine has two), each with one worker
# for its one CPU (capmaas's default counts its affinity mask; nginx's default is 1), and the
# rounds alternate capmaas, nginx, capmaas, … so background load hits both alike; each
# figure is the median over the rounds. The TLS version and cipher each server negotiated
# are printed first (they must be the same for the comparison to mean anything).
#
# Peak rounds: as fast as h2load goes. p50/p99 come from h2load's per-request log of the
# median round; each server's line also gives its CPU time per request (user + system, from
# the threads' schedstat, median over the rounds).
# Half-rate rounds: h2load --rps at half of capmaas's median peak rate (per connection, 16
# connections), the same rate for both servers, alternating, ROUNDS each; the p99 of each
# round, median over the rounds.
# Last lines:
#   https-cpu-us-per-req: capmaas=<us> nginx=<us> capmaas/nginx=<x> (target <= 1.15)
#   https-half-rate: rps=<req/s> capmaas_p99_ms=<ms> nginx_p99_ms=<ms> p99_ratio=<x> (<= 1.5)
#   https: capmaas=<req/s> nginx=<req/s> ratio=<capmaas/nginx> idle_rss_kib=<n>
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-30000}
rounds=${2:-5}
bench_setup

review=$work/review.json
path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachine
cat > "$review" <<'JSON'
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"infrastructure.cluster.x-k8s.io","version":"v1beta1","kind":"MaasMachine"},"resource":{"group":"infrastructure.cluster.x-k8s.io","version":"v1beta1","resource":"maasmachines"},"name":"m1","namespace":"default","operation":"CREATE","userInfo":{"username":"admin"},"object":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"MaasMachine","metadata":{"name":"m1","namespace":"default"},"spec":{"image":"ubuntu/jammy","minCPU":2,"minMemory":4096}},"oldObject":null,"dryRun":false}}
JSON

cport=$(free_port)
start_capmaas "$cport"
sleep 1
idle_rss=$(awk '/VmRSS/ {print $2}' "/proc/$capmaas_pid/status")
nport=$(free_port)
start_nginx "$nport"

bench_warmup "$cport" "$nport"
printf 'tls: capmaas=%s nginx=%s\n' "$(tls_params "$cport" | tr ' ' /)" "$(tls_params "$nport" | tr ' ' /)"
for r in $(seq "$rounds"); do
  bench_round capmaas "$cport" "$r" >>"$work/capmaas.rounds"
  bench_round nginx "$nport" "$r" >>"$work/nginx.rounds"
done
bench_report capmaas; crps=$rps; ccpu=$cpu
bench_report nginx; nrps=$rps; ncpu=$cpu

# Latency at half of capmaas's peak rate, both servers at that same rate.
half=$(awk -v r="$crps" 'BEGIN {v = r / 2 / 16; printf "%d", (v < 1 ? 1 : v)}')
for r in $(seq "$rounds"); do
  bench_round capmaas-half "$cport" "$r" --rps "$half" >>"$work/capmaas-half.rounds"
  bench_round nginx-half "$nport" "$r" --rps "$half" >>"$work/nginx-half.rounds"
done
p99_median() { awk '{print $3}' "$work/$1.rounds" | sort -n | awk '{l[NR]=$0} END {print l[int((NR+1)/2)]}'; }
chp99=$(p99_median capmaas-half)
nhp99=$(p99_median nginx-half)
printf 'half rate (%d req/s/conn x 16): capmaas p99 %s ms (rounds: %s)  nginx p99 %s ms (rounds: %s)\n' \
  "$half" "$chp99" "$(awk '{printf "%s ", $3}' "$work/capmaas-half.rounds")" \
  "$nhp99" "$(awk '{printf "%s ", $3}' "$work/nginx-half.rounds")"

# CPU time per request (less sensitive to other load on the machine than req/s).
printf 'https-cpu-us-per-req: capmaas=%s nginx=%s capmaas/nginx=%s\n' "$ccpu" "$ncpu" \
  "$(awk -v a="$ccpu" -v b="$ncpu" 'BEGIN {printf "%.2f", a/b}')"
printf 'https-half-rate: rps=%d capmaas_p99_ms=%s nginx_p99_ms=%s p99_ratio=%s\n' "$((half * 16))" \
  "$chp99" "$nhp99" "$(awk -v a="$chp99" -v b="$nhp99" 'BEGIN {printf "%.2f", a/b}')"
ratio=$(awk -v a="$crps" -v b="$nrps" 'BEGIN {printf "%.2f", a/b}')
printf 'https: capmaas=%.0f nginx=%.0f ratio=%s idle_rss_kib=%s\n' "$crps" "$nrps" "$ratio" "$idle_rss"
