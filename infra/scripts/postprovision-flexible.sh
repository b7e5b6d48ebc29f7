#!/usr/bin/env bash
# azd postprovision hook for DATABASE_ENGINE=postgresql|mysql (POSIX; postprovision.sh hands over to it).
# Safe to run again: every step is idempotent.
#   1. checks tools and that your az login can get an Entra token for Azure Database (oss-rdbms);
#   2. opens a temporary firewall rule for your own IP (removed on exit, even on failure);
#   3. creates the database user for the app's managed identity, by its object id / client id (no Graph lookup
#      from here), and grants it only its own database: connect and create its tables (PostgreSQL:
#      pgaadauth_create_principal_with_oid + infra/scripts/sql/postgresql-app-grants.sql; MySQL: CREATE AADUSER +
#      infra/scripts/sql/mysql-app-grants.sql).
# The app applies its migrations itself at its first start, as its identity, so it owns its tables.
# Knobs (as for Azure SQL): SQL_CLIENT_IP=<ip> overrides IP detection; SQL_SKIP_CLIENT_FIREWALL_RULE=true skips 2.
set -euo pipefail

cd "$(dirname "$0")/../.."

# shellcheck source=hook-common.sh
source infra/scripts/hook-common.sh

ENGINE="$(env_value DATABASE_ENGINE)"
case "$ENGINE" in
  postgresql) AZ_GROUP=postgres; CLIENT=psql ;;
  mysql) AZ_GROUP=mysql; CLIENT=mysql ;;
  *) die "DATABASE_ENGINE=$ENGINE is not a flexible-server engine (postgresql or mysql)" ;;
esac
SERVER_NAME="$(env_value DATABASE_SERVER_NAME)"
HOST="$(env_value DATABASE_HOST)"
DATABASE="$(env_value DATABASE_NAME)"
APP_USER="$(env_value DATABASE_USER)"
ADMIN_LOGIN="$(env_value DATABASE_ADMIN_LOGIN)"
IDENTITY_CLIENT_ID="$(env_value AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID)"
IDENTITY_PRINCIPAL_ID="$(env_value AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID)"
RESOURCE_GROUP="$(env_value AZURE_RESOURCE_GROUP)"
TENANT_ID="$(env_value AZURE_TENANT_ID)"
# Names go into SQL text: allow only what infra/ generates (id-api-<token>, submissionmanager).
[[ "$APP_USER" =~ ^[A-Za-z0-9_-]{1,63}$ ]] || die "DATABASE_USER is not a plain name: $APP_USER"
[[ "$DATABASE" =~ ^[A-Za-z0-9_]{1,63}$ ]] || die "DATABASE_NAME is not a plain name: $DATABASE"
for id in "$IDENTITY_CLIENT_ID" "$IDENTITY_PRINCIPAL_ID"; do
  [[ "$id" =~ ^[0-9a-fA-F-]{36}$ ]] || die "not an Entra object/client id: $id"
done

# --- 1. tools and token --------------------------------------------------------------------------
command -v az >/dev/null 2>&1 || die "Azure CLI (az) not found: https://learn.microsoft.com/cli/azure/install-azure-cli"
command -v "$CLIENT" >/dev/null 2>&1 || die "$CLIENT not found: install the $ENGINE client (docs/deploy.md#prerequisites)"
log "getting an Entra token for Azure Database ($ENGINE) from 'az login' (tenant $TENANT_ID)"
if ! token="$(az account get-access-token --resource-type oss-rdbms --tenant "$TENANT_ID" \
  --query accessToken --output tsv 2>/dev/null)" || [ -z "$token" ]; then
  die "no Azure Database token from the Azure CLI; run 'az login --tenant $TENANT_ID' and retry"
fi

# --- 2. temporary firewall rule for this machine -------------------------------------------------
RULE_NAME=""
cleanup() {
  if [ -n "$RULE_NAME" ]; then
    log "removing temporary firewall rule $RULE_NAME"
    az "$AZ_GROUP" flexible-server firewall-rule delete --resource-group "$RESOURCE_GROUP" --name "$SERVER_NAME" \
      --rule-name "$RULE_NAME" --yes --output none 2>/dev/null || log "could not remove $RULE_NAME; delete it by hand"
  fi
}
trap cleanup EXIT
if [ "${SQL_SKIP_CLIENT_FIREWALL_RULE:-false}" != "true" ]; then
  CLIENT_IP="$(client_ip)"
  RULE_NAME="azd-postprovision-${CLIENT_IP//./-}"
  log "allowing $CLIENT_IP on $SERVER_NAME for the duration of this script ($RULE_NAME)"
  az "$AZ_GROUP" flexible-server firewall-rule create --resource-group "$RESOURCE_GROUP" --name "$SERVER_NAME" \
    --rule-name "$RULE_NAME" --start-ip-address "$CLIENT_IP" --end-ip-address "$CLIENT_IP" --output none
fi

# --- 3. database user for the app's identity -----------------------------------------------------
# The token is handed to the client in its environment, never on a command line or in a file.
run_postgresql() {
  PGPASSWORD="$token" psql "host=$HOST port=5432 dbname=postgres user=$ADMIN_LOGIN sslmode=require" \
    -v ON_ERROR_STOP=1 -v app_role="$APP_USER" -v app_oid="$IDENTITY_PRINCIPAL_ID" <<'SQL'
SELECT pgaadauth_create_principal_with_oid(:'app_role', :'app_oid', 'service', false, false)
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_role');
SQL
  PGPASSWORD="$token" psql "host=$HOST port=5432 dbname=$DATABASE user=$ADMIN_LOGIN sslmode=require" \
    -v ON_ERROR_STOP=1 -v app_role="$APP_USER" -v app_db="$DATABASE" -f infra/scripts/sql/postgresql-app-grants.sql
}

run_mysql() {
  local tls=--ssl
  if mysql --help 2>/dev/null | grep -q -- '--ssl-mode'; then tls=--ssl-mode=REQUIRED; fi
  # Entra users log in with the cleartext plugin; TLS is required by the server and by $tls.
  local mysql_cmd=(mysql -h "$HOST" -P 3306 -u "$ADMIN_LOGIN" "$tls" --enable-cleartext-plugin -N -B)
  local exists
  exists="$(MYSQL_PWD="$token" "${mysql_cmd[@]}" -e "SELECT COUNT(*) FROM mysql.user WHERE user = '$APP_USER'")"
  if [ "$exists" = "0" ]; then
    MYSQL_PWD="$token" "${mysql_cmd[@]}" \
      -e "SET aad_auth_validate_oids_in_tenant = OFF; CREATE AADUSER '$APP_USER' IDENTIFIED BY '$IDENTITY_CLIENT_ID';"
  fi
  { printf "SET @app_user = '%s', @app_db = '%s';\n" "$APP_USER" "$DATABASE"; cat infra/scripts/sql/mysql-app-grants.sql; } \
    | MYSQL_PWD="$token" "${mysql_cmd[@]}"
}

# A new firewall rule or administrator can take a minute to apply: retry a few times.
log "creating database user $APP_USER for the app's identity in $DATABASE on $HOST"
attempt=1
until "run_$ENGINE"; do
  [ "$attempt" -lt 6 ] || die "$CLIENT failed $attempt times; see the errors above"
  log "$CLIENT failed (attempt $attempt); retrying in 15 s"
  attempt=$((attempt + 1))
  sleep 15
done
unset token

log "done: the app's identity can use $DATABASE; the app applies its migrations at its first start"
