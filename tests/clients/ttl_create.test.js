'use strict';
/*
 * TTL indexes, creation (SPEC A1-A7, C7): createIndexes with
 * expireAfterSeconds, every invalid form refused with MongoDB 8.0's code and
 * message (and nothing created), conflicts with existing indexes, capped
 * collections, an index built over already-expired documents, and the TTL
 * index answering queries.
 *
 * The server runs with ttlMonitorSleepSecs=1 (and precise expiry, the
 * default), so expiry is observed by polling with short deadlines.
 */
const assert = require('node:assert/strict');
const { Long, Decimal128, Double, Int32 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

async function indexes(coll) {
  return coll.listIndexes().toArray();
}

function byName(list, name) {
  return list.find((ix) => ix.name === name);
}

/* Runs a createIndexes command for one spec and expects it to fail with code / message; nothing may change. */
async function refused(db, coll, spec, code, msgRe) {
  const before = JSON.stringify(await indexes(db.collection(coll)));
  const err = await h.expectCode(db.command({ createIndexes: coll, indexes: [spec] }), code, msgRe);
  const after = JSON.stringify(await indexes(db.collection(coll)));
  assert.equal(after, before, `listIndexes changed after a refused createIndexes: ${before} -> ${after}`);
  return err;
}

/* Depth-first search for a plan stage by name. */
function findStage(plan, stage) {
  if (!plan || typeof plan !== 'object') return null;
  if (plan.stage === stage) return plan;
  for (const k of ['inputStage', 'queryPlan']) {
    const r = findStage(plan[k], stage);
    if (r) return r;
  }
  for (const child of plan.inputStages || []) {
    const r = findStage(child, stage);
    if (r) return r;
  }
  return null;
}

async function freshColl(tag) {
  const db = srv.freshDb(tag);
  await db.createCollection('c');
  return { db, coll: db.collection('c') };
}

h.test('A1: createIndex with expireAfterSeconds on a single field makes a TTL index shown by listIndexes', async () => {
  const { coll } = await freshColl('a1');
  const name = await coll.createIndex({ lastModifiedDate: 1 }, { expireAfterSeconds: 3600 });
  assert.equal(name, 'lastModifiedDate_1');
  const ix = byName(await indexes(coll), 'lastModifiedDate_1');
  assert.ok(ix, 'index listed');
  assert.deepEqual(ix.key, { lastModifiedDate: 1 });
  assert.equal(ix.expireAfterSeconds, 3600);
});

h.test('A1: listIndexes shows a TTL index in MongoDB 8.0\'s field order and types whatever order it was created with (list_indexes.idl)', async () => {
  const { db, coll } = await freshColl('a1order');
  await db.command({ createIndexes: coll.collectionName, indexes: [
    { key: { f: 1 }, name: 'f_1', expireAfterSeconds: 10, background: 1, unique: true, sparse: 1 },
    { key: { g: 1 }, name: 'g_1', partialFilterExpression: { g: { $exists: true } }, expireAfterSeconds: 10, hidden: true },
  ] });
  await db.command({ createIndexes: coll.collectionName, indexes: [{ key: { h: 1 }, name: 'h_1', hidden: true }] });
  await db.command({ collMod: coll.collectionName, index: { name: 'h_1', expireAfterSeconds: 5 } });
  const list = (await db.command({ listIndexes: coll.collectionName }, { promoteValues: false })).cursor.firstBatch;
  const f = list.find((ix) => ix.name.valueOf() === 'f_1');
  assert.deepEqual(Object.keys(f), ['v', 'key', 'name', 'background', 'unique', 'sparse', 'expireAfterSeconds']);
  const g = list.find((ix) => ix.name.valueOf() === 'g_1');
  assert.deepEqual(Object.keys(g), ['v', 'key', 'name', 'hidden', 'partialFilterExpression', 'expireAfterSeconds']);
  assert.equal(f.background, true, 'safeBool: 1 is listed as true');
  assert.equal(f.sparse, true);
  assert.equal(f.expireAfterSeconds._bsontype, 'Int32');
  assert.equal(f.v._bsontype, 'Int32');
  const hh = list.find((ix) => ix.name.valueOf() === 'h_1');
  assert.deepEqual(Object.keys(hh), ['v', 'key', 'name', 'hidden', 'expireAfterSeconds'], 'collMod\'s N is listed in its place, not appended');
});

h.test('A1: a descending single-field TTL index and a TTL index on a dotted path are accepted', async () => {
  const { coll } = await freshColl('a1b');
  await coll.createIndex({ at: -1 }, { expireAfterSeconds: 10 });
  await coll.createIndex({ 'meta.created': 1 }, { expireAfterSeconds: 20 });
  const list = await indexes(coll);
  assert.equal(byName(list, 'at_-1').expireAfterSeconds, 10);
  assert.equal(byName(list, 'meta.created_1').expireAfterSeconds, 20);
});

h.test('A1: documents in a collection with a TTL index expire (dotted path and descending keys too)', async () => {
  const { coll } = await freshColl('a1c');
  await coll.createIndex({ at: -1 }, { expireAfterSeconds: 0 });
  await coll.createIndex({ 'meta.created': 1 }, { expireAfterSeconds: 0 });
  const past = new Date(Date.now() - 60000);
  const future = new Date(Date.now() + 3600000);
  await coll.insertMany([
    { _id: 'desc-past', at: past }, { _id: 'desc-future', at: future },
    { _id: 'dot-past', meta: { created: past } }, { _id: 'dot-future', meta: { created: future } },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: ['desc-past', 'dot-past'] } })) === 0,
    'expired documents under a descending / dotted TTL index deleted');
  assert.deepEqual((await coll.find().sort({ _id: 1 }).toArray()).map((d) => d._id), ['desc-future', 'dot-future']);
});

