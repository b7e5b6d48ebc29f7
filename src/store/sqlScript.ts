// Numbered-migration scripts: the migration record every dialect lists, and the `;` splitting PostgreSQL and MySQL use.

/** One numbered migration: applied in id order, each once. */
export interface Migration {
  id: number;
  name: string;
  sql: string;
}

/** Split a script on top-level semicolons (our migrations contain no functions or quoted semicolons). */
export function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
}
