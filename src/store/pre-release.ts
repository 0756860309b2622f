import { Conflict } from '../errors.js';
import type { PoolClient } from './pool.js';

/**
 * The migrations of the pre-release chain, squashed into 0001_baseline. A store that applied all
 * of them has exactly the baseline's schema under the names it had then (test/store/baseline.test.ts
 * compares the two catalogs after these renames), so it is adopted: the renames bring it to the baseline's names
 * and its ledger is rewritten to say 0001_baseline, in the migration's transaction. A store that
 * stopped short of the last of them is refused with what to do, never half-migrated.
 */
export const PRE_RELEASE_CHAIN = [
  '0001_foundation', '0002_runs_and_queue', '0005_aged_lane', '0006_lease_fencing', '0007_step_log_bytes',
  '0008_step_counters', '0009_token_scopes', '0010_levers', '0012_triggers', '0013_step_start_log_id',
  '0016_lease_request_index', '0017_queue_run_index', '0018_lease_expiry_index', '0019_steps_fillfactor',
  '0020_steps_fillfactor_third', '0021_lean_lease_and_queue_rows', '0022_steps_empty_lists_null',
  '0023_aged_lane_from_lane_heads', '0024_runs_fillfactor', '0025_run_shard_function', '0026_blocked_entries',
  '0027_webhook_owner', '0028_registration_token_groups',
] as const;

const BASELINE = '0001_baseline';

/**
 * What the pre-release schema named after a scheduler the system never had, and the lease that
 * leads everything after the cron loop it once led alone.
 */
const ADOPT_SQL = `
ALTER TABLE scheduler_job_leases RENAME TO step_leases;
ALTER TABLE step_leases RENAME CONSTRAINT scheduler_job_leases_pkey TO step_leases_pkey;
ALTER INDEX scheduler_job_leases_runner_idx RENAME TO step_leases_runner_idx;
ALTER INDEX scheduler_job_leases_ack_idx RENAME TO step_leases_ack_idx;
ALTER TABLE scheduler_done RENAME TO completed_attempts;
ALTER TABLE completed_attempts RENAME CONSTRAINT scheduler_done_pkey TO completed_attempts_pkey;
ALTER INDEX scheduler_done_at_brin RENAME TO completed_attempts_at_brin;
ALTER TABLE scheduler_run_pins RENAME TO run_pins;
ALTER TABLE run_pins RENAME CONSTRAINT scheduler_run_pins_pkey TO run_pins_pkey;
UPDATE coordination_leases SET name = 'leader' WHERE name = 'cron-leader';
`;

export interface AppliedMigration { id: number; name: string }

/** A ledger whose first entry is the pre-release chain's own first migration. */
export function isPreReleaseStore(applied: AppliedMigration[]): boolean {
  return applied.some((m) => m.id === 1 && m.name === PRE_RELEASE_CHAIN[0]);
}

/**
 * Adopts a store made by the complete pre-release chain as one at the baseline, or throws saying
 * why it cannot be. Runs inside the migration's transaction, under its advisory lock.
 */
export async function preReleaseAdopt(client: PoolClient, applied: AppliedMigration[]): Promise<void> {
  const names = new Set(applied.map((m) => m.name));
  const missing = PRE_RELEASE_CHAIN.filter((n) => !names.has(n));
  const unknown = applied.filter((m) => !(PRE_RELEASE_CHAIN as readonly string[]).includes(m.name));
  if (unknown.length) {
    throw new Conflict(
      `store schema unknown: it was made by a pre-release opschain and has migration ${unknown.map((m) => m.name).join(', ')}, which no release knows; start from an empty database`,
      'schema_unknown',
    );
  }
  if (missing.length) {
    const last = applied.map((m) => m.name).sort().at(-1);
    throw new Conflict(
      `store schema too old to adopt: it was made by a pre-release opschain and stops at migration ${last}, before ${PRE_RELEASE_CHAIN.at(-1)}; ` +
        `migrate it first with a pre-release build that has ${PRE_RELEASE_CHAIN.at(-1)} (then run 'opschain db migrate' again), or start from an empty database`,
      'schema_too_old',
    );
  }
  await client.query(ADOPT_SQL);
  await client.query('DELETE FROM opschain_migrations');
  await client.query('INSERT INTO opschain_migrations (id, name) VALUES (1, $1)', [BASELINE]);
}
