// 010 (PostgreSQL's m015): the catch-up's cursor on the change, recorded with each batch as the scan's is. Additive
// (NULL, a previous release never names it). No index: the scan's read of the open intents after a cursor is one
// range of ix_intents_partition_scheduled (partition_no, status, intent_id, …) per partition and unsettled status
// (InnoDB has no partial index; that index already orders each (partition, status) by id). Idempotent (addColumn.ts).
import { addColumnUnlessPresent } from './addColumn.js';

export const m010LargeTableChange = addColumnUnlessPresent('submission_manager_partition_changes', 'catch_up_cursor',
  'CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL');
