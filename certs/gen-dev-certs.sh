#!/usr/bin/env bash
# Writes a development CA and a webhook serving certificate into DIR:
#   DIR/ca.crt  DIR/ca.key            the throwaway CA
#   DIR/tls.crt DIR/tls.key           serving certificate (controller-runtime file names)
# SANs: 127.0.0.1, localhost, capmaas-webhook-service.capmaas-system.svc and
# …svc.cluster.local. Keys are EC P-256. Nothing here is for production: use cert-manager.
#
# With --keep-ca an existing DIR/ca.crt + DIR/ca.key sign the new serving certificate (a
# rotation, as cert-manager does it); otherwise a new CA is made.
#
# usage: certs/gen-dev-certs.sh [--keep-ca] DIR [DAYS]
set -euo pipefail
keep_ca=0
if [ "${1:-}" = "--keep-ca" ]; then keep_ca=1; shift; fi
dir=${1:?usage: gen-dev-certs.sh [--keep-ca] DIR [DAYS]}
days=${2:-30}
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

svc=capmaas-webhook-service.capmaas-system.svc
if [ "$keep_ca" = 1 ] && [ -s "$dir/ca.crt" ] && [ -s "$dir/ca.key" ]; then
  cp "$dir/ca.crt" "$dir/ca.key" "$tmp/"
else
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$tmp/ca.key" -out "$tmp/ca.crt" -days "$days" \
  -subj "/CN=capmaas development CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$tmp/tls.key" -out "$tmp/tls.csr" -subj "/CN=$svc" 2>/dev/null
cat > "$tmp/ext.cnf" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$svc,DNS:$svc.cluster.local
EXT
openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" \
  -CAcreateserial -days "$days" -extfile "$tmp/ext.cnf" -out "$tmp/tls.crt" 2>/dev/null
chmod 600 "$tmp/ca.key" "$tmp/tls.key"
# Move into place key first, then certificate, each with an atomic rename, so a server
# watching DIR never reads a half-written file.
for f in ca.key ca.crt tls.key tls.crt; do
  cp "$tmp/$f" "$dir/.$f.new" && mv -f "$dir/.$f.new" "$dir/$f"
done
echo "certificates written to $dir (CA: $dir/ca.crt)"
