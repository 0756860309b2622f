import type { EventEmitter } from 'node:events';
import { cronNext, cronTicks } from '../core/cron.js';
import { emit as emitEvent } from '../events.js';
import { oneLine, storableText } from '../core/bounds.js';
import { parseTraceParent } from '../core/trace-ids.js';
import { payloadSets } from '../core/triggers.js';
import type { Logger } from '../logger.js';
import { runFileLoad, RunFileInvalid } from '../orchestrator/runfile.js';
import { runSubmitIn } from '../orchestrator/submit.js';
import { isRowFault, withSavepoint, withTransaction, type Pool, type PoolClient } from '../store/pool.js';
import {
  deliveriesClaim,
  deliveriesOfDisabled,
  deliveryForRun,
  launchDeferred,
  launchesPending,
  launchFired,
  launchLock,
  launchProbe,
  launchSettled,
  missedDecide,
  missedLatest,
  missedLock,
  oneShotsClaim,
  scheduleAdvance,
  schedulesDueLock,
  templateLatest,
  templateLoad,
  templateLock,
  ticksInsert,
  triggerEnabledSet,
  runTriggerSet,
  type ClaimedDelivery,
  type ClaimedOneShot,
  type LaunchProbe,
  type TickInsert,
} from '../store/triggers.js';

/** Built-in cadences of the launch loop (ADR-0056). */
export interface LaunchTiming {
  /** Each source claims at most this many rows per pass. */
  batch: number;
  /** The longest sleep between probes: a row written on any replica is seen within it. */
  probeIntervalMs: number;
  /** A deferred launch is retried this long after (sooner when a run of its template finishes). */
  discoveryIntervalMs: number;
  /** Most ticks of one schedule recorded in one pass when it is far behind. */
  maxTicksPerSchedule: number;
}

export const DEFAULT_LAUNCH_TIMING: LaunchTiming = { batch: 32, probeIntervalMs: 2_000, discoveryIntervalMs: 5 * 60_000, maxTicksPerSchedule: 1_000 };

interface Hold { template: string; retryAt: number; reason: string }

/**
 * Rows that stay due but cannot go yet, kept in memory with a retry time and left out of the
 * probe until then: launches deferred by a cap, a ceiling or a queued overlap, and deliveries
 * of a disabled webhook (settled by housekeeping). A finishing run of a template releases that
 * template's launches; a wake (`admin reconcile`) releases everything.
 */
export class DeferredLaunches {
  readonly ticks = new Map<number, Hold>();
  readonly deliveries = new Map<number, number>();

  releaseTemplate(template: string): number {
    let n = 0;
    for (const [id, h] of this.ticks) {
      if (h.template !== template) continue;
      this.ticks.delete(id);
      n++;
    }
    return n;
  }

  releaseAll(): number {
    const n = this.ticks.size + this.deliveries.size;
    this.ticks.clear();
    this.deliveries.clear();
    return n;
  }

  /** Drops the deferrals whose retry time has come; returns how many. */
  expire(nowMs: number): number {
    let n = 0;
    for (const [id, h] of this.ticks) {
      if (h.retryAt > nowMs) continue;
      this.ticks.delete(id);
      n++;
    }
    for (const [id, at] of this.deliveries) {
      if (at > nowMs) continue;
      this.deliveries.delete(id);
      n++;
    }
    return n;
  }

  earliestRetry(): number | undefined {
    let min: number | undefined;
    for (const h of this.ticks.values()) min = min === undefined ? h.retryAt : Math.min(min, h.retryAt);
    for (const at of this.deliveries.values()) min = min === undefined ? at : Math.min(min, at);
    return min;
  }
}

export interface LaunchDeps {
  pool: Pool;
  log: Logger;
  deferred: DeferredLaunches;
  timing: LaunchTiming;
  /** Checked at the start of every pass: only the leader fires. */
  isLeader: () => boolean;
  events?: EventEmitter;
}

export interface LaunchFiring { tickId: number; triggerId: number; runId: number; template: string; version: number }

