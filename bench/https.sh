#!/usr/bin/env bash
# HTTPS throughput and latency of the capmaas webhook server against nginx, same machine,
# same certificate, same client, same run.
#
#   bench/https.sh [REQUESTS] [ROUNDS]   (default 30000 requests, 5 rounds per server)
#
# Client: h2load --h1 (Debian nghttp2-client), 16 keep-alive connections, one thread,
# a small JSON POST (an AdmissionReview, as the API server sends). capmaas runs with
# --webhooks-only and 2 server threads; nginx (Debian nginx-light) with 2 workers returns
# a fixed JSON body. Both servers are pinned to CPU 0 and the client to CPU 1 (when the
# machine has two), and the rounds alternate capmaas, nginx, capmaas, … so background load
# hits both alike; each figure is the median over the rounds. p50/p99 come from h2load's
# per-request log of the median round. The last line is:
#   https: capmaas=<req/s> nginx=<req/s> ratio=<capmaas/nginx> idle_rss_kib=<n>
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
capmaas_ensure_packages "${CAPMAAS_PACKAGES[@]}" nginx-light nghttp2-client
n=${1:-30000}
rounds=${2:-5}
server_cpu=(); client_cpu=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server_cpu=(taskset -c 0); client_cpu=(taskset -c 1)
fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j"$(nproc)" --target capmaas >/dev/null
certs/gen-dev-certs.sh "$work/certs" >/dev/null

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cat > "$work/review.json" <<'JSON'
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"infrastructure.cluster.x-k8s.io","version":"v1beta1","kind":"MaasMachine"},"resource":{"group":"infrastructure.cluster.x-k8s.io","version":"v1beta1","resource":"maasmachines"},"name":"m1","namespace":"default","operation":"CREATE","userInfo":{"username":"admin"},"object":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"MaasMachine","metadata":{"name":"m1","namespace":"default"},"spec":{"image":"ubuntu/jammy","minCPU":2,"minMemory":4096}},"oldObject":null,"dryRun":false}}
JSON

# capmaas
cport=$(free_port)
"${server_cpu[@]}" build-bench/capmaas --webhooks-only --webhook-host 127.0.0.1 --webhook-port "$cport" \
  --webhook-cert-dir "$work/certs" --webhook-threads 2 --health-addr 0 \
  --metrics-bind-addr 0 2>"$work/capmaas.log" &
cpid=$!; pids+=("$cpid")
for _ in $(seq 100); do grep -q '"serving"' "$work/capmaas.log" && break; sleep 0.05; done
sleep 1
idle_rss=$(awk '/VmRSS/ {print $2}' /proc/$cpid/status)

# nginx
nport=$(free_port)
mkdir -p "$work/nginx/logs"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 2;
error_log $work/nginx/logs/error.log error;
pid $work/nginx/nginx.pid;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$nport ssl;
    ssl_certificate $work/certs/tls.crt;
    ssl_certificate_key $work/certs/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 1000000;
    location / { default_type application/json; return 200 '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}'; }
  }
}
CONF
"${server_cpu[@]}" nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
pids+=("$!")
sleep 0.5

path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachine
run_once() { # name port round -> "req/s p50_ms p99_ms"
  local name=$1 port=$2 round=$3 out rps p50 p99
  out=$("${client_cpu[@]}" h2load --h1 -n "$n" -c 16 -t 1 -d "$work/review.json" \
    -H 'Content-Type: application/json' --log-file "$work/$name.$round.tsv" \
    "https://127.0.0.1:$port$path")
  if ! grep -q "0 failed, 0 errored" <<<"$out" ||
     ! grep -q "status codes: $n 2xx" <<<"$out"; then
    echo "$name: requests failed" >&2; echo "$out" >&2; exit 1
  fi
  rps=$(awk '/^finished in/ {gsub(",",""); print $4}' <<<"$out")
  # log columns: start time (us), status, duration (us)
  read -r p50 p99 < <(awk '{print $3}' "$work/$name.$round.tsv" | sort -n |
    awk '{a[NR]=$1} END {printf "%.3f %.3f\n", a[int(NR*0.50)]/1000, a[int(NR*0.99)]/1000}')
  echo "$rps $p50 $p99"
}

median_of() { sort -n -k1,1 | awk '{l[NR]=$0} END {print l[int((NR+1)/2)]}'; }

for name in capmaas nginx; do  # warm-up
  port=$cport; [ "$name" = nginx ] && port=$nport
  "${client_cpu[@]}" h2load --h1 -n 2000 -c 16 -t 1 -d "$work/review.json" \
    -H 'Content-Type: application/json' "https://127.0.0.1:$port$path" >/dev/null 2>&1
done
for r in $(seq "$rounds"); do
  run_once capmaas "$cport" "$r" >>"$work/capmaas.rounds"
  run_once nginx "$nport" "$r" >>"$work/nginx.rounds"
done
read -r crps cp50 cp99 < <(median_of <"$work/capmaas.rounds")
read -r nrps np50 np99 < <(median_of <"$work/nginx.rounds")
printf '%-8s %10.0f req/s   p50 %6.3f ms   p99 %6.3f ms   (rounds: %s)\n' capmaas "$crps" \
  "$cp50" "$cp99" "$(awk '{printf "%.0f ", $1}' "$work/capmaas.rounds")"
printf '%-8s %10.0f req/s   p50 %6.3f ms   p99 %6.3f ms   (rounds: %s)\n' nginx "$nrps" \
  "$np50" "$np99" "$(awk '{printf "%.0f ", $1}' "$work/nginx.rounds")"
ratio=$(awk -v a="$crps" -v b="$nrps" 'BEGIN {printf "%.2f", a/b}')
printf 'https: capmaas=%.0f nginx=%.0f ratio=%s idle_rss_kib=%s\n' "$crps" "$nrps" "$ratio" "$idle_rss"
