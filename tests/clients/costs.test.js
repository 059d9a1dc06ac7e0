'use strict';
// Costs that must not grow wrongly (issue 7), checked for their answers and
// plans through the Node driver; bench/costs_bench.js prints their timings.
//   - $in with 10,000 values on _id and on a secondary index: an IXSCAN with
//     one point interval per value (never a COLLSCAN), exactly the right
//     documents;
//   - $or whose branches are all indexed: an OR stage over IXSCANs, each
//     document once, also across getMore; $or of equalities on one field is
//     read as $in (one IXSCAN), as MongoDB rewrites it;
//   - a document with a 40,000-element array indexed (multikey), found by its
//     elements, updated, counted.
// No timing is asserted.
const assert = require('node:assert/strict');
const { Long, Double } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const N = 20000;

/* Every stage of a plan tree (inputStage and inputStages). */
function allStages(plan) {
  const out = [];
  const walk = (s) => {
    if (!s) return;
    out.push(s);
    walk(s.inputStage);
    for (const x of s.inputStages || []) walk(x);
  };
  walk(plan);
  return out;
}

function stageNames(plan) {
  return allStages(plan).map((s) => s.stage);
}

let db;
let c;

h.test('setup: 20,000 documents with a secondary index', async () => {
  db = srv.freshDb('costs');
  c = db.collection('c');
  const docs = [];
  for (let i = 0; i < N; i++) docs.push({ _id: i, k: i * 3, g: `g${i % 100}`, m: i % 1000 });
  for (let off = 0; off < N; off += 5000) await c.insertMany(docs.slice(off, off + 5000));
  await c.createIndex({ k: 1 });
  await c.createIndex({ g: 1 });
  assert.equal(await c.countDocuments({}), N);
});

h.test('$in of 10,000 _id values returns exactly those documents through an IXSCAN on _id_', async () => {
  // 10,000 values: 7,500 existing ids (every other one from 5,000 on) and 2,500 that do not exist.
  const ids = [];
  for (let i = 0; i < 7500; i++) ids.push(5000 + 2 * i);
  for (let i = 0; i < 2500; i++) ids.push(N + 10 + i);
  ids.reverse();
  const got = await c.find({ _id: { $in: ids } }).project({ _id: 1 }).toArray();
  const gotIds = got.map((d) => d._id).sort((a, b) => a - b);
  const want = ids.filter((x) => x < N).sort((a, b) => a - b);
  assert.equal(gotIds.length, 7500);
  assert.deepEqual(gotIds, want);

  const ex = await c.find({ _id: { $in: ids } }).explain('executionStats');
  const names = stageNames(ex.queryPlanner.winningPlan);
  assert.ok(names.includes('IXSCAN'), `plan ${names}`);
  assert.ok(!names.includes('COLLSCAN'), `plan ${names}`);
  const ix = allStages(ex.queryPlanner.winningPlan).find((s) => s.stage === 'IXSCAN');
  assert.equal(ix.indexName, '_id_');
  // MongoDB prints every interval, sorted.
  assert.equal(ix.indexBounds._id.length, 10000);
  const sorted = [...ids].sort((a, b) => a - b);
  assert.equal(ix.indexBounds._id[0], `[${sorted[0]}, ${sorted[0]}]`);
  assert.equal(ix.indexBounds._id[9999], `[${sorted[9999]}, ${sorted[9999]}]`);
  assert.equal(ex.executionStats.nReturned, 7500);
  assert.ok(ex.executionStats.totalDocsExamined <= 7500, `docs examined ${ex.executionStats.totalDocsExamined}`);
});

h.test('$in of 10,000 values on a secondary index, mixed numeric types, duplicates and null', async () => {
  // k = 3 * _id. Values: multiples of 3 (hits) as int, Long and double; non-multiples (misses); duplicates.
  const vals = [];
  for (let i = 0; i < 9000; i++) {
    const k = 3 * (2 * i);
    vals.push(i % 3 === 0 ? k : i % 3 === 1 ? Long.fromNumber(k) : new Double(k));
  }
  for (let i = 0; i < 990; i++) vals.push(3 * i + 1);
  for (let i = 0; i < 9; i++) vals.push(6 * i);
  vals.push(null);
  assert.equal(vals.length, 10000);
  const got = await c.find({ k: { $in: vals } }).project({ _id: 1 }).toArray();
  const gotIds = got.map((d) => d._id).sort((a, b) => a - b);
  const want = [];
  for (let i = 0; i < 9000; i++) if (2 * i < N) want.push(2 * i);
  assert.deepEqual(gotIds, want);

  const ex = await c.find({ k: { $in: vals } }).explain('queryPlanner');
  const names = stageNames(ex.queryPlanner.winningPlan);
  assert.ok(!names.includes('COLLSCAN'), `plan ${names}`);
  const ix = allStages(ex.queryPlanner.winningPlan).find((s) => s.stage === 'IXSCAN');
  assert.equal(ix.indexName, 'k_1');
  // 9,000 + 990 distinct numbers and [undefined, null] for null.
  assert.equal(ix.indexBounds.k.length, 9991);
  assert.equal(ix.indexBounds.k[0], '[undefined, null]');

  // $nin of the same list is the complement.
  assert.equal(await c.countDocuments({ k: { $nin: vals } }), N - want.length);
});