/** What one pass did; the payload of `launch:pass`. */
export interface LaunchReport {
  leader: boolean;
  now: Date | null;
  halted: boolean;
  /** How long the loop sleeps before the next pass (0: pass again at once). */
  sleepMs: number;
  /** The earliest due time the probe saw (after this pass's own work, the next pass re-probes). */
  nextDueAt: Date | null;
  claimed: { oneShots: number; deliveries: number; schedules: number; missed: number; launches: number };
  fired: LaunchFiring[];
  deferred: Array<{ tickId: number; reason: string }>;
  skipped: number[];
  failed: Array<{ tickId: number; reason: string }>;
  /** Ticks recorded as missed (halt, or a schedule behind by more than one tick). */
  missed: number;
  /** A source hit its per-pass cap: another pass follows at once. */
  capped: boolean;
}

const earliest = (dates: Array<Date | null | undefined>): Date | null => {
  let min: Date | null = null;
  for (const d of dates) if (d && (!min || d.getTime() < min.getTime())) min = d;
  return min;
};

const due = (d: Date | null, now: Date) => d !== null && d.getTime() <= now.getTime();

/**
 * One pass of the launch loop, on the leader:
 *
 *   probe → (halted: record due schedule ticks as missed, fire nothing)
 *         → catch-up of missed ticks → one-shots → webhook deliveries → schedules → launches
 *
 * The probe asks for the earliest due time of each source (one partial-index lookup each). Each
 * source claims at most `batch` rows with a compare-and-set, so two loops never fire one row
 * twice; claimed rows become ledger ticks, and a pending tick is a launch: the launch stage locks
 * it, applies the trigger's overlap policy and the template's caps (deferred launches are kept in
 * memory), creates the run and marks the tick fired, all in one transaction. A row that fails for
 * its own data (a value the store refuses, a definition that cannot be read) becomes a failed tick
 * with the reason and the pass goes on with the others; only a failure of the store fails the pass.
 *
 * `now` is for tests (a fixed time for every comparison, in SQL too); production passes nothing
 * and the database's clock decides. The returned sleepMs is 0 when the pass did work or a source
 * was capped, else the time to the earliest due row (or deferred row's retry), at most the probe interval.
 */
export async function launchOnce(deps: LaunchDeps, now?: Date): Promise<LaunchReport> {
  const { timing, deferred } = deps;
  const report: LaunchReport = {
    leader: deps.isLeader(),
    now: null,
    halted: false,
    sleepMs: timing.probeIntervalMs,
    nextDueAt: null,
    claimed: { oneShots: 0, deliveries: 0, schedules: 0, missed: 0, launches: 0 },
    fired: [],
    deferred: [],
    skipped: [],
    failed: [],
    missed: 0,
    capped: false,
  };
  if (!report.leader) return emit(deps, report);

  let probe = await launchProbe(deps.pool, { now, deferredTicks: [...deferred.ticks.keys()], deferredDeliveries: [...deferred.deliveries.keys()] });
  const released = deferred.expire(probe.now.getTime());
  if (released > 0) probe = await launchProbe(deps.pool, { now, deferredTicks: [...deferred.ticks.keys()], deferredDeliveries: [...deferred.deliveries.keys()] });
  report.now = probe.now;
  report.halted = probe.halted;
  const at = probe.now;
  const tNow = now;

  let progress = false;
  if (probe.halted) {
    // Nothing fires during a halt; schedule ticks that come due are recorded as missed.
    if (due(probe.schedule, at)) progress = (await schedulesPass(deps, report, at, tNow, true)) || progress;
  } else {
    if (due(probe.missed, at)) progress = (await catchUpPass(deps, report, tNow)) || progress;
    if (due(probe.oneShot, at)) progress = (await oneShotsPass(deps, report, tNow)) || progress;
    if (due(probe.delivery, at)) progress = (await deliveriesPass(deps, report, at, tNow)) || progress;
    if (due(probe.schedule, at)) progress = (await schedulesPass(deps, report, at, tNow, false)) || progress;
    if (progress || due(probe.launch, at)) progress = (await launchesPass(deps, report, at, tNow)) || progress;
  }

  report.nextDueAt = nextDue(probe);
  if (report.capped || progress) report.sleepMs = 0;
  else {
    const retry = deferred.earliestRetry();
    const candidates = [report.nextDueAt?.getTime(), retry].filter((v): v is number => v !== undefined);
    const wake = candidates.length ? Math.min(...candidates) : Infinity;
    // Something due that this pass could not take (another loop holds it locked): look again shortly.
    report.sleepMs = Math.max(wake <= at.getTime() ? 50 : 0, Math.min(timing.probeIntervalMs, wake - at.getTime()));
  }
  return emit(deps, report);
}

