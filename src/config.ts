import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError, redactUrl } from './config-errors.js';
import { parseDuration } from './core/duration.js';
import { SAMPLER_NAMES, type Sampler, type SamplerName } from './core/trace-ids.js';

export { ConfigError, redactUrl } from './config-errors.js';

/** The one typed configuration of a server process. */
export interface ServerConfig {
  databaseUrl?: string;
  /**
   * A direct session to the store for LISTEN, when `databaseUrl` is a transaction pooler (which
   * cannot keep a LISTEN); unset, LISTEN uses `databaseUrl`, or is off behind such a pooler.
   */
  listenDatabaseUrl?: string;
  home: string;
  host: string;
  port: number;
  site?: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
  leaseTtlMs: number;
  pollWindowMs: number;
  replicaRetentionMs: number;
  completedAttemptsRetentionDays: number;
  runsRetentionDays: number;
  acceptExceeding: boolean;
  replicaId?: string;
  /** The most log a step attempt keeps; output past it is dropped behind one truncation line. */
  maxStepLogBytes: number;
  /** The timeout of a step whose run file sets none. */
  defaultStepTimeoutMs: number;
  /** Hot statements as named prepared statements (off behind a pooler that cannot keep them). */
  preparedStatements: boolean;
  /** OTLP/HTTP base URL traces go to (`/v1/traces` is appended); unset, with no OTEL endpoint either, traces are off. */
  tracingEndpoint?: string;
  tracingSampler: SamplerName;
  tracingSamplerArg: number;
  tracingServiceName: string;
  /** How long the replica that ended an attempt has to report its spans sent before any replica sends them. */
  tracingResendAfterMs: number;
  /** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full traces URL, used when no tracing.endpoint is set. */
  tracingTracesUrl?: string;
  /** OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: no traces whatever the endpoint. */
  tracingDisabled?: boolean;
}

type Kind = 'string' | 'url' | 'httpurl' | 'port' | 'duration' | 'level' | 'int' | 'bool' | 'sampler' | 'ratio';
interface KeySpec { path: string; env: string; kind: Kind; field: keyof ServerConfig; default?: unknown; doc: string }

/** Every key, in file form (dotted), with its environment variable: the source of docs/config.md. */
export const CONFIG_KEYS: KeySpec[] = [
  { path: 'database_url', env: 'OPSCHAIN_DATABASE_URL', kind: 'url', field: 'databaseUrl', doc: 'PostgreSQL URL (13+); unset starts the embedded PostgreSQL under home/pgdata. DATABASE_URL is read too.' },
  { path: 'listen_database_url', env: 'OPSCHAIN_LISTEN_DATABASE_URL', kind: 'url', field: 'listenDatabaseUrl', doc: 'PostgreSQL URL of a direct session (not through a transaction pooler) for LISTEN/NOTIFY; unset, database_url is used, and behind PgBouncer in transaction mode the replica polls instead (docs/scaling.md#pgbouncer)' },
  { path: 'home', env: 'OPSCHAIN_HOME', kind: 'string', field: 'home', default: join(homedir(), '.opschain'), doc: 'state directory: embedded pgdata, recorded store URL and server address' },
  { path: 'host', env: 'OPSCHAIN_HOST', kind: 'string', field: 'host', default: '127.0.0.1', doc: 'HTTP listen address' },
  { path: 'port', env: 'OPSCHAIN_PORT', kind: 'port', field: 'port', default: 7420, doc: 'HTTP port (0 picks a free one)' },
  { path: 'site', env: 'OPSCHAIN_SITE', kind: 'string', field: 'site', doc: 'site identity of this replica (e.g. dc1) for site-affine claiming' },
  { path: 'log_level', env: 'OPSCHAIN_LOG_LEVEL', kind: 'level', field: 'logLevel', default: 'info', doc: 'trace | debug | info | warn | error | fatal | silent' },
  { path: 'lease_ttl', env: 'OPSCHAIN_LEASE_TTL', kind: 'duration', field: 'leaseTtlMs', default: 180_000, doc: 'lost-runner fencing window, counted from the last delivery, ack or renewal' },
  { path: 'poll_window', env: 'OPSCHAIN_POLL_WINDOW', kind: 'duration', field: 'pollWindowMs', default: 50_000, doc: 'how long a runner acquire parks before answering empty' },
  { path: 'replica_retention', env: 'OPSCHAIN_REPLICA_RETENTION', kind: 'duration', field: 'replicaRetentionMs', default: 86_400_000, doc: 'how long a dead replica row stays visible before the leader reaps it' },
  { path: 'retention.runs_days', env: 'OPSCHAIN_RETENTION_RUNS_DAYS', kind: 'int', field: 'runsRetentionDays', default: 30, doc: 'finished runs, their steps and logs older than this are pruned by the leader, in small batches' },
  { path: 'retention.completed_attempts_days', env: 'OPSCHAIN_RETENTION_COMPLETED_ATTEMPTS_DAYS', kind: 'int', field: 'completedAttemptsRetentionDays', default: 7, doc: 'age-out of enqueue-idempotency bookkeeping; keep far beyond the lease TTL' },
  { path: 'dispatch.accept_exceeding', env: 'OPSCHAIN_ACCEPT_EXCEEDING', kind: 'bool', field: 'acceptExceeding', default: true, doc: 'let the most capable idle runner take a step larger than every max_load' },
  { path: 'replica_id', env: 'OPSCHAIN_REPLICA_ID', kind: 'string', field: 'replicaId', doc: 'override the replica id (default hostname-<random> per boot)' },
  { path: 'logs.max_step_bytes', env: 'OPSCHAIN_LOGS_MAX_STEP_BYTES', kind: 'int', field: 'maxStepLogBytes', default: 10 * 1024 * 1024, doc: 'the most output one step attempt keeps (bytes); past it, one truncation line and nothing more' },
  { path: 'store.prepared_statements', env: 'OPSCHAIN_STORE_PREPARED_STATEMENTS', kind: 'bool', field: 'preparedStatements', default: true, doc: 'send the hot statements as named prepared statements, parsed and planned once per connection; turn off behind a pooler that cannot keep them (PgBouncer in transaction mode before 1.21)' },
  { path: 'tracing.endpoint', env: 'OPSCHAIN_TRACING_ENDPOINT', kind: 'httpurl', field: 'tracingEndpoint', doc: 'OTLP/HTTP endpoint runs are exported to as traces (docs/tracing.md); OTEL_EXPORTER_OTLP_ENDPOINT is read too. Unset: no traces, at no cost' },
  { path: 'tracing.sampler', env: 'OTEL_TRACES_SAMPLER', kind: 'sampler', field: 'tracingSampler', default: 'parentbased_always_on', doc: `which runs' traces are kept: ${SAMPLER_NAMES.join(' | ')}` },
  { path: 'tracing.sampler_arg', env: 'OTEL_TRACES_SAMPLER_ARG', kind: 'ratio', field: 'tracingSamplerArg', default: 1, doc: 'the ratio of the traceidratio samplers, 0 to 1' },
  { path: 'tracing.service_name', env: 'OTEL_SERVICE_NAME', kind: 'string', field: 'tracingServiceName', default: 'opschain', doc: 'service.name of the exported spans' },
  { path: 'tracing.resend_after', env: 'OPSCHAIN_TRACING_RESEND_AFTER', kind: 'duration', field: 'tracingResendAfterMs', default: 60_000, doc: 'spans the exporter did not report sent this long after their attempt or run ended (the replica died, the collector refused them) are sent by any replica with traces on; keep it well above the exporter\'s delay and timeout' },
  { path: 'steps.default_timeout', env: 'OPSCHAIN_STEPS_DEFAULT_TIMEOUT', kind: 'duration', field: 'defaultStepTimeoutMs', default: 3_600_000, doc: 'the timeout of a step whose run file sets none' },
];

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

