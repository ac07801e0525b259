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
. scripts/deps.sh
capmaas_ensure_packages "${CAPMAAS_PACKAGES[@]}" nginx-light nghttp2-client golang-go
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
(cd bench/go-webhook && GO111MODULE=off GOCACHE="$work/gocache" go build -o "$work/go-webhook" .)
certs/gen-dev-certs.sh "$work/certs" >/dev/null
review=tests/fixtures/admission/maasmachinetemplate_create.json
path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# capmaas
cport=$(free_port)
"${server_cpu[@]}" build-bench/capmaas --webhooks-only --webhook-host 127.0.0.1 --webhook-port "$cport" \
  --webhook-cert-dir "$work/certs" --webhook-threads 2 --health-addr 0 \
  --metrics-bind-addr 0 2>"$work/capmaas.log" &
pids+=("$!")
for _ in $(seq 100); do grep -qs '"serving"' "$work/capmaas.log" && break; sleep 0.05; done

# Go
gport=$(free_port)
GOMAXPROCS=2 "${server_cpu[@]}" "$work/go-webhook" -addr "127.0.0.1:$gport" \
  -cert "$work/certs/tls.crt" -key "$work/certs/tls.key" >"$work/go.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do grep -qs '^serving' "$work/go.log" && break; sleep 0.05; done

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
  client_body_buffer_size 64k;
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

# Both webhooks must allow the review (same validation, same answer).
for port in "$cport" "$gport"; do
  curl -sS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$review" "https://127.0.0.1:$port$path" | grep -q '"allowed":true' ||
    { echo "webhook on port $port did not allow the review" >&2; exit 1; }
done

h2() { "${client_cpu[@]}" h2load --h1 -c 16 -t 1 -d "$review" -H 'Content-Type: application/json' "$@"; }

run_once() { # name port round [h2load args] -> "req/s p50_ms p99_ms"
  local name=$1 port=$2 round=$3 out rps p50 p99
  shift 3
  out=$(h2 -n "$n" --log-file "$work/$name.$round.tsv" "$@" "https://127.0.0.1:$port$path")
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

for port in "$cport" "$gport" "$nport"; do  # warm-up
  h2 -n 2000 "https://127.0.0.1:$port$path" >/dev/null 2>&1
done
for r in $(seq "$rounds"); do
  run_once capmaas "$cport" "$r" >>"$work/capmaas.rounds"
  run_once go "$gport" "$r" >>"$work/go.rounds"
  run_once nginx "$nport" "$r" >>"$work/nginx.rounds"
done
read -r crps cp50 cp99 < <(median_of <"$work/capmaas.rounds")
read -r grps gp50 gp99 < <(median_of <"$work/go.rounds")
read -r nrps np50 np99 < <(median_of <"$work/nginx.rounds")

# Latency at half the peak rate: h2load --rps is per connection.
half=$(awk -v r="$crps" 'BEGIN {v = r / 2 / 16; printf "%d", (v < 1 ? 1 : v)}')
read -r _ hp50 hp99 < <(run_once capmaas-half "$cport" 1 --rps "$half")

for s in "capmaas $crps $cp50 $cp99 capmaas" "go $grps $gp50 $gp99 go" "nginx $nrps $np50 $np99 nginx"; do
  read -r name rps p50 p99 file <<<"$s"
  printf '%-8s %10.0f req/s   p50 %6.3f ms   p99 %6.3f ms   (rounds: %s)\n' "$name" "$rps" \
    "$p50" "$p99" "$(awk '{printf "%.0f ", $1}' "$work/$file.rounds")"
done
printf 'capmaas at half peak (%d req/s/conn x 16): p50 %.3f ms  p99 %.3f ms\n' "$half" "$hp50" "$hp99"
ratio=$(awk -v a="$crps" -v b="$grps" 'BEGIN {printf "%.2f", a/b}')
printf 'webhook: capmaas=%.0f go=%.0f nginx=%.0f ratio_go=%s p99_ms=%s\n' "$crps" "$grps" "$nrps" \
  "$ratio" "$hp99"
