import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { PROTOCOL_VERSION, type AcquireRequest, type RegisterRequest } from '../src/runner/protocol.js';
import { JsonClient } from './http.js';

/** One offer as docs/runner-protocol.md defines it (the fields the fleet uses). */
export interface Offer { step_id: number; run_id: number; attempt: number; token: string; step: string; acked?: boolean }

export interface FleetOptions {
  /** Server base URLs; runner i talks to urls[i % urls.length]. */
  urls: string[];
  registrationToken: string;
  runners: number;
  /** Offers asked per acquire; also the registered max_load, so every offer fits. */
  slots: number;
  /** Long-poll window asked per acquire. */
  waitMs?: number;
  /**
   * Carry each batch's completions on the next acquire (complete-and-acquire, default); false:
   * a complete call of its own per batch.
   */
  carryCompletions?: boolean;
  namePrefix?: string;
  labels?: string[];
  /** Called for every offer as it arrives (before the ack), with the arrival time. */
  onOffer?: (offer: Offer, at: number) => void;
  /** Called as completions are sent (on their own call or carried by an acquire), with the send time. */
  onCompleteSent?: (stepIds: number[], at: number) => void;
  /** Where per-runner errors are reported (they are also counted). */
  log?: (m: string) => void;
}

interface SimRunner { id: string; credential: string; url: string; name: string }

/** Answers a registration retried past (each retry counted once, by cause). */
export interface RegisterStats { serverErrors: number; throttled: number; transportErrors: number }

/** Counters of a fleet; read while it runs. */
export interface FleetCounters {
  acquires: number;
  emptyPolls: number;
  offers: number;
  completed: number;
  /** Items the server refused (409 lease expired or revoked, …) on ack or complete. */
  refused: number;
  /** Transport errors and 5xx answers, each retried after a short pause. */
  errors: number;
  firstOfferAt: number;
  lastCompleteAt: number;
  /** Acquire calls currently parked at the server. */
  parked: number;
  /** Time spent in each call kind, summed over the fleet (acquire: only those answered with offers). */
  acquireMs: number;
  offeredAcquires: number;
  ackMs: number;
  acks: number;
  completeMs: number;
  completes: number;
  /** Batches of completions carried by an acquire (no complete call of their own). */
  carried: number;
}

/**
 * N simulated runners speaking the real HTTP runner protocol as the runner agent does: register,
 * then loop acquire (max_offers = slots, fresh) → ack the batch (as the agent does before it starts) →
 * complete the batch with exit 0 at once. They run no
 * process, so the figures measure the dispatch plane alone.
 */
export class SimFleet {
  readonly counters: FleetCounters = { acquires: 0, emptyPolls: 0, offers: 0, completed: 0, refused: 0, errors: 0, firstOfferAt: 0, lastCompleteAt: 0, parked: 0, acquireMs: 0, offeredAcquires: 0, ackMs: 0, acks: 0, completeMs: 0, completes: 0, carried: 0 };
  readonly client = new JsonClient();
  private runners: SimRunner[] = [];
  private loops: Promise<void>[] = [];
  private stopping = false;
  private lastError = '';

  constructor(private readonly opts: FleetOptions) {}

  get lastErrorMessage(): string {
    return this.lastError;
  }

