import { performance } from 'node:perf_hooks';

/**
 * Calls `each(i)` for i from 0 to count − 1, the i-th call starting `spacingMs × i` after the
 * first (at once when the calls before it ran late): a steady arrival rate, as both sides of the
 * latency scenario submit their work.
 */
export async function paced(count: number, spacingMs: number, each: (i: number) => Promise<void>): Promise<void> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const wait = t0 + i * spacingMs - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await each(i);
  }
}
