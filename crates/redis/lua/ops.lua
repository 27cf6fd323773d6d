-- Applies a batch of limiter operations atomically, on Redis time.
--
-- KEYS: for resource i, KEYS[2i-1] holds its meter state and KEYS[2i] its
-- adaptive state (reduced capacity, when, pause).
-- ARGV[1] resources R, ARGV[2] recovery interval (us), ARGV[3] recovery
-- factor, ARGV[4] release channel (told of capacity that came back), ARGV[5] in-flight lease TTL (ms), then 5
-- per resource: algorithm
-- (1 token bucket, 2 gcra, 3 sliding window, 4 in-flight), capacity,
-- window (us), burst, name; then the operations, each a letter and its
-- fields:
--   A n (idx cost member ttl_ms)*n  take all parts or none
--   L idx want min                  lease up to `want` (at least `min`)
--   S idx member reserved actual    settle a part (refund or debit)
--   R idx member                    release an in-flight lease
--   N idx member ttl_ms             renew an in-flight lease
--   I idx                           report the resource's state
-- Replies 4 integers per operation:
--   A: 1,0,0,0 granted | 0,wait_us,idx,kind (0 wait, 1 never, 2 in-flight)
--   L: taken,wait_us,0,0   S/R/N: 1,0,0,0
--   I: available,pause_us,capacity,burst (in-flight: capacity - held)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local R = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local rfactor = tonumber(ARGV[3])
local relch = ARGV[4]
local lease_ttl = tonumber(ARGV[5])
local res = {}
local p = 6
for i = 1, R do
  res[i] = { algo = tonumber(ARGV[p]), cap = tonumber(ARGV[p + 1]), win = tonumber(ARGV[p + 2]),
             burst = tonumber(ARGV[p + 3]), name = ARGV[p + 4], skey = KEYS[2 * i - 1], akey = KEYS[2 * i] }
  p = p + 5
end

-- Capacity in force: the configured one, or a reduced one recovering by
-- `rfactor` (at least +1) every `interval` since the reduction (or at the
-- pace stored with the reduction: `rf` every `ri`). Computed
-- here from the stored reduction, so recovery happens once for everyone.
local function effective(r)
  if r.eff then return end
  r.eff = r.cap
  r.pause = 0
  local a = redis.call('HMGET', r.akey, 'cap', 'at', 'pause', 'ri', 'rf')
  if a[1] or a[3] then
    local c = tonumber(a[1]) or r.cap
    local at = tonumber(a[2]) or now
    local ri = tonumber(a[4]) or interval
    local rf = tonumber(a[5]) or rfactor
    local steps = math.floor((now - at) / ri)
    local k = 0
    while k < steps and c < r.cap do
      c = math.max(c + 1, math.floor(c * rf))
      k = k + 1
    end
    if c > r.cap then c = r.cap end
    r.eff = c
    r.pause = tonumber(a[3]) or 0
    if c >= r.cap and r.pause <= now then redis.call('DEL', r.akey) end
  end
  if r.eff < r.cap then
    r.eburst = math.max(1, math.floor(r.burst * r.eff / r.cap))
  else
    r.eburst = r.burst
  end
end

