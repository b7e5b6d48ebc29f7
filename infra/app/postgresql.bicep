// Azure Database for PostgreSQL flexible server with Microsoft Entra authentication only (PostgreSQL's own
// logins are disabled, so none exists) and the application database.
// The app's identity becomes a database role in infra/scripts/postprovision-flexible.* (pgaadauth_create_principal_with_oid):
// ARM cannot create roles inside the server. No firewall rule: the app connects through a private endpoint
// (network.bicep); the hook opens your own IP for its duration only.

@description('Name of the flexible server (globally unique: <name>.postgres.database.azure.com).')
param serverName string

@description('Name of the application database.')
param databaseName string

@description('Azure region of the server.')
param location string = resourceGroup().location

@description('Tags applied to the server.')
param tags object = {}

@description('Object id of the Entra principal that administers the server: the developer running azd.')
param administratorObjectId string

@description('Role name of the Entra administrator (what psql connects as; the object id is what is checked).')
param administratorLoginName string

@allowed([
  'User'
  'Group'
  'Application'
])
@description('Kind of the Entra administrator principal (Application becomes ServicePrincipal).')
param administratorPrincipalType string = 'User'

@allowed([
  '16'
  '17'
])
@description('PostgreSQL major version (16 or newer: LISTEN/NOTIFY and the SQL the app uses are unchanged since 12).')
param version string = '16'

@description('Compute size. Default Standard_B1ms (Burstable, 1 vCore, 2 GiB), the smallest.')
param skuName string = 'Standard_B1ms'

@description('Storage in GiB (32 is the smallest; auto-grow off so the bill stays fixed).')
param storageSizeGB int = 32

resource server 'Microsoft.DBforPostgreSQL/flexibleServers@2024-08-01' = {
  name: serverName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: 'Burstable'
  }
  properties: {
    version: version
    storage: {
      storageSizeGB: storageSizeGB
      autoGrow: 'Disabled'
    }
    backup: {
      backupRetentionDays: 7
      geoRedundantBackup: 'Disabled'
    }
    highAvailability: {
      mode: 'Disabled'
    }
    // Public endpoint with no firewall rule: nothing reaches it but the hook's temporary rule for your IP.
    network: {
      publicNetworkAccess: 'Enabled'
    }
    authConfig: {
      activeDirectoryAuth: 'Enabled'
      passwordAuth: 'Disabled'
      tenantId: tenant().tenantId
    }
  }
}

resource administrator 'Microsoft.DBforPostgreSQL/flexibleServers/administrators@2024-08-01' = {
  parent: server
  name: administratorObjectId
  properties: {
    principalType: administratorPrincipalType == 'Application' ? 'ServicePrincipal' : administratorPrincipalType
    principalName: administratorLoginName
    tenantId: tenant().tenantId
  }
}

// After the administrator: the server accepts one change at a time.
resource database 'Microsoft.DBforPostgreSQL/flexibleServers/databases@2024-08-01' = {
  parent: server
  name: databaseName
  properties: {
    charset: 'UTF8'
    collation: 'en_US.utf8'
  }
  dependsOn: [
    administrator
  ]
}

output serverName string = server.name
output id string = server.id
output fullyQualifiedDomainName string = server.properties.fullyQualifiedDomainName
output databaseName string = database.name
