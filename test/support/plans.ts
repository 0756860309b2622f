import type { PoolClient } from '../../src/store/pool.js';

export interface PlanNode { 'Node Type': string; 'Index Name'?: string; 'Relation Name'?: string; 'Actual Loops'?: number; 'CTE Name'?: string; Plans?: PlanNode[] }

const nodesOf = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodesOf)];

function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return literal(`{${v.map((x) => (x === null ? 'NULL' : `"${String(x).replace(/["\\]/g, '\\$&')}"`)).join(',')}}`);
  return `'${String(v).replace(/'/g, "''")}'`;
}

/**
 * The plan the server's prepared statement settles on (generic), executed for real inside a
 * transaction that is rolled back: `call` runs the store function once to capture its statement.
 */
export async function genericPlan(client: PoolClient, call: (c: PoolClient) => Promise<unknown>): Promise<PlanNode[]> {
  let statement: { text: string; values: unknown[] } | undefined;
  const original = client.query.bind(client) as (...x: unknown[]) => Promise<unknown>;
  (client as unknown as { query: (...x: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const q = args[0] as { text?: string; values?: unknown[] };
    if (typeof q === 'object' && q.text && !statement) statement = { text: q.text, values: q.values ?? [] };
    return original(...args);
  };
  try {
    await original('BEGIN');
    await call(client);
    await original('ROLLBACK');
  } finally {
    (client as unknown as { query: unknown }).query = original;
  }
  await client.query('BEGIN');
  try {
    await client.query(`SET LOCAL plan_cache_mode = force_generic_plan`);
    await client.query(`PREPARE roll_up AS ${statement!.text}`);
    // EXECUTE takes no bound parameters: the test's own values are written out as literals.
    const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE roll_up(${statement!.values.map(literal).join(', ')})`);
    return nodesOf(rows[0]['QUERY PLAN'][0].Plan as PlanNode);
  } finally {
    await client.query('ROLLBACK');
    await client.query('DEALLOCATE ALL');
  }
}
