// SubmissionManager on Azure Functions Flex Consumption, in the style of the azd Flex templates.
// Everything authenticates with Microsoft Entra ID: the app's user-assigned identity reaches Storage,
// Application Insights and Azure SQL; no keys, connection secrets or SQL logins are created.
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

@description('Object id of the Entra principal running azd (azd sets AZURE_PRINCIPAL_ID). It becomes the Entra administrator of the Azure SQL server. Empty: the identity running the deployment.')
param principalId string = ''

@description('Display name recorded for the Azure SQL Entra administrator (the object id is what grants access). Set AZURE_PRINCIPAL_LOGIN_NAME to your UPN to make it readable.')
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

@description('Private networking (azd env VNET_ENABLED=true): a virtual network, the app integrated into it, private endpoints for blob storage and Azure SQL, storage closed to public traffic and no "Allow Azure services" rule on SQL. False: public endpoints, SQL open to Azure services (Entra-only auth).')
param vnetEnabled bool = false

var abbrs = loadJsonContent('./abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var functionAppName = '${abbrs.webSitesFunctions}api-${resourceToken}'
var deploymentStorageContainerName = 'app-package-${take(functionAppName, 32)}-${take(toLower(uniqueString(functionAppName, resourceToken)), 7)}'
var sqlAdministratorObjectId = !empty(principalId) ? principalId : deployer().objectId
var sqlDatabaseName = 'submissionmanager'

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
    vnetEnabled: vnetEnabled
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

module sql './app/sql.bicep' = {
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

module network './app/network.bicep' = if (vnetEnabled) {
  name: 'network'
  scope: rg
  params: {
    name: '${abbrs.networkVirtualNetworks}${resourceToken}'
    location: location
    tags: tags
    storageAccountId: storage.outputs.id
    sqlServerId: sql.outputs.id
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
    sqlServerFqdn: sql.outputs.fullyQualifiedDomainName
    sqlDatabaseName: sql.outputs.databaseName
    providerUrl: providerUrl
    virtualNetworkSubnetId: vnetEnabled ? network.outputs.appSubnetId : ''
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
output SQL_SERVER string = sql.outputs.fullyQualifiedDomainName
output SQL_DATABASE string = sql.outputs.databaseName
