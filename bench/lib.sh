# shellcheck shell=bash
# Shared by the bench/ scripts (sourced after `cd` to the repository root):
# packages, CPU pinning, a work directory cleaned up on exit, the capmaas and nginx servers,
# and one measured h2load round. Callers set $review (request body file) and $path (URL
# path) before calling bench_round.

. scripts/deps.sh

# bench_setup PACKAGE…: installs what is missing, pins servers to CPU 0 and the client to
# CPU 1 (when there are two), builds capmaas (Release) in $CAPMAAS_BENCH_BUILD_DIR (default
# build-bench) and makes certificates. $CAPMAAS_BENCH_BIN, when set, is the capmaas binary
# to measure instead of the one built (another tree's build, to compare in the same
# conditions).
bench_setup() {
  bdir=${CAPMAAS_BENCH_BUILD_DIR:-build-bench}
  capmaas_ensure_packages "${CAPMAAS_PACKAGES[@]}" nginx-light nghttp2-client "$@"
  server_cpu=(); client_cpu=(); server_cpus=$(nproc)
  if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); server_cpus=1
  fi
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
  cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$bdir" -j"$(nproc)" --target capmaas >/dev/null
  capmaas_bin=${CAPMAAS_BENCH_BIN:-$bdir/capmaas}
  certs/gen-dev-certs.sh "$work/certs" >/dev/null
}

# bench_build_sim TARGET…: builds the targets (RelWithDebInfo) in $BUILD (default
# build-bench) for the scripts that run capmaas against the simulators; sets SRC (the
# repository root, as scripts/stack.sh wants it), BUILD and PY.
bench_build_sim() {
  SRC=$PWD
  BUILD=${BUILD:-$SRC/build-bench}
  # shellcheck disable=SC2034 # for the caller
  PY=/usr/bin/python3
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build "$BUILD" -j"$(nproc)" --target "$@" >/dev/null
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_capmaas PORT: --webhooks-only with the default thread count (one event loop per
# CPU of its affinity mask: 1 when pinned), plus the words of $CAPMAAS_BENCH_ARGS (to try a
# flag, e.g. --webhook-threads 2); waits for it to serve.
start_capmaas() {
  # shellcheck disable=SC2086 # word splitting of CAPMAAS_BENCH_ARGS is the point
  "${server_cpu[@]}" "$capmaas_bin" --webhooks-only --webhook-host 127.0.0.1 \
    --webhook-port "$1" --webhook-cert-dir "$work/certs" \
    --health-addr 0 --diagnostics-address 0 ${CAPMAAS_BENCH_ARGS:-} 2>"$work/capmaas.log" &
  capmaas_pid=$!
  pids+=("$capmaas_pid")
  for _ in $(seq 100); do grep -qs '"serving"' "$work/capmaas.log" && break; sleep 0.05; done
}

# start_nginx PORT: one worker per server CPU (nginx's default of 1: the servers share CPU 0)
# answering every request with a fixed AdmissionReview.
start_nginx() {
  mkdir -p "$work/nginx/logs"
  cat > "$work/nginx/nginx.conf" <<CONF
worker_processes $server_cpus;
error_log $work/nginx/logs/error.log error;
pid $work/nginx/nginx.pid;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_buffer_size 64k;
  server {
    listen 127.0.0.1:$1 ssl;
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
}

h2() {
  "${client_cpu[@]}" h2load --h1 -c 16 -t 1 -d "$review" -H 'Content-Type: application/json' "$@"
}

bench_warmup() { # PORT…
  for port in "$@"; do h2 -n 2000 "https://127.0.0.1:$port$path" >/dev/null 2>&1; done
}

# server_cpu_ns PORT: CPU time (user + system, nanoseconds, from each thread's schedstat)
# used so far by the processes holding the listening socket of PORT (nginx: master and
# workers). Clock ticks (/proc/PID/stat) are 10 ms: a round of 30 000 requests is about 60
# of them, too coarse for a 10 % difference.
server_cpu_ns() {
  local p t=0 v
  for p in $(ss -Htlnp "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    v=$(cat /proc/"$p"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}')
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

# bench_round NAME PORT ROUND [h2load args] -> "req/s p50_ms p99_ms cpu_us_per_req"; fails
# unless every one of the $n requests got a 2xx. cpu_us_per_req is the server's CPU time
# (user + system) over the round divided by the requests: unlike req/s it hardly moves when
# other work shares the machine.
bench_round() {
  local name=$1 port=$2 round=$3 out rps p50 p99 t0 t1 cpu
  shift 3
  t0=$(server_cpu_ns "$port")
  out=$(h2 -n "$n" --log-file "$work/$name.$round.tsv" "$@" "https://127.0.0.1:$port$path")
  t1=$(server_cpu_ns "$port")
  cpu=$(awk -v t=$((t1 - t0)) -v n="$n" 'BEGIN {printf "%.2f", t / 1e3 / n}')
  if ! grep -q "0 failed, 0 errored" <<<"$out" ||
     ! grep -q "status codes: $n 2xx" <<<"$out"; then
    echo "$name: requests failed" >&2; echo "$out" >&2; exit 1
  fi
  rps=$(awk '/^finished in/ {gsub(",",""); print $4}' <<<"$out")
  # log columns: start time (us), status, duration (us)
  read -r p50 p99 < <(awk '{print $3}' "$work/$name.$round.tsv" | sort -n |
    awk '{a[NR]=$1} END {printf "%.3f %.3f\n", a[int(NR*0.50)]/1000, a[int(NR*0.99)]/1000}')
  echo "$rps $p50 $p99 $cpu"
}

# tls_params PORT: "protocol cipher" that h2load negotiated with the server on PORT.
tls_params() {
  h2 -n 16 "https://127.0.0.1:$1$path" 2>/dev/null |
    awk '/^TLS Protocol:/ {p = $3} /^Cipher:/ {c = $2} END {print p, c}'
}

median_of() { sort -n -k1,1 | awk '{l[NR]=$0} END {print l[int((NR+1)/2)]}'; }

# bench_report NAME: prints the median line of NAME's rounds file (by req/s) and the median
# CPU time per request over the rounds; sets rps p50 p99 cpu.
bench_report() {
  read -r rps p50 p99 _ < <(median_of <"$work/$1.rounds")
  cpu=$(awk '{print $4}' "$work/$1.rounds" | sort -n | awk '{l[NR]=$0} END {print l[int((NR+1)/2)]}')
  printf '%-8s %10.0f req/s   p50 %6.3f ms   p99 %6.3f ms   cpu %6.2f us/req   (rounds: %s)\n' \
    "$1" "$rps" "$p50" "$p99" "$cpu" "$(awk '{printf "%.0f ", $1}' "$work/$1.rounds")"
}
