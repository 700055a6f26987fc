// A kafkajs group consumer for the consumer-group tests (tests/integration/groups_harness.py).
// One JSON line per event to config.out: assign (on every group join), rec, commit.
// Usage: node group_worker.js '{"bootstrap": ..., "group": ..., "topic": ..., "out": ...}'
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const config = JSON.parse(process.argv[2]);
const out = fs.openSync(config.out, 'a');
const emit = (e, fields) => fs.writeSync(out, JSON.stringify({ e, t: Date.now() / 1000, ...fields }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const kafka = new Kafka({ clientId: `worker-${config.name}`, brokers: [config.bootstrap], logLevel: logLevel.ERROR });
  const consumer = kafka.consumer({
    groupId: config.group,
    sessionTimeout: config.sessionMs,
    heartbeatInterval: config.heartbeatMs,
    rebalanceTimeout: 10000,
  });
  let owned = [];
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    const mine = (event.payload.memberAssignment[config.topic] || []).slice().sort((a, b) => a - b);
    emit('revoke', { p: owned });
    emit('assign', { p: mine });
    owned = mine;
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [config.topic], fromBeginning: true });
  const auto = config.commit === 'auto';
  await consumer.run({
    autoCommit: auto,
    autoCommitInterval: auto ? config.autoCommitMs : null,
    eachMessage: async ({ topic, partition, message }) => {
      emit('rec', { p: partition, o: Number(message.offset) });
      if (config.delayMs) await sleep(config.delayMs);
      const next = (BigInt(message.offset) + 1n).toString();
      if (config.commit === 'sync') {
        try {
          await consumer.commitOffsets([{ topic, partition, offset: next }]);
          emit('commit', { p: partition, o: Number(next) });
        } catch (err) {
          emit('commit_failed', { p: partition, o: Number(next), error: String(err) });
        }
      } else if (config.commit === 'async') {
        consumer.commitOffsets([{ topic, partition, offset: next }]).catch(() => {});
      }
    },
  });
  emit('ready', {});
  const stop = async () => { await consumer.disconnect(); process.exit(0); };
  process.on('SIGTERM', stop);
}

main().catch((err) => { console.error(err); process.exit(1); });
