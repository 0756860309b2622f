import { Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { Invalid } from '../../src/errors.js';
import { adminQueueText } from '../../src/cli/admin-queue-text.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class AdminQueue extends OpsCommand<typeof AdminQueue> {
  static override description =
    'The aggregate queue: per lane the ready depth, leases and oldest wait (exact up to a bound, "~" marks a statistics estimate beyond it), each project\'s weight, stride pass and share of the last minute\'s deliveries; pools; every live lease oldest first; replicas, shards and the leader; postures and drains; ready entries counted by verdict. One consistent snapshot in a fixed handful of statements however deep the queue. --watch opens the live dashboard (docs/console.md); without a terminal it prints one NDJSON snapshot per interval.';
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> admin queue',
    '<%= config.bin %> admin queue --json | jq .lanes',
    '<%= config.bin %> admin queue --watch',
    '<%= config.bin %> admin queue --watch --interval 5 > queue.ndjson',
    '<%= config.bin %> admin queue --watch --server https://opschain.internal:7420 --token "$OPSCHAIN_TOKEN"',
  ];
  static override flags = {
    'accept-exceeding': Flags.boolean({ description: 'judge oversized steps as the servers do (their dispatch.accept_exceeding)', allowNo: true, default: true, env: 'OPSCHAIN_ACCEPT_EXCEEDING' }),
    interval: Flags.string({ description: 'with --watch: seconds between refreshes (store changes wake it sooner)', default: '1' }),
    'listen-database-url': Flags.string({ description: 'with --watch: a direct session for LISTEN when the store URL is a transaction pooler (PgBouncer), as the servers\' listen_database_url', env: 'OPSCHAIN_LISTEN_DATABASE_URL' }),
    limit: Flags.integer({ description: 'list at most this many leases, oldest first (all are counted)', default: 100, min: 1, max: 10_000 }),
    watch: Flags.boolean({ description: 'the live dashboard; without a terminal, one NDJSON line per interval', default: false }),
  };
  static override summary = 'Lanes, leases, shards, verdicts and runners at a glance (--watch: live dashboard)';

  async run(): Promise<OpsOutput<'adminQueue'> | undefined> {
    const interval = Number(this.flags.interval);
    if (!Number.isFinite(interval) || interval < 0.2 || interval > 3600) throw new Invalid(`--interval: expected seconds between 0.2 and 3600, got '${this.flags.interval}'`);
    const ops = await this.ops();
    const acceptExceeding = this.flags['accept-exceeding'];
    if (this.flags.watch) {
      // The dashboard and its LISTEN connection load only for --watch: a one-shot read stays light.
      const [{ opsConsoleSource }, { runConsole }] = await Promise.all([import('../../src/cli/console-source.js'), import('../../src/tui/index.js')]);
      const server = this.flags.server?.replace(/\/+$/, '');
      const source = opsConsoleSource({ ops, acceptExceeding, server, databaseUrl: server ? undefined : this.databaseUrl(), listenDatabaseUrl: this.flags['listen-database-url'] });
      await runConsole({ source, intervalMs: Math.round(interval * 1000), limit: this.flags.limit, mode: this.jsonEnabled() ? 'ndjson' : 'auto' });
      return undefined;
    }
    const view = await ops.adminQueue({ limit: this.flags.limit, acceptExceeding });
    if (!this.jsonEnabled()) this.log(adminQueueText(view));
    return view;
  }
}
