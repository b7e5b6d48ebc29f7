// Static checks of the three database engines azd can deploy (DATABASE_ENGINE sqlserver|postgresql|mysql):
// one parameter picks one module, each module is Entra-only on its smallest burstable size, the app settings
// per engine are what src/ reads, the flexible-server hook creates the identity's user with narrow grants.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { AZURE_DATABASE_APP_SETTINGS, DATABASE_ENGINES } from '../../src/azureDatabase.js';
import { loadConfig } from '../../src/config.js';
import { appSettingNames, codeOnly, databaseSettingNames, outputsOf, read, referencesTo, root } from '../support/bicepText.js';

describe('infra: database engines', () => {
  it('the MySQL bootstrap login secret is generated per deployment, @secure, never output, and switched off', () => {
    const mysql = read('infra/app/mysql.bicep');
    expect(mysql).toMatch(/@secure\(\)\n@description\('[^']+'\)\nparam bootstrapSecret string = newGuid\(\)\n/);
    expect(referencesTo(codeOnly(mysql), 'bootstrapSecret')).toBe(1); // only administratorLoginPassword
    expect(outputsOf(mysql).join(' ')).not.toMatch(/secret|password/i);
    expect(mysql).toMatch(/name: 'aad_auth_only'\n\s*properties: \{\n\s*value: 'ON'/);
    for (const main of [read('infra/main.bicep'), read('infra/main.parameters.json')]) expect(main).not.toMatch(/bootstrapSecret/);
  });

  it('api.bicep writes each engine\'s database settings, the ones src/azureDatabase.ts lists, and the config accepts exactly them', () => {
    const perEngine = databaseSettingNames();
    expect(Object.keys(perEngine).sort()).toEqual([...DATABASE_ENGINES].sort());
    expect(read('infra/app/api.bicep')).toMatch(/appSettings: concat\(\[[\s\S]*\], databaseSettings\[databaseEngine\]\)/);
    expect(read('infra/app/api.bicep')).toMatch(/name: 'DATABASE_ENGINE', value: databaseEngine/);
    const kinds = { sqlserver: 'mssqlEntra', postgresql: 'postgresEntra', mysql: 'mysqlEntra' } as const;
    for (const engine of DATABASE_ENGINES) {
      expect(perEngine[engine], engine).toEqual(AZURE_DATABASE_APP_SETTINGS[engine]);
      // What Azure sets for this engine (placeholder values of the right shape) starts the app's config.
      const env = Object.fromEntries(perEngine[engine]!.map((n) => [n, n === 'DATABASE_HOST' ? 'server.example.com' : 'x']));
      const config = loadConfig({ ...env, DATABASE_ENGINE: engine, AZURE_CLIENT_ID: '00000000-0000-4000-8000-000000000003' });
      expect(config.database.kind, engine).toBe(kinds[engine]);
      expect(appSettingNames().filter((n) => perEngine[engine]!.includes(n)), `${engine}: set once`).toEqual([]);
    }
  });

  it('main.bicep: one DATABASE_ENGINE parameter (default sqlserver) deploys exactly one engine module and passes it on', () => {
    const main = read('infra/main.bicep');
    expect(main).toMatch(new RegExp(`@allowed\\(\\[\\n${DATABASE_ENGINES.map((e) => `\\s*'${e}'\\n`).join('')}\\]\\)\\n@description\\('[^']+'\\)\\nparam databaseEngine string = 'sqlserver'`));
    expect(read('infra/main.parameters.json')).toMatch(/"databaseEngine": \{\s*"value": "\$\{DATABASE_ENGINE=sqlserver\}"/);
    const modules = { sqlserver: 'sql', postgresql: 'postgresql', mysql: 'mysql' } as const;
    for (const engine of DATABASE_ENGINES) {
      expect(main).toMatch(new RegExp(`^module ${modules[engine]} '\\./app/${modules[engine]}\\.bicep' = if \\(databaseEngine == '${engine}'\\) \\{`, 'm'));
    }
    expect(main).toMatch(/databaseEngine: databaseEngine\n\s*databaseHost: databaseHost\n\s*databaseName: databaseName\n\s*databaseUser: databaseUser/);
    expect(main).toMatch(/var databaseUser = databaseEngine == 'sqlserver' \? '' : identity\.outputs\.name/);
  });

  it('postgresql.bicep: Entra-only, PostgreSQL 16+, smallest burstable SKU, public endpoint without any firewall rule', () => {
    const pg = read('infra/app/postgresql.bicep');
    expect(pg).toMatch(/'Microsoft\.DBforPostgreSQL\/flexibleServers@[\d-]+'/);
    expect(pg).toMatch(/authConfig: \{\s*activeDirectoryAuth: 'Enabled'\s*passwordAuth: 'Disabled'\s*tenantId: tenant\(\)\.tenantId\s*\}/);
    expect(pg).not.toMatch(/administratorLogin\s*:|administratorLoginPassword/);
    expect(pg).toMatch(/@allowed\(\[\n\s*'16'\n\s*'17'\n\s*\]\)\n@description\('[^']+'\)\nparam version string = '16'/);
    expect(pg).toMatch(/param skuName string = 'Standard_B1ms'/);
    expect(pg).toMatch(/tier: 'Burstable'/);
    expect(pg).toMatch(/'Microsoft\.DBforPostgreSQL\/flexibleServers\/administrators@[\d-]+'[\s\S]*name: administratorObjectId/);
    expect(pg).not.toMatch(/firewallRules|IpAddress/);
  });

  it('mysql.bicep: Entra-only (aad_auth_only ON) MySQL 8.4, smallest burstable SKU, a server identity for Graph, no firewall rule', () => {
    const my = read('infra/app/mysql.bicep');
    expect(my).toMatch(/'Microsoft\.DBforMySQL\/flexibleServers@[\d-]+'/);
    expect(my).toMatch(/param version string = '8\.4'/);
    expect(my).toMatch(/param skuName string = 'Standard_B1ms'/);
    expect(my).toMatch(/tier: 'Burstable'/);
    expect(my).toMatch(/administratorType: 'ActiveDirectory'\s*identityResourceId: serverIdentity\.id\s*login: administratorLoginName\s*sid: administratorObjectId/);
    expect(my).toMatch(/userAssignedIdentities: \{\s*'\$\{serverIdentity\.id\}': \{\}/);
    // The database waits for Entra-only, which waits for the administrator.
    expect(my).toMatch(/resource entraOnly [\s\S]*dependsOn: \[\s*administrator\s*\][\s\S]*resource database [\s\S]*dependsOn: \[\s*entraOnly\s*\]/);
    expect(my).not.toMatch(/firewallRules|IpAddress/);
  });

  it('the flexible-server hook creates the identity\'s user by id, grants only its database, and the SQL hook hands over to it', () => {
    for (const file of ['infra/scripts/postprovision-flexible.sh', 'infra/scripts/postprovision-flexible.ps1']) {
      const script = read(file);
      expect(script, file).toContain('az account get-access-token --resource-type oss-rdbms');
      expect(script, file).toMatch(/SELECT pgaadauth_create_principal_with_oid\(:'app_role', :'app_oid', 'service', false, false\)\nWHERE NOT EXISTS \(SELECT 1 FROM pg_roles WHERE rolname = :'app_role'\);/);
      expect(script, file).toMatch(/CREATE AADUSER '\$\w+' IDENTIFIED BY '\$\w+';/);
      expect(script, file).toContain('infra/scripts/sql/postgresql-app-grants.sql');
      expect(script, file).toContain('infra/scripts/sql/mysql-app-grants.sql');
      expect(script, file).toMatch(/flexible-server firewall-rule create/);
      expect(script, file).toMatch(/flexible-server firewall-rule delete/);
      expect(script, file).toContain('--enable-cleartext-plugin');
      expect(script, file).toContain('sslmode=require');
    }
    expect(read('infra/scripts/postprovision.sh')).toMatch(/postgresql\|mysql\) exec bash infra\/scripts\/postprovision-flexible\.sh ;;/);
    expect(read('infra/scripts/postprovision.ps1')).toMatch(/if \(\$engine -in 'postgresql', 'mysql'\) \{\n\s*& \(Join-Path \$PSScriptRoot 'postprovision-flexible\.ps1'\)/);
    // Only the app's own database, and no server-wide rights (the test runs these files against local servers).
    expect(read('infra/scripts/sql/postgresql-app-grants.sql')).not.toMatch(/SUPERUSER|CREATEROLE|CREATEDB|ALL PRIVILEGES|azure_pg_admin/i);
    expect(read('infra/scripts/sql/mysql-app-grants.sql')).toMatch(/ON `', REPLACE\(@app_db, '`', '``'\), '`\.\* TO /);
    expect(read('infra/scripts/sql/mysql-app-grants.sql')).not.toMatch(/ALL PRIVILEGES|GRANT OPTION|\*\.\*/i);
  });
});

/** Stand-ins for az, psql and mysql that record their arguments, stdin and the token variable they were given. */
function standIns(dir: string): void {
  const record = (name: string, body = '') => {
    writeFileSync(join(dir, name), `#!/bin/bash\n${body}\n` +
      `printf '%s\\n' "${name} $* [PGPASSWORD=\${PGPASSWORD:-} MYSQL_PWD=\${MYSQL_PWD:-}]" >> "$FAKE_LOG"\n` +
      `[ -t 0 ] || cat >> "$FAKE_LOG"\n` +
      'case "$*" in *get-access-token*) echo tok-from-az-login ;; *"SELECT COUNT"*) echo 0 ;; esac\n', { mode: 0o755 });
  };
  record('az');
  record('psql');
  record('mysql', 'if [ "$1" = "--help" ]; then echo "--ssl-mode"; exit 0; fi');
}

describe('infra: the flexible-server hook, run with stand-ins for az, psql and mysql', () => {
  it.each(['postgresql', 'mysql'])('%s: token from az login into the client\'s environment only, user by id, rule removed', (engine) => {
    const dir = mkdtempSync(join(tmpdir(), 'sm-hook-'));
    try {
      standIns(dir);
      const log = join(dir, 'log');
      execFileSync('bash', ['infra/scripts/postprovision.sh'], {
        cwd: root, stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          PATH: `${dir}:${process.env.PATH}`, FAKE_LOG: log, DATABASE_ENGINE: engine, DATABASE_SERVER_NAME: 'srv',
          DATABASE_HOST: 'srv.example', DATABASE_NAME: 'submissionmanager', DATABASE_USER: 'id-api-abc', DATABASE_ADMIN_LOGIN: 'me@example.com',
          AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID: '11111111-1111-4111-8111-111111111111',
          AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID: '22222222-2222-4222-8222-222222222222',
          AZURE_RESOURCE_GROUP: 'rg', AZURE_TENANT_ID: 'tenant', SQL_CLIENT_IP: '203.0.113.7',
        },
      });
      const calls = readFileSync(log, 'utf8');
      const group = engine === 'postgresql' ? 'postgres' : 'mysql';
      expect(calls).toMatch(/^az account get-access-token --resource-type oss-rdbms --tenant tenant /);
      expect(calls).toContain(`az ${group} flexible-server firewall-rule create --resource-group rg --name srv --rule-name azd-postprovision-203-0-113-7`);
      expect(calls.trimEnd().split('\n').at(-1)).toMatch(new RegExp(`^az ${group} flexible-server firewall-rule delete .*--rule-name azd-postprovision-203-0-113-7 --yes`));
      // The token reaches the database client through its environment, never its arguments.
      const clientLines = calls.split('\n').filter((l) => l.startsWith(`${engine === 'postgresql' ? 'psql' : 'mysql'} `));
      expect(clientLines.length).toBeGreaterThanOrEqual(2);
      for (const line of clientLines) {
        expect(line.slice(0, line.indexOf(' [')), line).not.toContain('tok-from-az-login');
        expect(line).toMatch(engine === 'postgresql' ? /\[PGPASSWORD=tok-from-az-login / : /MYSQL_PWD=tok-from-az-login\]$/);
      }
      if (engine === 'postgresql') {
        expect(calls).toContain('psql host=srv.example port=5432 dbname=postgres user=me@example.com sslmode=require -v ON_ERROR_STOP=1 -v app_role=id-api-abc -v app_oid=22222222-2222-4222-8222-222222222222');
        expect(calls).toContain("SELECT pgaadauth_create_principal_with_oid(:'app_role', :'app_oid', 'service', false, false)");
        expect(calls).toContain('-v app_role=id-api-abc -v app_db=submissionmanager -f infra/scripts/sql/postgresql-app-grants.sql');
      } else {
        expect(calls).toContain('--ssl-mode=REQUIRED --enable-cleartext-plugin');
        expect(calls).toContain("CREATE AADUSER 'id-api-abc' IDENTIFIED BY '11111111-1111-4111-8111-111111111111';");
        expect(calls).toContain("SET @app_user = 'id-api-abc', @app_db = 'submissionmanager';");
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a database user name that is not a plain name (it goes into SQL text)', () => {
    const run = () => execFileSync('bash', ['infra/scripts/postprovision-flexible.sh'], {
      cwd: root, stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, DATABASE_ENGINE: 'mysql', DATABASE_SERVER_NAME: 's', DATABASE_HOST: 'h', DATABASE_NAME: 'd',
        DATABASE_USER: "x'; DROP USER root; --", DATABASE_ADMIN_LOGIN: 'a', AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID: 'c',
        AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID: 'p', AZURE_RESOURCE_GROUP: 'rg', AZURE_TENANT_ID: 't' },
    });
    expect(run).toThrow(/DATABASE_USER is not a plain name/);
  });
});
