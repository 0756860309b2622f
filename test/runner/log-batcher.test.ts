import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/runner/client.js';
import { LogBatcher } from '../../src/runner/log-batcher.js';
import type { LogChunk } from '../../src/runner/protocol.js';
import { ManualClock } from './manual-clock.js';

function recorder(answer: () => Promise<'ok' | 'lost' | 'full'> = async () => 'ok') {
  const calls: LogChunk[][] = [];
  return { calls, send: async (chunks: LogChunk[]) => { calls.push(chunks.map((c) => ({ ...c }))); return answer(); } };
}

describe('log batcher', () => {
  it('holds small output until the flush interval, merging adjacent text of one stream', async () => {
    const clock = new ManualClock();
    const r = recorder();
    const b = new LogBatcher({ send: r.send, onLost: () => {}, clock, flushMs: 250 });
    b.push('stdout', 'a');
    b.push('stdout', 'b');
    b.push('stderr', 'c');
    await clock.advance(249);
    expect(r.calls).toHaveLength(0);
    await clock.advance(1);
    expect(r.calls).toEqual([[{ stream: 'stdout', text: 'ab' }, { stream: 'stderr', text: 'c' }]]);
  });

  it('sends at once when a batch fills, never more than the batch size per call, in order', async () => {
    const clock = new ManualClock();
    const r = recorder();
    const b = new LogBatcher({ send: r.send, onLost: () => {}, clock, maxBatchBytes: 1024 });
    const line = 'x'.repeat(99) + '\n';
    let expected = '';
    for (let i = 0; i < 50; i++) {
      b.push(i % 10 === 9 ? 'stderr' : 'stdout', line);
      expected += line;
    }
    await b.close();
    expect(r.calls.length).toBeGreaterThanOrEqual(5);
    for (const call of r.calls) expect(call.reduce((n, c) => n + Buffer.byteLength(c.text), 0)).toBeLessThanOrEqual(1024);
    expect(r.calls.flat().map((c) => c.text).join('')).toBe(expected);
  });

  it('never splits a multi-byte character across calls', async () => {
    const r = recorder();
    const b = new LogBatcher({ send: r.send, onLost: () => {}, clock: new ManualClock(), maxBatchBytes: 5 });
    b.push('stdout', 'ééééé');
    await b.close();
    expect(r.calls.map((c) => c[0].text)).toEqual(['éé', 'éé', 'é']);
  });

  it('a fenced lease stops sending, drops the rest and reports once', async () => {
    let lost = 0;
    const r = recorder(async () => 'lost');
    const b = new LogBatcher({ send: r.send, onLost: () => lost++, clock: new ManualClock(), maxBatchBytes: 4 });
    b.push('stdout', 'abcdefghij');
    await b.close();
    b.push('stdout', 'more');
    expect(lost).toBe(1);
    expect(r.calls).toHaveLength(1);
    expect(b.isLost).toBe(true);
  });

  it('while the server is unreachable, output past the buffer bound is dropped and the drop noted', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let first = true;
    const r = recorder(async () => {
      if (first) {
        first = false;
        await gate;
      }
      return 'ok';
    });
    const b = new LogBatcher({ send: r.send, onLost: () => {}, clock: new ManualClock(), maxBatchBytes: 10, maxBufferedBytes: 20 });
    b.push('stdout', '0123456789'); // fills a batch: sent, and stuck
    b.push('stdout', 'abcdefghij');
    b.push('stdout', 'klmnopqrst');
    b.push('stdout', 'dropped!!!');
    release();
    await b.close();
    const text = r.calls.flat().map((c) => c.text).join('');
    expect(text.startsWith('0123456789abcdefghijklmnopqrst')).toBe(true);
    expect(text).toMatch(/10 bytes of output dropped/);
    expect(text).not.toMatch(/dropped!!!/);
  });

  it('a batch the server refuses for good is dropped, and the next batch says so', async () => {
    let n = 0;
    const errors: unknown[] = [];
    const r = recorder(async () => {
      if (n++ === 0) throw new ProtocolError(413, 'logs', 'Request body is too large');
      return 'ok';
    });
    const b = new LogBatcher({ send: r.send, onLost: () => {}, onError: (e) => errors.push(e), clock: new ManualClock(), maxBatchBytes: 10 });
    b.push('stdout', '0123456789');
    b.push('stdout', 'after');
    await b.close();
    const text = r.calls.slice(1).flat().map((c) => c.text).join('');
    expect(text).toMatch(/^\[opschain runner: 10 bytes of output were refused by the server and dropped \(logs: HTTP 413: Request body is too large\)\]\n/);
    expect(text.endsWith('after')).toBe(true);
    expect(errors).toHaveLength(1);
    expect(b.droppedBytes).toBe(10);
  });

  it('a refusal of the last batch is still marked, and a refused marker is not marked again', async () => {
    const r = recorder(async () => {
      throw new ProtocolError(400, 'logs', 'bad');
    });
    const b = new LogBatcher({ send: r.send, onLost: () => {}, clock: new ManualClock() });
    b.push('stdout', 'last words');
    await b.close();
    expect(r.calls).toHaveLength(2);
    expect(r.calls[1][0].text).toMatch(/10 bytes of output were refused/);
  });

  it('close() gives up on a log call that never ends, so the completion is not held', async () => {
    const clock = new ManualClock();
    let aborted = false;
    const b = new LogBatcher({
      send: (_chunks, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          }, { once: true });
        }),
      onLost: () => {},
      clock,
      closeTimeoutMs: 30_000,
    });
    b.push('stdout', 'stuck');
    let closed = false;
    const closing = b.close().then(() => (closed = true));
    await clock.advance(29_999);
    expect(closed).toBe(false);
    await clock.advance(1);
    await closing;
    expect(aborted).toBe(true);
    expect(b.droppedBytes).toBe(5);
  });

  it('once the server says the step\'s log is full, nothing more is sent', async () => {
    const r = recorder(async () => 'full');
    const b = new LogBatcher({ send: r.send, onLost: () => {}, clock: new ManualClock(), maxBatchBytes: 4 });
    b.push('stdout', 'abcd');
    b.push('stdout', 'efgh');
    await b.close();
    b.push('stdout', 'ijkl');
    expect(r.calls).toHaveLength(1);
    expect(b.isFull).toBe(true);
    expect(b.droppedBytes).toBe(4);
  });
});