  /**
   * Registers every runner, `concurrency` at a time (default 16, so registration is not part of
   * any timed phase). A 5xx, a 429 or a transport error is retried after a jittered pause, as a
   * runner agent does, and counted; any other refusal fails the registration. A 429 is the
   * server's registration gate saying "later", which a runner agent obeys for as long as it takes:
   * it counts against `budgetMs` (default 5 min), not against `maxTries`, so a fleet registering
   * on a loaded machine is throttled, never given up on.
   */
  async register(opts: { concurrency?: number; maxTries?: number; budgetMs?: number } = {}): Promise<RegisterStats> {
    const fleet = this.opts;
    const prefix = fleet.namePrefix ?? 'sim';
    const stats: RegisterStats = { serverErrors: 0, throttled: 0, transportErrors: 0 };
    let next = 0;
    const registerOne = async (i: number) => {
      const url = fleet.urls[i % fleet.urls.length];
      const name = `${prefix}-${String(i).padStart(4, '0')}`;
      const body: RegisterRequest = { registration_token: fleet.registrationToken, name, labels: fleet.labels ?? [], executors: ['shell'], max_load: fleet.slots, protocol_version: PROTOCOL_VERSION };
      const giveUpAt = Date.now() + (opts.budgetMs ?? 300_000);
      for (let attempt = 1, failures = 0; ; attempt++) {
        let res;
        try {
          res = await this.client.post(url, '/api/runner/register', body);
        } catch (err) {
          res = { status: 0, body: (err as Error).message };
        }
        if (res.status === 201 || res.status === 200) {
          this.runners[i] = { id: res.body.runner_id, credential: res.body.credential, url, name };
          return;
        }
        const failure = `register ${name} on ${url}: ${res.status === 0 ? res.body : `HTTP ${res.status} ${JSON.stringify(res.body)}`}`;
        if (res.status === 0) stats.transportErrors++;
        else if (res.status === 429) stats.throttled++;
        else if (res.status >= 500) stats.serverErrors++;
        else throw new Error(failure);
        if (res.status !== 429) failures++;
        if (failures >= (opts.maxTries ?? 10) || Date.now() >= giveUpAt) throw new Error(`${failure} (gave up after ${attempt} tries)`);
        await new Promise((res) => setTimeout(res, Math.random() * Math.min(5_000, 100 * 2 ** Math.min(attempt, 16))));
      }
    };
    const workers = Array.from({ length: Math.min(opts.concurrency ?? 16, fleet.runners) }, async () => {
      while (next < fleet.runners) await registerOne(next++);
    });
    await Promise.all(workers);
    return stats;
  }

  /**
   * Starts every runner's acquire loop; with `overMs`, runner i's first acquire waits i/N of it,
   * as a fleet whose machines boot over a while (every connection opened in the same instant
   * overflows a server's accept backlog: connect ETIMEDOUT after the kernel's SYN retries).
   */
  start(opts: { overMs?: number } = {}): void {
    this.stopping = false;
    const over = opts.overMs ?? 0;
    this.loops = this.runners.map(async (r, i) => {
      if (over > 0) await new Promise((res) => setTimeout(res, (i * over) / this.runners.length));
      if (!this.stopping) await this.loop(r);
    });
  }

  private async call(r: SimRunner, path: string, body: unknown, timeoutMs?: number) {
    return this.client.post(r.url, path, body, r.credential, timeoutMs);
  }

