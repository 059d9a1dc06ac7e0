'use strict';
// Query planning: index choice shown by explain, hints, hidden / sparse /
// partial indexes, identical answers with and without indexes, multikey
// scans, index-scan cursors across getMore, executionStats counters, and
// BATCHED_DELETE for multi-document deletes.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

/* The access-path stage under FETCH / SORT / LIMIT ... of a winning plan. */
function leaf(plan) {
  let s = plan;
  while (s.inputStage) s = s.inputStage;
  return s;
}

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

async function explainFind(db, find, verbosity = 'queryPlanner') {
  return db.command({ explain: { find: 'c', ...find }, verbosity });
}

let db;
let c;

h.test('setup: a collection with several indexes', async () => {
  db = srv.freshDb('planner');
  c = db.collection('c');
  const docs = [];
  for (let i = 0; i < 2000; i++) {
    docs.push({
      _id: i,
      a: i % 50,
      b: `s${i % 30}`,
      n: i % 7 === 0 ? null : i,
      t: [i % 5, (i % 5) + 10],
      sub: { x: i % 11 },
      mixed: i % 4 === 0 ? `str${i}` : i % 4 === 1 ? i : i % 4 === 2 ? { k: i } : null,
    });
  }
  docs.push({ _id: 'nofields' });
  await c.insertMany(docs);
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: -1, a: 1 });
  await c.createIndex({ t: 1 });
  await c.createIndex({ 'sub.x': 1 });
  await c.createIndex({ mixed: 1 });
  await c.createIndex({ n: 1 }, { sparse: true });
});

h.test('equality, range and $in use an IXSCAN with MongoDB-style bounds', async () => {
  let r = await explainFind(db, { filter: { a: 7 } });
  let l = leaf(r.queryPlanner.winningPlan);
  assert.equal(l.stage, 'IXSCAN');
  assert.equal(l.indexName, 'a_1');
  assert.deepEqual(l.indexBounds, { a: ['[7, 7]'] });
  assert.deepEqual(stages(r.queryPlanner.winningPlan).slice(0, 1), ['FETCH']);

  r = await explainFind(db, { filter: { a: { $gt: 5, $lte: 9 } } });
  l = leaf(r.queryPlanner.winningPlan);
  assert.equal(l.indexName, 'a_1');
  assert.deepEqual(l.indexBounds, { a: ['(5, 9]'] });

  r = await explainFind(db, { filter: { a: { $gt: 45 } } });
  assert.deepEqual(leaf(r.queryPlanner.winningPlan).indexBounds, { a: ['(45, inf.0]'] });

  r = await explainFind(db, { filter: { a: { $in: [3, 1, 2] } } });
  assert.deepEqual(leaf(r.queryPlanner.winningPlan).indexBounds, { a: ['[1, 1]', '[2, 2]', '[3, 3]'] });

  r = await explainFind(db, { filter: { b: 's3', a: { $lt: 10 } } });
  l = leaf(r.queryPlanner.winningPlan);
  assert.equal(l.indexName, 'b_-1_a_1');
  assert.deepEqual(l.indexBounds, { b: ['["s3", "s3"]'], a: ['[-inf.0, 10)'] });

  // mongod 8.0 answers a plain _id equality on its express path: one node, no stage tree.
  r = await explainFind(db, { filter: { _id: 5 } });
  assert.deepEqual(r.queryPlanner.winningPlan,
    { isCached: false, stage: 'EXPRESS_IXSCAN', keyPattern: { _id: 1 }, indexName: '_id_' });
  // Options the express path does not take leave the classic IDHACK plan.
  r = await explainFind(db, { filter: { _id: 5 }, batchSize: 10 });
  assert.equal(r.queryPlanner.winningPlan.stage, 'IDHACK');

  r = await explainFind(db, { filter: { zzz: 1 } });
  assert.equal(leaf(r.queryPlanner.winningPlan).stage, 'COLLSCAN');
});

