import { systemClock } from '../../clock.js';
import { parseTraceParent, TraceParentError, type TraceParent } from '../../core/trace-ids.js';
import { queuedStepVerdicts } from './run-verdicts.js';
import { Invalid } from '../../errors.js';
import { runCancel, type RunCancelled } from '../../orchestrator/cancel.js';
import { runSnapshot } from '../../orchestrator/follow.js';
import { runRetry, type RunRetried } from '../../orchestrator/retry.js';
import { runFileLoad } from '../../orchestrator/runfile.js';
import { runSubmit } from '../../orchestrator/submit.js';
import { stepLogRead } from '../../store/logs.js';
import { RUN_STATUSES, runGet, runList, type RunStatus } from '../../store/runs.js';
import { logLineView, runListItem, runView, type LogLineView, type RunListItem, type RunView } from '../../views/runs.js';
import type { OpsContext } from './context.js';
import { NotFound } from '../../errors.js';

/** The longest a log read parks waiting for new lines (a long poll). */
export const LOGS_MAX_WAIT_MS = 25_000;
const LOGS_POLL_MS = 250;

function runId(id: unknown): number {
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) throw new Invalid(`expected a run id (a positive number), got ${JSON.stringify(id)}`);
  return id;
}

/**
 * `runs submit`: validates the run file (YAML or JSON text, with `--set` overrides) and starts the
 * run; with a W3C `traceparent` the run's trace joins the caller's.
 */
export async function runsSubmit(ctx: OpsContext, p: { file: string; set?: string[]; traceparent?: string }): Promise<RunView> {
  let trace: TraceParent | undefined;
  if (p.traceparent !== undefined) {
    try {
      trace = parseTraceParent(p.traceparent);
    } catch (err) {
      if (err instanceof TraceParentError) throw new Invalid(err.message);
      throw err;
    }
  }
  const loaded = runFileLoad(p.file, p.set ?? []);
  const { runId: id } = await runSubmit(ctx.pool, loaded, { actor: ctx.actor, source: ctx.source, ...(trace ? { trace } : {}) });
  const snap = await runSnapshot(ctx.pool, id);
  return runView(snap.run, snap.steps, snap.now);
}

/** `runs show`: the run and its steps; a queued step says what it waits for (unless `verdicts: false`). */
export async function runsShow(ctx: OpsContext, p: { id: number; verdicts?: boolean }): Promise<RunView> {
  const snap = await runSnapshot(ctx.pool, runId(p.id));
  const verdicts = p.verdicts === false ? undefined : await queuedStepVerdicts(ctx.pool, snap, { acceptExceeding: ctx.acceptExceeding });
  return runView(snap.run, snap.steps, snap.now, verdicts);
}

export interface RunListPage { runs: RunListItem[]; next: { before: number } | null }

/** `runs list`: newest first, paged by `before`. */
export async function runsList(ctx: OpsContext, p: { limit?: number; before?: number; project?: string; status?: string }): Promise<RunListPage> {
  const limit = p.limit ?? 20;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new Invalid(`limit ${limit}: expected 1 to 1000`);
  if (p.status !== undefined && !(RUN_STATUSES as readonly string[]).includes(p.status)) throw new Invalid(`status ${p.status}: expected one of ${RUN_STATUSES.join(', ')}`);
  // One more than asked tells whether there is a next page without a count.
  const rows = await runList(ctx.pool, { limit: limit + 1, before: p.before, project: p.project, status: p.status as RunStatus | undefined });
  const runs = rows.slice(0, limit).map(runListItem);
  return { runs, next: rows.length > limit ? { before: runs[runs.length - 1].id } : null };
}

export interface RunLogsPage {
  lines: LogLineView[];
  /** Pass back as `after` to read on from here. */
  cursor: string;
  /** The run's status when the lines were read: lines written before it finished are all in. */
  status: RunStatus;
  /** More lines are already there: read again at once. */
  more: boolean;
}

/** `step:lastId,…`: one position per step, since two steps' appends commit in their own order. */
function decodeCursor(cursor: string | undefined): Map<number, number> {
  const after = new Map<number, number>();
  if (!cursor) return after;
  for (const part of cursor.split(',')) {
    const m = /^(\d{1,15}):(\d{1,15})$/.exec(part);
    if (!m) throw new Invalid(`after ${JSON.stringify(cursor)}: expected the cursor of an earlier page`);
    after.set(Number(m[1]), Number(m[2]));
  }
  return after;
}

const encodeCursor = (after: Map<number, number>) => [...after].map(([s, id]) => `${s}:${id}`).join(',');

/**
 * `runs logs`: a page of the run's log lines after `after`. With `waitMs`, a page that would be
 * empty while the run is still running waits (a long poll) until a line comes, the run ends or
 * the wait is over. Following a run is reading pages until `status` is final and `more` false.
 */
export async function runsLogs(ctx: OpsContext, p: { id: number; step?: string; after?: string; waitMs?: number; limit?: number }): Promise<RunLogsPage> {
  const id = runId(p.id);
  const limit = p.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new Invalid(`limit ${limit}: expected 1 to 10000`);
  const after = decodeCursor(p.after);
  const waitMs = Math.min(Math.max(0, p.waitMs ?? 0), LOGS_MAX_WAIT_MS);
  const deadline = Date.now() + waitMs;
  const first = await runSnapshot(ctx.pool, id);
  if (p.step !== undefined && !first.steps.some((s) => s.name === p.step)) throw new NotFound(`run ${id} has no step named ${JSON.stringify(p.step)}`, 'step_not_found');
  let status: RunStatus = first.run.status;
  while (true) {
    const lines = await stepLogRead(ctx.pool, { runId: id, step: p.step, after, limit });
    for (const l of lines) after.set(l.stepId, Math.max(after.get(l.stepId) ?? 0, l.id));
    if (lines.length > 0 || status !== 'running' || Date.now() >= deadline || ctx.signal?.aborted) {
      return { lines: lines.map(logLineView), cursor: encodeCursor(after), status, more: lines.length === limit };
    }
    await systemClock.sleep(Math.min(LOGS_POLL_MS, Math.max(0, deadline - Date.now())), ctx.signal);
    // The status is read before the lines, so the lines written before it finished are all seen.
    status = (await runGet(ctx.pool, id))?.status ?? status;
  }
}

/** `runs retry`. */
export async function runsRetry(ctx: OpsContext, p: { id: number }): Promise<RunRetried> {
  return runRetry(ctx.pool, runId(p.id), { actor: ctx.actor, source: ctx.source });
}

/** `runs cancel`. */
export async function runsCancel(ctx: OpsContext, p: { id: number }): Promise<RunCancelled> {
  return runCancel(ctx.pool, runId(p.id), { actor: ctx.actor, source: ctx.source });
}
