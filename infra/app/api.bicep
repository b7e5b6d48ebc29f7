// The function app: Flex Consumption (FC1), Linux, Node 22, one user-assigned identity for everything.
// App settings carry names and ids only — no keys, connection secrets or database credentials.

@description('Name of the function app (globally unique host name <name>.azurewebsites.net).')
param name string

@description('Name of the Flex Consumption plan.')
param planName string

@description('Azure region of the plan and the app.')
param location string = resourceGroup().location

@description('Tags applied to the plan and the app (the app also gets azd-service-name).')
param tags object = {}

@description('Storage account used as AzureWebJobsStorage and for the deployment package.')
param storageAccountName string

@description('Blob container in that account that holds the deployment package.')
param deploymentContainerName string

@description('Resource id of the user-assigned identity the app runs as.')
param identityId string

@description('Client id of that identity (AZURE_CLIENT_ID, AzureWebJobsStorage__clientId, App Insights auth).')
param identityClientId string

@description('Application Insights connection string (not a secret; local auth is disabled on the component).')
param applicationInsightsConnectionString string

@allowed([
  'sqlserver'
  'postgresql'
  'mysql'
])
@description('Database engine (DATABASE_ENGINE): which settings below name the server.')
param databaseEngine string = 'sqlserver'

@description('Fully qualified host name of the database server (SQL_SERVER, or DATABASE_HOST on a flexible server).')
param databaseHost string

@description('Name of the application database (SQL_DATABASE, or DATABASE_NAME).')
param databaseName string

@description('Database user of the app\'s identity on a flexible server (DATABASE_USER); unused on Azure SQL.')
param databaseUser string = ''

@description('Provider endpoint the executor calls (PROVIDER_URL). Empty until you point it at a provider.')
param providerUrl string = ''

@minValue(1)
@maxValue(1000)
@description('Upper bound on Flex Consumption instances. Only the lease holder executes; the others serve HTTP.')
param maximumInstanceCount int = 40

@description('Subnet (delegated to Microsoft.App/environments) for VNet integration; empty: none.')
param virtualNetworkSubnetId string = ''

@allowed([
  512
  2048
  4096
])
@description('Memory per instance in MB.')
param instanceMemoryMB int = 2048

// The database as the app's identity: Azure SQL through tedious' Entra auth; a flexible server with the identity's
// token as the secret of DATABASE_USER (src/azureDatabase.ts). src/azureDatabase.ts AZURE_DATABASE_APP_SETTINGS
// lists the same names (test/unit/infra.test.ts compares them).
var databaseSettings = {
  sqlserver: [
    { name: 'SQL_SERVER', value: databaseHost }
    { name: 'SQL_DATABASE', value: databaseName }
  ]
  postgresql: [
    { name: 'DATABASE_HOST', value: databaseHost }
    { name: 'DATABASE_NAME', value: databaseName }
    { name: 'DATABASE_USER', value: databaseUser }
  ]
  mysql: [
    { name: 'DATABASE_HOST', value: databaseHost }
    { name: 'DATABASE_NAME', value: databaseName }
    { name: 'DATABASE_USER', value: databaseUser }
  ]
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    virtualNetworkSubnetId: empty(virtualNetworkSubnetId) ? null : virtualNetworkSubnetId
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      appSettings: concat([
        // Functions host storage through the identity (no AccountKey anywhere).
        { name: 'AzureWebJobsStorage__accountName', value: storage.name }
        { name: 'AzureWebJobsStorage__credential', value: 'managedidentity' }
        { name: 'AzureWebJobsStorage__clientId', value: identityClientId }
        // Telemetry through the identity (the component rejects key-only ingestion).
        { name: 'APPLICATIONINSIGHTS_CONNECTION_STRING', value: applicationInsightsConnectionString }
        { name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING', value: 'ClientId=${identityClientId};Authorization=AAD' }
        // The database with Entra auth as the user-assigned identity (plus databaseSettings, appended below).
        { name: 'AZURE_CLIENT_ID', value: identityClientId }
        { name: 'DATABASE_ENGINE', value: databaseEngine }
        // Lease, schedule and executor (docs/configuration defaults; the app validates their relations at start).
        { name: 'LEASE_NAME', value: 'submission-manager-executor' }
        { name: 'LEASE_DURATION_MS', value: '60000' }
        { name: 'LEASE_RENEW_INTERVAL_MS', value: '20000' }
        { name: 'LEASE_ACQUIRE_INTERVAL_MS', value: '30000' }
        { name: 'SCHEDULE_REFRESH_INTERVAL_MS', value: '1000' }
        { name: 'COMMIT_GRACE_MS', value: '5000' }
        { name: 'EXECUTOR_SCHEDULE', value: '*/10 * * * * *' }
        { name: 'EXECUTOR_TICK_BUDGET_MS', value: '44000' }  // a cap: each tick ends 250 ms before the next occurrence
        { name: 'EXECUTOR_TICK_HANDOFF_MS', value: '250' }
        { name: 'EXECUTOR_CONCURRENCY', value: '16' }
        // Provider.
        { name: 'PROVIDER_URL', value: providerUrl }
        { name: 'PROVIDER_TIMEOUT_MS', value: '10000' }
        { name: 'LOG_LEVEL', value: 'info' }
        { name: 'RETENTION_DAYS', value: '30' }
      ], databaseSettings[databaseEngine])
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'node'
        version: '22'
      }
    }
  }
}

output name string = functionApp.name
output uri string = 'https://${functionApp.properties.defaultHostName}'
