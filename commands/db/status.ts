import { table } from '../../src/cli/render.js';
import { BaseCommand } from '../../src/cli/base.js';
import { migrationStatus, type MigrationStatus } from '../../src/store/migrate.js';
import { storeTableSizes, type TableSize } from '../../src/store/retention.js';

/** 1536 → `1.5 KiB`. */
const bytesText = (n: number) => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
};

export default class DbStatus extends BaseCommand<typeof DbStatus> {
  static override description =
    'List migrations, applied and pending, and every table with its estimated rows and size on disk (indexes included), largest first: what history retention (retention.runs_days) keeps in check.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> db status', '<%= config.bin %> db status --json'];
  static override summary = 'Show migrations and table sizes';

  async run(): Promise<{ migrations: MigrationStatus[]; pending: number; tables: TableSize[] }> {
    const pool = await this.store();
    const migrations = await migrationStatus(pool);
    const pending = migrations.filter((m) => !m.applied).length;
    const tables = await storeTableSizes(pool);
    if (!this.jsonEnabled()) {
      const t = table(['id', 'name', 'state', 'applied at']);
      for (const m of migrations) t.push([m.id, m.name, m.applied ? 'applied' : 'pending', m.appliedAt ?? '']);
      this.log(t.toString());
      this.log(pending ? `${pending} pending` : 'up to date');
      const sizes = table(['table', 'rows (est.)', 'size']);
      for (const t of tables) sizes.push([t.table, t.rows, bytesText(t.bytes)]);
      this.log(sizes.toString());
    }
    return { migrations, pending, tables };
  }
}
