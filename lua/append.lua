-- append.lua: append a signed notice to the journal, once for as long as
-- its URL is valid: a notice URL sent again (an exchange's retry, or a
-- replay) while its exp has not passed is taken once.
--
-- KEYS[1] notices:{<p>}               the journal partition (Stream)
-- KEYS[2] seen:{<p>}:<minute>         Set of the fingerprints of the notices
--                                     whose URLs expire in that minute
-- ARGV[1] the notice's fingerprint (8 bytes)
-- ARGV[2] unix seconds at which KEYS[2] may go (after the minute's end)
-- ARGV[3..] the entry's field value pairs
--
-- Returns the entry id, or 0 when the notice was taken before.
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('EXPIREAT', KEYS[2], ARGV[2], 'NX')
return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
