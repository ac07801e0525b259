#!/usr/bin/env python3
"""Renders clusterctl templates and provider components the way clusterctl does.

clusterctl's simple YAML processor substitutes ${VAR} from the environment (or its
config file) with drone/envsubst semantics.  This renderer follows those rules so a
template can be checked without clusterctl:

  ${VAR}            the value of VAR; VAR must be set (an empty value counts as set)
  ${VAR:=word}      the value of VAR if it is non-empty, else word; also ${VAR:-word},
  ${VAR=word}       ${VAR:?word} and ${VAR:+word}: envsubst treats every one of these
                    as "default when unset or empty"
  ${VAR:=}          an empty default is no default: VAR is then required
  ${ VAR }          legacy spelling, whitespace inside the braces is dropped first
  $${VAR}           a literal ${VAR}; in plain text $$ is one $, \\ is \ and \/ is /
  ${VAR,} ${VAR,,} ${VAR^} ${VAR^^} ${#VAR}   case changes and length (VAR required)

A default may itself contain ${OTHER}; such a nested variable is not required and is
empty when unset.  Every required variable that is unset is reported, all at once,
sorted, and nothing is written (exit status 1).  Malformed substitutions exit with 2.

usage: render.py [--list] [FILE ...]     (no FILE: standard input)
  --list   print the variables instead: NAME, then "required" or "default=<text>"
"""
import os
import re
import sys


class BadSubstitution(Exception):
    pass


IDENT_EXTRA = "_-"


def is_ident(ch):
    return ch.isalnum() or ch in IDENT_EXTRA


class Var:
    """A ${...} occurrence: name, operator ('' for plain) and default parts."""

    def __init__(self, name, op, parts):
        self.name = name
        self.op = op
        self.parts = parts  # list of str | Var (only for the default family)

    def has_default(self):
        return len(self.parts) > 0

    def default_text(self):
        return "".join(p if isinstance(p, str) else "${%s}" % p.name for p in self.parts)


class Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def parse_text(self):
        """Top level: text with $$, \\\\ and \\/ escapes, and ${...} substitutions."""
        nodes, buf = [], []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "$" and self.peek(1) == "{":
                if buf:
                    nodes.append("".join(buf))
                    buf = []
                self.i += 2
                nodes.append(self.parse_func())
            elif c == "$" and self.peek(1) == "$":
                buf.append("$")  # the escaping $ is dropped, the next one is kept
                self.i += 2
            elif c == "\\" and self.peek(1) in ("/", "\\"):
                buf.append(self.peek(1))
                self.i += 2
            else:
                buf.append(c)
                self.i += 1
        if buf:
            nodes.append("".join(buf))
        return nodes

    def parse_name(self):
        start = self.i
        while self.i < len(self.s) and is_ident(self.s[self.i]):
            self.i += 1
        if self.i == start:
            raise BadSubstitution(self.where(start))
        return self.s[start:self.i]

    def where(self, pos):
        line = self.s.count("\n", 0, pos) + 1
        return "bad substitution at line %d: %s" % (line, self.s[max(0, pos - 2):pos + 30]
                                                     .split("\n")[0])

    def expect_close(self, start):
        if self.peek() != "}":
            raise BadSubstitution(self.where(start))
        self.i += 1

    def parse_func(self):
        start = self.i - 2
        if self.peek() == "#":
            self.i += 1
            name = self.parse_name()
            self.expect_close(start)
            return Var(name, "#", [])
        name = self.parse_name()
        c = self.peek()
        if c == "}":
            self.i += 1
            return Var(name, "", [])
        if c == ":" and self.peek(1) in ("=", "-", "?", "+"):
            op = c + self.peek(1)
            self.i += 2
            return Var(name, op, self.parse_default(start))
        if c == "=":
            self.i += 1
            return Var(name, "=", self.parse_default(start))
        if c in (",", "^"):
            op = c
            self.i += 1
            if self.peek() == c:
                op += c
                self.i += 1
            self.expect_close(start)
            return Var(name, op, [])
        if c in (":", "/", "#", "%"):
            raise BadSubstitution("%s (substring, replace and trim operators are not "
                                  "supported by this renderer)" % self.where(start))
        raise BadSubstitution(self.where(start))

    def parse_default(self, start):
        """The word of ${VAR:=word}: text up to '}', which may hold nested ${...}."""
        parts, buf = [], []
        while True:
            if self.i >= len(self.s):
                raise BadSubstitution(self.where(start))
            c = self.s[self.i]
            if c == "}":
                self.i += 1
                break
            if c == "$" and self.peek(1) == "{":
                if buf:
                    parts.append("".join(buf))
                    buf = []
                self.i += 2
                parts.append(self.parse_func())
                continue
            buf.append(c)
            self.i += 1
        if buf:
            parts.append("".join(buf))
        return parts


LEGACY = re.compile(r"\$\{(\s+[A-Za-z0-9_$]+\s*|\s*[A-Za-z0-9_$]+\s+)\}")


def convert_legacy(text):
    return LEGACY.sub(lambda m: re.sub(r"\s", "", m.group(0)), text)


def evaluate(nodes, env):
    out = []
    for n in nodes:
        if isinstance(n, str):
            out.append(n)
            continue
        v = env.get(n.name, "")
        if n.op == "#":
            out.append(str(len(v)))
        elif n.op == ",":
            out.append(v[:1].lower() + v[1:])
        elif n.op == ",,":
            out.append(v.lower())
        elif n.op == "^":
            out.append(v[:1].upper() + v[1:])
        elif n.op == "^^":
            out.append(v.upper())
        elif v == "" and n.parts:
            out.append(evaluate(n.parts, env))
        else:
            out.append(v)
    return "".join(out)


def variables(nodes):
    """name -> Var of its first top-level occurrence (as clusterctl: later ones don't count)."""
    seen = {}
    for n in nodes:
        if isinstance(n, Var) and n.name not in seen:
            seen[n.name] = n
    return seen


def main(argv):
    args = argv[1:]
    list_only = False
    if args and args[0] == "--list":
        list_only = True
        args = args[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        if args:
            chunks = []
            for path in args:
                with open(path, encoding="utf-8") as f:
                    chunks.append(f.read())
            text = "".join(chunks)
        else:
            text = sys.stdin.read()
    except OSError as e:
        print("render.py: %s" % e, file=sys.stderr)
        return 2
    text = convert_legacy(text)
    try:
        nodes = Parser(text).parse_text()
    except BadSubstitution as e:
        print("render.py: %s" % e, file=sys.stderr)
        return 2
    found = variables(nodes)
    if list_only:
        for name in sorted(found):
            v = found[name]
            print("%s %s" % (name, "default=" + v.default_text() if v.has_default()
                             else "required"))
        return 0
    missing = sorted(name for name, v in found.items()
                     if name not in os.environ and not v.has_default())
    if missing:
        print("render.py: value for variables [%s] is not set: export them or give them a "
              "default" % ", ".join(missing), file=sys.stderr)
        return 1
    sys.stdout.write(evaluate(nodes, os.environ))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