h.test('A2: expireAfterSeconds accepts int, long, double and decimal, and stores the value as an integer', async () => {
  const { db, coll } = await freshColl('a2ok');
  await db.command({ createIndexes: 'c', indexes: [
    { key: { a: 1 }, name: 'a_1', expireAfterSeconds: new Int32(5) },
    { key: { b: 1 }, name: 'b_1', expireAfterSeconds: Long.fromNumber(6) },
    { key: { c: 1 }, name: 'c_1', expireAfterSeconds: new Double(7) },
    { key: { d: 1 }, name: 'd_1', expireAfterSeconds: Decimal128.fromString('8') },
    { key: { e: 1 }, name: 'e_1', expireAfterSeconds: 0 },
    { key: { f: 1 }, name: 'f_1', expireAfterSeconds: 2147483647 },
  ] });
  const list = await indexes(coll);
  const got = Object.fromEntries(['a_1', 'b_1', 'c_1', 'd_1', 'e_1', 'f_1'].map((n) => [n, Number(byName(list, n).expireAfterSeconds)]));
  assert.deepEqual(got, { a_1: 5, b_1: 6, c_1: 7, d_1: 8, e_1: 0, f_1: 2147483647 });
});

h.test('A2: expireAfterSeconds 10000.7 is truncated to 10000 in listIndexes', async () => {
  const { coll } = await freshColl('a2trunc');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 10000.7 });
  const ix = byName(await indexes(coll), 'at_1');
  assert.equal(ix.expireAfterSeconds, 10000);
});

h.test('A2: expireAfterSeconds must be numeric: a string is refused with 67 CannotCreateIndex', async () => {
  const { db } = await freshColl('a2str');
  const err = await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: '3600' }, 67);
  assert.equal(err.codeName, 'CannotCreateIndex');
  // mongod's validateIndexSpecTTL: the spec as sent, then the reason (its text lacks the closing quote).
  assert.equal(err.message, '. Index spec: { key: { at: 1 }, name: "at_1", expireAfterSeconds: "3600" } :: caused by :: ' +
    "TTL index 'expireAfterSeconds' option must be numeric, but received a type of 'string");
});

h.test('A2: expireAfterSeconds must be numeric: a document is refused with 67', async () => {
  const { db } = await freshColl('a2doc');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: { n: 1 } }, 67, /must be numeric/);
});

h.test('A2: expireAfterSeconds must be numeric: null is refused with 67', async () => {
  const { db } = await freshColl('a2null');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: null }, 67, /must be numeric/);
});

h.test('A2: expireAfterSeconds must be numeric: a boolean is refused with 67', async () => {
  const { db } = await freshColl('a2bool');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: true }, 67, /must be numeric/);
});

h.test('A2: expireAfterSeconds NaN is refused with 67 "must not be NaN"', async () => {
  const { db } = await freshColl('a2nan');
  const e = await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: NaN }, 67, /must not be NaN/);
  assert.match(e.message, /expireAfterSeconds: nan\.0 \}/, 'the spec shown as mongod shows a double (appendDoubleNice)');
});

h.test('A2: expireAfterSeconds Infinity is refused with 67 "must be within the range of a 32-bit integer"', async () => {
  const { db } = await freshColl('a2inf');
  const e = await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: Infinity }, 67,
    /must be within the range of a 32-bit integer/);
  assert.match(e.message, /expireAfterSeconds: inf\.0 \}/);
});

h.test('A2: expireAfterSeconds -Infinity is refused with 67 "must be within the range of a 32-bit integer"', async () => {
  const { db } = await freshColl('a2ninf');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: -Infinity }, 67,
    /must be within the range of a 32-bit integer/);
});

