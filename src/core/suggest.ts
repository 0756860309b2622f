/** Edit distance (insertions, deletions, substitutions) between two strings. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/**
 * The command closest to what was typed, or undefined when none is close enough to be a typo.
 * Each command (words) is compared with as many typed words as it has, so `flet drain r1` finds
 * `fleet drain`; a command is close when at most a third of its letters (at least one) differ.
 */
export function closestCommand(typed: string[], commands: string[][]): string[] | undefined {
  let best: { command: string[]; distance: number } | undefined;
  for (const command of commands) {
    if (command.length > typed.length) continue;
    const want = command.join(' ');
    const distance = editDistance(typed.slice(0, command.length).join(' '), want);
    if (distance > Math.max(1, Math.floor(want.length / 3))) continue;
    if (!best || distance < best.distance || (distance === best.distance && command.length > best.command.length)) best = { command, distance };
  }
  return best?.command;
}
