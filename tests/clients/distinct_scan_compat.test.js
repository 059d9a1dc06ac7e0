'use strict';
/*
 * distinct over an index (mongod 8.0's DISTINCT_SCAN, get_executor.cpp
 * tryGetExecutorDistinct): when an index holds the distinct key, the scan
 * reads the first index entry of each distinct value and seeks past the
 * rest, so its cost follows the number of values, not of documents.
 * Without a filter the index must lead with the key (fewest fields wins),
 * have the query's collation and not be partial; with a filter, the index
 * the planner picks among those holding the key must answer it exactly by
 * its bounds and the key's path must hold no array. Covered (type bits, no
 * collation): PROJECTION_COVERED (PROJECTION_DEFAULT for a dotted key) over
 * DISTINCT_SCAN, totalDocsExamined 0, keysExamined one per value (plus the
 * key that ends a bounded scan). A collation index gives FETCH over it.
 *
 * Values, their order and their number types are compared with the same
 * distinct forced through a collection scan (hint {$natural: 1}), except
 * where mongod's DISTINCT_SCAN itself differs (distinct_semantics.js: a
 * missing field reads as null, SERVER-14832; an empty array as undefined,
 * SERVER-31343; nested arrays unwound, SERVER-83620).
 */
const assert = require('node:assert/strict');
const { Decimal128, Long, Double, Int32, BSON } = require('mongodb');

const { EJSON } = BSON;
const h = require('./harness');

const srv = h.useServer();

const D = (s) => Decimal128.fromString(s);

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

/* The distinct's values as canonical extended JSON (number types kept), via the command's raw reply. */
async function values(db, cmd) {
  const doc = await db.command(cmd, { promoteValues: false, promoteLongs: false, promoteBuffers: false });
  return EJSON.stringify(doc.values, { relaxed: false });
}

/* The distinct through the planner's choice and through a collection scan. */
async function both(db, coll, key, query, extra = {}) {
  const cmd = { distinct: coll, key, ...(query ? { query } : {}), ...extra };
  return {
    viaIndex: await values(db, cmd),
    viaScan: await values(db, { ...cmd, hint: { $natural: 1 } }),
  };
}

async function explain(db, coll, key, query, extra = {}, verbosity = 'executionStats') {
  return db.command({ explain: { distinct: coll, key, ...(query ? { query } : {}), ...extra }, verbosity });
}

async function assertDistinctScan(db, coll, key, query, extra = {}) {
  const e = await explain(db, coll, key, query, extra);
  const st = stages(e.queryPlanner.winningPlan);
  assert.ok(st.includes('DISTINCT_SCAN'), `DISTINCT_SCAN expected, plan ${st.join(' > ')}`);
  return e;
}

async function assertNoDistinctScan(db, coll, key, query, extra = {}) {
  const e = await explain(db, coll, key, query, extra);
  const st = stages(e.queryPlanner.winningPlan);
  assert.ok(!st.includes('DISTINCT_SCAN'), `no DISTINCT_SCAN expected, plan ${st.join(' > ')}`);
  return e;
}

