import { render, useApp, useInput, useStdout } from 'ink';
import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from 'react';
import { ConsoleFeed } from './feed.js';
import { whatIfLine } from '../views/fleet-demand.js';
import { reduceKey, type Effect, type KeyPress } from './keys.js';
import { INITIAL_UI, visibleView, type UiState } from './screen.js';
import { Screen } from './screen-view.js';
import type { ConsoleSource } from './source.js';

/** Enter the alternate screen and hide the cursor; leave it and show the cursor again. */
const ENTER = '\x1b[?1049h\x1b[?25l\x1b[H';
const LEAVE = '\x1b[?25h\x1b[?1049l';

interface AppProps {
  feed: ConsoleFeed;
  source: ConsoleSource;
  color: boolean;
}

function useTerminalSize(): { rows: number; columns: number } {
  const { stdout } = useStdout();
  const read = () => ({ rows: stdout.rows || 24, columns: stdout.columns || 80 });
  const [size, setSize] = useState(read);
  useEffect(() => {
    const onResize = () => setSize(read());
    stdout.on('resize', onResize);
    return () => {
      stdout.off('resize', onResize);
    };
  }, [stdout]);
  return size;
}

/**
 * Ink hands keys typed faster than it reads (or pasted) over as one string: take them one by one,
 * so three quick Tabs move three panes.
 */
export function splitKeys(input: string, key: Omit<KeyPress, 'input'>): KeyPress[] {
  const plain = !key.ctrl && !key.upArrow && !key.downArrow && !key.leftArrow && !key.rightArrow && !key.escape;
  if (!plain || input.length <= 1) return [{ input, ...key }];
  return [...input].map((ch): KeyPress => {
    if (ch === '\t') return { input: '', tab: true };
    if (ch === '\r' || ch === '\n') return { input: '', return: true };
    if (ch === '\x7f' || ch === '\b') return { input: '', backspace: true };
    return { input: ch };
  });
}

/** The stateful shell: UI state, keys, the clock of the header; the screen itself is pure. */
function App({ feed, source, color }: AppProps) {
  const { exit } = useApp();
  const state = useSyncExternalStore(
    useCallback((fn: () => void) => feed.onChange(fn), [feed]),
    () => feed.current,
  );
  const [ui, setUiState] = useState<UiState>(INITIAL_UI);
  // Keys can arrive faster than renders: each reads the state the previous key left.
  const uiRef = useRef<UiState>(INITIAL_UI);
  const setUi = (next: UiState | ((u: UiState) => UiState)) => {
    uiRef.current = typeof next === 'function' ? next(uiRef.current) : next;
    setUiState(uiRef.current);
  };
  const [now, setNow] = useState(() => Date.now());
  const size = useTerminalSize();

  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(t);
  }, []);
  useEffect(() => setNow(Date.now()), [state]);

  const run = (effect: Effect) => {
    switch (effect.kind) {
      case 'quit':
        exit();
        return;
      case 'pause':
        feed.setPaused(effect.paused);
        return;
      case 'refresh':
        feed.wake();
        return;
      case 'drain':
        source
          .drain({ runner: effect.runnerId, drained: effect.drained, reason: effect.drained ? 'drained from the console' : undefined })
          .then((r) => {
            const what = `runner ${effect.runnerName}`;
            setUi((u) => ({ ...u, message: { text: r.changed ? `${what} ${r.drained ? 'drained' : 'undrained'}` : `${what} already ${r.drained ? 'drained' : 'undrained'}`, tone: 'ok' } }));
            feed.wake();
          })
          .catch((err: Error) => setUi((u) => ({ ...u, message: { text: `${effect.drained ? 'drain' : 'undrain'} failed: ${err.message}`, tone: 'bad' } })));
        return;
      case 'whatIf':
        if (!source.whatIf) {
          setUi((u) => ({ ...u, message: { text: 'what-if is not available from this source', tone: 'warn' } }));
          return;
        }
        source
          .whatIf({ runner: effect.runnerId, drained: effect.drained })
          .then((v) => setUi((u) => ({ ...u, message: { text: whatIfLine(effect.runnerName, effect.drained, v), tone: v.orphaned.length || v.stalled.length ? 'warn' : 'ok' } })))
          .catch((err: Error) => setUi((u) => ({ ...u, message: { text: `what-if failed: ${err.message}`, tone: 'bad' } })));
        return;
    }
  };

  useInput((input, key) => {
    for (const k of splitKeys(input, key)) {
      const current = uiRef.current;
      const { ui: next, effect } = reduceKey(current, k, visibleView(feed.current, current));
      setUi(next);
      if (effect) run(effect);
      if (effect?.kind === 'quit') return;
    }
  });

  return <Screen feed={state} ui={ui} rows={size.rows} columns={size.columns} now={now} sourceName={source.name} color={color} />;
}

export interface DashboardOptions {
  source: ConsoleSource;
  intervalMs: number;
  limit: number;
  stdout: NodeJS.WriteStream;
  stdin: NodeJS.ReadStream;
}

/**
 * The live dashboard on the alternate screen until the operator quits. Every exit path (q,
 * Ctrl-C, SIGTERM, SIGHUP, an uncaught error) leaves the alternate screen and shows the cursor.
 */
export async function runDashboard(opts: DashboardOptions): Promise<void> {
  const feed = new ConsoleFeed({ source: opts.source, intervalMs: opts.intervalMs, limit: opts.limit });
  const color = !('NO_COLOR' in process.env) || process.env.NO_COLOR === '';
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    opts.stdout.write(LEAVE);
  };
  opts.stdout.write(ENTER);
  process.on('exit', restore);
  const app = render(<App feed={feed} source={opts.source} color={color} />, {
    stdout: opts.stdout,
    stdin: opts.stdin,
    exitOnCtrlC: false,
    patchConsole: true,
    incrementalRendering: false,
    maxFps: 20,
  });
  const quit = () => app.unmount();
  const crash = (err: unknown) => {
    app.unmount();
    restore();
    process.stderr.write(`opschain console: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  };
  process.on('SIGTERM', quit);
  process.on('SIGHUP', quit);
  process.on('SIGINT', quit);
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  feed.start();
  try {
    await app.waitUntilExit();
  } finally {
    process.off('SIGTERM', quit);
    process.off('SIGHUP', quit);
    process.off('SIGINT', quit);
    process.off('uncaughtException', crash);
    process.off('unhandledRejection', crash);
    await feed.stop();
    restore();
    process.off('exit', restore);
  }
}
