import { oneLine, visibleControls } from '../core/bounds.js';
import { formatDuration } from '../core/duration.js';
import { runTraceId } from '../core/trace-ids.js';
import type { LogLine } from '../store/logs.js';
import type { RunRow, RunStatus, RunSummary, StepRow, StepStatus } from '../store/runs.js';

/** `runs show --json` (and `runs submit --json`): a stable shape, documented in docs/runs.md. */
export interface RunView {
  id: number;
  name: string;
  project: string;
  target: string | null;
  scope: 'step' | 'run';
  priority: number;
  status: RunStatus;
  cause: string | null;
  createdBy: string | null;
  createdAt: string;
  finishedAt: string | null;
  durationMs: number;
  /** The template version (and trigger) it was started from; null for a run submitted as a file. */
  template: { name: string; version: number | null; triggerId: number | null } | null;
  /** The run's OpenTelemetry trace id (the caller's when a traceparent was given at submit). */
  traceId: string;
  steps: StepView[];
}

export interface StepView {
  name: string;
  status: StepStatus;
  attempt: number;
  needs: string[];
  /** Longest chain of needs above this step: 0 for a root. */
  depth: number;
  runnerId: string | null;
  runnerName: string | null;
  exitCode: number | null;
  cause: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  /** For a queued (ready) step: the gate holding it, as `fleet queue` reports it; null otherwise. */
  verdict: { code: string; reason: string; satisfiable: boolean } | null;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/**
 * Depth-first dependency order for a tree: each step right after the last of its needs, its own
 * dependents straight under it, otherwise file order (a → b → c → d for the diamond; a failed
 * build's package right under it, before an unrelated lint).
 */
export function treeOrder<T extends { name: string; needs: string[] }>(steps: T[]): T[] {
  const known = new Set(steps.map((s) => s.name));
  const placed = new Set<string>();
  const out: T[] = [];
  const ready = (s: T) => !placed.has(s.name) && s.needs.every((n) => placed.has(n) || !known.has(n));
  const place = (s: T): void => {
    placed.add(s.name);
    out.push(s);
    for (const d of steps) if (d.needs.includes(s.name) && ready(d)) place(d);
  };
  for (const s of steps) if (ready(s)) place(s);
  // Only a cycle (refused at submit) could leave steps unplaced; show them rather than hide them.
  return [...out, ...steps.filter((s) => !placed.has(s.name))];
}

/**
 * The run and its steps in dependency order; durations of unfinished things run to `now` (the
 * store's clock). `verdicts` (step id → verdict) explains the steps still queued.
 */
export function runView(run: RunRow, steps: StepRow[], now: Date, verdicts?: Map<number, StepView['verdict']>): RunView {
  const depth = new Map<string, number>();
  const ordered = treeOrder(steps);
  for (const s of ordered) depth.set(s.name, Math.max(-1, ...s.needs.map((n) => depth.get(n) ?? -1)) + 1);
  return {
    id: run.id,
    name: run.name,
    project: run.project,
    target: run.target,
    scope: run.scope,
    priority: run.priority,
    status: run.status,
    cause: run.cause,
    createdBy: run.createdBy,
    createdAt: run.createdAt.toISOString(),
    finishedAt: iso(run.finishedAt),
    durationMs: Math.max(0, (run.finishedAt ?? now).getTime() - run.createdAt.getTime()),
    template: run.template ?? null,
    traceId: runTraceId({ id: run.id, traceId: run.trace.traceId }),
    steps: ordered.map((s) => ({
      name: s.name,
      status: s.status,
      attempt: s.attempt,
      needs: s.needs,
      depth: depth.get(s.name) ?? 0,
      runnerId: s.runnerId,
      runnerName: s.runnerName,
      exitCode: s.exitCode,
      cause: s.cause,
      startedAt: iso(s.startedAt),
      finishedAt: iso(s.finishedAt),
      durationMs: s.startedAt ? Math.max(0, (s.finishedAt ?? now).getTime() - s.startedAt.getTime()) : null,
      verdict: verdicts?.get(s.id) ?? null,
    })),
  };
}

export const RUN_TABLE_HEAD = ['step', 'status', 'attempt', 'runner', 'duration', 'cause'];

/**
 * One row per step, indented by depth so the tree reads top-down; a step that needs more than
 * one other says which (the diamond's join).
 */
export function runTreeRows(view: RunView): string[][] {
  return view.steps.map((s) => {
    const indent = s.depth === 0 ? '' : `${'  '.repeat(s.depth - 1)}└─ `;
    const joins = s.needs.length > 1 ? ` (needs ${s.needs.join(', ')})` : '';
    return [
      `${indent}${s.name}${joins}`,
      s.status,
      s.attempt === 0 ? '-' : String(s.attempt),
      s.runnerName ?? s.runnerId ?? '',
      s.durationMs === null ? '' : formatDuration(s.durationMs),
      s.cause ?? (s.exitCode !== null && s.exitCode !== 0 ? `exit code ${s.exitCode}` : (s.verdict?.reason ?? '')),
    ];
  });
}

/**
 * The run's status as people read it: a running run none of whose steps is out on a runner, with
 * some waiting in the queue, is `queued` (it waits for a runner, nothing of it runs). Scripts read
 * the stored status (`--json`), which stays `running`.
 */
export function runStatusText(status: RunStatus, steps: Array<{ status: StepStatus }> | Partial<Record<StepStatus, number>>): string {
  if (status !== 'running') return status;
  const has = (st: StepStatus) => (Array.isArray(steps) ? steps.some((s) => s.status === st) : (steps[st] ?? 0) > 0);
  return !has('running') && has('ready') ? 'queued' : status;
}

export function runHeadline(view: RunView): string {
  const where = [view.project, view.target].filter(Boolean).join(' ');
  const t = view.template;
  const from = t ? `, from template ${t.name}${t.version !== null ? ` v${t.version}` : ''}${t.triggerId !== null ? ` by trigger ${t.triggerId}` : ''}` : '';
  return `run ${view.id} ${view.name} (${where}${from}): ${runStatusText(view.status, view.steps)} after ${formatDuration(view.durationMs)}${view.cause ? ` — ${view.cause}` : ''}`;
}

/** The line under the headline naming the run's trace, to look it up in a tracing backend. */
export function runTraceLine(view: RunView): string {
  return `trace ${view.traceId}`;
}

/** `runs list --json` item. */
export interface RunListItem {
  id: number;
  name: string;
  project: string;
  target: string | null;
  status: RunStatus;
  cause: string | null;
  createdBy: string | null;
  createdAt: string;
  finishedAt: string | null;
  steps: RunSummary['steps'];
}

export function runListItem(r: RunSummary): RunListItem {
  return { ...r, createdAt: r.createdAt.toISOString(), finishedAt: iso(r.finishedAt) };
}

export const RUN_LIST_HEAD = ['id', 'name', 'project', 'status', 'steps', 'created', 'cause'];

export function runListRows(items: RunListItem[]): string[][] {
  return items.map((r) => {
    const done = r.steps.succeeded;
    const bad = r.steps.failed + r.steps.system_error;
    return [String(r.id), r.name, r.project, runStatusText(r.status, r.steps), `${done}/${r.steps.total}${bad ? ` (${bad} failed)` : ''}`, r.createdAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'), r.cause ?? ''];
  });
}

/** What changed in a step between two looks, as one progress line (none when nothing did). */
export function stepProgressLine(before: StepView | undefined, after: StepView): string | null {
  if (before && before.status === after.status && before.attempt === after.attempt) return null;
  if (!before && (after.status === 'pending' || after.status === 'ready')) return null;
  switch (after.status) {
    case 'pending':
      return null;
    case 'ready':
      return after.attempt > 1 ? `${after.name}: queued as attempt ${after.attempt}` : `${after.name}: queued`;
    case 'running':
      return `${after.name}: running on ${after.runnerName ?? after.runnerId ?? 'a runner'} (attempt ${after.attempt})`;
    case 'succeeded':
      return `${after.name}: succeeded${after.durationMs !== null ? ` in ${formatDuration(after.durationMs)}` : ''}`;
    case 'failed':
      return `${after.name}: failed${after.cause ? ` (${after.cause})` : after.exitCode !== null ? ` with exit code ${after.exitCode}` : ''}`;
    default:
      // A cause that already names the status ("skipped: step boom failed") is said once.
      if (after.cause?.startsWith(`${after.status}:`)) return `${after.name}: ${after.cause}`;
      return `${after.name}: ${after.status}${after.cause ? ` (${after.cause})` : ''}`;
  }
}

/**
 * A finished attempt's end, as `runs logs` prints it after the step's last line (human output
 * only; the lines themselves, and `--json`, are unchanged): `attempt 1 ended: failed, exit 1 (3.2s)`.
 * Null for a step that has not ended or never started (pending, queued, skipped before it ran).
 */
export function stepEndText(s: Pick<StepView, 'status' | 'attempt' | 'exitCode' | 'cause' | 'durationMs' | 'startedAt' | 'finishedAt'>): string | null {
  if (!s.finishedAt || !s.startedAt || s.attempt < 1) return null;
  if (s.status === 'pending' || s.status === 'ready' || s.status === 'running') return null;
  const exit = s.exitCode !== null ? `, exit ${s.exitCode}` : '';
  const cause = s.status !== 'succeeded' && s.status !== 'failed' && s.cause ? `: ${s.cause}` : '';
  const took = s.durationMs !== null ? ` (${formatDuration(s.durationMs)})` : '';
  return `attempt ${s.attempt} ended: ${s.status}${exit}${cause}${took}`;
}

/** `runs logs` item. */
export interface LogLineView { id: number; step: string; attempt: number; stream: LogLine['stream']; text: string; at: string }

export function logLineView(l: LogLine): LogLineView {
  return { id: l.id, step: l.step, attempt: l.attempt, stream: l.stream, text: l.text, at: l.at.toISOString() };
}

/**
 * Human log output: each text line prefixed by its step; opschain's own lines marked with `#` and
 * always one line each. With `terminal` (stdout is a TTY), control characters and escape sequences
 * in step output are shown as `\x1b`-style text rather than obeyed.
 */
export function logLineText(l: LogLineView, width: number, opts: { terminal?: boolean } = {}): string[] {
  const tag = l.step.padEnd(width);
  const mark = l.stream === 'system' ? '#' : l.stream === 'stderr' ? '!' : '|';
  const body = l.text.endsWith('\n') ? l.text.slice(0, -1) : l.text;
  const lines = l.stream === 'system' ? [oneLine(body)] : body.split('\n');
  return lines.map((t) => `${tag} ${mark} ${opts.terminal ? visibleControls(t) : t}`);
}
