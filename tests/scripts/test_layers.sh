#!/usr/bin/env bash
# The build enforces the layers (docs/architecture.md): a file of one library that includes
# a header of a layer it may not see does not compile, and scripts/lint names the rule.
# Each probe is compiled with the exact command the build uses for a file of that library
# (compile_commands.json); a probe including an allowed header must compile, so a failure
# means the edge, not a broken command.
set -euo pipefail
src=${CAPMAAS_SOURCE_DIR:?}
build=${CAPMAAS_BUILD_DIR:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0

# The compile command of the first file under folder $1, with -o and -c dropped.
command_for() {
  python3 - "$build/compile_commands.json" "$src/$1/" <<'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].startswith(sys.argv[2]):
        args = shlex.split(e["command"])
        out, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c"):
                skip = a == "-o"
                continue
            if a == e["file"]:
                continue
            out.append(a)
        print(shlex.join(out))
        break
PY
}

# probe LAYER HEADER want(ok|fail)
probe() {
  local layer=$1 header=$2 want=$3 cmd got
  cmd=$(command_for "$layer")
  [ -n "$cmd" ] || { echo "FAIL: no compile command for $layer/"; fails=$((fails + 1)); return; }
  printf '#include "%s"\nint layer_probe(void);\nint layer_probe(void) { return 0; }\n' \
    "$header" >"$work/probe.c"
  if (cd "$build" && eval "$cmd -fsyntax-only $work/probe.c") >"$work/out" 2>&1; then
    got=ok
  else
    got=fail
  fi
  if [ "$got" = "$want" ]; then
    echo "ok: $layer/ including $header: $([ "$want" = ok ] && echo compiles || echo refused)"
  else
    echo "FAIL: $layer/ including $header: wanted $want, got $got"; cat "$work/out"
    fails=$((fails + 1))
  fi
}

probe webhooks informer.h fail      # the Kubernetes runtime is not the webhooks' to see
probe webhooks kube_client.h fail
probe webhooks provider.h fail      # nor the reconcilers
probe webhooks maas_inventory.h ok  # the inventory is
probe reconcile webhooks.h fail     # the reconcilers never see the webhooks
probe reconcile admission.h fail
probe reconcile informer.h ok
probe kube maas_client.h fail       # the runtime is general: no MAAS,
probe kube schema.h fail            # no provider schema
probe kube buf.h ok
probe maas informer.h fail          # the MAAS client and the runtime are peers
probe base json.h ok
probe base metrics.h ok
probe base http_server.h fail       # base sees nothing above it
probe schema maas_client.h fail
probe http config.h fail            # nothing below the process sees its configuration

# scripts/lint names the rule for the same mistake, before any build.
copy=$work/tree
mkdir -p "$copy"
(cd "$src" && tar cf - scripts include base http maas kube schema webhooks reconcile server) |
  (cd "$copy" && tar xf -)
sed -i '1i #include "informer.h"' "$copy/webhooks/defaults.c"
out=$(cd "$copy" && bash -c '. scripts/layers.sh && capmaas_check_layers' 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ] && [[ "$out" == *"webhooks layer may not include informer.h (the kube layer)"* ]]; then
  echo "ok: the lint rule names the forbidden edge"
else
  echo "FAIL: the lint rule did not name the forbidden edge: $out"; fails=$((fails + 1))
fi
out=$(cd "$src" && bash -c '. scripts/layers.sh && capmaas_check_layers' 2>&1) ||
  { echo "FAIL: the tree breaks the layer rule: $out"; fails=$((fails + 1)); }

if [ "$fails" -ne 0 ]; then
  echo "layers: $fails failed"
  exit 1
fi
echo "layers: all probes as expected"
