#!/usr/bin/env pwsh
# azd postprovision hook for DATABASE_ENGINE=postgresql|mysql (Windows / PowerShell 7; postprovision.ps1 hands
# over to it). Same steps as postprovision-flexible.sh, equally idempotent:
#   1. checks tools and that your az login can get an Entra token for Azure Database (oss-rdbms);
#   2. opens a temporary firewall rule for your own IP (removed in `finally`, even on failure);
#   3. creates the database user for the app's managed identity (PostgreSQL: pgaadauth_create_principal_with_oid +
#      infra/scripts/sql/postgresql-app-grants.sql; MySQL: CREATE AADUSER + infra/scripts/sql/mysql-app-grants.sql).
# The app applies its migrations itself at its first start, as its identity, so it owns its tables.
# Knobs: $env:SQL_CLIENT_IP overrides IP detection; $env:SQL_SKIP_CLIENT_FIREWALL_RULE = 'true' skips step 2.
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest
Set-Location (Join-Path $PSScriptRoot '../..')

. (Join-Path $PSScriptRoot 'hook-common.ps1')

$engine = Get-EnvValue 'DATABASE_ENGINE'
switch ($engine) {
  'postgresql' { $azGroup = 'postgres'; $client = 'psql' }
  'mysql' { $azGroup = 'mysql'; $client = 'mysql' }
  default { throw "DATABASE_ENGINE=$engine is not a flexible-server engine (postgresql or mysql)" }
}
$serverName = Get-EnvValue 'DATABASE_SERVER_NAME'
$dbHost = Get-EnvValue 'DATABASE_HOST'
$database = Get-EnvValue 'DATABASE_NAME'
$appUser = Get-EnvValue 'DATABASE_USER'
$adminLogin = Get-EnvValue 'DATABASE_ADMIN_LOGIN'
$identityClientId = Get-EnvValue 'AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID'
$identityPrincipalId = Get-EnvValue 'AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID'
$resourceGroup = Get-EnvValue 'AZURE_RESOURCE_GROUP'
$tenantId = Get-EnvValue 'AZURE_TENANT_ID'
# Names go into SQL text: allow only what infra/ generates (id-api-<token>, submissionmanager).
if ($appUser -notmatch '^[A-Za-z0-9_-]{1,63}$') { throw "DATABASE_USER is not a plain name: $appUser" }
if ($database -notmatch '^[A-Za-z0-9_]{1,63}$') { throw "DATABASE_NAME is not a plain name: $database" }
foreach ($id in $identityClientId, $identityPrincipalId) {
  if ($id -notmatch '^[0-9a-fA-F-]{36}$') { throw "not an Entra object/client id: $id" }
}

# --- 1. tools and token --------------------------------------------------------------------------
foreach ($tool in 'az', $client) {
  if (-not (Get-Command $tool -ErrorAction SilentlyContinue)) { throw "$tool not found on PATH; see docs/deploy.md#prerequisites" }
}
Write-Step "getting an Entra token for Azure Database ($engine) from 'az login' (tenant $tenantId)"
$token = az account get-access-token --resource-type oss-rdbms --tenant $tenantId --query accessToken --output tsv 2>$null
if ($LASTEXITCODE -ne 0 -or -not $token) {
  throw "no Azure Database token from the Azure CLI; run 'az login --tenant $tenantId' and retry"
}

$ruleName = $null
try {
  # --- 2. temporary firewall rule for this machine -----------------------------------------------
  if ($env:SQL_SKIP_CLIENT_FIREWALL_RULE -ne 'true') {
    $clientIp = Get-ClientIp
    $ruleName = 'azd-postprovision-' + $clientIp.Replace('.', '-')
    Write-Step "allowing $clientIp on $serverName for the duration of this script ($ruleName)"
    Invoke-Checked "az $azGroup flexible-server firewall-rule create" {
      az $azGroup flexible-server firewall-rule create --resource-group $resourceGroup --name $serverName `
        --rule-name $ruleName --start-ip-address $clientIp --end-ip-address $clientIp --output none
    }
  }

  # --- 3. database user for the app's identity ---------------------------------------------------
  # The token is handed to the client in its environment, never on a command line or in a file. Client output
  # goes to the host, so $run returns only its verdict.
  $createPostgresRole = @'
SELECT pgaadauth_create_principal_with_oid(:'app_role', :'app_oid', 'service', false, false)
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_role');
'@
  $run = {
    if ($engine -eq 'postgresql') {
      $env:PGPASSWORD = $token
      $createPostgresRole | psql "host=$dbHost port=5432 dbname=postgres user=$adminLogin sslmode=require" `
        -v ON_ERROR_STOP=1 -v "app_role=$appUser" -v "app_oid=$identityPrincipalId" | Out-Host
      if ($LASTEXITCODE -ne 0) { return $false }
      psql "host=$dbHost port=5432 dbname=$database user=$adminLogin sslmode=require" -v ON_ERROR_STOP=1 `
        -v "app_role=$appUser" -v "app_db=$database" -f infra/scripts/sql/postgresql-app-grants.sql | Out-Host
      return $LASTEXITCODE -eq 0
    }
    $env:MYSQL_PWD = $token
    $tls = if ((mysql --help 2>$null | Out-String) -match '--ssl-mode') { '--ssl-mode=REQUIRED' } else { '--ssl' }
    $mysqlArgs = @('-h', $dbHost, '-P', '3306', '-u', $adminLogin, $tls, '--enable-cleartext-plugin', '-N', '-B')
    $exists = mysql @mysqlArgs -e "SELECT COUNT(*) FROM mysql.user WHERE user = '$appUser'"
    if ($LASTEXITCODE -ne 0) { return $false }
    if ("$exists".Trim() -eq '0') {
      mysql @mysqlArgs -e "SET aad_auth_validate_oids_in_tenant = OFF; CREATE AADUSER '$appUser' IDENTIFIED BY '$identityClientId';" | Out-Host
      if ($LASTEXITCODE -ne 0) { return $false }
    }
    ("SET @app_user = '$appUser', @app_db = '$database';`n" + (Get-Content -Raw 'infra/scripts/sql/mysql-app-grants.sql')) | mysql @mysqlArgs | Out-Host
    return $LASTEXITCODE -eq 0
  }

  # A new firewall rule or administrator can take a minute to apply: retry a few times.
  Write-Step "creating database user $appUser for the app's identity in $database on $dbHost"
  for ($attempt = 1; ; $attempt++) {
    if (& $run) { break }
    if ($attempt -ge 6) { throw "$client failed $attempt times; see the errors above" }
    Write-Step "$client failed (attempt $attempt); retrying in 15 s"
    Start-Sleep -Seconds 15
  }
  Write-Step "done: the app's identity can use $database; the app applies its migrations at its first start"
}
finally {
  Remove-Item Env:PGPASSWORD, Env:MYSQL_PWD -ErrorAction SilentlyContinue
  Remove-Variable token -ErrorAction SilentlyContinue
  if ($ruleName) {
    Write-Step "removing temporary firewall rule $ruleName"
    az $azGroup flexible-server firewall-rule delete --resource-group $resourceGroup --name $serverName `
      --rule-name $ruleName --yes --output none 2>$null
    if ($LASTEXITCODE -ne 0) { Write-Step "could not remove $ruleName; delete it by hand" }
  }
}
