import type { RunnerClient } from './client.js';
import type { Completion, ItemResult } from './protocol.js';

interface Pending {
  item: Completion;
  resolve: (r: ItemResult) => void;
  reject: (err: unknown) => void;
}

/** The most completions one call carries. */
const MAX_BATCH = 256;

/**
 * Completions are sent as they come, one call in flight; whatever finishes while a call is out
 * rides the next one, so a busy runner reports many results per round trip.
 */
export class Completer {
  private pending: Pending[] = [];
  private flushing = false;

  constructor(private readonly client: RunnerClient, private readonly signal?: AbortSignal) {}

  submit(item: Completion): Promise<ItemResult> {
    return new Promise<ItemResult>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
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
