-- wrk script of bench/serve.sh: every connection is one client sending one request after the other.
--   wrk -s bench/serve_wrk.lua URL -- translate FILE SRC TGT      one sentence of FILE per request, in turn
--   wrk -s bench/serve_wrk.lua URL -- complete PROMPT MAX_TOKENS  a sampled completion per request
-- Each wrk thread starts at its own place in FILE. A non-200 answer is counted and reported at the end
-- (wrk itself also prints "Non-2xx or 3xx responses").

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local function json_string(s)
  s = s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return string.format("\\u%04x", c:byte())
  end)
  return '"' .. s .. '"'
end

local mode, bodies, next_body, failures = nil, {}, 1, 0

function init(args)
  mode = args[1]
  if mode == "translate" then
    local src, tgt = args[3], args[4]
    for line in io.lines(args[2]) do
      bodies[#bodies + 1] = '{"q":' .. json_string(line) .. ',"source":"' .. src .. '","target":"' .. tgt .. '"}'
    end
    next_body = (id * 97) % #bodies + 1
    wrk.path = "/translate"
  else
    bodies[1] = '{"prompt":' .. json_string(args[2]) .. ',"max_tokens":' .. args[3] .. ',"temperature":0.8,"seed":' .. id .. '}'
    wrk.path = "/v1/completions"
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local body = bodies[next_body]
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 then failures = failures + 1 end
end

function done(summary, latency, requests)
  local failed = 0
  for _, t in ipairs(threads) do failed = failed + (t:get("failures") or 0) end
  io.write(string.format("lua: failed requests %d\n", failed))
end
