// kafkajs side of Moldau's compatibility tests (driven by tests/compat/test_kafkajs.py).
//
// Usage: node compat.js <command>  with a JSON job on stdin; prints one JSON document.
// Bytes travel as base64 strings (null stays null). Commands: produce, consume, offsets,
// admin, lat (LogAppendTime), group-phase.
//
// kafkajs compresses GZIP itself; the other codecs are plugins: kafkajs-snappy (the published
// plugin), and small adapters over lz4js and zstd-codec (pure JS/wasm: the published LZ4 and
// ZSTD plugins need native builds that no longer compile).
'use strict'

const {
  Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel,
} = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4js = require('lz4js')
const { ZstdCodec } = require('zstd-codec')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress (encoder) { return Buffer.from(lz4js.compress(encoder.buffer)) },
  async decompress (buffer) { return Buffer.from(lz4js.decompress(buffer)) },
})
let zstd = null
const zstdReady = new Promise((resolve) => ZstdCodec.run((z) => { zstd = new z.Simple(); resolve() }))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress (encoder) { await zstdReady; return Buffer.from(zstd.compress(encoder.buffer)) },
  async decompress (buffer) { await zstdReady; return Buffer.from(zstd.decompress(buffer)) },
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (s) => (s === null ? null : Buffer.from(s, 'base64'))

function kafkaFor (job) {
  return new Kafka({
    clientId: 'moldau-compat',
    brokers: [job.bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 8 },
  })
}

// [[name, b64], ...] -> kafkajs headers object; repeated names become arrays (kafkajs 2).
function headersIn (pairs) {
  const out = {}
  for (const [name, value] of pairs) {
    const buf = unb64(value)
    if (!(name in out)) out[name] = buf
    else if (Array.isArray(out[name])) out[name].push(buf)
    else out[name] = [out[name], buf]
  }
  return out
}

function headersOut (headers) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) pairs.push([name, b64(v)])
  }
  return pairs
}

function recordOut (partition, message) {
  return {
    partition,
    offset: Number(message.offset),
    timestamp: Number(message.timestamp),
    key: b64(message.key),
    value: b64(message.value),
    headers: headersOut(message.headers),
  }
}

async function produce (job) {
  const producer = kafkaFor(job).producer({ idempotent: !!job.idempotent, maxInFlightRequests: job.idempotent ? 1 : undefined })
  await producer.connect()
  const offsets = []
  const chunk = job.chunk || 1000
  for (let i = 0; i < job.records.length; i += chunk) {
    const messages = job.records.slice(i, i + chunk).map((r) => ({
      partition: 0,
      key: unb64(r.key),
      value: unb64(r.value),
      headers: headersIn(r.headers),
      ...(r.timestamp >= 0 ? { timestamp: String(r.timestamp) } : {}),
    }))
    const [result] = await producer.send({
      topic: job.topic, acks: -1, compression: CODECS[job.codec], messages,
    })
    for (let j = 0; j < messages.length; j++) offsets.push(Number(result.baseOffset) + j)
  }
  await producer.disconnect()
  return { offsets }
}

// Consume `count` records of partition 0 through group `group`, starting at `start`
// (fromBeginning, then a seek when start > 0).
async function consume (job) {
  // short long-polls: disconnect() waits for the fetch in flight
  const consumer = kafkaFor(job).consumer({ groupId: job.group, maxBytes: 10485760, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topics: [job.topic], fromBeginning: true })
  const records = []
  let done
  const finished = new Promise((resolve) => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        if (records.length < job.count) records.push(recordOut(batch.partition, m))
      }
      if (records.length >= job.count) done()
    },
  })
  if (job.start > 0) consumer.seek({ topic: job.topic, partition: 0, offset: String(job.start) })
  const timer = setTimeout(done, job.timeoutMs || 30000)
  await finished
  clearTimeout(timer)
  await consumer.disconnect()
  return { records }
}