function nextDue(probe: LaunchProbe): Date | null {
  if (probe.halted) return probe.schedule;
  return earliest([probe.oneShot, probe.schedule, probe.delivery, probe.launch, probe.missed]);
}

function emit(deps: LaunchDeps, report: LaunchReport): LaunchReport {
  if (deps.events) emitEvent(deps.events, 'launch:pass', report);
  return report;
}

interface Failure { tickId: number; reason: string }
type TickBase = Omit<TickInsert, 'outcome' | 'sets' | 'detail'>;

/** A row's failure as one line for its tick: the error's message and SQLSTATE, storable, bounded. */
function faultReason(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown } | null;
  const message = typeof e?.message === 'string' && e.message ? e.message : String(err);
  const code = typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? ` (SQLSTATE ${e.code})` : '';
  return storableText(oneLine(message).slice(0, 1000)) + code;
}

/**
 * A stage's writes for each claimed row, inside the stage's transaction: all rows under one
 * savepoint, and only when that fails for some row's own data, each row under its own, so the
 * rows that can be recorded are and the faulty ones come back with their reasons (one bad row
 * never holds the rest). A failure that is not a row's (the store unreachable) ends the pass.
 */
async function eachRow<R, T>(client: PoolClient, rows: R[], write: (row: R) => Promise<T>): Promise<{ ok: Array<{ row: R; value: T }>; faults: Array<{ row: R; reason: string }> }> {
  const guarded = async <V>(fn: () => Promise<V>): Promise<{ value: V } | { reason: string }> => {
    try {
      return { value: await withSavepoint(client, fn) };
    } catch (err) {
      if (!isRowFault(err)) throw err;
      return { reason: faultReason(err) };
    }
  };
  const ok: Array<{ row: R; value: T }> = [];
  const faults: Array<{ row: R; reason: string }> = [];
  if (rows.length === 0) return { ok, faults };
  const whole = await guarded(async () => {
    const out: Array<{ row: R; value: T }> = [];
    for (const row of rows) out.push({ row, value: await write(row) });
    return out;
  });
  if ('value' in whole) return { ok: whole.value, faults };
  if (rows.length === 1) return { ok, faults: [{ row: rows[0], reason: whole.reason }] };
  for (const row of rows) {
    const one = await guarded(() => write(row));
    if ('value' in one) ok.push({ row, value: one.value });
    else faults.push({ row, reason: one.reason });
  }
  return { ok, faults };
}

/** The failed tick of a claimed row that could not be recorded as it was: no values, the reason. */
async function faultRecorded(client: PoolClient, tick: TickBase, reason: string, now: Date | undefined): Promise<Failure> {
  const [t] = await ticksInsert(client, [{ ...tick, outcome: 'failed', sets: [], detail: reason }], now);
  return { tickId: t.id, reason };
}

function failuresReport(deps: LaunchDeps, report: LaunchReport, failed: Failure[]): void {
  for (const f of failed) deps.log.warn({ tick: f.tickId, reason: f.reason }, 'trigger row failed');
  report.failed.push(...failed);
}

