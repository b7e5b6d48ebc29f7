// 013 (PostgreSQL's m019): ix_intents_status_id (status, intent_id): the API list filtered by status reads its page as
// one range of this index from the cursor, in id order, instead of walking the primary key from the oldest intent past
// every row of another status; the dashboard's recent failures read only the failed intents' entries of it (then sort
// those), never the settled rows of a partition. Additive (a new index no statement of a previous release names).
// Idempotent: added when information_schema lacks it (MySQL 8 has no ADD INDEX IF NOT EXISTS).
import { ddlUnless } from './addColumn.js';

export const m013StatusIndex = ddlUnless(`SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
    AND table_name = 'submission_intents' AND index_name = 'ix_intents_status_id'`,
`ALTER TABLE submission_intents ADD INDEX ix_intents_status_id (status, intent_id)`);