  private async loop(r: SimRunner): Promise<void> {
    const { counters } = this;
    const waitMs = this.opts.waitMs ?? 50_000;
    const carry = this.opts.carryCompletions !== false;
    /** The last batch's completions, riding on the next acquire. */
    let carried: Array<{ step_id: number; token: string; exit_code: number }> = [];
    while (!this.stopping) {
      let offers: Offer[];
      try {
        counters.acquires++;
        counters.parked++;
        const sent = performance.now();
        let res;
        const completions = carried;
        if (completions.length > 0) this.opts.onCompleteSent?.(completions.map((c) => Number(c.step_id)), sent);
        try {
          const body: AcquireRequest = { request_id: randomUUID(), max_offers: this.opts.slots, wait_ms: waitMs, fresh: true, ...(completions.length > 0 ? { completions } : {}) };
          res = completions.length > 0 ? await this.retryingCall(r, '/api/runner/acquire', body, waitMs + 30_000) : await this.call(r, '/api/runner/acquire', body, waitMs + 30_000);
        } finally {
          counters.parked--;
        }
        if (completions.length > 0) {
          carried = [];
          this.countCompleted(res.body?.results);
        }
        if (res.status === 204) {
          counters.emptyPolls++;
          continue;
        }
        if (res.status !== 200) throw new Error(`acquire: HTTP ${res.status} ${JSON.stringify(res.body)}`);
        offers = res.body.offers ?? [];
        if (offers.length === 0) {
          counters.emptyPolls++;
          continue;
        }
        const at = performance.now();
        counters.acquireMs += at - sent;
        counters.offeredAcquires++;
        if (!counters.firstOfferAt) counters.firstOfferAt = at;
        counters.offers += offers.length;
        for (const o of offers) this.opts.onOffer?.(o, at);
        const acked = new Set<number>(offers.filter((o) => o.acked === true).map((o) => Number(o.step_id)));
        const leases = offers.filter((o) => o.acked !== true).map((o) => ({ step_id: o.step_id, token: o.token }));
        if (leases.length > 0) {
          const ack = await this.retrying(r, '/api/runner/ack', { leases });
          counters.ackMs += performance.now() - at;
          counters.acks++;
          for (const item of ack.results ?? []) {
            if (item.ok) acked.add(Number(item.step_id));
            else counters.refused++;
          }
        }
        const done = offers.filter((o) => acked.has(Number(o.step_id))).map((o) => ({ step_id: o.step_id, token: o.token, exit_code: 0 }));
        if (done.length === 0) continue;
        if (carry) {
          carried = done;
          continue;
        }
        const completing = performance.now();
        this.opts.onCompleteSent?.(done.map((c) => Number(c.step_id)), completing);
        const answer = await this.retrying(r, '/api/runner/complete', { completions: done });
        this.countCompleted(answer.results, completing);
      } catch (err) {
        if (this.stopping) return;
        counters.errors++;
        this.lastError = (err as Error).message;
        this.opts.log?.(`runner ${r.name}: ${this.lastError}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  }

  /** Counts a completion answer: of its own call sent at `sent`, or carried by an acquire (no time of its own). */
  private countCompleted(results: Array<{ ok: boolean }> | undefined, sent?: number): void {
    const { counters } = this;
    if (sent === undefined) counters.carried++;
    else {
      counters.completeMs += performance.now() - sent;
      counters.completes++;
    }
    for (const item of results ?? []) {
      if (item.ok) counters.completed++;
      else counters.refused++;
    }
    counters.lastCompleteAt = performance.now();
  }

  /**
   * A batched lease call, retried like a real runner does on 5xx and transport errors (acks and
   * completions are idempotent per token); each retry is counted as an error.
   */
  private async retrying(r: SimRunner, path: string, body: unknown): Promise<any> {
    return (await this.retryingCall(r, path, body)).body;
  }

  /** retrying, answering the status with the body. */
  private async retryingCall(r: SimRunner, path: string, body: unknown, timeoutMs?: number): Promise<{ status: number; body: any }> {
    for (let attempt = 1; ; attempt++) {
      let failure: string;
      try {
        const res = await this.call(r, path, body, timeoutMs);
        if (res.status === 200) return res;
        failure = `${path}: HTTP ${res.status} ${JSON.stringify(res.body)}`;
        if (res.status < 500) throw new Error(failure);
      } catch (err) {
        if (this.stopping) throw err;
        failure = (err as Error).message;
        if (/HTTP 4\d\d/.test(failure)) throw err;
      }
      this.counters.errors++;
      this.lastError = failure;
      this.opts.log?.(`runner ${r.name}: ${failure} (retry ${attempt})`);
      if (attempt >= 10) throw new Error(`${failure} (gave up after ${attempt} tries)`);
      await new Promise((res) => setTimeout(res, Math.min(1_000, 50 * 2 ** attempt)));
    }
  }

  /** Where a runner's cycle goes, from the runner's side: mean ms per call kind and offers per acquire. */
  cycleSummary(): string {
    const c = this.counters;
    const mean = (ms: number, n: number) => (n ? (ms / n).toFixed(1) : '—');
    return `acquire answered with offers after ${mean(c.acquireMs, c.offeredAcquires)} ms (mean), ${(c.offers / Math.max(1, c.offeredAcquires)).toFixed(2)} offers each; ack ${mean(c.ackMs, c.acks)} ms; complete ${mean(c.completeMs, c.completes)} ms; ${c.carried} batches of completions carried by an acquire; ${c.emptyPolls} empty polls; ${c.errors} retried errors`;
  }

  /** Resolves when `cond` holds, polling the counters; rejects after timeoutMs or when every loop has died. */
  async until(cond: (c: FleetCounters) => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!cond(this.counters)) {
      if (performance.now() > deadline) {
        throw new Error(`simulated fleet: timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what} (${JSON.stringify(this.counters)}${this.lastError ? `; last error: ${this.lastError}` : ''})`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Stops every loop: parked acquires are cut by closing the connections. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.client.close();
    await Promise.allSettled(this.loops);
    this.loops = [];
  }
}
