#!/usr/bin/env python3
"""The queries of config/grafana/capmaas.json, for the tests.

  dashboard.py queries DASHBOARD JOB RANGE   one JSON object a line: {"panel", "ref", "expr"},
                                             every panel target's query with Grafana's
                                             variables replaced ($job by JOB, the interval
                                             variables by RANGE, e.g. 1m)
  dashboard.py variables DASHBOARD           one JSON object a line: {"name", "metric",
                                             "label"} for each label_values(metric, label)
                                             query variable
  dashboard.py rules DASHBOARD JOB RANGE     the queries as a Prometheus recording-rule file
                                             (for promtool check rules: the PromQL parses)
  dashboard.py lint DASHBOARD                the dashboard's shape; prints "ok" or each
                                             problem, exit 1 on any
"""
import json
import re
import sys

INTERVALS = ("$__rate_interval", "$__interval", "$__range")
METRIC = re.compile(r"\b((?:capmaas|controller_runtime|leader_election|workqueue)_[a-z0-9_]+)\b(\{[^}]*\})?")


def panels(dash):
    for p in dash["panels"]:
        if p.get("type") == "row":
            for q in p.get("panels", []):
                yield q
        else:
            yield p


def substitute(expr, job, rng):
    for v in INTERVALS:
        expr = expr.replace(v, rng)
    return expr.replace("$job", job)


def queries(dash, job, rng):
    for p in panels(dash):
        for t in p.get("targets", []):
            yield {"panel": p["title"], "ref": t["refId"], "expr": substitute(t["expr"], job, rng)}


def variables(dash):
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)", q)
        yield {"name": v["name"], "metric": m.group(1) if m else None, "label": m.group(2) if m else None,
               "query": q}


def lint(dash):
    errs = []
    ids = [p["id"] for p in dash["panels"]] + [q["id"] for p in dash["panels"] for q in p.get("panels", [])]
    if len(ids) != len(set(ids)):
        errs.append("panel ids are not unique")
    if not dash.get("uid"):
        errs.append("no uid: every import would make another copy")
    names = [v["name"] for v in dash.get("templating", {}).get("list", [])]
    if names[:2] != ["datasource", "job"]:
        errs.append("the variables are %s, not datasource and job first" % names)
    for v in variables(dash):
        if not v["metric"]:
            errs.append("variable %s: %r is not label_values(metric, label)" % (v["name"], v["query"]))
    for p in panels(dash):
        title = p.get("title", "?")
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errs.append("%s: the panel's datasource is not ${datasource}" % title)
        if not p.get("description"):
            errs.append("%s: no description" % title)
        if not p.get("targets"):
            errs.append("%s: no query" % title)
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                errs.append("%s %s: the query's datasource is not ${datasource}" % (title, t["refId"]))
            sels = METRIC.findall(t["expr"])
            if not sels:
                errs.append("%s %s: no capmaas series in %s" % (title, t["refId"], t["expr"]))
            for name, sel in sels:
                if 'job=~"$job"' not in sel:
                    errs.append("%s %s: %s is not filtered by job=~\"$job\"" % (title, t["refId"], name))
    return errs


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    dash = json.load(open(path))
    if cmd == "queries":
        for q in queries(dash, sys.argv[3], sys.argv[4]):
            print(json.dumps(q))
    elif cmd == "variables":
        for v in variables(dash):
            print(json.dumps(v))
    elif cmd == "rules":
        rules = [{"record": "dashboard:%s:%s" % (re.sub(r"[^a-z0-9]+", "_", q["panel"].lower()), q["ref"]),
                  "expr": q["expr"]} for q in queries(dash, sys.argv[3], sys.argv[4])]
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, sys.stdout, indent=1)
    elif cmd == "lint":
        errs = lint(dash)
        print("\n".join(errs) if errs else "ok")
        sys.exit(1 if errs else 0)
    else:
        sys.exit("dashboard.py: unknown command %s" % cmd)


if __name__ == "__main__":
    main()
