// 009 (PostgreSQL's m014): the layout generation, raised by 1 by a change's fenced switch and sent to the provider
// beside partition and epoch (docs/provider-fencing.md). Additive (default 0). MySQL 8 has no ADD COLUMN IF NOT
// EXISTS (MariaDB has): added by a prepared statement only when information_schema lacks it, so it stays idempotent.
// (The text addColumnUnlessPresent builds is this migration's exactly as released.)
import { addColumnUnlessPresent } from './addColumn.js';

export const m009LayoutGeneration = addColumnUnlessPresent('submission_manager_partition_count', 'layout_generation', 'BIGINT NOT NULL DEFAULT 0');
