#!/usr/bin/env python3
"""Writes spec/vectors/sessions.json: the pure rules of spec/PROTOCOL.md §17 (skip tokens, repeats, session
addresses, allow-list globs, wait chains, secret redaction). The expected values are written by hand here, from the
text of the spec, not computed by the implementation under test.

Run: python3 spec/vectors/gen/sessions.py
"""
import json
import os

tests = []
groups = []


def group(kind, comment, cases):
    g = {"type": kind, "comment": comment, "tests": []}
    for c in cases:
        tc = {"tcId": len(tests) + 1, "comment": c[0], "flags": c[1], "input": c[2], "result": c[3]}
        if len(c) > 4 and c[4] is not None:
            if c[3] == "invalid":
                tc["error"] = c[4]
            else:
                tc["expected"] = c[4]
        tests.append(tc)
        g["tests"].append(tc)
    groups.append(g)


V, I = "valid", "invalid"

# input: the reply text; valid = it is a skip token (expected: the token), invalid = it is not.
group("SkipToken", "PP-4 (a): skip tokens, case-, whitespace- and punctuation-tolerant", [
    ("exact REPLY_SKIP", ["Exact"], "REPLY_SKIP", V, "REPLY_SKIP"),
    ("exact NO_REPLY", ["Exact"], "NO_REPLY", V, "NO_REPLY"),
    ("exact ANNOUNCE_SKIP", ["Exact"], "ANNOUNCE_SKIP", V, "ANNOUNCE_SKIP"),
    ("exact HEARTBEAT_OK", ["Exact"], "HEARTBEAT_OK", V, "HEARTBEAT_OK"),
    ("lower case (the seed-000 loop)", ["Case"], "no_reply", V, "NO_REPLY"),
    ("mixed case", ["Case"], "Reply_Skip", V, "REPLY_SKIP"),
    ("surrounding white space and newline", ["Space"], "  NO_REPLY\n", V, "NO_REPLY"),
    ("trailing full stop", ["Punctuation"], "NO_REPLY.", V, "NO_REPLY"),
    ("markdown bold", ["Punctuation"], "**NO_REPLY**", V, "NO_REPLY"),
    ("backticks", ["Punctuation"], "`ANNOUNCE_SKIP`", V, "ANNOUNCE_SKIP"),
    ("quoted with a full stop", ["Punctuation"], "\"REPLY_SKIP\".", V, "REPLY_SKIP"),
    ("exclamation", ["Punctuation"], "HEARTBEAT_OK!", V, "HEARTBEAT_OK"),
    ("ideographic full stop", ["Punctuation"], "NO_REPLY。", V, "NO_REPLY"),
    ("token followed by words", ["NotAToken"], "NO_REPLY yet, checking", I),
    ("words then token", ["NotAToken"], "I have nothing more. REPLY_SKIP", I),
    ("token twice", ["NotAToken"], "REPLY_SKIP REPLY_SKIP", I),
    ("space instead of underscore", ["NotAToken"], "no reply", I),
    ("underscore missing", ["NotAToken"], "NOREPLY", I),
    ("empty string is empty, not a token", ["NotAToken"], "", I),
    ("a plain answer", ["NotAToken"], "The bonus is 5000.", I),
])

# input: {reply, previous, given}; valid with expected = what ends the exchange, or null when it goes on.
group("EndsExchange", "PP-4 (a)-(c): what ends a ping-pong after a reply", [
    ("white space only is an empty reply", ["Empty"], {"reply": " \n\t", "previous": None, "given": "hi"}, V, "empty_reply"),
    ("a skip token", ["Token"], {"reply": "NO_REPLY", "previous": None, "given": "thanks"}, V, "skip_token"),
    ("repeats its own previous reply, other case and spacing", ["Repeat"],
     {"reply": "the bonus is  5000.", "previous": "The bonus is 5000.", "given": "ok?"}, V, "repeat"),
    ("echoes the message it was given", ["Repeat"],
     {"reply": "Thanks!", "previous": None, "given": "thanks!"}, V, "repeat"),
    ("word boundaries matter", ["NoEnd"], {"reply": "ab c", "previous": "a bc", "given": "x"}, V, None),
    ("a new answer goes on", ["NoEnd"],
     {"reply": "Paid in May.", "previous": "The bonus is 5000.", "given": "When is it paid?"}, V, None),
])

