import { createHash } from 'node:crypto';
import type pg from 'pg';

/**
 * A hot statement sent as a named prepared statement: each connection parses and plans it once
 * and afterwards only binds and executes it, where an unnamed statement is parsed, analysed and
 * planned on every call. For the group's and the tick's CTEs that planning is most of the
 * database's CPU per call (a 50-item lease end: 0.5 ms unnamed, 0.12 ms prepared).
 *
 * Only for statements whose generic plan is as good as a custom one: rows reached through
 * primary keys or unnest arrays. A statement whose best plan depends on its parameters (the
 * queue claim: its LIMIT and which OR branches are live) stays unnamed.
 *
 * The name is derived from the text, so one text is one prepared statement per connection.
 * A migration that adds a column changes what a `*` returns; the next execution of a statement
 * prepared before it fails once with "cached plan must not change result type", and the pool's
 * connections then prepare their statements again under new names (createPool).
 *
 * Only pools created with `preparedStatements` (the server's, unless `store.prepared_statements`
 * is off) send the name; elsewhere the statement goes unnamed, as any other.
 */
export function prepared(text: string): (values: unknown[]) => pg.QueryConfig {
  const name = `opschain_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
  return (values) => ({ name, text, values });
}
