import { BaseCommand } from '../../src/cli/base.js';
import { renderTable } from '../../src/cli/table.js';
import { storeNow } from '../../src/store/coordination.js';
import { fleetRead } from '../../src/store/fleet.js';
import { buildRunners, runnersTable, type RunnersView } from '../../src/views/runners.js';

export default class FleetRunners extends BaseCommand<typeof FleetRunners> {
  static override description =
    'The runner registry: every runner with its group, load used of its max_load, live leases, state (online, watch after one silent poll window, offline after two), whether it is drained (itself or through its group) and when it was last seen. These are the facts placement matches against.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet runners', '<%= config.bin %> fleet runners --json | jq \'.runners[] | select(.drained)\''];
  static override summary = 'The runner registry: group, load, state, drained, last seen';

  async run(): Promise<RunnersView> {
    const pool = await this.store();
    const [runners, now] = await Promise.all([fleetRead(pool), storeNow(pool)]);
    const view = buildRunners(runners, now);
    if (!this.jsonEnabled()) {
      if (view.runners.length === 0) this.log('no runners registered');
      else this.log(renderTable(runnersTable(view)));
      const s = view.summary;
      this.log(`${s.total} runners: ${s.online} online, ${s.watch} watch, ${s.offline} offline, ${s.drained} drained; load ${Math.round(s.loadUsed * 100) / 100}/${Math.round(s.loadMax * 100) / 100}`);
    }
    return view;
  }
}
