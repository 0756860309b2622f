import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedStore } from '../src/store/embedded.js';
import { createPool, type Pool } from '../src/store/pool.js';
import { round } from './stats.js';

/** The PostgreSQL the whole run uses: embedded (ours to stop) or given with --database-url. */
export interface BenchPostgres {
  adminUrl: string;
  admin: Pool;
  embedded: boolean;
  version: string;
  /** pg_stat_statements is loaded and its extension can be created (store cost needs it). */
  statements: boolean;
  /** The postmaster's pid when the cluster is ours and local: its process tree's CPU time is measurable. */
  postmasterPid: number | null;
  stop(): Promise<void>;
}

export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

export async function startBenchPostgres(opts: { databaseUrl?: string; log: (m: string) => void }): Promise<BenchPostgres> {
  let adminUrl = opts.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let postmasterPid: number | null = null;
  let dir: string | undefined;
  if (!adminUrl) {
    dir = mkdtempSync(join(tmpdir(), 'opschain-bench-'));
    const dataDir = join(dir, 'pgdata');
    // A harness that dies without its cleanups (or mid-start) must not leave the cluster running.
    process.on('exit', () => {
      try {
        const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        if (pid > 0) process.kill(pid, 'SIGINT');
      } catch {
        // not started, or already stopped
      }
    });
    opts.log(`starting an embedded PostgreSQL in ${dir}`);
    try {
      const store = await startEmbeddedStore({
        home: dir,
        dataDir,
        record: false,
        log: opts.log,
        // Statement statistics for the store-cost scenario; a bigger WAL budget so checkpoints
        // do not land in the middle of a timed phase more often on one side than the other.
        settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.max': '5000', max_wal_size: '2GB', autovacuum: 'off' },
      });
      adminUrl = store.url;
      stopEmbedded = () => store.stop();
      postmasterPid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }
  const admin = createPool(adminUrl, { max: 2, applicationName: 'opschain-bench', statementTimeoutMs: 600_000, queryTimeoutMs: 600_000 });
  const { rows } = await admin.query(`SELECT current_setting('server_version') AS v, current_setting('shared_preload_libraries') AS libs`);
  const statements = String(rows[0].libs).split(',').map((s) => s.trim()).includes('pg_stat_statements');
  let stopped: Promise<void> | undefined;
  return {
    adminUrl,
    admin,
    embedded: !opts.databaseUrl,
    version: rows[0].v,
    statements,
    postmasterPid,
    stop: () =>
      (stopped ??= (async () => {
        await admin.end().catch(() => {});
        if (stopEmbedded) await stopEmbedded();
        if (dir) rmSync(dir, { recursive: true, force: true });
      })()),
  };
}

/** A fresh database for one part of the run; every one is dropped at the end. */
export class Databases {
  private readonly created: string[] = [];
  constructor(private readonly pg: BenchPostgres) {}

  async create(label: string): Promise<{ name: string; url: string }> {
    const name = `bench_${label.replace(/[^a-z0-9_]/g, '_')}_${randomBytes(3).toString('hex')}`;
    await this.pg.admin.query(`CREATE DATABASE ${name}`);
    this.created.push(name);
    const url = withDatabase(this.pg.adminUrl, name);
    if (this.pg.statements) {
      const pool = createPool(url, { max: 1 });
      try {
        await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      } finally {
        await pool.end();
      }
    }
    return { name, url };
  }

  async dropAll(): Promise<void> {
    for (const name of this.created.splice(0)) {
      await this.pg.admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    }
  }
}

/** /proc/PID/stat fields after the command name: [state, ppid, …]; times are in USER_HZ (100/s). */
function procStat(pid: number | string): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * CPU time (ms) the whole cluster has used: the postmaster's own and its reaped children's
 * (cutime/cstime) plus every live child's (backends, walwriter, checkpointer…); its delta over a
 * phase is the database's real CPU cost, lock waits excluded. Also whether a child has exited
 * but is not yet reaped (its time is in flux). A child reaped while /proc is read would be
 * counted nowhere: the postmaster's reaped children's time is read before and after the scan,
 * and the scan repeated if it moved. Null when the cluster is not ours.
 */
function clusterCpu(pg: Pick<BenchPostgres, 'postmasterPid'>): { ms: number; exiting: boolean } | null {
  const pm = pg.postmasterPid;
  if (!pm) return null;
  // Fields (1-based in proc(5)) 14 utime, 15 stime, 16 cutime, 17 cstime; here offset by 3.
  const reaped = (st: string[]) => Number(st[13]) + Number(st[14]);
  for (let attempt = 0; ; attempt++) {
    const own = procStat(pm);
    if (!own) return null;
    let ticks = Number(own[11]) + Number(own[12]) + reaped(own);
    let exiting = false;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const st = procStat(entry);
      if (!st || Number(st[1]) !== pm) continue;
      if (st[0] === 'Z' || st[0] === 'X') exiting = true;
      ticks += Number(st[11]) + Number(st[12]);
    }
    const after = procStat(pm);
    if (!after) return null;
    if (reaped(after) === reaped(own) || attempt >= 20) return { ms: ticks * 10, exiting };
  }
}

