import { describe, expect, it } from 'vitest';
import { startLoop } from '../src/loop.js';
import { createLogger } from '../src/logger.js';
import { ManualClock } from './runner/manual-clock.js';

const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

/** A pass the test releases by hand, so overlap would be visible. */
function gatedPasses(waitMs: number) {
  const log: string[] = [];
  let inFlight = 0;
  let release: (() => void) | undefined;
  const once = async () => {
    inFlight++;
    log.push(`start (${inFlight} in flight)`);
    await new Promise<void>((r) => (release = r));
    inFlight--;
    log.push('end');
    return waitMs;
  };
  return { log, once, finish: async () => (release!(), await settle()) };
}

describe('startLoop', () => {
  it('waits what the pass returned, by the injected clock, before the next pass', async () => {
    const clock = new ManualClock();
    let passes = 0;
    const loop = startLoop({ name: 't', clock, log: createLogger('silent'), once: async () => (passes++, 1_000) });
    try {
      await settle();
      expect(passes).toBe(1);
      await clock.advance(999);
      expect(passes).toBe(1);
      await clock.advance(1);
      expect(passes).toBe(2);
    } finally {
      await loop.stop();
    }
  });

  it('never overlaps a pass: a kick during a pass runs the next one right after it, once', async () => {
    const clock = new ManualClock();
    const p = gatedPasses(60_000);
    const loop = startLoop({ name: 't', clock, log: createLogger('silent'), once: p.once });
    try {
      await settle();
      loop.kick();
      loop.kick();
      await p.finish();
      // Kicked while running: no wait, the second pass starts at once, alone.
      expect(p.log).toEqual(['start (1 in flight)', 'end', 'start (1 in flight)']);
      await p.finish();
      expect(clock.pending).toBe(1);
      loop.kick();
      await settle();
      expect(p.log).toEqual(['start (1 in flight)', 'end', 'start (1 in flight)', 'end', 'start (1 in flight)']);
      await p.finish();
    } finally {
      const stopped = loop.stop();
      await stopped;
    }
  });

  it('survives a failing pass: retries after errorDelayMs and goes back to the pass\'s own wait once it succeeds', async () => {
    const clock = new ManualClock();
    let failing = 2;
    let passes = 0;
    const loop = startLoop({
      name: 't',
      clock,
      log: createLogger('silent'),
      errorDelayMs: 100,
      once: async () => {
        passes++;
        if (failing-- > 0) throw new Error('store unavailable');
        return 5_000;
      },
    });
    try {
      await settle();
      expect(passes).toBe(1);
      await clock.advance(100);
      expect(passes).toBe(2);
      await clock.advance(100);
      expect(passes).toBe(3);
      await clock.advance(100);
      expect(passes).toBe(3);
      await clock.advance(4_900);
      expect(passes).toBe(4);
    } finally {
      await loop.stop();
    }
  });

  it('stop ends the wait at once, waits for a pass in flight, and is safe twice', async () => {
    const clock = new ManualClock();
    const p = gatedPasses(60_000);
    const loop = startLoop({ name: 't', clock, log: createLogger('silent'), once: p.once });
    await settle();
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await settle();
    expect(stopped).toBe(false);
    await p.finish();
    await stopping;
    expect(stopped).toBe(true);
    await loop.stop();
    expect(p.log).toEqual(['start (1 in flight)', 'end']);
    expect(clock.pending).toBe(0);
  });
});