h.test('A2: expireAfterSeconds 2^31 (double and long) is refused with 67 "must be within the range of a 32-bit integer"', async () => {
  const { db } = await freshColl('a2big');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: 2147483648 }, 67,
    /must be within the range of a 32-bit integer/);
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: Long.fromString('2147483648') }, 67,
    /must be within the range of a 32-bit integer/);
});

h.test('A2: expireAfterSeconds 2^63 is refused with 67 "must be within the range of a 32-bit integer"', async () => {
  const { db } = await freshColl('a2huge');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: 2 ** 63 }, 67,
    /must be within the range of a 32-bit integer/);
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: Long.MAX_VALUE }, 67,
    /must be within the range of a 32-bit integer/);
});

h.test('A2: expireAfterSeconds -1 is refused with 67 "cannot be less than 0"', async () => {
  const { db } = await freshColl('a2neg');
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: -1 }, 67,
    /^\. Index spec: \{ key: \{ at: 1 \}, name: "at_1", expireAfterSeconds: -1 \} :: caused by :: TTL index 'expireAfterSeconds' option cannot be less than 0$/);
  await refused(db, 'c', { key: { at: 1 }, name: 'at_1', expireAfterSeconds: Long.fromNumber(-5) }, 67,
    /cannot be less than 0/);
});

h.test('A2: a refused createIndexes with several specs creates none of them', async () => {
  const { db, coll } = await freshColl('a2multi');
  const before = JSON.stringify(await indexes(coll));
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [
    { key: { ok: 1 }, name: 'ok_1', expireAfterSeconds: 10 },
    { key: { bad: 1 }, name: 'bad_1', expireAfterSeconds: 'x' },
  ] }), 67, /must be numeric/);
  assert.equal(JSON.stringify(await indexes(coll)), before);
});

h.test('A2: a refused createIndex on a missing collection does not create the collection', async () => {
  const db = srv.freshDb('a2nocoll');
  await h.expectCode(db.command({ createIndexes: 'ghost', indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: -1 }] }),
    67, /cannot be less than 0/);
  const cols = await db.listCollections({ name: 'ghost' }).toArray();
  assert.equal(cols.length, 0, 'collection was created by a refused createIndexes');
});

h.test('A3: a TTL index on _id is refused with 197 InvalidIndexSpecificationOption', async () => {
  const { db } = await freshColl('a3');
  const err = await refused(db, 'c', { key: { _id: 1 }, name: '_id_ttl', expireAfterSeconds: 10 }, 197,
    /expireAfterSeconds/);
  assert.equal(err.codeName, 'InvalidIndexSpecificationOption');
  await refused(db, 'c', { key: { _id: -1 }, name: '_id_desc_ttl', expireAfterSeconds: 10 }, 197);
  // {_id: "hashed"} is not the _id index's pattern (mongod's isIdIndexPattern): it takes the option, and, being
  // no btree index, the monitor never deletes through it.
  const coll = db.collection('c');
  assert.equal(await coll.createIndex({ _id: 'hashed' }, { expireAfterSeconds: 0 }), '_id_hashed');
  assert.equal((await coll.listIndexes().toArray()).find((i) => i.name === '_id_hashed').expireAfterSeconds, 0);
  await coll.insertOne({ _id: new Date(0) });
  const passes = Number((await db.admin().command({ serverStatus: 1 })).metrics.ttl.passes);
  await h.waitFor(async () => Number((await db.admin().command({ serverStatus: 1 })).metrics.ttl.passes) >= passes + 2,
    'two TTL passes', 15000);
  assert.equal(await coll.countDocuments({}), 1);
});

h.test('A4: a compound TTL index is refused with 67 "TTL indexes are single-field indexes, compound indexes do not support TTL"', async () => {
  const { db } = await freshColl('a4');
  const err = await refused(db, 'c', { key: { at: 1, b: 1 }, name: 'at_1_b_1', expireAfterSeconds: 10 }, 67,
    /TTL indexes are single-field indexes, compound indexes do not support TTL/);
  assert.equal(err.codeName, 'CannotCreateIndex');
});

h.test('A5: a capped collection accepts a TTL index and its documents expire', async () => {
  const db = srv.freshDb('a5');
  await db.createCollection('cap', { capped: true, size: 1 << 20 });
  const coll = db.collection('cap');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  assert.equal(byName(await indexes(coll), 'at_1').expireAfterSeconds, 0);
  const now = Date.now();
  await coll.insertMany([
    { _id: 1, at: new Date(now - 10000) }, { _id: 2, at: new Date(now - 5000) },
    { _id: 3, at: new Date(now + 3600000) }, { _id: 4, at: new Date(now + 1000) },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: [1, 2, 4] } })) === 0,
    'expired documents of a capped collection deleted');
  assert.deepEqual((await coll.find().toArray()).map((d) => d._id), [3]);
});

