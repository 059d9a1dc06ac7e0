'use strict';
/*
 * Costs benchmark (issue 7, "engine foundations"): the four cases whose cost
 * used to grow wrongly. Prints figures only; no assertions (a failed driver
 * call aborts the run). Each query is run once to warm up, then timed as the
 * median of --reps runs (default 3); its plan (stage tree, keys / documents
 * examined) is printed beside it.
 *
 *   node bench/costs_bench.js [--scale F] [--reps R]
 *   (or bash bench/costs_bench.sh, which builds build/mayflyd first)
 *
 * Server: mayflyd from $MAYFLYD (default build/mayflyd, the release build),
 * started on a free port with a fresh --dbpath (bench/lib/common.js),
 * stopped and cleaned up at the end, also on error or Ctrl-C.
 *
 * Collection (N = 200,000 x scale): {_id: i, k: 3i, m: i % 1000, u: i % 1000}
 * with indexes on k and m; u is not indexed.
 *   1. $in with 10,000 values: on _id, on k (indexed), and on u (not indexed:
 *      a COLLSCAN whose per-document $in test is a binary search).
 *   2. $in matching cost alone: countDocuments on u with $in of 10 and of
 *      10,000 values (both COLLSCAN of N documents).
 *   3. $or with 1,000 branches: equalities on k (read as $in: one IXSCAN),
 *      equalities on u (read as $in: COLLSCAN), and branches alternating
 *      between k and m (an OR stage over 1,000 IXSCANs).
 *   4. One document with a 40,000-element array into a collection indexed on
 *      it: insertOne, a find by one element, an updateOne that $push-es one
 *      element (the key diff of 40,000 keys), countDocuments by element.
 */
const { MongoClient } = require('mongodb');
const { options, nowMs, percentile, mayflyServer, stopMayfly, runMain } = require('./lib/common');

const { num: arg } = options('costs_bench');
const SCALE = arg('scale', 1);
const REPS = Math.max(1, Math.round(arg('reps', 3)));
const N = Math.max(20000, Math.round(200000 * SCALE));
const BATCH = 1000;

function fmt(n) { return n.toLocaleString('en-US'); }

