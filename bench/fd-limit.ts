import { readFileSync } from 'node:fs';

/** This process's open-file limit (RLIMIT_NOFILE), soft and hard; Infinity for unlimited; undefined off Linux. */
export function openFileLimit(): { soft: number; hard: number } | undefined {
  try {
    const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!m) return undefined;
    const num = (v: string) => (v === 'unlimited' ? Infinity : Number(v));
    return { soft: num(m[1]), hard: num(m[2]) };
  } catch {
    return undefined;
  }
}

/**
 * Whether `needed` files can be open at once here. Node raises its own soft limit to the hard
 * limit as it starts (so `ulimit -n` in the spawning shell, or a `sh -c 'ulimit -n …'` wrapper,
 * changes nothing for it), and the servers the bench spawns are node processes too: the hard
 * limit is the bound, and only root (limits.conf, systemd's LimitNOFILE, `prlimit`) raises it.
 * Each simulated runner holds one socket in the bench and one in the server.
 */
export function openFilesProblem(needed: number): string | undefined {
  const limit = openFileLimit();
  if (!limit || limit.soft >= needed) return undefined;
  return `the open-file limit here is ${limit.soft} (hard ${limit.hard}), short of the ${needed} this fleet needs: raise the hard limit (limits.conf nofile, systemd LimitNOFILE, or prlimit --nofile as root) or pass a smaller --fleet-runners`;
}
