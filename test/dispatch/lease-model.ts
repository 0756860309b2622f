/**
 * A model of the lease lifecycle: what the store must hold after each call of the dispatch plane's
 * public operations (deliver, ack, renew, complete, release, expiry sweep, reclaim, retry, cancel).
 * Pure: the model-based test applies the same operations to the real store and to this model and
 * compares the two after every command; for two operations raced against each other, the store
 * must equal one of the two serial orders.
 */

export type StepStatus = 'pending' | 'ready' | 'running' | 'succeeded' | 'failed' | 'system_error' | 'skipped' | 'cancelled';
export type RunStatus = 'running' | 'succeeded' | 'failed' | 'error' | 'cancelled';

export interface MStep { id: number; runId: number; status: StepStatus; attempt: number }
export interface MLease {
  stepId: number;
  attempt: number;
  token: string;
  holder: string;
  runnerId: string;
  acked: boolean;
  executing: boolean;
  /** Its ack deadline was moved into the past. */
  ackOverdue: boolean;
  /** Its expiry was moved into the past (cleared by an ack or a renewal). */
  expired: boolean;
}
export interface MRun { id: number; status: RunStatus; steps: number[] }
export interface Issued { stepId: number; attempt: number; token: string; runnerId: string }

export interface Model {
  runs: Record<number, MRun>;
  steps: Record<number, MStep>;
  /** step id → attempt on queue_ready. */
  queue: Record<number, number>;
  leases: Record<number, MLease>;
  /** `step/attempt` → the completing token, or null for an expiry. */
  done: Record<string, string | null>;
  /** Every token ever handed to a runner, in order. */
  issued: Issued[];
  halted: boolean;
}

export const emptyModel = (): Model => ({ runs: {}, steps: {}, queue: {}, leases: {}, done: {}, issued: [], halted: false });
export const cloneModel = (m: Model): Model => structuredClone(m);

/** A concrete operation, resolved against the model before it runs (both serial orders see the same one). */
export type Op =
  | { kind: 'ack' | 'renew' | 'release'; replica: string; runnerId: string; stepId: number; token: string }
  | { kind: 'complete'; replica: string; runnerId: string; stepId: number; token: string; exitCode: number }
  | { kind: 'sweep'; replica: string }
  | { kind: 'reclaim'; dead: string; by: string }
  | { kind: 'cancel'; runId: number }
  | { kind: 'retry'; runId: number }
  | { kind: 'deliver'; replica: string; runnerId: string };

/** What an operation answered, normalised so the store's answer and the model's compare. */
export type Result =
  | { kind: 'item'; verdict: 'ok' | 'fenced' }
  | { kind: 'sweep'; requeued: number; lost: number; halted: boolean }
  | { kind: 'reclaim'; stepIds: number[] }
  | { kind: 'cancel'; cancelled: boolean; revoked: number }
  | { kind: 'retry'; entered: number }
  | { kind: 'deliver'; offers: Array<{ stepId: number; attempt: number; token: string }> };

/** The model's expectation: an item verdict may be either (a repeat by another runner), everything else exact. */
export type Expected = Result | { kind: 'item'; verdict: 'either' };

const OPEN: StepStatus[] = ['pending', 'ready', 'running'];

function rollUp(m: Model, runId: number): void {
  const run = m.runs[runId];
  if (run.status !== 'running') return;
  const steps = run.steps.map((id) => m.steps[id]);
  if (steps.some((s) => OPEN.includes(s.status))) return;
  if (steps.some((s) => s.status === 'system_error')) run.status = 'error';
  else if (steps.some((s) => s.status === 'failed')) run.status = 'failed';
  else if (steps.some((s) => s.status === 'cancelled')) run.status = 'cancelled';
  else run.status = 'succeeded';
}