h.test('$in with a prefix regex uses a string range of the index', async () => {
  const ex = await c.find({ g: { $in: [/^g1/, 'g55'] } }).explain('queryPlanner');
  const ix = allStages(ex.queryPlanner.winningPlan).find((s) => s.stage === 'IXSCAN');
  assert.ok(ix, `plan ${stageNames(ex.queryPlanner.winningPlan)}`);
  assert.deepEqual(ix.indexBounds.g, ['["g1", "g2")', '["g55", "g55"]', '[/^g1/, /^g1/]']);
  // g1, g10..g19 and g55: 12 of the 100 groups.
  assert.equal(await c.countDocuments({ g: { $in: [/^g1/, 'g55'] } }), 12 * (N / 100));
  // An unanchored regex cannot bound the strings: all of them are scanned, and the filter decides.
  assert.equal(await c.countDocuments({ g: { $in: [/5$/, 'g1'] } }), 11 * (N / 100));
});

h.test('$or of indexed branches: an OR stage over IXSCANs, each document once', async () => {
  // Overlapping branches: k < 300 is _id < 100; _id in [50, 150); g = "g7" (every 100th from 7).
  const ids = [];
  for (let i = 50; i < 150; i++) ids.push(i);
  const filter = { $or: [{ k: { $lt: 300 } }, { _id: { $in: ids } }, { g: 'g7' }] };
  const want = new Set();
  for (let i = 0; i < N; i++) if (i * 3 < 300 || (i >= 50 && i < 150) || i % 100 === 7) want.add(i);

  const got = await c.find(filter).batchSize(37).toArray();
  const gotIds = got.map((d) => d._id);
  assert.equal(new Set(gotIds).size, gotIds.length, 'a document came back twice');
  assert.deepEqual([...gotIds].sort((a, b) => a - b), [...want].sort((a, b) => a - b));
  assert.equal(await c.countDocuments(filter), want.size);

  const ex = await c.find(filter).explain('executionStats');
  const wp = ex.queryPlanner.winningPlan;
  assert.equal(wp.stage, 'FETCH');
  assert.equal(wp.inputStage.stage, 'OR');
  assert.equal(wp.inputStage.inputStages.length, 3);
  assert.deepEqual(wp.inputStage.inputStages.map((s) => s.stage), ['IXSCAN', 'IXSCAN', 'IXSCAN']);
  assert.deepEqual(wp.inputStage.inputStages.map((s) => s.indexName), ['k_1', '_id_', 'g_1']);
  assert.equal(ex.executionStats.nReturned, want.size);
  assert.ok(!stageNames(wp).includes('COLLSCAN'));
  const orStats = ex.executionStats.executionStages.inputStage;
  assert.equal(orStats.stage, 'OR');
  // 100 + 100 + 200 keys; 50..99 come twice, and 7 and 107 are also in the first two branches.
  // k < 300 reads no key of 300 (keys of unequal numbers differ: plan.c dec_key_ties), as mongod.
  assert.equal(orStats.dupsTested, 400);
  assert.equal(orStats.dupsDropped, 400 - want.size);
  assert.equal(want.size, 348);

  // With a sort and a limit: sorted, still no duplicate.
  const top = await c.find(filter).sort({ _id: -1 }).limit(5).toArray();
  assert.deepEqual(top.map((d) => d._id), [...want].sort((a, b) => b - a).slice(0, 5));

  // deleteMany through the union removes each matching document once.
  const d2 = db.collection('or_delete');
  await d2.insertMany(Array.from({ length: 500 }, (_, i) => ({ _id: i, a: i % 10, b: i % 7 })));
  await d2.createIndex({ a: 1 });
  await d2.createIndex({ b: 1 });
  const delFilter = { $or: [{ a: 3 }, { b: 3 }] };
  const expectDel = Array.from({ length: 500 }, (_, i) => i).filter((i) => i % 10 === 3 || i % 7 === 3).length;
  const dex = await d2.find(delFilter).explain();
  assert.equal(dex.queryPlanner.winningPlan.inputStage.stage, 'OR');
  const r = await d2.deleteMany(delFilter);
  assert.equal(r.deletedCount, expectDel);
  assert.equal(await d2.countDocuments({}), 500 - expectDel);
});

h.test('$or with an unindexed branch is a collection scan and still right', async () => {
  const filter = { $or: [{ k: 30 }, { m: 999 }] };
  const ex = await c.find(filter).explain();
  assert.ok(stageNames(ex.queryPlanner.winningPlan).includes('COLLSCAN'));
  // m = 999: _id 999, 1999, ... (20 documents); k = 30: _id 10.
  assert.equal(await c.countDocuments(filter), 21);
});

