import type { SpanRecord } from '../core/trace-spans.js';
import type { Logger } from '../logger.js';
import { VERSION } from '../version.js';

/** Where a replica's finished spans go. */
export interface SpanSink {
  /**
   * Hands spans to the exporter. A batch with a mark is reported to onSent once the exporter has
   * sent every span of it; one some of whose spans failed or were dropped is never reported.
   */
  emit(batches: Array<{ spans: SpanRecord[]; mark?: number }>): void;
  /** Exports what is buffered now (tests, shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

// The SDK's SpanKind values.
const KIND = { internal: 0, server: 1, producer: 3 } as const;
const STATUS_OK = 1;
const STATUS_ERROR = 2;

const hr = (d: Date): [number, number] => [Math.floor(d.getTime() / 1000), (d.getTime() % 1000) * 1_000_000];

/** Warnings about a failing collector, at most one a minute: an outage must not flood the log. */
const WARN_EVERY_MS = 60_000;

/**
 * The OpenTelemetry SDK's batch processor and OTLP/HTTP exporter, fed spans built from the store.
 * Loaded on first use only (dynamic import): a replica with traces off never loads the SDK.
 * The spans are handed to the processor as finished spans with their own ids and times; the SDK's
 * tracer (which would take its own clock and random ids) is not used.
 */
export async function createOtlpSink(p: {
  url: string;
  serviceName: string;
  replicaId: string;
  log: Logger;
  scheduledDelayMs?: number;
  /** The marks of batches whose every span the collector accepted. */
  onSent?: (marks: number[]) => void;
}): Promise<SpanSink> {
  const [{ BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }, { setGlobalErrorHandler }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/core'),
  ]);
  let lastWarn = 0;
  setGlobalErrorHandler((err) => {
    const now = Date.now();
    if (now - lastWarn < WARN_EVERY_MS) return;
    lastWarn = now;
    p.log.warn({ err: err instanceof Error ? err.message : String(err), url: p.url }, 'trace export failed; spans are dropped while the collector is unreachable');
  });
  const resource = resourceFromAttributes({
    'service.name': p.serviceName,
    'service.version': VERSION,
    'service.instance.id': p.replicaId,
  });
  const scope = { name: 'opschain', version: VERSION };
  // The SDK's default buffer (2,048 spans, exported 512 at a time) overflows, dropping spans, at a
  // few hundred steps a second (four spans a step); the OTEL_BSP_* variables still decide when set.
  const env = process.env;
  // Which batch each span came in, and how many of its spans are still to be sent: a batch's
  // spans may go out in more than one export. Weak: a span the processor dropped (its buffer
  // full) takes its batch's tally with it, unreported.
  const tallies = new WeakMap<object, { mark: number; left: number; failed: boolean }>();
  const otlp = new OTLPTraceExporter({ url: p.url });
  const exporter: ConstructorParameters<typeof BatchSpanProcessor>[0] = {
    export: (spans, done) =>
      otlp.export(spans, (result) => {
        const sent: number[] = [];
        for (const s of spans) {
          const t = tallies.get(s);
          if (!t) continue;
          // ExportResultCode.SUCCESS
          if (result.code !== 0) t.failed = true;
          else if (--t.left === 0 && !t.failed) sent.push(t.mark);
        }
        if (sent.length > 0) p.onSent?.(sent);
        done(result);
      }),
    shutdown: () => otlp.shutdown(),
    forceFlush: () => otlp.forceFlush(),
  };
  const processor = new BatchSpanProcessor(exporter, {
    ...(p.scheduledDelayMs !== undefined ? { scheduledDelayMillis: p.scheduledDelayMs } : {}),
    ...(env.OTEL_BSP_MAX_QUEUE_SIZE ? {} : { maxQueueSize: 32_768 }),
    ...(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE ? {} : { maxExportBatchSize: 2_048 }),
  });
  type Readable = Parameters<typeof processor.onEnd>[0];
  const toReadable = (s: SpanRecord): Readable => {
    const startTime = hr(s.start);
    const endTime = hr(s.end);
    const ms = Math.max(0, s.end.getTime() - s.start.getTime());
    const context = { traceId: s.traceId, spanId: s.spanId, traceFlags: 1 };
    return {
      name: s.name,
      kind: KIND[s.kind],
      spanContext: () => context,
      ...(s.parentSpanId ? { parentSpanContext: { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: 1, isRemote: s.parentRemote === true } } : {}),
      startTime,
      endTime,
      duration: [Math.floor(ms / 1000), (ms % 1000) * 1_000_000],
      status: s.error !== undefined ? { code: STATUS_ERROR, message: s.error } : { code: STATUS_OK },
      attributes: s.attributes,
      links: s.links ? s.links.map((l) => ({ context: { traceId: l.traceId, spanId: l.spanId, traceFlags: 1 }, attributes: l.attributes })) : [],
      events: [],
      ended: true,
      resource,
      instrumentationScope: scope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
  };
  return {
    emit: (batches) => {
      for (const b of batches) {
        const tally = b.mark === undefined ? undefined : { mark: b.mark, left: b.spans.length, failed: false };
        for (const s of b.spans) {
          const span = toReadable(s);
          if (tally) tallies.set(span, tally);
          processor.onEnd(span);
        }
      }
    },
    flush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
}
