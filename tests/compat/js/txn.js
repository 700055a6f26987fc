// kafkajs side of Moldau's transaction tests (tests/compat/test_txn_clients.py and the shared
// helpers in tests/compat/txn_support.py).
//
//   node txn.js writer BOOTSTRAP   JSON steps on stdin, one JSON answer per line on stdout,
//                                  the same protocol as tests/compat/txn_proc.py
//   node txn.js read               a JSON job on stdin ({bootstrap, topics, groupId,
//                                  readUncommitted, sentinels, timeoutMs}); prints
//                                  {records: [[topic, partition, key, value], ...]}
//
// kafkajs consumes only through groups, so the reader joins a fresh group and stops once the
// sentinel key of every partition arrived (everything before it has then been seen).
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

function kafkaFor (bootstrap) {
  return new Kafka({
    clientId: 'moldau-txn', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
  })
}

const FENCED = ['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH']

function errorAnswer (err) {
  const type = err.type || (err.originalError && err.originalError.type) || err.name
  return { ok: false, error: err.name, code: type, fenced: FENCED.includes(type), fatal: null,
    detail: String(err.message).slice(0, 500) }
}

async function writer (bootstrap) {
  const kafka = kafkaFor(bootstrap)
  const producers = {}
  const txns = {}
  const pending = {}
  const ops = {
    async init (s) {
      const p = kafka.producer({ transactionalId: s.tid, maxInFlightRequests: 1,
        idempotent: true, transactionTimeout: s.timeout_ms || 60000 })
      producers[s.p] = p
      await p.connect()
      // kafkajs sends InitProducerId with the first transaction(): begin it here, so init
      // fences earlier producers as init_transactions() does; begin then takes it.
      txns[s.p] = await p.transaction()
      pending[s.p] = true
    },
    async begin (s) {
      if (!pending[s.p]) txns[s.p] = await producers[s.p].transaction()
      pending[s.p] = false
    },
    async send (s) {
      await txns[s.p].send({ topic: s.topic, messages: [
        { key: s.key, value: s.value, partition: s.partition }] })
    },
    async flush (s) {},
    async commit (s) { await txns[s.p].commit() },
    async abort (s) { await txns[s.p].abort() },
    async offsets (s) {
      await txns[s.p].sendOffsets({ consumerGroupId: s.group, topics: [{ topic: s.topic,
        partitions: [{ partition: s.partition, offset: String(s.offset) }] }] })
    },
    async close (s) { await producers[s.p].disconnect(); delete producers[s.p] },
  }
  console.log(JSON.stringify({ ok: true, ready: true }))
  const rl = readline.createInterface({ input: process.stdin })
  for await (const line of rl) {
    const step = JSON.parse(line)
    let answer
    try {
      await ops[step.op](step)
      answer = { ok: true }
    } catch (err) {
      answer = errorAnswer(err)
    }
    console.log(JSON.stringify(answer))
  }
  for (const p of Object.values(producers)) await p.disconnect().catch(() => {})
}

async function read (job) {
  const kafka = kafkaFor(job.bootstrap)
  const consumer = kafka.consumer({ groupId: job.groupId, readUncommitted: job.readUncommitted,
    maxBytesPerPartition: 16384, maxWaitTimeInMs: 200 })
  const records = []
  const missing = new Set(job.sentinels.map(([t, p]) => `${t}/${p}`))
  const sentinelKeys = new Map(job.sentinels.map(([t, p, k]) => [`${t}/${p}`, k]))
  await consumer.connect()
  for (const topic of job.topics) await consumer.subscribe({ topic, fromBeginning: true })
  let done
  const finished = new Promise((resolve) => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const key = message.key === null ? null : message.key.toString()
      records.push([topic, partition, key, message.value === null ? null : message.value.toString()])
      if (sentinelKeys.get(`${topic}/${partition}`) === key) missing.delete(`${topic}/${partition}`)
      if (missing.size === 0) done()
    },
  })
  const timer = setTimeout(done, job.timeoutMs || 30000)
  await finished
  clearTimeout(timer)
  await consumer.disconnect()
  // process.exit() does not wait for a pipe to drain: write, then resolve.
  await new Promise((resolve) => process.stdout.write(JSON.stringify({ records }) + '\n', resolve))
}

async function main () {
  const [command, bootstrap] = process.argv.slice(2)
  if (command === 'writer') return writer(bootstrap)
  const input = await new Promise((resolve) => {
    let text = ''
    process.stdin.on('data', (d) => { text += d })
    process.stdin.on('end', () => resolve(text))
  })
  return read(JSON.parse(input))
}

main().then(() => process.exit(0), (err) => {
  console.error(err && err.stack ? err.stack : String(err))
  process.exit(1)
})
