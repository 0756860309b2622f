import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, configFromEnv, loadConfig, redactUrl, tracingSettings } from '../src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'opschain-config-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('loadConfig', () => {
  it('applies defaults', () => {
    const c = loadConfig({ env: {} });
    expect(c.port).toBe(7420);
    expect(c.host).toBe('127.0.0.1');
    expect(c.leaseTtlMs).toBe(180_000);
    expect(c.pollWindowMs).toBe(50_000);
    expect(c.replicaRetentionMs).toBe(86_400_000);
    expect(c.completedAttemptsRetentionDays).toBe(7);
    expect(c.acceptExceeding).toBe(true);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.maxStepLogBytes).toBe(10 * 1024 * 1024);
    expect(c.defaultStepTimeoutMs).toBe(3_600_000);
  });

  it('reads the log cap and the default step timeout from a file', () => {
    const c = loadConfig({ env: {}, configFile: file('limits.yaml', 'logs:\n  max_step_bytes: 1048576\nsteps:\n  default_timeout: 20m\n') });
    expect(c.maxStepLogBytes).toBe(1_048_576);
    expect(c.defaultStepTimeoutMs).toBe(1_200_000);
  });

  it('never echoes the password of a rejected database URL', () => {
    let err: unknown;
    try {
      loadConfig({ env: { OPSCHAIN_DATABASE_URL: 'mysql://ops:s3cret@db:3306/x' } });
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toBe('config database_url: expected a postgres:// URL, got "mysql://ops:***@db:3306/x"');
    expect(redactUrl('no store at postgres://a:b@h/d?password=zz&x=1')).toBe('no store at postgres://a:***@h/d?password=***&x=1');
  });

  it('orders flags over environment over file over defaults', () => {
    const f = file('precedence.yaml', 'port: 9000\nlease_ttl: 1m\nsite: filesite\nretention:\n  completed_attempts_days: 3\n');
    const c = loadConfig({ configFile: f, env: { OPSCHAIN_LEASE_TTL: '2m', OPSCHAIN_SITE: 'envsite' }, flags: { site: 'flagsite' } });
    expect(c.port).toBe(9000);
    expect(c.leaseTtlMs).toBe(120_000);
    expect(c.site).toBe('flagsite');
    expect(c.completedAttemptsRetentionDays).toBe(3);
  });

  it('reads DATABASE_URL when OPSCHAIN_DATABASE_URL is unset', () => {
    expect(loadConfig({ env: { DATABASE_URL: 'postgres://u@h/db' } }).databaseUrl).toBe('postgres://u@h/db');
  });

  it.each([
    ['unknown.yaml', 'prot: 80\n', 'prot'],
    ['nested-unknown.yaml', 'retention:\n  completed_attempts_dayz: 3\n', 'retention.completed_attempts_dayz'],
    ['bad-duration.yaml', 'lease_ttl: soon\n', 'lease_ttl'],
    ['bad-url.yaml', 'database_url: mysql://x\n', 'database_url'],
    ['bad-port.yaml', 'port: 70000\n', 'port'],
  ])('refuses %s naming the key', (name, text, key) => {
    const f = file(name, text);
    let err: unknown;
    try {
      loadConfig({ configFile: f, env: {} });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).key).toBe(key);
    expect((err as Error).message).toContain(key);
  });

  it('refuses a renamed key by its old name, naming the new one, in the file and in the environment', () => {
    const f = file('renamed.yaml', 'retention:\n  scheduler_done_days: 3\n');
    expect(() => loadConfig({ configFile: f, env: {} })).toThrow(/retention\.scheduler_done_days: renamed: write retention\.completed_attempts_days in .*renamed\.yaml instead/);
    expect(() => loadConfig({ env: { OPSCHAIN_RETENTION_SCHEDULER_DONE_DAYS: '3' } })).toThrow(
      /OPSCHAIN_RETENTION_SCHEDULER_DONE_DAYS: renamed: set OPSCHAIN_RETENTION_COMPLETED_ATTEMPTS_DAYS instead/,
    );
  });

  it('refuses a bad duration from the environment', () => {
    expect(() => loadConfig({ env: { OPSCHAIN_POLL_WINDOW: '5 parsecs' } })).toThrow(/poll_window: expected a duration/);
  });
});

