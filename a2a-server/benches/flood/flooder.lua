-- wrk: sender B at full speed (see flood.sh). Each connection NEGOTIATEs, then EXECUTEs with that negotiation and
-- never CONFIRMs, alternately: B's negotiations (LIM-4, its own replaced past its share) and its executions waiting
-- for CONFIRM (LIM-5, 429 quota_exceeded past its share) stay full for the whole flood.
local sender = "did:web:" .. (os.getenv("FLOOD_SENDER") or "flooder") .. ".example.com"
local proposal = '{"target_capability":"echo_message","proposed_schema":{"type":"object",'
  .. '"properties":{"text":{"type":"string"}},"required":["text"]},"timeout_ms":30000}'
local payload = '{"text":"flood"}'
local neg = nil
local negotiate = true

function request()
  local h = {["Content-Type"] = "application/json", ["A2A-Version"] = "0.3", ["A2A-Sender-ID"] = sender}
  if negotiate or neg == nil then
    negotiate = true
    return wrk.format("POST", "/a2a/negotiate", h, proposal)
  end
  h["A2A-Negotiation-ID"] = neg
  return wrk.format("POST", "/a2a/execute", h, payload)
end

function response(status, hdrs, body)
  if negotiate then
    neg = body:match('"negotiation_id":"([^"]+)"') or neg
  end
  negotiate = not negotiate
end
