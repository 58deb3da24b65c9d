"""Sender A of flood.sh: HANDSHAKES full handshakes (NEGOTIATE, EXECUTE, CONFIRM, RESULT?wait_ms) at RATE per second
over one kept-alive HTTP/1.1 connection; prints one JSON line: {"ok": n, "failed": n, "errors": [...], "ms": [...],
"at": [...], "wall": [...]} (each handshake's latency, its start in seconds from the first, its wall-clock start).

usage: measure.py PORT HANDSHAKES RATE [SENDER]
"""
import http.client
import json
import sys
import time
import urllib.parse

port, count, rate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
sender = sys.argv[4] if len(sys.argv) > 4 else "did:web:measured.example.com"
proposal = json.dumps({"target_capability": "echo_message",
                       "proposed_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                                           "required": ["text"]}})
headers = {"A2A-Version": "0.3", "A2A-Sender-ID": sender, "Content-Type": "application/json"}
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def call(method, path, body=None, extra=None):
    h = dict(headers, **(extra or {}))
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    if r.status // 100 != 2:
        raise RuntimeError(f"{method} {path}: {r.status} {data[:200]!r}")
    return json.loads(data) if data else {}


def handshake(i):
    neg = call("POST", "/a2a/negotiate", proposal)["negotiation_id"]
    exe = call("POST", "/a2a/execute", json.dumps({"text": f"hello {i}"}), {"A2A-Negotiation-ID": neg})["execution_id"]
    call("POST", "/a2a/confirm", json.dumps({"execution_id": exe}))
    res = call("GET", f"/a2a/result/{urllib.parse.quote(exe, safe='')}?wait_ms=10000")
    if res.get("status") != "succeeded":
        raise RuntimeError(f"result: {json.dumps(res)[:200]}")


ms, at, wall, errors = [], [], [], []
start = time.monotonic()
for i in range(count):
    due = start + i / rate
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    t0, w0 = time.monotonic(), time.time()
    try:
        handshake(i)
        ms.append((time.monotonic() - t0) * 1000)
        at.append(round(t0 - start, 2))
        wall.append(round(w0, 4))
    except Exception as e:  # a failed handshake is counted, the connection reopened
        errors.append(str(e)[:200])
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
print(json.dumps({"ok": len(ms), "failed": len(errors), "errors": errors[:5], "ms": ms, "at": at, "wall": wall}))