h.test('numbers of every type: same values, order and types as a collection scan; first document\'s type wins', async () => {
  const db = srv.freshDb('types');
  const c = db.collection('c');
  await c.insertMany([
    { a: new Double(2.0) }, { a: 3 }, { a: new Int32(1) }, { a: D('1') }, { a: Long.fromNumber(2) },
    { a: D('1.50') }, { a: 1.5 }, { a: Long.fromString('9007199254740993') }, { a: new Double(-0.0) },
    { a: 0 }, { a: 'x' }, { a: 'X' }, { a: true }, { a: new Date(5) }, { a: { b: 1 } }, { a: null },
    { a: D('NaN') }, { a: NaN }, { a: 3 }, { a: new Double(3) },
  ]);
  await c.createIndex({ a: 1 });
  const r = await both(db, 'c', 'a');
  assert.equal(r.viaIndex, r.viaScan);
  const vals = EJSON.parse(r.viaIndex, { relaxed: false });
  /* 1 then 1.0: the int32 came first; 2.0 (double) before NumberLong(2); -0.0 before 0. */
  assert.ok(r.viaIndex.includes('{"$numberInt":"1"}'), r.viaIndex);
  assert.ok(r.viaIndex.includes('{"$numberDouble":"2.0"}'), r.viaIndex);
  assert.ok(r.viaIndex.includes('{"$numberDecimal":"1.50"}'), r.viaIndex);
  assert.ok(r.viaIndex.includes('{"$numberLong":"9007199254740993"}'), r.viaIndex);
  assert.ok(r.viaIndex.includes('{"$numberDouble":"-0.0"}'), r.viaIndex);
  assert.ok(r.viaIndex.includes('{"$numberDecimal":"NaN"}'), r.viaIndex);
  assert.equal(vals.length, 13);
  const e = await assertDistinctScan(db, 'c', 'a');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'DISTINCT_SCAN']);
  assert.equal(e.executionStats.totalDocsExamined, 0);
  assert.equal(e.executionStats.totalKeysExamined, 13);
  assert.equal(e.executionStats.nReturned, 13);
});

h.test('explain shape: PROJECTION_COVERED over DISTINCT_SCAN with the index\'s fields, bounds and counters', async () => {
  const db = srv.freshDb('shape');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 100 }, (_, i) => ({ a: i % 4, b: i })));
  await c.createIndex({ a: 1 });
  await c.createIndex({ a: 1, b: 1 });
  const e = await explain(db, 'c', 'a', null, {}, 'executionStats');
  const wp = e.queryPlanner.winningPlan;
  assert.equal(wp.stage, 'PROJECTION_COVERED');
  assert.deepEqual(wp.transformBy, { _id: 0, a: 1 });
  const ds = wp.inputStage;
  assert.deepEqual(Object.keys(ds), ['stage', 'keyPattern', 'indexName', 'isMultiKey', 'multiKeyPaths', 'isUnique',
    'isSparse', 'isPartial', 'indexVersion', 'direction', 'indexBounds']);
  assert.equal(ds.stage, 'DISTINCT_SCAN');
  assert.deepEqual(ds.keyPattern, { a: 1 }, 'the index of fewest fields');
  assert.equal(ds.indexName, 'a_1');
  assert.equal(ds.isMultiKey, false);
  assert.deepEqual(ds.multiKeyPaths, { a: [] });
  assert.equal(ds.direction, 'forward');
  assert.deepEqual(ds.indexBounds, { a: ['[MinKey, MaxKey]'] });
  const es = e.executionStats;
  assert.equal(es.nReturned, 4);
  assert.equal(es.totalKeysExamined, 4);
  assert.equal(es.totalDocsExamined, 0);
  assert.equal(es.executionStages.stage, 'PROJECTION_COVERED');
  assert.equal(es.executionStages.nReturned, 4);
  assert.equal(es.executionStages.inputStage.stage, 'DISTINCT_SCAN');
  assert.equal(es.executionStages.inputStage.keysExamined, 4);
  assert.equal(es.executionStages.inputStage.nReturned, 4);
  assert.equal(es.executionStages.inputStage.docsExamined, undefined);
  assert.deepEqual(await c.distinct('a'), [0, 1, 2, 3]);
});

