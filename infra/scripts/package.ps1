# azd service hook (prepackage, remoteBuild: false), Windows twin of package.sh: stage .azure-package/ with the
# compiled app and production dependencies only (npm ci --omit=dev); azure.yaml's `dist` points at it.
$ErrorActionPreference = 'Stop'
Set-Location (Join-Path $PSScriptRoot '../..')
$out = '.azure-package'
if (Test-Path $out) { Remove-Item -Recurse -Force $out }
npm run build --silent
if ($LASTEXITCODE -ne 0) { throw 'npm run build failed' }
New-Item -ItemType Directory -Force -Path "$out/dist" | Out-Null
Copy-Item host.json, package.json, package-lock.json, .funcignore -Destination $out
Copy-Item -Recurse dist/src, dist/functions -Destination "$out/dist"
Push-Location $out
npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error
$code = $LASTEXITCODE
Pop-Location
if ($code -ne 0) { throw 'npm ci --omit=dev failed' }
Write-Host "staged $out (production dependencies only)"
