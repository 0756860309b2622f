import { describe, expect, it } from 'vitest';
import { repeatRead } from '../../src/cli/repeat.js';

/** A stand-in for stdout that keeps what is written. */
function sink(tty: boolean): NodeJS.WriteStream & { text: string } {
  const s = { text: '', isTTY: tty, write(chunk: string) { s.text += chunk; return true; } };
  return s as unknown as NodeJS.WriteStream & { text: string };
}

describe('repeatRead: the --watch loop of the read verbs', () => {
  it('piped: one JSON line per read, the next read after the last is written, until aborted', async () => {
    const out = sink(false);
    const stop = new AbortController();
    let n = 0;
    await repeatRead({ intervalMs: 1, json: true, out, signal: stop.signal, render: () => 'table', read: async () => { if (++n === 3) stop.abort(); return { n }; } });
    expect(out.text).toBe('{"n":1}\n{"n":2}\n{"n":3}\n');
  });

  it('on a terminal: each rendering replaces the last on a cleared screen', async () => {
    const out = sink(true);
    const stop = new AbortController();
    let n = 0;
    await repeatRead({ intervalMs: 1, json: false, out, signal: stop.signal, render: (v: number) => `table ${v}`, read: async () => { if (++n === 2) stop.abort(); return n; } });
    expect(out.text).toBe('\x1b[H\x1b[2Jtable 1\n\x1b[H\x1b[2Jtable 2\n');
  });
});
