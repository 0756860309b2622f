import type { Pool } from '../store/pool.js';
import { storeCause } from '../store/pool.js';

export interface CheckResult { name: string; ok: boolean; detail?: string }
export type Check = { name: string; run: () => Promise<void> };

/** Named readiness checks; each bounded so a hung dependency answers "not ready" within seconds. */
export class Readiness {
  private checks: Check[] = [];
  private last = new Map<string, CheckResult>();

  constructor(private readonly timeoutMs = 2_000) {}

  add(check: Check): void {
    this.checks.push(check);
  }

  async evaluate(): Promise<{ ready: boolean; checks: CheckResult[] }> {
    const results = await Promise.all(
      this.checks.map(async (c): Promise<CheckResult> => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            c.run(),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs}ms`)), this.timeoutMs);
            }),
          ]);
          return { name: c.name, ok: true };
        } catch (err) {
          return { name: c.name, ok: false, detail: storeCause(err) };
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    for (const r of results) this.last.set(r.name, r);
    return { ready: results.every((r) => r.ok), checks: results };
  }

  /** The most recent outcome of a check, without running it (for verdict messages). */
  lastResult(name: string): CheckResult | undefined {
    return this.last.get(name);
  }
}

export function storeCheck(pool: Pool): Check {
  return { name: 'store', run: async () => void (await pool.query('SELECT 1')) };
}
