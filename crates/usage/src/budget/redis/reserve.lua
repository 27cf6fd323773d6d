-- Reserves the same amounts in every budget, or in none.
-- KEYS: one hash per budget, fields '<slice start>:m|t|r'.
-- ARGV: money, tokens, requests asked; then per budget: the oldest slice
-- still counted, the current slice, the caps of money, tokens and
-- requests (-1: none), how long until the current slice stops counting
-- (ms: the hash expires then).
-- Returns {1, spent money, tokens, requests of each budget...}, or
-- {0, the budget's index, the dimension's index, spent, the oldest slice
-- holding spend (-1: none)} for the first budget without room.
local dims = {'m', 't', 'r'}
local ask = {tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])}
local out = {1}
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 6
  local oldest = tonumber(ARGV[a + 1])
  local sums = {0, 0, 0}
  local first = -1
  local all = redis.call('HGETALL', KEYS[i])
  for j = 1, #all, 2 do
    local f = all[j]
    local sep = string.find(f, ':', 1, true)
    local slice = tonumber(string.sub(f, 1, sep - 1))
    if slice < oldest then
      -- Out of the window: forgotten.
      redis.call('HDEL', KEYS[i], f)
    else
      local v = tonumber(all[j + 1])
      local d = string.sub(f, sep + 1)
      for k = 1, 3 do
        if d == dims[k] then sums[k] = sums[k] + v end
      end
      if v > 0 and (first < 0 or slice < first) then first = slice end
    end
  end
  for k = 1, 3 do
    local cap = tonumber(ARGV[a + 2 + k])
    if cap >= 0 and sums[k] + ask[k] > cap then
      return {0, i, k, sums[k], first}
    end
  end
  for k = 1, 3 do out[#out + 1] = sums[k] end
end
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 6
  local current = ARGV[a + 2]
  for k = 1, 3 do
    if ask[k] ~= 0 then
      -- The string, not the number: Lua would write a large one as 1e+15.
      redis.call('HINCRBY', KEYS[i], current .. ':' .. dims[k], ARGV[k])
    end
  end
  redis.call('PEXPIRE', KEYS[i], ARGV[a + 6])
end
return out
