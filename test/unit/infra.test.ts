// Static checks of the azd/Bicep deployment (infra/, azure.yaml). No Azure and no bicep CLI: the files are
// read as text, so the checks are deliberately simple and aimed at the mistakes a reviewer would catch.
// The database engines (DATABASE_ENGINE) have their own checks in infraEngines.test.ts.
import { describe, it, expect } from 'vitest';
import { existsSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  appSettingNames, bicepFiles, blockAt, codeOnly, decoratorBlock, infraFiles, outputsOf, paramsOf, read, referencesTo, root,
  topLevelKeys, walk,
} from '../support/bicepText.js';

describe('infra: bicep parameters', () => {
  it('finds the bicep files', () => {
    expect(bicepFiles).toEqual(expect.arrayContaining([
      'infra/main.bicep', 'infra/app/api.bicep', 'infra/app/identity.bicep',
      'infra/app/monitoring.bicep', 'infra/app/sql.bicep', 'infra/app/storage.bicep',
      'infra/app/postgresql.bicep', 'infra/app/mysql.bicep',
    ]));
  });

  it.each(bicepFiles)('%s: every param is used and has a @description', (file) => {
    const src = read(file);
    const lines = codeOnly(src).split('\n');
    const problems: string[] = [];
    for (const p of paramsOf(src)) {
      const rest = [...lines.slice(0, p.line), '', ...lines.slice(p.line + 1)].join('\n');
      if (referencesTo(rest, p.name) === 0) problems.push(`${file}:${p.line + 1}: param ${p.name} is never used`);
      if (!/@description\(\s*'[^']{10,}/.test(decoratorBlock(src, p.line))) {
        problems.push(`${file}:${p.line + 1}: param ${p.name} has no @description(...)`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('main.parameters.json maps exactly the params main.bicep declares, and every required one', () => {
    const declared = paramsOf(read('infra/main.bicep'));
    const mapped = Object.keys((JSON.parse(read('infra/main.parameters.json')) as { parameters: object }).parameters);
    expect(mapped.filter((n) => !declared.some((p) => p.name === n))).toEqual([]);
    expect(declared.filter((p) => !p.hasDefault && !mapped.includes(p.name)).map((p) => p.name)).toEqual([]);
    expect(read('infra/main.parameters.json')).toMatch(/"\$\{AZURE_ENV_NAME\}"[\s\S]*"\$\{AZURE_LOCATION\}"[\s\S]*"\$\{AZURE_PRINCIPAL_ID\}"/);
  });

  it('main.bicep passes modules only declared params, all required ones, and reads only declared outputs', () => {
    const raw = read('infra/main.bicep');
    const code = codeOnly(raw);
    const problems: string[] = [];
    const modules = [...raw.matchAll(/^module\s+(\w+)\s+'([^']+)'\s*=/gm)];
    expect(modules.length).toBeGreaterThanOrEqual(5);
    for (const m of modules) {
      const [, symbol, path] = m as unknown as [string, string, string];
      const moduleSrc = read(join('infra', path));
      const declared = paramsOf(moduleSrc);
      const body = blockAt(code, m.index!);
      const passed = topLevelKeys(blockAt(body, body.search(/\bparams\s*:/)));
      for (const key of passed) if (!declared.some((p) => p.name === key)) problems.push(`${symbol}: unknown param ${key}`);
      for (const p of declared) if (!p.hasDefault && !passed.includes(p.name)) problems.push(`${symbol}: missing ${p.name}`);
      const outputs = outputsOf(moduleSrc);
      for (const ref of code.matchAll(new RegExp(`\\b${symbol}\\.outputs\\.(\\w+)`, 'g'))) {
        if (!outputs.includes(ref[1]!)) problems.push(`${symbol}: no output ${ref[1]}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('main.bicep has the subscription scope, naming conventions and the outputs azd and the hooks use', () => {
    const main = read('infra/main.bicep');
    expect(main).toMatch(/^targetScope = 'subscription'/m);
    expect(main).toContain("toLower(uniqueString(subscription().id, environmentName, location))");
    expect(main).toContain("loadJsonContent('./abbreviations.json')");
    expect(main).toMatch(/'azd-env-name': environmentName/);
    expect(outputsOf(main)).toEqual(expect.arrayContaining([
      'AZURE_LOCATION', 'AZURE_TENANT_ID', 'AZURE_RESOURCE_GROUP', 'AZURE_FUNCTION_APP_NAME', 'AZURE_FUNCTION_URI',
      'AZURE_USER_ASSIGNED_IDENTITY_NAME', 'AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID', 'SQL_SERVER', 'SQL_DATABASE',
      // The flexible-server hook reads these (postprovision-flexible.*).
      'DATABASE_ENGINE', 'DATABASE_SERVER_NAME', 'DATABASE_HOST', 'DATABASE_NAME', 'DATABASE_USER', 'DATABASE_ADMIN_LOGIN',
    ]));
    const abbrs = JSON.parse(read('infra/abbreviations.json')) as Record<string, string>;
    for (const ref of main.matchAll(/abbrs\.(\w+)/g)) expect(abbrs, `abbreviations.json: ${ref[1]}`).toHaveProperty(ref[1]!);
  });
});

describe('infra: no secrets', () => {
  const patterns: Array<[string, RegExp]> = [
    ['password', /password/i], ['AccountKey=', /AccountKey=/i], ['SharedAccessKey', /SharedAccessKey/i],
    ['administratorLoginPassword', /administratorLoginPassword/i], ['listKeys(', /listKeys\s*\(/i],
    ['long base64-like literal', /[A-Za-z0-9+/]{40,}={0,2}/],
  ];

  // Lines that name a password without holding one, each checked further below or by its own test.
  const allowed: Array<[string, RegExp]> = [
    ['infra/app/postgresql.bicep', /^\s*passwordAuth: 'Disabled'$/], // turns PostgreSQL's own logins off
    ['infra/app/mysql.bicep', /^\s*administratorLoginPassword: bootstrapSecret$/], // generated, unusable (test below)
    ['infra/scripts/postprovision-flexible.sh', /^\s*PGPASSWORD="\$token" psql /], // the hook's Entra token, in psql's env
    ['infra/scripts/postprovision-flexible.ps1', /^\s*(\$env:PGPASSWORD = \$token|Remove-Item Env:PGPASSWORD, Env:MYSQL_PWD .*)$/],
  ];

  it.each([...infraFiles, 'azure.yaml'])('%s has no secret-looking literal', (file) => {
    const hits: string[] = [];
    read(file).split('\n').forEach((text, i) => {
      const typeDecl = /^\s*resource \w+ '[\w./]+@[\w-]+'/.test(text); // a resource type path is not base64
      if (allowed.some(([f, re]) => f === file && re.test(text))) return;
      for (const [label, re] of patterns) {
        if (re.test(text) && !(typeDecl && label === 'long base64-like literal')) hits.push(`${file}:${i + 1}: ${label}: ${text.trim()}`);
      }
    });
    expect(hits).toEqual([]);
  });

});

describe('infra: app settings', () => {
  // The settings named in the deployment brief; src/config.ts AZURE_APP_SETTINGS is the living list.
  const baseline = [
    'AzureWebJobsStorage__accountName', 'AzureWebJobsStorage__credential', 'AzureWebJobsStorage__clientId',
    'APPLICATIONINSIGHTS_CONNECTION_STRING', 'AZURE_CLIENT_ID', 'DATABASE_ENGINE', 'LEASE_NAME',
    'LEASE_DURATION_MS', 'LEASE_RENEW_INTERVAL_MS', 'LEASE_ACQUIRE_INTERVAL_MS', 'SCHEDULE_REFRESH_INTERVAL_MS',
    'COMMIT_GRACE_MS', 'EXECUTOR_SCHEDULE', 'EXECUTOR_TICK_BUDGET_MS',
    'EXECUTOR_CONCURRENCY', 'PROVIDER_URL', 'PROVIDER_TIMEOUT_MS', 'LOG_LEVEL',
  ];

  it('every setting in src/config.ts AZURE_APP_SETTINGS is an app setting in infra/app/api.bicep', () => {
    const config = read('src/config.ts');
    const m = /export\s+const\s+AZURE_APP_SETTINGS\b[^=]*=\s*\[([\s\S]*?)\]/.exec(config);
    if (!m) {
      throw new Error('src/config.ts must export `const AZURE_APP_SETTINGS: readonly string[] = [...]` listing the '
        + 'settings the app needs in Azure; this test checks each against infra/app/api.bicep');
    }
    const wanted = [...m[1]!.matchAll(/['"`]([A-Za-z0-9_]+)['"`]/g)].map((x) => x[1]!);
    expect(wanted.length, 'AZURE_APP_SETTINGS is empty').toBeGreaterThan(0);
    const declared = appSettingNames();
    expect(wanted.filter((n) => !declared.includes(n))).toEqual([]);
  });

  it('api.bicep declares the baseline settings once each, identity-based, with no settings Flex rejects', () => {
    const names = appSettingNames();
    expect(baseline.filter((n) => !names.includes(n))).toEqual([]);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
    const flexRejects = ['FUNCTIONS_WORKER_RUNTIME', 'FUNCTIONS_EXTENSION_VERSION', 'WEBSITE_RUN_FROM_PACKAGE',
      'WEBSITE_NODE_DEFAULT_VERSION', 'WEBSITE_CONTENTAZUREFILECONNECTIONSTRING', 'WEBSITE_CONTENTSHARE', 'AzureWebJobsStorage'];
    expect(names.filter((n) => flexRejects.includes(n))).toEqual([]);
    const api = read('infra/app/api.bicep');
    expect(api).toMatch(/name: 'AzureWebJobsStorage__credential', value: 'managedidentity'/);
    expect(api).toMatch(/name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING', value: 'ClientId=\$\{identityClientId\};Authorization=AAD'/);
    expect(api).toMatch(/name: 'PROVIDER_URL', value: providerUrl/);
  });

  it('api.bicep is a Flex Consumption Node 22 app deploying from blob storage with the user-assigned identity', () => {
    const api = read('infra/app/api.bicep');
    expect(api).toMatch(/'Microsoft\.Web\/serverfarms@2024-04-01'[\s\S]*name: 'FC1'[\s\S]*tier: 'FlexConsumption'/);
    expect(api).toMatch(/'Microsoft\.Web\/sites@2024-04-01'/);
    expect(api).toContain("kind: 'functionapp,linux'");
    expect(api).toMatch(/type: 'blobContainer'[\s\S]*type: 'UserAssignedIdentity'/);
    expect(api).toMatch(/runtime: \{\s*name: 'node'\s*version: '22'\s*\}/);
    expect(api).toMatch(/param maximumInstanceCount int = 40\b/);
    expect(api).toMatch(/param instanceMemoryMB int = 2048\b/);
  });
});

describe('infra: azd wiring and security posture', () => {
  it('azure.yaml names the service api (ts, function, project .) and api.bicep tags azd-service-name: api', () => {
    const yaml = read('azure.yaml');
    expect(yaml).toMatch(/^name: submission-manager$/m);
    const api = /^services:\n {2}api:\n((?: {4,}.*\n)+)/m.exec(yaml);
    expect(api, 'azure.yaml: services.api').not.toBeNull();
    expect(api![1]).toMatch(/^ {4}project: \.$/m);
    expect(api![1]).toMatch(/^ {4}language: ts$/m);
    expect(api![1]).toMatch(/^ {4}host: function$/m);
    expect(read('infra/app/api.bicep')).toMatch(/'azd-service-name': 'api'/);
    for (const hook of yaml.matchAll(/run: \.\/(infra\/scripts\/\S+)/g)) expect(existsSync(join(root, hook[1]!)), hook[1]).toBe(true);
    expect(yaml).toContain('./infra/scripts/postprovision.sh');
    expect(yaml).toContain('./infra/scripts/postprovision.ps1');
  });

  it('every infra/scripts/ file named in infra/, docs/, src/, test/, README.md and azure.yaml exists (`name.*`: one of its variants)', () => {
    const files = [...infraFiles, ...walk('docs'), ...walk('src'), ...walk('test'), 'README.md', 'azure.yaml']
      .filter((f) => /\.(bicep|sh|ps1|sql|md|ya?ml|ts|json)$/.test(f));
    const missing: string[] = [];
    for (const file of files) {
      for (const m of read(file).matchAll(/infra\/scripts\/[\w./*-]*[\w*]/g)) {
        const named = m[0];
        const found = named.endsWith('.*')
          ? existsSync(join(root, dirname(named))) &&
            readdirSync(join(root, dirname(named))).some((f) => f.startsWith(`${basename(named, '.*')}.`))
          : existsSync(join(root, named));
        if (!found) missing.push(`${file}: ${named}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('azure.yaml builds locally (remoteBuild false) and ships the staged production-only package', () => {
    const yaml = read('azure.yaml');
    expect(yaml).toMatch(/^ {4}remoteBuild: false$/m);
    expect(yaml).toMatch(/^ {4}dist: \.azure-package$/m);
    expect(yaml).toMatch(/^ {6}prepackage:\n {8}posix:\n {10}shell: sh\n {10}run: \.\/infra\/scripts\/package\.sh$/m);
    for (const script of ['infra/scripts/package.sh', 'infra/scripts/package.ps1']) {
      expect(read(script), script).toMatch(/npm ci --omit=dev/);
      expect(read(script), script).toMatch(/\.azure-package/);
    }
    expect(read('.gitignore')).toMatch(/^\.azure-package\/$/m);
  });

  it('storage grants the app only Storage Blob Data Owner (no queue or table role: no such triggers)', () => {
    const storage = read('infra/app/storage.bicep');
    expect(storage).toContain("'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'");
    expect(storage).not.toMatch(/974c5e8b-45b9-4653-ba55-5f855dd0fb88|0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3/);
  });

  it('private networking: the Azure-services rule exists only without it; storage denies public traffic; private endpoints for blob and the database', () => {
    expect(read('infra/app/sql.bicep')).toMatch(/resource \w+ 'Microsoft\.Sql\/servers\/firewallRules@[\d-]+' = if \(allowAzureServices\)/);
    expect(read('infra/main.bicep')).toMatch(/allowAzureServices: !vnetEnabled/);
    // PostgreSQL and MySQL are never opened to every Azure tenant: the app always reaches them privately.
    expect(read('infra/main.bicep')).toMatch(/^var privateNetwork = vnetEnabled \|\| databaseEngine != 'sqlserver'$/m);
    expect(read('infra/main.bicep')).toMatch(/module network '\.\/app\/network\.bicep' = if \(privateNetwork\)/);
    expect(read('infra/main.bicep')).toMatch(/vnetEnabled: privateNetwork/);
    expect(read('infra/main.bicep')).toMatch(/databaseServerId: databaseServerId\n\s*databaseEngine: databaseEngine/);
    expect(read('infra/app/storage.bicep')).toMatch(/publicNetworkAccess: vnetEnabled \? 'Disabled' : 'Enabled'/);
    const net = read('infra/app/network.bicep');
    expect(net).toMatch(/serviceName: 'Microsoft\.App\/environments'/);
    expect(net).toMatch(/groupId: 'blob'/);
    expect(net).toMatch(/sqlserver: \{[^}]*groupId: 'sqlServer', zone: 'privatelink\$\{environment\(\)\.suffixes\.sqlServerHostname\}'/);
    expect(net).toMatch(/postgresql: \{[^}]*groupId: 'postgresqlServer', zone: 'privatelink\.postgres\.database\.azure\.com'/);
    expect(net).toMatch(/mysql: \{[^}]*groupId: 'mysqlServer', zone: 'privatelink\.mysql\.database\.azure\.com'/);
    expect(net).toMatch(/databaseEndpoints\[databaseEngine\]/);
    expect(read('infra/app/api.bicep')).toMatch(/virtualNetworkSubnetId: empty\(virtualNetworkSubnetId\) \? null : virtualNetworkSubnetId/);
  });

  it('sql.bicep is Entra-only with no firewall rule other than "Allow Azure services" (0.0.0.0-0.0.0.0)', () => {
    const sql = read('infra/app/sql.bicep');
    expect(sql).toMatch(/azureADOnlyAuthentication: true/);
    expect(sql).not.toMatch(/azureADOnlyAuthentication: false/);
    expect(sql).not.toMatch(/administratorLogin\s*:/);
    expect(sql).toMatch(/minimalTlsVersion: '1\.2'/);
    expect(sql).toMatch(/name: 'GP_S_Gen5_1'/);
    expect([...sql.matchAll(/firewallRules/g)].length, 'one firewallRules resource').toBe(1);
    const starts = [...sql.matchAll(/startIpAddress:\s*(.+)/g)].map((m) => m[1]!.trim());
    const ends = [...sql.matchAll(/endIpAddress:\s*(.+)/g)].map((m) => m[1]!.trim());
    expect(starts).toEqual(["'0.0.0.0'"]);
    expect(ends).toEqual(["'0.0.0.0'"]);
    const others = infraFiles.filter((f) => f.endsWith('.bicep') && f !== 'infra/app/sql.bicep' && /firewallRules|IpAddress/.test(read(f)));
    expect(others).toEqual([]);
  });

  it('storage allows no shared-key access and monitoring no local auth', () => {
    const storage = read('infra/app/storage.bicep');
    expect(storage).toMatch(/allowSharedKeyAccess: false/);
    expect(storage).not.toMatch(/allowSharedKeyAccess: true/);
    expect(storage).toMatch(/allowBlobPublicAccess: false[\s\S]*minimumTlsVersion: 'TLS1_2'/);
    expect(read('infra/app/monitoring.bicep')).toMatch(/DisableLocalAuth: true/);
  });

  it('the postprovision hooks create the database user idempotently and grant the three roles', () => {
    for (const file of ['infra/scripts/postprovision.sh', 'infra/scripts/postprovision.ps1']) {
      const script = read(file);
      expect(script, file).toMatch(/IF NOT EXISTS \(SELECT 1 FROM sys\.database_principals WHERE name = /);
      // WITH OBJECT_ID: no Microsoft Graph lookup, so a service principal without Graph permissions can run it.
      expect(script, file).toMatch(/CREATE USER \[\$\w+\] FROM EXTERNAL PROVIDER WITH OBJECT_ID = '\$\w+';/);
      expect(script, file).toContain('AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID');
      for (const role of ['db_datareader', 'db_datawriter', 'db_ddladmin']) {
        expect(script, file).toMatch(new RegExp(`ALTER ROLE ${role} ADD MEMBER`));
      }
      expect(script, file).toContain('--authentication-method ActiveDirectoryDefault');
      expect(script, file).toContain('az account get-access-token --resource https://database.windows.net/');
      expect(script, file).toContain('npm run migrate');
    }
    expect(read('infra/scripts/postprovision.sh')).toMatch(/^set -euo pipefail$/m);
  });

  it('host.json functionTimeout is FUNCTION_TIMEOUT_MS\'s default (an invocation and a shutdown end 5 s before it)', async () => {
    const { loadConfig } = await import('../../src/config.js');
    const { parseTimeSpan } = await import('../../src/local/hostJson.js');
    const { INVOCATION_MARGIN_MS } = await import('../../src/limits.js');
    const timeout = parseTimeSpan((JSON.parse(read('host.json')) as { functionTimeout: string }).functionTimeout);
    expect(loadConfig({}).executor.invocationLimitMs).toBe(timeout! - INVOCATION_MARGIN_MS);
  });

  it('host.json: Application Insights never samples away our log records (traces: the lease transitions among them)', () => {
    const sampling = (JSON.parse(read('host.json')) as { logging: { applicationInsights: { samplingSettings: { isEnabled: boolean; excludedTypes: string } } } })
      .logging.applicationInsights.samplingSettings;
    // The app's pino records reach Application Insights as `traces` (context.log through the host); sampling
    // settings choose by telemetry type only, so keeping leader_acquired / leader_lost means excluding Trace.
    expect(sampling.excludedTypes.split(';').map((t) => t.trim()).sort()).toEqual(['Exception', 'Request', 'Trace']);
  });
});
