import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { systemClock, type Clock } from './clock.js';
import type { ServerConfig } from './config.js';
import { clearServerRecord, homeLockAcquire, readLocalSecret, writeLocalSecret, writeServerRecord } from './home.js';
import type { FastifyInstance } from 'fastify';
import { adminTokenOf } from './api/admin-auth.js';
import { registerRunnerApi } from './api/runner-api.js';
import { registerMetrics, type MetricsOptions } from './api/metrics.js';
import { registerOpsRoutes } from './api/ops-routes.js';
import { registerWebhookRoutes } from './api/webhooks.js';
import { startCoordination, type CoordinationOptions } from './coordination/coordinator.js';
import type { LeaderDuty } from './coordination/duties.js';
import { CoordinationState } from './coordination/state.js';
import type { Dispatcher } from './dispatch/dispatcher.js';
import { startDispatchPlane, type DispatchFeatureOptions } from './dispatch/feature.js';
import { startLaunch, type LaunchFeatureOptions } from './triggers/feature.js';
import { createHttpServer } from './api/http.js';
import { Readiness, storeCheck } from './api/readiness.js';
import type { Logger } from './logger.js';
import { startEmbeddedStore, type EmbeddedStore } from './store/embedded.js';
import { migrate } from './store/migrate.js';
import { createPool, type Pool } from './store/pool.js';
import { storeTopology } from './store/topology.js';
import { startTracing } from './telemetry/feature.js';
import type { RunTracing } from './telemetry/run-tracing.js';
import { replicaRegister, replicaSetAddress, replicaStop } from './store/replicas.js';
import { tokenCreate } from './store/tokens.js';
import { VERSION } from './version.js';

export { soleOwnership, type ReplicaEnv, type ShardOwnership } from './context.js';
import { soleOwnership, type ReplicaEnv, type ReplicaPart, type ShardOwnership } from './context.js';

/** A started replica as its tests and its command see it. */
export interface ReplicaView extends ReplicaEnv {
  readonly ownership: ShardOwnership;
  /** Present when the replica dispatches. */
  readonly dispatcher?: Dispatcher;
}

export interface ServerHandle {
  replica: ReplicaView;
  /** The replica's HTTP server (in-process requests, route listings). */
  app: FastifyInstance;
  url: string;
  databaseUrl: string;
  /** Stops every part's loops and nothing else (no hand-over, HTTP still serving): what a crash leaves. */
  halt(): Promise<void>;
  stop(): Promise<void>;
}

/** A leader duty of a replica, built from the parts it runs over once they exist. */
export type LeaderDutyOf = (parts: { env: ReplicaEnv; dispatcher?: Dispatcher }) => LeaderDuty | undefined;

/** What a replica runs. Every part is optional; the composition root builds them in the one order their needs allow. */
export interface ReplicaPlan {
  /** `GET /metrics`. */
  metrics?: MetricsOptions;
  /** The coordination loop (lease-backed ownership, leadership, the leader's duties); absent, the replica owns every shard and leads. */
  coordination?: CoordinationOptions & { leaderDuties?: LeaderDutyOf[] };
  /** The HTTP API of every verb. */
  ops?: boolean;
  /** The dispatch plane and the runner protocol. */
  dispatch?: DispatchFeatureOptions;
  /** Signed webhook calls. */
  webhooks?: boolean;
  /** Runs exported as traces when an OTLP endpoint is configured; the hooks above emit through it. */
  tracing?: RunTracing;
  /** The launch loop (on the leader). */
  launch?: LaunchFeatureOptions;
}

export function newReplicaId(): string {
  return `${hostname()}-${randomBytes(3).toString('hex')}`;
}

