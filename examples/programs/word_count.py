#!/usr/bin/env python3
"""A capability handler: the payload as JSON on stdin, the result as JSON on stdout."""
import json
import sys

payload = json.load(sys.stdin)
words = payload["text"].split()
json.dump({"words": len(words), "longest": max(words, key=len) if words else ""}, sys.stdout)
