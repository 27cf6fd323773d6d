-- An upstream answered 429: cut the shared capacity by `factor` (at most
-- once per cooldown) and pause the resource for `pause_us`, on Redis time.
-- KEYS[1] the resource's adaptive state.
-- ARGV: configured capacity, factor, cooldown (us), pause (us), recovery
-- interval (us), recovery factor.
-- Replies: reduced (0/1), capacity before, capacity after, now (s), now (us part).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cap = tonumber(ARGV[1])
local factor = tonumber(ARGV[2])
local cooldown = tonumber(ARGV[3])
local pause_us = tonumber(ARGV[4])
local interval = tonumber(ARGV[5])
local rfactor = tonumber(ARGV[6])
local a = redis.call('HMGET', KEYS[1], 'cap', 'at', 'pause')
local c = tonumber(a[1]) or cap
local at = tonumber(a[2])
if at then
  local steps = math.floor((now - at) / interval)
  local k = 0
  while k < steps and c < cap do
    c = math.max(c + 1, math.floor(c * rfactor))
    k = k + 1
  end
  if c > cap then c = cap end
end
local before = c
local reduced = 0
if not at or now - at >= cooldown then
  local n = math.max(1, math.floor(c * factor))
  if n < c then
    c = n
    reduced = 1
    redis.call('HSET', KEYS[1], 'cap', c, 'at', now)
  end
end
local pause = tonumber(a[3]) or 0
if pause_us > 0 and now + pause_us > pause then
  pause = now + pause_us
  redis.call('HSET', KEYS[1], 'pause', pause)
end
-- Kept until recovery is complete: steps of x rfactor from c up to cap.
local steps = 1
local x = c
while x < cap and steps < 10000 do
  x = math.max(x + 1, math.floor(x * rfactor))
  steps = steps + 1
end
local ttl_ms = math.ceil((steps * interval + math.max(pause - now, 0)) / 1000) + 60000
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ttl_ms) end
return { reduced, before, c, tonumber(t[1]), tonumber(t[2]) }
