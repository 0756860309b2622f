import { timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { ReplicaEnv, ReplicaPart } from '../context.js';
import { listenChannel } from '../store/listen.js';
import { RUNNER_CREDENTIALS_CHANNEL, type RunnerRow } from '../store/runners.js';

/**
 * The backstop for a notice lost while the listener looked connected (a half-open socket): no
 * cached credential is believed longer than this without a fresh read.
 */
export const CREDENTIAL_TTL_MS = 30_000;
/** Bounds the memory of a replica that sees many registrations come and go. */
const MAX_ENTRIES = 200_000;

interface Entry { runner: RunnerRow; readAt: number }

/**
 * The live runners this replica has recently authenticated, by credential hash (the secret itself
 * is never kept). Trusted only while the revocation listener is connected: every runner change
 * that matters to a credential (removal, retirement, token revocation, drain) notifies the
 * runner's id at commit and the entry is dropped here, so revocation reaches every replica within
 * the notification's delay (milliseconds), not a TTL. A listener that is down, or reconnecting
 * after notices may have been missed, empties the cache and turns it off until it is back; and
 * no entry outlives CREDENTIAL_TTL_MS. Misses are never cached, so a new registration works at once.
 */
export class RunnerCredentials {
  private readonly byHash = new Map<string, Entry>();
  private readonly hashById = new Map<string, string>();
  /** Bumped by every invalidation: a read that started before one is not cached (it may predate the change). */
  private generation = 0;
  private listening = false;

  constructor(private readonly deps: { clock: Pick<Clock, 'now'>; ttlMs?: number }) {}

  /** The cached live runner whose credential hashes to `hash`, or undefined (read the store). */
  get(hash: string): RunnerRow | undefined {
    if (!this.listening) return undefined;
    const e = this.byHash.get(hash);
    if (!e) return undefined;
    if (this.deps.clock.now() - e.readAt >= (this.deps.ttlMs ?? CREDENTIAL_TTL_MS)) {
      this.forget(e.runner.id);
      return undefined;
    }
    // The map found it by hash; the stored hash is still compared without a timing side channel.
    const a = Buffer.from(e.runner.credentialHash);
    const b = Buffer.from(hash);
    return a.length === b.length && timingSafeEqual(a, b) ? e.runner : undefined;
  }

  /** Where the next read stands: pass it to put(), which caches only if nothing changed meanwhile. */
  mark(): number {
    return this.generation;
  }

  /** Caches runners read from the store, unless an invalidation arrived since `mark`. */
  put(mark: number, runners: Iterable<RunnerRow>): void {
    if (!this.listening || mark !== this.generation) return;
    const readAt = this.deps.clock.now();
    for (const runner of runners) {
      if (this.byHash.size >= MAX_ENTRIES) this.forget(this.byHash.values().next().value!.runner.id);
      this.forget(runner.id);
      this.byHash.set(runner.credentialHash, { runner, readAt });
      this.hashById.set(runner.id, runner.credentialHash);
    }
  }

  /** A runner changed (notice): its credential is read from the store again. */
  invalidate(runnerId: string): void {
    this.generation++;
    this.forget(runnerId);
  }

  /** The listener is connected and notices from now on reach us: start (again) from an empty cache. */
  listenerUp(): void {
    this.clear();
    this.listening = true;
  }

  /** Notices are being missed: no cache until the listener is back. */
  listenerDown(): void {
    this.listening = false;
    this.clear();
  }

  get size(): number {
    return this.byHash.size;
  }

  /** Whether notices are being received, so the cache is in use. */
  get isListening(): boolean {
    return this.listening;
  }

  private clear(): void {
    this.generation++;
    this.byHash.clear();
    this.hashById.clear();
  }

  private forget(runnerId: string): void {
    const hash = this.hashById.get(runnerId);
    if (hash === undefined) return;
    this.hashById.delete(runnerId);
    this.byHash.delete(hash);
  }
}

/**
 * The replica's credential cache, fed by LISTEN on the runners' credential channel; its part
 * stops the listener. With no listen URL (a transaction pooler) no notice can arrive, so the
 * cache is never turned on: every call reads its credential from the store.
 */
export function runnerCredentialsFeed(env: Pick<ReplicaEnv, 'listenUrl' | 'clock' | 'log'>): { credentials: RunnerCredentials; part: ReplicaPart } {
  const credentials = new RunnerCredentials({ clock: env.clock });
  const listener = listenChannel(
    env.listenUrl,
    RUNNER_CREDENTIALS_CHANNEL,
    (runnerId) => (runnerId ? credentials.invalidate(runnerId) : credentials.listenerUp()),
    (err) => env.log.debug({ err: err.message }, 'runner credential listener reconnecting'),
    () => credentials.listenerDown(),
  );
  const stop = async () => {
    credentials.listenerDown();
    await listener.stop();
  };
  // A halted replica hears no more notices: its cache must not outlive the listener.
  return { credentials, part: { halt: stop, stop } };
}
