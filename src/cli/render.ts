import Table from 'cli-table3';
import { oneLine, visibleControls } from '../core/bounds.js';

/** Colour only for a person at a terminal: never in a pipe, with NO_COLOR, on a dumb terminal. */
export function colourEnabled(stream: NodeJS.WriteStream = process.stdout): boolean {
  return Boolean(stream.isTTY) && !('NO_COLOR' in process.env && process.env.NO_COLOR !== '') && process.env.TERM !== 'dumb';
}

type Row = Table.HorizontalTableRow | Table.VerticalTableRow | Table.CrossTableRow;

/** A cell as the terminal may show it: stored text (names, reasons, causes) never carries an escape sequence through. */
export function safeCell(c: Table.Cell): Table.Cell {
  if (typeof c === 'string') return oneLine(c);
  if (c !== null && typeof c === 'object') return { ...c, content: typeof c.content === 'string' ? oneLine(c.content) : c.content };
  return c;
}

function safeRow(row: Row): Row {
  if (Array.isArray(row)) return row.map(safeCell);
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [oneLine(k), Array.isArray(v) ? v.map(safeCell) : safeCell(v)])) as Row;
}

/**
 * A table with headers in a neutral tone (bold on a terminal, plain otherwise) and no coloured
 * borders. Every pushed cell goes through the terminal sanitiser here, at the rendering edge, so a
 * verb cannot forget it; the bold of the head is added after, by cli-table3, and stays ours.
 */
export function table(head: string[], opts: { plain?: boolean } = {}): InstanceType<typeof Table> {
  const t = new Table({ head: head.map(oneLine), style: { head: colourEnabled() && !opts.plain ? ['bold'] : [], border: [] } });
  const push = t.push.bind(t);
  t.push = (...rows: Row[]) => push(...rows.map(safeRow));
  const render = t.toString.bind(t);
  t.toString = () => {
    const out = render();
    if (out.includes('\x1b')) styled.add(out);
    return out;
  };
  return t;
}

/**
 * Table renderings that carry our own head style (bold on a terminal). Their cells were made safe
 * as they were pushed, so `terminalSafe` passes them whole instead of escaping the style away.
 */
const styled = new Set<string>();

/**
 * What a verb prints for a person, as the terminal may show it: every control character and
 * escape sequence in it shown as text (core/bounds.ts visibleControls), except the head style of
 * a table this module rendered. BaseCommand's `log` and `logToStderr` pass everything through
 * here, so a stored name, reason or cause printed on any line reaches the terminal inert.
 */
export function terminalSafe(message: string): string {
  return styled.delete(message) ? message : visibleControls(message);
}
