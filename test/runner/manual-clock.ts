import type { Clock } from '../../src/clock.js';

/** A clock that moves only when the test says so; sleeps resolve as time passes their deadline. */
export class ManualClock implements Clock {
  private t = 0;
  private sleepers: Array<{ at: number; resolve: () => void }> = [];

  now(): number {
    return this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const entry = { at: this.t + ms, resolve };
      this.sleepers.push(entry);
      signal?.addEventListener('abort', () => {
        this.sleepers = this.sleepers.filter((s) => s !== entry);
        resolve();
      }, { once: true });
    });
  }

  get pending(): number {
    return this.sleepers.length;
  }

  /** Moves time forward and wakes every sleeper now due, then lets their continuations run. */
  async advance(ms: number): Promise<void> {
    this.t += ms;
    const due = this.sleepers.filter((s) => s.at <= this.t);
    this.sleepers = this.sleepers.filter((s) => s.at > this.t);
    for (const s of due) s.resolve();
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  }
}
