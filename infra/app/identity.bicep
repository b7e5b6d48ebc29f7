// User-assigned managed identity for the function app. One identity, granted narrowly:
// storage data roles (storage.bicep), Monitoring Metrics Publisher (monitoring.bicep) and a
// contained database user created by infra/scripts/postprovision.* (Azure SQL has no ARM role for data).

@description('Name of the user-assigned managed identity.')
param name string

@description('Azure region of the identity.')
param location string = resourceGroup().location

@description('Tags applied to the identity.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output name string = identity.name
output clientId string = identity.properties.clientId
output principalId string = identity.properties.principalId
