// Runs before each spec file, in its module registry: the specs build their clients from
// test-constants' clientConfig, whose baseURLs say http://localhost:8081; Moldau's registry
// answers on a free port named by SCHEMA_REGISTRY_URL.
const constants = require('@confluentinc/schemaregistry/dist/test/test-constants');

const url = process.env.SCHEMA_REGISTRY_URL;
if (!url) {
  throw new Error('SCHEMA_REGISTRY_URL is not set (the registry to test)');
}
constants.clientConfig.baseURLs = [url];
