// Private networking (vnetEnabled): a virtual network with a subnet delegated to the Flex Consumption app
// (Microsoft.App/environments, as the official Flex templates use) and a subnet for private endpoints; private
// endpoints with private DNS zones for the storage account's blob service and the database server (Azure SQL,
// PostgreSQL or MySQL flexible server). The app then reaches storage and the database over private addresses;
// storage denies public traffic and no database server has an Azure-wide firewall rule.

@description('Name of the virtual network.')
param name string

@description('Azure region of the network resources.')
param location string = resourceGroup().location

@description('Tags applied to the network resources.')
param tags object = {}

@description('Resource id of the storage account (AzureWebJobsStorage, deployment package).')
param storageAccountId string

@description('Resource id of the database server: Azure SQL logical server, or PostgreSQL / MySQL flexible server.')
param databaseServerId string

@allowed([
  'sqlserver'
  'postgresql'
  'mysql'
])
@description('Engine of that server: picks the private endpoint group and its private DNS zone.')
param databaseEngine string = 'sqlserver'

var appSubnetName = 'app'
var endpointSubnetName = 'private-endpoints'

resource vnet 'Microsoft.Network/virtualNetworks@2023-11-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        '10.0.0.0/16'
      ]
    }
    subnets: [
      {
        name: endpointSubnetName
        properties: {
          addressPrefix: '10.0.1.0/24'
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
      {
        name: appSubnetName
        properties: {
          addressPrefix: '10.0.2.0/24'
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
    ]
  }
}

var databaseEndpoints = {
  sqlserver: { name: 'sql', targetId: databaseServerId, groupId: 'sqlServer', zone: 'privatelink${environment().suffixes.sqlServerHostname}' }
  postgresql: { name: 'psql', targetId: databaseServerId, groupId: 'postgresqlServer', zone: 'privatelink.postgres.database.azure.com' }
  mysql: { name: 'mysql', targetId: databaseServerId, groupId: 'mysqlServer', zone: 'privatelink.mysql.database.azure.com' }
}

var endpoints = [
  { name: 'blob', targetId: storageAccountId, groupId: 'blob', zone: 'privatelink.blob.${environment().suffixes.storage}' }
  databaseEndpoints[databaseEngine]
]

resource zones 'Microsoft.Network/privateDnsZones@2020-06-01' = [for e in endpoints: {
  name: e.zone
  location: 'global'
  tags: tags
}]

resource zoneLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2020-06-01' = [for (e, i) in endpoints: {
  parent: zones[i]
  name: '${name}-link'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2023-11-01' = [for e in endpoints: {
  name: 'pe-${e.name}-${name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: '${vnet.id}/subnets/${endpointSubnetName}'
    }
    privateLinkServiceConnections: [
      {
        name: 'pe-${e.name}'
        properties: {
          privateLinkServiceId: e.targetId
          groupIds: [
            e.groupId
          ]
        }
      }
    ]
  }
}]

resource dnsGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2023-11-01' = [for (e, i) in endpoints: {
  parent: privateEndpoints[i]
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: e.name
        properties: {
          privateDnsZoneId: zones[i].id
        }
      }
    ]
  }
}]

output appSubnetId string = '${vnet.id}/subnets/${appSubnetName}'
output name string = vnet.name
