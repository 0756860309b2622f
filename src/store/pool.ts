import pg from 'pg';
import { isStoreUnavailable } from './failures.js';
import { useFastTimestamptz } from './timestamptz.js';

export { isStatementTimeout, isStoreUnavailable, STATEMENT_TIMEOUT_MESSAGE, storeCause } from './failures.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** What a store function runs on: the pool (one statement, any connection) or a transaction's client. */
export type Db = Pool | PoolClient;

export interface PoolOptions {
  max?: number;
  /** Name shown in pg_stat_activity.application_name. */
  applicationName?: string;
  connectionTimeoutMs?: number;
  queryTimeoutMs?: number;
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  onError?: (err: Error) => void;
  /**
   * Send statements built with prepared() as named prepared statements (a long-lived server's
   * pool). Off (the default, and for one-shot CLI pools) they go unnamed: a process that runs a
   * statement once gains nothing, and a transaction pooler may not keep them.
   */
  preparedStatements?: boolean;
}

/** Bigints (counts, positions) come back as JS numbers: every value the store keeps fits in 2^53. */
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));
useFastTimestamptz();

/**
 * One pool per process. node-postgres otherwise waits forever on a hung server, so every bound is
 * set: connect, client-side query timeout, server-side statement and lock timeouts; and an error
 * listener on the pool and on every client so a dropped connection never takes the process down.
 */
export function createPool(connectionString: string, opts: PoolOptions = {}): Pool {
  const onError = opts.onError ?? (() => {});
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'opschain',
    connectionTimeoutMillis: opts.connectionTimeoutMs ?? 5_000,
    query_timeout: opts.queryTimeoutMs ?? 15_000,
    statement_timeout: opts.statementTimeoutMs ?? 10_000,
    lock_timeout: opts.lockTimeoutMs ?? 5_000,
    idle_in_transaction_session_timeout: 30_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  } as pg.PoolConfig);
  pool.on('error', onError);
  // Shared by the pool's clients: after a migration made a prepared statement stale, every
  // connection prepares its statements afresh (one failed execution per pool, not per connection).
  const prepared = { enabled: opts.preparedStatements ?? false, generation: 0 };
  pool.on('connect', (client) => {
    client.on('error', onError);
    observeQueries(pool, client, prepared);
  });
  observeConnects(pool);
  return pool;
}

/**
 * Told of every query a pool's clients run: its duration, and the error if it failed; a
 * connection the pool could not open is reported with no duration (null).
 */
export type QueryObserver = (seconds: number | null, err?: unknown) => void;

const observers = new WeakMap<Pool, QueryObserver>();

/** Observes the queries of this pool from now on (metrics: store latency and errors). One observer per pool. */
export function poolObserve(pool: Pool, observer: QueryObserver): void {
  observers.set(pool, observer);
}

/** A store that refuses connections fails before any query runs: count those failures too. */
function observeConnects(pool: Pool): void {
  const connect = pool.connect.bind(pool) as (cb?: (err: Error | undefined, ...rest: unknown[]) => void) => unknown;
  (pool as unknown as { connect: (cb?: (err: Error | undefined, ...rest: unknown[]) => void) => unknown }).connect = (cb) => {
    if (cb) {
      return connect((err, ...rest) => {
        if (err) observers.get(pool)?.(null, err);
        cb(err, ...rest);
      });
    }
    const result = connect() as Promise<PoolClient>;
    result.catch((err: unknown) => observers.get(pool)?.(null, err));
    return result;
  };
}

/** PostgreSQL's answer to a prepared statement whose result columns a migration changed. */
const isStaleResultType = (err: unknown): boolean =>
  (err as { code?: string } | null)?.code === '0A000' && /cached plan must not change result type/.test((err as Error).message ?? '');

/**
 * Wraps a client's query (promise or callback form) so the pool's observer (if any) sees each one
 * end; named statements go unnamed unless the pool prepares them, and a named statement a
 * migration made stale is prepared afresh: after that error the pool's clients send their named
 * statements under a new suffix (the old ones stay unused on the server).
 */