h.test('an index that provides the sort avoids the SORT stage (also reversed)', async () => {
  let r = await explainFind(db, { filter: {}, sort: { a: 1 } });
  assert.ok(!stages(r.queryPlanner.winningPlan).includes('SORT'));
  assert.equal(leaf(r.queryPlanner.winningPlan).indexName, 'a_1');
  r = await explainFind(db, { filter: {}, sort: { a: -1 } });
  assert.equal(leaf(r.queryPlanner.winningPlan).direction, 'backward');
  r = await explainFind(db, { filter: { b: 's1' }, sort: { a: -1 } });
  assert.ok(!stages(r.queryPlanner.winningPlan).includes('SORT'));
  r = await explainFind(db, { filter: {}, sort: { zzz: 1 } });
  assert.ok(stages(r.queryPlanner.winningPlan).includes('SORT'));
  const viaIndex = await c.find({ a: { $gte: 40 } }).sort({ a: -1, _id: 1 }).toArray();
  const plain = await c.find({ a: { $gte: 40 } }).hint({ $natural: 1 }).toArray();
  plain.sort((x, y) => y.a - x.a || x._id - y._id);
  assert.deepEqual(viaIndex.map((d) => d._id), plain.map((d) => d._id));
  const sorted = await c.find({}).sort({ a: 1 }).limit(5).toArray();
  assert.deepEqual(sorted.map((d) => d.a ?? null), [null, 0, 0, 0, 0]);
});

h.test('hint by name and by key pattern; $natural forces COLLSCAN; unknown hint is BadValue (2)', async () => {
  let r = await explainFind(db, { filter: { a: 1, b: 's1' }, hint: 'a_1' });
  assert.equal(leaf(r.queryPlanner.winningPlan).indexName, 'a_1');
  r = await explainFind(db, { filter: { a: 1 }, hint: { b: -1, a: 1 } });
  assert.equal(leaf(r.queryPlanner.winningPlan).indexName, 'b_-1_a_1');
  r = await explainFind(db, { filter: { a: 1 }, hint: { $natural: 1 } });
  assert.equal(leaf(r.queryPlanner.winningPlan).stage, 'COLLSCAN');
  await h.expectCode(c.find({ a: 1 }).hint('nosuch').toArray(), 2);
  await h.expectCode(c.find({ a: 1 }).hint({ nosuch: 1 }).toArray(), 2);
  await h.expectCode(c.countDocuments({ a: 1 }, { hint: 'nosuch' }), 2);
  const a = await c.find({ a: 1, b: 's1' }).hint('b_-1_a_1').toArray();
  const b = await c.find({ a: 1, b: 's1' }).hint({ $natural: 1 }).toArray();
  assert.deepEqual(a.map((d) => d._id).sort(), b.map((d) => d._id).sort());
});

h.test('a hidden index is not chosen and cannot be hinted', async () => {
  const hc = db.collection('hidden');
  await hc.insertMany([{ h: 1 }, { h: 2 }]);
  await hc.createIndex({ h: 1 }, { hidden: true });
  const r = await db.command({ explain: { find: 'hidden', filter: { h: 1 } } });
  assert.equal(leaf(r.queryPlanner.winningPlan).stage, 'COLLSCAN');
  await h.expectCode(hc.find({ h: 1 }).hint('h_1').toArray(), 2);
  assert.equal((await hc.find({ h: 1 }).toArray()).length, 1);
});

