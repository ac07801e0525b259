#!/usr/bin/python3
"""Writes config/crd/bases/*.yaml, the CRDs of infrastructure.cluster.x-k8s.io/v1beta1.

The schemas follow include/schema.h and upstream-capmaas.md section 1 (required fields,
minimums, defaults, status subresource, category cluster-api), the labels kubernetes.md 4.1
(CAPI contract) and clusterctl's provider label. Value rules beyond these (image format,
ranges, MAAS names) live in the validating webhooks. Run after changing the types:

    /usr/bin/python3 config/crd/gen_crds.py
"""
import os
import copy

import yaml

GROUP = "infrastructure.cluster.x-k8s.io"
LABELS = {
    "cluster.x-k8s.io/provider": "infrastructure-maas",
    "cluster.x-k8s.io/v1beta1": "v1beta1",
    "cluster.x-k8s.io/v1beta2": "v1beta1",
}

def s(desc=None, **kw):
    d = {"type": "string"}
    if desc: d["description"] = desc
    d.update(kw); return d
def i(desc=None, **kw):
    d = {"type": "integer"}
    if desc: d["description"] = desc
    d.update(kw); return d
def b(desc=None, **kw):
    d = {"type": "boolean"}
    if desc: d["description"] = desc
    d.update(kw); return d
def obj(props, desc=None, required=None):
    d = {"type": "object"}
    if desc: d["description"] = desc
    d["properties"] = props
    if required: d["required"] = required
    return d
def strmap(desc=None):
    d = {"type": "object", "additionalProperties": {"type": "string"}}
    if desc: d["description"] = desc
    return d

