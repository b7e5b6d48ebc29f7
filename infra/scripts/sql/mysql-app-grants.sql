-- The app identity's rights in the application database (Azure Database for MySQL), run by
-- infra/scripts/postprovision-flexible.* after CREATE AADUSER created the user; @app_user and @app_db are set first.
-- Data statements plus the DDL of the app's own migrations (it applies them at start), on its database only.
SET @grant_sql = CONCAT('GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, REFERENCES, ',
  'CREATE TEMPORARY TABLES, LOCK TABLES ON `', REPLACE(@app_db, '`', '``'), '`.* TO ', QUOTE(@app_user), '@''%''');
PREPARE grant_stmt FROM @grant_sql;
EXECUTE grant_stmt;
DEALLOCATE PREPARE grant_stmt;
