-- Applies a batch of limiter operations atomically, on Redis time.
--
-- KEYS: for resource i, KEYS[3i-2] holds its meter state, KEYS[3i-1] its
-- adaptive state (reduced capacity, when, pause) and KEYS[3i] its fair
-- shares between replicas.
-- ARGV[1] resources R, ARGV[2] recovery interval (us), ARGV[3] recovery
-- factor, ARGV[4] release channel (told of capacity that came back),
-- ARGV[5] in-flight lease TTL (ms), ARGV[6] the calling replica's id, then 6
-- per resource: algorithm
-- (1 token bucket, 2 gcra, 3 sliding window, 4 in-flight), capacity,
-- window (us), burst, name, the jitter margin the replica holds on it (us,
-- the configured one or wider after collisions; see "The jitter margin"
-- below); then the operations, each a letter and its fields:
--   A n (idx cost member ttl_ms weight)*n  take all parts or none
--   L idx want min weight line ahead_us    lease up to `want` (at least `min`;
--                                          `line` 1: for waiters already queued;
--                                          `ahead_us` > 0: also reserve what comes
--                                          due within it, see "A line's lease")
--   S idx member reserved actual           settle a part (refund or debit)
--   R idx member                           release an in-flight lease
--   N idx member ttl_ms                    renew an in-flight lease
--   I idx                                  report the resource's state
-- `weight` is the replica's weight on the resource (its waiting tenants'):
-- see "Fair shares" below.
-- Replies 4 integers per operation:
--   A: 1,0,0,0 granted | 0,wait_us,idx,kind (0 wait, 1 never, 2 in-flight,
--      3 another replica's share: the wait is an estimate)
--   L: taken,due_us,per_ns,0 (the last token taken is due in due_us, the
--      tokens before it every per_ns before that) | 0,wait_us,0,kind (as
--      A's, 0 or 3)   S/R/N: 1,0,0,0
--   I: available,pause_us,capacity,burst (in-flight: capacity - held)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local R = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local rfactor = tonumber(ARGV[3])
local relch = ARGV[4]
local lease_ttl = tonumber(ARGV[5])
local me = ARGV[6]
local res = {}
local p = 7
for i = 1, R do
  res[i] = { algo = tonumber(ARGV[p]), cap = tonumber(ARGV[p + 1]), win = tonumber(ARGV[p + 2]),
             burst = tonumber(ARGV[p + 3]), name = ARGV[p + 4], margin = tonumber(ARGV[p + 5]),
             skey = KEYS[3 * i - 2], akey = KEYS[3 * i - 1], fkey = KEYS[3 * i] }
  p = p + 6
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
    local full_at = 0
    if not tk then
      -- Gone with its TTL, or never there: full, and idle since ever.
      tk = r.eburst
      ts = now
    elseif tk < r.eburst then
      full_at = ts + (r.eburst - tk) * r.win / r.eff
    else
      full_at = ts
    end
    -- A Retry-After pause (an upstream's 429) found the upstream empty:
    -- nothing is left here either, and nothing refills before the pause
    -- ends, when the upstream has its next one. A replica ahead of the
    -- upstream (granting on refill the upstream counts later) is then
    -- behind it, instead of colliding again at every refill.
    local from = ts
    if r.pause > ts then
      if tk > 0 then tk = 0 end
      from = math.min(r.pause, now)
      r.dirty = true
    end
    local refill = (now - from) * r.eff / r.win
    if refill < 0 then refill = 0 end
    r.t = math.min(r.eburst, tk + refill)
    -- Full since `full_at`: idle that long (see "The jitter margin").
    if r.t >= r.eburst and now > full_at then r.idle = now - full_at end
    -- A debt deeper than one window (written before it was bounded) is
    -- cut to one, and its key's TTL written again.
    if r.t < -r.eff then
      r.t = -r.eff
      r.dirty = true
    end
  elseif r.algo == 2 then
    local tat = tonumber(redis.call('GET', r.skey)) or 0
    r.T = r.win / r.eff
    -- A pause found the upstream empty (as for a token bucket above).
    if r.pause > 0 and tat < r.pause + r.eburst * r.T then
      local drained = math.min(r.pause, now) + r.eburst * r.T
      if tat < drained then
        tat = drained
        r.dirty = true
      end
    end
    if tat < now then
      r.idle = now - tat
      tat = now
    end
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

-- The jitter margin: calls leave at the bucket's pace and reach the
-- upstream with network jitter. While a busy period lasts that costs
-- nothing, but at its start the upstream's bucket is full, and refill it
-- wastes while the first calls are on their way is counted here. So a
-- take that finds the bucket full (idle for `r.idle` us) holds back
-- refill for the margin, never more than the bucket was idle, once per
-- busy period and never per grant: the sustained rate is the configured
-- one. Where the burst has no room for it, it is taken from time: the
-- full bucket lets its grant go and the next waits (a debt the refill
-- pays). As the in-process limiter does (`meter/bucket.rs`).
local function hold(r)
  local idle = r.idle
  r.idle = nil
  if not idle or r.margin <= 0 then return 0 end
  return math.min(r.margin, idle, r.win)
end

local function take(r, cost, member, ttl)
  if r.algo == 1 then
    r.t = r.t - cost - hold(r) * r.eff / r.win
  elseif r.algo == 2 then
    r.tat = r.tat + hold(r) + cost * r.T
  elseif cost > 0 then
    local score = now
    if r.algo == 4 then score = now + ttl * 1000 end
    redis.call('ZADD', r.skey, score, member)
    r.sum = r.sum + cost
    r.entries[#r.entries + 1] = { cost, score }
  end
  r.dirty = true
end

-- What a token bucket or GCRA holds now, in whole tokens (none while
-- paused).
local function avail_of(r)
  load(r)
  local avail = 0
  if r.algo == 1 then
    avail = math.floor(r.t)
  elseif r.algo == 2 then
    avail = math.floor((r.eburst * r.T - (r.tat - now)) / r.T + 1e-9)
  end
  if r.pause > now then avail = 0 end
  return avail
end

-- The tokens a token bucket or GCRA holds now, fractions included (0
-- while paused).
local function level_of(r)
  load(r)
  if r.pause > now then return 0 end
  if r.algo == 1 then return r.t end
  return (r.eburst * r.T - (r.tat - now)) / r.T
end

-- Fair shares between replicas (token buckets and GCRA). Each replica
-- queues its own waiters fairly, but a shared bucket alone serves
-- whichever replica asks first. So each replica that asked lately has an
-- entry beside the bucket: its weight (the tenants it has waiting, as it
-- said on its last call), a balance (its weight's share of the refill,
-- kept to its share of the burst, less what it took) and when it stops
-- counting. A replica may take what the bucket holds beyond the others'
-- positive balances, or, short of that, its own balance; the replica owed
-- most may always take what it asks for, so nobody waits on a replica
-- that does not ask. Tokens nobody is owed go to whoever asks: an unused
-- share is not lost. A replica refused for fairness is told when its
-- share will have given it what it asked for, so nobody polls; only the
-- calls replicas make anyway (one per decision, lease or batch of a
-- line) read and write this state.
local FAIR_IDLE = 250000 -- us a replica still counts after its last wait

local function fair(r)
  if r.fs then return r.fs end
  local f = { reps = {}, gone = {} }
  local h = redis.call('HGETALL', r.fkey)
  local ts = now
  for j = 1, #h, 2 do
    local k, v = h[j], h[j + 1]
    if k == 'ts' then
      ts = tonumber(v) or now
    else
      local w, s, e = string.match(v, '^([^,]+),([^,]+),([^,]+)$')
      w, s, e = tonumber(w), tonumber(s), tonumber(e)
      if w and s and e then
        f.reps[k] = { w = w, s = s, e = e }
      else
        f.gone[#f.gone + 1] = k
      end
    end
  end
  local W = 0
  for _, x in pairs(f.reps) do
    if x.e > ts then W = W + x.w end
  end
  local gain = 0
  if now > ts then gain = (now - ts) * r.eff / r.win end
  for k, x in pairs(f.reps) do
    if x.e <= now then
      f.reps[k] = nil
      f.gone[#f.gone + 1] = k
      f.dirty = true
    elseif W > 0 and gain > 0 then
      local cap = math.max(1, r.eburst * x.w / W)
      if x.s < cap then x.s = math.min(cap, x.s + gain * x.w / W) end
    end
  end
  r.fs = f
  return f
end

-- How much of `avail` this replica (weight `weight`) may take now, and,
-- when that is less than `need`, how long (us) until its share gives it
-- `need`; and its entry.
local function fair_room(r, weight, avail, need)
  local f = fair(r)
  f.dirty = true
  local x = f.reps[me]
  if not x then
    x = { s = 0, e = now }
    f.reps[me] = x
  end
  x.w = math.max(1, weight)
  local owed, top, W, gone, capped = 0, nil, x.w, nil, true
  for k, y in pairs(f.reps) do
    if k ~= me then
      W = W + y.w
      if y.s > 0 then
        owed = owed + y.s
        if not gone or y.e < gone then gone = y.e end
      end
      if not top or y.s > top then top = y.s end
    end
  end
  -- Whether every other replica is owed all it can be (its cap in
  -- `fair`): from then on the whole refill is nobody's.
  for k, y in pairs(f.reps) do
    if k ~= me and y.s < math.max(1, r.eburst * y.w / W) - 1e-9 then capped = false end
  end
  x.alone = top == nil
  if x.alone then return avail, 0, x end
  local room = math.max(avail - owed, math.min(x.s, avail))
  if x.s >= top then return math.max(room, math.min(need, avail)), 0, x end
  local short = need - math.max(x.s, avail - owed)
  local wait = 0
  if short > 0 then
    wait = short * r.win * W / (r.eff * x.w)
    -- Others owed all they can be: what refills beyond it is this
    -- replica's as fast as it comes, not at its share's pace.
    local level = level_of(r)
    if capped then
      -- Room enough once the whole tokens held cover what others are
      -- owed and `need`.
      local due = (math.ceil(need + owed - 1e-9) - level) * r.win / r.eff
      wait = math.min(wait, math.max(0, due))
    end
    -- Never past the bucket's filling: a refill nobody takes then is
    -- lost to every replica (a replica whose waiters went to another
    -- pool deployment is still counted, and owed, for a while).
    -- (A bucket already full stays with what others are owed: a small
    -- burst can be all owed, and asking again at once would spin.)
    if level < r.eburst then wait = math.min(wait, (r.eburst - level) * r.win / r.eff) end
    -- What a replica is owed is kept for it only while it counts.
    if gone and gone - now < wait then wait = gone - now end
    wait = math.max(1, wait)
  end
  return room, wait, x
end

-- This replica took `n` (0 when refused, told to wait `wait` us).
local function fair_took(r, x, n, wait)
  if x.alone then
    x.s = 0
  else
    x.s = math.max(x.s - n, -r.eburst)
  end
  x.e = now + 2 * wait + FAIR_IDLE
end

-- Tokens that came back to the bucket from this replica pay back what it
-- owes for them; they never make it owed more.
local function fair_refund(r, n)
  if r.algo > 2 then return end
  local f = fair(r)
  local x = f.reps[me]
  if x and x.s < 0 then
    x.s = math.min(0, x.s + n)
    f.dirty = true
  end
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
  if diff < 0 then
    r.notify = true
    fair_refund(r, -diff)
  end
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

-- A line's lease. A replica whose line of waiters takes only what the
-- bucket holds when its call arrives loses what overflows between its
-- calls: with a round trip as long as the burst's refill (10 tokens at
-- 2,000/s is 5 ms) the bucket fills between calls. So a line's lease may
-- also reserve what comes due within `ahead` us: those tokens are taken
-- now (the bucket goes into debt, as GCRA's TAT runs ahead) and the
-- replica hands each to a waiter only when it is due; the reply says when
-- the last is due. Every replica sees the debt, so the bucket's bound
-- holds for all of them together; the debt is never more than a burst
-- (nor a window's refill), and what the replica does not spend it gives
-- back with a settle. No reservation while paused. Where other replicas
-- share the bucket, a line reserves ahead only its weight's share of
-- what comes due: the others' next tokens are due after what it
-- reserved, so a replica with few waiters (each waiting a round trip and
-- its token's due time) would otherwise get less than its share.
local function reach_of(r, avail, ahead, weight)
  if ahead <= 0 or r.algo > 2 or r.pause > now then return avail end
  local W = math.max(1, weight)
  for k, y in pairs(fair(r).reps) do
    if k ~= me then W = W + y.w end
  end
  local most = math.min(ahead * r.eff / r.win * math.max(1, weight) / W, r.eburst, r.eff)
  return math.max(avail, math.floor(level_of(r) + most + 1e-9))
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
    local fx = {}
    for k = 0, n - 1 do
      local q = p + 2 + 5 * k
      local idx = tonumber(ARGV[q])
      local r = res[idx]
      local cost = tonumber(ARGV[q + 1])
      local w, kind = wait_for(r, cost)
      if w >= 0 and r.algo <= 2 then
        local _, fw, x = fair_room(r, tonumber(ARGV[q + 4]), avail_of(r), cost)
        fx[#fx + 1] = { r, x, cost }
        if fw > w then w, kind = fw, 3 end
      end
      if w < 0 then
        worst, widx, wkind = -1, idx, 1
        break
      elseif w > worst then
        worst, widx, wkind = w, idx, kind
      end
    end
    if worst == 0 then
      for k = 0, n - 1 do
        local q = p + 2 + 5 * k
        take(res[tonumber(ARGV[q])], tonumber(ARGV[q + 1]), ARGV[q + 2], tonumber(ARGV[q + 3]))
      end
      for _, e in ipairs(fx) do fair_took(e[1], e[2], e[3], 0) end
      reply(1, 0, 0, 0)
    else
      for _, e in ipairs(fx) do fair_took(e[1], e[2], 0, math.max(worst, 0)) end
      reply(0, worst, widx, wkind)
    end
    p = p + 2 + 5 * n
  elseif op == 'L' then
    local r = res[tonumber(ARGV[p + 1])]
    local want = tonumber(ARGV[p + 2])
    local min = tonumber(ARGV[p + 3])
    local avail = avail_of(r)
    -- Taken for waiters already queued (`line`): their busy period goes
    -- on, and the bucket filled only because this replica came late, so
    -- the margin is not held again where it would cost more than half
    -- the burst (2,000/s burst 10: 40 tokens a fill, where the round
    -- trip alone lets the bucket fill every few ms); unless a pause (a
    -- Retry-After) ended after it filled, which the upstream saw as a
    -- gap too. A margin that fits the burst is held: the upstream's
    -- bucket, behind this one by the network's delay, may not be full
    -- yet, and a whole burst taken at once would find it short.
    if ARGV[p + 5] == '1' and r.idle and r.pause <= now - r.idle
      and r.margin * r.eff / r.win > r.eburst / 2 then r.idle = nil end
    -- A take that holds the margin starts a busy period: it reserves
    -- nothing ahead (the margin is the refill it holds back).
    local ahead = tonumber(ARGV[p + 6])
    if r.idle and r.margin > 0 then ahead = 0 end
    local reach = reach_of(r, avail, ahead, tonumber(ARGV[p + 4]))
    local got = math.min(want, reach)
    local x, fw = nil, 0
    if r.algo <= 2 then
      local room
      room, fw, x = fair_room(r, tonumber(ARGV[p + 4]), reach, min)
      got = math.min(got, math.floor(room + 1e-9))
    end
    if got >= min and got > 0 then
      local due, per = 0, 0
      if r.algo <= 2 then
        due = math.max(0, (got - level_of(r)) * r.win / r.eff)
        per = r.win * 1000 / r.eff
      end
      take(r, got, '', 0)
      if x then fair_took(r, x, got, 0) end
      reply(got, due, math.floor(per), 0)
    else
      local w = wait_for(r, min)
      local kind = 0
      if fw > w then w, kind = fw, 3 end
      if x then fair_took(r, x, 0, math.max(w, 0)) end
      reply(0, math.max(w, 1), 0, kind)
    end
    p = p + 7
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
  local f = r.fs
  if f and f.dirty then
    if #f.gone > 0 then redis.call('HDEL', r.fkey, unpack(f.gone)) end
    local args = { 'ts', now }
    local last = now
    for k, x in pairs(f.reps) do
      args[#args + 1] = k
      args[#args + 1] = string.format('%d,%.6f,%.0f', x.w, x.s, x.e)
      if x.e > last then last = x.e end
    end
    redis.call('HSET', r.fkey, unpack(args))
    redis.call('PEXPIRE', r.fkey, math.ceil((last - now) / 1000) + 1000)
  end
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
