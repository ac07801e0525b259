#!/usr/bin/env bash
# maas-sim conformance (maas-api.md §9), checked by clients independent of our C MAAS client:
# curl with a hand-built OAuth PLAINTEXT header, and Python's standard library (urllib).
# Needs the maas-sim binary in $CAPMAAS_BUILD_DIR (build the maas-sim target first).
set -euo pipefail
src=${CAPMAAS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
sim=${CAPMAAS_BUILD_DIR:-$src/build}/maas-sim
[[ -x $sim ]] || { echo "maas-sim not built: $sim" >&2; exit 1; }
tmp=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

mkfifo "$tmp/out"
"$sim" --port 0 --inventory "$src/tests/sim/maas/inventory-sample.yaml" \
  --api-key ck:tk:secret1 --api-key ck2:tk2:secret2 \
  --deploy-seconds 0.3 --release-seconds 0.2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3<"$tmp/out"
read -r -t 10 line <&3 || { echo "maas-sim did not start"; cat "$tmp/err"; exit 1; }
url=${line#listening on }
[[ $url == http://127.0.0.1:*/MAAS ]] || { echo "bad first line: $line"; exit 1; }
api=$url/api/2.0

# --- curl with a hand-built header -------------------------------------------------------
auth() { # consumer token secret
  printf 'Authorization: OAuth oauth_nonce="%s", oauth_signature="%%26%s", realm="MAAS+API", oauth_consumer_key="%s", oauth_token="%s", oauth_signature_method="PLAINTEXT", oauth_timestamp="%s", oauth_version="1.0"' \
    "$RANDOM$RANDOM" "$3" "$1" "$2" "$(date +%s)"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { # expected-status expected-body-substring curl-args...
  local want=$1 text=$2; shift 2
  local got
  got=$(curl -s -o "$tmp/body" -w '%{http_code}' "$@")
  [[ $got == "$want" ]] || fail "$* -> $got (want $want): $(cat "$tmp/body")"
  grep -qF -- "$text" "$tmp/body" || fail "$* -> body lacks '$text': $(cat "$tmp/body")"
}
A=$(auth ck tk secret1)
check 404 "Unknown API endpoint: /MAAS/api/2.0/machines." -H "$A" "$api/machines"
check 404 "Unknown API endpoint: /MAAS/api/2.0/nothing/." -H "$A" "$api/nothing/"
check 200 '"subversion"' -H "$(auth bad bad bad)" "$api/version/"
check 401 "" "$api/machines/"
check 401 "Authorization Error: Invalid API key." -H "$(auth nope tk secret1)" "$api/machines/"
check 401 "Invalid access token: tk9" -H "$(auth ck tk9 secret1)" "$api/machines/"
check 401 "Invalid signature" -H "$(auth ck tk wrong)" "$api/machines/"
check 200 '"username":"admin"' -H "$A" "$api/users/?op=whoami"
check 410 "" -H "$A" "$url/api/1.0/machines/"
check 400 "Unrecognised signature: method=POST op=frobnicate" -H "$A" -X POST "$api/machines/?op=frobnicate"
check 400 "Unrecognised signature: method=DELETE op=None" -H "$A" -X DELETE "$api/machines/"
check 200 '"name":"capi"' -H "$A" "$api/pools/"
check 200 '"name":"capi"' -H "$A" "$api/resourcepools/"
check 200 '"name":"capi"' -H "$A" "$api/resourcepool/1/"
check 404 "No Zone matches the given query." -H "$A" "$api/zones/nope/"
check 200 'u-2204-0-k-1264-0' -H "$A" "$api/boot-resources/?type=uploaded"
check 400 "'x' is not a valid boot resource type" -H "$A" "$api/boot-resources/?type=x"
grep -q WWW-Authenticate < <(curl -s -i "$api/machines/") || fail "401 without WWW-Authenticate"
# multipart body (MAAS CLI style): op and constraints as form parts
check 200 '"constraints_by_type":{}' -H "$A" -F op=allocate -F tags=gpu -F zone=az1 \
  -F agent_name=mp-test "$api/machines/"
echo "curl checks passed"

# --- Python standard library ------------------------------------------------------------
API="$api" ADMIN="$url/.." python3 - <<'PY'
import json, os, random, time, urllib.error, urllib.parse, urllib.request

API = os.environ["API"]
ROOT = API.split("/MAAS/")[0]

def header(ck="ck", tk="tk", secret="secret1"):
    fields = [("oauth_consumer_key", ck), ("oauth_token", tk),
              ("oauth_signature_method", "PLAINTEXT"),
              ("oauth_signature", "&" + secret), ("oauth_timestamp", str(int(time.time()))),
              ("oauth_nonce", str(random.getrandbits(64))), ("oauth_version", "1.0")]
    random.shuffle(fields)
    return "OAuth " + ", ".join('%s="%s"' % (k, urllib.parse.quote(v, safe="")) for k, v in fields)

def call(method, path, params=None, query=None, user=("ck", "tk", "secret1"), url=None):
    url = url or API + "/" + path
    if query:
        url += "?" + urllib.parse.urlencode(query, doseq=True)
    data = urllib.parse.urlencode(params or {}, doseq=True).encode() if params is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if user:
        req.add_header("Authorization", header(*user))
    if data is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)

def ok(cond, msg):
    if not cond:
        raise SystemExit("FAIL: " + msg)

def js(status, body, want=200):
    ok(status == want, "status %d (want %d): %s" % (status, want, body))
    return json.loads(body) if body else None

def admin(method, path, doc=None):
    data = json.dumps(doc).encode() if doc is not None else None
    req = urllib.request.Request(ROOT + "/_sim/" + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read().decode()
        return json.loads(body) if body.startswith("{") else body

def wait_status(sid, want, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        m = js(*call("GET", "machines/%s/" % sid)[:2])
        if m["status_name"] == want:
            return m
        time.sleep(0.05)
    raise SystemExit("FAIL: %s never reached %s (last %s)" % (sid, want, m["status_name"]))

# §6.1 keys gomaasapi requires, with types
REQUIRED = {"resource_uri": str, "system_id": str, "hostname": str, "fqdn": str,
            "tag_names": list, "owner_data": dict, "osystem": str, "distro_series": str,
            "memory": int, "cpu_count": int, "hardware_info": dict, "ip_addresses": list,
            "power_state": str, "status_name": str, "interface_set": list, "zone": dict,
            "physicalblockdevice_set": list, "blockdevice_set": list, "status": int,
            "storage": float, "pool": dict, "domain": dict, "ephemeral_deploy": bool,
            "power_type": str, "locked": bool, "netboot": bool, "node_type": int}
machines = js(*call("GET", "machines/")[:2])
ok(len(machines) >= 20, "inventory has >= 20 machines")
for m in machines:
    for k, t in REQUIRED.items():
        ok(isinstance(m.get(k), t), "machine key %s has type %s" % (k, t.__name__))
    ok(m["resource_uri"] == "/MAAS/api/2.0/machines/%s/" % m["system_id"], "absolute resource_uri")
    ok(all(isinstance(v, str) for v in m["hardware_info"].values()), "hardware_info strings")
    for i in m["interface_set"]:
        for k in ("resource_uri", "id", "name", "type", "enabled", "links", "effective_mtu",
                  "parents", "children"):
            ok(k in i, "interface key " + k)
ok(len({m["zone"]["name"] for m in machines}) == 3, "3 zones used")

# list filters: id repeated, zone, tags (all), pool, unknown name -> 400
ids = [machines[0]["system_id"], machines[1]["system_id"]]
got = js(*call("GET", "machines/", query={"id": ids})[:2])
ok(sorted(m["system_id"] for m in got) == sorted(ids), "id filter repeated")
got = js(*call("GET", "machines/", query={"zone": "az2", "tags": ["ssd"]})[:2])
ok(got and all(m["zone"]["name"] == "az2" and "ssd" in m["tag_names"] for m in got), "zone+tag filter")
s, b, _ = call("GET", "machines/", query={"foo": "1"})
ok(s == 400 and json.loads(b) == {"foo": ["No such constraint."]}, "unknown filter 400: " + b)
ok(js(*call("GET", "machines/", query={"id": "zzzzzz"})[:2]) == [], "unknown id -> []")

# allocate: errors
s, b, _ = call("POST", "machines/", {"cpu_count": "999"}, query={"op": "allocate"})
ok(s == 409 and b.startswith("No available machine matches constraints: [('cpu_count', ['999'])]"), b)
s, b, _ = call("POST", "machines/", {"op": "allocate", "system_id": "zzzzzz"})
ok(s == 409 and b == "No machine with system ID zzzzzz available.", b)
s, b, _ = call("POST", "machines/", {"zone": "nope"}, query={"op": "allocate"})
ok(s == 400 and json.loads(b) == {"zone": ["No such zone: 'nope'."]}, b)
s, b, _ = call("POST", "machines/", {"pool": "nope"}, query={"op": "allocate"})
ok(s == 400 and json.loads(b) == {"pool": ["No such pool: 'nope'."]}, b)
s, b, _ = call("POST", "machines/", {"tags": ["ssd", "x1", "x2"]}, query={"op": "allocate"})
ok(s == 400 and json.loads(b) == {"tags": ["No such tag(s): 'x1', 'x2'."]}, b)
s, b, _ = call("POST", "machines/", {"ephemeral_deploy": "true"}, query={"op": "allocate"})
ok(s == 400 and json.loads(b) == {"ephemeral_deploy": ["No such constraint."]}, b)

# allocate: all tags (repeated and comma form), min cpu/mem, cheapest first, not_pod accepted
m = js(*call("POST", "machines/", {"tags": ["ssd", "control-plane"], "cpu_count": "4",
                                   "mem": "8000", "not_pod": "true", "not_pod_type": "lxd",
                                   "agent_name": "uid-1", "pool": "capi"},
             query={"op": "allocate"})[:2])
ok(m["constraints_by_type"] == {}, "constraints_by_type {}")
ok({"ssd", "control-plane"} <= set(m["tag_names"]) and m["cpu_count"] >= 4, "constraints honoured")
cands = [x for x in machines if {"ssd", "control-plane"} <= set(x["tag_names"])
         and x["cpu_count"] >= 4 and x["memory"] >= 8000 and x["pool"]["name"] == "capi"]
cheap = min(x["cpu_count"] + x["memory"] / 1024 for x in cands)
ok(m["cpu_count"] + m["memory"] / 1024 == cheap, "cheapest machine chosen")
ok(m["status_name"] == "Allocated" and m["owner"] == "admin", "allocated to admin")
sid = m["system_id"]
state = admin("GET", "state")
ok([x for x in state["machines"] if x["system_id"] == sid][0]["agent_name"] == "uid-1", "agent_name stored")
s, b, _ = call("POST", "machines/", {"tags": "ssd,control-plane"}, query={"op": "allocate", "dry_run": "true"})
m2 = js(s, b)
ok({"ssd", "control-plane"} <= set(m2["tag_names"]) and m2["status_name"] == "Ready", "dry_run + comma tags")

# 403: another (non-admin) user may not release admin's machine
s, b, _ = call("POST", "machines/%s/" % sid, {"op": "release"}, user=("ck2", "tk2", "secret2"))
ok(s == 403, "403 for other user's machine: %d %s" % (s, b))

# deploy: custom image, user_data verbatim, ephemeral; Deploying -> Deployed
s, b, _ = call("POST", "machines/%s/" % sid, {"distro_series": "nope"}, query={"op": "deploy"})
ok(s == 400 and "'nope' is not a valid distro_series" in json.loads(b)["distro_series"][0], b)
m = js(*call("POST", "machines/%s/" % sid, {"op": "deploy", "osystem": "custom",
                                            "distro_series": "u-2204-0-k-1264-0",
                                            "user_data": "I2Nsb3VkLWNvbmZpZw==",
                                            "ephemeral_deploy": "false"})[:2])
ok(m["status"] == 9 and m["status_name"] == "Deploying", "Deploying after deploy")
ok(m["osystem"] == "custom" and m["distro_series"] == "u-2204-0-k-1264-0", "custom image stored")
s, b, _ = call("POST", "machines/%s/" % sid, {"op": "deploy"})
ok(s == 409 and b == "Can't deploy a machine that is in the 'Deploying' state", b)
m = wait_status(sid, "Deployed")
ok(m["power_state"] == "on" and m["ip_addresses"], "Deployed: power on, IPs")
st = [x for x in admin("GET", "state")["machines"] if x["system_id"] == sid][0]
ok(st["user_data"] == "I2Nsb3VkLWNvbmZpZw==", "user_data verbatim")

# power ops in all three op forms; query_power_state
m = js(*call("POST", "machines/%s/op-power_off" % sid, {})[:2])
ok(m["power_state"] == "off", "power_off via /op-")
ok(js(*call("GET", "machines/%s/" % sid, query={"op": "query_power_state"})[:2]) == {"state": "off"}, "query")
m = js(*call("POST", "machines/%s/" % sid, {"op": "power_on", "comment": "x"})[:2])
ok(m["power_state"] == "on", "power_on via form op")
s, b, _ = call("POST", "machines/%s/" % machines[-1]["system_id"], {"op": "power_on"})
ok(s == 409 and b == "Can't start node: it hasn't been allocated.", b)

# kubelets (capi-sim's Nodes follow them, docs/remediation.md): a power-on of an off machine
# boots it in --boot-seconds (1); "hung" lasts until the next power cycle, "dead" for good
def kubelet_ready_is(sid, want, limit=5.0):
    end = time.time() + limit
    while time.time() < end:
        k = admin("GET", "kubelets").get(sid)
        if k and k["ready"] == want:
            return k
        time.sleep(0.05)
    raise SystemExit("FAIL: %s's kubelet never ready=%s (last %s)" % (sid, want, k))

def cycle(sid):
    js(*call("POST", "machines/%s/" % sid, {"op": "power_off"})[:2])
    ok(admin("GET", "kubelets")[sid]["ready"] is False, "off: not ready")
    js(*call("POST", "machines/%s/" % sid, {"op": "power_on"})[:2])

def admin_status(method, path, doc):
    try:
        admin(method, path, doc)
        return 200
    except urllib.error.HTTPError as e:
        return e.code

kubelet_ready_is(sid, True)
ok(admin("POST", "kubelets", {sid: "hung"}) == "ok\n", "hang a kubelet")
ok(admin("GET", "kubelets")[sid] == {"ready": False, "kubelet": "hung"}, "hung: not ready")
js(*call("POST", "machines/%s/" % sid, {"op": "power_on"})[:2])  # already on: no reboot
ok(admin("GET", "kubelets")[sid]["kubelet"] == "hung", "a power_on of a machine that is on reboots nothing")
cycle(sid)
ok(admin("GET", "kubelets")[sid]["ready"] is False, "booting right after the power-on")
ok(kubelet_ready_is(sid, True)["kubelet"] == "up", "a power cycle clears the hang")
ok(admin("POST", "kubelets", {sid: "dead"}) == "ok\n", "kill a kubelet")
cycle(sid)
time.sleep(1.5)
ok(admin("GET", "kubelets")[sid] == {"ready": False, "kubelet": "dead"}, "dead: a power cycle does not help")
ok(admin("POST", "kubelets", {sid: "up"}) == "ok\n" and kubelet_ready_is(sid, True), "up again")
ok(admin_status("POST", "kubelets", {sid: "sleepy"}) == 400, "an unknown kubelet state is refused")
ok(admin_status("POST", "kubelets", {"nope": "hung"}) == 404, "an unknown machine is refused")
ok(machines[-1]["system_id"] not in admin("GET", "kubelets"), "only Deployed machines have kubelets")

# owner data
m = js(*call("POST", "machines/%s/" % sid, {"op": "set_owner_data", "cluster": "c1", "k": "v"})[:2])
ok(m["owner_data"] == {"cluster": "c1", "k": "v"}, "owner_data set")
m = js(*call("POST", "machines/%s/" % sid, {"op": "set_owner_data", "k": ""})[:2])
ok(m["owner_data"] == {"cluster": "c1"}, "owner_data key deleted")

# update
m = js(*call("PUT", "machines/%s/" % sid, {"swap_size": "0", "hostname": "renamed"})[:2])
ok(m["swap_size"] == 0 and m["hostname"] == "renamed" and m["fqdn"] == "renamed.maas", "PUT update")

# release: single, then Ready with fields cleared; bulk forms
m = js(*call("POST", "machines/%s/" % sid, {"op": "release", "comment": "bye"})[:2])
ok(m["status_name"] == "Releasing", "Releasing: " + m["status_name"])
m = wait_status(sid, "Ready")
ok(m["owner"] is None and m["osystem"] == "" and m["distro_series"] == "" and
   m["owner_data"] == {} and m["ip_addresses"] == [], "release clears fields")
m = js(*call("POST", "machines/%s/" % sid, {"op": "release"})[:2])
ok(m["status_name"] == "Ready", "release of Ready is a no-op")
s, b, _ = call("POST", "machines/", {"machines": ["zzz1", "zzz2"]}, query={"op": "release"})
ok(s == 400 and b == "Unknown machine(s): zzz1, zzz2.", b)
a1 = js(*call("POST", "machines/", {"op": "allocate"})[:2])["system_id"]
got = js(*call("POST", "machines/", {"op": "release", "machines": [a1, sid]})[:2])
ok(got == [a1], "bulk release lists only started ids: %r" % got)

# DNS resources
d = js(*call("POST", "dnsresources/", {"fqdn": "api.maas", "address_ttl": "10", "ip_addresses": ""},
             query={"op": ""})[:2])
ok(d["fqdn"] == "api.maas" and d["address_ttl"] == 10 and d["ip_addresses"] == [], "dns create")
s, b, _ = call("POST", "dnsresources/", {"fqdn": "api.maas"})
ok(s == 400 and json.loads(b) == {"__all__": ["Labels must be unique within their zone."]}, b)
s, b, _ = call("POST", "dnsresources/", {"fqdn": "api.nodomain"})
ok(s == 404, "unknown domain 404")
got = js(*call("GET", "dnsresources/", query={"fqdn": "api.maas"})[:2])
ok(len(got) == 1 and got[0]["id"] == d["id"], "dns list by fqdn")
d2 = js(*call("PUT", "dnsresources/%d/" % d["id"], {"id": str(d["id"]), "ip_addresses": "10.0.0.5 10.0.0.6"})[:2])
ok([i["ip"] for i in d2["ip_addresses"]] == ["10.0.0.5", "10.0.0.6"], "PUT ip_addresses")
d2 = js(*call("PUT", "dnsresources/%d/" % d["id"], {"ip_addresses": "10.0.0.7"})[:2])
ok([i["ip"] for i in d2["ip_addresses"]] == ["10.0.0.7"], "PUT replaces")
s, b, _ = call("PUT", "dnsresources/%d/" % d["id"], {"ip_addresses": "not-an-ip"})
ok(s == 400, "bad ip 400")
s, b, _ = call("DELETE", "dnsresources/%d/" % d["id"])
ok(s == 204 and b == "", "DELETE 204")
s, b, _ = call("GET", "dnsresources/%d/" % d["id"])
ok(s == 404 and b == "No DNSResource matches the given query.", b)

# JSON body, admin faults (503 + Retry-After, Failed deployment, BMC unknown), request log
admin("POST", "faults", {"unavailable": {"count": 2, "retry_after": 1, "op": "zones.read"}})
s, b, h = call("GET", "zones/")
ok(s == 503 and h.get("Retry-After") == "1", "503 with Retry-After")
call("GET", "zones/")
ok(call("GET", "zones/")[0] == 200, "fault count exhausted")
victim = machines[2]["system_id"]
admin("POST", "faults", {"fail_deploy": [victim], "bmc_unknown": [victim]})
js(*call("POST", "machines/%s/" % victim, {"op": "deploy"})[:2])
wait_status(victim, "Failed deployment")
ok(js(*call("GET", "machines/%s/" % victim, query={"op": "query_power_state"})[:2]) == {"state": "unknown"}, "bmc unknown")
admin("POST", "pools", {"name": "late", "description": "added at run time"})
ok("late" in [p["name"] for p in js(*call("GET", "resourcepools/")[:2])], "pool added at run time")
log = admin("GET", "requests")
ok(any(r["op"] == "deploy" and r["status"] == 200 for r in log["requests"]), "request log")
admin("POST", "reset-log")
ok(admin("GET", "requests")["count"] == 0, "reset-log")
# deploy and allocation options (docs/deploy-options.md): allocate's storage, arch, not_tags;
# set_storage_layout only on Ready machines, by an administrator; deploy's hwe_kernel
ready = [x for x in js(*call("GET", "machines/")[:2]) if x["status_name"] == "Ready"]
big = [x for x in ready if x["storage"] > 300000]
s, b, _ = call("POST", "machines/", {"op": "allocate", "storage": "300", "dry_run": "true"})
ok(s == 200 and json.loads(b)["storage"] > 300000, "storage=300 picks a disk of 300 GB or more: " + b)
s, b, _ = call("POST", "machines/", {"op": "allocate", "storage": "9000"})
ok(s == 409 and "storage" in b, "no disk of 9 TB: %d %s" % (s, b))
s, b, _ = call("POST", "machines/", {"op": "allocate", "storage": "big disk"})
ok(s == 400 and json.loads(b) == {"storage": ['Malformed storage constraint, "big disk".']}, b)
s, b, _ = call("POST", "machines/", {"op": "allocate", "arch": "arm64"})
ok(s == 409, "no arm64 machine: %d %s" % (s, b))
s, b, _ = call("POST", "machines/", {"op": "allocate", "not_tags": "ssd", "dry_run": "true"})
ok(s == 200 and "ssd" not in json.loads(b)["tag_names"], "not_tags: " + b)
rid = big[0]["system_id"]
s, b, _ = call("POST", "machines/%s/" % rid, {"op": "set_storage_layout", "storage_layout": "zfs"})
ok(s == 400 and "'zfs' is not a valid storage_layout." in json.loads(b)["storage_layout"][0], b)
s, b, _ = call("POST", "machines/%s/" % rid, {"op": "set_storage_layout", "storage_layout": "lvm",
                                               "root_size": "lots"})
ok(s == 400 and json.loads(b) == {"root_size": ["Enter a valid value."]}, b)
s, b, _ = call("POST", "machines/%s/" % rid, {"op": "set_storage_layout", "storage_layout": "lvm"},
               user=("ck2", "tk2", "secret2"))
ok(s == 403, "set_storage_layout is for administrators: %d %s" % (s, b))
js(*call("POST", "machines/%s/" % rid, {"op": "set_storage_layout", "storage_layout": "lvm",
                                        "root_size": "40G", "vg_name": "vg0"})[:2])
st = [x for x in admin("GET", "state")["machines"] if x["system_id"] == rid][0]
ok(st["storage_layout"] == "storage_layout=lvm root_size=40G vg_name=vg0", repr(st))
js(*call("POST", "machines/", {"op": "allocate", "system_id": rid})[:2])
s, b, _ = call("POST", "machines/%s/" % rid, {"op": "set_storage_layout", "storage_layout": "flat"})
ok(s == 409 and b == "Cannot change the storage layout on a machine that is not Ready.", b)
s, b, _ = call("POST", "machines/%s/" % rid, {"op": "deploy", "distro_series": "ubuntu/jammy",
                                               "hwe_kernel": "hwe-99.04"})
ok(s == 400 and json.loads(b) == {"hwe_kernel": [
    "hwe-99.04 is not available for ubuntu/jammy on %s." % big[0]["architecture"]]}, b)
m = js(*call("POST", "machines/%s/" % rid, {"op": "deploy", "distro_series": "ubuntu/jammy",
                                            "hwe_kernel": "ga-22.04"})[:2])
ok(m["hwe_kernel"] == "ga-22.04", "deployed with its kernel: %r" % m["hwe_kernel"])
log = admin("GET", "requests")["requests"]
ok(any(e.get("params") == "op=deploy&distro_series=ubuntu/jammy&hwe_kernel=ga-22.04" or
       "hwe_kernel=ga-22.04" in e.get("params", "") for e in log), "the request log shows parameters")
js(*call("POST", "machines/%s/" % rid, {"op": "release"})[:2])

# tags: an admin creates them (a name in use is a 400 naming the field) and puts them on
# machines; they survive release; a release with erase wipes the disks' data, one without
# keeps it (maas-sim's data marker, /_sim/state)
s, b, _ = call("POST", "tags/", {"name": "keep-me", "comment": "kept hosts"},
               user=("ck2", "tk2", "secret2"))
ok(s == 403, "creating a tag is for administrators: %d %s" % (s, b))
t = js(*call("POST", "tags/", {"name": "keep-me", "comment": "kept hosts"})[:2])
ok(t["name"] == "keep-me" and t["comment"] == "kept hosts", repr(t))
s, b, _ = call("POST", "tags/", {"name": "keep-me"})
ok(s == 400 and json.loads(b) == {"name": ["Tag with this Name already exists."]}, b)
s, b, _ = call("POST", "tags/", {"name": "no spaces"})
ok(s == 400 and "name" in json.loads(b), b)
s, b, _ = call("POST", "tags/nope/", {"add": rid}, query={"op": "update_nodes"})
ok(s == 404, "update_nodes of an unknown tag: %d %s" % (s, b))
got = js(*call("POST", "tags/keep-me/", {"add": [rid, "zzz9"]}, query={"op": "update_nodes"})[:2])
ok(got == {"added": 1, "removed": 0}, "unknown ids are skipped: %r" % got)
got = js(*call("POST", "tags/keep-me/", {"add": rid}, query={"op": "update_nodes"})[:2])
ok(got == {"added": 0, "removed": 0}, "tagging twice tags once: %r" % got)
wait_status(rid, "Ready")
js(*call("POST", "machines/", {"op": "allocate", "system_id": rid, "tags": "keep-me"})[:2])
js(*call("POST", "machines/%s/" % rid, {"op": "deploy", "distro_series": "ubuntu/jammy"})[:2])
wait_status(rid, "Deployed")
st = lambda: [x for x in admin("GET", "state")["machines"] if x["system_id"] == rid][0]
marker = st()["disk_marker"]
ok(marker, "a deploy writes data on the disks: %r" % st())
js(*call("POST", "machines/%s/" % rid, {"op": "release"})[:2])
wait_status(rid, "Ready")
ok(st()["disk_marker"] == marker and st()["erasures"] == 0, "a release without erase keeps it")
ok("keep-me" in st()["tag_names"], "tags survive release: %r" % st()["tag_names"])
js(*call("POST", "machines/", {"op": "allocate", "system_id": rid})[:2])
m = js(*call("POST", "machines/%s/" % rid, {"op": "release", "erase": "true",
                                            "quick_erase": "true"})[:2])
ok(m["status_name"] == "Disk erasing", "erase goes through Disk erasing: %s" % m["status_name"])
ok(st()["erase_mode"] == "quick", repr(st()))
wait_status(rid, "Ready")
ok(st()["disk_marker"] is None and st()["erasures"] == 1, "erase wipes the data: %r" % st())
got = js(*call("POST", "tags/keep-me/", {"remove": rid}, query={"op": "update_nodes"})[:2])
ok(got == {"added": 0, "removed": 1} and "keep-me" not in st()["tag_names"], repr(got))

print("python checks passed")
PY
echo "conformance: all checks passed"
