-- wrk: the warm path of one sender, per connection (run with as many threads as connections): NEGOTIATE once,
-- then EXECUTE, CONFIRM, RESULT with long-poll, again and again. Counts HTTP requests (a warm execution is 3).
local sender = "did:web:" .. (os.getenv("PREFIX") or "warm") .. ".example.com"
local proposal = '{"target_capability":"submit_report","proposed_schema":{"type":"object",'
  .. '"properties":{"title":{"type":"string"},"timestamp":{"type":"string","format":"date-time"}},'
  .. '"required":["title","timestamp"]},"timeout_ms":30000}'
local payload = '{"title":"Broken pump","timestamp":"2026-11-29T21:00:00Z"}'
local step, neg, exe = "negotiate", nil, nil
local errors = 0

local function headers(extra)
  local h = {["Content-Type"] = "application/json", ["A2A-Version"] = "0.3", ["A2A-Sender-ID"] = sender}
  if extra then for k, v in pairs(extra) do h[k] = v end end
  return h
end

function request()
  if step == "negotiate" then
    return wrk.format("POST", "/a2a/negotiate", headers(), proposal)
  elseif step == "execute" then
    return wrk.format("POST", "/a2a/execute", headers({["A2A-Negotiation-ID"] = neg}), payload)
  elseif step == "confirm" then
    return wrk.format("POST", "/a2a/confirm", headers(), '{"execution_id":"' .. exe .. '"}')
  else
    local seg = exe:gsub(":", "%%3A")
    return wrk.format("GET", "/a2a/result/" .. seg .. "?wait_ms=5000", headers())
  end
end

function response(status, hdrs, body)
  if step == "negotiate" then
    neg = body:match('"negotiation_id":"([^"]+)"')
    step = neg and "execute" or "negotiate"
  elseif step == "execute" then
    exe = body:match('"execution_id":"([^"]+)"')
    if exe then step = "confirm" else step = "negotiate" end
  elseif step == "confirm" then
    step = "result"
  else
    step = "execute"
  end
end
