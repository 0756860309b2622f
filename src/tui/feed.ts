import type { AdminQueueView } from '../views/admin-queue.js';
import type { ConsoleSource } from './source.js';

/** Depth of every lane at one refresh: the sparkline's history. */
export interface DepthPoint {
  at: number;
  ready: number[];
}

/** What the feed pushes after every refresh: immutable, so components are pure functions of it. */
export interface FeedState {
  /** The last good view (kept through an outage, so the screen stays readable). */
  view: AdminQueueView | null;
  /** Local wall-clock ms of the last good refresh. */
  fetchedAt: number | null;
  /** Set while refreshes fail: since when and why. */
  stale: { since: number; cause: string } | null;
  /** Lane depths of the last few minutes, oldest first. */
  history: readonly DepthPoint[];
  /** Shard → the owner it had before the last move, for shards that moved at the last refresh. */
  moved: ReadonlyMap<number, string | null>;
  refreshes: number;
}

export const EMPTY_FEED: FeedState = { view: null, fetchedAt: null, stale: null, history: [], moved: new Map(), refreshes: 0 };

export interface FeedOptions {
  source: ConsoleSource;
  intervalMs: number;
  limit: number;
  /** How much depth history to keep for the sparkline. */
  historyMs?: number;
  /** A change notification shortens the wait, but refreshes never come closer than this. */
  minGapMs?: number;
  now?: () => number;
}

/**
 * The data loop of the console, outside React. A refresh never overlaps the previous one; the
 * next is scheduled when the last finishes (`intervalMs`), and a store notification only shortens
 * the wait (never below `minGapMs`). A failed refresh keeps the last view and marks the state
 * stale with its cause; the loop keeps trying and clears the mark by itself.
 *
 *   idle ──timer/wake──▶ refreshing ──done──▶ idle (next timer armed)
 *     ▲                                         │ paused: timer not armed, wakes ignored
 *     └──────────────── resume ◀────────────────┘
 */
export class ConsoleFeed {
  private state: FeedState = EMPTY_FEED;
  private listeners = new Set<(s: FeedState) => void>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = true;
  private paused = false;
  private lastStart = 0;
  private unsubscribe: (() => Promise<void>) | undefined;
  private readonly now: () => number;

  constructor(private readonly opts: FeedOptions) {
    this.now = opts.now ?? Date.now;
  }

  get current(): FeedState {
    return this.state;
  }

  onChange(fn: (s: FeedState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.unsubscribe = this.opts.source.subscribe?.(() => this.wake());
    void this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.unsubscribe?.().catch(() => {});
    this.unsubscribe = undefined;
  }

  setPaused(paused: boolean): void {
    this.paused = paused;
    if (!paused) this.wake();
  }

  /** Refresh soon: a store change, a lever pulled from the dashboard. */
  wake(): void {
    if (this.stopped || this.paused || this.running) return;
    const gap = Math.max(0, (this.opts.minGapMs ?? 200) - (this.now() - this.lastStart));
    this.arm(gap);
  }

  /** One refresh now; resolves with the state it pushed. */
  async refresh(): Promise<FeedState> {
    this.running = true;
    this.lastStart = this.now();
    try {
      const view = await this.opts.source.read({ limit: this.opts.limit });
      this.state = nextState(this.state, view, this.now(), this.opts.historyMs ?? 5 * 60_000);
    } catch (err) {
      this.state = { ...this.state, stale: { since: this.state.stale?.since ?? this.now(), cause: causeOf(err) }, refreshes: this.state.refreshes + 1 };
    } finally {
      this.running = false;
    }
    for (const fn of this.listeners) fn(this.state);
    return this.state;
  }

  private arm(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    if (this.stopped || this.running) return;
    if (!this.paused) await this.refresh();
    if (!this.stopped && !this.paused) this.arm(this.opts.intervalMs);
  }
}

function causeOf(err: unknown): string {
  const e = err as { message?: string; code?: string };
  const msg = e?.message || e?.code || String(err);
  return msg.split('\n')[0].slice(0, 200);
}

/** The state after a good refresh: history appended and trimmed, shard moves noted. */
export function nextState(prev: FeedState, view: AdminQueueView, now: number, historyMs: number): FeedState {
  const moved = new Map<number, string | null>();
  if (prev.view) {
    view.shards.forEach((owner, i) => {
      const before = prev.view!.shards[i] ?? null;
      if (before !== owner) moved.set(i, before);
    });
  }
  const history = [...prev.history.filter((p) => p.at >= now - historyMs), { at: now, ready: view.lanes.map((l) => l.ready) }];
  return { view, fetchedAt: now, stale: null, history, moved, refreshes: prev.refreshes + 1 };
}
