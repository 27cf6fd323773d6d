-- Replicas coming back from their local shares meet at one moment, on
-- Redis time: the first to return marks it `wait` ms ahead, the others
-- (back within that time, as their reconnection backoff allows) find the
-- mark. Replies how long until the mark (0 for a replica that is late).
-- KEYS[1] the mark. ARGV[1] wait (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = tonumber(ARGV[1])
local at = tonumber(redis.call('GET', KEYS[1]))
if not at then
  at = now + wait
  -- Gone once every replica that returned with this one has met it: a
  -- later outage sets a new mark.
  redis.call('SET', KEYS[1], at, 'PX', 2 * wait)
end
return math.max(0, at - now)
