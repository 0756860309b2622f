import Table from 'cli-table3';

/** Colour only for a person at a terminal: never in a pipe, with NO_COLOR, on a dumb terminal. */
export function colourEnabled(stream: NodeJS.WriteStream = process.stdout): boolean {
  return Boolean(stream.isTTY) && !('NO_COLOR' in process.env && process.env.NO_COLOR !== '') && process.env.TERM !== 'dumb';
}

/** A table with headers in a neutral tone (bold on a terminal, plain otherwise) and no coloured borders. */
export function table(head: string[]): InstanceType<typeof Table> {
  return new Table({ head, style: { head: colourEnabled() ? ['bold'] : [], border: [] } });
}