h.test('a filter the index bounds answer exactly: DISTINCT_SCAN over the bounds; keysExamined counts the key ending the scan', async () => {
  const db = srv.freshDb('filter');
  const c = db.collection('c');
  /* distinct_index1.js's data: 1,000 documents, 10 values of a. */
  const r = (x) => Math.floor(Math.sqrt(x * 123123)) % 10;
  await c.insertMany(Array.from({ length: 1000 }, (_, i) => ({ a: r(i * 5), b: r(i) })));
  await c.createIndex({ a: 1 });
  let e = await assertDistinctScan(db, 'c', 'a', { a: { $gt: 5 } });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'DISTINCT_SCAN']);
  assert.deepEqual(e.queryPlanner.winningPlan.inputStage.indexBounds, { a: ['(5, inf.0]'] });
  assert.equal(e.executionStats.nReturned, 4);
  assert.equal(e.executionStats.totalKeysExamined, 4);
  assert.equal(e.executionStats.totalDocsExamined, 0);
  e = await assertDistinctScan(db, 'c', 'a', { a: { $lt: 4 } });
  assert.equal(e.executionStats.nReturned, 4);
  assert.equal(e.executionStats.totalKeysExamined, 5, 'the key 4 ends the scan and is counted');
  e = await assertDistinctScan(db, 'c', 'a', { a: { $in: [1, 3, 7] } });
  assert.equal(e.executionStats.nReturned, 3);
  for (const q of [{ a: { $gt: 5 } }, { a: { $lt: 4 } }, { a: { $in: [1, 3, 7] } }, { a: { $gte: 2, $lte: 6 } }]) {
    const x = await both(db, 'c', 'a', q);
    assert.equal(x.viaIndex, x.viaScan, JSON.stringify(q));
  }
  /* A filter on another field: no DISTINCT_SCAN over {a: 1} (mongod: a FETCH filter cannot skip keys). */
  e = await assertNoDistinctScan(db, 'c', 'b', { a: { $gt: 5 } });
  assert.equal(e.executionStats.totalDocsExamined, 398);
  const x = await both(db, 'c', 'b', { a: { $gt: 5 } });
  assert.equal(x.viaIndex, x.viaScan);
  /* A filter the bounds only narrow (a residual predicate): the regular plan. */
  await assertNoDistinctScan(db, 'c', 'a', { a: { $gt: 5 }, b: 3 });
  const y = await both(db, 'c', 'a', { a: { $gt: 5 }, b: 3 });
  assert.equal(y.viaIndex, y.viaScan);
});

h.test('compound index: the key leading without a filter; a trailing key with an equality on the prefix', async () => {
  const db = srv.freshDb('compound');
  const c = db.collection('c');
  const docs = [];
  for (let i = 0; i < 10; i++) {
    docs.push({ a: 1, b: 1 }, { a: 1, b: 2 }, { a: 2, b: 1 }, { a: 2, b: 3 });
  }
  await c.insertMany(docs);
  await c.createIndex({ a: 1, b: 1 });
  let e = await assertDistinctScan(db, 'c', 'b', { a: 1 });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'DISTINCT_SCAN']);
  assert.deepEqual(e.queryPlanner.winningPlan.transformBy, { _id: 0, b: 1 });
  assert.equal(e.executionStats.nReturned, 2);
  assert.deepEqual(await c.distinct('b', { a: 1 }), [1, 2]);
  /* distinct_compound_index.js: a trailing key and no filter is a collection scan. */
  e = await assertNoDistinctScan(db, 'c', 'b');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['COLLSCAN']);
  assert.equal(e.executionStats.nReturned, 40);
  assert.deepEqual(await c.distinct('b'), [1, 2, 3]);
  /* A range on the prefix: one key per (a, b) pair, de-duplicated by distinct. */
  e = await assertDistinctScan(db, 'c', 'b', { a: { $gte: 1 } });
  assert.equal(e.executionStats.nReturned, 4);
  assert.deepEqual(await c.distinct('b', { a: { $gte: 1 } }), [1, 2, 3]);
  e = await assertDistinctScan(db, 'c', 'a');
  assert.deepEqual(e.queryPlanner.winningPlan.inputStage.indexBounds, { a: ['[MinKey, MaxKey]'], b: ['[MinKey, MaxKey]'] });
  assert.equal(e.executionStats.totalKeysExamined, 2);
  const x = await both(db, 'c', 'a');
  assert.equal(x.viaIndex, x.viaScan);
  /* Descending: same values, a forward scan of the index. */
  const d = db.collection('d');
  await d.insertMany([{ a: 3 }, { a: 1 }, { a: 2 }, { a: 1 }]);
  await d.createIndex({ a: -1 });
  e = await assertDistinctScan(db, 'd', 'a');
  assert.deepEqual(e.queryPlanner.winningPlan.inputStage.indexBounds, { a: ['[MaxKey, MinKey]'] });
  assert.deepEqual(await d.distinct('a'), [1, 2, 3]);
});

