// Azure Database for MySQL flexible server with Microsoft Entra authentication only (aad_auth_only ON: MySQL
// logins are refused) and the application database. The app's identity becomes a database user in
// infra/scripts/postprovision-flexible.* (CREATE AADUSER): ARM cannot create users inside the server.
// Entra on MySQL needs a server identity that may read Microsoft Graph (User.Read.All, GroupMember.Read.All,
// Application.Read.All, or the Directory Readers role), which only a tenant administrator can grant: see
// docs/deploy.md. No firewall rule: the app connects through a private endpoint (network.bicep).

@description('Name of the flexible server (globally unique: <name>.mysql.database.azure.com).')
param serverName string

@description('Name of the application database.')
param databaseName string

@description('Name of the server\'s own user-assigned identity (it looks Entra principals up in Microsoft Graph).')
param serverIdentityName string

@description('Azure region of the server.')
param location string = resourceGroup().location

@description('Tags applied to the server and its identity.')
param tags object = {}

@description('Object id (SID) of the Entra principal that administers the server: the developer running azd.')
param administratorObjectId string

@description('User name of the Entra administrator (what the mysql client connects as).')
param administratorLoginName string

@description('MySQL version: 8.4, the long-term-support release.')
param version string = '8.4'

@description('Compute size. Default Standard_B1ms (Burstable, 1 vCore, 2 GiB), the smallest.')
param skuName string = 'Standard_B1ms'

@description('Storage in GiB (20 is the smallest; auto-grow off so the bill stays fixed).')
param storageSizeGB int = 20

// The create API insists on a MySQL login. It gets a random value generated at each deployment, never output
// nor stored anywhere, and refused anyway once aad_auth_only is ON below.
@secure()
@description('Generated; leave unset. The bootstrap login the create API requires, unusable under aad_auth_only.')
param bootstrapSecret string = newGuid()

resource serverIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: serverIdentityName
  location: location
  tags: tags
}

resource server 'Microsoft.DBforMySQL/flexibleServers@2024-12-30' = {
  name: serverName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: 'Burstable'
  }
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${serverIdentity.id}': {}
    }
  }
  properties: {
    version: version
    administratorLogin: 'bootstrap'
    administratorLoginPassword: bootstrapSecret
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
  }
}

resource administrator 'Microsoft.DBforMySQL/flexibleServers/administrators@2024-12-30' = {
  parent: server
  name: 'ActiveDirectory'
  properties: {
    administratorType: 'ActiveDirectory'
    identityResourceId: serverIdentity.id
    login: administratorLoginName
    sid: administratorObjectId
    tenantId: tenant().tenantId
  }
}

// Entra-only, once an Entra administrator exists. Changes go one at a time, hence the chain.
resource entraOnly 'Microsoft.DBforMySQL/flexibleServers/configurations@2024-12-30' = {
  parent: server
  name: 'aad_auth_only'
  properties: {
    value: 'ON'
    source: 'user-override'
  }
  dependsOn: [
    administrator
  ]
}

resource database 'Microsoft.DBforMySQL/flexibleServers/databases@2024-12-30' = {
  parent: server
  name: databaseName
  properties: {
    charset: 'utf8mb4'
    collation: 'utf8mb4_0900_ai_ci'
  }
  dependsOn: [
    entraOnly
  ]
}

output serverName string = server.name
output id string = server.id
output fullyQualifiedDomainName string = server.properties.fullyQualifiedDomainName
output databaseName string = database.name
