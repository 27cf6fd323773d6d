-- An upstream answered 429: cut the shared capacity by `factor` (at most
-- once per cooldown) and pause the resource for `pause_us`, on Redis time.
-- KEYS[1] the resource's adaptive state.
-- ARGV: configured capacity, factor, cooldown (us), pause (us), recovery
-- interval (us), recovery factor, target capacity (0: none; the rate the
-- upstream's headers announce: cut to it, cooldown or not).
-- The interval and factor are stored with the cut: recovery from it goes
-- at that pace (fast after a cut on evidence, the seed's otherwise).
-- Replies: reduced (0/1), capacity before, capacity after, now (s), now (us part).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cap = tonumber(ARGV[1])
local factor = tonumber(ARGV[2])
local cooldown = tonumber(ARGV[3])
local pause_us = tonumber(ARGV[4])
local interval = tonumber(ARGV[5])
local rfactor = tonumber(ARGV[6])
local target = tonumber(ARGV[7]) or 0
local a = redis.call('HMGET', KEYS[1], 'cap', 'at', 'pause', 'ri', 'rf')
local c = tonumber(a[1]) or cap
local at = tonumber(a[2])
if at then
  local ri = tonumber(a[4]) or interval
  local rf = tonumber(a[5]) or rfactor
  local steps = math.floor((now - at) / ri)
  local k = 0
  while k < steps and c < cap do
    c = math.max(c + 1, math.floor(c * rf))
    k = k + 1
  end
  if c > cap then c = cap end
end
local before = c
local reduced = 0
local n = c
if target > 0 then
  n = math.max(1, math.min(c, target))
elseif not at or now - at >= cooldown then
  n = math.max(1, math.floor(c * factor))
end
if n < c then
  c = n
  reduced = 1
  redis.call('HSET', KEYS[1], 'cap', c, 'at', now, 'ri', interval, 'rf', rfactor)
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
local ttl_ms = math.ceil((steps * (tonumber(redis.call('HGET', KEYS[1], 'ri')) or interval) + math.max(pause - now, 0)) / 1000) + 60000
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ttl_ms) end
return { reduced, before, c, tonumber(t[1]), tonumber(t[2]) }
