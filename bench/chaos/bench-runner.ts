#!/usr/bin/env node
/**
 * `opschain runner` as the chaos run starts it, with the bench executor: the same agent, client,
 * identity and history, started with the flags the harness passes (`--server`,
 * `--registration-token`, `--name`, `--max-parallel-steps`, `--max-load`, `--work-dir`,
 * `--history`, `--log-level`, `--grace`), home from OPSCHAIN_HOME.
 */
import { parseDuration } from '../../src/core/duration.js';
import { createLogger } from '../../src/logger.js';
import { runRunner } from '../../src/runner/main.js';
import { benchExecute } from './bench-executor.js';

const flags = new Map<string, string>();
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) flags.set(argv[i].replace(/^--/, ''), argv[i + 1]);
const num = (name: string) => (flags.has(name) ? Number(flags.get(name)) : undefined);
const log = createLogger(flags.get('log-level') ?? 'info', { sync: true });

runRunner(
  {
    home: process.env.OPSCHAIN_HOME!,
    servers: flags.has('server') ? [flags.get('server')!] : [],
    registrationToken: flags.get('registration-token'),
    name: flags.get('name'),
    labels: [],
    executors: [],
    maxLoad: num('max-load'),
    maxParallelSteps: num('max-parallel-steps') ?? 1,
    workDir: flags.get('work-dir'),
    history: flags.get('history'),
    graceMs: parseDuration(flags.get('grace') ?? '30s') ?? 30_000,
    once: false,
    execute: benchExecute,
  },
  log,
).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(2);
  },
);
