import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/api/http.js';
import { Readiness } from '../../src/api/readiness.js';
import { createLogger } from '../../src/logger.js';

describe('server log lines join the trace of the request', () => {
  const apps: Array<ReturnType<typeof createHttpServer>> = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  it('a request with a traceparent logs its trace_id and span_id; one without, or with a bad one, none', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    const app = createHttpServer({ log: createLogger('info', { pretty: false, destination: sink, sync: true }), readiness: new Readiness(), version: 'test', replicaId: 'r-1' });
    apps.push(app);
    app.post('/probe', async (req) => {
      req.log.warn({ probe: req.headers['x-probe'] }, 'probe');
      return {};
    });
    const send = (probe: string, traceparent?: string) =>
      app.inject({ method: 'POST', url: '/probe', headers: { 'x-probe': probe, ...(traceparent ? { traceparent } : {}) }, payload: {} });
    await send('traced', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    await send('plain');
    await send('bad', 'nonsense');
    const of = (probe: string) => lines.find((l) => l.probe === probe)!;
    expect(of('traced')).toMatchObject({ trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' });
    expect(of('plain').trace_id).toBeUndefined();
    expect(of('bad').trace_id).toBeUndefined();
  });
});
