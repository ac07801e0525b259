#!/usr/bin/env bash
# The build enforces the layers (docs/architecture.md): a file of one library that includes
# a header of a layer it may not see does not compile, and scripts/lint names the rule; and
# no two files of a library call each other; and capmaas links no library beyond its own.
# Each probe is compiled with the exact command the build uses for a file of that library
# (compile_commands.json); a probe including an allowed header must compile, so a failure
# means the edge, not a broken command.
set -euo pipefail
src=${CAPMAAS_SOURCE_DIR:?}
build=${CAPMAAS_BUILD_DIR:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0

# The compile command of one file of each layer, with -o, -c and the file dropped:
# "layer<TAB>command" lines.
python3 - "$build/compile_commands.json" "$src" >"$work/commands" <<'PY'
import json, shlex, sys
seen = {}
for e in json.load(open(sys.argv[1])):
    rel = e["file"][len(sys.argv[2]) + 1:] if e["file"].startswith(sys.argv[2] + "/") else ""
    layer = rel.split("/")[0] if "/" in rel else ""
    if not layer or layer in seen or layer == "tests":
        continue
    args, out, skip = shlex.split(e["command"]), [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-c"):
            skip = a == "-o"
        elif a != e["file"]:
            out.append(a)
    seen[layer] = shlex.join(out)
for layer, cmd in seen.items():
    print(layer + "\t" + cmd)
PY

# Each probe compiles in the background; the results are read in order below.
n=0
probe() {
  local layer=$1 header=$2 want=$3 cmd
  n=$((n + 1))
  cmd=$(awk -F'\t' -v l="$layer" '$1 == l { print $2 }' "$work/commands")
  printf '%s %s %s\n' "$layer" "$header" "$want" >"$work/probe$n.what"
  if [ -z "$cmd" ]; then
    echo nocmd >"$work/probe$n.got"
    return
  fi
  printf '#include "%s"\nint layer_probe(void);\nint layer_probe(void) { return 0; }\n' \
    "$header" >"$work/probe$n.c"
  (
    if (cd "$build" && eval "$cmd -fsyntax-only $work/probe$n.c") >"$work/probe$n.out" 2>&1; then
      echo ok >"$work/probe$n.got"
    elif grep -Eq "$header: No such file|'$header' file not found" "$work/probe$n.out"; then
      echo fail >"$work/probe$n.got" # refused because the header is not on its path
    else
      echo error >"$work/probe$n.got"
    fi
  ) &
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
wait
for i in $(seq 1 "$n"); do
  read -r layer header want <"$work/probe$i.what"
  got=$(cat "$work/probe$i.got")
  if [ "$got" = "$want" ]; then
    echo "ok: $layer/ including $header: $([ "$want" = ok ] && echo compiles || echo refused)"
  else
    echo "FAIL: $layer/ including $header: wanted $want, got $got"
    cat "$work/probe$i.out" 2>/dev/null || true
    fails=$((fails + 1))
  fi
done

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

# No circles: within a library no two files call each other (nm on the build's objects:
# a uses a symbol b defines and b one a defines). Lower layers never call up by construction.
circles=$(python3 - "$build" <<'PY'
import glob, itertools, os, subprocess, sys
build = sys.argv[1]
for lib in ["base", "http", "maas", "kube", "schema", "webhooks", "reconcile", "server"]:
    defs, uses = {}, {}
    for o in sorted(glob.glob(f"{build}/CMakeFiles/{lib}.dir/{lib}/*.o")):
        name = os.path.basename(o)[: -len(".c.o")]
        rows = [l.split() for l in subprocess.check_output(["nm", o], text=True).splitlines()]
        defs[name] = {r[2] for r in rows if len(r) == 3 and r[1] in "TDRBC"}
        uses[name] = {r[1] for r in rows if len(r) == 2 and r[0] == "U"}
    if not defs:
        print(f"{lib}: no objects")
    for a, b in itertools.combinations(sorted(defs), 2):
        if uses[a] & defs[b] and uses[b] & defs[a]:
            print(f"{lib}: {a}.c and {b}.c call each other "
                  f"({min(uses[a] & defs[b])}, {min(uses[b] & defs[a])})")
PY
)
if [ -n "$circles" ]; then
  echo "FAIL: $circles"
  fails=$((fails + 1))
else
  echo "ok: no two files of a library call each other"
fi

# capmaas's own libraries: the packages the README names and libc, nothing more (each one
# joins the container image's root filesystem, whose budget is 20 MB: docs/image.md).
# libcurl is loaded on first use, so it is not among them.
# A sanitized build adds its runtimes (and their libm): only a plain build is looked at.
needed=$(readelf -d "$build/capmaas" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
allowed="libc.so.6 libcjson.so.1 libgnutls.so.30 libmicrohttpd.so.12 libyaml-0.so.2 "
if grep -q '^SANITIZE:STRING=.' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "ok: capmaas's libraries not checked in a sanitized build"
elif [ "$needed" = "$allowed" ]; then
  echo "ok: capmaas needs only $needed"
else
  echo "FAIL: capmaas needs [$needed], allowed [$allowed]"
  fails=$((fails + 1))
fi

if [ "$fails" -ne 0 ]; then
  echo "layers: $fails failed"
  exit 1
fi
echo "layers: all probes as expected"
