-- The shard of a run in SQL, so a submit can take its run ids from the sequence and queue the
-- run's steps in the same statement. It is src/core/fnv.ts's shardOf: the 32-bit FNV-1a of the
-- id's decimal digits, modulo the 64 shards. Modulo 64 only the hash's low six bits count, and
-- those depend only on the low six bits of each step's operands (a product's low bits come from
-- its factors' low bits, and xor is bitwise): the offset basis 0x811c9dc5 is 5 there and the
-- prime 0x01000193 is 19. test/store/run-shard.test.ts holds the two definitions together.
CREATE FUNCTION run_shard(id bigint) RETURNS smallint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  digits text := id::text;
  h int := 5;
BEGIN
  FOR i IN 1 .. length(digits) LOOP
    h := ((h # (ascii(substr(digits, i, 1)) & 63)) * 19) & 63;
  END LOOP;
  RETURN h;
END
$$;
