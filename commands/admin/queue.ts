import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { adminQueueView, storeConsoleSource } from '../../src/cli/console-source.js';
import { Invalid } from '../../src/errors.js';
import { adminQueueText } from '../../src/cli/admin-queue-text.js';
import { runConsole } from '../../src/tui/index.js';
import type { AdminQueueView } from '../../src/views/admin-queue.js';

export default class AdminQueue extends BaseCommand<typeof AdminQueue> {
  static override description =
    'The aggregate queue: per lane the ready depth, leases and oldest wait (exact up to a bound, "~" marks a statistics estimate beyond it), each project\'s weight, stride pass and share of the last minute\'s deliveries; pools; every live lease oldest first; replicas, shards and the leader; postures and drains; ready entries counted by verdict. One consistent snapshot in a fixed handful of statements however deep the queue. --watch opens the live dashboard (docs/console.md); without a terminal it prints one NDJSON snapshot per interval.';
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> admin queue',
    '<%= config.bin %> admin queue --json | jq .lanes',
    '<%= config.bin %> admin queue --watch',
    '<%= config.bin %> admin queue --watch --interval 5 > queue.ndjson',
  ];
  static override flags = {
    'accept-exceeding': Flags.boolean({ description: 'judge oversized steps as the servers do (their dispatch.accept_exceeding)', allowNo: true, default: true, env: 'OPSCHAIN_ACCEPT_EXCEEDING' }),
    interval: Flags.string({ description: 'with --watch: seconds between refreshes (store changes wake it sooner)', default: '1' }),
    limit: Flags.integer({ description: 'list at most this many leases, oldest first (all are counted)', default: 100, min: 1, max: 10_000 }),
    watch: Flags.boolean({ description: 'the live dashboard; without a terminal, one NDJSON line per interval', default: false }),
  };
  static override summary = 'Lanes, leases, shards, verdicts and runners at a glance (--watch: live dashboard)';

  async run(): Promise<AdminQueueView | undefined> {
    const interval = Number(this.flags.interval);
    if (!Number.isFinite(interval) || interval < 0.2 || interval > 3600) throw new Invalid(`--interval: expected seconds between 0.2 and 3600, got '${this.flags.interval}'`);
    const pool = await this.store();
    if (this.flags.watch) {
      const source = storeConsoleSource({ pool, databaseUrl: this.databaseUrl(), acceptExceeding: this.flags['accept-exceeding'] });
      await runConsole({ source, intervalMs: Math.round(interval * 1000), limit: this.flags.limit, mode: this.jsonEnabled() ? 'ndjson' : 'auto' });
      return undefined;
    }
    const view = await adminQueueView(pool, { limit: this.flags.limit, acceptExceeding: this.flags['accept-exceeding'] });
    if (!this.jsonEnabled()) this.log(adminQueueText(view));
    return view;
  }
}