h.test('$or of 1,000 equalities on one field is one IXSCAN ($in), and right without an index too', async () => {
  const branches = [];
  for (let i = 0; i < 1000; i++) branches.push({ k: 3 * (i * 7) });
  const filter = { $or: branches };
  const ex = await c.find(filter).explain();
  const names = stageNames(ex.queryPlanner.winningPlan);
  assert.deepEqual(names, ['FETCH', 'IXSCAN']);
  const ix = ex.queryPlanner.winningPlan.inputStage;
  assert.equal(ix.indexName, 'k_1');
  assert.equal(ix.indexBounds.k.length, 1000);
  const want = [];
  for (let i = 0; i < 1000; i++) if (i * 7 < N) want.push(i * 7);
  const got = (await c.find(filter).project({ _id: 1 }).toArray()).map((d) => d._id).sort((a, b) => a - b);
  assert.deepEqual(got, want);
  // On the unindexed m (0..999), a collection scan with the rewritten matcher.
  const mb = [];
  for (let i = 0; i < 1000; i += 2) mb.push({ m: i });
  assert.equal(await c.countDocuments({ $or: mb }), N / 2);
});

h.test('$or of 1,000 equality branches over two indexed fields: an OR of two IXSCANs', async () => {
  const branches = [];
  const want = new Set();
  for (let i = 0; i < 1000; i++) {
    if (i % 2) {
      const id = (i * 37) % N;
      branches.push({ k: 3 * id });
      want.add(id);
    } else {
      branches.push({ g: `g${i % 200}` }); // g0..g99 exist; g100..g199 match nothing
      if (i % 200 < 100) for (let j = i % 200; j < N; j += 100) want.add(j);
    }
  }
  const filter = { $or: branches };
  const ex = await c.find(filter).explain();
  const wp = ex.queryPlanner.winningPlan;
  assert.equal(wp.inputStage.stage, 'OR', `plan ${stageNames(wp)}`);
  assert.deepEqual(wp.inputStage.inputStages.map((s) => s.indexName), ['g_1', 'k_1']);
  assert.equal(wp.inputStage.inputStages[1].indexBounds.k.length, 500);
  const got = (await c.find(filter).project({ _id: 1 }).batchSize(1000).toArray()).map((d) => d._id);
  assert.equal(new Set(got).size, got.length, 'a document came back twice');
  assert.deepEqual(got.sort((a, b) => a - b), [...want].sort((a, b) => a - b));
});

h.test('a document with a 40,000-element array is indexed and found by its elements', async () => {
  const a = db.collection('bigarr');
  await a.createIndex({ arr: 1 });
  await a.createIndex({ tag: 1, arr: -1 });
  const arr = [];
  for (let i = 0; i < 40000; i++) arr.push(i % 2 ? i : new Double(i)); // mixed types
  for (let i = 0; i < 1000; i++) arr.push(i); // duplicates of existing elements
  await a.insertOne({ _id: 'big', tag: 't', arr });
  await a.insertOne({ _id: 'small', tag: 't', arr: [1, 39999, 50000] });
  await a.insertOne({ _id: 'none', tag: 'u', arr: 7 });

  for (const v of [0, 1, 12345, 20000, 39999]) {
    const got = await a.find({ arr: v }).project({ _id: 1 }).toArray();
    const want = ['big'];
    if (v === 1 || v === 39999) want.push('small');
    assert.deepEqual(got.map((d) => d._id).sort(), want.sort(), `arr: ${v}`);
  }
  assert.equal(await a.countDocuments({ arr: { $in: [5, 6, 7, 39998] } }), 2); // big and none
  assert.equal(await a.countDocuments({ arr: { $gte: 39990 } }), 2);
  assert.equal(await a.countDocuments({ arr: { $gt: 40000 } }), 1);
  assert.equal(await a.countDocuments({ tag: 't', arr: 1 }), 2);

  const ex = await a.find({ arr: 12345 }).explain('executionStats');
  const ix = allStages(ex.queryPlanner.winningPlan).find((s) => s.stage === 'IXSCAN');
  assert.equal(ix.indexName, 'arr_1');
  assert.equal(ix.isMultiKey, true);
  assert.equal(ex.executionStats.nReturned, 1);

  // Updating the big array: removed elements are no longer found, added ones are.
  await a.updateOne({ _id: 'big' }, { $pull: { arr: { $lt: 100 } } });
  await a.updateOne({ _id: 'big' }, { $push: { arr: 77777 } });
  assert.equal(await a.countDocuments({ arr: 50 }), 0);
  assert.equal(await a.countDocuments({ arr: 77777 }), 1);
  assert.equal(await a.countDocuments({ arr: 12345 }), 1);
  const val = await db.command({ validate: 'bigarr' });
  assert.equal(val.valid, true, JSON.stringify(val.errors));

  // Parallel arrays in a compound index are still refused with 171.
  await h.expectCode(a.insertOne({ _id: 'par', tag: ['x', 'y'], arr: [1, 2] }), 171);
  assert.equal(await a.countDocuments({ _id: 'par' }), 0);
});
