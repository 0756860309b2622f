import { oneLine, visibleControls } from '../core/bounds.js';

/** Colour only for a person at a terminal: never in a pipe, with NO_COLOR, on a dumb terminal. */
export function colourEnabled(stream: NodeJS.WriteStream = process.stdout): boolean {
  return Boolean(stream.isTTY) && !('NO_COLOR' in process.env && process.env.NO_COLOR !== '') && process.env.TERM !== 'dumb';
}

export type CellValue = string | number | boolean | null | undefined;

/** A cell as the terminal may show it: stored text (names, reasons, causes) never carries an escape sequence through. */
export function safeCell(c: CellValue): string {
  if (c === null || c === undefined) return '';
  return oneLine(String(c));
}

/** Columns a character takes on a terminal: 0 for combining marks and zero-width, 2 for East Asian wide and emoji. */
function charWidth(cp: number): number {
  if (cp === 0x200b || cp === 0x200c || cp === 0x200d || cp === 0xfeff || (cp >= 0x300 && cp <= 0x36f) || (cp >= 0xfe00 && cp <= 0xfe0f)) return 0;
  if (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) ||
    (cp >= 0x1f900 && cp <= 0x1f9ff) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  )
    return 2;
  return 1;
}

/** The width of text on a terminal (it holds no escape sequence: cells are sanitised first). */
export function textWidth(text: string): number {
  let w = 0;
  for (const ch of text) w += charWidth(ch.codePointAt(0) ?? 0);
  return w;
}

/** The gap between two columns. */
const GAP = '   ';

/**
 * A borderless table, as kubectl, nomad and gh print them: a head row, then one line per row,
 * columns aligned by padding, no box drawing and no rule between rows, so 200 entries are 201
 * lines. Every pushed cell goes through the terminal sanitiser here, at the rendering edge, so a
 * verb cannot forget it. The head is bold on a terminal with colour (never in a pipe or with
 * NO_COLOR), the only style a table carries.
 */
export class TextTable {
  private readonly head: string[];
  private readonly rows: string[][] = [];

  constructor(
    head: string[],
    private readonly opts: { plain?: boolean } = {},
  ) {
    this.head = head.map(oneLine);
  }

  get length(): number {
    return this.rows.length;
  }

  push(...rows: CellValue[][]): number {
    for (const row of rows) this.rows.push(row.map(safeCell));
    return this.rows.length;
  }

  /** The lines of the table without any style: what a pipe, a log and the tests see. */
  lines(): string[] {
    const all = [this.head, ...this.rows];
    const cols = Math.max(0, ...all.map((r) => r.length));
    const widths = Array.from({ length: cols }, (_, i) => Math.max(0, ...all.map((r) => textWidth(r[i] ?? ''))));
    return all.map((r) => {
      const cells = Array.from({ length: cols }, (_, i) => {
        const c = r[i] ?? '';
        return i === cols - 1 ? c : c + ' '.repeat(widths[i] - textWidth(c));
      });
      return cells.join(GAP).trimEnd();
    });
  }

  toString(): string {
    const [head, ...rest] = this.lines();
    if (head === undefined) return '';
    if (!colourEnabled() || this.opts.plain) return [head, ...rest].join('\n');
    const out = [`\x1b[1m${head}\x1b[22m`, ...rest].join('\n');
    styled.add(out);
    return out;
  }
}

/** The one table renderer of every verb: borderless aligned columns (see TextTable). */
export function table(head: string[], opts: { plain?: boolean } = {}): TextTable {
  return new TextTable(head, opts);
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