h.test('multikey: no filter reads element keys (covered); a filter falls back; arrays as mongod\'s DISTINCT_SCAN gives them', async () => {
  const db = srv.freshDb('multikey');
  const c = db.collection('c');
  await c.insertMany([{ a: [1, 2, 3] }, { a: [2, 3, 4] }, { a: [5, 6, 7] }]);
  await c.createIndex({ a: 1 });
  let e = await assertDistinctScan(db, 'c', 'a');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'DISTINCT_SCAN']);
  assert.equal(e.queryPlanner.winningPlan.inputStage.isMultiKey, true);
  assert.deepEqual(e.queryPlanner.winningPlan.inputStage.multiKeyPaths, { a: ['a'] });
  assert.deepEqual(await c.distinct('a'), [1, 2, 3, 4, 5, 6, 7]);
  /* distinct_multikey.js: with a predicate, FETCH + IXSCAN, not DISTINCT_SCAN. */
  e = await assertNoDistinctScan(db, 'c', 'a', { a: 3 });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['FETCH', 'IXSCAN']);
  assert.deepEqual(await c.distinct('a', { a: 3 }), [1, 2, 3, 4]);
  /* A trailing field that is not multikey, the prefix multikey: one bound on it is exact, DISTINCT_SCAN. */
  const d = db.collection('d');
  await d.insertMany([{ a: [2, 3], b: 1 }, { a: [3, 4], b: 8 }, { a: [3, 5], b: 7 }, { a: [1, 6], b: 2 }]);
  await d.createIndex({ a: 1, b: 1 });
  e = await assertDistinctScan(db, 'd', 'b', { a: 3 });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'DISTINCT_SCAN']);
  assert.deepEqual(e.queryPlanner.winningPlan.inputStage.multiKeyPaths, { a: ['a'], b: [] });
  assert.deepEqual(await d.distinct('b', { a: 3 }), [1, 7, 8]);
  for (const q of [{ a: 3 }, { a: { $in: [2, 5] } }, { a: { $gt: 4 } }, { a: { $lte: 2 } }]) {
    await assertDistinctScan(db, 'd', 'b', q);
    const dx = await both(db, 'd', 'b', q);
    assert.equal(dx.viaIndex, dx.viaScan, JSON.stringify(q));
  }
  /* Two bounds on the multikey field: its elements may meet each apart, not exact: the regular plan. */
  await assertNoDistinctScan(db, 'd', 'b', { a: { $gt: 2, $lt: 4 } });
  const dy = await both(db, 'd', 'b', { a: { $gt: 2, $lt: 4 } });
  assert.equal(dy.viaIndex, dy.viaScan);
  assert.deepEqual(await d.distinct('b', { a: { $gt: 5, $lt: 2 } }), [2]);
  /* distinct_multikey.js: a dotted trailing key under a multikey prefix: PROJECTION_DEFAULT over DISTINCT_SCAN. */
  const dd = db.collection('dd');
  await dd.insertMany([{ a: [2, 3], b: { c: 1 } }, { a: [3, 4], b: { c: 8 } }, { a: [3, 5], b: { c: 7 } }]);
  await dd.createIndex({ a: 1, 'b.c': 1 });
  e = await assertDistinctScan(db, 'dd', 'b.c', { a: 3 });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_DEFAULT', 'DISTINCT_SCAN']);
  assert.deepEqual(await dd.distinct('b.c', { a: 3 }), [1, 7, 8]);
  /* A trailing multikey field: no DISTINCT_SCAN. */
  const f = db.collection('f');
  await f.insertMany([{ a: 1, b: [2, 3] }, { a: 8, b: [3, 4] }, { a: 7, b: [4, 5] }]);
  await f.createIndex({ a: 1, b: 1 });
  await assertNoDistinctScan(db, 'f', 'b', { a: { $gte: 2 } });
  assert.deepEqual(await f.distinct('b', { a: { $gte: 2 } }), [3, 4, 5]);
  e = await assertDistinctScan(db, 'f', 'a', { a: { $gte: 2 } });
  assert.deepEqual(await f.distinct('a', { a: { $gte: 2 } }), [7, 8]);
  /* Nested arrays: the keys' values unwound once more (distinct_semantics.js resultWithIndex, SERVER-83620). */
  const g = db.collection('g');
  await g.insertMany([{ a: [2, 3] }, { a: 1 }, { a: 2 }, { a: [1, [2, 3]] }, { a: [3, 'str'] }]);
  assert.deepEqual(await g.distinct('a'), [1, 2, 3, 'str', [2, 3]]);
  await g.createIndex({ a: 1 });
  assert.deepEqual(await g.distinct('a'), [1, 2, 3, 'str']);
  assert.deepEqual((await db.command({ distinct: 'g', key: 'a', hint: { $natural: 1 } })).values, [1, 2, 3, 'str', [2, 3]]);
});