function finishStep(m: Model, stepId: number, attempt: number, status: 'succeeded' | 'failed' | 'system_error'): void {
  const s = m.steps[stepId];
  if (s.attempt === attempt && (s.status === 'ready' || s.status === 'running')) s.status = status;
  rollUp(m, s.runId);
}

/** A lease back on the queue as the next attempt (release, un-acked offer, reclaimed exposed claim). */
function requeueNext(m: Model, lease: MLease): void {
  delete m.leases[lease.stepId];
  if (m.queue[lease.stepId] === undefined) m.queue[lease.stepId] = lease.attempt + 1;
  const s = m.steps[lease.stepId];
  if (s.attempt === lease.attempt && (s.status === 'ready' || s.status === 'running')) {
    s.attempt = lease.attempt + 1;
    s.status = 'ready';
  }
}

const live = (m: Model, op: { stepId: number; token: string; runnerId: string }): MLease | undefined => {
  const l = m.leases[op.stepId];
  return l && l.token === op.token && l.runnerId === op.runnerId ? l : undefined;
};

/**
 * Applies a deterministic operation to the model and returns what the store must answer. A
 * delivery is the one choice the store makes (which ready step): `observed` is checked against
 * the model (a problem string when it cannot be right) and then adopted.
 */
export function apply(m: Model, op: Op, observed?: Result): Expected | { problem: string } {
  switch (op.kind) {
    case 'ack':
    case 'renew': {
      const l = live(m, op);
      if (!l) return { kind: 'item', verdict: 'fenced' };
      l.acked = true;
      l.expired = false;
      if (op.kind === 'renew') l.executing = true;
      return { kind: 'item', verdict: 'ok' };
    }
    case 'complete': {
      const l = live(m, op);
      if (l) {
        delete m.leases[op.stepId];
        m.done[`${l.stepId}/${l.attempt}`] = l.token;
        finishStep(m, l.stepId, l.attempt, op.exitCode === 0 ? 'succeeded' : 'failed');
        return { kind: 'item', verdict: 'ok' };
      }
      const repeat = Object.entries(m.done).some(([k, t]) => t === op.token && Number(k.split('/')[0]) === op.stepId);
      if (!repeat) return { kind: 'item', verdict: 'fenced' };
      // A repeat of a recorded completion changes nothing; by the runner that made it, it answers ok.
      const by = m.issued.find((i) => i.token === op.token)?.runnerId;
      return { kind: 'item', verdict: by === op.runnerId ? 'ok' : 'either' };
    }
    case 'release': {
      const l = live(m, op);
      if (!l) return { kind: 'item', verdict: 'fenced' };
      requeueNext(m, l);
      return { kind: 'item', verdict: 'ok' };
    }
    case 'sweep': {
      if (m.halted) return { kind: 'sweep', requeued: 0, lost: 0, halted: true };
      const unacked = Object.values(m.leases).filter((l) => !l.acked && l.ackOverdue);
      for (const l of unacked) requeueNext(m, l);
      const lost = Object.values(m.leases).filter((l) => l.expired);
      for (const l of lost) {
        delete m.leases[l.stepId];
        m.done[`${l.stepId}/${l.attempt}`] = null;
        finishStep(m, l.stepId, l.attempt, 'system_error');
      }
      return { kind: 'sweep', requeued: unacked.length, lost: lost.length, halted: false };
    }
    case 'reclaim': {
      const taken = Object.values(m.leases).filter((l) => l.holder === op.dead && !l.acked && !l.executing);
      for (const l of taken) requeueNext(m, l);
      return { kind: 'reclaim', stepIds: taken.map((l) => l.stepId).sort((a, b) => a - b) };
    }
    case 'cancel': {
      const run = m.runs[op.runId];
      if (run.status !== 'running') return { kind: 'cancel', cancelled: false, revoked: 0 };
      let revoked = 0;
      for (const id of run.steps) {
        if (m.leases[id]) {
          delete m.leases[id];
          revoked++;
        }
        delete m.queue[id];
        if (OPEN.includes(m.steps[id].status)) m.steps[id].status = 'cancelled';
      }
      run.status = 'cancelled';
      return { kind: 'cancel', cancelled: true, revoked };
    }
    case 'retry': {
      const run = m.runs[op.runId];
      const again = run.steps.map((id) => m.steps[id]).filter((s) => ['failed', 'system_error', 'cancelled', 'skipped'].includes(s.status));
      if (!again.some((s) => s.status !== 'skipped')) return { kind: 'retry', entered: 0 };
      for (const s of again) {
        // Failed and lost steps re-enter as the next attempt; cancelled ones reopen and, needing nothing, are released as the next attempt.
        s.status = 'ready';
        s.attempt += 1;
        if (m.leases[s.id] === undefined && m.done[`${s.id}/${s.attempt}`] === undefined && m.queue[s.id] === undefined) m.queue[s.id] = s.attempt;
      }
      run.status = 'running';
      return { kind: 'retry', entered: again.length };
    }
    case 'deliver': {
      const offers = observed?.kind === 'deliver' ? observed.offers : [];
      const ready = Object.keys(m.queue).length;
      const want = m.halted ? 0 : Math.min(1, ready);
      if (offers.length !== want) return { problem: `${op.replica} delivered ${offers.length} offer(s) with ${ready} ready${m.halted ? ' during a halt' : ''}; expected ${want}` };
      for (const o of offers) {
        if (m.queue[o.stepId] !== o.attempt) return { problem: `${op.replica} delivered step ${o.stepId} attempt ${o.attempt}, which is not ready (queue has ${m.queue[o.stepId] ?? 'nothing'})` };
        if (m.issued.some((i) => i.token === o.token)) return { problem: `token ${o.token} handed out twice` };
        delete m.queue[o.stepId];
        m.leases[o.stepId] = { stepId: o.stepId, attempt: o.attempt, token: o.token, holder: op.replica, runnerId: op.runnerId, acked: false, executing: false, ackOverdue: false, expired: false };
        const s = m.steps[o.stepId];
        if (s.attempt === o.attempt && (s.status === 'ready' || s.status === 'running')) s.status = 'running';
        m.issued.push({ stepId: o.stepId, attempt: o.attempt, token: o.token, runnerId: op.runnerId });
      }
      return observed!;
    }
  }
}

