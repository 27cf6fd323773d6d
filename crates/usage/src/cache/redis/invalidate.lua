-- Removes the entries among KEYS that match. ARGV: '1' and the scope to
-- match only that scope's ('0' and '' for any), '1' and the model ('0'
-- and '' for any). Returns how many it removed.
local removed = 0
for _, k in ipairs(KEYS) do
  local e = redis.call('HMGET', k, 's', 'm')
  if e[1] and (ARGV[1] == '0' or e[1] == ARGV[2]) and (ARGV[3] == '0' or e[2] == ARGV[4]) then
    removed = removed + redis.call('DEL', k)
  end
end
return removed