function coerce(spec: KeySpec, raw: unknown): unknown {
  const fail = (expected: string): never => {
    const shown = JSON.stringify(raw) ?? String(raw);
    throw new ConfigError(spec.path, `expected ${expected}, got ${spec.kind === 'url' ? redactUrl(shown) : shown}`);
  };
  switch (spec.kind) {
    case 'string':
      if (typeof raw !== 'string' || raw === '') fail('a non-empty string');
      return raw;
    case 'url': {
      if (typeof raw !== 'string') fail('a postgres:// URL');
      try {
        const u = new URL(raw as string);
        if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') fail('a postgres:// URL');
      } catch {
        fail('a postgres:// URL');
      }
      return raw;
    }
    case 'httpurl': {
      if (typeof raw !== 'string') fail('an http:// or https:// URL');
      try {
        const u = new URL(raw as string);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') fail('an http:// or https:// URL');
      } catch {
        fail('an http:// or https:// URL');
      }
      return raw;
    }
    case 'sampler':
      if (typeof raw !== 'string' || !(SAMPLER_NAMES as readonly string[]).includes(raw)) fail(SAMPLER_NAMES.join(' | '));
      return raw;
    case 'ratio': {
      const n = typeof raw === 'number' ? raw : /^\d*\.?\d+$/.test(String(raw)) ? Number(raw) : NaN;
      if (!(n >= 0 && n <= 1)) fail('a ratio from 0 to 1');
      return n;
    }
    case 'port': {
      const n = typeof raw === 'number' ? raw : /^\d+$/.test(String(raw)) ? Number(raw) : NaN;
      if (!Number.isInteger(n) || n < 0 || n > 65535) fail('a port number 0-65535');
      return n;
    }
    case 'int': {
      const n = typeof raw === 'number' ? raw : /^\d+$/.test(String(raw)) ? Number(raw) : NaN;
      if (!Number.isInteger(n) || n < 1) fail('a positive integer');
      return n;
    }
    case 'duration': {
      const ms = typeof raw === 'string' ? parseDuration(raw) : undefined;
      if (ms === undefined || ms <= 0) fail('a duration like 250ms, 50s, 3m, 24h');
      return ms;
    }
    case 'level':
      if (typeof raw !== 'string' || !LEVELS.includes(raw)) fail(LEVELS.join(' | '));
      return raw;
    case 'bool':
      if (typeof raw === 'boolean') return raw;
      if (raw === 'true' || raw === '1') return true;
      if (raw === 'false' || raw === '0') return false;
      return fail('true or false');
  }
}

