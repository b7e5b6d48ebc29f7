// Storage for the Functions host (AzureWebJobsStorage: timer-trigger listener locks, host keys) and the Flex
// Consumption deployment package. Shared-key access is off: only Entra identities get in.

@description('Name of the storage account (3-24 lowercase letters and digits).')
param name string

@description('Azure region of the storage account.')
param location string = resourceGroup().location

@description('Tags applied to the storage account.')
param tags object = {}

@description('Blob container that holds the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Principal id of the function app\'s user-assigned identity; receives the data-plane roles below.')
param identityPrincipalId string

@description('Private networking: deny public traffic (the app reaches blob storage through a private endpoint).')
param vnetEnabled bool = false

// Only what the app uses: blobs (the host's timer listener locks and keys in azure-webjobs-hosts/-secrets, the
// deployment package). No queue or table role: the app has no queue, blob or durable triggers (the official Flex
// quickstarts grant the same for HTTP/timer apps). Built-in role ids:
// https://learn.microsoft.com/azure/role-based-access-control/built-in-roles
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var roleIds = [
  storageBlobDataOwner
]

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    dnsEndpointType: 'Standard'
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: vnetEnabled ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: vnetEnabled ? 'Deny' : 'Allow'
      bypass: vnetEnabled ? 'None' : 'AzureServices'
    }
  }

  resource blobServices 'blobServices' = {
    name: 'default'

    resource deploymentContainer 'containers' = {
      name: deploymentContainerName
      properties: {
        publicAccess: 'None'
      }
    }
  }
}

resource roleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in roleIds: {
    name: guid(storage.id, identityPrincipalId, roleId)
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
      principalId: identityPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

output name string = storage.name
output id string = storage.id
output blobEndpoint string = storage.properties.primaryEndpoints.blob
