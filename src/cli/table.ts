import Table from 'cli-table3';
import { cellText, type CellTable } from '../views/cells.js';

/** A view's cell table as cli-table3 text: plain, no colour, so it reads the same in a log or a pipe. */
export function renderTable(t: CellTable): string {
  const table = new Table({ head: t.head, style: { head: [], border: [] } });
  for (const row of t.rows) table.push(row.map((c) => cellText(c)));
  return table.toString();
}
