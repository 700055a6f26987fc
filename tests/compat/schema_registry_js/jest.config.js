// Confluent's end-to-end specs of @confluentinc/schemaregistry, run as shipped in its dist/
// folder (nothing of theirs edited). Two files of ours point them at Moldau: moldau-setup.js
// (the registry URL of their test-constants clientConfig) and kafka-javascript.js (the broker
// list their specs hard-code as localhost:9092). tests/compat/test_schema_registry_js.py runs
// this with SCHEMA_REGISTRY_URL and KAFKA_BOOTSTRAP set.
const path = require('path');

const dist = path.join(__dirname, 'node_modules', '@confluentinc', 'schemaregistry', 'dist');

module.exports = {
  rootDir: dist,
  roots: ['<rootDir>/e2e'],
  testMatch: ['**/*.spec.js'],
  // their specs live under node_modules, which jest leaves out by default
  testPathIgnorePatterns: [],
  haste: { retainAllFiles: true },
  setupFiles: [path.join(__dirname, 'moldau-setup.js')],
  moduleNameMapper: {
    '^@confluentinc/kafka-javascript$': path.join(__dirname, 'kafka-javascript.js'),
  },
  testEnvironment: 'node',
};