async function offsets (job) {
  const admin = kafkaFor(job).admin()
  await admin.connect()
  const [latest] = await admin.fetchTopicOffsets(job.topic)
  const byTime = []
  for (const ts of job.timestamps) {
    const [answer] = await admin.fetchTopicOffsetsByTimestamp(job.topic, ts)
    byTime.push(Number(answer.offset))
  }
  await admin.disconnect()
  return { low: Number(latest.low), high: Number(latest.high), offset: Number(latest.offset), byTime }
}

async function errorOf (fn) {
  try { await fn(); return null } catch (e) {
    const inner = (e.errors && e.errors[0]) || e
    return { type: inner.type || e.type || e.name, message: inner.message || e.message }
  }
}

async function admin (job) {
  const kafka = kafkaFor(job)
  const admin = kafka.admin()
  await admin.connect()
  const topic = job.topic
  const out = {}
  out.created = await admin.createTopics({
    topics: [{ topic, numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
  })
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  out.partitions = md.topics[0].partitions.map((p) => [p.partitionId, p.leader])
  const describe = async () => (await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'max.message.bytes'] }],
  })).resources[0].configEntries.map((e) => [e.configName, e.configValue])
  out.before = await describe()
  await admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'max.message.bytes', value: '2000' }] }],
  })
  out.after = await describe()
  const producer = kafka.producer()
  await producer.connect()
  out.tooLarge = await errorOf(() => producer.send({
    topic, acks: -1, messages: [{ partition: 0, value: Buffer.alloc(5000, 120) }],
  }))
  out.small = await producer.send({ topic, acks: -1, messages: [{ partition: 1, value: 'small' }] })
  await producer.disconnect()
  out.cluster = await admin.describeCluster()
  await admin.deleteTopics({ topics: [topic] })
  out.listed = await admin.listTopics()
  await admin.disconnect()
  return out
}

async function lat (job) {
  const kafka = kafkaFor(job)
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    topics: [{ topic: job.topic, configEntries: [{ name: 'message.timestamp.type', value: 'LogAppendTime' }] }],
  })
  await admin.disconnect()
  const before = Date.now()
  await produce(job)
  const after = Date.now()
  const { records } = await consume({ ...job, start: 0, count: job.records.length })
  return { before, after, records }
}

// One phase of a group that reads `count` records, commits what it read, and leaves.
async function groupPhase (job) {
  const consumer = kafkaFor(job).consumer({ groupId: job.group, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topics: [job.topic], fromBeginning: true })
  const records = []
  let done
  const finished = new Promise((resolve) => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        if (records.length >= job.count) break
        records.push(recordOut(batch.partition, m))
      }
      if (records.length >= job.count) done()
    },
  })
  const timer = setTimeout(done, job.timeoutMs || 30000)
  await finished
  clearTimeout(timer)
  const next = {}
  for (const r of records) next[r.partition] = Math.max(next[r.partition] || 0, r.offset + 1)
  await consumer.commitOffsets(Object.entries(next).map(([partition, offset]) => ({
    topic: job.topic, partition: Number(partition), offset: String(offset),
  })))
  await consumer.disconnect()
  const admin = kafkaFor(job).admin()
  await admin.connect()
  const committed = await admin.fetchOffsets({ groupId: job.group, topics: [job.topic] })
  await admin.disconnect()
  return {
    records,
    committed: committed[0].partitions.map((p) => [p.partition, Number(p.offset)]),
  }
}

const COMMANDS = { produce, consume, offsets, admin, lat, 'group-phase': groupPhase }

async function main () {
  const command = COMMANDS[process.argv[2]]
  if (!command) throw new Error(`unknown command ${process.argv[2]}`)
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  const result = await command(JSON.parse(input))
  // exit only once the pipe took everything: process.exit() drops pending pipe writes
  await new Promise((resolve) => process.stdout.write(JSON.stringify(result) + '\n', resolve))
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })
