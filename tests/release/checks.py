#!/usr/bin/env python3
"""YAML and admission checks for tests/release/test_release.sh (needs PyYAML).

  checks.py components METADATA COMPONENTS VERSION ENDPOINT KEY
  checks.py template RENDERED           (default flavor, values of test_release.sh)
  checks.py defaults RENDERED           (default flavor, only the required variables set)
  checks.py clusterclass CLUSTER CLASS  (clusterclass flavor)
  checks.py kube-vip RENDERED VIP IFACE (kube-vip flavor: runs its files' script as kubeadm
                                         init and join nodes would, in a scratch root)
  checks.py admit PORT CA WANT FILE...  (AdmissionReviews for the capmaas kinds in FILEs;
                                         WANT: allowed | allowed-quiet | denied)

Each prints "ok - ..." per check and exits 1 on the first failure.
"""
import base64
import json
import ssl
import sys
import urllib.request
import uuid

import yaml

GROUP = "infrastructure.cluster.x-k8s.io"


def fail(msg):
    print("not ok - " + msg)
    sys.exit(1)


def ok(msg):
    print("ok - " + msg)


def expect(cond, msg):
    if not cond:
        fail(msg)
    ok(msg)


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind, name=None):
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    if len(found) != 1:
        fail("exactly one %s%s (found %d)" % (kind, " " + name if name else "", len(found)))
    return found[0]


def components(metadata, comps, version, endpoint, key):
    meta = yaml.safe_load(open(metadata, encoding="utf-8"))
    major, minor = version.lstrip("v").split(".")[:2]
    contract = [s["contract"] for s in meta["releaseSeries"]
                if str(s["major"]) == major and str(s["minor"]) == minor]
    expect(len(contract) == 1, "metadata.yaml names one contract for series %s.%s: %s"
           % (major, minor, contract))
    label = "cluster.x-k8s.io/" + contract[0]
    docs = load(comps)
    crds = by_kind(docs, "CustomResourceDefinition")
    expect(len(crds) >= 4, "components hold the CRDs (%s)"
           % ", ".join(c["metadata"]["name"] for c in crds))
    for c in crds:
        labels = c["metadata"].get("labels", {})
        served = [v["name"] for v in c["spec"]["versions"] if v.get("served")]
        expect(labels.get(label) in served,
               "%s carries %s: %s (a served version: %s)"
               % (c["metadata"]["name"], label, labels.get(label), ", ".join(served)))
        expect(labels.get("cluster.x-k8s.io/provider") == "infrastructure-maas",
               "%s carries cluster.x-k8s.io/provider: infrastructure-maas"
               % c["metadata"]["name"])
        conv = c["spec"].get("conversion", {}).get("strategy", "None")
        if conv == "Webhook":
            expect("cert-manager.io/inject-ca-from" in c["metadata"].get("annotations", {}),
                   "%s (conversion webhook) has cert-manager CA injection"
                   % c["metadata"]["name"])
    dep = one(docs, "Deployment")
    images = [c["image"] for c in dep["spec"]["template"]["spec"]["containers"]]
    expect(images == ["ghcr.io/capmaas/capmaas:" + version],
           "the Deployment runs ghcr.io/capmaas/capmaas:%s (%s)" % (version, images))
    sec = one(docs, "Secret", "capmaas-manager-bootstrap-credentials")
    data = sec.get("stringData") or {k: base64.b64decode(v).decode()
                                     for k, v in sec.get("data", {}).items()}
    expect(data.get("MAAS_ENDPOINT") == endpoint and data.get("MAAS_API_KEY") == key,
           "the credentials Secret holds the substituted MAAS_ENDPOINT and MAAS_API_KEY")
    cert = one(docs, "Certificate")
    ns_name = "%s/%s" % (cert["metadata"]["namespace"], cert["metadata"]["name"])
    one(docs, "Issuer")
    svc = one(docs, "Service", "capmaas-webhook-service")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        w = one(docs, kind)
        ann = w["metadata"].get("annotations", {})
        expect(ann.get("cert-manager.io/inject-ca-from") == ns_name,
               "%s has cert-manager.io/inject-ca-from: %s" % (kind, ns_name))
        refs = {(h["clientConfig"]["service"]["namespace"], h["clientConfig"]["service"]["name"])
                for h in w["webhooks"]}
        expect(refs == {(svc["metadata"]["namespace"], svc["metadata"]["name"])},
               "%s calls the webhook Service %s/%s"
               % (kind, svc["metadata"]["namespace"], svc["metadata"]["name"]))
    dns = set(cert["spec"]["dnsNames"])
    want = "%s.%s.svc" % (svc["metadata"]["name"], svc["metadata"]["namespace"])
    expect(want in dns, "the serving Certificate names %s" % want)


