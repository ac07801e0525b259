#!/usr/bin/python3
"""Fills a kube-sim with one paused Cluster and N Deployed-looking Machines and MaasMachines
(the shapes capi-sim and capmaas write: labels, owner references, finalizers, spec, status
with addresses and conditions), for bench/cache.sh. Prints the total size of the objects'
compact JSON as the API server returns them ("json_bytes=<n>").

    bench/cache.py KUBECONFIG N
"""
import http.client
import json
import os
import ssl
import sys
import uuid

NS = "bench"
CAPI = "/apis/cluster.x-k8s.io/v1beta1/namespaces/" + NS
INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/" + NS


def kubeconfig(path):
    text = open(path).read()
    server = token = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("server:"):
            server = line.split(None, 1)[1]
        if line.startswith("token:"):
            token = line.split(None, 1)[1]
    return server, token


class Client:
    def __init__(self, server, token, ca):
        hostport = server.split("://", 1)[1]
        ctx = ssl.create_default_context(cafile=ca)
        self.conn = http.client.HTTPSConnection(hostport, context=ctx, timeout=30)
        self.headers = {"Authorization": "Bearer " + token}

    def call(self, method, path, body=None, ctype="application/json"):
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = ctype
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        out = resp.read()
        if resp.status >= 300 and resp.status != 409:
            sys.exit(f"{method} {path}: {resp.status} {out[:300]!r}")
        return json.loads(out) if out else None


def conditions(now):
    return [{"type": t, "status": "True", "lastTransitionTime": now, "reason": r,
             "message": ""} for t, r in
            (("Ready", "Deployed"), ("MachineDeployed", "Deployed"), ("BootstrapReady", "Ready"))]


def objects(i, cluster_uid):
    name = f"c-md-0-{i:05d}"
    sysid = f"m{i:05x}"
    zone = f"az{i % 3 + 1}"
    labels = {"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/deployment-name": "c-md-0",
              "cluster.x-k8s.io/set-name": "c-md-0-7d9f8"}
    machine = {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": NS, "labels": labels,
                     "finalizers": ["machine.cluster.x-k8s.io"],
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1",
                                          "kind": "MachineSet", "name": "c-md-0-7d9f8",
                                          "uid": str(uuid.uuid4()), "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"clusterName": "c", "version": "v1.29.4", "failureDomain": zone,
                 "providerID": f"maas:///{zone}/{sysid}",
                 "bootstrap": {"dataSecretName": name + "-bootstrap"},
                 "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                       "kind": "MaasMachine", "name": name, "namespace": NS}}}
    maasmachine = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
        "metadata": {"name": name, "namespace": NS, "labels": labels,
                     "annotations": {"cluster.x-k8s.io/cloned-from-name": "c-md-0",
                                     "cluster.x-k8s.io/cloned-from-groupkind":
                                         "MaasMachineTemplate.infrastructure.cluster.x-k8s.io"},
                     "finalizers": ["maasmachine.infrastructure.cluster.x-k8s.io"]},
        "spec": {"image": "ubuntu/jammy", "minCPU": 4, "minMemory": 8192,
                 "resourcePool": "capi", "tags": ["ssd"], "failureDomain": zone,
                 "providerID": f"maas:///{zone}/{sysid}", "systemID": sysid}}
    status = {"status": {
        "ready": True, "machineState": "Deployed", "machinePowered": True,
        "hostname": f"node-{i:05d}", "initialization": {"provisioned": True},
        "addresses": [{"type": "ExternalIP", "address": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"},
                      {"type": "InternalIP", "address": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"},
                      {"type": "Hostname", "address": f"node-{i:05d}"}],
        "conditions": conditions("2026-11-29T12:00:00Z")}}
    return machine, maasmachine, status


def main():
    kc, n = sys.argv[1], int(sys.argv[2])
    server, token = kubeconfig(kc)
    c = Client(server, token, os.path.join(os.path.dirname(kc), "ca.crt"))
    c.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NS}})
    cl = c.call("POST", CAPI + "/clusters", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "c", "namespace": NS},
        "spec": {"paused": True,
                 "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                       "kind": "MaasCluster", "name": "c"}}})
    for i in range(n):
        machine, mm, status = objects(i, cl["metadata"]["uid"])
        m = c.call("POST", CAPI + "/machines", machine)
        mm["metadata"]["ownerReferences"] = [{
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "name": m["metadata"]["name"], "uid": m["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
        c.call("POST", INFRA + "/maasmachines", mm)
        c.call("PATCH", INFRA + "/maasmachines/" + mm["metadata"]["name"] + "/status", status,
               "application/merge-patch+json")
    total = 0
    for path in (CAPI + "/machines", INFRA + "/maasmachines"):
        items = c.call("GET", path)["items"]
        total += sum(len(json.dumps(o, separators=(",", ":"))) for o in items)
    print(f"json_bytes={total}")


main()
