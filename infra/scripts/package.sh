#!/usr/bin/env bash
# azd service hook (prepackage, remoteBuild: false): stage the deployment package in .azure-package/ —
# host.json, package.json, the compiled app (dist/src, dist/functions) and production dependencies only
# (npm ci --omit=dev), so no devDependency (typescript, vitest, azurite, …) is shipped. azure.yaml points the
# service's `dist` at this folder; azd zips it as it is (the Flex runtime does no build).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.azure-package
rm -rf "$out"
npm run build --silent
mkdir -p "$out/dist"
cp host.json package.json package-lock.json .funcignore "$out/"
cp -R dist/src dist/functions "$out/dist/"
( cd "$out" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error )
echo "staged $out: $(du -sh "$out" | cut -f1), $(ls "$out/node_modules" | wc -l) top-level packages (production only)"