# input: an address string; valid = expected {agent, key}; invalid = not an address.
group("SessionAddress", "§17.1: {agent DID}#{session key}", [
    ("simple", ["Address"], "did:web:work.example.com#bonus-desk", V,
     {"agent": "did:web:work.example.com", "key": "bonus-desk"}),
    ("with a port and a path", ["Address"], "did:web:localhost%3A8080:agents:a#main", V,
     {"agent": "did:web:localhost%3A8080:agents:a", "key": "main"}),
    ("key of every allowed character", ["Address"], "did:web:a.example.com#A-z_0.9~", V,
     {"agent": "did:web:a.example.com", "key": "A-z_0.9~"}),
    ("no fragment", ["NotAnAddress"], "did:web:a.example.com", I),
    ("empty key", ["NotAnAddress"], "did:web:a.example.com#", I),
    ("key with a slash", ["NotAnAddress"], "did:web:a.example.com#a/b", I),
    ("key of 129 characters", ["NotAnAddress"], "did:web:a.example.com#" + "k" * 129, I),
    ("not did:web", ["NotAnAddress"], "did:key:z6Mk#main", I),
    ("upper-case host", ["NotAnAddress"], "did:web:A.example.com#main", I),
])

# input: {pattern, text}; valid = matches, invalid = does not.
group("Glob", "POL-1: allow-list globs (* any run, ? one character)", [
    ("star matches a subdomain", ["Match"], {"pattern": "did:web:*.corp.example.com#*", "text": "did:web:hr.corp.example.com#main"}, V),
    ("star matches nothing", ["Match"], {"pattern": "did:web:a.example.com#*", "text": "did:web:a.example.com#"}, V),
    ("question mark", ["Match"], {"pattern": "did:web:agent?.example.com#main", "text": "did:web:agent7.example.com#main"}, V),
    ("exact", ["Match"], {"pattern": "did:web:partner.example.com#support", "text": "did:web:partner.example.com#support"}, V),
    ("star alone matches everything", ["Match"], {"pattern": "*", "text": "did:web:x.example.com#y"}, V),
    ("star does not make the dot optional", ["NoMatch"], {"pattern": "did:web:*.corp.example.com#*", "text": "did:web:corp.example.com#main"}, I),
    ("question mark needs one character", ["NoMatch"], {"pattern": "did:web:agent?.example.com#main", "text": "did:web:agent.example.com#main"}, I),
    ("case matters", ["NoMatch"], {"pattern": "did:web:a.example.com#Main", "text": "did:web:a.example.com#main"}, I),
    ("pathological backtracking stays linear", ["NoMatch"], {"pattern": "*a*a*a*a*a*b", "text": "a" * 200}, I),
])

# input: {chain, target}; valid = expected the cycle (or null when no cycle); invalid = the header is malformed.
group("WaitChain", "POL-5: A2A-Wait-Chain and cycle detection", [
    ("direct cycle: B waits on A, sends to A", ["Cycle"],
     {"chain": "did:web:a.example.com#main, did:web:b.example.com#desk", "target": "did:web:a.example.com#main"}, V,
     ["did:web:a.example.com#main", "did:web:b.example.com#desk", "did:web:a.example.com#main"]),
    ("cycle through a third session", ["Cycle"],
     {"chain": "did:web:a.example.com#main,did:web:b.example.com#desk,did:web:c.example.com#x", "target": "did:web:b.example.com#desk"}, V,
     ["did:web:b.example.com#desk", "did:web:c.example.com#x", "did:web:b.example.com#desk"]),
    ("no cycle", ["NoCycle"],
     {"chain": "did:web:a.example.com#main", "target": "did:web:b.example.com#desk"}, V, None),
    ("empty chain", ["NoCycle"], {"chain": "", "target": "did:web:b.example.com#desk"}, V, None),
    ("an entry that is not an address", ["Malformed"], {"chain": "did:web:a.example.com#main, bogus", "target": "did:web:a.example.com#main"}, I),
    ("33 entries", ["Malformed"], {"chain": ",".join(f"did:web:a.example.com#s{i}" for i in range(33)), "target": "did:web:a.example.com#main"}, I),
])