/**
 * clusterCpu once no backend is between exit and reaping: a connection closed just before a
 * snapshot (a worker stopping) is otherwise counted neither as a live child nor in the
 * postmaster's reaped children's time.
 */
async function settledClusterCpuMs(pg: Pick<BenchPostgres, 'postmasterPid'>): Promise<number | null> {
  for (let i = 0; i < 100; i++) {
    const c = clusterCpu(pg);
    if (!c) return null;
    if (!c.exiting) return c.ms;
    await new Promise((r) => setTimeout(r, 10));
  }
  return clusterCpu(pg)?.ms ?? null;
}

/** Cumulative store counters of one database at one instant. */
export interface CostSnapshot {
  /** CPU time of the cluster's processes (ms); null when the cluster is not a local child. */
  cpuMs: number | null;
  /** Sum of pg_stat_statements.total_exec_time (ms) over the database's statements; null without the extension. */
  execMs: number | null;
  calls: number | null;
  /** Cluster-wide WAL position in bytes (the insert LSN). */
  walBytes: number;
  /** The same position as an LSN, for reading the WAL records of a phase back. */
  walLsn: string;
}

/**
 * A checkpoint before a measured phase: the first change to each page after a checkpoint logs
 * the whole page, so without it the WAL figure depends on when the last checkpoint happened.
 */
export async function checkpoint(pg: BenchPostgres): Promise<void> {
  await pg.admin.query('CHECKPOINT');
}

/**
 * Zeroes a database's statement, table and index counters, so the notes read after a drain
 * (statements per step, index scans, HOT updates) count that drain and not its warm-up.
 */
export async function statsReset(pg: BenchPostgres, db: { name: string; url: string }): Promise<void> {
  if (pg.statements) await pg.admin.query(`SELECT pg_stat_statements_reset(0, d.oid, 0) FROM pg_database d WHERE d.datname = $1`, [db.name]);
  const pool = createPool(db.url, { max: 1, applicationName: 'opschain-bench' });
  try {
    await pool.query('SELECT pg_stat_reset()');
  } finally {
    await pool.end();
  }
}

export async function costSnapshot(pg: BenchPostgres, database: string): Promise<CostSnapshot> {
  // The insert LSN rather than pg_stat_wal.wal_bytes: backends flush their WAL statistics
  // lazily (up to a second late since PostgreSQL 15), the LSN moves with every record.
  const wal = await pg.admin.query(`SELECT l::text AS lsn, pg_wal_lsn_diff(l, '0/0')::float8 AS b FROM pg_current_wal_insert_lsn() AS l`);
  let execMs: number | null = null;
  let calls: number | null = null;
  if (pg.statements) {
    const { rows } = await pg.admin.query(
      `SELECT coalesce(sum(s.total_exec_time), 0)::float8 AS ms, coalesce(sum(s.calls), 0)::float8 AS calls
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`,
      [database],
    );
    execMs = rows[0].ms;
    calls = rows[0].calls;
  }
  return { execMs, calls, walBytes: wal.rows[0].b, walLsn: wal.rows[0].lsn, cpuMs: await settledClusterCpuMs(pg) };
}

