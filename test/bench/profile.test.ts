import { describe, expect, it } from 'vitest';
import { packageOf, selfTimes, type CpuProfile } from '../../bench/profile.js';

describe('cpu profile summary', () => {
  it('names the package a script belongs to', () => {
    expect(packageOf('file:///w/node_modules/pg-protocol/dist/parser.js')).toBe('pg-protocol');
    expect(packageOf('file:///w/node_modules/@fastify/ajv-compiler/index.js')).toBe('@fastify/ajv-compiler');
    expect(packageOf('node:internal/streams/readable')).toBe('node:internal');
    expect(packageOf('file:///w/dist/src/dispatch/dispatcher.js')).toBe('opschain src/dispatch');
    expect(packageOf('')).toBe('(native / idle / gc)');
  });

  it('sums self time per key from the sample stream, heaviest first', () => {
    const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 0 });
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 3] },
        { id: 2, callFrame: frame('parse', 'file:///w/node_modules/pg-protocol/dist/parser.js') },
        { id: 3, callFrame: frame('dispatchOnce', 'file:///w/dist/src/dispatch/dispatcher.js') },
      ],
      samples: [2, 3, 2, 2],
      timeDeltas: [1000, 2000, 1000, 1000],
      startTime: 0,
      endTime: 5000,
    };
    const rows = selfTimes(profile, (f) => f.functionName);
    expect(rows.map((r) => [r.name, r.selfMs])).toEqual([
      ['parse', 3],
      ['dispatchOnce', 2],
    ]);
    expect(rows[0].share).toBeCloseTo(0.6);
  });
});
