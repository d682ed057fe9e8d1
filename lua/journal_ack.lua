-- journal_ack.lua: acknowledge delivered notices and remove them from
-- their partition.
--
-- KEYS[1] partition   notices:{<p>}   Stream
-- ARGV[1] consumer group
-- ARGV[2..] entry ids
--
-- Returns how many of the ids were pending in the group.
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
return acked