def ref_ok(ref, group, kind, name):
    return ref == {"apiGroup": group, "kind": kind, "name": name}


def check_machine_template(docs, name, image, cpu, mem, pool, tags):
    t = one(docs, "MaasMachineTemplate", name)
    expect(t["apiVersion"] == GROUP + "/v1beta1", "%s is %s/v1beta1" % (name, GROUP))
    spec = t["spec"]["template"]["spec"]
    want = {"image": image, "minCPU": cpu, "minMemory": mem, "resourcePool": pool, "tags": tags}
    expect(spec == want, "MaasMachineTemplate %s spec is %s (got %s)" % (name, want, spec))


def template(path, defaults=False):
    docs = load(path)
    kinds = sorted(d["kind"] for d in docs)
    expect(kinds == sorted(["Cluster", "MaasCluster", "MaasMachineTemplate", "KubeadmControlPlane",
                            "MaasMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment",
                            "MachineHealthCheck"]),
           "the default flavor holds %s" % ", ".join(kinds))
    name, ns = "demo", "capi-demo"
    if defaults:
        ns = "default"
    for d in docs:
        if d["metadata"].get("namespace") != ns:
            fail("%s %s is in namespace %s, not %s" % (d["kind"], d["metadata"]["name"],
                                                      d["metadata"].get("namespace"), ns))
    ok("every object is in namespace %s" % ns)
    c = one(docs, "Cluster", name)
    expect(c["apiVersion"] == "cluster.x-k8s.io/v1beta2", "Cluster is cluster.x-k8s.io/v1beta2")
    expect(ref_ok(c["spec"]["controlPlaneRef"], "controlplane.cluster.x-k8s.io",
                  "KubeadmControlPlane", name + "-control-plane"),
           "Cluster.spec.controlPlaneRef is {apiGroup, kind, name} of the KubeadmControlPlane")
    expect(ref_ok(c["spec"]["infrastructureRef"], GROUP, "MaasCluster", name),
           "Cluster.spec.infrastructureRef is {apiGroup, kind, name} of the MaasCluster")
    expect(c["spec"]["clusterNetwork"]["pods"]["cidrBlocks"] == ["192.168.0.0/16"],
           "Cluster.spec.clusterNetwork has the pod CIDR")
    mc = one(docs, "MaasCluster", name)
    expect(mc["spec"] == {"dnsDomain": "maas" if defaults else "lab.maas"},
           "MaasCluster.spec.dnsDomain is %s" % mc["spec"].get("dnsDomain"))
    kcp = one(docs, "KubeadmControlPlane", name + "-control-plane")
    expect(kcp["apiVersion"] == "controlplane.cluster.x-k8s.io/v1beta2",
           "KubeadmControlPlane is controlplane.cluster.x-k8s.io/v1beta2")
    expect(kcp["spec"]["replicas"] == (1 if defaults else 3) and
           kcp["spec"]["version"] == "v1.31.4",
           "KubeadmControlPlane replicas %s, version %s" % (kcp["spec"]["replicas"],
                                                           kcp["spec"]["version"]))
    expect(ref_ok(kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"], GROUP,
                  "MaasMachineTemplate", name + "-control-plane"),
           "KubeadmControlPlane.spec.machineTemplate.spec.infrastructureRef names the CP template")
    md = one(docs, "MachineDeployment", name + "-md-0")
    expect(md["apiVersion"] == "cluster.x-k8s.io/v1beta2" and
           md["spec"]["replicas"] == (0 if defaults else 3) and md["spec"]["clusterName"] == name,
           "MachineDeployment is v1beta2, replicas %s, clusterName %s"
           % (md["spec"]["replicas"], md["spec"]["clusterName"]))
    ts = md["spec"]["template"]["spec"]
    expect(ts["version"] == "v1.31.4" and
           ref_ok(ts["bootstrap"]["configRef"], "bootstrap.cluster.x-k8s.io",
                  "KubeadmConfigTemplate", name + "-md-0") and
           ref_ok(ts["infrastructureRef"], GROUP, "MaasMachineTemplate", name + "-md-0"),
           "MachineDeployment bootstrap.configRef and infrastructureRef are {apiGroup, kind, name}")
    sel = md["spec"]["selector"]["matchLabels"]
    labels = md["spec"]["template"]["metadata"]["labels"]
    expect(all(labels.get(k) == v for k, v in sel.items()),
           "MachineDeployment selector matches its template labels")
    one(docs, "KubeadmConfigTemplate", name + "-md-0")
    mhc = one(docs, "MachineHealthCheck", name + "-md-0")
    checks = mhc["spec"]["checks"]
    expect(mhc["apiVersion"] == "cluster.x-k8s.io/v1beta2" and mhc["spec"]["clusterName"] == name
           and mhc["spec"]["selector"]["matchLabels"] ==
           {"cluster.x-k8s.io/deployment-name": name + "-md-0"},
           "MachineHealthCheck is v1beta2 and selects the MachineDeployment's Machines")
    expect(sorted((c["type"], c["status"]) for c in checks["unhealthyNodeConditions"]) ==
           [("Ready", "False"), ("Ready", "Unknown")] and
           checks["nodeStartupTimeoutSeconds"] > 1800,
           "MachineHealthCheck replaces a Node that stops being Ready, and waits for a deploy "
           "longer than --deploy-timeout")
    if defaults:
        check_machine_template(docs, name + "-control-plane", "custom/u-2204-0-k-1314-0",
                               2, 4096, "default", [])
        check_machine_template(docs, name + "-md-0", "ubuntu/jammy", 2, 4096, "default", [])
    else:
        check_machine_template(docs, name + "-control-plane", "custom/u-2204-0-k-1314-0",
                               4, 8192, "capi", ["control-plane"])
        check_machine_template(docs, name + "-md-0", "ubuntu/jammy", 2, 4096, "capi",
                               ["ssd", "gpu"])