h.test('A6: same name and key with another expireAfterSeconds is refused with 85 IndexOptionsConflict', async () => {
  const { coll } = await freshColl('a6a');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 100 });
  const before = JSON.stringify(await indexes(coll));
  const err = await h.expectCode(coll.createIndex({ at: 1 }, { expireAfterSeconds: 200 }), 85,
    /An equivalent index already exists with the same name but different options/);
  assert.equal(err.codeName, 'IndexOptionsConflict');
  assert.equal(JSON.stringify(await indexes(coll)), before);
  assert.equal(byName(await indexes(coll), 'at_1').expireAfterSeconds, 100);
});

h.test('A6: repeating the identical TTL index spec is a no-op that succeeds', async () => {
  const { db, coll } = await freshColl('a6same');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 100 });
  const r = await db.command({ createIndexes: 'c', indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 100 }] });
  assert.equal(r.ok, 1);
  assert.equal(r.numIndexesBefore, r.numIndexesAfter);
  assert.equal((await indexes(coll)).length, 2);
});

h.test('A6: a TTL index over an existing non-TTL index on the same key with another name is refused with 85', async () => {
  const { coll } = await freshColl('a6b');
  await coll.createIndex({ at: 1 });
  const before = JSON.stringify(await indexes(coll));
  const err = await h.expectCode(coll.createIndex({ at: 1 }, { name: 'at_ttl', expireAfterSeconds: 60 }), 85);
  assert.equal(err.codeName, 'IndexOptionsConflict');
  assert.equal(JSON.stringify(await indexes(coll)), before);
});

h.test('A6: a TTL index over an existing non-TTL index with the same name and key is refused with 85', async () => {
  const { coll } = await freshColl('a6c');
  await coll.createIndex({ at: 1 });
  const before = JSON.stringify(await indexes(coll));
  await h.expectCode(coll.createIndex({ at: 1 }, { expireAfterSeconds: 60 }), 85,
    /An equivalent index already exists with the same name but different options/);
  assert.equal(JSON.stringify(await indexes(coll)), before);
});

h.test('A6: same name with another key is refused with 86 IndexKeySpecsConflict', async () => {
  const { coll } = await freshColl('a6d');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 100 });
  const before = JSON.stringify(await indexes(coll));
  const err = await h.expectCode(coll.createIndex({ other: 1 }, { name: 'at_1', expireAfterSeconds: 100 }), 86);
  assert.equal(err.codeName, 'IndexKeySpecsConflict');
  assert.equal(JSON.stringify(await indexes(coll)), before);
});

h.test('A7: a TTL index built on a populated collection deletes the already-expired documents soon after the build', async () => {
  const { coll } = await freshColl('a7');
  const now = Date.now();
  const docs = [];
  for (let i = 0; i < 500; i++) docs.push({ _id: i, at: new Date(now - 3600000 - i * 1000), kind: 'old' });
  for (let i = 500; i < 550; i++) docs.push({ _id: i, at: new Date(now + 3600000), kind: 'new' });
  await coll.insertMany(docs);
  assert.equal(await coll.countDocuments(), 550);
  const t0 = Date.now();
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 60 });
  await h.waitFor(async () => (await coll.countDocuments({ kind: 'old' })) === 0,
    'old documents deleted after the index build', 10000);
  console.log(`A7: 500 pre-expired documents deleted ${Date.now() - t0} ms after createIndex`);
  assert.equal(await coll.countDocuments({ kind: 'new' }), 50);
});

h.test('C7: a TTL index answers queries: explain shows IXSCAN with the TTL index name', async () => {
  const { db, coll } = await freshColl('c7');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  const base = Date.now();
  await coll.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, at: new Date(base + i * 1000) })));
  const ex = await coll.find({ at: { $gte: new Date(base + 10000) } }).explain('queryPlanner');
  const ixscan = findStage(ex.queryPlanner.winningPlan, 'IXSCAN');
  assert.ok(ixscan, `no IXSCAN in ${JSON.stringify(ex.queryPlanner.winningPlan)}`);
  assert.equal(ixscan.indexName, 'at_1');
  assert.deepEqual(ixscan.keyPattern, { at: 1 });
  const got = await coll.find({ at: { $gte: new Date(base + 10000) } }).toArray();
  assert.equal(got.length, 10);
  const sorted = await coll.find({}).sort({ at: -1 }).limit(3).toArray();
  assert.deepEqual(sorted.map((d) => d._id), [19, 18, 17]);
  const hinted = await db.command({ explain: { find: 'c', filter: {}, hint: 'at_1' }, verbosity: 'queryPlanner' });
  assert.ok(findStage(hinted.queryPlanner.winningPlan, 'IXSCAN'), 'hint by TTL index name uses it');
});
