import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { systemClock, type Clock } from './clock.js';
import type { ServerConfig } from './config.js';
import { clearServerRecord, homeLockAcquire, readLocalSecret, writeLocalSecret, writeServerRecord } from './home.js';
import { adminTokenOf } from './api/admin-auth.js';
import { createHttpServer } from './api/http.js';
import { Readiness, storeCheck } from './api/readiness.js';
import type { Logger } from './logger.js';
import { startEmbeddedStore, type EmbeddedStore } from './store/embedded.js';
import { migrate } from './store/migrate.js';
import { createPool, type Pool } from './store/pool.js';
import { storeTopology } from './store/topology.js';
import { replicaRegister, replicaSetAddress, replicaStop } from './store/replicas.js';
import { tokenCreate } from './store/tokens.js';
import { VERSION } from './version.js';

export { soleOwnership, type Feature, type ServerContext, type ShardOwnership } from './context.js';
import { soleOwnership, type Feature, type ServerContext } from './context.js';

export interface ServerHandle {
  ctx: ServerContext;
  url: string;
  databaseUrl: string;
  stop(): Promise<void>;
}

export function newReplicaId(): string {
  return `${hostname()}-${randomBytes(3).toString('hex')}`;
}

export interface StartOptions {
  config: ServerConfig;
  log: Logger;
  clock?: Clock;
  features?: Feature[];
  /** Write server.json / local tokens into the home (the CLI does; tests may not). */
  recordHome?: boolean;
}

/** The composition root of one replica. */
export async function startServer(opts: StartOptions): Promise<ServerHandle> {
  const { config, log } = opts;
  const clock = opts.clock ?? systemClock;
  let embedded: EmbeddedStore | undefined;
  let databaseUrl = config.databaseUrl;
  // One server per home: before anything of the home (its embedded store, server.json) is touched.
  const unlockHome = opts.recordHome !== false ? homeLockAcquire(config.home) : () => {};
  if (!databaseUrl) {
    embedded = await startEmbeddedStore({ home: config.home, log: (m) => log.info(m) }).catch((err) => {
      unlockHome();
      throw err;
    });
    databaseUrl = embedded.url;
    log.info({ port: embedded.port, dataDir: embedded.dataDir }, 'embedded PostgreSQL is up');
  }
  // A standby is waited for, and the pooling in front of the store decides LISTEN and prepared statements.
  const topology = await storeTopology({ databaseUrl, listenDatabaseUrl: config.listenDatabaseUrl, preparedStatements: config.preparedStatements, log, clock }).catch(async (err) => {
    if (embedded) await embedded.stop().catch(() => {});
    unlockHome();
    throw err;
  });
  const pool = createPool(databaseUrl, {
    max: 20,
    applicationName: 'opschain-server',
    preparedStatements: topology.preparedStatements,
    onError: (err) => log.warn({ err: err.message }, 'store connection error'),
  });
  try {
    const applied = await migrate(pool);
    if (applied.length) log.info({ applied: applied.map((m) => m.name) }, 'migrations applied');
    const replicaId = config.replicaId ?? newReplicaId();
    await replicaRegister(pool, { id: replicaId, host: hostname(), site: config.site, version: VERSION });

    const readiness = new Readiness();
    readiness.add(storeCheck(pool));
    const app = createHttpServer({ log, readiness, version: VERSION, replicaId, pollWindowMs: config.pollWindowMs, isAdmin: async (req) => (await adminTokenOf(pool, req)) !== undefined });
    const ctx: ServerContext = { config, pool, log, clock, replicaId, readiness, app, events: new EventEmitter(), loops: [], ownership: soleOwnership(), databaseUrl, listenUrl: topology.listenUrl, onStop: [] };
    ctx.events.setMaxListeners(0);
    for (const feature of opts.features ?? []) await feature(ctx);

    await app.listen({ port: config.port, host: config.host });
    const addr = app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.port;
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
    await replicaSetAddress(pool, replicaId, url);
    if (opts.recordHome !== false) {
      writeServerRecord(config.home, { url, pid: process.pid, replicaId, startedAt: new Date().toISOString() });
      await ensureLocalTokens(pool, config.home);
    }
    log.info({ url, replica: replicaId, site: config.site ?? null }, 'opschain server ready');

    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        log.info('stopping');
        await app.close().catch((err) => log.warn({ err: err.message }, 'http close failed'));
        await Promise.all(ctx.loops.map((l) => l.stop()));
        for (const hook of [...ctx.onStop].reverse()) await hook().catch((err) => log.warn({ err: err.message }, 'stop hook failed'));
        await replicaStop(pool, replicaId).catch((err) => log.warn({ err: err.message }, 'could not release coordination rows'));
        await pool.end().catch(() => {});
        if (opts.recordHome !== false) clearServerRecord(config.home);
        if (embedded) await embedded.stop();
        unlockHome();
        log.info('stopped');
      })());
    return { ctx, url, databaseUrl, stop };
  } catch (err) {
    await pool.end().catch(() => {});
    if (embedded) await embedded.stop().catch(() => {});
    unlockHome();
    throw err;
  }
}

/** A local admin token and registration token, so verbs and runners on this machine need no flags. */
async function ensureLocalTokens(pool: Pool, home: string): Promise<void> {
  if (!readLocalSecret(home, 'admin')) {
    const { secret } = await tokenCreate(pool, { kind: 'admin', name: 'local' });
    writeLocalSecret(home, 'admin', secret);
  }
  if (!readLocalSecret(home, 'registration')) {
    const { secret } = await tokenCreate(pool, { kind: 'registration', name: 'local' });
    writeLocalSecret(home, 'registration', secret);
  }
}
