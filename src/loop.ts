import type { Clock } from './clock.js';
import type { Logger } from './logger.js';

export interface LoopHandle {
  /** Wake the loop now instead of at the end of its current wait. */
  kick(): void;
  stop(): Promise<void>;
}

export interface LoopOptions {
  name: string;
  clock: Clock;
  log: Logger;
  /** One pass; returns the wait before the next pass in ms. */
  once: () => Promise<number>;
  /** Wait after a failed pass (store outage): the loop never dies, it retries. */
  errorDelayMs?: number;
}

/**
 * A timer around a single testable pass. Passes never overlap: the next wait starts when the
 * last pass finishes, and a kick only shortens the wait.
 */
export function startLoop(opts: LoopOptions): LoopHandle {
  const stopper = new AbortController();
  let wake: AbortController = new AbortController();
  let kicked = false;
  let failures = 0;
  const done = (async () => {
    while (!stopper.signal.aborted) {
      kicked = false;
      let wait: number;
      try {
        wait = await opts.once();
        if (failures > 0) opts.log.info({ loop: opts.name }, `${opts.name}: recovered after ${failures} failed pass(es)`);
        failures = 0;
      } catch (err) {
        failures++;
        if (failures === 1 || failures % 20 === 0) {
          opts.log.warn({ loop: opts.name, err: (err as Error).message, failures }, `${opts.name}: pass failed; retrying`);
        }
        wait = opts.errorDelayMs ?? 1000;
      }
      if (stopper.signal.aborted || kicked) continue;
      wake = new AbortController();
      await opts.clock.sleep(wait, wake.signal);
    }
  })();
  // A busy dispatcher is kicked many times a second: each kick aborts at most once, with a
  // shared reason (abort() without one builds a DOMException and its stack every time).
  const interrupt = () => {
    if (!wake.signal.aborted) wake.abort(WOKEN);
  };
  return {
    kick() {
      kicked = true;
      interrupt();
    },
    async stop() {
      stopper.abort(WOKEN);
      interrupt();
      await done;
    },
  };
}

const WOKEN = new Error('loop woken');
