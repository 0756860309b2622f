import type { RunnerClient } from './client.js';
import type { Completion, ItemResult } from './protocol.js';

interface Pending {
  item: Completion;
  resolve: (r: ItemResult) => void;
  reject: (err: unknown) => void;
}

/** Completions taken to ride on an acquire (complete-and-acquire): settled by that call's answer. */
export interface CarriedCompletions {
  items: Completion[];
  /** The acquire answered: one result per item, in order. */
  settle(results: ItemResult[]): void;
  /** The acquire failed: the completions go out on their own call (a repeat answers ok). */
  giveBack(): void;
}

/** The most completions one call carries. */
const MAX_BATCH = 256;

/**
 * Completions are sent as they come, one call in flight; whatever finishes while a call is out
 * rides the next one, so a busy runner reports many results per round trip. A send waits for
 * the end of the event loop's turn, so a poll leaving in that turn can carry them instead
 * (take), saving the round trip of their own.
 */
export class Completer {
  private pending: Pending[] = [];
  private flushing = false;
  private scheduled = false;

  constructor(private readonly client: RunnerClient, private readonly signal?: AbortSignal) {}

  submit(item: Completion): Promise<ItemResult> {
    return new Promise<ItemResult>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Takes the completions not yet sent, to be carried by an acquire; undefined when there are none. */
  take(): CarriedCompletions | undefined {
    if (this.pending.length === 0) return undefined;
    const batch = this.pending.splice(0, MAX_BATCH);
    return {
      items: batch.map((p) => p.item),
      settle: (results) => batch.forEach((p, i) => p.resolve(results[i])),
      giveBack: () => {
        this.pending.unshift(...batch);
        this.schedule();
      },
    };
  }

  private schedule(): void {
    if (this.flushing || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, MAX_BATCH);
        try {
          const results = await this.client.complete(
            batch.map((p) => p.item),
            this.signal,
          );
          batch.forEach((p, i) => p.resolve(results[i]));
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
