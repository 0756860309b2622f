/**
 * The chaos cluster: real `opschain server start` replicas and real `opschain runner` processes on
 * loopback, one PostgreSQL (or a primary with a synchronous standby behind one address, reached
 * through PgBouncer), a fault proxy in front of the store for each replica and one in front
 * of each replica's HTTP port (the runners' only way in). Faults are methods; the storm driver
 * (run.ts) and the deterministic test tier call them. Every process started here is stopped by
 * stop(), and by a process 'exit' hook if the harness dies first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { findLibfaketime, skewedEnv } from '../faketime.js';
import type { PgBouncer } from '../pgbouncer.js';
import type { PgPair } from '../pg-pair.js';
import { shardOf } from '../../src/core/fnv.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runRetry } from '../../src/orchestrator/retry.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { storeInvariants } from '../../src/store/invariants.js';
import { createPool, withTransaction, type Pool } from '../../src/store/pool.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { postureSet } from '../../src/store/posture.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { FaultProxy } from '../fault-proxy.js';
import { BIN, freePort, ROOT } from '../procs.js';
import { check, parseHistory, parseSideEffects, type CheckReport, type FinalStep, type HistoryRecord } from './checker.js';
import type { ReplyPath } from './schedule.js';

/** The runner with the bench executor (built: the chaos run starts it from dist/). */
const BENCH_RUNNER = join(ROOT, 'dist', 'bench', 'chaos', 'bench-runner.js');

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) {
    try {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    } catch {
      // gone
    }
  }
});

/** One child process of the cluster, its output kept (the tail) for diagnosis. */
export class Proc {
  readonly child: ChildProcess;
  output = '';
  paused = false;
  private readonly exited: Promise<number | null>;

