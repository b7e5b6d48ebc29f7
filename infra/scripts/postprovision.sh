#!/usr/bin/env bash
# azd postprovision hook (POSIX). Safe to run again: every step is idempotent.
#   1. checks tools and that your az login can get an Entra token for Azure SQL;
#   2. opens a temporary firewall rule for your own IP (removed on exit, even on failure);
#   3. creates the contained database user for the app's managed identity and grants it
#      db_datareader, db_datawriter and db_ddladmin (ddladmin because the app's migrations run as it;
#      operators may drop it after migrating — see docs/deploy.md);
#   4. runs the app's migrations (npm run migrate) with Entra auth as you.
# Run by hand: `azd hooks run postprovision` (or `bash infra/scripts/postprovision.sh` inside the repo).
# Knobs: SQL_CLIENT_IP=<ip> overrides IP detection; SQL_SKIP_CLIENT_FIREWALL_RULE=true skips step 2
# (use when you reach the server another way, e.g. a private endpoint).
set -euo pipefail

cd "$(dirname "$0")/../.."

# shellcheck source=hook-common.sh
source infra/scripts/hook-common.sh

# PostgreSQL and MySQL flexible servers (DATABASE_ENGINE) have a hook of their own; Azure SQL goes on below.
ENGINE="${DATABASE_ENGINE:-}"
if [ -z "$ENGINE" ] && command -v azd >/dev/null 2>&1; then ENGINE="$(azd env get-value DATABASE_ENGINE 2>/dev/null || true)"; fi
case "$ENGINE" in
  postgresql|mysql) exec bash infra/scripts/postprovision-flexible.sh ;;
esac

IDENTITY_NAME="$(env_value AZURE_USER_ASSIGNED_IDENTITY_NAME)"
IDENTITY_CLIENT_ID="$(env_value AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID)"
# The identity's object id: CREATE USER … WITH OBJECT_ID needs no Microsoft Graph lookup, so a service principal
# without Graph permissions (CI) can run this as the SQL Entra admin.
IDENTITY_PRINCIPAL_ID="$(env_value AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID)"
[[ "$IDENTITY_PRINCIPAL_ID" =~ ^[0-9a-fA-F-]{36}$ ]] || die "AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID is not an object id: $IDENTITY_PRINCIPAL_ID"
RESOURCE_GROUP="$(env_value AZURE_RESOURCE_GROUP)"
TENANT_ID="$(env_value AZURE_TENANT_ID)"
SQL_SERVER="$(env_value SQL_SERVER)"
SQL_DATABASE="$(env_value SQL_DATABASE)"
SQL_SERVER_NAME="${SQL_SERVER%%.*}"

# --- 1. tools and token --------------------------------------------------------------------------
command -v az >/dev/null 2>&1 || die "Azure CLI (az) not found: https://learn.microsoft.com/cli/azure/install-azure-cli"
command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js 22"
command -v sqlcmd >/dev/null 2>&1 || die "sqlcmd not found: install go-sqlcmd (docs/deploy.md#prerequisites)"
sqlcmd --help 2>&1 | grep -q -- '--authentication-method' \
  || die "the sqlcmd on PATH is the ODBC one; install go-sqlcmd (docs/deploy.md#prerequisites)"

log "checking that 'az login' can get an Entra token for Azure SQL (tenant $TENANT_ID)"
if ! token="$(az account get-access-token --resource https://database.windows.net/ --tenant "$TENANT_ID" \
  --query accessToken --output tsv 2>/dev/null)" || [ -z "$token" ]; then
  die "no Azure SQL token from the Azure CLI; run 'az login --tenant $TENANT_ID' and retry"
fi
unset token # sqlcmd and the migrate command obtain their own token from the same az login

# The app's identity client id must not leak into your local credential chain.
if [ "${AZURE_CLIENT_ID:-}" = "$IDENTITY_CLIENT_ID" ]; then unset AZURE_CLIENT_ID; fi
unset DATABASE_URL

# --- 2. temporary firewall rule for this machine -------------------------------------------------
RULE_NAME=""
cleanup() {
  if [ -n "$RULE_NAME" ]; then
    log "removing temporary firewall rule $RULE_NAME"
    az sql server firewall-rule delete --resource-group "$RESOURCE_GROUP" --server "$SQL_SERVER_NAME" \
      --name "$RULE_NAME" --output none 2>/dev/null || log "could not remove $RULE_NAME; delete it by hand"
  fi
}
trap cleanup EXIT

if [ "${SQL_SKIP_CLIENT_FIREWALL_RULE:-false}" != "true" ]; then
  CLIENT_IP="$(client_ip)"
  RULE_NAME="azd-postprovision-${CLIENT_IP//./-}"
  log "allowing $CLIENT_IP on $SQL_SERVER_NAME for the duration of this script ($RULE_NAME)"
  az sql server firewall-rule create --resource-group "$RESOURCE_GROUP" --server "$SQL_SERVER_NAME" \
    --name "$RULE_NAME" --start-ip-address "$CLIENT_IP" --end-ip-address "$CLIENT_IP" --output none
fi

# --- 3. database user for the app's identity -----------------------------------------------------
ident="${IDENTITY_NAME//]/]]}"   # [bracketed] identifier
literal="${IDENTITY_NAME//\'/\'\'}" # N'string' literal
sql_file="$(mktemp)"
trap 'rm -f "$sql_file"; cleanup' EXIT
cat >"$sql_file" <<SQL
SET NOCOUNT ON;
IF NOT EXISTS (SELECT 1 FROM sys.database_principals WHERE name = N'$literal')
  CREATE USER [$ident] FROM EXTERNAL PROVIDER WITH OBJECT_ID = '$IDENTITY_PRINCIPAL_ID';
ALTER ROLE db_datareader ADD MEMBER [$ident];
ALTER ROLE db_datawriter ADD MEMBER [$ident];
-- Needed while the app runs its own migrations; an operator may drop it afterwards:
--   ALTER ROLE db_ddladmin DROP MEMBER [$ident];
ALTER ROLE db_ddladmin ADD MEMBER [$ident];
SQL

# A new firewall rule or server admin can take a minute to apply, and a paused serverless
# database needs a moment to resume: retry a few times.
log "creating database user [$IDENTITY_NAME] in $SQL_DATABASE on $SQL_SERVER"
attempt=1
until sqlcmd -S "tcp:$SQL_SERVER,1433" -d "$SQL_DATABASE" --authentication-method ActiveDirectoryDefault \
  -b -l 60 -i "$sql_file"; do
  [ "$attempt" -lt 6 ] || die "sqlcmd failed $attempt times; see the errors above"
  log "sqlcmd failed (attempt $attempt); retrying in 15 s"
  attempt=$((attempt + 1))
  sleep 15
done

# --- 4. migrations -------------------------------------------------------------------------------
if [ ! -d node_modules ]; then
  log "installing npm dependencies (needed to build the migrate command)"
  if [ -f package-lock.json ]; then npm ci; else npm install; fi
fi
log "running migrations against $SQL_DATABASE as your Entra identity"
SQL_SERVER="$SQL_SERVER" SQL_DATABASE="$SQL_DATABASE" npm run migrate

log "done: the app's identity can use $SQL_DATABASE and the schema is current"