h.test('null and missing: the index reads a missing field as null and an empty array as undefined (mongod\'s DISTINCT_SCAN)', async () => {
  const db = srv.freshDb('nulls');
  const c = db.collection('c');
  await c.insertMany([{ a: 1 }, {}, { a: null }, { b: 2 }]);
  assert.deepEqual(await c.distinct('a'), [null, 1]);
  const m = db.collection('m');
  await m.insertMany([{ a: 1 }, { b: 1 }]);
  assert.deepEqual(await m.distinct('a'), [1]);
  await m.createIndex({ a: 1 });
  /* distinct_semantics.js: [{}] gives [null] with an index (SERVER-14832). */
  assert.deepEqual(await m.distinct('a'), [null, 1]);
  assert.deepEqual((await db.command({ distinct: 'm', key: 'a', hint: { $natural: 1 } })).values, [1]);
  const u = db.collection('u');
  await u.insertOne({ a: [] });
  assert.deepEqual(await u.distinct('a'), []);
  await u.createIndex({ a: 1 });
  /* SERVER-31343: the empty array's key, undefined (the driver reads BSON undefined as JS undefined, not null). */
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command(db.databaseName, { distinct: 'u', key: 'a' });
    assert.equal(r.values.length, 1);
    assert.equal(r.values[0], undefined);
    const n = await conn.command(db.databaseName, { distinct: 'm', key: 'a' });
    assert.equal(n.values[0], null);
  } finally {
    conn.close();
  }
  /* A sparse index has no entry for the missing field: no null. */
  const s = db.collection('s');
  await s.insertMany([{ a: 1 }, { b: 1 }, { a: null }]);
  await s.createIndex({ a: 1 }, { sparse: true });
  const e = await assertDistinctScan(db, 's', 'a');
  assert.equal(e.queryPlanner.winningPlan.inputStage.isSparse, true);
  assert.deepEqual(await s.distinct('a'), [null, 1]);
  const s2 = db.collection('s2');
  await s2.insertMany([{ a: 1 }, { b: 1 }]);
  await s2.createIndex({ a: 1 }, { sparse: true });
  assert.deepEqual(await s2.distinct('a'), [1]);
  /* A null equality is never exact: no DISTINCT_SCAN. */
  await assertNoDistinctScan(db, 'c', 'a', { a: null });
});