describe('tracing settings', () => {
  it('are off by default', () => {
    expect(tracingSettings(loadConfig({ env: {} }))).toBeUndefined();
  });

  it('come from the standard OTEL variables', () => {
    const c = loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/', OTEL_SERVICE_NAME: 'ci-dispatch', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' } });
    expect(tracingSettings(c)).toEqual({ url: 'http://collector:4318/v1/traces', sampler: { name: 'parentbased_traceidratio', ratio: 0.25 }, serviceName: 'ci-dispatch', resendAfterMs: 60_000 });
    // The traces endpoint is a full URL, used as it is.
    expect(tracingSettings(loadConfig({ env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://tempo:4318/otlp/v1/traces' } }))?.url).toBe('https://tempo:4318/otlp/v1/traces');
  });

  it('the environment wins over the file as for every key, OPSCHAIN_TRACING_ENDPOINT over the OTEL one; OTEL_SDK_DISABLED turns traces off', () => {
    const tracing = file('tracing.yaml', 'tracing:\n  endpoint: http://b:4318\n  sampler: always_on\n  resend_after: 5m\n');
    expect(tracingSettings(loadConfig({ env: {}, configFile: tracing }))).toEqual({ url: 'http://b:4318/v1/traces', sampler: { name: 'always_on', ratio: 1 }, serviceName: 'opschain', resendAfterMs: 300_000 });
    expect(tracingSettings(loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' }, configFile: tracing }))?.url).toBe('http://a:4318/v1/traces');
    expect(tracingSettings(loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OPSCHAIN_TRACING_ENDPOINT: 'http://c:4318' } }))?.url).toBe('http://c:4318/v1/traces');
    expect(tracingSettings(loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_SDK_DISABLED: 'true' } }))).toBeUndefined();
    expect(tracingSettings(loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_TRACES_EXPORTER: 'none' } }))).toBeUndefined();
  });

  it.each([
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /tracing.sampler: expected always_on \| always_off/],
    [{ OTEL_TRACES_SAMPLER_ARG: '1.5' }, /tracing.sampler_arg: expected a ratio from 0 to 1/],
    [{ OPSCHAIN_TRACING_ENDPOINT: 'collector:4318' }, /tracing.endpoint: expected an http:\/\/ or https:\/\/ URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://x' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: expected an http:\/\/ or https:\/\/ URL/],
  ])('refuses %j, naming the key', (env, why) => {
    expect(() => loadConfig({ env })).toThrow(ConfigError);
    expect(() => loadConfig({ env })).toThrow(why);
  });
});

describe('configFromEnv', () => {
  it('reads one key from the environment as the server parses it, its default when unset', () => {
    expect(configFromEnv('acceptExceeding', {})).toBe(true);
    expect(configFromEnv('acceptExceeding', { OPSCHAIN_ACCEPT_EXCEEDING: 'false' })).toBe(false);
    expect(configFromEnv('acceptExceeding', { OPSCHAIN_ACCEPT_EXCEEDING: '0' })).toBe(false);
    expect(configFromEnv('acceptExceeding', { OPSCHAIN_ACCEPT_EXCEEDING: 'true' })).toBe(true);
    // The server's own reading agrees, whatever the value.
    for (const v of ['false', '0', 'true', '1']) expect(configFromEnv('acceptExceeding', { OPSCHAIN_ACCEPT_EXCEEDING: v })).toBe(loadConfig({ env: { OPSCHAIN_ACCEPT_EXCEEDING: v } }).acceptExceeding);
  });

  it('refuses a bad value naming the key', () => {
    expect(() => configFromEnv('acceptExceeding', { OPSCHAIN_ACCEPT_EXCEEDING: 'maybe' })).toThrow(ConfigError);
    expect(() => configFromEnv('acceptExceeding', { OPSCHAIN_ACCEPT_EXCEEDING: 'maybe' })).toThrow(/dispatch\.accept_exceeding/);
  });
});
