import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { chownSync, mkdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import { formatDuration } from '../core/duration.js';
import { backoffDelay, renewIntervalMs } from '../core/retry-backoff.js';
import type { Logger } from '../logger.js';
import { startLoop, type LoopHandle } from '../loop.js';
import { CallAbortedError, CredentialInvalidError, ProtocolError, type RunnerClient } from './client.js';
import { Completer } from './completer.js';
import { execute, type ExecRequest, type ExecResult, type Execution } from './executor.js';
import { LogBatcher } from './log-batcher.js';
import { stepEnvironment, type StepUser } from './step-env.js';
import { processStartTime, type StepRecords } from './step-records.js';
import { isLeaseLost, type ItemResult, type LeaseRef, type Offer } from './protocol.js';

export interface AgentOptions {
  client: RunnerClient;
  log: Logger;
  clock?: Clock;
  /** Each step runs in its own directory under this one. */
  workDir: string;
  maxParallelSteps: number;
  /** After SIGTERM, how long running steps may take before they are killed and released. */
  graceMs: number;
  /** Between SIGTERM and SIGKILL of a step's process group. */
  killGraceMs?: number;
  /** Take one acquire's worth of work, run it, exit. */
  once?: boolean;
  /** The long-poll window asked for; the server's own window when unset. */
  pollWaitMs?: number;
  /** The runner's environment, of which a step sees only the few documented variables (default: this process's). */
  baseEnv?: NodeJS.ProcessEnv;
  /** More of it for steps, by name or `PREFIX_*` (`--pass-env`); never opschain's own. */
  passEnv?: string[];
  /** Steps run as this unprivileged account (`--step-user`); their directories are handed to it. */
  stepUser?: StepUser;
  logFlushMs?: number;
  logBatchBytes?: number;
  /** Where running steps are recorded for the next incarnation's orphan reaping. */
  records?: StepRecords;
  /** How a step's command runs (default: `/bin/sh -c` leading its own process group); the chaos bench runs trivial steps in-process. */
  execute?: (req: ExecRequest) => Execution;
}

export interface StepEvent {
  stepId: number;
  runId: number;
  step: string;
  attempt: number;
  /** The lease token the attempt ran under. */
  token: string;
  pid?: number;
  outcome?: 'completed' | 'lost' | 'released' | 'abandoned';
  result?: ExecResult;
}

interface ActiveStep {
  offer: Offer;
  lease: LeaseRef;
  dir: string;
  execution?: Execution;
  batcher: LogBatcher;
  intervalMs: number;
  nextRenewAt: number;
  /** The lease was fenced (409): kill, abandon the result. */
  lost: boolean;
  /** Shutdown grace ran out: kill, release instead of complete. */
  releasing: boolean;
  /** The runner is going away without a word to the server (credential gone, second signal). */
  abandoned: boolean;
  /** The result is on its way: renewals stop. */
  completing: boolean;
  finished: Promise<void>;
}

/** Parked polls per runner at most; each asks for the slots free when it left. */
const MAX_CONCURRENT_POLLS = 4;


/**
 * The runner agent's work loop. Polls for as many offers as it has free slots, acks them at once,
 * runs each as its own process group, streams output, renews on the offer's cadence and reports
 * results (batched). A fenced lease kills its step. stop() stops polling, lets running steps
 * finish within the grace, then kills and releases the rest.
 *
 * States: polling → (stop requested) draining → (grace over) releasing → done. A 401 jumps from
 * any state to done, killing everything, and run() rejects with CredentialInvalidError.
 */
export class RunnerAgent {
  readonly events = new EventEmitter();
  readonly stats = { started: 0, completed: 0, lost: 0, released: 0 };
  private readonly opts: AgentOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly client: RunnerClient;
  private readonly active = new Map<number, ActiveStep>();
  private readonly pollAbort = new AbortController();
  /** Ends every retrying call: only when the runner gives up on the server. */
  private readonly hardAbort = new AbortController();
  private readonly graceAbort = new AbortController();
  private readonly completer: Completer;
  private stopRequested = false;
  private fatal?: Error;
  private slotWaiters: Array<() => void> = [];
  private renewLoop?: LoopHandle;
  private pollWaitMs?: number;
  private readonly polls = new Set<Promise<void>>();
  /** Slots asked for by the polls out now. */
  private asked = 0;
  private refusals = 0;
  private onceDone = false;
  /** Say which sends of a request id are first sends, until a server refuses the field (one that predates it). */
  private sayFresh = true;
  /** Carry finished steps' results on the next poll, until a server refuses the field (one that predates it). */
  private carryCompletions = true;
  /** Aborted when the run-scoped run this runner was executing ends: its restricted polls are moot. */
  private scopedPolls = new AbortController();
  /** Runs whose step log already says the runner's own cap binds. */
  private readonly clampNoted = new Set<number>();
  /** Keep a watch call parked while steps run, until a server refuses the path (one that predates it). */
  private watching = true;
  /** Aborted when the steps to watch change: the parked watch is sent again with the new set. */
  private watchSet = new AbortController();
  private readonly watchStop = new AbortController();

  constructor(opts: AgentOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
    this.log = opts.log;
    this.client = opts.client;
    this.pollWaitMs = opts.pollWaitMs;
    this.completer = new Completer(this.client, this.hardAbort.signal);
    this.events.setMaxListeners(0);
  }

  get running(): number {
    return this.active.size;
  }

  /** Resolves when the agent has stopped cleanly; rejects with the fatal error (401) otherwise. */
  async run(): Promise<void> {
    this.renewLoop = startLoop({ name: 'renew', clock: this.clock, log: this.log, once: () => this.renewOnce(), errorDelayMs: 1000 });
    const watch = this.watchLoop();
    try {
      await this.pollLoop();
      await this.drain();
    } finally {
      this.watchStop.abort();
      await watch;
      await this.renewLoop.stop();
    }
    if (this.fatal) throw this.fatal;
  }

  /** First call: graceful (stop polling, grace for running steps). Second call: end them now. */
  stop(): void {
    if (!this.stopRequested) {
      this.stopRequested = true;
      this.log.info({ running: this.active.size, grace: formatDuration(this.opts.graceMs) }, this.active.size ? `stopping: no new work; running steps have ${formatDuration(this.opts.graceMs)} to finish` : 'stopping');
      this.pollAbort.abort();
      this.wakeSlotWaiters();
      return;
    }
    this.log.warn({ running: this.active.size }, 'stop requested again: ending running steps now');
    this.graceAbort.abort();
    // Releases get the kill grace and a little more; then the runner leaves whatever is unsent.
    setTimeout(() => this.hardAbort.abort(), (this.opts.killGraceMs ?? 5_000) + 5_000).unref();
  }

  /**
   * Keeps polls parked for every free slot: when a step finishes while a poll is out, another poll
   * asks for the freed slots instead of leaving them idle until the first answers. Offers can
   * never outnumber slots: a poll asks only for slots neither running nor already asked for.
   */
  private async pollLoop(): Promise<void> {
    const maxPolls = this.opts.once ? 1 : MAX_CONCURRENT_POLLS;
    while (!this.stopRequested && !this.fatal && !this.onceDone) {
      // While a run-scoped run is here, extra polls ask only for its steps, up to its cap as
      // clamped by this runner's own --max-parallel-steps.
      const scope = this.scopedRun();
      // A step whose result is on its way no longer holds its slot: the poll for it carries the result.
      const free = (scope ? scope.cap : this.opts.maxParallelSteps) - this.occupied() - this.asked;
      if (free > 0 && this.polls.size < maxPolls) {
        const poll = this.poll(free, scope?.runId ?? null).finally(() => {
          this.polls.delete(poll);
          this.wakeSlotWaiters();
        });
        this.polls.add(poll);
        continue;
      }
      await new Promise<void>((r) => this.slotWaiters.push(r));
    }
    this.pollAbort.abort();
    await Promise.all([...this.polls]);
  }

  /** Slots taken by steps still running (not those whose result is being reported). */
  private occupied(): number {
    let n = 0;
    for (const s of this.active.values()) if (!s.completing) n++;
    return n;
  }

  /** The run-scoped run among the running steps, with the concurrency this runner gives it. */
  private scopedRun(): { runId: number; cap: number } | undefined {
    for (const s of this.active.values()) {
      if (s.offer.run_scope) return { runId: s.offer.run_id, cap: Math.max(1, Math.min(this.opts.maxParallelSteps, s.offer.max_parallel_steps)) };
    }
    return undefined;
  }

  private async poll(slots: number, onlyRunId: number | null = null): Promise<void> {
    let offers: Offer[] = [];
    this.asked += slots;
    // Results of steps that just finished ride on this poll (complete-and-acquire).
    const carried = this.carryCompletions ? this.completer.take() : undefined;
    try {
      const signal = onlyRunId === null ? this.pollAbort.signal : AbortSignal.any([this.pollAbort.signal, this.scopedPolls.signal]);
      // One id per logical request: the client's retries reuse it, so a lost answer is not lost work.
      const answer = await this.client.acquireCarrying(
        {
          request_id: randomUUID(),
          max_offers: slots,
          wait_ms: this.pollWaitMs,
          ...(onlyRunId === null ? {} : { only_run_id: onlyRunId }),
          ...(this.sayFresh ? { fresh: true } : {}),
          ...(carried ? { completions: carried.items } : {}),
        },
        signal,
      );
      carried?.settle(answer.results ?? []);
      offers = answer.offers;
      this.refusals = 0;
    } catch (err) {
      // Whatever became of the call, the results go out again on their own (a repeat answers ok).
      carried?.giveBack();
      if (err instanceof CallAbortedError) return;
      if (err instanceof CredentialInvalidError) return this.fail(err);
      if (carried && err instanceof ProtocolError && err.status === 400 && /completions/.test(err.message)) {
        this.log.warn({ err: err.message }, 'server predates complete-and-acquire; reporting results on their own');
        this.carryCompletions = false;
        return;
      }
      if (err instanceof ProtocolError && err.status === 400 && /wait_ms/.test(err.message) && this.pollWaitMs !== undefined) {
        // The server's window shrank since registration: let it pick its own.
        this.log.warn({ err: err.message }, 'server refused the poll window; using its default');
        this.pollWaitMs = undefined;
        return;
      }
      if (err instanceof ProtocolError && err.status === 400 && this.sayFresh && /fresh|additional propert/.test(err.message)) {
        this.log.warn({ err: err.message }, 'server predates fresh acquires; sending without the field');
        this.sayFresh = false;
        return;
      }
      this.refusals++;
      this.log.error({ err: (err as Error).message }, 'acquire refused; retrying');
      await this.clock.sleep(backoffDelay(this.refusals, Math.random()), this.pollAbort.signal);
      return;
    } finally {
      this.asked -= slots;
    }
    if (offers.length === 0) return;
    const started = await this.accept(offers);
    if (this.opts.once && started > 0) this.onceDone = true;
  }

  /**
   * Acks the offers in one call and starts each acked one; returns how many started. A step starts
   * only once its ack is recorded: an offer is re-offered at its ack deadline when no ack came, so
   * a step started unacked could run twice. (`acked` offers come only from servers that delivered
   * them acked; they need no ack.)
   */
  private async accept(offers: Offer[]): Promise<number> {
    const acked: Offer[] = offers.filter((o) => o.acked === true);
    const toAck = offers.filter((o) => o.acked !== true);
    const leases = toAck.map((o) => ({ step_id: o.step_id, token: o.token }));
    let results: ItemResult[] = [];
    if (leases.length > 0) {
      try {
        results = await this.client.ack(leases, this.hardAbort.signal);
      } catch (err) {
        if (err instanceof CredentialInvalidError) this.fail(err);
        else this.log.error({ err: (err as Error).message, steps: leases.map((l) => l.step_id) }, 'ack failed; the offers go back to the queue at their deadline');
        leases.length = 0;
        toAck.length = 0;
      }
    }
    toAck.forEach((offer, i) => {
      const r = results[i];
      if (r?.ok) acked.push(offer);
      else this.log.warn({ step_id: offer.step_id, run_id: offer.run_id, error: r?.error }, 'offer withdrawn before ack; skipped');
    });
    if (this.stopRequested || this.fatal) {
      // Stop arrived while the answer was on its way: hand the work back rather than start it.
      if (acked.length > 0 && !this.fatal) await this.releaseLeases(acked.map((o) => ({ step_id: o.step_id, token: o.token })), 'runner stopping before start');
      return 0;
    }
    for (const offer of acked) this.start(offer);
    return acked.length;
  }

  private start(offer: Offer): void {
    const dir = join(this.opts.workDir, `run-${offer.run_id}`, `${safeName(offer.step)}.${offer.attempt}`);
    const intervalMs = renewIntervalMs(offer);
    const step: ActiveStep = {
      offer,
      lease: { step_id: offer.step_id, token: offer.token },
      dir,
      intervalMs,
      nextRenewAt: this.clock.now() + intervalMs,
      lost: false,
      releasing: false,
      abandoned: false,
      completing: false,
      batcher: new LogBatcher({
        send: (chunks, giveUp) => this.client.logs(offer.step_id, offer.token, chunks, AbortSignal.any([this.hardAbort.signal, giveUp]), offer.traceparent),
        onLost: () => this.leaseLost(step, 'logs'),
        onError: (err) => {
          if (err instanceof CredentialInvalidError) this.fail(err);
          else if (!(err instanceof CallAbortedError)) this.log.warn({ step_id: offer.step_id, err: (err as Error).message }, 'a log batch was refused and dropped');
        },
        clock: this.clock,
        flushMs: this.opts.logFlushMs,
        maxBatchBytes: this.opts.logBatchBytes,
      }),
      finished: Promise.resolve(),
    };
    this.active.set(offer.step_id, step);
    this.stats.started++;
    if (offer.run_scope && offer.max_parallel_steps > this.opts.maxParallelSteps && !this.clampNoted.has(offer.run_id)) {
      this.clampNoted.add(offer.run_id);
      step.batcher.push('stderr', `[opschain runner: the run allows ${offer.max_parallel_steps} steps at once; this runner runs at most ${this.opts.maxParallelSteps} (--max-parallel-steps)]\n`);
    }
    const stepUser = this.opts.stepUser;
    const env = stepEnvironment({ runnerEnv: this.opts.baseEnv ?? process.env, passEnv: this.opts.passEnv ?? [], stepUser, offer, dir });
    let execution: Execution | undefined;
    try {
      // Traversable, not listable, up to the step's own directory, which only its user may enter.
      mkdirSync(join(dir, '..'), { recursive: true, mode: 0o711 });
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      if (stepUser) chownSync(dir, stepUser.uid, stepUser.gid);
      if (offer.webhook_payload !== undefined && env.OPSCHAIN_WEBHOOK_PAYLOAD) {
        // A run started by a webhook: its payload as a file in the step's work dir, named by the env.
        writeFileSync(env.OPSCHAIN_WEBHOOK_PAYLOAD, offer.webhook_payload, { mode: 0o600 });
        if (stepUser) chownSync(env.OPSCHAIN_WEBHOOK_PAYLOAD, stepUser.uid, stepUser.gid);
      }
      execution = (this.opts.execute ?? execute)({
        user: stepUser,
        command: offer.command,
        cwd: dir,
        env,
        timeoutMs: offer.timeout_ms,
        killGraceMs: this.opts.killGraceMs,
        onOutput: (stream, text) => step.batcher.push(stream, text),
      });
    } catch (err) {
      const cause = `could not start the step: ${(err as Error).message}`;
      execution = { pid: undefined, kill: () => {}, done: Promise.resolve({ exitCode: null, signal: null, timedOut: false, cause }) };
    }
    step.execution = execution;
    if (execution.pid) {
      try {
        this.opts.records?.write({ stepId: offer.step_id, runId: offer.run_id, step: offer.step, pid: execution.pid, startTime: processStartTime(execution.pid), dir });
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'could not record the running step');
      }
    }
    this.log.info({ run_id: offer.run_id, step: offer.step, step_id: offer.step_id, attempt: offer.attempt, pid: execution.pid }, `step ${offer.step} of run ${offer.run_id} started`);
    this.events.emit('step:started', this.eventOf(step));
    this.renewLoop?.kick();
    this.watchChanged();
    step.finished = this.finish(step);
  }

  private async finish(step: ActiveStep): Promise<void> {
    const { offer } = step;
    const result = await step.execution!.done;
    this.opts.records?.remove(offer.step_id);
    if (result.timedOut) step.batcher.push('stderr', `\n[opschain runner: ${result.cause}; the step's process group was killed]\n`);
    if (step.releasing && !step.lost) step.batcher.push('stderr', '\n[opschain runner: shutting down; the step was stopped and released]\n');
    if (!step.abandoned) await step.batcher.close();
    let outcome: StepEvent['outcome'];
    if (step.abandoned) {
      outcome = 'abandoned';
    } else if (step.lost) {
      outcome = 'lost';
      this.stats.lost++;
      this.log.warn({ run_id: offer.run_id, step: offer.step, step_id: offer.step_id }, `step ${offer.step} of run ${offer.run_id}: lease expired or revoked; result abandoned`);
    } else if (step.releasing) {
      outcome = 'released';
      this.stats.released++;
      await this.releaseLeases([step.lease], 'runner shut down before the step finished');
    } else {
      outcome = await this.complete(step, result);
    }
    this.cleanDir(step.dir);
    this.active.delete(offer.step_id);
    if (offer.run_scope && this.scopedRun()?.runId !== offer.run_id) {
      this.clampNoted.delete(offer.run_id);
      this.scopedPolls.abort();
      this.scopedPolls = new AbortController();
    }
    this.events.emit('step:finished', { ...this.eventOf(step), outcome, result });
    this.wakeSlotWaiters();
  }

  private async complete(step: ActiveStep, result: ExecResult): Promise<StepEvent['outcome']> {
    const { offer } = step;
    step.completing = true;
    const completion = result.cause === null ? { ...step.lease, exit_code: result.exitCode } : { ...step.lease, exit_code: null, cause: result.cause };
    let r: ItemResult;
    try {
      const reported = this.completer.submit(completion);
      // Its slot is free now: a poll leaving for it carries this result.
      this.wakeSlotWaiters();
      r = await reported;
    } catch (err) {
      if (err instanceof CredentialInvalidError) this.fail(err);
      else if (!(err instanceof CallAbortedError)) this.log.error({ step_id: offer.step_id, err: (err as Error).message }, 'completion refused');
      return 'abandoned';
    }
    if (r?.ok) {
      this.stats.completed++;
      this.log.info(
        { run_id: offer.run_id, step: offer.step, step_id: offer.step_id, attempt: offer.attempt, exit_code: completion.exit_code, cause: result.cause ?? undefined },
        `step ${offer.step} of run ${offer.run_id} ${result.cause ? `ended: ${result.cause}` : `exited ${result.exitCode}`}`,
      );
      return 'completed';
    }
    if (r && isLeaseLost(r)) {
      this.stats.lost++;
      this.log.warn({ run_id: offer.run_id, step: offer.step, step_id: offer.step_id }, `step ${offer.step} of run ${offer.run_id}: lease expired or revoked before completion; result abandoned`);
      return 'lost';
    }
    this.log.error({ step_id: offer.step_id, error: r?.error, status: r?.status }, 'completion refused');
    return 'abandoned';
  }

  /** One renewal pass: every lease due is renewed in one call; returns the wait until the next is due. */
  async renewOnce(): Promise<number> {
    const now = this.clock.now();
    const due = [...this.active.values()].filter((s) => !s.lost && !s.completing && !s.abandoned && s.nextRenewAt <= now);
    if (due.length > 0) {
      let results: ItemResult[];
      try {
        results = await this.client.renew(
          due.map((s) => s.lease),
          this.hardAbort.signal,
        );
      } catch (err) {
        if (err instanceof CredentialInvalidError) {
          this.fail(err);
          return 60_000;
        }
        if (err instanceof CallAbortedError) return 60_000;
        throw err;
      }
      const after = this.clock.now();
      due.forEach((s, i) => {
        const r = results[i];
        if (r?.ok) s.nextRenewAt = after + s.intervalMs;
        else if (r && isLeaseLost(r)) this.leaseLost(s, 'renew');
        else {
          this.log.warn({ step_id: s.offer.step_id, error: r?.error }, 'renewal refused; retrying soon');
          s.nextRenewAt = after + Math.min(s.intervalMs, 1000);
        }
      });
    }
    const next = Math.min(...[...this.active.values()].map((s) => s.nextRenewAt), this.clock.now() + 60_000);
    return Math.max(0, next - this.clock.now());
  }

  /**
   * Keeps one watch call parked while steps run, so a cancel reaches the runner at once instead of
   * at the next renewal (up to a minute): the server answers it with the leases revoked, and
   * their process groups are killed. Renewals still fence on their own if the watch is lost.
   */
  private async watchLoop(): Promise<void> {
    while (this.watching && !this.watchStop.signal.aborted && !this.fatal) {
      const watched = [...this.active.values()].filter((s) => !s.lost && !s.completing && !s.abandoned);
      const changed = this.watchSet.signal;
      const signal = AbortSignal.any([changed, this.watchStop.signal, this.hardAbort.signal]);
      if (watched.length === 0) {
        await new Promise<void>((resolve) => {
          if (signal.aborted) return resolve();
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
      } else {
        try {
          const revoked = new Set(await this.client.watch(watched.map((s) => s.lease), this.pollWaitMs, signal));
          for (const s of watched) if (revoked.has(s.offer.step_id) && this.active.get(s.offer.step_id) === s && !s.completing) this.leaseLost(s, 'cancel notice');
        } catch (err) {
          if (err instanceof CallAbortedError) {
            // The set changed or the runner is stopping: look again.
          } else if (err instanceof CredentialInvalidError) {
            this.fail(err);
          } else if (err instanceof ProtocolError && err.status === 404) {
            this.log.warn('server predates the watch call; a cancel reaches this runner at its next renewal');
            this.watching = false;
          } else {
            this.log.warn({ err: (err as Error).message }, 'watch refused; trying again');
            await this.clock.sleep(1_000, signal).catch(() => {});
          }
        }
      }
      if (changed.aborted) this.watchSet = new AbortController();
    }
  }

  /** The steps to watch changed (one started): the parked watch is sent again. */
  private watchChanged(): void {
    this.watchSet.abort();
  }

  private leaseLost(step: ActiveStep, where: string): void {
    if (step.lost) return;
    step.lost = true;
    this.log.warn({ run_id: step.offer.run_id, step: step.offer.step, step_id: step.offer.step_id, on: where }, `step ${step.offer.step} of run ${step.offer.run_id}: lease expired or revoked (on ${where}); killing its process group`);
    step.execution?.kill('lease expired or revoked');
  }

  private async drain(): Promise<void> {
    if (this.stopRequested && !this.fatal && this.active.size > 0) {
      const graceOver = this.clock.sleep(this.opts.graceMs, this.graceAbort.signal).then(() => {
        const left = [...this.active.values()].filter((s) => !s.completing && !s.lost);
        if (left.length === 0) return;
        this.log.warn({ steps: left.map((s) => s.offer.step_id) }, `grace of ${formatDuration(this.opts.graceMs)} over: stopping ${left.length} step(s) and releasing them`);
        for (const s of left) {
          s.releasing = true;
          s.execution?.kill('runner shutting down');
        }
      });
      const allDone = Promise.all([...this.active.values()].map((s) => s.finished));
      await Promise.race([allDone, graceOver]);
    }
    while (this.active.size > 0) await Promise.all([...this.active.values()].map((s) => s.finished));
    this.graceAbort.abort();
  }

  private async releaseLeases(leases: LeaseRef[], reason: string): Promise<void> {
    try {
      const results = await this.client.release(
        leases.map((l) => ({ ...l, reason })),
        this.hardAbort.signal,
      );
      results.forEach((r) => {
        if (!r.ok) this.log.warn({ step_id: r.step_id, error: r.error }, 'release refused');
      });
    } catch (err) {
      if (err instanceof CredentialInvalidError) this.fail(err);
      else if (!(err instanceof CallAbortedError)) this.log.error({ err: (err as Error).message }, 'release failed');
    }
  }

  /** The registration is gone: nothing this runner does can be recorded. Kill everything, stop. */
  private fail(err: Error): void {
    if (this.fatal) return;
    this.fatal = err;
    this.stopRequested = true;
    this.log.error({ err: err.message }, 'the server no longer accepts this runner\'s credential; stopping');
    this.pollAbort.abort();
    for (const s of this.active.values()) {
      s.abandoned = true;
      s.execution?.kill('runner credential invalid');
    }
    this.hardAbort.abort();
    this.wakeSlotWaiters();
  }

  private wakeSlotWaiters(): void {
    for (const w of this.slotWaiters.splice(0)) w();
  }

  private cleanDir(dir: string): void {
    try {
      rmSync(dir, { recursive: true, force: true });
      rmdirSync(join(dir, '..'));
    } catch {
      // The run directory still holds another step's directory.
    }
  }

  private eventOf(step: ActiveStep): StepEvent {
    return { stepId: step.offer.step_id, runId: step.offer.run_id, step: step.offer.step, attempt: step.offer.attempt, token: step.offer.token, pid: step.execution?.pid };
  }
}

/** A step name as one safe path segment. */
function safeName(step: string): string {
  const s = step.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
  return s.slice(0, 100) || 'step';
}
