import { cellText, type CellTable } from '../views/cells.js';
import { table } from './render.js';

/** A view's cell table as cli-table3 text: plain, no colour, so it reads the same in a log or a pipe; cells sanitised by `table`. */
export function renderTable(t: CellTable): string {
  const out = table(t.head, { plain: true });
  for (const row of t.rows) out.push(row.map((c) => cellText(c)));
  return out.toString();
}