export function matches(expected: Expected, actual: Result): boolean {
  if (expected.kind === 'item' && actual.kind === 'item') return expected.verdict === 'either' || expected.verdict === actual.verdict;
  return JSON.stringify(expected) === JSON.stringify(actual);
}

/** The part of the store the model predicts, in a canonical order. */
export interface Snapshot {
  queue: Array<[number, number]>;
  leases: Array<[number, number, string, string, string, boolean, boolean]>;
  steps: Array<[number, string, number]>;
  runs: Array<[number, string]>;
  done: Array<[number, number, string | null]>;
}

export function snapshotOf(m: Model): Snapshot {
  const byFirst = <T extends unknown[]>(a: T[]) => a.sort((x, y) => (x[0] as number) - (y[0] as number) || (x[1] as number) - (y[1] as number));
  return {
    queue: byFirst(Object.entries(m.queue).map(([s, a]) => [Number(s), a] as [number, number])),
    leases: byFirst(Object.values(m.leases).map((l) => [l.stepId, l.attempt, l.token, l.holder, l.runnerId, l.acked, l.executing] as [number, number, string, string, string, boolean, boolean])),
    steps: byFirst(Object.values(m.steps).map((s) => [s.id, s.status, s.attempt] as [number, string, number])),
    runs: byFirst(Object.values(m.runs).map((r) => [r.id, r.status] as [number, string])),
    done: byFirst(Object.entries(m.done).map(([k, t]) => [Number(k.split('/')[0]), Number(k.split('/')[1]), t] as [number, number, string | null])),
  };
}
