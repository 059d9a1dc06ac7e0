'use strict';
/*
 * Secondary-index benchmark for mayflyd. Prints figures only; no assertions
 * (a failed driver call still aborts the run, since later figures would be
 * meaningless).
 *
 *   node bench/index_bench.js [--scale F] [--secs S]
 *   (or bash bench/index_bench.sh, which builds build/mayflyd first)
 *
 * Server. mayflyd (binary from $MAYFLYD, default build/mayflyd, the release
 * build) is started on a free loopback port with a fresh temporary --dbpath
 * (bench/lib/common.js: tests/clients/harness.js MayflyServer). It is
 * stopped and the directory removed at the end, also on error, Ctrl-C or
 * SIGTERM. Peak RSS is VmHWM from /proc/<pid>/status, read just before
 * shutdown.
 *
 * Documents are {_id: i, k, g: i % 1000, s: "str-<k>-..."} where k is a
 * unique 32-bit integer: the odd multiplicative hash (i * 2654435761) mod 2^32,
 * a bijection on 32-bit values, so k is unique and unrelated to _id order.
 * Random lookups pick a random i and query its k.
 *
 * Phases (N = 200,000 x scale, D = 1,000,000 x scale):
 *   1. Point query. N documents loaded with insertMany(1,000) (load rate
 *      printed). findOne({k: x}) for random x, one connection, for --secs
 *      seconds (or at most 20,000 queries): first with no index on k, then
 *      after createIndex({k: 1}); the indexed case also with 4 concurrent
 *      callers. explain("executionStats") of the query is printed for both
 *      (winning-plan stage tree, keys/docs examined).
 *   2. Range scan. createIndex({g: 1}) on the same collection, then
 *      find({g: {$gte: a, $lt: a + 10}}).toArray() for random a in [0, 990)
 *      (1% of the collection per query), for --secs seconds: queries/s and
 *      docs returned/s; the same query without the index (hint {$natural: 1})
 *      for comparison; plans printed. Then the count command and
 *      countDocuments of {g: {$gt: a, $lt: a + 101}} (10% of the collection,
 *      counted over the index's keys only): queries/s and documents counted/s.
 *   3. Insert throughput. N documents with insertMany(1,000), one connection,
 *      into fresh collections with 0, 1 ({k}) and 3 ({k}, {g}, {s}) secondary
 *      indexes created before the load. Each collection is dropped after.
 *   4. Multi-delete. D documents loaded into a collection with an index on k,
 *      then deleteMany({k: {$gte: 0, $lt: 2^32}}), a range over the index that
 *      covers every document (the deletes therefore run in k order, i.e. in
 *      random _id order). Deleted docs/s, serverStatus().batchedDeletes
 *      before and after, and the remaining count.
 *
 * With default settings the whole run takes roughly 1-3 minutes on 2 cores;
 * --scale 0.1 shrinks every document count tenfold.
 */
const { MongoClient } = require('mongodb');
const { options, nowMs, rng, procStatusKb, mayflyServer, stopMayfly, runMain } = require('./lib/common');

const { num: arg } = options('index_bench');
const SCALE = arg('scale', 1);
const SECS = arg('secs', 3);                          // time box per query measurement
const N = Math.max(1000, Math.round(200000 * SCALE)); // phase 1-3 collection size
const D = Math.max(1000, Math.round(1000000 * SCALE)); // phase 4 collection size
const MAX_QUERIES = 20000;
const BATCH = 1000;

/* ---------- helpers ---------- */

function kOf(i) { return Math.imul(i, 2654435761 | 0) >>> 0; }

function makeDoc(i) {
  const k = kOf(i);
  return { _id: i, k, g: i % 1000, s: `str-${k.toString(36)}-${'x'.repeat(i % 17)}` };
}

function fmt(n) {
  return Math.abs(n) < 100 && !Number.isInteger(n) ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
}

function line(label, value, unit, extra = '') {
  console.log(`  ${label.padEnd(50)} ${fmt(value).padStart(12)} ${unit}${extra ? '   ' + extra : ''}`);
}

