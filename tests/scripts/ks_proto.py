# Helpers for the Python checks of the kube-sim script tests (imported, not a test itself):
# a pass/fail tally printed TAP-style, and raw HTTPS requests and watches with the sim's
# bearer token (standard library only).
#
#   check(desc, cond, extra="")   counts and prints one assertion
#   finish(name)                  prints "NAME: P passed, F failed" and exits 1 on a failure
#   Sim(url, ca, kubeconfig)      .conn(), .req(method, path, body, ...), .watch(path, until)
import http.client
import json
import ssl
import sys
import urllib.parse

passed = failed = 0


def check(desc, cond, extra=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + desc)
    else:
        failed += 1
        print("not ok - %s %s" % (desc, extra))


def finish(name):
    print("%s: %d passed, %d failed" % (name, passed, failed))
    sys.exit(1 if failed else 0)


class Sim:
    def __init__(self, url, ca, kubeconfig):
        self.host = urllib.parse.urlparse(url)
        self.token = [l.split("token:")[1].strip() for l in open(kubeconfig)
                      if "token:" in l][0]
        self.ctx = ssl.create_default_context(cafile=ca)

    def conn(self):
        return http.client.HTTPSConnection(self.host.hostname, self.host.port,
                                           context=self.ctx, timeout=60)

    def req(self, method, path, body=None, ctype="application/json",
            accept="application/json", auth=True, c=None):
        """(status, Content-Type, parsed JSON or None, raw body)"""
        c = c or self.conn()
        h = {"Accept": accept}
        if auth:
            h["Authorization"] = "Bearer " + self.token
        if body is not None:
            h["Content-Type"] = ctype
            body = body if isinstance(body, (str, bytes)) else json.dumps(body)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        try:
            js = json.loads(data)
        except ValueError:
            js = None
        return r.status, r.getheader("Content-Type"), js, data

    def open_watch(self, path):
        """(connection, response) of a watch request; read events with readline()."""
        c = self.conn()
        c.request("GET", path, headers={"Authorization": "Bearer " + self.token})
        return c, c.getresponse()

    def watch(self, path, until, max_events=10000):
        """The events of a watch until until(events) holds or the stream ends."""
        c, r = self.open_watch(path)
        events = []
        while len(events) < max_events:
            line = r.readline()
            if not line:
                break
            events.append(json.loads(line))
            if until(events):
                break
        c.close()
        return events
