import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { adminStatusRead, type AdminStatus } from '../../src/coordination/status.js';
import { statusRows, statusSummary } from '../../src/views/status.js';

export default class AdminStatusCommand extends BaseCommand<typeof AdminStatusCommand> {
  static override description = 'Every replica with its site, heartbeat age, state (live, dead, quiesced, stopped) and the shards it owns; the leader; the fleet postures.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin status', '<%= config.bin %> admin status --json'];
  static override summary = 'Replicas, shard ownership, leader, postures';

  async run(): Promise<AdminStatus> {
    const status = await adminStatusRead(await this.store());
    if (!this.jsonEnabled()) {
      const table = new Table({ head: ['replica', 'site', 'state', 'heartbeat', 'shards', 'leader', 'address'] });
      for (const r of statusRows(status)) table.push([r.replica, r.site, r.state, r.heartbeat, r.shards, r.leader, r.address]);
      this.log(table.toString());
      for (const line of statusSummary(status)) this.log(line);
    }
    return status;
  }
}
