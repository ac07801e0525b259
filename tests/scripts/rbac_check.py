#!/usr/bin/env python3
"""Least privilege, checked against what capmaas really called.

rbac_check.py [--granted-only | --ipam | --remediation] COMPONENTS ACCESS [AGENT]:
COMPONENTS is the rendered infrastructure-components.yaml; ACCESS is kube-sim's GET /_sim/requests answer, whose
"access" tally holds the RBAC attributes of every request ("<agent> <verb> <group>
<resource[/sub]> <namespace>": n). Every call AGENT (default capmaas) made must be granted
to the manager's ServiceAccount by the components' Roles and ClusterRoles, and every verb
those roles grant must have been used at least once (not with --granted-only, for runs
that exercise only part of the provider). Discovery URLs are granted to every
authenticated user by the API server's system:discovery ClusterRole. A granted verb in
SOMETIMES may go unused: the event recorder patches an event only when the same event
repeats within its window, which a run may or may not produce (integration.kube_events
proves the patch against kube-sim). A granted verb in IPAM_ONLY is used only by a cluster
with addressesFromPools: unused is a finding only with --ipam (script.e2e_ipam); one in
REMEDIATION_ONLY only by a remediation (--remediation, script.e2e_remediation). Prints
one line per finding and a summary; exit 1 on any finding.
"""
import json
import sys

import yaml


def bound_rules(docs, sa_ns, sa_name):
    """(scope namespace or None for cluster-wide, rule) for every rule bound to the SA."""
    roles = {}
    for d in docs:
        if d["kind"] in ("Role", "ClusterRole"):
            roles[(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])] = d
    out = []
    for d in docs:
        if d["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name
                   and s.get("namespace", d["metadata"].get("namespace")) == sa_ns
                   for s in d.get("subjects", [])):
            continue
        ref = d["roleRef"]
        ns = d["metadata"].get("namespace") if d["kind"] == "RoleBinding" else None
        key = (ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])
        role = roles.get(key)
        if role is None:
            sys.exit("rbac_check: %s %s binds the missing %s %s" %
                     (d["kind"], d["metadata"]["name"], ref["kind"], ref["name"]))
        out += [(ns, r) for r in role.get("rules", [])]
    return out


def matches(scope, rule, verb, group, resource, ns):
    if scope is not None and scope != ns:
        return False
    if verb not in rule.get("verbs", []) and "*" not in rule.get("verbs", []):
        return False
    if group == "-":
        return any(u == resource or (u.endswith("*") and resource.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs", []))
    return ((group in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", [])) and
            (resource in rule.get("resources", []) or "*" in rule.get("resources", [])))


# What kube-apiserver's bootstrap policy grants system:authenticated (system:discovery and
# system:public-info-viewer): get on these non-resource URLs.
DISCOVERY = {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                 "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
             "verbs": ["get"]}


# Granted verbs a correct run need not use: (verb, group, resource).
SOMETIMES = {("patch", "", "events")}
# Used only for MaasMachines with addressesFromPools (the claims are listed and watched by
# every run).
IPAM_ONLY = {("create", "ipam.cluster.x-k8s.io", "ipaddressclaims"),
             ("delete", "ipam.cluster.x-k8s.io", "ipaddressclaims"),
             ("get", "ipam.cluster.x-k8s.io", "ipaddresses")}

# Used only once a MachineHealthCheck asks for a MaasRemediation (the remediations are
# listed and watched by every run): unused is a finding only with --remediation
# (script.e2e_remediation).
REMEDIATION_ONLY = {("patch", "infrastructure.cluster.x-k8s.io", "maasremediations"),
                    ("patch", "infrastructure.cluster.x-k8s.io", "maasremediations/status"),
                    ("patch", "cluster.x-k8s.io", "machines/status")}


def main():
    args = sys.argv[1:]
    granted_only = bool(args) and args[0] == "--granted-only"
    ipam = bool(args) and args[0] == "--ipam"
    remediation = bool(args) and args[0] == "--remediation"
    if granted_only or ipam or remediation:
        args = args[1:]
    may_skip = SOMETIMES | (set() if ipam else IPAM_ONLY) | \
        (set() if remediation else REMEDIATION_ONLY)
    docs = [d for d in yaml.safe_load_all(open(args[0])) if d]
    access = json.load(open(args[1]))["access"]
    agent = args[2] if len(args) > 2 else "capmaas"
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")
    rules = bound_rules(docs, sa["metadata"]["namespace"], sa["metadata"]["name"])
    calls = []
    for key, n in access.items():
        parts = key.split(" ")
        if parts[0] != agent or len(parts) != 5:
            continue
        calls.append((parts[1], parts[2], parts[3], parts[4], n))
    findings = []
    for verb, group, resource, ns, n in sorted(calls):
        if not any(matches(s, r, verb, group, resource, ns)
                   for s, r in rules + [(None, DISCOVERY)]):
            findings.append("not granted: %s %s %s in %s (%d calls)" %
                            (verb, group or "core", resource, ns or "all namespaces", n))
    granted = 0
    for scope, r in [] if granted_only else rules:
        targets = ([("-", u) for u in r.get("nonResourceURLs", [])] or
                   [(g, res) for g in r.get("apiGroups", []) for res in r.get("resources", [])])
        for g, res in targets:
            for v in r.get("verbs", []):
                granted += 1
                if (v, g, res) in may_skip:
                    continue
                if not any(matches(scope, {"apiGroups": [g], "resources": [res],
                                           "nonResourceURLs": [res], "verbs": [v]},
                                   cv, cg, cr, cns) for cv, cg, cr, cns, _ in calls):
                    findings.append("granted but never used: %s %s %s%s" %
                                    (v, g or "core", res,
                                     " in " + scope if scope else ""))
    for f in findings:
        print(f)
    print("%d kinds of call, %d granted verbs, %d findings" % (len(calls), granted,
                                                                len(findings)))
    sys.exit(1 if findings else 0)


main()