  /** `entry`: the script started with node (default: the opschain CLI). */
  constructor(args: string[], env: NodeJS.ProcessEnv, readonly label: string, entry: string = BIN) {
    this.child = spawn(process.execPath, [entry, ...args], { env: { ...process.env, NO_COLOR: '1', OCLIF_SKIP_UPDATE_CHECK: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(this.child);
    const keep = (d: Buffer) => {
      this.output += d.toString();
      if (this.output.length > 100_000) this.output = this.output.slice(-50_000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = new Promise((r) =>
      this.child.on('exit', (code) => {
        live.delete(this.child);
        r(code);
      }),
    );
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  signal(sig: NodeJS.Signals): void {
    if (!this.running) return;
    this.child.kill(sig);
    if (sig === 'SIGSTOP') this.paused = true;
    if (sig === 'SIGCONT') this.paused = false;
  }

  async kill(): Promise<void> {
    this.signal('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (after a SIGCONT if paused), SIGKILL after the grace. */
  async stop(graceMs = 15_000): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    this.signal('SIGCONT');
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Replica {
  index: number;
  /** The replica's own HTTP port (fixed across restarts, so its proxy keeps pointing at it). */
  port: number;
  /** Runners → replica. */
  http: FaultProxy;
  /** Replica → PostgreSQL. */
  store: FaultProxy;
  proc?: Proc;
  id: string;
  boots: number;
}

export interface RunnerSlot { index: number; name: string; home: string; proc?: Proc }

export interface ClusterOptions {
  /** The chaos database (migrated by the first replica). */
  databaseUrl: string;
  dir: string;
  replicas: number;
  runners: number;
  leaseTtlMs: number;
  pollWindowMs: number;
  maxParallelSteps?: number;
  /** libfaketime's preload library for the clock-skew faults; without it they are skipped and said so. */
  libfaketime?: string;
  /**
   * Where the replicas' store proxies lead (PgBouncer in transaction mode), when not straight to
   * `databaseUrl`; LISTEN then takes a direct session to `databaseUrl`, as docs/scaling.md says.
   */
  replicaStoreUrl?: string;
  /** The primary and standby behind `databaseUrl`, for the failover fault; without it the fault is skipped and said so. */
  pair?: PgPair;
  /** The PgBouncer at `replicaStoreUrl`, for its restarts. */
  bouncer?: PgBouncer;
  /** Runners run workload steps in-process (bench/chaos/bench-executor.ts) instead of forking /bin/sh for each. */
  benchExecutor?: boolean;
  log: (m: string) => void;
}

export interface Counters {
  submittedRuns: number;
  submittedSteps: number;
  retriedRuns: number;
  /** Replica starts that exited before ready (a store fault during start) and were started again. */
  replicaStartRetries: number;
  faults: Record<string, number>;
  skipped: string[];
}

export class ChaosCluster {
  readonly pool: Pool;
  readonly replicas: Replica[] = [];
  readonly runners: RunnerSlot[] = [];
  readonly side: string;
  readonly historyDir: string;
  readonly counters: Counters = { submittedRuns: 0, submittedSteps: 0, retriedRuns: 0, replicaStartRetries: 0, faults: {}, skipped: [] };
  readonly reofferMs: number[] = [];
  /** From each store fault's end (a promotion, PgBouncer back) to the first step started after it, by fault. */
  readonly resumeMs: Array<{ fault: string; ms: number }> = [];
  /** Runner incarnations started with a skewed clock: their history's times are moved back by the offset. */
  private skewedHistories = 0;
  private failedOver = false;
  private registration = '';
  private stopped = false;
  private probes = 0;

  constructor(readonly opts: ClusterOptions) {
    mkdirSync(opts.dir, { recursive: true });
    this.side = join(opts.dir, 'side-effects.log');
    this.historyDir = join(opts.dir, 'history');
    mkdirSync(this.historyDir, { recursive: true });
    // The harness's own connections are never terminated by the connection-reset fault.
    this.pool = createPool(opts.databaseUrl, { max: 4, applicationName: 'opschain-chaos' });
  }

  private count(kind: string): void {
    this.counters.faults[kind] = (this.counters.faults[kind] ?? 0) + 1;
  }

  async start(): Promise<void> {
    const u = new URL(this.opts.replicaStoreUrl ?? this.opts.databaseUrl);
    for (let i = 0; i < this.opts.replicas; i++) {
      const port = await freePort();
      const store = new FaultProxy(u.hostname, Number(u.port || 5432));
      await store.start();
      const http = new FaultProxy('127.0.0.1', port);
      await http.start();
      this.replicas.push({ index: i, port, http, store, id: '', boots: 0 });
    }
    // The first replica migrates the database; the others start once it is ready.
    await this.startReplica(0);
    await Promise.all(this.replicas.slice(1).map((r) => this.startReplica(r.index)));
    this.registration = (await tokenCreate(this.pool, { kind: 'registration', name: 'chaos' })).secret;
    await poolLimitSet(this.pool, { name: 'db', limit: 12 });
    await poolLimitSet(this.pool, { name: 'deploy', limit: 6 });
    for (let i = 0; i < this.opts.runners; i++) {
      const name = `chaos-runner-${i}`;
      this.runners.push({ index: i, name, home: join(this.opts.dir, name) });
    }
    await Promise.all(this.runners.map((r) => this.startRunner(r.index)));
    const n = this.opts.runners;
    const deadline = Date.now() + 120_000;
    while ((await this.pool.query(`SELECT count(*)::int AS n FROM runners`)).rows[0].n < n) {
      const dead = this.runners.find((r) => r.proc && !r.proc.running);
      if (dead) throw new Error(`${dead.name} exited before it registered: ${dead.proc!.output.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`only some of the ${n} runners registered within 2 min`);
      await sleep(200);
    }
  }

  storeUrl(r: Replica): string {
    const u = new URL(this.opts.replicaStoreUrl ?? this.opts.databaseUrl);
    u.hostname = '127.0.0.1';
    u.port = String(r.store.port);
    return u.toString();
  }

  /**
   * Starts a replica as a supervisor would: a server that exits during its start (the store
   * unreachable or its connection terminated mid-migration) is started again, up to three times.
   */
  async startReplica(i: number, extraEnv: NodeJS.ProcessEnv = {}): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.startReplicaOnce(i, extraEnv);
      } catch (err) {
        if (attempt >= 3 || this.replicas[i].proc?.running) throw err;
        this.counters.replicaStartRetries++;
        this.opts.log(`replica ${i} exited during its start (${(err as Error).message.slice(0, 200)}); starting it again`);
        await sleep(1_000);
      }
    }
  }

  private async startReplicaOnce(i: number, extraEnv: NodeJS.ProcessEnv): Promise<void> {
    const r = this.replicas[i];
    r.boots++;
    r.id = `chaos-${i}-${r.boots}-${randomBytes(2).toString('hex')}`;
    const home = join(this.opts.dir, `replica-${i}`);
    r.proc = new Proc(
      ['server', 'start', '--database-url', this.storeUrl(r), ...(this.opts.replicaStoreUrl ? ['--listen-database-url', this.opts.databaseUrl] : []), '--port', String(r.port), '--home', home, '--log-level', 'warn'],
      {
        OPSCHAIN_HOME: home,
        OPSCHAIN_REPLICA_ID: r.id,
        OPSCHAIN_LEASE_TTL: `${this.opts.leaseTtlMs}ms`,
        OPSCHAIN_POLL_WINDOW: `${this.opts.pollWindowMs}ms`,
        ...extraEnv,
      },
      `replica ${i}`,
    );
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (!r.proc.running) throw new Error(`replica ${i} exited before it was ready: ${r.proc.output.slice(-2000)}`);
      try {
        const res = await fetch(`http://127.0.0.1:${r.port}/readyz`, { signal: AbortSignal.timeout(2_000) });
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`replica ${i} not ready within 2 min: ${r.proc.output.slice(-2000)}`);
      await sleep(200);
    }
  }

  /** `skewSeconds`: the runner's clock moved (libfaketime); its history goes to a file of its own, read back with the offset undone. */
  async startRunner(i: number, skewSeconds?: number): Promise<void> {
    const slot = this.runners[i];
    const history = skewSeconds === undefined ? `${slot.name}.jsonl` : `${slot.name}.skew${skewSeconds}.${++this.skewedHistories}.jsonl`;
    // Each runner prefers a different replica and fails over along the others, all through the proxies.
    const urls = this.replicas.map((r) => `http://127.0.0.1:${r.http.port}`);
    const ordered = [...urls.slice(i % urls.length), ...urls.slice(0, i % urls.length)];
    slot.proc = new Proc(
      [
        ...(this.opts.benchExecutor ? [] : ['runner']), '--server', ordered.join(','), '--registration-token', this.registration, '--name', slot.name,
        '--max-parallel-steps', String(this.opts.maxParallelSteps ?? 4), '--max-load', String(this.opts.maxParallelSteps ?? 4),
        '--work-dir', join(this.opts.dir, 'work', slot.name), '--history', join(this.historyDir, history), '--log-level', 'warn', '--grace', '10s',
      ],
      { OPSCHAIN_HOME: slot.home, OPSCHAIN_SERVER: '', OPSCHAIN_LOG_LEVEL: '', ...(skewSeconds === undefined ? {} : skewedEnv(this.opts.libfaketime!, skewSeconds)) },
      slot.name,
      this.opts.benchExecutor ? BENCH_RUNNER : BIN,
    );
  }

  /** Submits one run; returns its id. */
  async submit(definition: Record<string, unknown>, priority?: number): Promise<number> {
    const def = priority === undefined ? definition : { ...definition, priority };
    const { runId } = await runSubmit(this.pool, runFileLoad(JSON.stringify(def)), { actor: 'chaos' });
    this.counters.submittedRuns++;
    this.counters.submittedSteps += Object.keys(definition.steps as object).length;
    return runId;
  }

  /** Steps pending, ready or running across running runs. */
  async openSteps(): Promise<number> {
    const { rows } = await this.pool.query(`SELECT count(*)::int AS n FROM steps s JOIN runs r ON r.id = s.run_id WHERE r.status = 'running' AND s.status IN ('pending', 'ready', 'running')`);
    return rows[0].n;
  }

  /** Where the open steps are: waiting on their needs, ready in the queue, leased (offered or executing). */
  async openBreakdown(): Promise<{ waiting: number; queued: number; queuedPooled: number; queuedRunScoped: number; offered: number; executing: number }> {
    const { rows } = await this.pool.query(
      `SELECT count(*) FILTER (WHERE s.status = 'pending')::int AS waiting,
              count(*) FILTER (WHERE s.status <> 'pending' AND l.step_id IS NULL)::int AS queued,
              count(*) FILTER (WHERE s.status <> 'pending' AND l.step_id IS NULL AND q.pools <> '{}')::int AS "queuedPooled",
              count(*) FILTER (WHERE s.status <> 'pending' AND l.step_id IS NULL AND q.run_scope)::int AS "queuedRunScoped",
              count(*) FILTER (WHERE l.step_id IS NOT NULL AND l.acked_at IS NULL)::int AS offered,
              count(*) FILTER (WHERE l.acked_at IS NOT NULL)::int AS executing
         FROM steps s JOIN runs r ON r.id = s.run_id LEFT JOIN step_leases l ON l.step_id = s.id LEFT JOIN queue_ready q ON q.step_id = s.id
        WHERE r.status = 'running' AND s.status IN ('pending', 'ready', 'running')`,
    );
    return rows[0];
  }

  /** Runs that ended in error (a runner lost mid-step, a pinned runner lost) run again: the operator's retry. */
  async retryErrored(): Promise<number> {
    const { rows } = await this.pool.query(`SELECT id FROM runs WHERE status = 'error' ORDER BY id`);
    for (const r of rows) {
      await runRetry(this.pool, Number(r.id), { actor: 'chaos' });
      this.counters.retriedRuns++;
    }
    return rows.length;
  }

  // ---- faults ----

  async killReplica(i: number, downMs: number): Promise<void> {
    const r = this.replicas[i];
    this.count('replica-kill');
    const t0 = await this.dbNow();
    const shards = await this.shardsOf(r.id);
    await r.proc?.kill();
    const probe = this.measureReoffer(shards, t0, `replica ${i} killed`);
    await sleep(downMs);
    await this.startReplica(i);
    await probe;
  }

  async pauseReplica(i: number, pauseMs: number): Promise<void> {
    const r = this.replicas[i];
    this.count('replica-pause');
    const t0 = await this.dbNow();
    const shards = await this.shardsOf(r.id);
    r.proc?.signal('SIGSTOP');
    const probe = this.measureReoffer(shards, t0, `replica ${i} paused`);
    await sleep(pauseMs);
    r.proc?.signal('SIGCONT');
    await probe;
  }

  private skip(msg: string): void {
    if (!this.counters.skipped.includes(msg)) this.counters.skipped.push(msg);
    this.opts.log(msg);
  }

  /** Restarts a replica under libfaketime with its clock offset; skipped with a message when libfaketime is not installed. */
  async skewReplica(i: number, seconds: number, holdMs: number): Promise<void> {
    const lib = this.opts.libfaketime ?? findLibfaketime();
    if (!lib) return this.skip('clock skew skipped: libfaketime is not installed (apt-get install -y libfaketime)');
    this.count('clock-skew');
    const r = this.replicas[i];
    await r.proc?.stop();
    await this.startReplica(i, skewedEnv(lib, seconds));
    await sleep(holdMs);
    await r.proc?.stop();
    await this.startReplica(i);
  }

  /**
   * Restarts a runner (a clean stop: its steps finish within the grace or are released) under
   * libfaketime with its clock offset, holds, and restarts it with the true clock.
   */
  async skewRunner(i: number, seconds: number, holdMs: number): Promise<void> {
    if (!this.opts.libfaketime) return this.skip('runner clock skew skipped: libfaketime is not installed (apt-get install -y libfaketime)');
    this.count('runner-skew');
    const slot = this.runners[i];
    await slot.proc?.stop(20_000);
    await this.startRunner(i, seconds);
    await sleep(holdMs);
    await slot.proc?.stop(20_000);
    await this.startRunner(i);
  }

  /**
   * The primary is killed (-9 of every backend), the standby promoted and the one address moved
   * to it, as an operator's failover does; the time from the promotion (the new primary's clock)
   * to the first step started after it is measured. Once per run: the old primary is gone.
   */
  async failover(): Promise<void> {
    const pair = this.opts.pair;
    if (!pair) return this.skip('primary failover skipped: the store is not a primary with a standby started by the run (no PostgreSQL server binaries, or --database-url)');
    if (this.failedOver) return this.skip('a second primary failover skipped: the promoted standby has no standby of its own');
    this.failedOver = true;
    this.count('store-failover');
    await pair.killPrimary();
    const promotedAt = await pair.promote();
    pair.switchAddress();
    await this.measureResume('failover', promotedAt);
  }

  /** PgBouncer killed (-9), down for `downMs`, started again on its address; the time from its return to the next step started is measured. */
  async restartBouncer(downMs: number): Promise<void> {
    const bouncer = this.opts.bouncer;
    if (!bouncer) return this.skip('PgBouncer restarts skipped: the replicas reach the store without PgBouncer (not installed, or --database-url)');
    this.count('pgbouncer-restart');
    await bouncer.restart(downMs);
    await this.measureResume('pgbouncer-restart', await this.dbNow());
  }

  async killRunner(i: number, downMs: number): Promise<void> {
    this.count('runner-kill');
    await this.runners[i].proc?.kill();
    await sleep(downMs);
    await this.startRunner(i);
  }

  /**
   * Freezes a runner while it holds work (an acked lease: steps that finish at once leave a runner
   * idle for moments), waiting up to a minute for some, so its late renewals and completions meet
   * the fence.
   */
  async pauseRunner(i: number, pauseMs: number): Promise<void> {
    this.count('runner-pause');
    const deadline = Date.now() + 60_000;
    let held: { step_id: string; token: string } | undefined;
    while (Date.now() < deadline && !this.stopped && !held) {
      const { rows } = await this.pool
        .query(`SELECT l.step_id, l.token FROM step_leases l JOIN runners r ON r.id = l.runner_id WHERE r.name = $1 AND l.acked_at IS NOT NULL LIMIT 1`, [this.runners[i].name])
        .catch(() => ({ rows: [] }));
      held = rows[0];
      if (!held) await sleep(50);
    }
    const p = this.runners[i].proc;
    p?.signal('SIGSTOP');
    await sleep(pauseMs);
    // A pause past the TTL meets the fence only once the lease was taken back: the sweep runs on
    // the leader, which another fault may have frozen or moved. Wait (bounded) until it has.
    const fenceBy = Date.now() + 60_000;
    while (held && Date.now() < fenceBy && !this.stopped && pauseMs > this.opts.leaseTtlMs) {
      const { rowCount } = await this.pool
        .query(`SELECT 1 FROM step_leases WHERE step_id = $1 AND token = $2`, [held.step_id, held.token])
        .catch(() => ({ rowCount: 1 }));
      if (!rowCount) break;
      await sleep(200);
    }
    p?.signal('SIGCONT');
  }

  /** Every database connection but the harness's own is terminated. */
  async terminateConnections(): Promise<number> {
    this.count('pg-terminate');
    const { rows } = await this.pool.query(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'opschain-chaos'`,
    );
    return rows[0].n;
  }

  async storeOutage(mode: 'hang' | 'refuse', ms: number): Promise<void> {
    this.count(mode === 'hang' ? 'store-hang' : 'store-refuse');
    for (const r of this.replicas) {
      if (mode === 'hang') r.store.blackhole();
      else r.store.refuse();
    }
    await sleep(ms);
    for (const r of this.replicas) r.store.heal();
  }

  /** The next answer to this call on this replica is lost after the replica acted on it. */
  async loseReply(i: number, path: ReplyPath, timeoutMs = 30_000): Promise<string | undefined> {
    const proxy = this.replicas[i].http;
    // A runner acks each answer's offers in one call before it starts them; a renewal (which implies the ack) counts too.
    // Completions mostly ride on the next acquire (complete-and-acquire): a call carrying them is a completion too.
    const [pattern, body] =
      path === 'ack' ? [/^\/api\/runner\/(ack|renew)$/] : path === 'complete' ? [/^\/api\/runner\/(complete|acquire)$/, /"completions":\[\{/] : [new RegExp(`^/api/runner/${path}$`)];
    const matched = await Promise.race([proxy.dropNextReply(pattern, body), sleep(timeoutMs).then(() => undefined)]);
    if (!matched) {
      proxy.clearDrops();
      return undefined;
    }
    this.count(`lost-reply:${path === 'complete' ? 'complete' : matched.slice('/api/runner/'.length)}`);
    return matched;
  }

  async halt(ms: number): Promise<void> {
    this.count('platform-halt');
    const set = (value: boolean) => withTransaction(this.pool, (c) => postureSet(c, { field: 'halted', value, reason: 'chaos', actor: 'chaos' }));
    await set(true);
    await sleep(ms);
    await set(false);
  }

  /** Everything back: proxies passing, paused processes continued, dead ones started, the platform resumed. */
  async heal(): Promise<void> {
    for (const r of this.replicas) {
      r.store.heal();
      r.http.clearDrops();
      r.http.heal();
      r.proc?.signal('SIGCONT');
    }
    for (const r of this.runners) r.proc?.signal('SIGCONT');
    for (const r of this.replicas) if (!r.proc?.running) await this.startReplica(r.index);
    for (const r of this.runners) if (!r.proc?.running) await this.startRunner(r.index);
    await withTransaction(this.pool, (c) => postureSet(c, { field: 'halted', value: false, reason: 'chaos healed', actor: 'chaos' }));
  }

  // ---- measurement ----

  private async dbNow(): Promise<number> {
    return (await this.retrying(() => this.pool.query(`SELECT now() AS t`))).rows[0].t.getTime();
  }

  /** The harness's own reads ride out a store fault (a failover's seconds without a primary). */
  private async retrying<T>(read: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        return await read();
      } catch (err) {
        if (Date.now() > deadline || this.stopped) throw err;
        await sleep(200);
      }
    }
  }

  /** From `t0` (the store's clock) to the first step started at or after it. */
  private async measureResume(fault: string, t0: Date | number): Promise<void> {
    const from = new Date(t0);
    const deadline = Date.now() + 180_000;
    while (Date.now() < deadline && !this.stopped) {
      const { rows } = await this.pool.query(`SELECT min(started_at) AS t FROM steps WHERE started_at >= $1`, [from]).catch(() => ({ rows: [] as any[] }));
      if (rows[0]?.t) {
        const ms = rows[0].t.getTime() - from.getTime();
        this.resumeMs.push({ fault, ms });
        this.opts.log(`${fault}: first step started ${(ms / 1000).toFixed(2)} s after the store came back`);
        return;
      }
      await sleep(50);
    }
    this.opts.log(`${fault}: no step started within 3 min of the store coming back`);
  }

  private async shardsOf(replicaId: string): Promise<Set<number>> {
    const { rows } = await this.pool.query(`SELECT name FROM coordination_leases WHERE holder = $1 AND name LIKE 'shard:%'`, [replicaId]);
    return new Set(rows.map((r) => Number(String(r.name).slice(6))));
  }

  /**
   * How long until work on the lost replica's shards is dispatched again: a system-lane probe run
   * on one of its shards is submitted at once, and its step's start (the store's clock) is
   * measured from the fault.
   */
  private async measureReoffer(shards: Set<number>, t0: number, what: string): Promise<void> {
    if (shards.size === 0) return;
    let probe: number | undefined;
    for (let i = 0; i < 24 && probe === undefined; i++) {
      const runId = await this.submit({ name: `probe-${++this.probes}`, env: { CHAOS_SIDE: this.side }, steps: { probe: { run: 'echo "$OPSCHAIN_RUN_ID $OPSCHAIN_STEP $OPSCHAIN_ATTEMPT $$" >> "$CHAOS_SIDE"' } } }, 150);
      if (shards.has(shardOf(runId))) probe = runId;
    }
    if (probe === undefined) return;
    const deadline = Date.now() + 180_000;
    while (Date.now() < deadline && !this.stopped) {
      const { rows } = await this.pool.query(`SELECT started_at FROM steps WHERE run_id = $1 AND started_at IS NOT NULL`, [probe]).catch(() => ({ rows: [] as any[] }));
      if (rows[0]) {
        const ms = rows[0].started_at.getTime() - t0;
        this.reofferMs.push(ms);
        this.opts.log(`${what}: work on its shards dispatched again after ${(ms / 1000).toFixed(1)} s`);
        return;
      }
      await sleep(100);
    }
    this.opts.log(`${what}: probe run ${probe} not dispatched within 3 min`);
  }

  /** Waits until every run has finished, retrying those in error; false when the bound passed first. */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      await this.retryErrored().catch(() => 0);
      const { rows } = await this.pool.query(`SELECT count(*)::int AS n FROM runs WHERE status <> 'succeeded'`).catch(() => ({ rows: [{ n: -1 }] }));
      if (rows[0].n === 0) return true;
      await sleep(1_000);
    }
    return false;
  }

  /** Runners first (gracefully: their histories end with every finish), then replicas and proxies. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.runners.map((r) => r.proc?.stop(20_000)));
    await Promise.all(this.replicas.map((r) => r.proc?.stop(20_000)));
    for (const r of this.replicas) {
      await r.http.stop();
      await r.store.stop();
    }
    await this.pool.end().catch(() => {});
  }

  /** Everything the checker needs, read after stop()… but the pool is still needed: call before stop's pool end. */
  async collect(expectFencing: boolean): Promise<CheckReport> {
    const histories: HistoryRecord[] = [];
    for (const f of readdirSync(this.historyDir)) {
      // A skewed runner wrote its own clock's times: moved back by the offset they share one time line.
      const skew = /\.skew(-?\d+)\.\d+\.jsonl$/.exec(f);
      const offsetMs = skew ? Number(skew[1]) * 1000 : 0;
      histories.push(...parseHistory(readFileSync(join(this.historyDir, f), 'utf8')).map((r) => (offsetMs ? { ...r, at: r.at - offsetMs } : r)));
    }
    const sideEffects = existsSync(this.side) ? parseSideEffects(readFileSync(this.side, 'utf8')) : [];
    const { rows } = await this.pool.query(`SELECT id, run_id, name, status, attempt FROM steps ORDER BY id`);
    const steps: FinalStep[] = rows.map((r) => ({ stepId: Number(r.id), runId: Number(r.run_id), name: r.name, status: r.status, attempt: r.attempt }));
    const invariants = await storeInvariants(this.pool);
    return check({ histories, sideEffects, steps, invariants, reofferMs: this.reofferMs, expectFencing });
  }

  /** Stops the runners and replicas, then checks; the pool closes last. */
  async finish(expectFencing: boolean): Promise<CheckReport> {
    this.stopped = true;
    await Promise.all(this.runners.map((r) => r.proc?.stop(20_000)));
    await Promise.all(this.replicas.map((r) => r.proc?.stop(20_000)));
    const report = await this.collect(expectFencing);
    await this.stop();
    return report;
  }
}
