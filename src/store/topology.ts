import type { Clock } from '../clock.js';
import { redactUrl } from '../config.js';
import type { Logger } from '../logger.js';
import { createPool, type Pool } from './pool.js';

/**
 * What the store looks like from here, found out before the replica's pool opens: a standby
 * (read-only), and whether the URL gives each connection a session of its own (PostgreSQL, or
 * PgBouncer in session mode) or hands each transaction whichever server connection is free
 * (PgBouncer in transaction mode). docs/scaling.md#pgbouncer says what follows from each.
 */
export type Pooling = 'session' | 'transaction';

/** PostgreSQL is in recovery: a standby, read-only until promoted. */
export async function storeInRecovery(db: Pool): Promise<boolean> {
  const { rows } = await db.query(`SELECT pg_is_in_recovery() AS r`);
  return rows[0].r === true;
}

/**
 * Whether two transactions of one client connection may run on different server sessions. One
 * client reads its backend, a second client opens a transaction and reads its own, and the first
 * reads its backend again. A session of its own keeps one backend and never shares it; a
 * transaction pooler hands the second client the backend the first just left (PgBouncer reuses
 * the last one freed) and the first another one.
 */
export async function storePoolingProbe(db: Pool): Promise<Pooling> {
  const a = await db.connect();
  const b = await db.connect().catch((err) => {
    a.release();
    throw err;
  });
  const pid = async (c: typeof a) => Number((await c.query(`SELECT pg_backend_pid() AS p`)).rows[0].p);
  try {
    const a1 = await pid(a);
    await b.query('BEGIN');
    const b1 = await pid(b);
    const a2 = await pid(a);
    await b.query('COMMIT');
    return a1 !== a2 || a1 === b1 ? 'transaction' : 'session';
  } finally {
    a.release();
    b.release();
  }
}

/** PgBouncer refuses startup parameters it does not know (SQLSTATE 08P01 'unsupported startup parameter: x'). */
function refusedStartupParameter(err: unknown): string | undefined {
  const m = /unsupported startup parameter:?\s*(\S+)/i.exec((err as Error)?.message ?? '');
  return m?.[1];
}

export class StoreTopologyError extends Error {}

export interface StoreTopology {
  pooling: Pooling;
  /** Where LISTEN goes; null: nowhere (a transaction pooler and no listen URL), the loops poll. */
  listenUrl: string | null;
  /** Hot statements as named prepared statements: never through a transaction pooler. */
  preparedStatements: boolean;
}

/**
 * Waits while the store is a standby (saying so, once a minute), then finds its pooling and
 * names what an operator got wrong: a transaction pooler with no direct session for LISTEN, a
 * listen URL that is a transaction pooler too, a session pooler where transaction pooling was
 * meant (a listen URL given), a PgBouncer refusing the pool's startup parameters.
 */
export async function storeTopology(p: { databaseUrl: string; listenDatabaseUrl?: string; preparedStatements: boolean; log: Logger; clock: Clock }): Promise<StoreTopology> {
  const { log } = p;
  const probe = createPool(p.databaseUrl, { max: 2, applicationName: 'opschain-probe' });
  try {
    let warnedAt = -Infinity;
    for (;;) {
      let standby: boolean;
      try {
        standby = await storeInRecovery(probe);
      } catch (err) {
        const param = refusedStartupParameter(err);
        if (param) {
          throw new StoreTopologyError(
            `the database URL reaches PgBouncer, which refuses the startup parameter ${param}: add "ignore_startup_parameters = statement_timeout, lock_timeout, idle_in_transaction_session_timeout" to its [pgbouncer] section and set those timeouts with connect_query (docs/scaling.md#pgbouncer)`,
          );
        }
        throw err;
      }
      if (!standby) break;
      if (p.clock.now() - warnedAt >= 60_000) {
        warnedAt = p.clock.now();
        log.warn({ store: redactUrl(p.databaseUrl) }, 'the store is a standby (read-only, in recovery): waiting until it is promoted or its address points at the primary');
      }
      await p.clock.sleep(1_000);
    }
    const pooling = await storePoolingProbe(probe);
    let listenUrl: string | null = p.listenDatabaseUrl ?? p.databaseUrl;
    if (pooling === 'transaction') {
      if (!p.listenDatabaseUrl) {
        listenUrl = null;
        log.warn(
          { store: redactUrl(p.databaseUrl) },
          'the database URL is a transaction pooler (PgBouncer in transaction mode) and no --listen-database-url is set: LISTEN/NOTIFY is off, so this replica polls (dispatch every 250 ms to 2 s, coordination every 5 s) instead of being woken; give it a direct session with --listen-database-url',
        );
      } else {
        await listenUrlCheck(p.listenDatabaseUrl, log);
      }
      if (p.preparedStatements) log.info('named prepared statements off: a transaction pooler runs each transaction on whichever server connection is free');
    } else if (p.listenDatabaseUrl && p.listenDatabaseUrl !== p.databaseUrl) {
      log.warn(
        { store: redactUrl(p.databaseUrl) },
        'a --listen-database-url is set, but the database URL gives every connection a session of its own (PgBouncer in session mode, or PostgreSQL itself): each of this replica\'s store connections holds a server connection; for PgBouncer to share them, set pool_mode = transaction',
      );
    }
    return { pooling, listenUrl, preparedStatements: p.preparedStatements && pooling === 'session' };
  } finally {
    await probe.end().catch(() => {});
  }
}

/** The listen URL must give a session of its own: through a transaction pooler, notifications go astray. */
async function listenUrlCheck(url: string, log: Logger): Promise<void> {
  const probe = createPool(url, { max: 2, applicationName: 'opschain-probe' });
  try {
    if ((await storePoolingProbe(probe)) === 'transaction') {
      log.warn({ listen: redactUrl(url) }, 'the --listen-database-url is a transaction pooler too: LISTEN there loses notifications; point it at PostgreSQL (or PgBouncer in session mode)');
    }
  } finally {
    await probe.end().catch(() => {});
  }
}