async function load(coll, n) {
  const t0 = nowMs();
  for (let i = 0; i < n; i += BATCH) {
    const batch = [];
    for (let j = i; j < Math.min(i + BATCH, n); j++) batch.push(makeDoc(j));
    await coll.insertMany(batch, { ordered: true });
  }
  return nowMs() - t0;
}

/*
 * Runs fn(rand) repeatedly on `callers` concurrent callers until SECS seconds
 * pass or maxOps calls were made. fn returns the number of documents it saw.
 * Returns {ops, docs, ms}.
 */
async function timeBox(fn, { callers = 1, maxOps = MAX_QUERIES, seed = 1 } = {}) {
  const t0 = nowMs();
  const deadline = t0 + SECS * 1000;
  let ops = 0;
  let docs = 0;
  await Promise.all(Array.from({ length: callers }, async (_, w) => {
    const rand = rng(seed * 7919 + w + 1);
    while (ops < maxOps && nowMs() < deadline) {
      ops++;
      docs += await fn(rand);
    }
  }));
  return { ops, docs, ms: nowMs() - t0 };
}

/* One-line rendering of an explain's winning plan: FETCH <- IXSCAN {k: 1} [bounds]. */
function planTree(stage) {
  if (!stage) return '?';
  let s = stage.stage;
  if (stage.indexName) s += ` ${stage.indexName}`;
  if (stage.indexBounds) s += ` ${JSON.stringify(stage.indexBounds)}`;
  if (stage.filter) s += ` filter=${JSON.stringify(stage.filter)}`;
  const kids = stage.inputStage ? [stage.inputStage] : (stage.inputStages || []);
  return kids.length ? `${s} <- ${kids.map(planTree).join(', ')}` : s;
}

async function explainFind(coll, filter, opts = {}) {
  const e = await coll.find(filter, opts).explain('executionStats');
  const wp = e.queryPlanner && e.queryPlanner.winningPlan;
  const es = e.executionStats || {};
  const top = wp && (wp.queryPlan || wp); // 7.0+ SBE shape nests under queryPlan
  const fields = ['nReturned', 'totalKeysExamined', 'totalDocsExamined', 'executionTimeMillis']
    .filter((f) => es[f] !== undefined).map((f) => `${f}=${es[f]}`).join(' ');
  console.log(`    plan: ${planTree(top)}`);
  if (fields) console.log(`    executionStats: ${fields}`);
  return top ? top.stage : null;
}

/* ---------- phases ---------- */

async function phasePointQuery(db) {
  console.log(`\n1. Point query findOne({k: x}), ${fmt(N)} docs, random x, up to ${SECS} s each`);
  const coll = db.collection('points');
  const ms = await load(coll, N);
  line('load (insertMany 1,000, no secondary index)', N / (ms / 1000), 'docs/s', `(${fmt(ms)} ms)`);

  const query = async (rand) => {
    const i = Math.floor(rand() * N);
    const d = await coll.findOne({ k: kOf(i) });
    if (!d || d._id !== i) throw new Error(`findOne({k: ${kOf(i)}}) returned ${JSON.stringify(d)}`);
    return 1;
  };
  const probe = { k: kOf(Math.floor(N / 2)) };

  console.log('  without an index on k:');
  await explainFind(coll, probe);
  let r = await timeBox(query, { seed: 11 });
  line('findOne, no index (COLLSCAN), 1 connection', r.ops / (r.ms / 1000), 'queries/s', `(${r.ops} in ${fmt(r.ms)} ms)`);
  const noIndexRate = r.ops / (r.ms / 1000);

  const t0 = nowMs();
  await coll.createIndex({ k: 1 });
  line('createIndex({k: 1}) build rate', N / ((nowMs() - t0) / 1000), 'docs/s', `(${fmt(nowMs() - t0)} ms)`);
  console.log('  with index {k: 1}:');
  await explainFind(coll, probe);
  r = await timeBox(query, { seed: 12 });
  const ixRate = r.ops / (r.ms / 1000);
  line('findOne, index on k (IXSCAN), 1 connection', ixRate, 'queries/s', `(${r.ops} in ${fmt(r.ms)} ms)`);
  r = await timeBox(query, { seed: 13, callers: 4, maxOps: 4 * MAX_QUERIES });
  line('findOne, index on k (IXSCAN), 4 concurrent callers', r.ops / (r.ms / 1000), 'queries/s', `(${r.ops} in ${fmt(r.ms)} ms)`);
  line('speed-up, index vs no index (1 connection)', ixRate / noIndexRate, 'x');
  return coll;
}

