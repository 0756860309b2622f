import type { QueueEntry } from './entry.js';
import { firstFullPool, type PoolState } from './plan.js';
import type { Verdict, VerdictCode } from './verdict.js';

/**
 * Verdicts no waiting for a runner's capacity can end: an operator, a runner (registering,
 * undrained, back online, polling again), a pool release or the pinned run's own steps must
 * change something first. An entry with one of these is set aside out of the claim path, so it
 * never hides the entries behind it from an idle runner that could take them. Capacity (every
 * match busy by load, a large step waiting for the most capable runner to be idle) and "waiting
 * for a dispatch tick" keep their place: those entries go as soon as a runner has room.
 */
const BLOCKING: ReadonlySet<VerdictCode> = new Set<VerdictCode>([
  'pool_full',
  'pinned_runner_gone',
  'pinned_runner_mismatch',
  'pinned_runner_busy',
  'no_runner_matches',
  'all_matches_drained',
  'all_matches_offline',
  'no_runner_polling',
  'exceeds_max_load',
]);

/**
 * What an entry is blocked on, given its verdict over the whole fleet, or null when it must stay
 * claimable: `pool:NAME` (a release or a limit change frees it), `run:ID` (the pinned run's
 * runner or its own steps), `fleet` (a runner registered, undrained, relabelled or back). The key
 * groups blocked entries for the pass that returns them; the verdict is what is checked again.
 */
export function blockingKey(entry: QueueEntry, v: Verdict, pools: PoolState): string | null {
  if (!BLOCKING.has(v.code)) return null;
  // A large step that only waits for the most capable runner to go idle is waiting for capacity.
  if (v.code === 'exceeds_max_load' && v.satisfiable) return null;
  if (v.code === 'pool_full') {
    const full = firstFullPool(entry.pools, pools);
    return full ? `pool:${full.name}` : null;
  }
  if (v.code.startsWith('pinned_runner_')) return `run:${entry.runId}`;
  return 'fleet';
}
