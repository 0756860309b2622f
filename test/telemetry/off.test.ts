import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stepEnvironment } from '../../src/runner/step-env.js';

const ROOT = join(import.meta.dirname, '..', '..');
const files = (dir: string): string[] =>
  readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : /\.tsx?$/.test(f) ? [p] : [];
  });

describe('traces off cost nothing', () => {
  it('the OpenTelemetry SDK is loaded only by a dynamic import, reached only with an endpoint configured', () => {
    const sources = [...files(join(ROOT, 'src')), ...files(join(ROOT, 'commands'))];
    // A static import (type-only aside) would load the SDK in every process.
    const staticSdk = sources.filter((f) => /^import (?!type )[^;]*from '@opentelemetry\//m.test(readFileSync(f, 'utf8'))).map((f) => relative(ROOT, f));
    expect(staticSdk).toEqual([]);
    const dynamicSdk = sources.filter((f) => /import\('@opentelemetry\//.test(readFileSync(f, 'utf8'))).map((f) => relative(ROOT, f));
    expect(dynamicSdk).toEqual(['src/telemetry/otlp-sink.ts']);
    // And the module holding it is itself imported only dynamically, by the tracing feature.
    const sinkImporters = sources.filter((f) => /otlp-sink\.js'/.test(readFileSync(f, 'utf8').replace(/^import type .*$/gm, ''))).map((f) => relative(ROOT, f));
    expect(sinkImporters).toEqual(['src/telemetry/feature.ts']);
    expect(readFileSync(join(ROOT, 'src/telemetry/feature.ts'), 'utf8')).toMatch(/if \(!settings\) return undefined;[\s\S]*await import\('\.\/otlp-sink\.js'\)/);
  });
});

describe("a step's TRACEPARENT", () => {
  const offer = { env: {}, run_id: 1, step: 'build', attempt: 2 };
  const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  it('is the offer\'s; the runner\'s own is not handed down', () => {
    expect(stepEnvironment({ runnerEnv: { TRACEPARENT: 'runner-own' }, passEnv: [], offer: { ...offer, traceparent: tp }, dir: '/w' }).TRACEPARENT).toBe(tp);
    expect(stepEnvironment({ runnerEnv: { TRACEPARENT: 'runner-own' }, passEnv: [], offer, dir: '/w' }).TRACEPARENT).toBeUndefined();
  });
});