async function phaseRangeScan(coll) {
  console.log(`\n2. Range scan find({g: {$gte: a, $lt: a + 10}}) (~${fmt(N / 100)} docs per query), up to ${SECS} s each`);
  const t0 = nowMs();
  await coll.createIndex({ g: 1 });
  line('createIndex({g: 1}) build rate', N / ((nowMs() - t0) / 1000), 'docs/s', `(${fmt(nowMs() - t0)} ms)`);
  const filterFor = (a) => ({ g: { $gte: a, $lt: a + 10 } });
  const scan = (opts) => async (rand) => {
    const a = Math.floor(rand() * 990);
    const docs = await coll.find(filterFor(a), opts).toArray();
    return docs.length;
  };

  console.log('  with index {g: 1}:');
  await explainFind(coll, filterFor(500));
  let r = await timeBox(scan({}), { seed: 21 });
  line('range scan, index on g: queries', r.ops / (r.ms / 1000), 'queries/s', `(${r.ops} in ${fmt(r.ms)} ms)`);
  line('range scan, index on g: documents returned', r.docs / (r.ms / 1000), 'docs/s', `(${fmt(r.docs)} docs)`);

  console.log('  same query forced to a collection scan (hint {$natural: 1}), for comparison:');
  await explainFind(coll, filterFor(500), { hint: { $natural: 1 } });
  r = await timeBox(scan({ hint: { $natural: 1 } }), { seed: 22 });
  line('range scan, COLLSCAN: queries', r.ops / (r.ms / 1000), 'queries/s', `(${r.ops} in ${fmt(r.ms)} ms)`);
  line('range scan, COLLSCAN: documents returned', r.docs / (r.ms / 1000), 'docs/s', `(${fmt(r.docs)} docs)`);

  /*
   * Counts through the same index: the bounds answer the filter exactly, so
   * count and countDocuments read keys only (plan.c keys_only; explain shows
   * totalDocsExamined 0), and an exclusive bound reads no key at its end.
   */
  console.log(`  counts over the index on g (count command and countDocuments, ~${fmt(N / 10)} keys per query):`);
  const cfilter = (a) => ({ g: { $gt: a, $lt: a + 101 } });
  const ce = await coll.db.command({ explain: { count: coll.collectionName, query: cfilter(500) }, verbosity: 'executionStats' });
  console.log(`    plan: ${planTree(ce.queryPlanner.winningPlan)}`);
  console.log(`    executionStats: totalKeysExamined=${ce.executionStats.totalKeysExamined} ` +
    `totalDocsExamined=${ce.executionStats.totalDocsExamined}`);
  const counter = (kind) => async (rand) => {
    const a = Math.floor(rand() * 890);
    const n = kind === 'count' ? (await coll.db.command({ count: coll.collectionName, query: cfilter(a) })).n
      : await coll.countDocuments(cfilter(a));
    return n;
  };
  for (const kind of ['count', 'countDocuments']) {
    r = await timeBox(counter(kind), { seed: 23 });
    line(`${kind}, index on g: queries`, r.ops / (r.ms / 1000), 'queries/s', `(${r.ops} in ${fmt(r.ms)} ms)`);
    line(`${kind}, index on g: documents counted`, r.docs / (r.ms / 1000), 'docs/s');
  }
}