async function oneShotsPass(deps: LaunchDeps, report: LaunchReport, now: Date | undefined): Promise<boolean> {
  const { n, failed } = await withTransaction(deps.pool, async (client) => {
    const claimed = await oneShotsClaim(client, { now, limit: deps.timing.batch });
    const tick = (o: ClaimedOneShot): TickBase => ({ triggerId: o.id, kind: 'once', template: o.template, dueAt: o.fireAt, overlap: 'allow' });
    const { faults } = await eachRow(client, claimed, (o) => ticksInsert(client, [{ ...tick(o), outcome: 'pending', sets: o.sets }], now));
    const failed: Failure[] = [];
    for (const f of faults) failed.push(await faultRecorded(client, tick(f.row), f.reason, now));
    return { n: claimed.length, failed };
  });
  failuresReport(deps, report, failed);
  report.claimed.oneShots += n;
  if (n >= deps.timing.batch) report.capped = true;
  return n > 0;
}

async function deliveriesPass(deps: LaunchDeps, report: LaunchReport, at: Date, now: Date | undefined): Promise<boolean> {
  const { n, failed } = await withTransaction(deps.pool, async (client) => {
    const claimed = await deliveriesClaim(client, { now, limit: deps.timing.batch });
    const tick = (d: ClaimedDelivery): TickBase => ({ triggerId: d.webhookId, kind: 'webhook', template: d.template, dueAt: d.receivedAt, overlap: 'allow', deliveryId: d.id });
    const { faults } = await eachRow(client, claimed, (d) => {
      const mapped = payloadSets(d.payload, d.maps);
      const row: TickInsert = mapped.problems.length
        ? { ...tick(d), outcome: 'failed', sets: d.sets, detail: mapped.problems.join('; ') }
        : { ...tick(d), outcome: 'pending', sets: [...d.sets, ...mapped.sets] };
      return ticksInsert(client, [row], now);
    });
    const failed: Failure[] = [];
    for (const f of faults) failed.push(await faultRecorded(client, tick(f.row), f.reason, now));
    return { n: claimed.length, failed };
  });
  failuresReport(deps, report, failed);
  report.claimed.deliveries += n;
  let deferredNow = 0;
  if (n >= deps.timing.batch) report.capped = true;
  else {
    // What is left due belongs to disabled webhooks: defer it until housekeeping settles it.
    for (const id of await deliveriesOfDisabled(deps.pool, { now, limit: 1000 })) {
      deps.deferred.deliveries.set(id, at.getTime() + deps.timing.discoveryIntervalMs);
      deferredNow++;
    }
  }
  // Newly deferred rows change what the probe sees: look again at once rather than after a short wait.
  return n > 0 || deferredNow > 0;
}

async function schedulesPass(deps: LaunchDeps, report: LaunchReport, at: Date, now: Date | undefined, halted: boolean): Promise<boolean> {
  const { n, missed, failed } = await withTransaction(deps.pool, async (client) => {
    const dueRows = await schedulesDueLock(client, { now, limit: deps.timing.batch });
    const { ok, faults } = await eachRow(client, dueRows, async (s) => {
      const { ticks, more } = cronTicks(s.cron, s.tz, s.nextDueAt, at, deps.timing.maxTicksPerSchedule);
      if (ticks.length === 0) ticks.push(s.nextDueAt);
      const base = { triggerId: s.id, kind: 'schedule' as const, template: s.template, overlap: s.overlap, sets: s.sets };
      const rows: TickInsert[] = ticks.map((t, i) => {
        const last = i === ticks.length - 1;
        const note = more && last ? `; more ticks up to ${at.toISOString()} were not listed` : '';
        if (halted) return { ...base, dueAt: t, outcome: 'missed', missed: true, detail: `came due during a platform halt${note}` };
        if (last) return { ...base, dueAt: t, outcome: 'pending' };
        // Behind by more than one tick (no leader was firing): the catch-up policy decides now.
        const detail = 'came due while no leader was firing';
        if (s.catchUp === 'all') return { ...base, dueAt: t, outcome: 'pending', missed: true, catchUp: 'all: fired late', detail };
        return { ...base, dueAt: t, outcome: 'missed', missed: true, catchUp: s.catchUp === 'last' ? 'last: a later tick fired instead' : 'none: not fired', detail };
      });
      const recorded = await ticksInsert(client, rows, now);
      await scheduleAdvance(client, { id: s.id, from: s.nextDueAt, to: cronNext(s.cron, s.tz, at) });
      return recorded.filter((r) => r.outcome === 'missed').length;
    });
    const failed: Failure[] = [];
    for (const { row: s, reason } of faults) {
      // The schedule moves on to its next tick; one whose next tick cannot be computed would be
      // due on every pass, so it is disabled, and its failed tick says so.
      let next: Date | undefined;
      try {
        next = cronNext(s.cron, s.tz, at);
      } catch {
        next = undefined;
      }
      if (next) await scheduleAdvance(client, { id: s.id, from: s.nextDueAt, to: next });
      else await triggerEnabledSet(client, { id: s.id, kind: 'schedule', enabled: false });
      const detail = next ? reason : `${reason}; the schedule was disabled (its next tick cannot be computed)`;
      failed.push(await faultRecorded(client, { triggerId: s.id, kind: 'schedule', template: s.template, dueAt: s.nextDueAt, overlap: s.overlap }, detail, now));
    }
    return { n: dueRows.length, missed: ok.reduce((sum, r) => sum + r.value, 0), failed };
  });
  failuresReport(deps, report, failed);
  report.missed += missed;
  report.claimed.schedules += n;
  if (n >= deps.timing.batch) report.capped = true;
  return n > 0;
}

