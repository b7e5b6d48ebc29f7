// Azure SQL logical server with Microsoft Entra-only authentication (no SQL logins exist at all) and a
// small serverless database. The app's identity is added as a contained database user by
// infra/scripts/postprovision.* — ARM cannot grant database-level permissions.

@description('Name of the Azure SQL logical server (globally unique).')
param serverName string

@description('Name of the application database.')
param databaseName string

@description('Azure region of the server and database.')
param location string = resourceGroup().location

@description('Tags applied to the server and database.')
param tags object = {}

@description('Object id (SID) of the Entra principal that administers the server: the developer running azd.')
param administratorObjectId string

@description('Display name recorded for the Entra administrator.')
param administratorLoginName string

@allowed([
  'User'
  'Group'
  'Application'
])
@description('Kind of the Entra administrator principal.')
param administratorPrincipalType string = 'User'

@description('Network-level access: true opens the server to Azure services ("Allow Azure services", 0.0.0.0), which admits connections from any Azure tenant (Entra-only auth still rejects every identity but the app and the admin). False (private networking): no such rule; the app connects through a private endpoint.')
param allowAzureServices bool = true

@description('Public endpoint of the server. With private networking it stays Enabled with no firewall rule at all, so only the postprovision hook\'s temporary rule for your IP gets through; set Disabled once provisioning is done (or run the hook inside the network).')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

@description('Minutes of inactivity before the serverless database pauses (minimum 60; -1 disables auto-pause). The executor timer queries the lease every tick, so a running app keeps the database awake.')
param autoPauseDelayMinutes int = 60

resource server 'Microsoft.Sql/servers@2021-11-01' = {
  name: serverName
  location: location
  tags: tags
  properties: {
    version: '12.0'
    minimalTlsVersion: '1.2'
    publicNetworkAccess: publicNetworkAccess
    administrators: {
      administratorType: 'ActiveDirectory'
      azureADOnlyAuthentication: true
      principalType: administratorPrincipalType
      login: administratorLoginName
      sid: administratorObjectId
      tenantId: tenant().tenantId
    }
  }
}

// The only firewall rule, and only without private networking: "Allow Azure services and resources to access this
// server" (0.0.0.0-0.0.0.0), because Flex Consumption has no fixed outbound IPs without VNet integration. It admits
// every Azure tenant at the network level; Entra-only auth is what keeps them out. With private networking
// (allowAzureServices false) there is no rule: the app uses the private endpoint. The postprovision hook opens the
// developer's own IP temporarily and removes it again; nothing here opens the internet.
resource allowAzureServicesRule 'Microsoft.Sql/servers/firewallRules@2021-11-01' = if (allowAzureServices) {
  parent: server
  name: 'AllowAllWindowsAzureIps'
  properties: {
    startIpAddress: '0.0.0.0'
    endIpAddress: '0.0.0.0'
  }
}

resource database 'Microsoft.Sql/servers/databases@2021-11-01' = {
  parent: server
  name: databaseName
  location: location
  tags: tags
  sku: {
    name: 'GP_S_Gen5_1'
    tier: 'GeneralPurpose'
    family: 'Gen5'
    capacity: 1
  }
  properties: {
    autoPauseDelay: autoPauseDelayMinutes
    minCapacity: json('0.5')
    maxSizeBytes: 34359738368
    zoneRedundant: false
  }
}

output serverName string = server.name
output id string = server.id
output fullyQualifiedDomainName string = server.properties.fullyQualifiedDomainName
output databaseName string = database.name