async function phaseInserts(db) {
  console.log(`\n3. Insert throughput, insertMany batches of ${fmt(BATCH)}, ${fmt(N)} docs, 1 connection`);
  const variants = [
    ['0 secondary indexes', []],
    ['1 secondary index {k}', [{ k: 1 }]],
    ['3 secondary indexes {k}, {g}, {s}', [{ k: 1 }, { g: 1 }, { s: 1 }]],
  ];
  const rates = [];
  for (const [label, keys] of variants) {
    const coll = db.collection(`ins${keys.length}`);
    await db.createCollection(coll.collectionName);
    for (const key of keys) await coll.createIndex(key);
    const ms = await load(coll, N);
    rates.push(N / (ms / 1000));
    line(label, N / (ms / 1000), 'docs/s', `(${fmt(ms)} ms)`);
    const n = await coll.estimatedDocumentCount();
    if (n !== N) console.log(`    (note: collection holds ${n} docs, expected ${N})`);
    await coll.drop();
  }
  line('insert rate with 1 index, relative to 0', 100 * rates[1] / rates[0], '%');
  line('insert rate with 3 indexes, relative to 0', 100 * rates[2] / rates[0], '%');
}

function batchedDeletes(status) {
  return status.batchedDeletes ? JSON.stringify(status.batchedDeletes) : '(absent from serverStatus)';
}

async function phaseDelete(db) {
  console.log(`\n4. Multi-delete deleteMany({k: {$gte: 0, $lt: 2^32}}) over ${fmt(D)} docs, index on k`);
  const coll = db.collection('del');
  await db.createCollection('del');
  await coll.createIndex({ k: 1 });
  const ms = await load(coll, D);
  line('load (insertMany 1,000, index on k)', D / (ms / 1000), 'docs/s', `(${fmt(ms)} ms)`);
  const param = await db.admin().command({ getParameter: 1, batchedDeletesTargetBatchDocs: 1 }).catch(() => ({}));
  if (param.batchedDeletesTargetBatchDocs !== undefined) {
    console.log(`  batchedDeletesTargetBatchDocs = ${param.batchedDeletesTargetBatchDocs}`);
  }
  const filter = { k: { $gte: 0, $lt: 4294967296 } };
  await explainFind(coll, filter);
  const before = await db.admin().command({ serverStatus: 1 });
  console.log(`  batchedDeletes before: ${batchedDeletes(before)}`);
  const t0 = nowMs();
  const res = await coll.deleteMany(filter);
  const dms = nowMs() - t0;
  line('deleteMany by indexed range', res.deletedCount / (dms / 1000), 'docs/s',
    `(${fmt(res.deletedCount)} deleted in ${fmt(dms)} ms)`);
  const after = await db.admin().command({ serverStatus: 1 });
  console.log(`  batchedDeletes after:  ${batchedDeletes(after)}`);
  const left = await coll.countDocuments({});
  console.log(`  documents left: ${left}`);
}

async function main() {
  const server = mayflyServer();
  await server.start();
  const client = new MongoClient(server.uri, { maxPoolSize: 10 });
  const tStart = nowMs();
  try {
    await client.connect();
    const db = client.db('ixbench');
    const info = await db.admin().command({ buildInfo: 1 });
    console.log(`mayflyd ${info.version} pid ${server.pid} port ${server.port} binary ${server.binary}`);
    console.log(`scale=${SCALE} N=${fmt(N)} D=${fmt(D)} secs=${SECS}`);

    const points = await phasePointQuery(db);
    await phaseRangeScan(points);
    await points.drop();
    await phaseInserts(db);
    await phaseDelete(db);

    const hwm = procStatusKb(server.pid, 'VmHWM');
    const rss = procStatusKb(server.pid, 'VmRSS');
    console.log(`\nserver peak RSS (VmHWM): ${hwm === null ? 'n/a' : (hwm / 1024).toFixed(1) + ' MiB'}; ` +
      `current RSS: ${rss === null ? 'n/a' : (rss / 1024).toFixed(1) + ' MiB'}`);
    console.log(`total time: ${(nowMs() - tStart) / 1000 | 0} s`);
  } finally {
    await client.close().catch(() => {});
    await stopMayfly(server);
  }
}

runMain(main);