/** After a halt: each schedule's missed ticks are relaunched (`all`), the latest one is (`last`), or none are. */
async function catchUpPass(deps: LaunchDeps, report: LaunchReport, now: Date | undefined): Promise<boolean> {
  const n = await withTransaction(deps.pool, async (client) => {
    const missed = await missedLock(client, { limit: deps.timing.batch });
    const latest = await missedLatest(client, [...new Set(missed.filter((m) => m.policy === 'last').map((m) => m.triggerId))]);
    for (const m of missed) {
      if (m.policy === 'all') await missedDecide(client, { id: m.id, relaunch: true, catchUp: 'all: fired on resume', now });
      else if (m.policy === 'last' && latest.get(m.triggerId) === m.id) await missedDecide(client, { id: m.id, relaunch: true, catchUp: 'last: fired on resume', now });
      else if (m.policy === 'last') await missedDecide(client, { id: m.id, relaunch: false, catchUp: 'last: a later tick fired instead', now });
      else await missedDecide(client, { id: m.id, relaunch: false, catchUp: m.policy === null ? 'none: the schedule is gone' : 'none: not fired', now });
    }
    return missed.length;
  });
  report.claimed.missed += n;
  if (n >= deps.timing.batch) report.capped = true;
  return n > 0;
}

async function launchesPass(deps: LaunchDeps, report: LaunchReport, at: Date, now: Date | undefined): Promise<boolean> {
  const pending = await launchesPending(deps.pool, { now, limit: deps.timing.batch, exclude: [...deps.deferred.ticks.keys()] });
  report.claimed.launches += pending.length;
  if (pending.length >= deps.timing.batch) report.capped = true;
  let progress = false;
  for (const candidate of pending) {
    const result = await launchOne(deps, candidate.id, now);
    if (result.kind === 'fired') {
      report.fired.push(result.firing);
      progress = true;
    } else if (result.kind === 'deferred') {
      deps.deferred.ticks.set(candidate.id, { template: result.template, retryAt: at.getTime() + deps.timing.discoveryIntervalMs, reason: result.reason });
      report.deferred.push({ tickId: candidate.id, reason: result.reason });
      progress = true;
    } else if (result.kind === 'skipped') {
      report.skipped.push(candidate.id);
      progress = true;
    } else if (result.kind === 'failed') {
      report.failed.push({ tickId: candidate.id, reason: result.reason });
      progress = true;
    }
  }
  if (report.fired.length) deps.log.info({ fired: report.fired.map((f) => ({ trigger: f.triggerId, run: f.runId })) }, `launched ${report.fired.length} run(s) from triggers`);
  return progress;
}