h.test('dotted key: PROJECTION_DEFAULT over DISTINCT_SCAN, the value nested as the key gives it', async () => {
  const db = srv.freshDb('dotted');
  const c = db.collection('c');
  await c.insertMany([{ a: { b: 3 } }, { a: { b: 1 } }, { a: { b: D('1.0') } }, { a: { b: 'z' } }, { a: { b: 3 } }]);
  await c.createIndex({ 'a.b': 1 });
  const e = await assertDistinctScan(db, 'c', 'a.b');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_DEFAULT', 'DISTINCT_SCAN']);
  assert.deepEqual(e.queryPlanner.winningPlan.transformBy, { _id: 0, 'a.b': 1 });
  assert.equal(e.executionStats.totalDocsExamined, 0);
  const r = await both(db, 'c', 'a.b');
  assert.equal(r.viaIndex, r.viaScan);
  const f = await both(db, 'c', 'a.b', { 'a.b': { $gte: 1 } });
  assert.equal(f.viaIndex, f.viaScan);
  /* distinct_multikey.js: a dotted multikey key with a predicate falls back. */
  const m = db.collection('m');
  await m.insertMany([{ a: { b: [1, 2, 3] } }, { a: { b: [2, 3, 4] } }]);
  await m.createIndex({ 'a.b': 1 });
  await assertNoDistinctScan(db, 'm', 'a.b', { 'a.b': 3 });
  assert.deepEqual(await m.distinct('a.b', { 'a.b': 3 }), [1, 2, 3, 4]);
  /* A numeric path component names no key pattern field: the regular plan. */
  await assertNoDistinctScan(db, 'm', 'a.b.0');
  /* An index on a positional path: its keys hold one reading of it, distinct walks both: the regular plan. */
  const p = db.collection('p');
  await p.insertMany([{ a: [5, 6] }, { a: [{ 0: 7 }] }, { a: { 0: 8 } }]);
  await p.createIndex({ 'a.0': 1 });
  await assertNoDistinctScan(db, 'p', 'a.0');
  const px = await both(db, 'p', 'a.0');
  assert.equal(px.viaIndex, px.viaScan);
});

h.test('collation: an index of the query\'s collation gives FETCH over DISTINCT_SCAN; another collation falls back', async () => {
  const db = srv.freshDb('coll');
  const c = db.collection('c');
  await c.insertMany([{ a: 'b' }, { a: 'A' }, { a: 'a' }, { a: 'B' }, { a: 'c' }, { a: 1 }]);
  const coll = { locale: 'en', strength: 2 };
  await c.createIndex({ a: 1 }, { collation: coll });
  const via = await values(db, { distinct: 'c', key: 'a', collation: coll });
  const scan = await values(db, { distinct: 'c', key: 'a', collation: coll, hint: { $natural: 1 } });
  assert.equal(via, scan);
  /* Under the collation, the first of each group of equal strings, in the collation's order. */
  assert.deepEqual(EJSON.parse(via), [1, 'A', 'b', 'c']);
  let e = await assertDistinctScan(db, 'c', 'a', null, { collation: coll });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_SIMPLE', 'FETCH', 'DISTINCT_SCAN']);
  assert.equal(e.executionStats.totalDocsExamined, 4);
  /* Without the collation (the simple one): the index is not the query's. */
  await assertNoDistinctScan(db, 'c', 'a');
  assert.deepEqual(await c.distinct('a'), [1, 'A', 'B', 'a', 'b', 'c']);
  /* With a filter on the collation index: FETCH over DISTINCT_SCAN, no projection. */
  e = await assertDistinctScan(db, 'c', 'a', { a: { $gte: 'a' } }, { collation: coll });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['FETCH', 'DISTINCT_SCAN']);
  const f1 = await values(db, { distinct: 'c', key: 'a', query: { a: { $gte: 'a' } }, collation: coll });
  const f2 = await values(db, { distinct: 'c', key: 'a', query: { a: { $gte: 'a' } }, collation: coll, hint: { $natural: 1 } });
  assert.equal(f1, f2);
});

