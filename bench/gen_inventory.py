#!/usr/bin/python3
"""Writes a maas-sim inventory of N identical-enough machines (for the scale benchmark and
the chaos test): pool "capi", zones az1-az3 each holding machines of every size (4, 8 and
16 CPUs), the sample's boot resources.

    bench/gen_inventory.py N > inventory.yaml
"""
import sys

n = int(sys.argv[1])
out = ["zones:", "  - name: az1", "  - name: az2", "  - name: az3",
       "pools:", "  - name: capi", "domains:", "  - name: maas",
       "tags:", "  - name: ssd",
       "boot_resources:",
       "  - name: ubuntu/jammy", "    type: Synced", "    architecture: amd64/ga-22.04",
       "  - name: u-2204-0-k-1264-0", "    type: Uploaded", "    architecture: amd64/generic",
       "machines:"]
for i in range(n):
    cpu = (4, 8, 16)[i % 3]
    out += [f"  - system_id: m{i:05x}",
            f"    hostname: node-{i:05d}",
            f"    cpu_count: {cpu}",
            f"    memory: {cpu * 2048}",
            "    storage: 256000",
            f"    zone: az{i // 3 % 3 + 1}",  # every size in every zone
            "    pool: capi",
            "    tags: [ssd]",
            "    power_type: ipmi",
            '    power_state: "off"',
            "    interfaces:",
            "      - name: eth0",
            f'        mac: "52:54:01:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}"',
            f"        ip: 10.{100 + (i >> 16)}.{i >> 8 & 255}.{(i & 255) + 1}",
            f"        cidr: 10.{100 + (i >> 16)}.0.0/16"]
print("\n".join(out))
