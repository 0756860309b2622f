import { createServer, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';

/** One span as an OTLP/HTTP JSON export carries it, with its resource's and its own attributes decoded. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  status: { code: number; message?: string };
  attributes: Record<string, string | number | boolean | string[]>;
  resource: Record<string, string | number | boolean | string[]>;
  links: Array<{ traceId: string; spanId: string; attributes: Record<string, string | number | boolean | string[]> }>;
}

function anyValue(v: any): string | number | boolean | string[] {
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map((x: any) => String(anyValue(x)));
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return Number(v.doubleValue);
  if (v.boolValue !== undefined) return v.boolValue;
  return JSON.stringify(v);
}

const attrs = (list: any[] | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));
const nanosToMs = (n: string | number) => Number(BigInt(n) / 1_000_000n);

/**
 * An OTLP/HTTP trace receiver on loopback: what the SDK's exporter posts to /v1/traces (JSON, as
 * opschain's exporter sends it; gzip when compression is on), decoded into spans.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** The spans of each accepted request, in the order they came. */
  readonly requests: ReceivedSpan[][] = [];
  /** Requests whose body was not OTLP JSON (a test should see none). */
  readonly refused: string[] = [];
  private server?: Server;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          let body = Buffer.concat(chunks);
          if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
          if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) throw new Error(`${req.method} ${req.url} ${req.headers['content-type']}`);
          const doc = JSON.parse(body.toString('utf8'));
          const first = this.spans.length;
          for (const rs of doc.resourceSpans ?? []) {
            const resource = attrs(rs.resource?.attributes);
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                this.spans.push({
                  traceId: s.traceId,
                  spanId: s.spanId,
                  parentSpanId: s.parentSpanId ?? '',
                  name: s.name,
                  kind: s.kind,
                  startMs: nanosToMs(s.startTimeUnixNano),
                  endMs: nanosToMs(s.endTimeUnixNano),
                  status: s.status ?? { code: 0 },
                  attributes: attrs(s.attributes),
                  resource,
                  links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId, attributes: attrs(l.attributes) })),
                });
              }
            }
          }
          this.requests.push(this.spans.slice(first));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } catch (err) {
          this.refused.push((err as Error).message);
          res.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const addr = this.server.address();
    this.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