h.test('indexes that never give a DISTINCT_SCAN: hashed leading, text, 2dsphere, wildcard, partial, hidden; hints', async () => {
  const db = srv.freshDb('kinds');
  const c = db.collection('c');
  await c.insertMany([{ a: 1, t: 'x y', g: { type: 'Point', coordinates: [0, 0] }, p: 1 },
    { a: 2, t: 'y z', g: { type: 'Point', coordinates: [1, 1] }, p: 2 }]);
  await c.createIndex({ a: 'hashed' });
  await assertNoDistinctScan(db, 'c', 'a');
  await c.createIndex({ t: 'text' });
  await assertNoDistinctScan(db, 'c', 't');
  await c.createIndex({ g: '2dsphere' });
  await assertNoDistinctScan(db, 'c', 'g');
  await c.createIndex({ '$**': 1 });
  await assertNoDistinctScan(db, 'c', 'p', { p: 1 });
  await c.createIndex({ p: 1 }, { partialFilterExpression: { p: { $gt: 0 } } });
  await assertNoDistinctScan(db, 'c', 'p');
  assert.deepEqual(await c.distinct('p'), [1, 2]);
  await c.createIndex({ a: 1 }, { hidden: true });
  await assertNoDistinctScan(db, 'c', 'a');
  /* A hint naming it unhides nothing (hidden indexes cannot be hinted); a visible one is used. */
  await c.createIndex({ a: 1, p: 1 });
  let e = await assertDistinctScan(db, 'c', 'a', null, { hint: { a: 1, p: 1 } });
  assert.equal(e.queryPlanner.winningPlan.inputStage.indexName, 'a_1_p_1');
  /* $natural: the collection scan. */
  e = await assertNoDistinctScan(db, 'c', 'a', null, { hint: { $natural: 1 } });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['COLLSCAN']);
  /* A hinted index without the key: the regular plan with that index. */
  e = await assertNoDistinctScan(db, 'c', 'a', null, { hint: { _id: 1 } });
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['FETCH', 'IXSCAN']);
  assert.deepEqual((await db.command({ distinct: 'c', key: 'a', hint: { _id: 1 } })).values, [1, 2]);
});

h.test('the _id index and unique indexes', async () => {
  const db = srv.freshDb('ids');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 42, u: 'x' }, { _id: 2, a: 42, u: 'y' }, { _id: 3, u: D('2') }]);
  let e = await assertDistinctScan(db, 'c', '_id');
  assert.deepEqual(e.queryPlanner.winningPlan.transformBy, { _id: 1 });
  assert.deepEqual(await c.distinct('_id'), [1, 2, 3]);
  e = await assertDistinctScan(db, 'c', '_id', { _id: { $gt: 1 } });
  assert.deepEqual(await c.distinct('_id', { _id: { $gt: 1 } }), [2, 3]);
  await c.createIndex({ u: 1 }, { unique: true });
  e = await assertDistinctScan(db, 'c', 'u');
  assert.equal(e.queryPlanner.winningPlan.inputStage.isUnique, true);
  const r = await both(db, 'c', 'u');
  assert.equal(r.viaIndex, r.viaScan);
});

