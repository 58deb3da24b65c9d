"""An outside client of the A2A semantic-handshake protocol 0.3, written from spec/PROTOCOL.md alone: the Python
standard library only (urllib), no code of this project.

Usage: python3 spec_client.py BASE_URL [CAPABILITY...]

BASE_URL is the origin of an agent or gateway (its A2A endpoint is BASE_URL/a2a). For each capability named (default:
every capability whose auth_requirement is "none" and that has no region_restriction), the client runs the whole
handshake: DISCOVER (OPTIONS /a2a, §5.1) -> GET /a2a/capabilities (§5.3) -> NEGOTIATE (§6) -> EXECUTE (§7) -> CONFIRM
(§8.2) -> RESULT (§8.3, long-polled when the agent lists long_poll, following Location, EXE-4). It prints one `ok ...`
line per step and `all checks passed` at the end; it exits non-zero at the first surprise.
"""

import datetime
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

VERSION = "0.3"
# A caller's DID (§9.1): unsigned requests carry it as a claim (HDR-8), enough for capabilities that need no auth.
SENDER = "did:web:spec-client.example.com"
TERMINAL = {"succeeded", "failed", "timed_out", "canceled"}


def ok(what):
    print("ok", what, flush=True)


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name)

    def json(self):
        return json.loads(self.body) if self.body else None

    def __str__(self):
        return f"{self.status} {self.body[:600]!r}"


