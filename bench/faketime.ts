import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Where Debian's libfaketime puts its preload library, by architecture. */
const CANDIDATES = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1', '/usr/local/lib/faketime/libfaketime.so.1'];

export function findLibfaketime(): string | undefined {
  return CANDIDATES.find((p) => existsSync(p));
}

/**
 * libfaketime, installed from Debian's packages when it is missing and we are root; otherwise
 * undefined with the reason, for the caller to say plainly.
 */
export function ensureLibfaketime(log: (line: string) => void): { lib: string } | { lib: undefined; reason: string } {
  const found = findLibfaketime();
  if (found) return { lib: found };
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) return { lib: undefined, reason: 'libfaketime is not installed and this is not a root Debian shell (apt-get install -y libfaketime)' };
  log('installing libfaketime (apt-get install -y libfaketime) for the clock-skew faults');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = spawnSync('apt-get', ['install', '-y', '-qq', 'libfaketime'], { stdio: 'ignore', env });
  if (r.status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore', env });
    r = spawnSync('apt-get', ['install', '-y', '-qq', 'libfaketime'], { stdio: 'ignore', env });
  }
  const lib = findLibfaketime();
  return lib ? { lib } : { lib: undefined, reason: `apt-get install -y libfaketime failed (exit ${r.status})` };
}

/**
 * The environment that runs a process with its wall clock moved by `seconds`. The monotonic
 * clock is left true: timers and intervals keep their length, as on a machine whose NTP is off.
 */
export function skewedEnv(lib: string, seconds: number): NodeJS.ProcessEnv {
  return { LD_PRELOAD: lib, FAKETIME: `${seconds >= 0 ? '+' : ''}${seconds}s`, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_DONT_RESET: '1' };
}
