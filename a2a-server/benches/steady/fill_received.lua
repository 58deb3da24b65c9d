-- wrk: fills the executions waiting for CONFIRM: SENDERS senders (did:web:<PREFIX><i>.example.com) each NEGOTIATE
-- once, then EXECUTE without ever confirming (past a sender's share the agent answers 429).
local proposal = '{"target_capability":"submit_report","proposed_schema":{"type":"object",'
  .. '"properties":{"title":{"type":"string"},"timestamp":{"type":"string","format":"date-time"}},'
  .. '"required":["title","timestamp"]},"timeout_ms":30000}'
local payload = '{"title":"Broken pump","timestamp":"2026-11-29T21:00:00Z"}'
local senders = tonumber(os.getenv("SENDERS") or "1")
local prefix = os.getenv("PREFIX") or "fill"
local negs, n, pending = {}, 0, 0

function setup(thread)
  thread:set("offset", math.random(0, 1000000))
end

function request()
  n = n + 1
  pending = (n + (offset or 0)) % senders
  local h = {["Content-Type"] = "application/json", ["A2A-Version"] = "0.3",
             ["A2A-Sender-ID"] = "did:web:" .. prefix .. pending .. ".example.com"}
  if negs[pending] == nil then
    return wrk.format("POST", "/a2a/negotiate", h, proposal)
  end
  h["A2A-Negotiation-ID"] = negs[pending]
  return wrk.format("POST", "/a2a/execute", h, payload)
end

function response(status, hdrs, body)
  local id = body:match('"negotiation_id":"([^"]+)"')
  if id then negs[pending] = id end
end