function flatten(obj: unknown, prefix: string, out: Map<string, unknown>): void {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    out.set(prefix, obj);
    return;
  }
  for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
    const key = prefix ? `${prefix}.${k}` : k;
    const isSection = CONFIG_KEYS.some((s) => s.path.startsWith(`${key}.`));
    if (isSection && v !== null && typeof v === 'object') flatten(v, key, out);
    else out.set(key, v);
  }
}

/**
 * One key read from the environment alone, parsed as the server parses it (a bad value is a
 * ConfigError naming the key); its default when unset. What a CLI verb on the store transport
 * uses to judge as the servers do.
 */
export function configFromEnv<F extends keyof ServerConfig>(field: F, env: NodeJS.ProcessEnv = process.env): ServerConfig[F] {
  const spec = CONFIG_KEYS.find((s) => s.field === field);
  if (!spec) throw new Error(`no config key for ${String(field)}`);
  const raw = env[spec.env];
  return (raw === undefined || raw === '' ? spec.default : coerce(spec, raw)) as ServerConfig[F];
}

export interface ConfigSources {
  /** Values given as flags, keyed by file path (`lease_ttl`); undefined entries are ignored. */
  flags?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  configFile?: string;
}

/** Keys renamed before the first release: their old spelling is refused naming the new one. */
const RENAMED_KEYS: Array<{ path: string; env: string; now: string }> = [
  { path: 'retention.scheduler_done_days', env: 'OPSCHAIN_RETENTION_SCHEDULER_DONE_DAYS', now: 'retention.completed_attempts_days' },
];

/** Flags > environment (`OPSCHAIN_*`) > config file > defaults; throws ConfigError naming the key. */
export function loadConfig(sources: ConfigSources = {}): ServerConfig {
  const env = sources.env ?? process.env;
  for (const r of RENAMED_KEYS) {
    const now = CONFIG_KEYS.find((s) => s.path === r.now);
    if (env[r.env] !== undefined && now) throw new ConfigError(r.env, `renamed: set ${now.env} instead`);
  }
  const fileValues = new Map<string, unknown>();
  if (sources.configFile) {
    let text: string;
    try {
      text = readFileSync(sources.configFile, 'utf8');
    } catch (err) {
      throw new ConfigError('--config', `cannot read ${sources.configFile}: ${(err as Error).message}`);
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new ConfigError('--config', `${sources.configFile} is not valid YAML: ${(err as Error).message}`);
    }
    if (doc !== null && doc !== undefined) {
      if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError('--config', 'expected a mapping of keys');
      flatten(doc, '', fileValues);
    }
    for (const key of fileValues.keys()) {
      const renamed = RENAMED_KEYS.find((r) => r.path === key);
      if (renamed) throw new ConfigError(key, `renamed: write ${renamed.now} in ${sources.configFile} instead`);
      if (!CONFIG_KEYS.some((s) => s.path === key)) {
        throw new ConfigError(key, `unknown key in ${sources.configFile}; known keys: ${CONFIG_KEYS.map((s) => s.path).join(', ')}`);
      }
    }
  }
  const config: Record<string, unknown> = {};
  for (const spec of CONFIG_KEYS) {
    let raw: unknown = sources.flags?.[spec.path];
    if (raw === undefined) raw = env[spec.env];
    if (raw === undefined && spec.field === 'databaseUrl') raw = env.DATABASE_URL;
    if (raw === undefined && spec.field === 'tracingEndpoint') raw = env.OTEL_EXPORTER_OTLP_ENDPOINT;
    if (raw === undefined) raw = fileValues.get(spec.path);
    if (raw === undefined || raw === '') {
      config[spec.field] = spec.default;
      continue;
    }
    config[spec.field] = coerce(spec, raw);
  }
  config.home = resolve(config.home as string);
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) config.tracingTracesUrl = coerce({ ...CONFIG_KEYS.find((k) => k.field === 'tracingEndpoint')!, path: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' }, env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') config.tracingDisabled = true;
  return config as unknown as ServerConfig;
}

/** Where a replica sends its traces, and how it samples them; undefined when traces are off. */
export interface TracingSettings {
  /** The full traces URL. */
  url: string;
  sampler: Sampler;
  serviceName: string;
  resendAfterMs: number;
}

/**
 * Traces are on when an endpoint is configured (the key, or the standard OTEL variables) and
 * OpenTelemetry is not disabled (OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none).
 */
export function tracingSettings(config: ServerConfig): TracingSettings | undefined {
  if (config.tracingDisabled) return undefined;
  const url = config.tracingEndpoint ? `${config.tracingEndpoint.replace(/\/+$/, '')}/v1/traces` : config.tracingTracesUrl;
  if (!url) return undefined;
  return { url, sampler: { name: config.tracingSampler, ratio: config.tracingSamplerArg }, serviceName: config.tracingServiceName, resendAfterMs: config.tracingResendAfterMs };
}