h.test('sparse and partial indexes are only used when they hold every answer', async () => {
  let r = await explainFind(db, { filter: { n: null } });
  assert.equal(leaf(r.queryPlanner.winningPlan).stage, 'COLLSCAN');
  r = await explainFind(db, { filter: { n: 15 } });
  assert.equal(leaf(r.queryPlanner.winningPlan).indexName, 'n_1');
  assert.equal(await c.countDocuments({ n: null }), 287);
  const pc = db.collection('partial');
  await pc.insertMany([{ p: 5, q: 1 }, { p: 20, q: 1 }, { p: 30, q: 2 }]);
  await pc.createIndex({ q: 1 }, { partialFilterExpression: { p: { $gt: 10 } } });
  r = await db.command({ explain: { find: 'partial', filter: { q: 1 } } });
  assert.equal(leaf(r.queryPlanner.winningPlan).stage, 'COLLSCAN');
  assert.equal(await pc.countDocuments({ q: 1 }), 2);
  r = await db.command({ explain: { find: 'partial', filter: { q: 1, p: { $gt: 10 } } } });
  assert.equal(leaf(r.queryPlanner.winningPlan).indexName, 'q_1');
  assert.deepEqual((await pc.find({ q: 1, p: { $gt: 10 } }).toArray()).map((d) => d.p), [20]);
});

h.test('answers are the same with and without indexes for many queries', async () => {
  const queries = [
    { a: 3 }, { a: { $gte: 48 } }, { a: { $lt: 1 } }, { a: { $in: [0, 49, 77] } }, { a: { $in: [] } },
    { a: { $gt: 10, $lt: 5 } }, { a: { $ne: 3 } }, { a: { $nin: [1, 2] } }, { a: 'x' }, { a: null },
    { b: 's2' }, { b: { $gte: 's28' } }, { b: { $lt: 's1' } }, { b: 's2', a: { $in: [2, 32] } },
    { b: /^s2/ }, { t: 3 }, { t: { $gt: 13 } }, { t: { $gt: 1, $lt: 3 } }, { t: { $elemMatch: { $gt: 1, $lt: 3 } } },
    { t: [2, 12] }, { 'sub.x': 4 }, { 'sub.x': { $lte: 1 } }, { sub: { x: 4 } },
    { mixed: { $gt: 5 } }, { mixed: { $gte: 'str1000' } }, { mixed: { $type: 'object' } }, { mixed: { $gt: {} } },
    { mixed: null }, { mixed: { $exists: false } }, { n: { $gt: 1990 } }, { n: { $exists: true }, a: 1 },
    { $and: [{ a: { $gte: 10 } }, { a: { $lt: 12 } }] }, { $or: [{ a: 1 }, { b: 's3' }] },
    { a: { $gte: 2.5, $lte: 3.5 } }, { a: { $gt: -Infinity } }, { _id: { $gt: 1995 } }, { _id: 'nofields' },
  ];
  for (const q of queries) {
    const got = (await c.find(q).toArray()).map((d) => String(d._id)).sort();
    const want = (await c.find(q).hint({ $natural: 1 }).toArray()).map((d) => String(d._id)).sort();
    assert.deepEqual(got, want, JSON.stringify(q));
    assert.equal(await c.countDocuments(q), want.length, `count ${JSON.stringify(q)}`);
  }
});

h.test('multikey indexes: de-duplicated results, no compound bounds across arrays', async () => {
  const mk = db.collection('mk');
  await mk.createIndex({ tags: 1 });
  await mk.createIndex({ 'items.sku': 1 });
  await mk.insertMany([
    { _id: 1, tags: [1, 2, 3, 3], items: [{ sku: 'a', qty: 1 }, { sku: 'b', qty: 5 }] },
    { _id: 2, tags: [5], items: [{ sku: 'a', qty: 5 }] },
    { _id: 3, tags: 2, items: { sku: 'a', qty: 1 } },
  ]);
  const ids = async (q) => (await mk.find(q).toArray()).map((d) => d._id).sort();
  assert.deepEqual(await ids({ tags: { $in: [1, 2, 3] } }), [1, 3]);
  assert.deepEqual(await ids({ tags: { $gt: 1, $lt: 3 } }), [1, 3]);
  assert.deepEqual(await ids({ tags: { $gt: 3, $lt: 5 } }), [1, 2].filter(() => false));
  assert.deepEqual(await ids({ 'items.sku': 'a', 'items.qty': 5 }), [1, 2]);
  assert.deepEqual(await ids({ items: { $elemMatch: { sku: 'a', qty: 5 } } }), [2]);
  const r = await db.command({ explain: { find: 'mk', filter: { tags: 2 } } });
  assert.equal(leaf(r.queryPlanner.winningPlan).isMultiKey, true);
  const s = await db.command({ explain: { find: 'mk', filter: {}, sort: { tags: 1 } } });
  assert.ok(stages(s.queryPlanner.winningPlan).includes('SORT'));
});

