import type { Pool } from '../../src/store/pool.js';

/**
 * Everything a migration decides about the public schema, as sorted lines: tables with their
 * storage options, columns (position, type, nullability, default), indexes (their full definition:
 * method, columns, partial predicate) with their options, constraints, sequences, functions,
 * triggers and views. Two databases with equal catalogs have the same schema.
 */
export async function schemaCatalog(pool: Pool): Promise<string[]> {
  const q = async (sql: string) => (await pool.query<{ line: string }>(sql)).rows.map((r) => r.line);
  const parts = await Promise.all([
    q(`SELECT format('table %s kind=%s options=%s', c.relname, c.relkind, coalesce(array_to_string(c.reloptions, ','), '')) AS line
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm') AND c.relname <> 'opschain_migrations'`),
    q(`SELECT format('column %s.%s #%s %s notnull=%s default=%s identity=%s', c.relname, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod),
                     a.attnotnull, coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity) AS line
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped AND c.relname <> 'opschain_migrations'`),
    q(`SELECT format('index %s options=%s', pg_get_indexdef(i.indexrelid), coalesce(array_to_string(ic.reloptions, ','), '')) AS line
         FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname <> 'opschain_migrations'`),
    q(`SELECT format('constraint %s.%s %s %s deferrable=%s', c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid), k.condeferrable) AS line
         FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname <> 'opschain_migrations'`),
    q(`SELECT format('sequence %s %s start=%s inc=%s min=%s max=%s cycle=%s owned_by=%s', s.sequencename, s.data_type, s.start_value, s.increment_by,
                     s.min_value, s.max_value, s.cycle,
                     coalesce((SELECT t.relname || '.' || a.attname FROM pg_depend d JOIN pg_class t ON t.oid = d.refobjid
                                 JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                                WHERE d.objid = format('%I.%I', s.schemaname, s.sequencename)::regclass AND d.deptype = 'a'), '')) AS line
         FROM pg_sequences s WHERE s.schemaname = 'public'`),
    q(`SELECT format('function %s', pg_get_functiondef(p.oid)) AS line
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'`),
    q(`SELECT format('trigger %s.%s %s', c.relname, t.tgname, pg_get_triggerdef(t.oid)) AS line
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND NOT t.tgisinternal`),
    q(`SELECT format('view %s %s', viewname, definition) AS line FROM pg_views WHERE schemaname = 'public'`),
    q(`SELECT format('type %s %s', t.typname, t.typtype) AS line
         FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd', 'c') AND t.typrelid = 0`),
  ]);
  return parts.flat().sort();
}
