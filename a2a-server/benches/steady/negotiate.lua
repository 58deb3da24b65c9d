-- wrk: NEGOTIATE submit_report with the demo's proposal, from SENDERS senders (default 1) named
-- did:web:<PREFIX><i>.example.com, in turn. See steady_state.sh.
local body = '{"target_capability":"submit_report","proposed_schema":{"type":"object",'
  .. '"properties":{"title":{"type":"string"},"timestamp":{"type":"string","format":"date-time"}},'
  .. '"required":["title","timestamp"]},"timeout_ms":30000}'
local senders = tonumber(os.getenv("SENDERS") or "1")
local prefix = os.getenv("PREFIX") or "bench"
local n = 0

function setup(thread)
  thread:set("offset", math.random(0, 1000000))
end

function request()
  n = n + 1
  local sender = "did:web:" .. prefix .. ((n + (offset or 0)) % senders) .. ".example.com"
  return wrk.format("POST", "/a2a/negotiate",
    {["Content-Type"] = "application/json", ["A2A-Version"] = "0.3", ["A2A-Sender-ID"] = sender}, body)
end