h.test('getMore resumes an index scan over 10,000 documents', async () => {
  const big = db.collection('big');
  const docs = [];
  for (let i = 0; i < 10000; i++) docs.push({ _id: i, k: 10000 - i, g: i % 3 });
  await big.insertMany(docs);
  await big.createIndex({ k: 1 });
  const all = await big.find({ k: { $gte: 1 } }).batchSize(333).toArray();
  assert.equal(all.length, 10000);
  assert.deepEqual(all.slice(0, 3).map((d) => d.k), [1, 2, 3]);
  for (let i = 1; i < all.length; i++) assert.ok(all[i - 1].k < all[i].k);
  const back = await big.find({ k: { $lte: 5000 } }).sort({ k: -1 }).batchSize(101).toArray();
  assert.equal(back.length, 5000);
  assert.equal(back[0].k, 5000);
  const skipped = await big.find({ g: 1 }).sort({ k: 1 }).skip(10).limit(500).batchSize(64).toArray();
  assert.equal(skipped.length, 500);
  const ex = await db.command({ explain: { find: 'big', filter: { k: { $gte: 1 } } }, verbosity: 'executionStats' });
  assert.equal(ex.executionStats.nReturned, 10000);
});

h.test('explain executionStats counts keys and documents examined', async () => {
  const r = await explainFind(db, { filter: { a: 7 } }, 'executionStats');
  const es = r.executionStats;
  assert.equal(es.executionSuccess, true);
  assert.equal(es.nReturned, 40);
  assert.equal(es.totalKeysExamined, 40);
  assert.equal(es.totalDocsExamined, 40);
  assert.equal(es.executionStages.stage, 'FETCH');
  assert.equal(es.executionStages.inputStage.keysExamined, 40);
  assert.ok(r.serverInfo && r.serverInfo.port);
  assert.ok(r.command && r.command.find === 'c');
  const cs = await explainFind(db, { filter: { zzz: { $exists: false } }, limit: 3 }, 'executionStats');
  assert.equal(cs.executionStats.nReturned, 3);
  assert.equal(cs.executionStats.executionStages.stage, 'LIMIT');
  const cnt = await db.command({ explain: { count: 'c', query: { a: 7 } }, verbosity: 'executionStats' });
  assert.equal(cnt.queryPlanner.winningPlan.stage, 'COUNT');
  const fam = await db.command({ explain: { findAndModify: 'c', query: { a: 7 }, update: { $set: { z: 1 } } } });
  assert.equal(fam.queryPlanner.winningPlan.stage, 'UPDATE');
  assert.equal(await c.countDocuments({ z: 1 }), 0);
  const agg = await c.aggregate([{ $match: { a: 7 } }, { $group: { _id: null, n: { $sum: 1 } } }]).explain();
  assert.ok(agg.queryPlanner || agg.stages);
});

