/**
 * The chaos tier's history checker. Pure: it takes what the runners wrote (their histories), what
 * the steps themselves wrote (the shared side-effect file), the final step rows and the store's
 * invariant counts, and says what went wrong. Each finding names the step so a failing seed can be
 * followed up with `opschain runs show`.
 */
import type { HistoryRecord } from '../../src/runner/history.js';
import type { InvariantResult } from '../../src/store/invariants.js';

export type { HistoryRecord, InvariantResult };

/** One line a step's command appended: `<run id> <step name> <attempt> <pid>`. */
export interface SideEffect { runId: number; step: string; attempt: number; pid: number }

export interface FinalStep { stepId: number; runId: number; name: string; status: string; attempt: number }

export interface CheckInput {
  histories: HistoryRecord[];
  sideEffects: SideEffect[];
  steps: FinalStep[];
  invariants: InvariantResult[];
  /** Milliseconds from each replica kill (or pause) to the re-offer of its work. */
  reofferMs: number[];
  /** Whether the schedule held a fault that must exercise the fence (a runner or replica frozen past the TTL). */
  expectFencing: boolean;
}

export interface CheckReport {
  steps: number;
  succeeded: number;
  executions: number;
  completions: number;
  /** Steps not succeeded after healing and draining. */
  lost: string[];
  /** A (step, attempt) completed twice, or a step completed successfully by two attempts. */
  duplicatedCompletions: string[];
  /** A later attempt started while an earlier attempt's lease was still live (it completed afterwards). */
  overlappingLeases: string[];
  /** A (step, attempt) whose command ran more than once. */
  doubleExecutions: string[];
  /** A completion accepted with no side effect of its attempt (the effect must be there once). */
  missingEffects: string[];
  /** Calls the store fenced with `lease expired or revoked` (renew, logs or complete of a stale attempt). */
  fencedStaleWrites: number;
  reoffer: { kills: number; maxMs: number | null; p99Ms: number | null; samplesMs: number[] };
  invariants: InvariantResult[];
  violations: string[];
}

const key = (runId: number, step: string, attempt?: number) => (attempt === undefined ? `run ${runId} step ${step}` : `run ${runId} step ${step} attempt ${attempt}`);

export function parseHistory(text: string): HistoryRecord[] {
  const out: HistoryRecord[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as HistoryRecord);
    } catch {
      // A runner killed mid-write leaves a partial last line: nothing to learn from it.
    }
  }
  return out;
}

export function parseSideEffects(text: string): SideEffect[] {
  const out: SideEffect[] = [];
  for (const line of text.split('\n')) {
    const m = line.trim().match(/^(\d+) (\S+) (\d+) (\d+)$/);
    if (m) out.push({ runId: Number(m[1]), step: m[2], attempt: Number(m[3]), pid: Number(m[4]) });
  }
  return out;
}

/** The nearest-rank percentile of a list (null when empty). */
export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

interface Execution { start?: HistoryRecord; finish?: HistoryRecord }

