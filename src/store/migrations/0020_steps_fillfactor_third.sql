-- A step's attempt writes two new versions of its row (started, finished) before pruning can
-- be counted on to reclaim the first: with half a page free, a page of steps drained together
-- still sent about one update in seven to another page (the whole row again, a lock record and
-- an entry in both indexes, about 95 B of WAL per step on average). With two thirds free both
-- versions of every row fit beside it, and every update stays in place (HOT).
ALTER TABLE steps SET (fillfactor = 33);
