import { describe, expect, it } from 'vitest';
import { LogBatcher } from '../../src/runner/log-batcher.js';
import type { LogChunk } from '../../src/runner/protocol.js';
import { ManualClock } from './manual-clock.js';

function recorder(answer: () => Promise<'ok' | 'lost'> = async () => 'ok') {
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
});
