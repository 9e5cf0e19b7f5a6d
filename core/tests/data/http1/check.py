#!/usr/bin/env python3
"""Schema check for the HTTP/1.1 framing vectors in this directory.

Usage: python3 check.py [FILE.jsonl ...]   (default: every *.jsonl next to this script)

Each line must be one JSON object with exactly these keys:
  source, role, request_method, input | input_hex, expect, error,
  messages, rest, eof_ends_body, note
See PROVENANCE.md for the meaning of each field and the error classes.
Exits 1 if any line is malformed; prints counts per file and per class.
"""
import collections
import glob
import json
import os
import re
import sys

CLASSES = {
    "both-framing", "transfer-encoding", "content-length", "chunk-size",
    "chunk-extension", "chunk-data", "line-ending", "obs-fold", "whitespace",
    "header-name", "header-value", "request-line", "version", "status-line",
    "host", "trailer", "incomplete", "connect-body",
}
KEYS = {"source", "role", "request_method", "expect", "error", "messages",
        "rest", "eof_ends_body", "note"}
MSG_KEYS = {"start", "headers", "body", "trailers"}
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def is_pairs(v):
    return isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in v)


def check_case(o):
    """Return a list of problems (empty when the case is well-formed)."""
    errs = []
    if not isinstance(o, dict):
        return ["not a JSON object"]
    has_in, has_hex = "input" in o, "input_hex" in o
    if has_in == has_hex:
        errs.append("exactly one of input / input_hex is required")
    extra = set(o) - KEYS - {"input", "input_hex"}
    missing = KEYS - set(o)
    if extra:
        errs.append(f"unknown keys {sorted(extra)}")
    if missing:
        errs.append(f"missing keys {sorted(missing)}")
    if errs:
        return errs

    if not isinstance(o["source"], str) or not o["source"].strip():
        errs.append("source must be a non-empty string")
    role = o["role"]
    if role not in ("request", "response"):
        errs.append("role must be 'request' or 'response'")
    rm = o["request_method"]
    if role == "request" and rm is not None:
        errs.append("request_method must be null for role request")
    if role == "response" and not (isinstance(rm, str) and TOKEN.match(rm)):
        errs.append("request_method must be a method token for role response")

    data = None
    if has_in:
        if not isinstance(o["input"], str):
            errs.append("input must be a string")
        else:
            data = o["input"].encode("utf-8")
    else:
        h = o["input_hex"]
        if not isinstance(h, str) or not re.fullmatch(r"(?:[0-9a-f]{2})*", h):
            errs.append("input_hex must be lowercase hex with an even number of digits")
        else:
            data = bytes.fromhex(h)
            try:
                data.decode("utf-8")
                errs.append("input_hex used for bytes that are valid UTF-8 (use input)")
            except UnicodeDecodeError:
                pass
    if data is not None and not data:
        errs.append("input is empty")

    expect, error = o["expect"], o["error"]
    if expect not in ("ok", "error"):
        errs.append("expect must be 'ok' or 'error'")
    if expect == "ok" and error is not None:
        errs.append("error must be null when expect is ok")
    if expect == "error" and error not in CLASSES:
        errs.append(f"error class {error!r} not in the class list")

    msgs = o["messages"]
    if not isinstance(msgs, list):
        errs.append("messages must be a list")
        msgs = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or set(m) != MSG_KEYS:
            errs.append(f"messages[{i}] must have exactly keys {sorted(MSG_KEYS)}")
            continue
        if not isinstance(m["start"], str) or not m["start"]:
            errs.append(f"messages[{i}].start must be a non-empty string")
        elif data is not None and m["start"].encode("utf-8") + b"\r\n" not in data:
            errs.append(f"messages[{i}].start + CRLF does not occur in the input")
        elif role == "request" and not re.fullmatch(r"\S+ \S+ HTTP/1\.[01]", m["start"]):
            errs.append(f"messages[{i}].start is not a request line")
        elif role == "response" and not re.fullmatch(r"HTTP/1\.[01] \d{3} .*", m["start"], re.S):
            errs.append(f"messages[{i}].start is not a status line")
        if not is_pairs(m["headers"]):
            errs.append(f"messages[{i}].headers must be a list of [name, value] strings")
        if not is_pairs(m["trailers"]):
            errs.append(f"messages[{i}].trailers must be a list of [name, value] strings")
        if not isinstance(m["body"], str):
            errs.append(f"messages[{i}].body must be a string")
        elif data is not None and m["body"] and not m["trailers"] and m["body"].encode("utf-8") not in data:
            # a de-chunked body need not occur verbatim; only check unchunked ones
            te = any(n.lower() == "transfer-encoding" for n, _ in m["headers"]) if is_pairs(m["headers"]) else True
            if not te:
                errs.append(f"messages[{i}].body does not occur in the input")
    if expect == "ok" and not msgs and not o["rest"]:
        errs.append("an ok case needs at least one message or a non-empty rest")

    rest = o["rest"]
    if not isinstance(rest, str):
        errs.append("rest must be a string")
    elif data is not None and rest and not data.endswith(rest.encode("utf-8")):
        errs.append("rest must be a suffix of the input")
    if expect == "error" and rest != "":
        errs.append("rest must be empty for expect error")

    eof = o["eof_ends_body"]
    if not isinstance(eof, bool):
        errs.append("eof_ends_body must be a boolean")
    elif eof and (role != "response" or expect != "ok" or rest != "" or not msgs):
        errs.append("eof_ends_body is only for an ok response whose last message runs to EOF (rest empty)")

    if o["note"] is not None and not (isinstance(o["note"], str) and o["note"].strip()):
        errs.append("note must be null or a non-empty string")
    return errs


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    files = argv[1:] or sorted(glob.glob(os.path.join(here, "*.jsonl")))
    if not files:
        print("no .jsonl files found", file=sys.stderr)
        return 1
    bad = 0
    total = collections.Counter()
    seen = {}
    for path in files:
        per = collections.Counter()
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    print(f"{path}:{n}: empty line")
                    bad += 1
                    continue
                try:
                    o = json.loads(line)
                except json.JSONDecodeError as e:
                    print(f"{path}:{n}: invalid JSON: {e}")
                    bad += 1
                    continue
                problems = check_case(o)
                for p in problems:
                    print(f"{path}:{n}: {p}")
                bad += bool(problems)
                if problems:
                    continue
                key = (o["role"], o["request_method"], o.get("input"), o.get("input_hex"))
                if key in seen:
                    print(f"{path}:{n}: note: same input and role as {seen[key]}")
                else:
                    seen[key] = f"{os.path.basename(path)}:{n}"
                cls = o["error"] or "ok"
                per[cls] += 1
                total[cls] += 1
        print(f"{os.path.basename(path)}: {sum(per.values())} cases: "
              + ", ".join(f"{k}={v}" for k, v in sorted(per.items())))
    print(f"total: {sum(total.values())} cases: " + ", ".join(f"{k}={v}" for k, v in sorted(total.items())))
    if bad:
        print(f"{bad} malformed line(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
