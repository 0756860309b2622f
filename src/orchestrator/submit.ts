import { CallGroups } from '../core/call-groups.js';
import { classify, placementFromBinding } from '../core/classify.js';
import type { Pool, PoolClient, Db } from '../store/pool.js';
import { placementBindingsOver } from '../store/placement.js';
import { runsInsertQueued, type RunToQueue } from '../store/runs.js';
import type { TraceParent } from '../core/trace-ids.js';
import type { LoadedRunFile } from './runfile.js';

export interface RunSubmitted {
  runId: number;
  /** The steps queued at once (those with no needs), as attempt 1. */
  ready: string[];
}

/** Who submits, recorded in the run's audit row. */
export interface SubmitBy {
  actor: string;
  source?: string;
  /** The caller's trace context (a W3C traceparent): the run joins that trace. */
  trace?: TraceParent;
}

/** Runs, and steps in all, one submit group may carry: a group is one statement, and these bound its size. */
const MAX_GROUP_RUNS = 100;
const MAX_GROUP_STEPS = 5_000;
/** Submit groups in flight at once per pool. */
const MAX_GROUPS_IN_FLIGHT = 2;

/**
 * Starts a run from a validated run file: the run and its steps, every root step classified and
 * queued as attempt 1, and the audit row, written by one statement (atomic by itself: nothing is
 * written if any part fails), which also takes the run's id, its shard and its project's weight.
 * A run whose placement a path binding may decide (it has a target, and a root step has no
 * placement of its own or from the run) reads the bindings over its target first.
 *
 * Submits that arrive on one pool while the event loop finishes its turn, or while earlier ones
 * are being written, are written together (group commit): one statement for all (and one read,
 * when some need bindings), each caller answered after that commit. A group the store refuses is
 * written again run by run, so a run that fails, fails alone.
 */
export function runSubmit(pool: Pool, file: LoadedRunFile, by: SubmitBy): Promise<RunSubmitted> {
  let g = submitGroups.get(pool);
  if (!g) {
    g = new CallGroups<PendingSubmit>({
      maxCalls: MAX_GROUP_RUNS,
      maxInFlight: MAX_GROUPS_IN_FLIGHT,
      weight: (c) => c.file.definition.steps.length,
      maxWeight: MAX_GROUP_STEPS,
      apply: async (calls) => {
        const submitted = await submitRuns(pool, calls);
        calls.forEach((c, i) => c.resolve(submitted[i]));
      },
      fail: (call, err) => call.reject(err),
    });
    submitGroups.set(pool, g);
  }
  const group = g;
  return new Promise((resolve, reject) => group.push({ file, by, resolve, reject }));
}

interface PendingSubmit {
  file: LoadedRunFile;
  by: SubmitBy;
  resolve: (s: RunSubmitted) => void;
  reject: (err: unknown) => void;
}

const submitGroups = new WeakMap<Pool, CallGroups<PendingSubmit>>();

/** runSubmit inside the caller's transaction (the launch loop creates a run and settles its launch together). */
export async function runSubmitIn(client: PoolClient, file: LoadedRunFile, by: SubmitBy): Promise<RunSubmitted> {
  const [submitted] = await submitRuns(client, [{ file, by }]);
  return submitted;
}

/** Starts many runs in one statement (all or none), as runSubmit does each. */
export async function runSubmitMany(db: Db, files: LoadedRunFile[], by: SubmitBy): Promise<RunSubmitted[]> {
  return submitRuns(db, files.map((file) => ({ file, by })));
}

/**
 * Writes the runs in one statement, which takes their ids, shards and project weights itself;
 * runs whose placement a path binding may decide read the bindings over their targets first.
 */
async function submitRuns(db: Db, items: Array<{ file: LoadedRunFile; by: SubmitBy }>): Promise<RunSubmitted[]> {
  if (items.length === 0) return [];
  const targeted = items.map((x) => x.file.definition).filter((d) => d.steps.some((s) => s.needs.length === 0 && placementFromBinding(d, s)));
  const bindings = await placementBindingsOver(db, targeted.map((d) => d.target!));
  const runs: RunToQueue[] = items.map(({ file, by }) => {
    const d = file.definition;
    const over = (d.target && bindings.get(d.target)) || [];
    const queue = new Map(d.steps.filter((s) => s.needs.length === 0).map((s) => [s.name, classify({ run: d, step: s, bindings: over })]));
    return {
      definition: d,
      source: file.source,
      createdBy: by.actor,
      queue,
      audit: { actor: by.actor, action: 'runs.submit', source: by.source ?? null, detail: { name: d.name, project: d.project, steps: d.steps.length } },
      ...(by.trace ? { trace: by.trace } : {}),
    };
  });
  return runsInsertQueued(db, runs);
}
