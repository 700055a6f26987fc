// @confluentinc/kafka-javascript as the specs require it, with one change: the KafkaJS-style
// client connects to KAFKA_BOOTSTRAP (Moldau's broker on a free port) instead of the
// localhost:9092 written in the specs. Everything else is the real module.
const path = require('path');

const real = require(path.join(__dirname, 'node_modules', '@confluentinc', 'kafka-javascript'));

const bootstrap = process.env.KAFKA_BOOTSTRAP;
if (!bootstrap) {
  throw new Error('KAFKA_BOOTSTRAP is not set (the broker to test)');
}

class Kafka extends real.KafkaJS.Kafka {
  constructor(config = {}) {
    const kafkaJS = { ...(config.kafkaJS || {}), brokers: bootstrap.split(',') };
    super({ ...config, kafkaJS });
  }
}

module.exports = { ...real, KafkaJS: { ...real.KafkaJS, Kafka } };
