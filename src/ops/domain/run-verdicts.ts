import { fleetQueueRead } from '../../store/fleet.js';
import type { Pool } from '../../store/pool.js';
import type { StepRow } from '../../store/runs.js';
import { buildFleetQueue } from '../../views/fleet-queue.js';

/**
 * step id → the verdict of each of the run's queued steps, read only when the run has one: the
 * same verdicts `fleet queue` shows, for `runs show`. `acceptExceeding` is the caller's
 * (the server's dispatch.accept_exceeding, or the CLI's environment read once by src/config.ts).
 */
export async function queuedStepVerdicts(
  pool: Pool,
  snap: { run: { id: number }; steps: Pick<StepRow, 'id' | 'status'>[] },
  opts: { acceptExceeding?: boolean } = {},
): Promise<Map<number, { code: string; reason: string; satisfiable: boolean }>> {
  const out = new Map<number, { code: string; reason: string; satisfiable: boolean }>();
  if (!snap.steps.some((s) => s.status === 'ready')) return out;
  const view = buildFleetQueue(await fleetQueueRead(pool, { runId: snap.run.id }), { acceptExceeding: opts.acceptExceeding ?? true });
  for (const e of view.entries) if (e.state === 'ready') out.set(e.stepId, { code: e.verdict.code, reason: e.verdict.reason, satisfiable: e.verdict.satisfiable });
  return out;
}
