-- A store. KEYS[1]: the entry. ARGV: the value, the scope, the model, the
-- TTL in ms, the idle limit in ms (0: none).
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 's', ARGV[2], 'm', ARGV[3], 't', ms, 'l', ARGV[4])
local expire = tonumber(ARGV[4])
local idle = tonumber(ARGV[5])
if idle > 0 and idle < expire then
  expire = idle
end
redis.call('PEXPIRE', KEYS[1], expire)
return 1
