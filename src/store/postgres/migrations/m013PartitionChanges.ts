// 013: changes of the partition count (issue 26; port: src/store/partitionPorts.ts). One row per requested change,
// preparing → pending → reassigning → completed, never deleted (the history the ops page lists). At most one change
// is active (preparing counts): the unique partial index on a constant admits one row whose state is not 'completed'
// (the database enforces what requestChange's lock on the count row already serialises), and it is the index "the
// active change" reads. Newest first: the index on requested_at. Both tiny: a change is a rare operator action.
export const m013PartitionChanges = `
CREATE TABLE IF NOT EXISTS submission_manager_partition_changes (
  change_id     uuid         PRIMARY KEY,
  from_count    smallint     NOT NULL CHECK (from_count >= 1),
  to_count      smallint     NOT NULL CHECK (to_count >= 1),
  state         varchar(16)  NOT NULL CHECK (state IN ('preparing', 'pending', 'reassigning', 'completed')),
  requested_at  timestamptz  NOT NULL,
  requested_by  varchar(128) NOT NULL,
  prepare_cursor uuid        NULL,
  prepared_at   timestamptz  NULL,
  changer       varchar(128) NULL,
  claimed_at    timestamptz  NULL,
  switched_at   timestamptz  NULL,
  scan_cursor   uuid         NULL,
  scan_done_at  timestamptz  NULL,
  rows_moved    bigint       NOT NULL DEFAULT 0,
  completed_at  timestamptz  NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS ux_partition_changes_active ON submission_manager_partition_changes ((true))
  WHERE state <> 'completed';
CREATE INDEX IF NOT EXISTS ix_partition_changes_requested ON submission_manager_partition_changes (requested_at DESC, change_id DESC);
`;
