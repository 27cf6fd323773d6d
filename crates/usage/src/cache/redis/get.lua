-- A lookup. KEYS[1]: the entry. ARGV[1]: the idle limit in ms (0: none).
-- Returns {value, age in ms, scope, model, TTL in ms} or nil. Age is judged by the Redis server's
-- clock, the one clock all replicas share.
local e = redis.call('HMGET', KEYS[1], 'v', 't', 'l', 's', 'm')
if not (e[1] and e[2] and e[3] and e[4] and e[5]) then
  return false
end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local age = math.max(0, ms - tonumber(e[2]))
local ttl = tonumber(e[3])
if age >= ttl then
  redis.call('DEL', KEYS[1])
  return false
end
local idle = tonumber(ARGV[1])
if idle > 0 then
  -- Served now: idle again from now, never past its TTL.
  redis.call('PEXPIRE', KEYS[1], math.min(idle, ttl - age))
end
return {e[1], age, e[4], e[5], ttl}
