#!/usr/bin/env python3
"""A session handler (SES-9): the delivery as JSON on stdin, the reply on stdout."""
import json
import sys

delivery = json.load(sys.stdin)
json.dump({"reply": "The desk received: " + str(delivery.get("message", ""))}, sys.stdout)
