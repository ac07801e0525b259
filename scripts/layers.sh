# shellcheck shell=bash
# The layer rule (docs/architecture.md), sourced by scripts/lint and tests/scripts/test_layers.sh:
# each library may include the public headers (include/<layer>/) of the layers listed here,
# its own, and the private headers beside its sources. Nothing else.
declare -A CAPMAAS_LAYER_DEPS=(
  [base]=""
  [http]="base"
  [maas]="base"
  [kube]="base"
  [schema]="base"
  [webhooks]="base http schema maas"
  [reconcile]="base kube schema maas"
  [server]="base http maas kube schema webhooks reconcile"
)
CAPMAAS_LAYERS="base http maas kube schema webhooks reconcile server"

# Prints "file:line: <layer> may not include <header> (<owner> layer)" for every include
# across a forbidden edge in the layer folders; returns 1 when there is any.
capmaas_check_layers() {
  local status=0 layer f line hdr owner allowed
  declare -A owner_of=()
  for layer in $CAPMAAS_LAYERS; do
    for f in include/"$layer"/*.h; do
      [ -e "$f" ] && owner_of[$(basename "$f")]=$layer
    done
  done
  for layer in $CAPMAAS_LAYERS; do
    allowed=" $layer ${CAPMAAS_LAYER_DEPS[$layer]} "
    for f in "$layer"/*.[ch]; do
      [ -e "$f" ] || continue
      while IFS=: read -r line hdr; do
        hdr=${hdr#*\"}; hdr=${hdr%\"*}
        [ -e "$layer/$hdr" ] && continue # a private header beside the sources
        owner=${owner_of[$(basename "$hdr")]:-}
        [ -z "$owner" ] && continue # not one of ours
        if [[ "$allowed" != *" $owner "* ]]; then
          echo "$f:$line: the $layer layer may not include $hdr (the $owner layer);" \
            "$layer sees only: ${CAPMAAS_LAYER_DEPS[$layer]:-nothing but itself}" >&2
          status=1
        fi
      done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | cut -d: -f1,2-)
    done
  done
  return $status
}
