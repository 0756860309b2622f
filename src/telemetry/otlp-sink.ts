import type { SpanRecord } from '../core/trace-spans.js';
import type { Logger } from '../logger.js';
import { VERSION } from '../version.js';
import { otlpRequest } from './otlp-json.js';

/** Where a replica's finished spans go. */
export interface SpanSink {
  /**
   * Hands spans to the exporter. A batch with a mark is reported to onSent once the collector
   * accepted it; a batch is never split between two exports, so it is sent whole or not at all.
   */
  emit(batches: Array<{ spans: SpanRecord[]; mark?: number }>): void;
  /** Exports what is buffered now and waits for every export under way (tests, shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** What one export carries: the spans and the marks of the batches they came in. */
interface ExportBatch {
  spans: SpanRecord[];
  marks: number[];
}

/** Warnings about a failing collector, at most one a minute: an outage must not flood the log. */
const WARN_EVERY_MS = 60_000;

/**
 * The batch processor's settings, from the variables the SDK's batch span processor reads. The
 * SDK's buffer (2,048 spans) overflows at a few hundred steps a second (four spans a step), so
 * opschain's is larger; its export size stays the SDK's 512: an export is written on the event
 * loop that answers runners, and 2,048 spans (1.3 MB of JSON) held it for tens of milliseconds.
 */
export function batchSettings(env: NodeJS.ProcessEnv): { delayMs: number; maxBatch: number; maxQueue: number } {
  const int = (name: string, fallback: number): number => {
    const v = Number(env[name]);
    return env[name] !== undefined && Number.isInteger(v) && v > 0 ? v : fallback;
  };
  const maxQueue = int('OTEL_BSP_MAX_QUEUE_SIZE', 32_768);
  return { delayMs: int('OTEL_BSP_SCHEDULE_DELAY', 5_000), maxBatch: Math.min(int('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512), maxQueue), maxQueue };
}

/**
 * The OpenTelemetry SDK's OTLP/HTTP export delegate (its transport, retries, timeout, headers,
 * compression and endpoint variables, as OTLPTraceExporter is built), fed requests written as
 * OTLP JSON straight from the spans built from the store (otlp-json.ts), and batched here:
 * spans are buffered as built, exported when a batch is full or `OTEL_BSP_SCHEDULE_DELAY` after
 * the first, one export at a time. Loaded on first use only (dynamic import): a replica with
 * traces off never loads the SDK.
 */
export async function createOtlpSink(p: {
  url: string;
  serviceName: string;
  replicaId: string;
  log: Logger;
  scheduledDelayMs?: number;
  /** The marks of batches the collector accepted. */
  onSent?: (marks: number[]) => void;
}): Promise<SpanSink> {
  const [{ OTLPExporterBase }, { createOtlpHttpExportDelegate, convertLegacyHttpOptions }] = await Promise.all([
    import('@opentelemetry/otlp-exporter-base'),
    import('@opentelemetry/otlp-exporter-base/node-http'),
  ]);
  const settings = batchSettings(process.env);
  const delayMs = p.scheduledDelayMs ?? settings.delayMs;
  const resource = { 'service.name': p.serviceName, 'service.version': VERSION, 'service.instance.id': p.replicaId };
  const scope = { name: 'opschain', version: VERSION };
  const serializer = {
    serializeRequest: (b: ExportBatch): Uint8Array => Buffer.from(otlpRequest(resource, scope, b.spans), 'utf8'),
    deserializeResponse: (data: Uint8Array): unknown => (data.length === 0 ? {} : JSON.parse(Buffer.from(data).toString('utf8'))),
  };
  const exporter = new OTLPExporterBase<ExportBatch>(
    createOtlpHttpExportDelegate(
      convertLegacyHttpOptions({ url: p.url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }),
      serializer,
      'otlp_http_span_exporter',
      { name: 'span', countItems: (b: ExportBatch) => b.spans.length },
      undefined,
    ),
  );

  let lastWarn = 0;
  const warn = (msg: string, err: unknown): void => {
    const now = Date.now();
    if (now - lastWarn < WARN_EVERY_MS) return;
    lastWarn = now;
    p.log.warn({ err: err instanceof Error ? err.message : String(err), url: p.url }, msg);
  };

  // Buffered spans, whole batches only, in the order they came; `marks[i]` ends at `ends[i]` spans.
  let spans: SpanRecord[] = [];
  let marks: number[] = [];
  let markEnds: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  let exporting: Promise<void> | undefined;
  let closed = false;

  const take = (): ExportBatch => {
    // Whole batches up to the export size (at least one batch, however large).
    let m = 0;
    while (m < marks.length && (m === 0 || markEnds[m] <= settings.maxBatch)) m++;
    const n = m === marks.length ? spans.length : markEnds[m - 1];
    const batch = { spans: spans.slice(0, n), marks: marks.slice(0, m) };
    spans = spans.slice(n);
    marks = marks.slice(m);
    markEnds = markEnds.slice(m).map((e) => e - n);
    return batch;
  };

  const exportOne = (batch: ExportBatch): Promise<void> =>
    new Promise((resolve) => {
      exporter.export(batch, (result) => {
        // ExportResultCode.SUCCESS; a failed batch's rows stay owed in the store and are sent again.
        if (result.code === 0) {
          if (batch.marks.length > 0) p.onSent?.(batch.marks);
        } else warn('trace export failed; spans are sent again from the store once the collector answers', result.error ?? 'export failed');
        resolve();
      });
    });

  /** Exports while there is something buffered and (unless `all`) a full batch of it. */
  const drain = (all: boolean): Promise<void> => {
    if (exporting) return exporting.then(() => drain(all));
    if (spans.length === 0 || (!all && spans.length < settings.maxBatch)) return Promise.resolve();
    if (timer) clearTimeout(timer);
    timer = undefined;
    exporting = (async () => {
      try {
        while (spans.length > 0 && (all || spans.length >= settings.maxBatch)) await exportOne(take());
      } finally {
        exporting = undefined;
        arm();
      }
    })();
    return exporting;
  };

  function arm(): void {
    if (timer || closed || spans.length === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void drain(true);
    }, delayMs);
    timer.unref();
  }

  return {
    emit: (batches) => {
      if (closed) return;
      for (const b of batches) {
        if (spans.length + b.spans.length > settings.maxQueue) {
          // Not reported sent: the rows stay owed and another pass sends them.
          warn('trace buffer full; spans are sent again from the store', `${spans.length} spans buffered`);
          continue;
        }
        for (const s of b.spans) spans.push(s);
        if (b.mark !== undefined) {
          marks.push(b.mark);
          markEnds.push(spans.length);
        }
      }
      if (spans.length >= settings.maxBatch) void drain(false);
      else arm();
    },
    flush: () => drain(true),
    shutdown: async () => {
      await drain(true);
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await exporter.shutdown();
    },
  };
}
