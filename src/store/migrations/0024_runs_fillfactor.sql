-- A run's row is updated once per group of its steps that finish (open_steps) and once more when
-- it finishes. Runs submitted together fill their pages, so without free room the counter update
-- moved the row to another page (the whole row again and an entry in each of its indexes); with
-- half a page free it stays in place (HOT) and only the finish, which changes indexed columns,
-- writes index entries.
ALTER TABLE runs SET (fillfactor = 50);
