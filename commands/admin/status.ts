import { table } from '../../src/cli/render.js';
import { OpsCommand } from '../../src/cli/base.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { statusRows, statusSummary } from '../../src/views/status.js';

export default class AdminStatusCommand extends OpsCommand<typeof AdminStatusCommand> {
  static override description = 'Every replica with its site, heartbeat age, state (live, dead, quiesced, stopped) and the shards it owns; the leader; the fleet postures.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin status', '<%= config.bin %> admin status --json'];
  static override summary = 'Replicas, shard ownership, leader, postures';

  async run(): Promise<OpsOutput<'adminStatus'>> {
    const status = await (await this.ops()).adminStatus({});
    if (!this.jsonEnabled()) {
      const t = table(['replica', 'site', 'state', 'heartbeat', 'shards', 'leader', 'address']);
      for (const r of statusRows(status)) t.push([r.replica, r.site, r.state, r.heartbeat, r.shards, r.leader, r.address]);
      this.log(t.toString());
      for (const line of statusSummary(status)) this.log(line);
    }
    return status;
  }
}