h.test('deleteMany explains as BATCHED_DELETE without deleting and counts batchedDeletes', async () => {
  const d = db.collection('del');
  const docs = [];
  for (let i = 0; i < 1000; i++) docs.push({ _id: i, v: i % 10 });
  await d.insertMany(docs);
  await d.createIndex({ v: 1 });
  const r = await db.command({ explain: { delete: 'del', deletes: [{ q: { v: 3 }, limit: 0 }] }, verbosity: 'executionStats' });
  assert.equal(r.queryPlanner.winningPlan.stage, 'BATCHED_DELETE');
  assert.equal(leaf(r.queryPlanner.winningPlan).indexName, 'v_1');
  assert.equal(r.executionStats.totalDocsExamined, 100);
  const one = await db.command({ explain: { delete: 'del', deletes: [{ q: { v: 3 }, limit: 1 }] } });
  assert.equal(one.queryPlanner.winningPlan.stage, 'DELETE');
  const up = await db.command({ explain: { update: 'del', updates: [{ q: { v: 3 }, u: { $set: { w: 1 } }, multi: true }] } });
  assert.equal(up.queryPlanner.winningPlan.stage, 'UPDATE');
  assert.equal(await d.countDocuments({ v: 3 }), 100);
  assert.equal(await d.countDocuments({ w: 1 }), 0);
  const before = (await db.admin().command({ serverStatus: 1 })).batchedDeletes;
  assert.equal((await d.deleteMany({ v: 3 })).deletedCount, 100);
  const after = (await db.admin().command({ serverStatus: 1 })).batchedDeletes;
  assert.equal(Number(after.docs) - Number(before.docs), 100);
  assert.ok(Number(after.batches) > Number(before.batches));
  assert.equal(await d.countDocuments({ v: 3 }), 0);
  assert.equal((await d.updateMany({ v: 4 }, [{ $set: { w: { $add: ['$v', 1] } } }])).modifiedCount, 100);
  assert.equal(await d.countDocuments({ w: 5 }), 100);
});

