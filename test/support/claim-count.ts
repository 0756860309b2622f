import type { Pool } from '../../src/store/pool.js';

/**
 * Counts what a pool's connections send: claim statements (a tick's; a step handed off is leased
 * without one) and reads of the parked runners (a tick's or a hand-off's). Hooks every connection
 * the pool opens from now on.
 */
export function countClaims(pool: Pool): { claims: number; parkedReads: number } {
  const seen = { claims: 0, parkedReads: 0 };
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
      // A claim is sent as text (unnamed: its best plan depends on its parameters).
      const q = args[0] as string | { text?: string };
      const text = typeof q === 'string' ? q : q?.text;
      if (text && /^SELECT \* FROM queue_ready/.test(text.trim())) seen.claims++;
      if (text?.includes('posture_fleet_quiesced')) seen.parkedReads++;
      return query(...args);
    };
  });
  return seen;
}
