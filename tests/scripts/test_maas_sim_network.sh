#!/usr/bin/env bash
# maas-sim's network model (subnets, interface links, addresses) checked with Python's standard
# library against what a MAAS region answers (src/maasserver/api/interfaces.py,
# forms/interface_link.py, models/interface.py): link_subnet / unlink_subnet /
# set_default_gateway, their states, permissions and error texts, addresses unique across
# machines, AUTO addresses claimed on deploy and given back on release, STATIC links kept.
# Needs the maas-sim binary in $CAPMAAS_BUILD_DIR.
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
  --deploy-seconds 0.2 --release-seconds 0.1 >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3<"$tmp/out"
read -r -t 10 line <&3 || { echo "maas-sim did not start"; cat "$tmp/err"; exit 1; }
url=${line#listening on }
API="$url/api/2.0" python3 - <<'PY'
import json, os, random, time, urllib.error, urllib.parse, urllib.request

API = os.environ["API"]
ROOT = API.split("/MAAS/")[0]

def header(ck, tk, secret):
    return ('OAuth oauth_consumer_key="%s", oauth_token="%s", oauth_signature_method="PLAINTEXT", '
            'oauth_signature="%%26%s", oauth_timestamp="%d", oauth_nonce="%d", oauth_version="1.0"'
            % (ck, tk, secret, time.time(), random.getrandbits(64)))

def call(method, path, params=None, query=None, user=("ck", "tk", "secret1")):
    url = API + "/" + path
    if query:
        url += "?" + urllib.parse.urlencode(query, doseq=True)
    data = urllib.parse.urlencode(params or {}, doseq=True).encode() if params is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", header(*user))
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def ok(cond, msg):
    if not cond:
        raise SystemExit("FAIL: " + msg)

def js(status, body, want=200):
    ok(status == want, "status %d (want %d): %s" % (status, want, body))
    return json.loads(body)

def admin(method, path, doc=None):
    data = json.dumps(doc).encode() if doc is not None else None
    with urllib.request.urlopen(urllib.request.Request(ROOT + "/_sim/" + path, data=data,
                                                       method=method), timeout=10) as r:
        body = r.read().decode()
        return json.loads(body) if body.startswith("{") else body

def wait_status(sid, want, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        m = js(*call("GET", "machines/%s/" % sid))
        if m["status_name"] == want:
            return m
        time.sleep(0.05)
    raise SystemExit("FAIL: %s never reached %s" % (sid, want))

def link(sid, iface, want=200, **params):
    return call("POST", "nodes/%s/interfaces/%s/" % (sid, iface), dict(params, op="link_subnet"))

def unlink(sid, iface, link_id):
    return call("POST", "nodes/%s/interfaces/%s/" % (sid, iface),
                {"op": "unlink_subnet", "id": str(link_id)})

# subnets: the inventory's, with gateway and DNS servers, by id, CIDR or name
subnets = js(*call("GET", "subnets/"))
prov = next(s for s in subnets if s["cidr"] == "10.20.0.0/24")
ok(prov["gateway_ip"] == "10.20.0.1" and prov["dns_servers"] == ["10.20.0.2"]
   and prov["name"] == "provisioning" and prov["vlan"]["vid"] == 0, "subnet fields: %r" % prov)
ok(js(*call("GET", "subnets/%d/" % prov["id"]))["cidr"] == "10.20.0.0/24", "subnet by id")
ok(js(*call("GET", "subnets/provisioning/"))["id"] == prov["id"], "subnet by name")
s, b = call("GET", "subnets/99/")
ok(s == 404 and b == "No Subnet matches the given query.", b)

# a Ready machine: one AUTO link on its subnet, no address until deploy
a, b2 = "hkd3ps", "eccapw"
ifs = js(*call("GET", "nodes/%s/interfaces/" % a))
eth0 = ifs[0]
ok(eth0["name"] == "eth0" and len(eth0["links"]) == 1 and eth0["links"][0]["mode"] == "auto"
   and "ip_address" not in eth0["links"][0] and eth0["links"][0]["subnet"]["cidr"] == "10.20.0.0/24",
   "initial AUTO link: %r" % eth0["links"])
ok(js(*call("GET", "nodes/%s/interfaces/eth0/" % a))["id"] == eth0["id"], "interface by name")
s, b = call("GET", "nodes/%s/interfaces/999/" % a)
ok(s == 404 and b == "No Interface matches the given query.", b)
s, b = call("GET", "nodes/nope/interfaces/")
ok(s == 404 and b == "No Node matches the given query.", b)
ok(js(*call("GET", "machines/%s/" % a))["ip_addresses"] == [], "no address while Ready")

# permissions and states: admin only, and not once deploying
s, b = call("POST", "nodes/%s/interfaces/%d/" % (a, eth0["id"]),
            {"op": "link_subnet", "mode": "static", "subnet": "10.20.0.0/24"},
            user=("ck2", "tk2", "secret2"))
ok(s == 403 and b == "", "non-admin link: %d %s" % (s, b))
js(*call("POST", "machines/", {"op": "allocate", "system_id": a}))

# form errors: a 400 field map with MAAS's texts
s, b = link(a, eth0["id"])
ok(s == 400 and json.loads(b) == {"mode": ["This field is required."]}, b)
s, b = link(a, eth0["id"], mode="bogus")
ok(s == 400 and "'bogus' is not a valid mode.  It should be one of: 'auto', 'dhcp', 'static', "
   "'link_up'." in json.loads(b)["mode"], b)
s, b = link(a, eth0["id"], mode="STATIC", subnet="10.99.0.0/24", ip_address="10.99.0.5")
ok(s == 400 and json.loads(b) == {"subnet": ["Select a valid choice. That choice is not one of "
                                              "the available choices."]}, b)
s, b = link(a, eth0["id"], mode="STATIC", subnet="77")
ok(s == 400 and json.loads(b) == {"subnet": ["None found with id=77."]}, b)
s, b = link(a, eth0["id"], mode="STATIC", subnet="10.30.0.0/24", ip_address="10.30.0.5")
ok(s == 400 and "subnet" in json.loads(b), "a subnet on another VLAN is not a choice: " + b)
s, b = link(a, eth0["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.21.0.5")
ok(s == 400 and json.loads(b) == {"ip_address": [
    "IP address is not in the given subnet 'provisioning:10.20.0.0/24(vid=0)'."]}, b)
s, b = link(a, eth0["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="not-an-ip")
ok(s == 400 and json.loads(b) == {"ip_address": ["Enter a valid IPv4 or IPv6 address."]}, b)
s, b = link(a, eth0["id"], mode="dhcp", subnet="10.20.0.0/24", default_gateway="true")
ok(s == 400 and json.loads(b) == {"default_gateway": ["Cannot use in mode 'dhcp'."]}, b)

# unlink the AUTO link (a LINK_UP takes its place), link STATIC with the gateway
auto_id = eth0["links"][0]["id"]
s, b = unlink(a, eth0["id"], 12345)
ok(s == 400 and json.loads(b) == {"id": ["'12345' is not a valid id.  It should be one of: '%d'."
                                          % auto_id]}, b)
f = js(*unlink(a, eth0["id"], auto_id))
ok([l["mode"] for l in f["links"]] == ["link_up"], "LINK_UP after the last unlink: %r" % f["links"])
f = js(*link(a, eth0["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.20.0.200",
             default_gateway="True"))
ok([(l["mode"], l.get("ip_address")) for l in f["links"]] == [("static", "10.20.0.200")],
   "STATIC replaces LINK_UP: %r" % f["links"])
static_id = f["links"][0]["id"]
m = js(*call("GET", "machines/%s/" % a))
ok(m["ip_addresses"] == ["10.20.0.200"], "a STATIC address shows at once: %r" % m["ip_addresses"])
ok(m["default_gateways"]["ipv4"] == {"gateway_ip": "10.20.0.1", "link_id": static_id},
   "default gateway: %r" % m["default_gateways"])
ok(m["boot_interface"]["links"][0]["ip_address"] == "10.20.0.200", "boot_interface links")

# the same address on another machine: in use (MAAS answers 404), whatever its state
js(*call("POST", "machines/", {"op": "allocate", "system_id": b2}))
f2 = js(*call("GET", "nodes/%s/interfaces/" % b2))[0]
s, b = link(b2, f2["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.20.0.200")
ok(s == 404 and b == "IP address is already in use.", "in use: %d %s" % (s, b))
# b2's AUTO address (10.20.0.11) is held once it deploys
js(*call("POST", "machines/%s/" % b2, {"op": "deploy"}))
ok(js(*call("GET", "machines/%s/" % b2))["ip_addresses"] == ["10.20.0.11"], "AUTO claimed on deploy")
s, b = link(a, eth0["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.20.0.11")
ok(s == 404 and b == "IP address is already in use.", "a deployed AUTO address is in use: " + b)
s, b = link(b2, f2["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.20.0.201")
ok(s == 409 and b == "Cannot link subnet interface because the machine is not New, Ready, "
   "Allocated, or Broken.", "deploying: %d %s" % (s, b))
wait_status(b2, "Deployed")
s, b = unlink(b2, f2["id"], f2["links"][0]["id"])
ok(s == 409 and "Cannot unlink subnet interface" in b, b)

# deploy a with its STATIC link, release: the STATIC link stays (MAAS frees AUTO ones only)
js(*call("POST", "machines/%s/" % a, {"op": "deploy"}))
wait_status(a, "Deployed")
ok(js(*call("GET", "machines/%s/" % a))["ip_addresses"] == ["10.20.0.200"], "deployed on its STATIC")
js(*call("POST", "machines/%s/" % a, {"op": "release"}))
wait_status(a, "Ready")
f = js(*call("GET", "nodes/%s/interfaces/%d/" % (a, eth0["id"])))
ok([(l["mode"], l.get("ip_address")) for l in f["links"]] == [("static", "10.20.0.200")],
   "STATIC kept across release: %r" % f["links"])
js(*call("POST", "machines/%s/" % b2, {"op": "release"}))
wait_status(b2, "Ready")
ok(js(*call("GET", "machines/%s/" % b2))["ip_addresses"] == [], "AUTO address given back")

# undo: unlink STATIC, link AUTO again (on a Ready machine: allowed)
f = js(*unlink(a, eth0["id"], static_id))
m = js(*call("GET", "machines/%s/" % a))
ok(m["default_gateways"]["ipv4"]["link_id"] is None, "the gateway goes with its link")
f = js(*link(a, eth0["id"], mode="AUTO", subnet=str(prov["id"])))
ok([l["mode"] for l in f["links"]] == ["auto"], "AUTO replaces LINK_UP: %r" % f["links"])
f2 = js(*link(b2, f2["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.20.0.200"))
ok(any(l.get("ip_address") == "10.20.0.200" for l in f2["links"]), "free again after unlink")

# set_default_gateway picks the interface's one usable gateway
g = js(*call("POST", "nodes/%s/interfaces/%d/" % (b2, f2["id"]), {"op": "set_default_gateway"}))
m = js(*call("GET", "machines/%s/" % b2))
ok(m["default_gateways"]["ipv4"]["gateway_ip"] == "10.20.0.1", "set_default_gateway")

# a deploy whose AUTO address someone holds statically gets another one (c's own is
# 10.20.0.12 in the inventory; b2, Ready, may hold any number of STATIC links)
c = "9k54bh"
js(*link(b2, f2["id"], mode="STATIC", subnet="10.20.0.0/24", ip_address="10.20.0.12"))
js(*call("POST", "machines/%s/" % c, {"op": "deploy"}))
got = js(*call("GET", "machines/%s/" % c))["ip_addresses"]
ok(len(got) == 1 and got[0] != "10.20.0.12" and got[0].startswith("10.20.0."),
   "another free address: %r" % got)
# recommissioning (an operator's action) redoes the network: the STATIC links go, AUTO back
admin("POST", "faults", {"commission": [b2]})
f2 = js(*call("GET", "nodes/%s/interfaces/" % b2))[0]
ok([l["mode"] for l in f2["links"]] == ["auto"], "links after commissioning: %r" % f2["links"])
log = admin("GET", "requests")
ok(any(r["op"] == "link_subnet" and r["status"] == 404 for r in log["requests"]),
   "link ops are in the request log")
state = admin("GET", "state")
sa = next(x for x in state["machines"] if x["system_id"] == a)
ok(sa["links"] == [{"interface": "eth0", "mode": "auto", "ip_address": None,
                    "cidr": "10.20.0.0/24"}], "state dump links: %r" % sa["links"])
print("network checks passed")
PY
echo "maas-sim network: all checks passed"
