-- journal_append.lua: append one accepted notice to a journal partition,
-- unless the partition already holds its maximum of undelivered notices.
--
-- KEYS[1] partition   notices:{<p>}   Stream
-- ARGV[1] maximum length of the partition (entries not yet acknowledged)
-- ARGV[2..] the entry's field/value pairs
--
-- Returns the entry's id, or the error FULL when the partition is at its
-- maximum (nothing written). Entries leave the stream only once delivered
-- (journal_ack.lua), so the length is what is still undelivered.
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then
  return redis.error_reply('FULL journal partition holds ' .. ARGV[1] .. ' undelivered notices')
end
return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
