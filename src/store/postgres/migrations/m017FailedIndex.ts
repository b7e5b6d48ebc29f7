// 017: nothing on PostgreSQL. SQL Server's m017 (a filtered index for its recent failures and redrive, whose plans
// cannot use PostgreSQL's per-partition ranges the same way) takes the number; the dialects keep one numbering.
export const m017FailedIndex = '';
