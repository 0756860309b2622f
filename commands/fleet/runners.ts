import { OpsCommand } from '../../src/cli/base.js';
import { renderTable } from '../../src/cli/table.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { runnersTable } from '../../src/views/runners.js';

export default class FleetRunners extends OpsCommand<typeof FleetRunners> {
  static override description =
    'The runner registry: every runner with its group, load used of its max_load, live leases, state (online, watch after one silent poll window, offline after two), whether it is drained (itself or through its group), when it was last seen and the registration token it registered with (tokens list shows the groups that token may join). These are the facts placement matches against.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet runners', '<%= config.bin %> fleet runners --json | jq \'.runners[] | select(.drained)\'', '<%= config.bin %> fleet runners --server https://opschain.internal:7420 --token "$OPSCHAIN_TOKEN"'];
  static override summary = 'The runner registry: group, load, state, drained, last seen';

  async run(): Promise<OpsOutput<'fleetRunners'>> {
    const view = await (await this.ops()).fleetRunners({});
    if (!this.jsonEnabled()) {
      if (view.runners.length === 0) this.log('no runners registered');
      else this.log(renderTable(runnersTable(view, { token: true })));
      const s = view.summary;
      this.log(`${s.total} runners: ${s.online} online, ${s.watch} watch, ${s.offline} offline, ${s.drained} drained; load ${Math.round(s.loadUsed * 100) / 100}/${Math.round(s.loadMax * 100) / 100}`);
    }
    return view;
  }
}
