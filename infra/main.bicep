// SubmissionManager on Azure Functions Flex Consumption, in the style of the azd Flex templates.
// Everything authenticates with Microsoft Entra ID: the app's user-assigned identity reaches Storage,
// Application Insights and the database (Azure SQL by default, or a PostgreSQL / MySQL flexible server:
// DATABASE_ENGINE); no keys, connection secrets or database logins are created.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; used for the resource group name and to derive a unique token for resource names.')
param environmentName string

@minLength(1)
@description('Primary location for all resources. Pick a region that offers Flex Consumption and Azure SQL serverless.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Object id of the Entra principal running azd (azd sets AZURE_PRINCIPAL_ID). It becomes the Entra administrator of the database server. Empty: the identity running the deployment.')
param principalId string = ''

@description('Name of the database server\'s Entra administrator (the object id is what grants access; on PostgreSQL and MySQL it is also the user name the hook connects as). Set AZURE_PRINCIPAL_LOGIN_NAME to your UPN to make it readable.')
param principalLoginName string = 'azd-deployer'

@allowed([
  'User'
  'Group'
  'Application'
])
@description('Kind of principal in principalId: User for a developer, Application for a CI service principal, Group for an admin group.')
param principalType string = 'User'

@description('Provider endpoint the executor POSTs attempts to (app setting PROVIDER_URL). Empty: the app accepts intents but has no provider to execute them against.')
param providerUrl string = ''

@description('Private networking (azd env VNET_ENABLED=true): a virtual network, the app integrated into it, private endpoints for blob storage and the database, storage closed to public traffic and no "Allow Azure services" rule on SQL. False: public endpoints, SQL open to Azure services (Entra-only auth). PostgreSQL and MySQL always get private networking: they are never opened to every Azure tenant.')
param vnetEnabled bool = false

@allowed([
  'sqlserver'
  'postgresql'
  'mysql'
])
@description('Database engine (azd env DATABASE_ENGINE): sqlserver = Azure SQL serverless (the default); postgresql = Azure Database for PostgreSQL flexible server 16; mysql = Azure Database for MySQL flexible server 8.4. Entra-only on each.')
param databaseEngine string = 'sqlserver'

var abbrs = loadJsonContent('./abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var functionAppName = '${abbrs.webSitesFunctions}api-${resourceToken}'
var deploymentStorageContainerName = 'app-package-${take(functionAppName, 32)}-${take(toLower(uniqueString(functionAppName, resourceToken)), 7)}'
var sqlAdministratorObjectId = !empty(principalId) ? principalId : deployer().objectId
var sqlDatabaseName = 'submissionmanager'
// The flexible servers have no "Azure services" rule to fall back on (Flex Consumption has no fixed outbound IPs):
// the app always reaches them through the virtual network.
var privateNetwork = vnetEnabled || databaseEngine != 'sqlserver'

resource rg 'Microsoft.Resources/resourceGroups@2021-04-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module identity './app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}api-${resourceToken}'
    location: location
    tags: tags
  }
}

module storage './app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentStorageContainerName
    identityPrincipalId: identity.outputs.principalId
    vnetEnabled: privateNetwork
  }
}

module monitoring './app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    location: location
    tags: tags
    identityPrincipalId: identity.outputs.principalId
  }
}

module sql './app/sql.bicep' = if (databaseEngine == 'sqlserver') {
  name: 'sql'
  scope: rg
  params: {
    serverName: '${abbrs.sqlServers}${resourceToken}'
    databaseName: sqlDatabaseName
    location: location
    tags: tags
    administratorObjectId: sqlAdministratorObjectId
    administratorLoginName: principalLoginName
    administratorPrincipalType: principalType
    allowAzureServices: !vnetEnabled
  }
}

module postgresql './app/postgresql.bicep' = if (databaseEngine == 'postgresql') {
  name: 'postgresql'
  scope: rg
  params: {
    serverName: '${abbrs.dBforPostgreSQLServers}${resourceToken}'
    databaseName: sqlDatabaseName
    location: location
    tags: tags
    administratorObjectId: sqlAdministratorObjectId
    administratorLoginName: principalLoginName
    administratorPrincipalType: principalType
  }
}

module mysql './app/mysql.bicep' = if (databaseEngine == 'mysql') {
  name: 'mysql'
  scope: rg
  params: {
    serverName: '${abbrs.dBforMySQLServers}${resourceToken}'
    databaseName: sqlDatabaseName
    serverIdentityName: '${abbrs.managedIdentityUserAssignedIdentities}mysql-${resourceToken}'
    location: location
    tags: tags
    administratorObjectId: sqlAdministratorObjectId
    administratorLoginName: principalLoginName
  }
}

// The chosen engine's server (only its module is deployed; `if` evaluates only the branch taken).
var databaseServerId = databaseEngine == 'sqlserver' ? sql.outputs.id : databaseEngine == 'postgresql' ? postgresql.outputs.id : mysql.outputs.id
var databaseServerName = databaseEngine == 'sqlserver' ? sql.outputs.serverName : databaseEngine == 'postgresql' ? postgresql.outputs.serverName : mysql.outputs.serverName
var databaseHost = databaseEngine == 'sqlserver' ? sql.outputs.fullyQualifiedDomainName : databaseEngine == 'postgresql' ? postgresql.outputs.fullyQualifiedDomainName : mysql.outputs.fullyQualifiedDomainName
var databaseName = databaseEngine == 'sqlserver' ? sql.outputs.databaseName : databaseEngine == 'postgresql' ? postgresql.outputs.databaseName : mysql.outputs.databaseName
// On a flexible server the app's identity logs in as a database user named like the identity (postprovision).
var databaseUser = databaseEngine == 'sqlserver' ? '' : identity.outputs.name

module network './app/network.bicep' = if (privateNetwork) {
  name: 'network'
  scope: rg
  params: {
    name: '${abbrs.networkVirtualNetworks}${resourceToken}'
    location: location
    tags: tags
    storageAccountId: storage.outputs.id
    databaseServerId: databaseServerId
    databaseEngine: databaseEngine
  }
}

module api './app/api.bicep' = {
  name: 'api'
  scope: rg
  params: {
    name: functionAppName
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    storageAccountName: storage.outputs.name
    deploymentContainerName: deploymentStorageContainerName
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    databaseEngine: databaseEngine
    databaseHost: databaseHost
    databaseName: databaseName
    databaseUser: databaseUser
    providerUrl: providerUrl
    virtualNetworkSubnetId: privateNetwork ? network.outputs.appSubnetId : ''
  }
}

// azd stores these in .azure/<env>/.env; the postprovision hook reads them.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = api.outputs.name
output AZURE_FUNCTION_URI string = api.outputs.uri
output AZURE_USER_ASSIGNED_IDENTITY_NAME string = identity.outputs.name
output AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output AZURE_USER_ASSIGNED_IDENTITY_PRINCIPAL_ID string = identity.outputs.principalId
output DATABASE_ENGINE string = databaseEngine
output DATABASE_SERVER_NAME string = databaseServerName
output DATABASE_HOST string = databaseHost
output DATABASE_NAME string = databaseName
output DATABASE_USER string = databaseUser
output DATABASE_ADMIN_LOGIN string = principalLoginName
// Azure SQL as before (empty on the other engines).
output SQL_SERVER string = databaseEngine == 'sqlserver' ? databaseHost : ''
output SQL_DATABASE string = databaseEngine == 'sqlserver' ? databaseName : ''
