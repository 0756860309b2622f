import { tracingSettings } from '../config.js';
import type { ReplicaEnv, ReplicaPart } from '../context.js';
import { startLoop } from '../loop.js';
import type { RunTracing } from './run-tracing.js';

/** How often a replica with traces on looks for spans owed that nobody sent (a cancel's, a dead replica's). */
const UNSENT_EVERY_MS = 2_000;
const UNSENT_BATCH = 20;

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
  const sink = await createOtlpSink({ url: settings.url, serviceName: settings.serviceName, replicaId: env.replicaId, log, onSent: (marks) => tracing.sentOf(marks) });
  tracing.start({ sink, sampler: settings.sampler, log, pool: env.pool, resendAfterMs: settings.resendAfterMs });
  log.info({ url: settings.url, sampler: settings.sampler.name, ratio: settings.sampler.ratio, service: settings.serviceName }, 'runs are exported as traces');
  // Spans owed are recorded in the store by whoever ends or cancels; a full pass goes straight on to the next.
  const unsent = startLoop({ name: 'unsent spans', clock: env.clock, log, once: async () => ((await tracing.sendUnsent({ limit: UNSENT_BATCH })) === UNSENT_BATCH ? 0 : UNSENT_EVERY_MS) });
  return {
    halt: async () => {},
    stop: async () => {
      await unsent.stop();
      await tracing.stop();
    },
  };
}