conditions = {
    "type": "array",
    "description": "Observations of the object's state (metav1.Condition).",
    "items": obj({
        "lastTransitionTime": s("When the condition last changed status.", format="date-time"),
        "message": s("Human-readable details.", maxLength=32768),
        "observedGeneration": i("metadata.generation the condition was set for.", format="int64", minimum=0),
        "reason": s("CamelCase reason.", maxLength=1024, minLength=1,
                    pattern="^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
        "status": s("True, False or Unknown.", enum=["True", "False", "Unknown"]),
        "type": s("CamelCase condition type.", maxLength=316,
                  pattern="^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
    }, required=["lastTransitionTime", "reason", "status", "type"]),
    "maxItems": 32,
    "x-kubernetes-list-map-keys": ["type"],
    "x-kubernetes-list-type": "map",
}
initialization = obj({"provisioned": b("True once the infrastructure is provisioned (CAPI v1beta2 contract).")},
                     "Initialization status of the CAPI v1beta2 contract.")

static_ip = obj({
    "cidr": s("The subnet the address is in, as MAAS knows it (e.g. 10.10.0.0/24); it must be a MAAS subnet.", minLength=1),
    "gateway": s("Default gateway; the subnet's when absent."),
    "interface": s("Name of the machine's interface to configure; the boot interface when absent."),
    "ip": s("The address (IPv4 or IPv6), inside cidr.", minLength=1),
    "nameservers": {"type": "array", "description": "DNS servers; the subnet's when absent.", "items": {"type": "string"}, "maxItems": 16},
}, "A fixed address applied in MAAS between allocate and deploy. Immutable. Not allowed in a MaasMachineTemplate (use addressesFromPools).", ["cidr", "ip"])

pool_refs = {"type": "array",
             "description": "Cluster API IPAM pools to claim the machine's address from (an IPAddressClaim per machine); only the first entry is used. Immutable.",
             "items": obj({
                 "apiGroup": s("API group of the pool (e.g. ipam.cluster.x-k8s.io).", minLength=1),
                 "kind": s("Kind of the pool (e.g. InClusterIPPool).", minLength=1),
                 "name": s("Name of the pool, in the machine's namespace.", minLength=1),
             }, required=["apiGroup", "kind", "name"]),
             "maxItems": 8}

SIZE = "^([0-9]+(\\.[0-9]*)?%|[0-9]+[KkMmGgTtPpEe]?)$"
storage_layout = obj({
    "type": s("MAAS storage layout: flat, lvm, bcache or blank.", enum=["flat", "lvm", "bcache", "blank"]),
    "bootSize": s("Size of the boot partition (MAAS boot_size): bytes with an optional K/M/G/T/P/E suffix (powers of 1000), or a percentage of the boot disk.", pattern=SIZE),
    "rootSize": s("Size of the root partition (MAAS root_size), as bootSize.", pattern=SIZE),
    "vgName": s("lvm only: name of the volume group (MAAS vg_name; vgroot when absent).", minLength=1),
    "lvName": s("lvm only: name of the logical volume (MAAS lv_name; lvroot when absent).", minLength=1),
    "lvSize": s("lvm only: size of the logical volume (MAAS lv_size), as bootSize.", pattern=SIZE),
    "cacheMode": s("bcache only: cache mode (MAAS cache_mode; writethrough when absent).", enum=["writeback", "writethrough", "writearound"]),
    "cacheSize": s("bcache only: size of the cache partition (MAAS cache_size), as bootSize.", pattern=SIZE),
    "cacheNoPart": b("bcache only: use the whole cache device, without a partition (MAAS cache_no_part)."),
}, "Storage layout applied in MAAS (set_storage_layout) before the machine is allocated. Immutable. docs/deploy-options.md.", ["type"])

machine_spec = obj({
    "addressesFromPools": pool_refs,
    "architecture": s("Architecture to allocate (MAAS arch), e.g. amd64 or amd64/generic. Immutable.", minLength=1),
    "excludeTags": {"type": "array", "description": "MAAS tags the machine must not carry (MAAS not_tags). Immutable.", "items": {"type": "string"}, "maxItems": 64},
    "hweKernel": s("Kernel to deploy (MAAS hwe_kernel), e.g. ga-22.04 or hwe-22.04. Immutable.", minLength=1),
    "storageLayout": storage_layout,
    "deployInMemory": b("Deploy the OS into memory (MAAS ephemeral_deploy). Immutable.", default=False),
    "failureDomain": s("MAAS zone to allocate from; overwritten with the zone the machine landed in."),
    "image": s("<osystem>/<release> (e.g. ubuntu/jammy) or a bare release, which MAAS treats as custom. Immutable.", minLength=1),
    "lxd": obj({
        "enabled": b("Create this machine as an LXD VM on a host of the cluster.", default=False),
        "vmConfig": obj({
            "autoStart": b("Start the VM when its host boots.", default=True),
            "diskSize": i("Root disk size in GB.", default=60, minimum=1),
            "interfaceLinkModes": strmap("Link mode per interface."),
            "network": s("Network of the VM."),
            "storagePool": s("LXD storage pool of the VM."),
        }, "VM settings."),
    }, "LXD VM placement."),
    "minCPU": i("Minimum CPU count (MAAS cpu_count). Immutable.", minimum=0),
    "minDiskSize": i("Minimum size of the root disk in GB (MAAS allocate storage). Immutable.", minimum=0),
    "nodeReuse": b("Keep a released host for the MachineDeployment or control plane that owned it: its next machine gets the same host back (docs/host-reuse.md).", default=False),
    "release": obj({
        "erase": s("What MAAS does to the disks on release: none, quick (quick_erase) or secure (secure_erase); absent: the --release-erase flag.", enum=["none", "quick", "secure"]),
    }, "How the host is given back to MAAS."),
    "minMemory": i("Minimum memory in MiB (MAAS mem). Immutable.", minimum=0),
    "parent": s("System ID of the parent host (LXD VMs)."),
    "providerID": s("maas:///<zone>/<system_id>, written by the controller."),
    "resourcePool": s("MAAS resource pool to allocate from."),
    "staticIP": static_ip,
    "systemID": s("MAAS system_id, written by the controller."),
    "tags": {"type": "array", "description": "MAAS tags the machine must carry.", "items": {"type": "string"}, "maxItems": 64},
}, "MaasMachineSpec defines the desired state of a MaasMachine.", ["image", "minCPU", "minMemory"])

machine_status = obj({
    "addresses": {"type": "array", "description": "Addresses of the machine.", "items": obj({
        "address": s("The address.", minLength=1, maxLength=256),
        "type": s("Address type.", enum=["Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"]),
    }, required=["address", "type"])},
    "conditions": conditions,
    "dnsAttached": b("Control plane only: the machine's IP is in the API-server DNS record."),
    "failureDomain": s("The MAAS zone the machine landed in."),
    "failureMessage": s("Terminal failure message (CAPI v1beta1 contract)."),
    "failureReason": s("Terminal failure reason (CAPI v1beta1 contract)."),
    "hostname": s("MAAS hostname."),
    "initialization": initialization,
    "machinePowered": b("MAAS power_state is on."),
    "machineState": s("MAAS status_name."),
    "ready": b("The machine is deployed (CAPI v1beta1 contract).", default=False),
}, "MaasMachineStatus defines the observed state of a MaasMachine.")

endpoint = obj({"host": s("Host name or IP of the API server."),
                "port": i("Port of the API server; the mutating webhook sets 6443 when a host is given without one.", format="int32")},
               "Endpoint of the workload cluster's API server.", ["host", "port"])

endpoint_source = obj({
    "type": s("Where the API endpoint comes from: DNS (a MAAS DNS record over the control planes, the default), VIP (an address MAAS reserves for the cluster, held by the control planes, e.g. kube-vip) or External (an endpoint the user runs, set in controlPlaneEndpoint). Immutable once the cluster has an endpoint.", enum=["DNS", "VIP", "External"], default="DNS"),
    "address": s("VIP: the address to reserve in MAAS; absent: MAAS picks one from subnet.", minLength=1, maxLength=64),
    "subnet": s("VIP: the CIDR of the MAAS subnet the address is picked from when no address is given.", minLength=1, maxLength=64),
    "dnsRecord": b("VIP: also name the address with a MAAS DNS record in dnsDomain."),
}, "The kind of API endpoint (docs/endpoints.md); absent: DNS.")

cluster_spec = obj({
    "controlPlaneEndpoint": endpoint,
    "endpoint": endpoint_source,
    "dnsDomain": s("MAAS DNS domain the API-server record is created in. Immutable.", minLength=1),
    "dnsRecordAddresses": obj({
        "cidr": s("Only control-plane addresses inside this CIDR go into the record.", minLength=1),
        "interface": s("Only addresses MAAS has on the interface of this name."),
    }, "Which control-plane addresses the API-server DNS record holds; absent: each control plane's first ExternalIP.", ["cidr"]),
    "identityRef": obj({
        "kind": s("Kind of the referent; only Secret.", enum=["Secret"]),
        "name": s("Name of the Secret in the cluster's namespace (data keys endpoint, apiKey, optional caBundle).", minLength=1, maxLength=253),
    }, "The MAAS credentials of this cluster's machines; absent: the controller's MAAS_ENDPOINT and MAAS_API_KEY.", ["kind", "name"]),
    "failureDomains": {"type": "array", "description": "MAAS zones usable as failure domains.", "items": {"type": "string"}, "maxItems": 64},
    "lxdConfig": obj({
        "enabled": b("Register the cluster's machines as LXD VM hosts.", default=False),
        "networkBridge": s("Legacy bridge name."),
        "nicParent": s("Parent interface of the VM NICs."),
        "nicType": s("NIC type of the VMs.", enum=["bridge", "macvlan"]),
        "resourcePool": s("MAAS resource pool of the hosts."),
        "skipNetworkUpdate": b("Keep the host network as it is.", default=True),
        "storageBackend": s("LXD storage backend.", default="zfs"),
        "storageSize": s("LXD storage size in GB.", default="50"),
        "zone": s("MAAS zone of the hosts."),
    }, "LXD host settings."),
}, "MaasClusterSpec defines the desired state of a MaasCluster.", ["dnsDomain"])

cluster_status = obj({
    "conditions": conditions,
    "failureDomains": {"type": "array", "description": "Failure domains (MAAS zones) of the cluster.",
                       "items": obj({
                           "attributes": strmap("Free-form attributes."),
                           "controlPlane": b("Usable by control-plane machines."),
                           "name": s("Zone name.", minLength=1, maxLength=256),
                       }, required=["name"]),
                       "maxItems": 100, "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map"},
    "initialization": initialization,
    "network": obj({"dnsName": s("Generated API-server FQDN.")}, "Network status."),
    "ready": b("The API-server DNS record exists (CAPI v1beta1 contract).", default=False),
}, "MaasClusterStatus defines the observed state of a MaasCluster.")

QUANTITY = "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"
machine_template_status = obj({
    "capacity": {"type": "object",
                 "description": "What a node of this template has at least, for the cluster autoscaler's "
                                "scale from zero (cpu, memory): the fewest cores and the least memory among "
                                "the MAAS machines that match the template.",
                 "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "string"}],
                                          "pattern": QUANTITY, "x-kubernetes-int-or-string": True}},
    "conditions": conditions,
    "nodeInfo": {"type": "object", "minProperties": 1,
                 "description": "Architecture and operating system of a node of this template.",
                 "properties": {
                     "architecture": s("CPU architecture of the node.", enum=["amd64", "arm64", "s390x", "ppc64le"]),
                     "operatingSystem": s("Operating system of the node (linux, windows)."),
                 }},
}, "MaasMachineTemplateStatus: what the MAAS inventory says a machine of this template looks like.")

template_meta = obj({"annotations": strmap(), "labels": strmap()}, "Metadata given to objects made from the template.")

def template_spec(inner, what):
    return obj({"template": obj({"metadata": template_meta, "spec": inner},
                                "The %s made from this template." % what, ["spec"])},
               "Spec of the template.", ["template"])

# MaasRemediation: Cluster API external remediation, Metal3's shape (docs/remediation.md).
remediation_spec = obj({
    "strategy": obj({
        "retryLimit": i("Power cycles before the Machine is handed back to Cluster API for replacement; the mutating webhook sets 1.", format="int32", minimum=0, maximum=10),
        "timeout": s("How long each power cycle waits for the Node to be Ready again (a Go duration, e.g. 5m); the mutating webhook sets 5m0s.", minLength=1),
        "type": s("Remediation strategy; the mutating webhook sets Reboot.", enum=["Reboot"]),
    }, "How the unhealthy Machine is remediated."),
}, "MaasRemediationSpec defines the desired state of a MaasRemediation.")

remediation_status = obj({
    "conditions": conditions,
    "lastRemediated": s("When the last power cycle powered the machine on.", format="date-time"),
    "phase": s("Running, Waiting, Succeeded, Deleting machine or Failed."),
    "retryCount": i("Power cycles done.", format="int32", minimum=0),
}, "MaasRemediationStatus defines the observed state of a MaasRemediation.")

AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
CLUSTER_COL = {"name": "Cluster", "type": "string", "description": "Cluster the object belongs to",
               "jsonPath": ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}

kinds = [
    ("MaasCluster", "maasclusters", "MaasCluster is the Schema for the maasclusters API.",
     cluster_spec, cluster_status, [
        CLUSTER_COL,
        {"name": "Ready", "type": "boolean", "description": "The API-server DNS record exists", "jsonPath": ".status.ready"},
        {"name": "DNSName", "type": "string", "description": "API-server FQDN", "jsonPath": ".status.network.dnsName"},
        {"name": "Endpoint", "type": "string", "description": "API-server endpoint", "jsonPath": ".spec.controlPlaneEndpoint.host", "priority": 1},
        AGE]),
    ("MaasMachine", "maasmachines", "MaasMachine is the Schema for the maasmachines API.",
     machine_spec, machine_status, [
        CLUSTER_COL,
        {"name": "State", "type": "string", "description": "MAAS machine state", "jsonPath": ".status.machineState"},
        {"name": "Ready", "type": "boolean", "description": "The machine is deployed", "jsonPath": ".status.ready"},
        {"name": "ProviderID", "type": "string", "description": "maas:///<zone>/<system_id>", "jsonPath": ".spec.providerID"},
        {"name": "Machine", "type": "string", "description": "The CAPI Machine owning this MaasMachine", "jsonPath": ".metadata.ownerReferences[?(@.kind==\"Machine\")].name"},
        {"name": "Image", "type": "string", "description": "OS image", "jsonPath": ".spec.image", "priority": 1},
        AGE]),
    ("MaasMachineTemplate", "maasmachinetemplates", "MaasMachineTemplate is the Schema for the maasmachinetemplates API.",
     template_spec(machine_spec, "MaasMachine"), machine_template_status, [
        {"name": "Image", "type": "string", "description": "OS image", "jsonPath": ".spec.template.spec.image"},
        {"name": "MinCPU", "type": "integer", "description": "Minimum CPU count", "jsonPath": ".spec.template.spec.minCPU"},
        {"name": "MinMemory", "type": "integer", "description": "Minimum memory (MiB)", "jsonPath": ".spec.template.spec.minMemory"},
        {"name": "CPU", "type": "string", "description": "Cores of the smallest matching MAAS machine", "jsonPath": ".status.capacity.cpu", "priority": 1},
        {"name": "Memory", "type": "string", "description": "Memory of the smallest matching MAAS machine", "jsonPath": ".status.capacity.memory", "priority": 1},
        AGE]),
    ("MaasClusterTemplate", "maasclustertemplates", "MaasClusterTemplate is the Schema for the maasclustertemplates API (ClusterClass).",
     template_spec(cluster_spec, "MaasCluster"), None, [
        {"name": "DNSDomain", "type": "string", "description": "MAAS DNS domain", "jsonPath": ".spec.template.spec.dnsDomain"},
        AGE]),
    ("MaasRemediation", "maasremediations", "MaasRemediation is the Schema for the maasremediations API: a power-cycle remediation of one unhealthy Machine (named after it), created by a MachineHealthCheck from a MaasRemediationTemplate.",
     remediation_spec, remediation_status, [
        {"name": "Strategy", "type": "string", "description": "Remediation strategy", "jsonPath": ".spec.strategy.type"},
        {"name": "Retry limit", "type": "integer", "description": "Power cycles allowed", "jsonPath": ".spec.strategy.retryLimit"},
        {"name": "Retry count", "type": "integer", "description": "Power cycles done", "jsonPath": ".status.retryCount"},
        {"name": "Phase", "type": "string", "description": "Phase of the remediation", "jsonPath": ".status.phase"},
        {"name": "Last Remediated", "type": "date", "description": "Last power-on", "jsonPath": ".status.lastRemediated"},
        AGE]),
    ("MaasRemediationTemplate", "maasremediationtemplates", "MaasRemediationTemplate is the Schema for the maasremediationtemplates API: the MaasRemediation a MachineHealthCheck's remediation template makes.",
     template_spec(remediation_spec, "MaasRemediation"), None, [
        {"name": "Strategy", "type": "string", "description": "Remediation strategy", "jsonPath": ".spec.template.spec.strategy.type"},
        {"name": "Retry limit", "type": "integer", "description": "Power cycles allowed", "jsonPath": ".spec.template.spec.strategy.retryLimit"},
        AGE]),
]

for kind, plural, desc, spec, status, cols in kinds:
    props = {
        "apiVersion": s("APIVersion defines the versioned schema of this representation of an object."),
        "kind": s("Kind is a string value representing the REST resource this object represents."),
        "metadata": {"type": "object"},
        "spec": copy.deepcopy(spec),
    }
    if status: props["status"] = copy.deepcopy(status)
    schema = {"description": desc, "type": "object", "properties": props, "required": ["spec"]}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, GROUP), "labels": dict(LABELS)},
        "spec": {
            "group": GROUP,
            "names": {"categories": ["cluster-api"], "kind": kind, "listKind": kind + "List",
                      "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1beta1", "served": True, "storage": True,
                "additionalPrinterColumns": cols,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
            }],
        },
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bases",
                        "%s_%s.yaml" % (GROUP, plural))
    with open(path, "w") as f:
        f.write("---\n")
        yaml.safe_dump(crd, f, sort_keys=False, default_flow_style=False, width=100)
    print(path)