local function load(r)
  if r.loaded then return end
  effective(r)
  r.loaded = true
  if r.algo == 1 then
    local s = redis.call('HMGET', r.skey, 't', 'ts')
    local tk = tonumber(s[1])
    local ts = tonumber(s[2])
    if not tk then
      tk = r.eburst
      ts = now
    end
    local refill = (now - ts) * r.eff / r.win
    if refill < 0 then refill = 0 end
    r.t = math.min(r.eburst, tk + refill)
    -- A debt deeper than one window (written before it was bounded) is
    -- cut to one, and its key's TTL written again.
    if r.t < -r.eff then
      r.t = -r.eff
      r.dirty = true
    end
  elseif r.algo == 2 then
    local tat = tonumber(redis.call('GET', r.skey)) or now
    if tat < now then tat = now end
    r.T = r.win / r.eff
    local deepest = now + r.eburst * r.T + r.win
    if tat > deepest then
      tat = deepest
      r.dirty = true
    end
    r.tat = tat
  else
    local floor = now
    if r.algo == 3 then floor = now - r.win end
    redis.call('ZREMRANGEBYSCORE', r.skey, '-inf', floor)
    local z = redis.call('ZRANGE', r.skey, 0, -1, 'WITHSCORES')
    r.entries = {}
    r.sum = 0
    for j = 1, #z, 2 do
      local cost = tonumber(string.match(z[j], ':(%d+)$')) or 1
      r.sum = r.sum + cost
      r.entries[#r.entries + 1] = { cost, tonumber(z[j + 1]) }
    end
  end
end

-- What taking `cost` now would need: 0 when it fits, else the wait in us
-- (-1 when it never fits) and the kind.
local function wait_for(r, cost)
  load(r)
  if r.algo <= 2 then
    if cost > r.burst then return -1, 1 end
  elseif cost > r.cap then return -1, 1 end
  local w = 0
  local kind = 0
  if r.algo == 1 then
    if r.t < cost then
      w = (cost - r.t) * r.win / r.eff
    end
  elseif r.algo == 2 then
    local over = r.tat + cost * r.T - now - r.eburst * r.T
    if over > 0 then w = over end
  else
    local need = r.sum + cost - r.eff
    if need > 0 then
      local freed = 0
      for _, e in ipairs(r.entries) do
        freed = freed + e[1]
        if freed >= need then
          if r.algo == 3 then w = e[2] + r.win - now else w = e[2] - now end
          break
        end
      end
      if w <= 0 then w = 1 end
      if r.algo == 4 then kind = 2 end
    end
  end
  if r.pause > now and r.pause - now > w then w = r.pause - now end
  return w, kind
end

local function take(r, cost, member, ttl)
  if r.algo == 1 then
    r.t = r.t - cost
  elseif r.algo == 2 then
    r.tat = r.tat + cost * r.T
  elseif cost > 0 then
    local score = now
    if r.algo == 4 then score = now + ttl * 1000 end
    redis.call('ZADD', r.skey, score, member)
    r.sum = r.sum + cost
    r.entries[#r.entries + 1] = { cost, score }
  end
  r.dirty = true
end

-- Settles a part at `actual`. No debt goes beyond one window's capacity
-- (what is available never below -capacity), whatever `actual` is, so a
-- settle cannot lock a resource (or give its key a TTL of centuries); an
-- in-flight slot has no cost to settle.
local function settle(r, member, reserved, actual)
  if r.algo == 4 then return end
  load(r)
  local diff = actual - reserved
  if diff == 0 then return end
  -- Capacity came back: replicas that cached a refusal ask again.
  if diff < 0 then r.notify = true end
  if r.algo == 1 then
    local t = math.min(r.eburst, r.t - diff)
    r.t = math.max(t, math.min(r.t, -r.eff))
  elseif r.algo == 2 then
    local tat = math.max(now, r.tat + diff * r.T)
    r.tat = math.min(tat, math.max(now + r.eburst * r.T + r.win, r.tat))
  else
    if diff > 0 then
      -- At most twice the capacity held in the window.
      local room = math.max(0, 2 * r.eff - r.sum)
      if diff > room then actual = reserved + room end
    end
    local score = redis.call('ZSCORE', r.skey, member)
    if score then
      redis.call('ZREM', r.skey, member)
      if actual > 0 then
        local base = string.match(member, '^(.*):%d+$') or member
        redis.call('ZADD', r.skey, score, base .. ':' .. actual)
      end
      r.loaded = false
      load(r)
    end
  end
  r.dirty = true
end

local out = {}
local function reply(a, b, c, d)
  out[#out + 1] = math.floor(a)
  out[#out + 1] = math.ceil(b)
  out[#out + 1] = c
  out[#out + 1] = d
end

while p <= #ARGV do
  local op = ARGV[p]
  if op == 'A' then
    local n = tonumber(ARGV[p + 1])
    local worst, widx, wkind = 0, 0, 0
    for k = 0, n - 1 do
      local q = p + 2 + 4 * k
      local idx = tonumber(ARGV[q])
      local w, kind = wait_for(res[idx], tonumber(ARGV[q + 1]))
      if w < 0 then
        worst, widx, wkind = -1, idx, 1
        break
      elseif w > worst then
        worst, widx, wkind = w, idx, kind
      end
    end
    if worst == 0 then
      for k = 0, n - 1 do
        local q = p + 2 + 4 * k
        take(res[tonumber(ARGV[q])], tonumber(ARGV[q + 1]), ARGV[q + 2], tonumber(ARGV[q + 3]))
      end
      reply(1, 0, 0, 0)
    else
      reply(0, worst, widx, wkind)
    end
    p = p + 2 + 4 * n
  elseif op == 'L' then
    local r = res[tonumber(ARGV[p + 1])]
    local want = tonumber(ARGV[p + 2])
    local min = tonumber(ARGV[p + 3])
    load(r)
    local avail = 0
    if r.algo == 1 then
      avail = math.floor(r.t)
    elseif r.algo == 2 then
      avail = math.floor((r.eburst * r.T - (r.tat - now)) / r.T + 1e-9)
    end
    if r.pause > now then avail = 0 end
    local got = math.min(want, avail)
    if got >= min and got > 0 then
      take(r, got, '', 0)
      reply(got, 0, 0, 0)
    else
      local w = wait_for(r, min)
      reply(0, math.max(w, 1), 0, 0)
    end
    p = p + 4
  elseif op == 'S' then
    settle(res[tonumber(ARGV[p + 1])], ARGV[p + 2], tonumber(ARGV[p + 3]), tonumber(ARGV[p + 4]))
    reply(1, 0, 0, 0)
    p = p + 5
  elseif op == 'R' then
    local r = res[tonumber(ARGV[p + 1])]
    if redis.call('ZREM', r.skey, ARGV[p + 2]) > 0 then
      r.notify = true
      r.loaded = false
    end
    reply(1, 0, 0, 0)
    p = p + 3
  elseif op == 'N' then
    local r = res[tonumber(ARGV[p + 1])]
    local ttl = tonumber(ARGV[p + 3])
    redis.call('ZADD', r.skey, 'XX', now + ttl * 1000, ARGV[p + 2])
    r.loaded = false
    r.dirty = true
    reply(1, 0, 0, 0)
    p = p + 4
  elseif op == 'I' then
    local r = res[tonumber(ARGV[p + 1])]
    load(r)
    local avail
    if r.algo == 1 then avail = r.t
    elseif r.algo == 2 then avail = (r.eburst * r.T - (r.tat - now)) / r.T
    else avail = r.eff - r.sum end
    local pause = 0
    if r.pause > now then pause = r.pause - now end
    reply(avail, pause, r.eff, r.eburst)
    p = p + 2
  else
    return redis.error_reply('unknown operation ' .. tostring(op))
  end
end

-- Write back what changed, each key with a TTL after which its state is
-- the same as a fresh one (full), so idle keys cost nothing.
for i = 1, R do
  local r = res[i]
  if r.notify then redis.call('PUBLISH', relch, r.name) end
  if r.dirty then
    if r.algo == 1 then
      local full_us = (r.eburst - r.t) * r.win / r.eff
      redis.call('HSET', r.skey, 't', r.t, 'ts', now)
      redis.call('PEXPIRE', r.skey, math.ceil((full_us + r.win) / 1000) + 1000)
    elseif r.algo == 2 then
      redis.call('SET', r.skey, r.tat, 'PX', math.ceil((r.tat - now + r.win) / 1000) + 1000)
    elseif r.algo == 3 then
      redis.call('PEXPIRE', r.skey, math.ceil(r.win / 1000) + 1000)
    else
      redis.call('PEXPIRE', r.skey, lease_ttl + 1000)
    end
  end
end
return out