/* Median time (ms) of REPS runs of fn after one warm-up run; returns {ms, result}. */
async function timed(fn) {
  let result = await fn();
  const times = [];
  for (let r = 0; r < REPS; r++) {
    const t0 = nowMs();
    result = await fn();
    times.push(nowMs() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: percentile(times, 0.5), result };
}

function stageTree(s) {
  if (!s) return '';
  let name = s.stage;
  if (s.indexName) name += `(${s.indexName})`;
  if (s.inputStages) name += `[${s.inputStages.length} inputs: ${stageTree(s.inputStages[0])}, ...]`;
  return s.inputStage ? `${name} > ${stageTree(s.inputStage)}` : name;
}

async function planOf(coll, filter) {
  const ex = await coll.find(filter).explain('executionStats');
  const st = ex.executionStats;
  return `${stageTree(ex.queryPlanner.winningPlan)}; keys ${fmt(st.totalKeysExamined)}, docs ${fmt(st.totalDocsExamined)}`;
}

async function report(label, coll, filter, fn) {
  const { ms, result } = await timed(fn);
  console.log(`  ${label.padEnd(52)} ${ms.toFixed(1).padStart(9)} ms  (${fmt(result)} docs)`);
  if (filter) console.log(`      plan: ${await planOf(coll, filter)}`);
}

/* ---------- phases ---------- */

async function load(coll) {
  const t0 = nowMs();
  for (let off = 0; off < N; off += BATCH) {
    const docs = [];
    for (let i = off; i < Math.min(N, off + BATCH); i++) docs.push({ _id: i, k: 3 * i, m: i % 1000, u: i % 1000 });
    await coll.insertMany(docs, { ordered: true });
  }
  await coll.createIndex({ k: 1 });
  await coll.createIndex({ m: 1 });
  console.log(`loaded ${fmt(N)} documents and 2 indexes in ${((nowMs() - t0) / 1000).toFixed(1)} s`);
}

/* 10,000 distinct values spread over [0, N) (every N/10,000-th one), shuffled. */
function spread(count, f) {
  const step = Math.max(1, Math.floor(N / count));
  const out = [];
  for (let i = 0; i < count; i++) out.push(f((i * step) % N));
  for (let i = out.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

async function phaseIn(c) {
  console.log('\n1. $in with 10,000 values');
  const ids = spread(10000, (i) => i);
  const ks = spread(10000, (i) => 3 * i);
  const us = [];
  for (let i = 0; i < 10000; i++) us.push(i % 2 ? i : -i); // 0..999 are hit (half of them)
  let f = { _id: { $in: ids } };
  await report('find _id $in 10,000', c, f, async () => (await c.find(f).toArray()).length);
  f = { k: { $in: ks } };
  await report('find k $in 10,000 (secondary index)', c, f, async () => (await c.find(f).toArray()).length);
  f = { u: { $in: us } };
  await report('find u $in 10,000 (no index: COLLSCAN)', c, f, async () => (await c.find(f).toArray()).length);
}

async function phaseMatch(c) {
  console.log(`\n2. $in matching cost, COLLSCAN of ${fmt(N)} documents`);
  const small = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19];
  const big = [];
  for (let i = 0; i < 10000; i++) big.push(2 * i + 1);
  await report('countDocuments u $in 10 values', c, { u: { $in: small } },
    () => c.countDocuments({ u: { $in: small } }));
  await report('countDocuments u $in 10,000 values', c, { u: { $in: big } },
    () => c.countDocuments({ u: { $in: big } }));
  await report('countDocuments u $nin 10,000 values', c, null,
    () => c.countDocuments({ u: { $nin: big } }));
}

async function phaseOr(c) {
  console.log('\n3. $or with 1,000 branches');
  const onK = [];
  const onU = [];
  const mixed = [];
  for (let i = 0; i < 1000; i++) {
    onK.push({ k: 3 * ((i * 197) % N) });
    onU.push({ u: (i * 7) % 2000 });
    mixed.push(i % 2 ? { k: 3 * ((i * 197) % N) } : { m: i });
  }
  let f = { $or: onK };
  await report('find $or 1,000 equalities on k (indexed)', c, f, async () => (await c.find(f).toArray()).length);
  f = { $or: onU };
  await report('count $or 1,000 equalities on u (no index)', c, f, () => c.countDocuments(f));
  f = { $or: mixed };
  await report('find $or 1,000 branches on k | m (index union)', c, f,
    async () => (await c.find(f).project({ _id: 1 }).toArray()).length);
}

async function phaseArray(db) {
  console.log('\n4. one document with a 40,000-element array, indexed');
  const a = db.collection('bigarr');
  await a.createIndex({ arr: 1 });
  const arr = [];
  for (let i = 0; i < 40000; i++) arr.push(i);
  let n = 0;
  await report('insertOne (40,000 index keys)', null, null, async () => {
    await a.insertOne({ _id: n++, arr });
    return 1;
  });
  await report('find {arr: 12345}', a, { arr: 12345 }, async () => (await a.find({ arr: 12345 }).toArray()).length);
  await report('updateOne $push one element (key diff)', null, null, async () => {
    await a.updateOne({ _id: 0 }, { $push: { arr: 40000 + n++ } });
    return 1;
  });
  await report('countDocuments {arr: 39999}', null, null, () => a.countDocuments({ arr: 39999 }));
  const dup = [];
  for (let i = 0; i < 40000; i++) dup.push(i % 100);
  await report('insertOne 40,000 elements, 100 distinct', null, null, async () => {
    await a.insertOne({ _id: `d${n++}`, arr: dup });
    return 1;
  });
}

async function main() {
  const server = mayflyServer();
  await server.start();
  const client = new MongoClient(server.uri, { maxPoolSize: 4 });
  try {
    await client.connect();
    const db = client.db('costbench');
    const info = await db.admin().command({ buildInfo: 1 });
    console.log(`mayflyd ${info.version} binary ${server.binary}; N=${fmt(N)}, median of ${REPS} runs`);
    const c = db.collection('c');
    await load(c);
    await phaseIn(c);
    await phaseMatch(c);
    await phaseOr(c);
    await phaseArray(db);
  } finally {
    await client.close().catch(() => {});
    await stopMayfly(server);
  }
}

runMain(main);
