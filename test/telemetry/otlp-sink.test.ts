import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { SpanRecord } from '../../src/core/trace-spans.js';
import { createLogger } from '../../src/logger.js';
import { batchSettings, createOtlpSink, type SpanSink } from '../../src/telemetry/otlp-sink.js';
import { OtlpReceiver } from '../support/otlp-receiver.js';

const log = createLogger('silent', { pretty: false });
const span = (n: number): SpanRecord => ({
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: n.toString(16).padStart(16, '0'),
  parentSpanId: '00f067aa0ba902b7',
  name: `span ${n}`,
  kind: 'internal',
  start: new Date(1_800_000_000_000 + n),
  end: new Date(1_800_000_000_500 + n),
  attributes: { 'opschain.n': n, 'opschain.text': `"quoted" \\ ${n}`, 'opschain.ok': true, 'opschain.list': ['a', 'b'] },
  ...(n % 2 ? { error: 'exited with code 1' } : {}),
});
const batch = (mark: number, size: number) => ({ mark, spans: Array.from({ length: size }, (_, i) => span(mark * 100 + i)) });

/** An OTLP endpoint that refuses every export with `status`, counting the requests. */
async function refusing(status: number): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let n = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      n++;
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  return {
    url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    requests: () => n,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the OTLP sink', () => {
  const envBefore = { ...process.env };
  const sinks: SpanSink[] = [];
  const receiver = new OtlpReceiver();
  afterEach(async () => {
    for (const s of sinks.splice(0)) await s.shutdown().catch(() => {});
    await receiver.stop();
    receiver.spans.length = 0;
    receiver.requests.length = 0;
    process.env = { ...envBefore };
  });

  it('reads the batch processor variables, ignoring values that are not positive integers', () => {
    expect(batchSettings({})).toEqual({ delayMs: 5_000, maxBatch: 512, maxQueue: 32_768 });
    expect(batchSettings({ OTEL_BSP_SCHEDULE_DELAY: '250', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '100', OTEL_BSP_MAX_QUEUE_SIZE: '50' })).toEqual({ delayMs: 250, maxBatch: 50, maxQueue: 50 });
    expect(batchSettings({ OTEL_BSP_SCHEDULE_DELAY: 'soon', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '-1', OTEL_BSP_MAX_QUEUE_SIZE: '1.5' })).toEqual({ delayMs: 5_000, maxBatch: 512, maxQueue: 32_768 });
  });

  it('sends OTLP JSON a collector decodes: ids, times, kinds, status, every attribute type', async () => {
    await receiver.start();
    const sink = await createOtlpSink({ url: `${receiver.url}/v1/traces`, serviceName: 'svc', replicaId: 'rep_1', log });
    sinks.push(sink);
    sink.emit([{ spans: [span(1), { ...span(2), kind: 'server', parentSpanId: undefined, links: [{ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), attributes: { 'opschain.link': 'launched_by' } }] }] }]);
    await sink.flush();
    expect(receiver.refused).toEqual([]);
    const [one, two] = [...receiver.spans].sort((a, b) => a.name.localeCompare(b.name));
    expect(one).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '0000000000000001',
      parentSpanId: '00f067aa0ba902b7',
      name: 'span 1',
      kind: 1,
      startMs: 1_800_000_000_001,
      endMs: 1_800_000_000_501,
      status: { code: 2, message: 'exited with code 1' },
      attributes: { 'opschain.n': 1, 'opschain.text': '"quoted" \\ 1', 'opschain.ok': true, 'opschain.list': ['a', 'b'] },
      resource: { 'service.name': 'svc', 'service.instance.id': 'rep_1' },
    });
    expect(two).toMatchObject({ kind: 2, parentSpanId: '', status: { code: 1 }, links: [{ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), attributes: { 'opschain.link': 'launched_by' } }] });
  });

  it('never splits a batch between exports, and reports each mark once its export was accepted', async () => {
    process.env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE = '5';
    await receiver.start();
    const sent: number[] = [];
    const sink = await createOtlpSink({ url: `${receiver.url}/v1/traces`, serviceName: 'svc', replicaId: 'rep_1', log, onSent: (m) => sent.push(...m) });
    sinks.push(sink);
    sink.emit([batch(1, 3), batch(2, 3), batch(3, 7), batch(4, 1)]);
    await sink.flush();
    expect(sent.sort()).toEqual([1, 2, 3, 4]);
    expect(receiver.spans).toHaveLength(14);
    // Whole batches to an export, up to 5 spans unless one batch alone is larger: 3, 3, 7 and 1.
    const marksOf = (spans: typeof receiver.spans) => spans.map((s) => Math.floor(Number(s.attributes['opschain.n']) / 100));
    expect(receiver.requests.map(marksOf)).toEqual([[1, 1, 1], [2, 2, 2], [3, 3, 3, 3, 3, 3, 3], [4]]);
  });

  it('reports nothing sent when the collector refuses the export, and drops a batch the buffer has no room for, unreported', async () => {
    const collector = await refusing(400);
    try {
      const sent: number[] = [];
      const sink = await createOtlpSink({ url: `${collector.url}/v1/traces`, serviceName: 'svc', replicaId: 'rep_1', log, onSent: (m) => sent.push(...m) });
      sinks.push(sink);
      sink.emit([batch(1, 2)]);
      await sink.flush();
      expect(collector.requests()).toBeGreaterThanOrEqual(1);
      expect(sent).toEqual([]);
    } finally {
      await collector.close();
    }

    process.env.OTEL_BSP_MAX_QUEUE_SIZE = '4';
    await receiver.start();
    const sent: number[] = [];
    const sink = await createOtlpSink({ url: `${receiver.url}/v1/traces`, serviceName: 'svc', replicaId: 'rep_1', log, scheduledDelayMs: 60_000, onSent: (m) => sent.push(...m) });
    sinks.push(sink);
    sink.emit([batch(1, 3), batch(2, 3), batch(3, 1)]);
    await sink.flush();
    // Mark 2 did not fit beside mark 1: it stays owed (its rows are sent again from the store).
    expect(sent.sort()).toEqual([1, 3]);
    expect(receiver.spans).toHaveLength(4);
  });
});