export interface StartOptions {
  config: ServerConfig;
  log: Logger;
  clock?: Clock;
  plan?: ReplicaPlan;
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
  let parts: ReplicaPart[] = [];
  try {
    const applied = await migrate(pool);
    if (applied.length) log.info({ applied: applied.map((m) => m.name) }, 'migrations applied');
    const replicaId = config.replicaId ?? newReplicaId();
    await replicaRegister(pool, { id: replicaId, host: hostname(), site: config.site, version: VERSION });

    const readiness = new Readiness();
    readiness.add(storeCheck(pool));
    const app = createHttpServer({ log, readiness, version: VERSION, replicaId, pollWindowMs: config.pollWindowMs, isAdmin: async (req) => (await adminTokenOf(pool, req)) !== undefined });
    const events = new EventEmitter();
    events.setMaxListeners(0);
    const env: ReplicaEnv = { config, pool, log, clock, replicaId, readiness, events, databaseUrl, listenUrl: topology.listenUrl };
    // Tracing first, so it stops last: the spans of the other parts' last work go out with it.
    const tracing = opts.plan?.tracing ? await startTracing(env, opts.plan.tracing) : undefined;
    const built = buildReplica(app, env, opts.plan ?? {});
    parts = tracing ? [tracing, ...built.parts] : built.parts;
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
        const closing = Date.now();
        await app.close().catch((err) => log.warn({ err: err.message }, 'http close failed'));
        log.info({ ms: Date.now() - closing }, 'http closed');
        for (const [i, part] of [...parts.entries()].reverse()) {
          const t0 = Date.now();
          await part.stop().catch((err) => log.warn({ err: err.message }, 'stop hook failed'));
          // A stop is promised within 10 s: name the part that spends a second of it.
          if (Date.now() - t0 >= 1_000) log.warn({ part: i, ms: Date.now() - t0 }, 'a part was slow to stop');
        }
        await replicaStop(pool, replicaId).catch((err) => log.warn({ err: err.message }, 'could not release coordination rows'));
        await pool.end().catch(() => {});
        if (opts.recordHome !== false) clearServerRecord(config.home);
        if (embedded) await embedded.stop();
        unlockHome();
        log.info('stopped');
      })());
    const halt = async () => {
      await Promise.all(parts.map((p) => p.halt()));
    };
    return { replica: built.view, app, url, databaseUrl, halt, stop };
  } catch (err) {
    for (const part of [...parts].reverse()) await part.stop().catch(() => {});
    await pool.end().catch(() => {});
    if (embedded) await embedded.stop().catch(() => {});
    unlockHome();
    throw err;
  }
}

/**
 * Builds the parts of one replica in the order their needs allow: the ownership first (the
 * coordination state, not yet ticking), the dispatcher over it, the HTTP routes (metrics first, so
 * its response hook sees every route), the launch loop, and last the coordination loop, whose
 * leader duties run over the parts built before it. Each part gets what it needs as arguments.
 */
function buildReplica(app: FastifyInstance, env: ReplicaEnv, plan: ReplicaPlan): { parts: ReplicaPart[]; view: ReplicaView } {
  const parts: ReplicaPart[] = [];
  const coordination = plan.coordination ? new CoordinationState(env.clock) : undefined;
  const ownership: ShardOwnership = coordination ?? soleOwnership();
  const plane = plan.dispatch ? startDispatchPlane(env, ownership, plan.dispatch) : undefined;
  const dispatcher = plane?.dispatcher;
  // Hand-over and answers at the start of a clean shutdown, in start order, before the routes' own.
  app.addHook('preClose', async () => {
    for (const [i, part] of parts.entries()) {
      const t0 = Date.now();
      await part.beforeClose?.();
      if (Date.now() - t0 >= 1_000) env.log.warn({ part: i, ms: Date.now() - t0 }, 'a part was slow to hand over');
    }
  });
  if (plan.metrics) registerMetrics(app, env, { ownership, parked: () => dispatcher?.registry.size ?? 0 }, plan.metrics);
  if (plan.ops) registerOpsRoutes(app, env);
  if (plane) {
    parts.push(plane);
    parts.push(registerRunnerApi(app, env, { dispatcher: plane.dispatcher, ownership, opts: plan.dispatch! }));
  }
  if (plan.webhooks) registerWebhookRoutes(app, env);
  if (plan.launch) parts.push(startLaunch(env, ownership, plan.launch));
  if (coordination) {
    const leaderDuties = (plan.coordination!.leaderDuties ?? []).flatMap((duty) => duty({ env, dispatcher }) ?? []);
    // First to hand over at shutdown, as it was first to own.
    parts.unshift(startCoordination(env, coordination, { ...plan.coordination, leaderDuties }));
  }
  return { parts, view: { ...env, ownership, dispatcher } };
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
