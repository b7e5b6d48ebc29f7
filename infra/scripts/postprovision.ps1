#!/usr/bin/env pwsh
# azd postprovision hook (Windows / PowerShell 7). Same steps as postprovision.sh, equally idempotent:
#   1. checks tools and that your az login can get an Entra token for Azure SQL;
#   2. opens a temporary firewall rule for your own IP (removed in `finally`, even on failure);
#   3. creates the contained database user for the app's managed identity and grants it
#      db_datareader, db_datawriter and db_ddladmin (ddladmin because the app's migrations run as it;
#      operators may drop it after migrating — see docs/deploy.md);
#   4. runs the app's migrations (npm run migrate) with Entra auth as you.
# Knobs: $env:SQL_CLIENT_IP overrides IP detection; $env:SQL_SKIP_CLIENT_FIREWALL_RULE = 'true' skips step 2.
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest
Set-Location (Join-Path $PSScriptRoot '../..')

. (Join-Path $PSScriptRoot 'hook-common.ps1')

# PostgreSQL and MySQL flexible servers (DATABASE_ENGINE) have a hook of their own; Azure SQL goes on below.
$engine = $env:DATABASE_ENGINE
if (-not $engine -and (Get-Command azd -ErrorAction SilentlyContinue)) { $engine = (azd env get-value DATABASE_ENGINE 2>$null) }
if ($engine -in 'postgresql', 'mysql') {
  & (Join-Path $PSScriptRoot 'postprovision-flexible.ps1')
  exit $LASTEXITCODE
}

$identityName = Get-EnvValue 'AZURE_USER_ASSIGNED_IDENTITY_NAME'
$identityClientId = Get-EnvValue 'AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID'
# The identity's object id: CREATE USER … WITH OBJECT_ID needs no Microsoft Graph lookup, so a service principal
# without Graph permissions (CI) can run this as the SQL Entra admin.
$identityPrincipalId = Get-EnvValue 'AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID'
if ($identityPrincipalId -notmatch '^[0-9a-fA-F-]{36}$') { throw "AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID is not an object id: $identityPrincipalId" }
$resourceGroup = Get-EnvValue 'AZURE_RESOURCE_GROUP'
$tenantId = Get-EnvValue 'AZURE_TENANT_ID'
$sqlServer = Get-EnvValue 'SQL_SERVER'
$sqlDatabase = Get-EnvValue 'SQL_DATABASE'
$sqlServerName = $sqlServer.Split('.')[0]

# --- 1. tools and token --------------------------------------------------------------------------
foreach ($tool in 'az', 'npm', 'sqlcmd') {
  if (-not (Get-Command $tool -ErrorAction SilentlyContinue)) {
    throw "$tool not found on PATH; see docs/deploy.md#prerequisites"
  }
}
if (-not ((sqlcmd --help 2>&1 | Out-String) -match '--authentication-method')) {
  throw "the sqlcmd on PATH is the ODBC one; install go-sqlcmd (winget install sqlcmd)"
}

Write-Step "checking that 'az login' can get an Entra token for Azure SQL (tenant $tenantId)"
$token = az account get-access-token --resource https://database.windows.net/ --tenant $tenantId `
  --query accessToken --output tsv 2>$null
if ($LASTEXITCODE -ne 0 -or -not $token) {
  throw "no Azure SQL token from the Azure CLI; run 'az login --tenant $tenantId' and retry"
}
Remove-Variable token # sqlcmd and the migrate command obtain their own token from the same az login

# The app's identity client id must not leak into your local credential chain.
if ($env:AZURE_CLIENT_ID -eq $identityClientId) { Remove-Item Env:AZURE_CLIENT_ID }
Remove-Item Env:DATABASE_URL -ErrorAction SilentlyContinue

$ruleName = $null
$sqlFile = New-TemporaryFile
try {
  # --- 2. temporary firewall rule for this machine -----------------------------------------------
  if ($env:SQL_SKIP_CLIENT_FIREWALL_RULE -ne 'true') {
    $clientIp = Get-ClientIp
    $ruleName = 'azd-postprovision-' + $clientIp.Replace('.', '-')
    Write-Step "allowing $clientIp on $sqlServerName for the duration of this script ($ruleName)"
    Invoke-Checked 'az sql server firewall-rule create' {
      az sql server firewall-rule create --resource-group $resourceGroup --server $sqlServerName `
        --name $ruleName --start-ip-address $clientIp --end-ip-address $clientIp --output none
    }
  }

  # --- 3. database user for the app's identity ---------------------------------------------------
  $ident = $identityName.Replace(']', ']]')
  $literal = $identityName.Replace("'", "''")
  @"
SET NOCOUNT ON;
IF NOT EXISTS (SELECT 1 FROM sys.database_principals WHERE name = N'$literal')
  CREATE USER [$ident] FROM EXTERNAL PROVIDER WITH OBJECT_ID = '$identityPrincipalId';
ALTER ROLE db_datareader ADD MEMBER [$ident];
ALTER ROLE db_datawriter ADD MEMBER [$ident];
-- Needed while the app runs its own migrations; an operator may drop it afterwards:
--   ALTER ROLE db_ddladmin DROP MEMBER [$ident];
ALTER ROLE db_ddladmin ADD MEMBER [$ident];
"@ | Set-Content -Path $sqlFile.FullName -Encoding utf8

  # A new firewall rule or server admin can take a minute to apply, and a paused serverless
  # database needs a moment to resume: retry a few times.
  Write-Step "creating database user [$identityName] in $sqlDatabase on $sqlServer"
  for ($attempt = 1; ; $attempt++) {
    sqlcmd -S "tcp:$sqlServer,1433" -d $sqlDatabase --authentication-method ActiveDirectoryDefault `
      -b -l 60 -i $sqlFile.FullName
    if ($LASTEXITCODE -eq 0) { break }
    if ($attempt -ge 6) { throw "sqlcmd failed $attempt times; see the errors above" }
    Write-Step "sqlcmd failed (attempt $attempt); retrying in 15 s"
    Start-Sleep -Seconds 15
  }

  # --- 4. migrations -----------------------------------------------------------------------------
  if (-not (Test-Path 'node_modules')) {
    Write-Step 'installing npm dependencies (needed to build the migrate command)'
    if (Test-Path 'package-lock.json') { Invoke-Checked 'npm ci' { npm ci } }
    else { Invoke-Checked 'npm install' { npm install } }
  }
  Write-Step "running migrations against $sqlDatabase as your Entra identity"
  $env:SQL_SERVER = $sqlServer
  $env:SQL_DATABASE = $sqlDatabase
  Invoke-Checked 'npm run migrate' { npm run migrate }

  Write-Step "done: the app's identity can use $sqlDatabase and the schema is current"
}
finally {
  Remove-Item $sqlFile.FullName -ErrorAction SilentlyContinue
  if ($ruleName) {
    Write-Step "removing temporary firewall rule $ruleName"
    az sql server firewall-rule delete --resource-group $resourceGroup --server $sqlServerName `
      --name $ruleName --output none 2>$null
    if ($LASTEXITCODE -ne 0) { Write-Step "could not remove $ruleName; delete it by hand" }
  }
}