/** Needs the extension in the admin database to read pg_stat_statements from it. */
export async function prepareStatements(pg: BenchPostgres): Promise<void> {
  if (!pg.statements) return;
  await pg.admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
}

export interface CostDelta { execMs: number | null; calls: number | null; walBytes: number; cpuMs: number | null }

export function costDelta(before: CostSnapshot, after: CostSnapshot): CostDelta {
  return {
    execMs: before.execMs === null || after.execMs === null ? null : after.execMs - before.execMs,
    calls: before.calls === null || after.calls === null ? null : after.calls - before.calls,
    walBytes: after.walBytes - before.walBytes,
    cpuMs: before.cpuMs === null || after.cpuMs === null ? null : after.cpuMs - before.cpuMs,
  };
}

export interface WalShare { relation: string; bytes: number; fpiBytes: number }

/** The `top` largest shares as a note: relation, bytes per unit of work (of which full-page images). */
export function walSharesNote(wal: WalShare[], per: number, top: number): string {
  return wal.slice(0, top).map((w) => `${w.relation} ${round(w.bytes / per)} (${round(w.fpiBytes / per)})`).join(', ');
}

/**
 * The WAL written between two snapshots, by relation (tables and indexes of `database`, by name),
 * in bytes: each block's data and full-page image, plus the record headers and main data shared
 * out over its blocks. Needs pg_walinspect (PostgreSQL 16+); empty without it.
 */
export async function walByRelation(url: string, from: CostSnapshot, to: CostSnapshot): Promise<WalShare[]> {
  const pool = createPool(url, { max: 1 });
  try {
    await pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const { rows } = await pool.query(
      `WITH b AS (
         SELECT w.start_lsn, w.relfilenode, w.block_data_length + w.block_fpi_length AS own, w.block_fpi_length AS fpi,
                w.record_length - sum(w.block_data_length + w.block_fpi_length) OVER (PARTITION BY w.start_lsn) AS rest,
                count(*) OVER (PARTITION BY w.start_lsn) AS blocks
           FROM pg_get_wal_block_info($1::pg_lsn, $2::pg_lsn) w
          WHERE w.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
       )
       SELECT coalesce(c.relname, b.relfilenode::text) AS relation, sum(b.own + greatest(b.rest, 0) / b.blocks)::float8 AS bytes, sum(b.fpi)::float8 AS fpi
         FROM b LEFT JOIN pg_class c ON c.relfilenode = b.relfilenode
        GROUP BY 1 ORDER BY 2 DESC`,
      [from.walLsn, to.walLsn],
    );
    return rows.map((r) => ({ relation: r.relation, bytes: r.bytes, fpiBytes: r.fpi }));
  } catch {
    return [];
  } finally {
    await pool.end();
  }
}

export interface TopStatement { query: string; calls: number; totalMs: number; meanMs: number; rows: number }

/** The statements that cost the database most, for the profile section of the report. */
export async function topStatements(pg: BenchPostgres, database: string, limit = 10, by: 'time' | 'calls' = 'time'): Promise<TopStatement[]> {
  if (!pg.statements) return [];
  const { rows } = await pg.admin.query(
    `SELECT s.query, s.calls::float8 AS calls, s.total_exec_time::float8 AS total, s.mean_exec_time::float8 AS mean, s.rows::float8 AS rows
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = $1 ORDER BY ${by === 'calls' ? 's.calls' : 's.total_exec_time'} DESC LIMIT $2`,
    [database, limit],
  );
  return rows.map((r) => ({ query: String(r.query).replace(/\s+/g, ' ').slice(0, 240), calls: r.calls, totalMs: r.total, meanMs: r.mean, rows: r.rows }));
}

/** Two consecutive deltas as one. */
export function costSum(a: CostDelta, b: CostDelta): CostDelta {
  const add = (x: number | null, y: number | null) => (x === null || y === null ? null : x + y);
  return { execMs: add(a.execMs, b.execMs), calls: add(a.calls, b.calls), walBytes: a.walBytes + b.walBytes, cpuMs: add(a.cpuMs, b.cpuMs) };
}