# input: text; expected: {text, redacted}
group("Redact", "HIS-4: secrets redacted before a transcript leaves the agent", [
    ("bearer token", ["Secret"], "use Bearer eyJabc.def-ghi now", V, {"text": "use Bearer [REDACTED] now", "redacted": 1}),
    ("authorization header to the end of the line", ["Secret"], "Authorization: Basic dXNlcjpwYXNz\nnext", V,
     {"text": "Authorization: [REDACTED]\nnext", "redacted": 1}),
    ("a JWT on its own", ["Secret"], "token eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln here", V,
     {"text": "token [REDACTED] here", "redacted": 1}),
    ("OpenAI-style key", ["Secret"], "key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX", V, {"text": "key [REDACTED]", "redacted": 1}),
    ("AWS access key id", ["Secret"], "AKIAIOSFODNN7EXAMPLE is mine", V, {"text": "[REDACTED] is mine", "redacted": 1}),
    ("GitHub token", ["Secret"], "ghp_abcdefghijklmnopqrstuvwxyz0123456789", V, {"text": "[REDACTED]", "redacted": 1}),
    ("password assignment", ["Secret"], "login with password=hunter2 please", V,
     {"text": "login with password=[REDACTED] please", "redacted": 1}),
    ("JSON api_key member", ["Secret"], "{\"api_key\": \"abc123\", \"user\": \"bo\"}", V,
     {"text": "{\"api_key\": \"[REDACTED]\", \"user\": \"bo\"}", "redacted": 1}),
    ("PEM private key block", ["Secret"],
     "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\ndone", V,
     {"text": "[REDACTED]\ndone", "redacted": 1}),
    ("nothing secret", ["Clean"], "Spent 2000 on clothes yesterday.", V,
     {"text": "Spent 2000 on clothes yesterday.", "redacted": 0}),
    ("the word token alone is not a secret", ["Clean"], "the token ring network", V,
     {"text": "the token ring network", "redacted": 0}),
])

doc = {
    "algorithm": "A2A-SESSIONS",
    "spec_refs": ["§17.1", "§17.5", "§17.7", "§17.9"],
    "header": [
        "The pure rules of sessions and conversations: skip tokens and what ends a ping-pong (PP-4), session",
        "addresses (§17.1), allow-list globs (POL-1), wait chains (POL-5) and secret redaction (HIS-4).",
        "Generated by spec/vectors/gen/sessions.py; the expected values are written by hand from the spec.",
    ],
    "notes": {
        "Exact": "the token exactly", "Case": "the token in another case", "Space": "white space around the token",
        "Punctuation": "punctuation, quotes, backticks or emphasis around the token",
        "NotAToken": "not a skip token: the exchange may go on",
        "Empty": "an empty reply", "Token": "a skip token", "Repeat": "a repeat", "NoEnd": "the exchange goes on",
        "Address": "a valid session address", "NotAnAddress": "not a session address",
        "Match": "the glob matches", "NoMatch": "the glob does not match",
        "Cycle": "a waiting send to the target closes a cycle", "NoCycle": "no cycle",
        "Malformed": "the header value is malformed", "Secret": "a secret to redact", "Clean": "nothing to redact",
    },
    "numberOfTests": len(tests),
    "testGroups": groups,
}
out = os.path.join(os.path.dirname(__file__), "..", "sessions.json")
with open(out, "w", encoding="utf-8") as f:
    json.dump(doc, f, indent=2, ensure_ascii=False)
    f.write("\n")
print(f"wrote {len(tests)} tests to {os.path.normpath(out)}")
