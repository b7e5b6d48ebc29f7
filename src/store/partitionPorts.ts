// Partition port (issue 25): the partition count the database records, one row per database (partitions divide its
// intents table). Every dialect implements it (postgres/, mssql/, mysql/ partitionStore.ts); test/store/
// partitionContract.test.ts runs the same cases on each. Same rules as ports.ts: database time only; ordinary
// outcomes are values; failures throw StoreError.

/** Width of submission_intents.partition_key in characters (Unicode code points, as PostgreSQL's and MySQL's varchar
 *  and JSON Schema's maxLength count them). SQL Server's nvarchar counts UTF-16 code units: its column is twice as wide. */
export const PARTITION_KEY_MAX_LENGTH = 128;

/** The recorded partition count. Issue 26 changes `count` in place (a fenced step); nothing else writes the row. */
export interface PartitionCount {
  count: number;
  /** Database time when it was recorded. */
  recordedAt: Date;
  /** Who recorded it: the holder id of the first process that started on this database, or `migration` when
   *  the partitions migration found intents already there (they are all partition 0, so the count is 1). */
  recordedBy: string;
}

export interface PartitionStore {
  /** Records `count` unless a count is recorded already (a conditional insert: of concurrent first calls exactly one
   *  records), then returns the count as recorded: `count` itself, or the one that was there or won the race. */
  recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount>;
}