function observeQueries(pool: Pool, client: PoolClient, prepared: { enabled: boolean; generation: number }): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const onEnd = (start: number, err?: unknown) => {
    if (err !== undefined && isStaleResultType(err)) prepared.generation++;
    observers.get(pool)?.((performance.now() - start) / 1000, err);
  };
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const first = args[0] as { name?: string; text?: string; values?: unknown[] } | string;
    if (typeof first === 'object' && first !== null && typeof first.name === 'string') {
      if (!prepared.enabled) args = [{ text: first.text, values: first.values }, ...args.slice(1)];
      else if (prepared.generation > 0) args = [{ ...first, name: `${first.name}_${prepared.generation}` }, ...args.slice(1)];
    }
    const start = performance.now();
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      // pool.query hands the client a callback.
      const cb = last as (err: unknown, ...rest: unknown[]) => void;
      return query(...args.slice(0, -1), (err: unknown, ...rest: unknown[]) => {
        onEnd(start, err ?? undefined);
        cb(err, ...rest);
      });
    }
    const result = query(...args);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(
        () => onEnd(start),
        (err: unknown) => onEnd(start, err),
      );
    }
    return result;
  };
}

/**
 * Runs a read model's statements in one REPEATABLE READ, READ ONLY snapshot, so a row moving
 * between tables mid-read (an entry becoming a lease) is seen in one place only. On a pool it takes
 * and releases its own client; on a client (not in a transaction) it uses that one.
 */
export async function withSnapshot<T>(db: Db, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const own = typeof (db as PoolClient).release !== 'function';
  const client = own ? await (db as Pool).connect() : (db as PoolClient);
  let began = false;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    began = true;
    const result = await fn(client);
    await client.query('COMMIT');
    began = false;
    return result;
  } finally {
    if (began) await client.query('ROLLBACK').catch(() => {});
    if (own) client.release();
  }
}

/** Runs fn inside BEGIN/COMMIT on one client; rolls back and rethrows on error. */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    commitWaiters.set(client, []);
    const result = await fn(client);
    await client.query('COMMIT');
    runAfterCommit(client);
    return result;
  } catch (err) {
    commitWaiters.delete(client);
    try {
      await client.query('ROLLBACK');
    } catch {
      broken = true;
    }
    throw err;
  } finally {
    client.release(broken ? true : undefined);
  }
}

const commitWaiters = new WeakMap<PoolClient, Array<() => void>>();

/**
 * Runs `fn` once the transaction open on `client` (one withTransaction began) has committed, and
 * never when it rolls back: for what must follow a write only if it stands (exporting the spans
 * of what it recorded). `fn` must not throw or wait; it is not given the client.
 */
export function afterCommit(client: PoolClient, fn: () => void): void {
  // A client in no withTransaction (none in the code today) has no commit to wait for: dropped.
  commitWaiters.get(client)?.push(fn);
}

function runAfterCommit(client: PoolClient): void {
  const list = commitWaiters.get(client);
  if (!list) return;
  commitWaiters.delete(client);
  for (const fn of list) fn();
}

/**
 * Runs fn inside a savepoint of the client's open transaction. On error the savepoint's work is
 * undone and the error rethrown, and the transaction can go on: one row's failure does not take
 * the rows before it with it.
 */
export async function withSavepoint<T>(client: PoolClient, fn: () => Promise<T>): Promise<T> {
  await client.query('SAVEPOINT opschain_row');
  const waiting = commitWaiters.get(client)?.length;
  try {
    const result = await fn();
    await client.query('RELEASE SAVEPOINT opschain_row');
    return result;
  } catch (err) {
    await client.query('ROLLBACK TO SAVEPOINT opschain_row');
    // What the undone work asked to follow its commit goes with it.
    if (waiting !== undefined) commitWaiters.get(client)?.splice(waiting);
    throw err;
  }
}

/** Runs fn on one client outside a transaction: each of its statements commits on its own. */
export async function withClient<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    return await fn(client);
  } catch (err) {
    broken = isStoreUnavailable(err);
    throw err;
  } finally {
    client.release(broken ? true : undefined);
  }
}

/**
 * True when err is about the data of the row being written (a value the store refuses: SQLSTATE
 * classes 22 data exception and 23 integrity constraint), or a failure of our own code on that
 * data (an error that is not PostgreSQL's): trying again will fail again. False when the store
 * is unreachable, slow, or busy (a serialisation failure, a deadlock, a lock timeout): those pass.
 */
export function isRowFault(err: unknown): boolean {
  if (isStoreUnavailable(err)) return false;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code.startsWith('22') || code.startsWith('23');
  return true;
}

/** The database's clock: time that crosses replicas (leases, ages, due times) is judged by it alone. */
export async function storeNow(db: Db): Promise<Date> {
  const { rows } = await db.query<{ now: Date }>(`SELECT now() AS now`);
  return rows[0].now;
}