export function check(input: CheckInput): CheckReport {
  // One execution per (runner, step, token): its start and its finish, either possibly missing.
  const executions = new Map<string, Execution>();
  for (const r of input.histories) {
    const k = `${r.runner}/${r.step_id}/${r.token}`;
    const e = executions.get(k) ?? {};
    if (r.ev === 'start') e.start = r;
    else e.finish = r;
    executions.set(k, e);
  }
  const byStep = new Map<number, Execution[]>();
  for (const e of executions.values()) {
    const r = (e.start ?? e.finish)!;
    byStep.set(r.step_id, [...(byStep.get(r.step_id) ?? []), e]);
  }

  const completed = [...executions.values()].filter((e) => e.finish?.outcome === 'completed');
  const duplicatedCompletions: string[] = [];
  const perAttempt = new Map<string, number>();
  for (const e of completed) {
    const f = e.finish!;
    const k = key(f.run_id, f.step, f.attempt);
    perAttempt.set(k, (perAttempt.get(k) ?? 0) + 1);
  }
  for (const [k, n] of perAttempt) if (n > 1) duplicatedCompletions.push(`${k}: completed ${n} times`);
  for (const list of byStep.values()) {
    const ok = list.filter((e) => e.finish?.outcome === 'completed' && e.finish.exit_code === 0).map((e) => e.finish!);
    const attempts = [...new Set(ok.map((f) => f.attempt))];
    if (attempts.length > 1) duplicatedCompletions.push(`${key(ok[0].run_id, ok[0].step)}: succeeded as attempts ${attempts.sort((a, b) => a - b).join(', ')}`);
  }

  // A completion accepted at `finish` proves its lease was live from its start to then: no later
  // attempt of the step may have started inside that interval.
  const overlappingLeases: string[] = [];
  for (const list of byStep.values()) {
    for (const c of list) {
      if (c.finish?.outcome !== 'completed' || !c.start) continue;
      for (const other of list) {
        const s = other.start;
        if (!s || s.attempt <= c.start.attempt) continue;
        if (s.at > c.start.at && s.at < c.finish.at) {
          overlappingLeases.push(`${key(s.run_id, s.step)}: attempt ${s.attempt} started on ${s.runner} while attempt ${c.start.attempt} on ${c.start.runner} still held its lease (completed ${c.finish.at - s.at} ms later)`);
        }
      }
    }
  }

  const effects = new Map<string, number>();
  for (const e of input.sideEffects) {
    const k = key(e.runId, e.step, e.attempt);
    effects.set(k, (effects.get(k) ?? 0) + 1);
  }
  const doubleExecutions = [...effects].filter(([, n]) => n > 1).map(([k, n]) => `${k}: ran ${n} times`);
  const missingEffects = completed
    .filter((e) => e.finish!.exit_code === 0 && !effects.has(key(e.finish!.run_id, e.finish!.step, e.finish!.attempt)))
    .map((e) => `${key(e.finish!.run_id, e.finish!.step, e.finish!.attempt)}: completed on ${e.finish!.runner} without its side effect`);

  const lost = input.steps.filter((s) => s.status !== 'succeeded').map((s) => `${key(s.runId, s.name)} (step ${s.stepId}): ${s.status} at attempt ${s.attempt}`);
  const fencedStaleWrites = [...executions.values()].filter((e) => e.finish?.outcome === 'lost').length;

  const reoffer = { kills: input.reofferMs.length, maxMs: input.reofferMs.length ? Math.max(...input.reofferMs) : null, p99Ms: percentile(input.reofferMs, 99), samplesMs: input.reofferMs };

  const violations: string[] = [];
  const must = (list: string[], what: string) => {
    if (list.length > 0) violations.push(`${list.length} ${what}: ${list.slice(0, 5).join('; ')}${list.length > 5 ? '; …' : ''}`);
  };
  must(lost, 'lost step(s)');
  must(duplicatedCompletions, 'duplicated completion(s)');
  must(overlappingLeases, 'overlapping lease(s)');
  must(doubleExecutions, 'double execution(s)');
  must(missingEffects, 'completion(s) without a side effect');
  for (const inv of input.invariants) {
    if (inv.violations > 0) violations.push(`invariant ${inv.name} (${inv.rule}): ${inv.violations} row(s), e.g. ${JSON.stringify(inv.sample.slice(0, 2))}`);
  }
  if (input.expectFencing && fencedStaleWrites === 0) violations.push('no stale write was fenced: the schedule froze work past its lease TTL, so the fence was never exercised');

  return {
    steps: input.steps.length,
    succeeded: input.steps.filter((s) => s.status === 'succeeded').length,
    executions: executions.size,
    completions: completed.length,
    lost,
    duplicatedCompletions,
    overlappingLeases,
    doubleExecutions,
    missingEffects,
    fencedStaleWrites,
    reoffer,
    invariants: input.invariants,
    violations,
  };
}

/** The report as an operator reads it. */
export function formatReport(r: CheckReport, header: string[] = []): string {
  const ms = (v: number | null) => (v === null ? 'n/a' : `${(v / 1000).toFixed(1)} s`);
  const lines = [
    ...header,
    `steps                 ${r.steps} (${r.succeeded} succeeded)`,
    `executions            ${r.executions} started by runners, ${r.completions} completions accepted`,
    `lost                  ${r.lost.length}`,
    `duplicated completions ${r.duplicatedCompletions.length}`,
    `overlapping leases    ${r.overlappingLeases.length}`,
    `double executions     ${r.doubleExecutions.length}`,
    `missing side effects  ${r.missingEffects.length}`,
    `fenced stale writes   ${r.fencedStaleWrites}`,
    `re-offer after kills  ${r.reoffer.kills} measured, max ${ms(r.reoffer.maxMs)}, p99 ${ms(r.reoffer.p99Ms)}`,
    ...r.invariants.map((i) => `invariant ${i.name.padEnd(30)} ${i.violations === 0 ? 'ok' : `${i.violations} VIOLATION(S)`}`),
    r.violations.length === 0 ? 'verdict               PASS' : `verdict               FAIL\n${r.violations.map((v) => `  - ${v}`).join('\n')}`,
  ];
  return lines.join('\n');
}