h.test('executionStats of an update or delete: UPDATE\'s nMatched, nWouldModify, nWouldUpsert and DELETE\'s nWouldDelete count what it would do, and nothing is written', async () => {
  // plan_stats / explain_common: the UPDATE stage's UpdateStats, DELETE and BATCHED_DELETE's DeleteStats.
  const db = srv.freshDb('explainwrite');
  const co = db.collection('c');
  await co.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2, b: 1 }, { _id: 3, a: 2 }, { _id: 4, a: 2, arr: [1, 5] }]);
  await co.createIndex({ a: 1 });
  const top = (r) => r.executionStats.executionStages;
  const explainUpdate = async (stmt) => top(await db.command({ explain: { update: 'c', updates: [stmt] }, verbosity: 'executionStats' }));
  const counts = (s) => [s.nMatched, s.nWouldModify, s.nWouldUpsert];

  let s = await explainUpdate({ q: { a: 2 }, u: { $set: { b: 1 } }, multi: true });
  assert.equal(s.stage, 'UPDATE');
  assert.deepEqual(counts(s), [3, 2, 0], 'one of the three already has b: 1');
  assert.deepEqual(counts(await explainUpdate({ q: { a: 2 }, u: [{ $set: { b: 1 } }], multi: true })), [3, 2, 0], 'a pipeline update');
  assert.deepEqual(counts(await explainUpdate({ q: { a: 2, arr: 5 }, u: { $set: { 'arr.$': 6 } } })), [1, 1, 0], 'the positional operator');
  assert.deepEqual(counts(await explainUpdate({ q: { a: 2 }, u: { $set: { 'arr.$[x]': 0 } }, arrayFilters: [{ x: { $gt: 2 } }], multi: true })),
    [3, 1, 0], 'arrayFilters');
  assert.deepEqual(counts(await explainUpdate({ q: { a: 9 }, u: { $set: { b: 1 } }, upsert: true })), [0, 0, 1], 'an upsert that matches nothing');
  assert.deepEqual(counts(await explainUpdate({ q: { a: 2 }, u: { $set: { b: 1 } }, upsert: true })), [1, 0, 0],
    'updateOne stops at the first match (_id 2, unchanged)');

  // findOneAndUpdate with a sort: the first document in sort order is the one counted.
  const famAsc = top(await db.command({ explain: { findAndModify: 'c', query: { a: 2 }, sort: { _id: 1 }, update: { $set: { b: 1 } } }, verbosity: 'executionStats' }));
  assert.deepEqual(counts(famAsc), [1, 0, 0], '_id 2 already has b: 1');
  const famDesc = top(await db.command({ explain: { findAndModify: 'c', query: { a: 2 }, sort: { _id: -1 }, update: { $set: { b: 1 } } }, verbosity: 'executionStats' }));
  assert.deepEqual(counts(famDesc), [1, 1, 0], '_id 4 would change');

  const many = top(await db.command({ explain: { delete: 'c', deletes: [{ q: { a: 2 }, limit: 0 }] }, verbosity: 'executionStats' }));
  assert.equal(many.stage, 'BATCHED_DELETE');
  assert.equal(many.nWouldDelete, 3);
  const one = top(await db.command({ explain: { delete: 'c', deletes: [{ q: { a: 2 }, limit: 1 }] }, verbosity: 'executionStats' }));
  assert.equal(one.stage, 'DELETE');
  assert.equal(one.nWouldDelete, 1);
  // mongosh's explain helpers send the same commands.
  const sh = await h.mongosh(srv.port, db.databaseName,
    'const e = db.c.explain("executionStats").findOneAndDelete({a: 2}); print(e.executionStats.executionStages.stage, e.executionStats.executionStages.nWouldDelete)');
  assert.equal(sh, 'DELETE 1');
  // The explained command's let, and an update statement's constants (c), are defined as when it runs.
  const xa = { $expr: { $eq: ['$a', '$$x'] } };
  assert.deepEqual(counts(top(await db.command({ explain: { update: 'c', updates: [{ q: xa, u: { $set: { b: '$$x' } }, multi: true }], let: { x: 2 } },
    verbosity: 'executionStats' }))), [3, 3, 0], 'let in the filter; $set takes the literal "$$x"');
  assert.deepEqual(counts(await explainUpdate({ q: { a: 2 }, u: [{ $set: { b: '$$k' } }], c: { k: 1 }, multi: true })), [3, 2, 0], 'constants');
  assert.deepEqual(counts(top(await db.command({ explain: { findAndModify: 'c', query: xa, sort: { _id: -1 }, update: [{ $set: { b: '$$x' } }], let: { x: 2 } },
    verbosity: 'executionStats' }))), [1, 1, 0], 'findAndModify\'s let, in the filter and the pipeline');
  assert.equal(top(await db.command({ explain: { delete: 'c', deletes: [{ q: xa, limit: 0 }], let: { x: 2 } }, verbosity: 'executionStats' })).nWouldDelete, 3);
  assert.equal((await db.command({ explain: { find: 'c', filter: xa, let: { x: 1 } }, verbosity: 'executionStats' })).executionStats.nReturned, 1);
  await assert.rejects(db.command({ explain: { find: 'c', filter: xa }, verbosity: 'executionStats' }), (e) => e.code === 17276, 'no let: undefined');
  await assert.rejects(db.command({ explain: { find: 'c', filter: xa, let: 5 } }),
    (e) => e.code === 14 && e.message === "BSON field 'find.let' is the wrong type 'int', expected type 'object'");
  // queryPlanner verbosity shows none of them; a malformed update fails the explain as it would fail the update.
  const qp = await db.command({ explain: { update: 'c', updates: [{ q: { a: 2 }, u: { $set: { b: 1 } } }] }, verbosity: 'queryPlanner' });
  assert.equal(qp.queryPlanner.winningPlan.nMatched, undefined);
  await assert.rejects(db.command({ explain: { update: 'c', updates: [{ q: { a: 2 }, u: { $bad: { b: 1 } } }] }, verbosity: 'executionStats' }),
    (e) => e.code === 9 && /Unknown modifier: \$bad/.test(e.message));
  assert.deepEqual(await co.find().sort({ _id: 1 }).toArray(),
    [{ _id: 1, a: 1 }, { _id: 2, a: 2, b: 1 }, { _id: 3, a: 2 }, { _id: 4, a: 2, arr: [1, 5] }], 'nothing written');
});

