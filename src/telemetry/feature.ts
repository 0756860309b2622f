import { tracingSettings } from '../config.js';
import type { Feature } from '../context.js';
import type { RunTracing } from './run-tracing.js';

/**
 * Exports this replica's runs as traces when an OTLP endpoint is configured (docs/tracing.md).
 * With none, it returns before loading anything: the SDK is imported only here, on demand.
 */
export function tracingFeature(tracing: RunTracing): Feature {
  return async (ctx) => {
    const settings = tracingSettings(ctx.config);
    if (!settings) return;
    const log = ctx.log.child({ component: 'tracing' });
    const { createOtlpSink } = await import('./otlp-sink.js');
    const sink = await createOtlpSink({ url: settings.url, serviceName: settings.serviceName, replicaId: ctx.replicaId, log });
    tracing.start({ sink, sampler: settings.sampler, log, pool: ctx.pool });
    // Registered before the loops' hooks, so it runs after them: the last spans go out with it.
    ctx.onStop.push(() => tracing.stop());
    log.info({ url: settings.url, sampler: settings.sampler.name, ratio: settings.sampler.ratio, service: settings.serviceName }, 'runs are exported as traces');
  };
}