def clusterclass(cluster_path, class_path):
    cdocs, kdocs = load(cluster_path), load(class_path)
    c = one(cdocs, "Cluster")
    expect(c["apiVersion"] == "cluster.x-k8s.io/v1beta2", "topology Cluster is v1beta2")
    topo = c["spec"]["topology"]
    cls = one(kdocs, "ClusterClass", topo["classRef"]["name"])
    ok("the ClusterClass file defines the class the Cluster names (%s)" % topo["classRef"]["name"])
    expect(cls["apiVersion"] == "cluster.x-k8s.io/v1beta2", "ClusterClass is v1beta2")
    expect(topo["version"] == "v1.31.4" and topo["controlPlane"]["replicas"] == 3 and
           topo["workers"]["machineDeployments"][0]["replicas"] == 3,
           "topology version v1.31.4, 3 control-plane and 3 worker replicas")
    spec = cls["spec"]
    refs = [spec["infrastructure"]["templateRef"], spec["controlPlane"]["templateRef"],
            spec["controlPlane"]["machineInfrastructure"]["templateRef"]]
    classes = {}
    for md in spec["workers"]["machineDeployments"]:
        classes[md["class"]] = md
        refs += [md["bootstrap"]["templateRef"], md["infrastructure"]["templateRef"]]
    for r in refs:
        obj = one(kdocs, r["kind"], r["name"])
        expect(obj["apiVersion"] == r["apiVersion"],
               "templateRef %s %s (%s) is defined in the file" % (r["kind"], r["name"],
                                                                   r["apiVersion"]))
    for md in topo["workers"]["machineDeployments"]:
        expect(md["class"] in classes, "worker class %s exists in the ClusterClass" % md["class"])
    for name, md in classes.items():
        hc = md.get("healthCheck", {}).get("checks", {})
        expect(sorted((c["type"], c["status"]) for c in hc.get("unhealthyNodeConditions", [])) ==
               [("Ready", "False"), ("Ready", "Unknown")] and
               hc.get("nodeStartupTimeoutSeconds", 0) > 1800,
               "worker class %s has a health check that replaces a Node no longer Ready" % name)
    declared = {v["name"]: v for v in spec["variables"]}
    given = {v["name"]: v["value"] for v in topo["variables"]}
    expect(set(given) <= set(declared), "every topology variable is declared by the class")
    expect(all(n in given for n, v in declared.items() if v.get("required")),
           "every required class variable is set by the Cluster")
    for p in spec["patches"]:
        for d in p["definitions"]:
            for jp in d["jsonPatches"]:
                var = jp["valueFrom"]["variable"].split(".")
                if var[0] not in declared:
                    fail("patch %s uses undeclared variable %s" % (p["name"], var[0]))
                if len(var) > 1:
                    props = declared[var[0]]["schema"]["openAPIV3Schema"]["properties"]
                    if var[1] not in props:
                        fail("patch %s uses %s, not in the schema" % (p["name"], ".".join(var)))
    ok("every patch reads a declared variable (or one of its properties)")
    expect(given["controlPlaneMachine"] == {"image": "custom/u-2204-0-k-1314-0", "minCPU": 4,
                                            "minMemory": 8192, "resourcePool": "capi",
                                            "tags": ["control-plane"]},
           "topology variable controlPlaneMachine carries the CONTROL_PLANE_MACHINE_* values")
    expect(given["workerMachine"]["tags"] == ["ssd", "gpu"] and given["dnsDomain"] == "lab.maas",
           "topology variables workerMachine.tags and dnsDomain carry their values")


