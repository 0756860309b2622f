import { tracingSettings } from '../config.js';
import type { ReplicaEnv, ReplicaPart } from '../context.js';
import { startLoop } from '../loop.js';
import type { RunTracing } from './run-tracing.js';

/** How often a replica with traces on looks for cancelled runs whose spans nobody sent. */
const CANCELLED_EVERY_MS = 2_000;
const CANCELLED_BATCH = 100;

/**
 * Exports this replica's runs as traces when an OTLP endpoint is configured (docs/tracing.md).
 * With none, it returns before loading anything: the SDK is imported only here, on demand.
 * Started before every other part and so stopped after them: the last spans go out with it.
 */
export async function startTracing(env: Pick<ReplicaEnv, 'config' | 'log' | 'replicaId' | 'pool' | 'clock'>, tracing: RunTracing): Promise<ReplicaPart | undefined> {
  const settings = tracingSettings(env.config);
  if (!settings) return undefined;
  const log = env.log.child({ component: 'tracing' });
  const { createOtlpSink } = await import('./otlp-sink.js');
  const sink = await createOtlpSink({ url: settings.url, serviceName: settings.serviceName, replicaId: env.replicaId, log });
  tracing.start({ sink, sampler: settings.sampler, log, pool: env.pool });
  log.info({ url: settings.url, sampler: settings.sampler.name, ratio: settings.sampler.ratio, service: settings.serviceName }, 'runs are exported as traces');
  // Cancelled runs are marked in the store by whoever cancels; a full pass goes straight on to the next.
  const cancelled = startLoop({ name: 'cancelled run traces', clock: env.clock, log, once: async () => ((await tracing.sendCancelled()) === CANCELLED_BATCH ? 0 : CANCELLED_EVERY_MS) });
  return {
    halt: async () => {},
    stop: async () => {
      await cancelled.stop();
      await tracing.stop();
    },
  };
}
