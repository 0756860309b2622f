import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readServerRecord } from '../src/home.js';
import { createPool, type Pool } from '../src/store/pool.js';
import { tokenCreate } from '../src/store/tokens.js';
import type { BenchArgs, ScenarioName, Sizes } from './args.js';
import type { Baseline } from './baseline.js';
import { JsonClient } from './http.js';
import type { BenchPostgres, Databases } from './pg.js';
import { onCleanup, ServerProcess } from './procs.js';
import { type Figure } from './stats.js';

export interface BenchEnv {
  pg: BenchPostgres;
  dbs: Databases;
  args: BenchArgs;
  sizes: Sizes;
  baseline: Baseline;
  progress: (m: string) => void;
}

/** One database with N opschain replicas on it, and a pool for the bench's own writes. */
export interface Deployment {
  db: { name: string; url: string };
  pool: Pool;
  servers: ServerProcess[];
  urls: string[];
  registrationToken: string;
  stop(): Promise<void>;
}

export class OpschainBench {
  readonly notes: string[] = [];
  private protocol?: Promise<boolean>;

  constructor(private readonly env: BenchEnv) {}

  /** Starts `replicas` real `opschain server start` processes on a fresh database. */
  async deploy(label: string, replicas: number, opts: { db?: { name: string; url: string } } = {}): Promise<Deployment> {
    const { env } = this;
    const db = opts.db ?? (await env.dbs.create(label));
    const pool = createPool(db.url, { max: 8, applicationName: 'opschain-bench', statementTimeoutMs: 900_000, queryTimeoutMs: 900_000 });
    const homes: string[] = [];
    const servers: ServerProcess[] = [];
    const stop = async () => {
      await Promise.all(servers.map((s) => s.stop()));
      await pool.end().catch(() => {});
      for (const h of homes) rmSync(h, { recursive: true, force: true });
    };
    const unregister = onCleanup(stop);
    try {
      // One at a time: the first applies the migrations, the rest find them applied.
      for (let i = 0; i < replicas; i++) {
        const home = mkdtempSync(join(tmpdir(), `opschain-bench-${label}-`));
        homes.push(home);
        const server = new ServerProcess({ databaseUrl: db.url, home, cpuProfDir: env.args.cpuProfDir, name: `${label}-${i}` });
        servers.push(server);
        await server.ready(async () => readServerRecord(home)?.url);
      }
      const { secret } = await tokenCreate(pool, { kind: 'registration', name: `bench-${label}` });
      return {
        db,
        pool,
        servers,
        urls: servers.map((s) => s.url),
        registrationToken: secret,
        stop: async () => {
          unregister();
          await stop();
        },
      };
    } catch (err) {
      unregister();
      await stop();
      throw err;
    }
  }

  /** Whether this build serves the runner protocol (a register with a bad token is refused, not 404). */
  private async protocolServed(url: string): Promise<boolean> {
    const client = new JsonClient();
    try {
      const res = await client.post(url, '/api/runner/register', { registration_token: 'ocreg_probe', name: 'probe' });
      return res.status !== 404;
    } finally {
      client.close();
    }
  }

  async scenario(name: ScenarioName): Promise<Figure[]> {
    const { env } = this;
    // The baseline half of each scenario stands on its own.
    if (name === 'latency') await env.baseline.latency();
    else await env.baseline.throughput();
    if (!(await (this.protocol ??= this.probe()))) return [];
    throw new Error(`scenario ${name} is not wired yet`);
  }

  private async probe(): Promise<boolean> {
    const d = await this.deploy('probe', 1);
    try {
      const served = await this.protocolServed(d.urls[0]);
      if (!served) this.notes.push('this build does not serve the runner protocol (/api/runner/register answers 404): only the graphile-worker baseline was measured');
      return served;
    } finally {
      await d.stop();
    }
  }
}