def admit(port, ca, want, paths):
    ctx = ssl.create_default_context(cafile=ca)
    n = 0
    for path in paths:
        for d in load(path):
            kind = d["kind"]
            if not d["apiVersion"].startswith(GROUP + "/"):
                continue
            n += 1
            for verb in ("mutate", "validate"):
                uid = str(uuid.uuid4())
                review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "request": {
                              "uid": uid, "operation": "CREATE",
                              "kind": {"group": GROUP, "version": "v1beta1", "kind": kind},
                              "resource": {"group": GROUP, "version": "v1beta1",
                                           "resource": kind.lower() + "s"},
                              "name": d["metadata"]["name"],
                              "namespace": d["metadata"].get("namespace", "default"),
                              "userInfo": {"username": "test"},
                              "object": d}}
                url = "https://127.0.0.1:%s/%s-infrastructure-cluster-x-k8s-io-v1beta1-%s" % (
                    port, verb, kind.lower())
                req = urllib.request.Request(url, data=json.dumps(review).encode(),
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                        resp = json.load(r)["response"]
                except Exception as e:  # noqa: BLE001 - report any transport failure
                    fail("%s %s %s: %s" % (verb, kind, d["metadata"]["name"], e))
                if resp.get("uid") != uid:
                    fail("%s %s: uid not echoed" % (verb, kind))
                what = "%s %s %s" % (verb, kind, d["metadata"]["name"])
                msg = resp.get("status", {}).get("message", "")
                warns = resp.get("warnings") or []
                if want == "denied":
                    if verb == "validate":
                        expect(resp["allowed"] is False,
                               "%s is denied: %s" % (what, msg))
                    continue
                expect(resp["allowed"] is True, "%s is allowed%s%s" % (
                    what, " (" + msg + ")" if msg else "",
                    " warnings: %s" % warns if warns else ""))
                if want == "allowed-quiet" and warns:
                    fail("%s returned warnings %s" % (what, warns))
    expect(n > 0, "%d capmaas objects reviewed" % n)


def kcp_files(docs):
    kcp = one(docs, "KubeadmControlPlane")
    spec = kcp["spec"]["kubeadmConfigSpec"]
    return spec, {f["path"]: f for f in spec.get("files", [])}


# The node's paths the script touches, moved under a scratch root.
NODE_PATHS = ("/etc/kubernetes", "/run/kubeadm", "/usr/local/sbin")


def rooted(text, root):
    for p in NODE_PATHS:
        text = text.replace(p, root + p)
    return text


def run_node(files, spec, root, init):
    """Writes the KCP files under root (paths rewritten), then runs the pre and post
    commands that name kube-vip-prepare; returns the manifest's kubeconfig hostPath after
    the pre commands and after the post commands."""
    import os
    import subprocess
    for path, f in files.items():
        dst = root + path
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w", encoding="utf-8") as out:
            out.write(rooted(f["content"], root))
        os.chmod(dst, int(f.get("permissions", "0644"), 8))
    os.makedirs(root + "/run/kubeadm", exist_ok=True)
    # kubeadm init reads /run/kubeadm/kubeadm.yaml; a join, kubeadm-join-config.yaml
    name = "kubeadm.yaml" if init else "kubeadm-join-config.yaml"
    with open(root + "/run/kubeadm/" + name, "w", encoding="utf-8") as out:
        out.write("# written by the bootstrap provider\n")

    def phase(cmds):
        for c in cmds:
            if "kube-vip-prepare" in c:
                subprocess.run(["sh", "-c", rooted(c, root)], check=True)
        with open(root + "/etc/kubernetes/manifests/kube-vip.yaml", encoding="utf-8") as f:
            pod = yaml.safe_load(f)
        hp = pod["spec"]["volumes"][0]["hostPath"]["path"]
        return hp[len(root):] if hp.startswith(root) else hp, pod

    during, pod = phase(spec.get("preKubeadmCommands", []))
    after, _ = phase(spec.get("postKubeadmCommands", []))
    return during, after, pod


def kube_vip(path, vip, iface):
    import tempfile
    docs = load(path)
    mc = one(docs, "MaasCluster")
    expect(mc["spec"].get("endpoint") == {"type": "VIP", "address": vip},
           "the MaasCluster asks capmaas for the VIP %s (spec.endpoint)" % vip)
    spec, files = kcp_files(docs)
    manifest = files.get("/etc/kubernetes/manifests/kube-vip.yaml")
    expect(manifest is not None, "the KubeadmControlPlane writes the kube-vip static pod")
    pod = yaml.safe_load(manifest["content"])
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    expect(env.get("address") == vip and env.get("vip_interface") == iface and
           env.get("cp_enable") == "true" and env.get("vip_leaderelection") == "true",
           "kube-vip holds %s on %s with leader election among the control planes" % (vip, iface))
    expect(pod["spec"].get("hostNetwork") is True and
           pod["spec"]["hostAliases"][0]["hostnames"] == ["kubernetes"],
           "host network, and the kubernetes alias to 127.0.0.1")
    pre = spec.get("preKubeadmCommands", [])
    post = spec.get("postKubeadmCommands", [])
    expect(any("kube-vip-prepare init" in c for c in pre) and
           any("kube-vip-prepare done" in c for c in post),
           "kube-vip-prepare runs before kubeadm (init) and after it (done)")
    with tempfile.TemporaryDirectory() as root:
        during, after, _ = run_node(files, spec, root + "/init", True)
    expect(during == "/etc/kubernetes/super-admin.conf",
           "first control plane: kube-vip reads super-admin.conf during kubeadm init")
    expect(after == "/etc/kubernetes/admin.conf",
           "first control plane: admin.conf again after kubeadm init")
    with tempfile.TemporaryDirectory() as root:
        during, after, pod = run_node(files, spec, root + "/join", False)
    expect(during == "/etc/kubernetes/admin.conf" and after == "/etc/kubernetes/admin.conf",
           "joining control planes: admin.conf before and after kubeadm join")
    expect(pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"].endswith(
           "/etc/kubernetes/admin.conf"), "kube-vip always reads its kubeconfig at admin.conf")
    workers = one(docs, "KubeadmConfigTemplate")["spec"]["template"]["spec"]
    expect("files" not in workers and not any("kube-vip" in c for c in
                                             workers.get("preKubeadmCommands", [])),
           "workers run no kube-vip")


def main(argv):
    cmd = argv[1]
    if cmd == "components":
        components(*argv[2:7])
    elif cmd == "template":
        template(argv[2])
    elif cmd == "defaults":
        template(argv[2], defaults=True)
    elif cmd == "clusterclass":
        clusterclass(argv[2], argv[3])
    elif cmd == "kube-vip":
        kube_vip(argv[2], argv[3], argv[4])
    elif cmd == "admit":
        admit(argv[2], argv[3], argv[4], argv[5:])
    else:
        fail("unknown check " + cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
