# shellcheck shell=bash
# Sourced by scripts/test and scripts/run: makes sure the Debian packages capmaas needs are
# installed. As root it installs what is missing; otherwise it prints the exact command.

CAPMAAS_PACKAGES=(build-essential cmake pkg-config openssl
  libmicrohttpd-dev libgnutls28-dev libcjson-dev libcurl4-gnutls-dev libyaml-dev libcmocka-dev
  clang libclang-rt-14-dev curl nghttp2-client python3-kubernetes python3-yaml)
# scripts/test only: promtool checks and unit-tests config/prometheus's alert rules and the
# dashboard's queries; prometheus itself scrapes the stack in test_e2e_prometheus.sh.
CAPMAAS_TEST_PACKAGES=(prometheus)
# scripts/image: builds capmaas (Release, no tests) and
# assembles the image's root filesystem (strip from binutils, the dlopen'ed libcurl-gnutls,
# the CA bundle).
CAPMAAS_IMAGE_PACKAGES=(build-essential cmake pkg-config libmicrohttpd-dev libgnutls28-dev
  libcjson-dev libcurl4-gnutls-dev libyaml-dev binutils libcurl3-gnutls
  ca-certificates)
# tests/image: umoci unpacks the archive, curl posts a review, openssl makes the certificates,
# python3 reads the JSON.
CAPMAAS_IMAGE_TEST_PACKAGES=(umoci curl openssl python3)

capmaas_missing_packages() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  echo "${missing[@]}"
}

capmaas_ensure_packages() {
  local missing
  missing=$(capmaas_missing_packages "$@")
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "capmaas needs these Debian packages; install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y $missing" >&2
    return 1
  fi
  echo "installing: $missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } >&2
}