type LaunchResult =
  | { kind: 'gone' }
  | { kind: 'skipped' }
  | { kind: 'failed'; reason: string }
  | { kind: 'deferred'; reason: string; template: string }
  | { kind: 'fired'; firing: LaunchFiring };

/**
 * One launch, in its own transaction. When creating the run fails for the launch's own data (a
 * stored definition the parser or the store refuses), the launch is marked failed with the reason
 * in a second transaction, so it is not retried on every pass ahead of the launches behind it.
 */
async function launchOne(deps: LaunchDeps, id: number, now: Date | undefined): Promise<LaunchResult> {
  try {
    return await withTransaction(deps.pool, async (client): Promise<LaunchResult> => {
      const tick = await launchLock(client, id);
      if (!tick) return { kind: 'gone' };
      const template = await templateLatest(client, tick.template);
      if (!template) {
        await launchSettled(client, { id: tick.id, outcome: 'failed', detail: `template ${tick.template} no longer exists` });
        return { kind: 'failed', reason: `template ${tick.template} no longer exists` };
      }
      await templateLock(client, template.name);
      const load = await templateLoad(client, { template: template.name, triggerId: tick.triggerId, tickId: tick.id, now });
      const busy = load.triggerRunning.length > 0 ? `run ${load.triggerRunning[0]} of this trigger is still running` : load.olderPending !== null ? `launch ${load.olderPending} of this trigger is still waiting` : undefined;
      if (busy && tick.overlap === 'skip') {
        await launchSettled(client, { id: tick.id, outcome: 'skipped_overlap', detail: `overlap skip: ${busy}` });
        return { kind: 'skipped' };
      }
      let wait: string | undefined;
      if (busy && tick.overlap === 'queue') wait = `overlap queue: ${busy}`;
      else if (template.maxConcurrentRuns !== null && load.running >= template.maxConcurrentRuns) wait = `max_concurrent_runs ${template.maxConcurrentRuns} reached (${load.running} running)`;
      else if (template.dailyCeiling !== null && load.today >= template.dailyCeiling) wait = `daily_ceiling ${template.dailyCeiling} reached (${load.today} runs today, UTC)`;
      if (wait) {
        await launchDeferred(client, { id: tick.id, reason: wait, now });
        return { kind: 'deferred', reason: wait, template: template.name };
      }
      const delivery = tick.deliveryId !== null ? await deliveryForRun(client, tick.deliveryId) : undefined;
      const payload = delivery?.payload ?? null;
      // A webhook's caller that sent a traceparent has the run join its trace, as `runs submit` does.
      const trace = delivery?.traceparent ? parseTraceParent(delivery.traceparent) : undefined;
      let file;
      try {
        file = runFileLoad(template.source, tick.sets);
      } catch (err) {
        if (!(err instanceof RunFileInvalid)) throw err;
        const reason = `template ${template.name} v${template.version} with this trigger's values: ${err.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`;
        await launchSettled(client, { id: tick.id, outcome: 'failed', detail: reason });
        return { kind: 'failed', reason };
      }
      const { runId } = await runSubmitIn(client, file, { actor: `trigger:${tick.triggerId}`, source: `trigger ${tick.kind} ${tick.triggerId}`, ...(trace ? { trace } : {}) });
      await runTriggerSet(client, { runId, template: template.name, version: template.version, triggerId: tick.triggerId, payload });
      await launchFired(client, { id: tick.id, runId, now });
      return { kind: 'fired', firing: { tickId: tick.id, triggerId: tick.triggerId, runId, template: template.name, version: template.version } };
    });
  } catch (err) {
    if (!isRowFault(err)) throw err;
    const reason = `the run could not be created: ${faultReason(err)}`;
    const settled = await launchSettled(deps.pool, { id, outcome: 'failed', detail: reason });
    if (settled) deps.log.warn({ tick: id, reason }, 'launch failed');
    return settled ? { kind: 'failed', reason } : { kind: 'gone' };
  }
}