h.test('after a restart: the same DISTINCT_SCAN and values', async () => {
  const db0 = srv.freshDb('restart');
  const name = db0.databaseName;
  const c0 = db0.collection('c');
  await c0.insertMany(Array.from({ length: 300 }, (_, i) => ({ a: i % 7 === 0 ? Long.fromNumber(i % 5) : i % 5, b: i })));
  await c0.createIndex({ a: 1, b: 1 });
  const before = await both(db0, 'c', 'a');
  assert.equal(before.viaIndex, before.viaScan);
  /*
   * The first index entry of a value gives its type: over {a: 1, b: -1} that of
   * the largest b, so NumberLong(0) (b 0) gives way to 0 (b 295), as mongod's
   * DISTINCT_SCAN does.
   */
  await c0.createIndex({ a: 1, b: -1 });
  assert.equal(await values(db0, { distinct: 'c', key: 'a', hint: { a: 1, b: -1 } }),
    '[{"$numberInt":"0"},{"$numberInt":"1"},{"$numberInt":"2"},{"$numberInt":"3"},{"$numberInt":"4"}]');
  assert.ok(before.viaIndex.startsWith('[{"$numberLong":"0"}'), before.viaIndex);
  await srv.server.restart();
  await srv.reconnect();
  const db = srv.client.db(name);
  const after = await both(db, 'c', 'a');
  assert.equal(after.viaIndex, before.viaIndex);
  assert.equal(after.viaScan, before.viaScan);
  const e = await assertDistinctScan(db, 'c', 'a', null, { hint: { a: 1, b: 1 } });
  assert.equal(e.executionStats.totalKeysExamined, 5);
});

h.test('writes between distincts; a view\'s distinct is unchanged', async () => {
  const db = srv.freshDb('writes');
  const c = db.collection('c');
  await c.createIndex({ a: 1 });
  await c.insertMany([{ a: 1 }, { a: 2 }]);
  assert.deepEqual(await c.distinct('a'), [1, 2]);
  await c.deleteMany({ a: 1 });
  await c.insertOne({ a: 3.5 });
  assert.deepEqual(await c.distinct('a'), [2, 3.5]);
  await c.updateOne({ a: 2 }, { $set: { a: [9, 8] } });
  assert.deepEqual(await c.distinct('a'), [3.5, 8, 9]);
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  assert.deepEqual(await db.collection('v').distinct('a'), [3.5, 8, 9]);
});

h.test('measurement: 200,000 documents, 10 values (reported, not asserted on time)', { timeout: 300000 }, async () => {
  const db = srv.freshDb('measure');
  const c = db.collection('c');
  const N = 200000;
  for (let i = 0; i < N; i += 20000) {
    await c.insertMany(Array.from({ length: 20000 }, (_, j) => ({ a: (i + j) % 10, pad: i + j })));
  }
  await c.createIndex({ a: 1 });
  const time = async (cmd) => {
    const t0 = process.hrtime.bigint();
    const r = await db.command(cmd);
    return { ms: Number(process.hrtime.bigint() - t0) / 1e6, values: r.values };
  };
  const scan = await time({ distinct: 'c', key: 'a', hint: { $natural: 1 } });
  const ix = await time({ distinct: 'c', key: 'a' });
  const scan2 = await time({ distinct: 'c', key: 'a', hint: { $natural: 1 } });
  const ix2 = await time({ distinct: 'c', key: 'a' });
  assert.deepEqual(ix.values, scan.values);
  assert.deepEqual(ix.values, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const e = await explain(db, 'c', 'a');
  assert.equal(e.executionStats.totalKeysExamined, 10);
  assert.equal(e.executionStats.totalDocsExamined, 0);
  const es = await explain(db, 'c', 'a', null, { hint: { $natural: 1 } });
  assert.equal(es.executionStats.totalDocsExamined, N);
  console.log(`# distinct over ${N} docs, 10 values: collection scan ${scan.ms.toFixed(1)} / ${scan2.ms.toFixed(1)} ms ` +
    `(docsExamined ${es.executionStats.totalDocsExamined}); DISTINCT_SCAN ${ix.ms.toFixed(1)} / ${ix2.ms.toFixed(1)} ms ` +
    `(keysExamined ${e.executionStats.totalKeysExamined}, docsExamined 0)`);
});