def request(method, url, body=None, headers=None):
    """One HTTP request; errors (4xx, 5xx) are answers too."""
    data = None
    hs = dict(headers or {})
    if body is not None:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        hs["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=hs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return Answer(r.status, r.headers, r.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        return Answer(e.code, e.headers, e.read().decode("utf-8"))


def protocol_headers(extra=None):
    """§3.2: every request but DISCOVER carries A2A-Version; the protocol steps carry A2A-Sender-ID (HDR-6)."""
    hs = {"A2A-Version": VERSION, "A2A-Sender-ID": SENDER}
    hs.update(extra or {})
    return hs


def expect(cond, what, answer=None):
    if not cond:
        raise SystemExit(f"FAILED: {what}" + (f": {answer}" if answer is not None else ""))


def sample(schema):
    """A value that the schema (the subset of §6.2) accepts: each required member, typed as the schema says."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    if isinstance(t, list):  # ["string", "null"] (SCH-7): the non-null type
        t = [x for x in t if x != "null"][0]
    if t == "object":
        props = schema.get("properties", {})
        return {name: sample(props.get(name, {"type": "string"})) for name in schema.get("required", [])}
    if t == "array":
        n = schema.get("minItems", 0)
        return [sample(schema.get("items", {"type": "string"})) for _ in range(n)]
    if t == "boolean":
        return True
    if t == "number":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = lo if "minimum" in schema else lo + 1
        hi = schema.get("maximum")
        if hi is not None and value > hi:
            value = hi
        return int(value) if float(value).is_integer() else value
    # string
    fmt = schema.get("format")
    if fmt == "date-time":
        return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if fmt == "email":
        return "someone@example.com"
    if fmt == "uuid":
        return "123e4567-e89b-12d3-a456-426614174000"
    text = "a message from a client written from the specification alone"
    n = schema.get("minLength", 0)
    if len(text) < n:
        text = text + "x" * (n - len(text))
    if "maxLength" in schema:
        text = text[: schema["maxLength"]]
    return text


def handshake(base, endpoint, decl, features):
    name = decl["name"]
    # NEGOTIATE (§6.1): propose the capability's own input schema (written in the subset of §6.2).
    a = request("POST", f"{endpoint}/negotiate", {"target_capability": name, "proposed_schema": decl["input_schema"]},
                protocol_headers())
    expect(a.status == 200, f"NEGOTIATE {name} is 200", a)
    neg = a.json()
    expect(a.header("A2A-Negotiation-ID") == neg["negotiation_id"], "A2A-Negotiation-ID equals negotiation_id (NEG-3)", a)
    ok(f"{name}: NEGOTIATE agreed (tightened: {neg['tightened']})")
    # EXECUTE (§7) a payload valid against the agreed schema.
    payload = sample(neg["agreed_schema"])
    extra = {"A2A-Negotiation-ID": neg["negotiation_id"]}
    if "idempotency" in features:  # EXE-7, EXE-8: safe to retry
        extra["Idempotency-Key"] = f"spec-{time.time_ns()}"
    a = request("POST", f"{endpoint}/execute", payload, protocol_headers(extra))
    expect(a.status == 201, f"EXECUTE {name} {json.dumps(payload)} is 201", a)
    exe = a.json()
    execution_id = exe["execution_id"]
    expect(exe["status"] == "received", "EXECUTE stores the execution as received (EXE-4)", a)
    expect(a.header("A2A-Execution-ID") == execution_id, "A2A-Execution-ID (EXE-4)", a)
    location = a.header("Location")
    expect(location is not None and location.startswith("/"), "Location is an absolute path (EXE-4)", a)
    # EID-11: the id as one path segment; Location carries exactly this encoding after the base path.
    segment = urllib.parse.quote(execution_id, safe="-._~:")
    expect(location.endswith("/a2a/result/" + segment), f"Location ends with /a2a/result/{segment}", location)
    ok(f"{name}: EXECUTE stored {execution_id}")
    # CONFIRM (§8.2) starts the work.
    a = request("POST", f"{endpoint}/confirm", {"execution_id": execution_id}, protocol_headers())
    expect(a.status == 202 and a.json()["status"] == "accepted", "CONFIRM is 202 accepted (CONF-1)", a)
    ok(f"{name}: CONFIRM accepted")
    # RESULT (§8.3) at the Location (relative to the endpoint's origin, EXE-4), long-polled (RES-2) until terminal.
    url = urllib.parse.urljoin(base + "/", location)
    wait = "?wait_ms=5000" if "long_poll" in features else ""
    deadline = time.monotonic() + 60
    while True:
        a = request("GET", url + wait, headers=protocol_headers())
        expect(a.status == 200, "RESULT is 200 (RES-1)", a)
        res = a.json()
        if res["status"] in TERMINAL:
            break
        expect(time.monotonic() < deadline, f"{name} ends within 60 s", a)
        if not wait:
            time.sleep(0.2)
    expect(res["status"] == "succeeded" and "result" in res, f"{name} succeeded with a result (ST-4)", a)
    ok(f"{name}: RESULT succeeded: {json.dumps(res['result'])[:120]}")


def main():
    base = sys.argv[1].rstrip("/")
    wanted = sys.argv[2:]
    endpoint = base + "/a2a"
    # DISCOVER (§5.1): OPTIONS /a2a, 204 without a body, everything in headers; no A2A-Version needed (HDR-3).
    a = request("OPTIONS", endpoint)
    expect(a.status == 204, "DISCOVER is 204 (DISC-1)", a)
    expect(a.header("A2A-Version") == VERSION, "A2A-Version: 0.3 (HDR-2)", a)
    names = json.loads(a.header("A2A-Capabilities") or "null")
    expect(isinstance(names, list), "A2A-Capabilities is a JSON array (DISC-2)", a)
    ok(f"DISCOVER: {len(names)} capabilities, agent {a.header('A2A-Sender-ID')}")
    # The declarations (§5.3), in the same order (DISC-9).
    a = request("GET", f"{endpoint}/capabilities", headers={"A2A-Version": VERSION})
    expect(a.status == 200, "GET /a2a/capabilities is 200 (DISC-8)", a)
    doc = a.json()
    expect([c["name"] for c in doc["capabilities"]] == names, "capabilities in the order of A2A-Capabilities (DISC-9)")
    features = doc.get("features", [])
    ok(f"capabilities document: features {features}")
    if wanted:
        chosen = [c for c in doc["capabilities"] if c["name"] in wanted]
    else:
        chosen = [c for c in doc["capabilities"]
                  if c["auth_requirement"] == "none" and not c.get("region_restriction")]
    expect(chosen, "at least one capability to call")
    for decl in chosen:
        handshake(base, endpoint, decl, features)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