h.test('a hinted partial index that the query does not imply scans the collection: find, count and deleteMany see every match', async () => {
  const db = srv.freshDb('parthint');
  const co = db.collection('c');
  await co.insertMany([{ _id: 1, a: 1, b: 5 }, { _id: 2, a: 1, b: -5 }, { _id: 3, a: 1 }]);
  await co.createIndex({ a: 1 }, { partialFilterExpression: { b: { $gt: 0 } }, name: 'a_partial' });
  const ids = async (f, hint) => (await co.find(f, { hint }).toArray()).map((d) => d._id).sort();
  assert.deepEqual(await ids({ a: 1 }, 'a_partial'), [1, 2, 3], 'not only the documents the partial index holds');
  assert.deepEqual(await ids({ a: 1, b: { $gt: 0 } }, 'a_partial'), [1], 'a query that implies the filter uses the index');
  assert.equal(await co.countDocuments({ a: 1 }, { hint: 'a_partial' }), 3);
  const r = await co.deleteMany({ a: 1 }, { hint: 'a_partial' });
  assert.equal(r.deletedCount, 3);
  assert.equal(await co.countDocuments({}), 0);
});

h.test('8.0 express path: an _id lookup explains as EXPRESS_IXSCAN (EXPRESS_CLUSTERED_IXSCAN when clustered), with its counts', async () => {
  const xdb = srv.freshDb('express');
  const xc = xdb.collection('c');
  await xc.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  let r = await xc.find({ _id: 2 }).explain('executionStats');
  assert.equal(r.executionStats.nReturned, 1);
  assert.equal(r.executionStats.totalKeysExamined, 1);
  assert.equal(r.executionStats.totalDocsExamined, 1);
  const st = r.executionStats.executionStages;
  assert.equal(st.stage, 'EXPRESS_IXSCAN');
  assert.equal(st.indexName, '_id_');
  assert.deepEqual(st.keyPattern, { _id: 1 });
  assert.equal(st.nReturned, 1);
  assert.equal(st.keysExamined, 1);
  assert.equal(st.docsExamined, 1);
  // A miss examines the key it looked for and no document.
  r = await xc.find({ _id: 99 }).explain('executionStats');
  assert.equal(r.executionStats.executionStages.stage, 'EXPRESS_IXSCAN');
  assert.equal(r.executionStats.executionStages.nReturned, 0);
  assert.equal(r.executionStats.executionStages.docsExamined, 0);
  // findOne (limit 1) and a simple projection stay express; an expression projection or a skip does not.
  r = await xc.find({ _id: 1 }, { projection: { a: 1 } }).limit(1).explain();
  assert.equal(r.queryPlanner.winningPlan.stage, 'EXPRESS_IXSCAN');
  r = await xc.find({ _id: 1 }, { projection: { b: { $add: ['$a', 1] } } }).explain();
  assert.notEqual(r.queryPlanner.winningPlan.stage, 'EXPRESS_IXSCAN');
  r = await xc.find({ _id: 1 }).skip(1).explain();
  assert.equal(r.queryPlanner.winningPlan.stage, 'SKIP');
  // {_id: {$eq: v}} is not 8.0's simple _id query (8.1 takes it express).
  r = await xc.find({ _id: { $eq: 1 } }).explain();
  assert.notEqual(r.queryPlanner.winningPlan.stage, 'EXPRESS_IXSCAN');
  // count and aggregate keep their plan trees.
  r = await xdb.command({ explain: { count: 'c', query: { _id: 1 } } });
  assert.equal(r.queryPlanner.winningPlan.stage, 'COUNT');
  // A clustered collection looks the document up by its _id: no index key is examined.
  await xdb.createCollection('cl', { clusteredIndex: { key: { _id: 1 }, unique: true } });
  await xdb.collection('cl').insertOne({ _id: 5 });
  r = await xdb.collection('cl').find({ _id: 5 }).explain('executionStats');
  assert.deepEqual(r.queryPlanner.winningPlan, { isCached: false, stage: 'EXPRESS_CLUSTERED_IXSCAN' });
  assert.equal(r.executionStats.totalKeysExamined, 0);
  assert.equal(r.executionStats.totalDocsExamined, 1);
  assert.equal(r.executionStats.executionStages.nReturned, 1);
});
