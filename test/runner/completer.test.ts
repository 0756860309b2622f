import { describe, expect, it } from 'vitest';
import type { RunnerClient } from '../../src/runner/client.js';
import { Completer } from '../../src/runner/completer.js';
import type { Completion, ItemResult } from '../../src/runner/protocol.js';

const turn = () => new Promise((r) => setImmediate(r));
const done = (n: number): Completion => ({ step_id: n, token: `t${n}`, exit_code: 0 });

/** The server side of `complete`, answered by the test: every call is recorded and held until released. */
class HeldCompletes {
  readonly calls: Completion[][] = [];
  private answers: Array<{ resolve: (r: ItemResult[]) => void; reject: (e: unknown) => void }> = [];
  readonly client = {
    complete: (items: Completion[]) =>
      new Promise<ItemResult[]>((resolve, reject) => {
        this.calls.push(items);
        this.answers.push({ resolve, reject });
      }),
  } as unknown as RunnerClient;

  get inFlight(): number {
    return this.answers.length;
  }

  async answer(): Promise<void> {
    const a = this.answers.shift()!;
    a.resolve(this.calls[this.calls.length - 1 - this.answers.length].map((c) => ({ step_id: c.step_id, ok: true })));
    await turn();
    await turn();
  }

  async fail(err: Error): Promise<void> {
    this.answers.shift()!.reject(err);
    await turn();
    await turn();
  }
}

describe('Completer', () => {
  it('sends the completions of one turn in one call, and each gets its own result', async () => {
    const server = new HeldCompletes();
    const c = new Completer(server.client);
    const results = [1, 2, 3].map((n) => c.submit(done(n)));
    expect(server.calls).toEqual([]);
    await turn();
    expect(server.calls).toEqual([[done(1), done(2), done(3)]]);
    await server.answer();
    expect(await Promise.all(results)).toEqual([1, 2, 3].map((n) => ({ step_id: n, ok: true })));
  });

  it('keeps one call in flight: what finishes meanwhile rides the next call, together', async () => {
    const server = new HeldCompletes();
    const c = new Completer(server.client);
    const first = c.submit(done(1));
    await turn();
    const later = [c.submit(done(2)), c.submit(done(3))];
    await turn();
    expect(server.inFlight).toBe(1);
    expect(server.calls).toEqual([[done(1)]]);
    await server.answer();
    expect(await first).toEqual({ step_id: 1, ok: true });
    expect(server.calls).toEqual([[done(1)], [done(2), done(3)]]);
    await server.answer();
    expect(await Promise.all(later)).toEqual([{ step_id: 2, ok: true }, { step_id: 3, ok: true }]);
  });

  it('an acquire leaving in the same turn takes them: no call of their own; settled by its answer', async () => {
    const server = new HeldCompletes();
    const c = new Completer(server.client);
    const results = [c.submit(done(1)), c.submit(done(2))];
    const carried = c.take()!;
    expect(carried.items).toEqual([done(1), done(2)]);
    expect(c.take()).toBeUndefined();
    await turn();
    expect(server.calls).toEqual([]);
    carried.settle([{ step_id: 1, ok: true }, { step_id: 2, ok: false }]);
    expect(await Promise.all(results)).toEqual([{ step_id: 1, ok: true }, { step_id: 2, ok: false }]);
  });

  it('a carrying acquire that failed gives them back: they go out on their own call', async () => {
    const server = new HeldCompletes();
    const c = new Completer(server.client);
    const result = c.submit(done(7));
    c.take()!.giveBack();
    await turn();
    expect(server.calls).toEqual([[done(7)]]);
    await server.answer();
    expect(await result).toEqual({ step_id: 7, ok: true });
  });

  it('a failed call rejects its own batch only; the next batch still goes', async () => {
    const server = new HeldCompletes();
    const c = new Completer(server.client);
    // Observed from the start, so its rejection is handled when it comes.
    const lost = c.submit(done(1)).then(() => 'resolved', (err: Error) => err.message);
    await turn();
    const next = c.submit(done(2));
    await server.fail(new Error('store unavailable: retry'));
    expect(await lost).toBe('store unavailable: retry');
    expect(server.calls).toEqual([[done(1)], [done(2)]]);
    await server.answer();
    expect(await next).toEqual({ step_id: 2, ok: true });
  });

  it('carries at most 256 completions a call', async () => {
    const server = new HeldCompletes();
    const c = new Completer(server.client);
    const results = Array.from({ length: 300 }, (_, i) => c.submit(done(i)));
    await turn();
    expect(server.calls.map((b) => b.length)).toEqual([256]);
    await server.answer();
    expect(server.calls.map((b) => b.length)).toEqual([256, 44]);
    await server.answer();
    expect((await Promise.all(results)).map((r) => r.step_id)).toEqual(Array.from({ length: 300 }, (_, i) => i));
  });
});
