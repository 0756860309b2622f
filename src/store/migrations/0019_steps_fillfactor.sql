-- A step's row is updated twice per attempt (started, finished) moments apart. With a third of
-- each page free, a page of 40 steps drained together ran out of room before pruning could
-- reclaim the first versions, and a fifth of the updates left the page: each of those writes
-- the whole row again plus an entry in both indexes. Half a page free keeps them in place (HOT).
ALTER TABLE steps SET (fillfactor = 50);
