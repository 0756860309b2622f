// Measures how evenly rendezvous hashing spreads the 64 shards over 2..16 replicas, over many
// random memberships of realistic ids (hostname-<6 hex>). Run after `npm run build`:
//   node scripts/rendezvous-spread.mjs [samples]
import { randomBytes } from 'node:crypto';
import { shardSpread } from '../dist/src/core/rendezvous.js';

const samples = Number(process.argv[2] ?? 2000);
const rows = [];
for (let n = 2; n <= 16; n++) {
  let minSum = 0, maxSum = 0, sdSum = 0, worstMin = Infinity, worstMax = 0;
  for (let i = 0; i < samples; i++) {
    const ids = Array.from({ length: n }, (_, k) => `host${k}-${randomBytes(3).toString('hex')}`);
    const s = shardSpread(ids);
    minSum += s.min; maxSum += s.max; sdSum += s.stddev;
    worstMin = Math.min(worstMin, s.min); worstMax = Math.max(worstMax, s.max);
  }
  rows.push({ replicas: n, fair: +(64 / n).toFixed(2), minMean: +(minSum / samples).toFixed(1), minWorst: worstMin, maxMean: +(maxSum / samples).toFixed(1), maxWorst: worstMax, stddevMean: +(sdSum / samples).toFixed(2) });
}
console.log(`| replicas | fair share | min (mean / worst) | max (mean / worst) | stddev (mean) |`);
console.log(`|---:|---:|---:|---:|---:|`);
for (const r of rows) console.log(`| ${r.replicas} | ${r.fair} | ${r.minMean} / ${r.minWorst} | ${r.maxMean} / ${r.maxWorst} | ${r.stddevMean} |`);
console.log(JSON.stringify({ samples, rows }));
