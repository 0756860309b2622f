import { tracingSettings } from '../config.js';
import type { ReplicaEnv, ReplicaPart } from '../context.js';
import type { RunTracing } from './run-tracing.js';

/**
 * Exports this replica's runs as traces when an OTLP endpoint is configured (docs/tracing.md).
 * With none, it returns before loading anything: the SDK is imported only here, on demand.
 * Started before every other part and so stopped after them: the last spans go out with it.
 */
export async function startTracing(env: Pick<ReplicaEnv, 'config' | 'log' | 'replicaId' | 'pool'>, tracing: RunTracing): Promise<ReplicaPart | undefined> {
  const settings = tracingSettings(env.config);
  if (!settings) return undefined;
  const log = env.log.child({ component: 'tracing' });
  const { createOtlpSink } = await import('./otlp-sink.js');
  const sink = await createOtlpSink({ url: settings.url, serviceName: settings.serviceName, replicaId: env.replicaId, log });
  tracing.start({ sink, sampler: settings.sampler, log, pool: env.pool });
  log.info({ url: settings.url, sampler: settings.sampler.name, ratio: settings.sampler.ratio, service: settings.serviceName }, 'runs are exported as traces');
  return { halt: async () => {}, stop: () => tracing.stop() };
}
