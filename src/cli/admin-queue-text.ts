import { lanesTable, leasesTable, postureBanners, projectsTable, replicasTable, triggerLines, verdictsTable, type AdminQueueView } from '../views/admin-queue.js';
import { cellText, count, durationText } from '../views/cells.js';
import { runnersTable } from '../views/runners.js';
import { renderTable } from './table.js';

/** The plain rendering: banners, then one table per section, each from the shared view-model. */
export function adminQueueText(v: AdminQueueView): string {
  const out: string[] = [];
  for (const b of postureBanners(v)) out.push(b.text);
  out.push(renderTable(lanesTable(v)));
  const projects = projectsTable(v);
  if (projects.rows.length) out.push(`deliveries in the last ${durationText(v.deliveries.windowMs)}: ${v.deliveries.total}`, renderTable(projects));
  if (v.pools.length) out.push(`pools: ${v.pools.map((p) => `${p.name} ${p.held}/${p.limit}`).join(', ')}`);
  if (v.leases.total === 0) out.push('no live leases');
  else out.push(renderTable(leasesTable(v)), `${v.leases.total} leases${v.leases.shown < v.leases.total ? ` (${v.leases.shown} shown, --limit)` : ''}`);
  if (v.waiting.groups.length) {
    out.push(renderTable(verdictsTable(v)));
    if (v.waiting.sampled) out.push(`verdicts counted over the queue's head: ${v.waiting.sampleSize} of ${cellText(count(v.waiting.ready, 'normal', v.waiting.readyEstimated))} ready entries`);
  } else out.push('queue empty');
  if (v.runners.length) out.push(renderTable(runnersTable(v)));
  out.push(renderTable(replicasTable(v)));
  out.push(`leader: ${v.leader?.replicaId ?? 'none'}; shards owned: ${v.shards.filter((s) => s !== null).length}/${v.shards.length}`);
  for (const t of triggerLines(v)) out.push(t.text);
  for (const d of v.postures.drains) out.push(`drained ${d.kind} ${d.name}${d.reason ? `: ${d.reason}` : ''}${d.actor ? ` by ${d.actor}` : ''}${d.ageMs !== null ? ` ${durationText(d.ageMs)} ago` : ''}`);
  return out.join('\n');
}
