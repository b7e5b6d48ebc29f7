-- The app identity's rights in the application database (Azure Database for PostgreSQL), run by
-- infra/scripts/postprovision-flexible.* with psql -v app_role=<database user> -v app_db=<database>, after
-- pgaadauth_create_principal_with_oid created the role. Only what the app needs: connect, and create its own
-- tables in the public schema (it applies its migrations at start, so it owns every table it uses).
-- test/system/entraTokens.test.ts runs this same file against a local server before starting the app.
GRANT CONNECT, TEMPORARY ON DATABASE :"app_db" TO :"app_role";
GRANT USAGE, CREATE ON SCHEMA public TO :"app_role";
