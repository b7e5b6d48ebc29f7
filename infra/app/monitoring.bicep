// Log Analytics + workspace-based Application Insights with local (instrumentation-key) auth disabled:
// telemetry is accepted only from Entra identities holding Monitoring Metrics Publisher.

@description('Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Azure region of the monitoring resources.')
param location string = resourceGroup().location

@description('Tags applied to the monitoring resources.')
param tags object = {}

@description('Principal id of the function app\'s user-assigned identity; receives Monitoring Metrics Publisher.')
param identityPrincipalId string

var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2022-10-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, identityPrincipalId, monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output name string = applicationInsights.name
// Not a secret: with DisableLocalAuth the instrumentation key alone cannot ingest telemetry.
output connectionString string = applicationInsights.properties.ConnectionString
