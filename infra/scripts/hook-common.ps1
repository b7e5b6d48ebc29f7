# Shared by the postprovision hooks (dot-sourced, not run): messages, azd values, checked native commands.
function Write-Step([string]$Message) { Write-Host "[postprovision] $Message" }

# azd exports its environment values to hooks; when run by hand, ask azd for the missing ones.
function Get-EnvValue([string]$Name) {
  $value = [Environment]::GetEnvironmentVariable($Name)
  if (-not $value -and (Get-Command azd -ErrorAction SilentlyContinue)) {
    $value = (azd env get-value $Name 2>$null)
    if ($LASTEXITCODE -ne 0) { $value = $null }
  }
  if (-not $value) { throw "$Name is not set; run 'azd provision' first" }
  return "$value".Trim()
}

function Invoke-Checked([string]$What, [scriptblock]$Command) {
  & $Command
  if ($LASTEXITCODE -ne 0) { throw "$What failed (exit code $LASTEXITCODE)" }
}

# This machine's public IPv4 address for a temporary firewall rule ($env:SQL_CLIENT_IP overrides detection).
function Get-ClientIp {
  $clientIp = $env:SQL_CLIENT_IP
  if (-not $clientIp) {
    try { $clientIp = (Invoke-RestMethod -Uri 'https://api.ipify.org' -TimeoutSec 10).ToString().Trim() }
    catch { $clientIp = $null }
  }
  if ($clientIp -notmatch '^\d{1,3}(\.\d{1,3}){3}$') {
    throw 'could not detect your public IPv4 address; set $env:SQL_CLIENT_IP and retry'
  }
  return $clientIp
}
