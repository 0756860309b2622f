import { Box, Text } from 'ink';
import { oneLine } from '../core/bounds.js';
import type { Tone } from '../views/cells.js';
import type { Line } from './lines.js';
import { screenLines, type ScreenProps } from './screen.js';

const TONE_COLOURS: Record<Tone, string | undefined> = { normal: undefined, ok: 'green', warn: 'yellow', bad: 'red', muted: 'gray', accent: 'cyan' };
/** Owners of the shard grid, in replica order; the letters carry the identity when colour is off. */
const OWNER_COLOURS = ['cyan', 'magenta', 'green', 'yellow', 'blue', 'red', 'white', 'cyanBright', 'magentaBright', 'greenBright'];

/**
 * One line of segments; with colour off only bold and inverse remain (NO_COLOR). Every segment's
 * text passes the terminal sanitiser here, the dashboard's one rendering edge: names, reasons and
 * causes in a snapshot come from the store, and Ink writes text as it is given.
 */
export function LineView({ line, color }: { line: Line; color: boolean }) {
  return (
    <Text wrap="truncate">
      {line.length === 0 ? ' ' : null}
      {line.map((s, i) => {
        const c = !color ? undefined : s.owner !== undefined ? OWNER_COLOURS[s.owner % OWNER_COLOURS.length] : s.tone ? TONE_COLOURS[s.tone] : undefined;
        return (
          <Text key={i} color={c} bold={s.bold} inverse={s.inverse}>
            {oneLine(s.text)}
          </Text>
        );
      })}
    </Text>
  );
}

/** The whole dashboard for one snapshot and UI state: a pure function of its props. */
export function Screen(props: ScreenProps & { color: boolean }) {
  const lines = screenLines(props);
  return (
    <Box flexDirection="column" width={props.columns}>
      {lines.map((l, i) => (
        <LineView key={i} line={l} color={props.color} />
      ))}
    </Box>
  );
}
