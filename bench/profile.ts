#!/usr/bin/env node
/**
 * Summarises a V8 CPU profile (`--cpu-prof`, e.g. from `npm run bench -- --cpu-prof DIR`):
 * self time per function and per package, heaviest first.
 *   node dist/bench/profile.js FILE.cpuprofile [--top N]
 */
import { readFileSync } from 'node:fs';

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
export interface CpuProfile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

export interface ProfileRow { name: string; selfMs: number; share: number }

/** Where a script lives, coarsely: a package under node_modules, node's own code, or the project. */
export function packageOf(url: string): string {
  if (!url) return '(native / idle / gc)';
  if (url.startsWith('node:')) return 'node:internal';
  const m = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (m) return m[1];
  const d = url.match(/\/dist\/(src\/[^/]+)/);
  return d ? `opschain ${d[1]}` : url.replace(/^file:\/\//, '');
}

/** Self time per key (function or package), from the sample stream. */
export function selfTimes(p: CpuProfile, key: (f: CallFrame) => string): ProfileRow[] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  let all = 0;
  p.samples.forEach((id, i) => {
    const dt = (p.timeDeltas[i] ?? 0) / 1000;
    const node = byId.get(id);
    if (!node) return;
    const k = key(node.callFrame);
    totals.set(k, (totals.get(k) ?? 0) + dt);
    all += dt;
  });
  return [...totals]
    .map(([name, selfMs]) => ({ name, selfMs, share: all > 0 ? selfMs / all : 0 }))
    .sort((a, b) => b.selfMs - a.selfMs);
}

function main(argv: string[]): number {
  const file = argv.find((a) => !a.startsWith('--'));
  const topAt = argv.indexOf('--top');
  const top = topAt >= 0 ? Number(argv[topAt + 1]) : 25;
  if (!file) {
    process.stderr.write('usage: node dist/bench/profile.js FILE.cpuprofile [--top N]\n');
    return 2;
  }
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const wall = (p.endTime - p.startTime) / 1000;
  const fmt = (rows: ProfileRow[]) => rows.slice(0, top).map((r) => `${r.selfMs.toFixed(0).padStart(8)} ms ${(r.share * 100).toFixed(1).padStart(5)}%  ${r.name}`).join('\n');
  const fn = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url ? `${packageOf(f.url)}:${f.lineNumber + 1}` : ''}`.trim();
  const rows = selfTimes(p, fn);
  const idle = rows.filter((r) => /^\((idle|program|garbage collector)\)/.test(r.name)).reduce((n, r) => n + r.selfMs, 0);
  process.stdout.write(`${file}: ${wall.toFixed(0)} ms profiled, ${idle.toFixed(0)} ms idle/program/gc\n\nby package (self time):\n${fmt(selfTimes(p, (f) => (f.url ? packageOf(f.url) : f.functionName || '(native)')))}\n\nby function (self time):\n${fmt(rows)}\n`);
  return 0;
}

if (process.argv[1] && /profile\.(js|ts)$/.test(process.argv[1])) process.exitCode = main(process.argv.slice(2));
