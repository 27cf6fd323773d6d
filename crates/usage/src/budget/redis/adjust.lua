-- Settles a reservation: adds the differences ARGV[1..3] (money, tokens,
-- requests; negative gives back) to each budget's slice, ARGV[3 + i].
-- A slice (or budget) that stopped counting meanwhile stays gone, and a
-- count never goes below 0.
local dims = {'m', 't', 'r'}
for i = 1, #KEYS do
  local slice = ARGV[3 + i]
  for k = 1, 3 do
    local d = tonumber(ARGV[k])
    local f = slice .. ':' .. dims[k]
    if d ~= 0 and redis.call('HEXISTS', KEYS[i], f) == 1 then
      if redis.call('HINCRBY', KEYS[i], f, ARGV[k]) < 0 then
        redis.call('HSET', KEYS[i], f, 0)
      end
    end
  end
end
return 1
