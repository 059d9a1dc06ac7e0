'use strict';
/*
 * Hashed indexes ({f: 'hashed'}), as MongoDB 8.0: keys are
 * BSONElementHasher::hash64 (mongod's known values below), the spec rules
 * and their codes, equality / $in through point bounds on the hash with a
 * FETCH re-checking the filter, ranges by collection scan, compound hashed
 * indexes, arrays refused, Mongoose's syncIndexes, and persistence across a
 * clean restart and kill -9.
 */
const assert = require('node:assert/strict');
const mongoose = require('mongoose');
const { Long, Decimal128, Double, Int32 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'enableTestCommands=1'] });
const J = { writeConcern: { w: 1, j: true } };

/* The IXSCAN of an explained find, or null. */
function ixscan(plan) {
  if (plan == null) return null;
  if (plan.stage === 'IXSCAN') return plan;
  return ixscan(plan.inputStage) || (plan.inputStages || []).map(ixscan).find(Boolean) || null;
}

async function winning(c, filter, opts = {}) {
  let cur = c.find(filter);
  if (opts.hint) cur = cur.hint(opts.hint);
  return (await cur.explain()).queryPlanner.winningPlan;
}

const ids = (docs) => docs.map((d) => d._id).sort((a, b) => a - b);

h.test('known hash values: convertShardKeyToHashed and _hashBSONElement answer mongod\'s', async () => {
  const admin = srv.client.db('admin');
  const conv = async (v) => (await admin.command({ convertShardKeyToHashed: v })).out;
  // hasher.cpp's startup self-test: hash64 of {check: 42}'s element, seed 0.
  assert.deepEqual(await conv(42), Long.fromString('-944302157085130861'));
  assert.deepEqual(await conv(new Long(42)), Long.fromString('-944302157085130861'));
  assert.deepEqual(await conv(42.0), Long.fromString('-944302157085130861'));
  // MongoDB's $toHashedIndexKey documentation example, seed 0.
  assert.deepEqual(await conv('string to hash'), Long.fromString('763543691661428748'));
  // jstests/core/hash_function_invariance (mongod's _hashBSONElement with seed 1).
  const cases = [
    ['hashthis', '6271151123721111923'],
    [Math.pow(2, 63), '5744114172487291558'],
    [Math.pow(2, 63) + Math.pow(2, 11), '1136124329541638701'],
    [Infinity, '1136124329541638701'],
    [Math.pow(2, 63) - Math.pow(2, 10), '-3954856262017896439'],
    [-Math.pow(2, 63), '5744114172487291558'],
    [-(Math.pow(2, 63) - Math.pow(2, 10)), '-1762411739488908479'],
    [-Infinity, '5744114172487291558'],
    [0, '5574369198691456941'],
    [new Long(0), '5574369198691456941'],
    [NaN, '5574369198691456941'],
    [{ a: 1, b: 2 }, '-7076810813311352857'],
    [{ a: Math.pow(2, 63), b: NaN }, '1223292051903137684'],
  ];
  for (const [v, want] of cases) {
    const r = await admin.command({ _hashBSONElement: v, seed: 1 });
    assert.deepEqual(r.out, Long.fromString(want), `hash of ${String(v)}`);
    assert.equal(r.seed, 1);
  }
  await assert.rejects(admin.command({ _hashBSONElement: 1, seed: 'x' }), (e) => e.code === 2);
});

h.test('create, list, drop; the refusals with mongod\'s codes', async () => {
  const c = srv.freshDb('hcreate').collection('c');
  assert.equal(await c.createIndex({ a: 'hashed' }), 'a_hashed');
  assert.equal(await c.createIndex({ _id: 'hashed' }), '_id_hashed');
  assert.equal(await c.createIndex({ x: 1, y: 'hashed', z: -1 }), 'x_1_y_hashed_z_-1');
  assert.equal(await c.createIndex({ s: 'hashed' }, { sparse: true }), 's_hashed');
  assert.equal(await c.createIndex({ p: 'hashed' }, { partialFilterExpression: { q: { $gt: 1 } } }), 'p_hashed');
  const list = await c.listIndexes().toArray();
  assert.deepEqual(list.find((i) => i.name === 'a_hashed'), { v: 2, key: { a: 'hashed' }, name: 'a_hashed' });
  assert.deepEqual(list.find((i) => i.name === 's_hashed'), { v: 2, key: { s: 'hashed' }, name: 's_hashed', sparse: true });
  // The same index again is no error.
  assert.equal(await c.createIndex({ a: 'hashed' }), 'a_hashed');

  await assert.rejects(c.createIndex({ u: 'hashed' }, { unique: true }), (e) => e.code === 16764 &&
    e.message === 'Currently hashed indexes cannot guarantee uniqueness. Use a regular index.');
  await assert.rejects(c.createIndex({ m: 'hashed', n: 'hashed' }), (e) => e.code === 31303 &&
    e.message === 'A maximum of one index field is allowed to be hashed but found 2 for \'key\' { m: "hashed", n: "hashed" }');
  await assert.rejects(c.createIndex({ t: 'hashed', w: '2dsphere' }), (e) => e.code === 67);

  await c.dropIndex('a_hashed');
  assert.equal((await c.listIndexes().toArray()).some((i) => i.name === 'a_hashed'), false);
  await c.dropIndex({ x: 1, y: 'hashed', z: -1 });
  assert.equal((await c.listIndexes().toArray()).some((i) => i.name === 'x_1_y_hashed_z_-1'), false);
});

h.test('hashed key field names are checked as any index\'s (validateKeyPattern): "$" prefixes, empty parts, _fts', async () => {
  const c = srv.freshDb('hfields').collection('c');
  const cases = [
    [{ '$**': 'hashed' }, 'Index key contains an illegal field name: field name starts with \'$\'.'],
    [{ $a: 'hashed' }, 'Index key contains an illegal field name: field name starts with \'$\'.'],
    [{ 'a.$b': 'hashed' }, 'Index key contains an illegal field name: field name starts with \'$\'.'],
    [{ 'a..b': 'hashed' }, 'Index keys cannot contain an empty field.'],
    [{ _fts: 'hashed' }, 'Index key contains an illegal field name: \'_fts\''],
  ];
  for (const [key, why] of cases) {
    const e = await h.expectCode(c.createIndex(key), 67);
    assert.ok(e.message.endsWith(` :: caused by :: ${why}`), e.message);
  }
  assert.equal(await c.createIndex({ 'ref.$id': 'hashed' }), 'ref.$id_hashed');
  assert.equal(await c.createIndex({ 'a.b': 'hashed' }), 'a.b_hashed');
  assert.equal((await c.listIndexes().toArray()).length, 3);
});

h.test('equality and $in find exactly the right documents, numbers of every type alike', async () => {
  const c = srv.freshDb('heq').collection('c');
  await c.createIndex({ a: 'hashed' });
  await c.insertMany([
    { _id: 1, a: 1 }, { _id: 2, a: new Double(1.0) }, { _id: 3, a: new Long(1) }, { _id: 4, a: Decimal128.fromString('1') },
    { _id: 5, a: 1.5 }, { _id: 6, a: 2 }, { _id: 7, a: 'x' }, { _id: 8, a: null }, { _id: 9 },
    { _id: 10, a: { b: 1 } }, { _id: 11, a: 1.9 }, { _id: 12, a: Decimal128.fromString('1.5') },
  ]);
  assert.deepEqual(ids(await c.find({ a: 1 }).toArray()), [1, 2, 3, 4]);
  assert.deepEqual(ids(await c.find({ a: new Long(1) }).toArray()), [1, 2, 3, 4]);
  assert.deepEqual(ids(await c.find({ a: new Int32(2) }).toArray()), [6]);
  // 1.5 and 1.9 hash as 1 (truncated): the FETCH's filter keeps only the equal values.
  assert.deepEqual(ids(await c.find({ a: 1.5 }).toArray()), [5, 12]);
  assert.deepEqual(ids(await c.find({ a: { $in: [2, 'x', { b: 1 }] } }).toArray()), [6, 7, 10]);
  assert.deepEqual(ids(await c.find({ a: null }).toArray()), [8, 9]);
  assert.deepEqual(ids(await c.find({ a: { $eq: 'x' } }).toArray()), [7]);
  assert.equal(await c.countDocuments({ a: 1 }), 4);
  assert.deepEqual((await c.distinct('a', { a: { $in: [2, 'x'] } })).sort(), [2, 'x']);

  const plan = await winning(c, { a: 1 });
  assert.equal(plan.stage, 'FETCH');
  assert.ok(plan.filter, 'the FETCH re-checks the filter (hashes collide)');
  const ix = ixscan(plan);
  assert.equal(ix.indexName, 'a_hashed');
  assert.deepEqual(ix.keyPattern, { a: 'hashed' });
  assert.equal(ix.isMultiKey, false);
  const h1 = (await srv.client.db('admin').command({ convertShardKeyToHashed: 1 })).out.toString();
  assert.deepEqual(ix.indexBounds, { a: [`[${h1}, ${h1}]`] });
  const inIx = ixscan(await winning(c, { a: { $in: [1, new Long(1), 2] } }));
  assert.equal(inIx.indexBounds.a.length, 2, JSON.stringify(inIx.indexBounds));

  // Updates and deletes through it.
  const u = await c.updateMany({ a: 2 }, { $set: { seen: true } });
  assert.equal(u.modifiedCount, 1);
  assert.deepEqual(ids(await c.find({ a: 2, seen: true }).toArray()), [6]);
  const d = await c.deleteMany({ a: 'x' });
  assert.equal(d.deletedCount, 1);
  assert.deepEqual(ids(await c.find({ a: 'x' }).toArray()), []);
  const v = await c.s.db.command({ validate: c.collectionName });
  assert.equal(v.valid, true, JSON.stringify(v));
});

h.test('ranges, regexes, $exists and sorts do not use the hash: collection scan, still right', async () => {
  const c = srv.freshDb('hrange').collection('c');
  await c.createIndex({ a: 'hashed' });
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 5 }, { _id: 3, a: 10 }, { _id: 4, a: 'abc' }, { _id: 5 }]);
  assert.deepEqual(ids(await c.find({ a: { $gt: 1, $lte: 10 } }).toArray()), [2, 3]);
  assert.equal(ixscan(await winning(c, { a: { $gt: 1, $lte: 10 } })), null);
  assert.equal((await winning(c, { a: { $gt: 1 } })).stage, 'COLLSCAN');
  assert.deepEqual(ids(await c.find({ a: /^ab/ }).toArray()), [4]);
  assert.equal(ixscan(await winning(c, { a: /^ab/ })), null);
  assert.equal(ixscan(await winning(c, { a: { $exists: false } })), null);
  assert.deepEqual(ids(await c.find({ a: { $exists: false } }).toArray()), [5]);
  assert.deepEqual((await c.find({}).sort({ a: 1 }).toArray()).map((x) => x._id), [5, 1, 2, 3, 4]);
  // A hint by name or by key pattern scans the whole index.
  assert.deepEqual(ids(await c.find({ a: { $gt: 1 } }).hint('a_hashed').toArray()), [2, 3]);
  assert.equal(ixscan(await winning(c, { a: { $gt: 1 } }, { hint: { a: 'hashed' } })).indexName, 'a_hashed');
  assert.equal(ixscan(await winning(c, { a: 5 }, { hint: 'a_hashed' })).indexName, 'a_hashed');
});

h.test('compound hashed indexes: the non-hashed prefix bounds a range, the hash points', async () => {
  const c = srv.freshDb('hcomp').collection('c');
  await c.createIndex({ a: 1, b: 'hashed', c: -1 });
  const docs = [];
  for (let i = 0; i < 50; i++) docs.push({ _id: i, a: i % 10, b: i % 7, c: i });
  await c.insertMany(docs);
  const want = (f) => docs.filter(f).map((d) => d._id);
  assert.deepEqual(ids(await c.find({ a: { $gt: 2, $lt: 5 }, b: 0 }).toArray()), want((d) => d.a > 2 && d.a < 5 && d.b === 0));
  const ix = ixscan(await winning(c, { a: 3, b: { $in: [1, 2] } }));
  assert.equal(ix.indexName, 'a_1_b_hashed_c_-1');
  assert.equal(ix.indexBounds.a[0], '[3, 3]');
  assert.equal(ix.indexBounds.b.length, 2);
  assert.deepEqual(ix.indexBounds.c, ['[MaxKey, MinKey]']);
  assert.deepEqual(ids(await c.find({ a: 3, b: { $in: [1, 2] } }).toArray()), want((d) => d.a === 3 && [1, 2].includes(d.b)));
  const ix2 = ixscan(await winning(c, { a: { $gte: 8 } }));
  assert.equal(ix2.indexName, 'a_1_b_hashed_c_-1');
  assert.deepEqual(ix2.indexBounds.b, ['[MinKey, MaxKey]']);

  const d = srv.freshDb('hcomp2').collection('c');
  await d.createIndex({ b: 'hashed', c: -1 });
  await d.insertMany(docs);
  assert.deepEqual(ids(await d.find({ b: 3, c: { $gte: 20 } }).toArray()), want((x) => x.b === 3 && x.c >= 20));
  const ix3 = ixscan(await winning(d, { b: 3, c: { $gte: 20 } }));
  assert.equal(ix3.indexName, 'b_hashed_c_-1');
  assert.deepEqual(ix3.indexBounds.c, ['[inf.0, 20]']);
});

h.test('arrays are refused at insert, update and index build (16766)', async () => {
  const c = srv.freshDb('harr').collection('c');
  await c.createIndex({ a: 'hashed' });
  await c.createIndex({ 'x.y': 1, k: 'hashed' });
  await assert.rejects(c.insertOne({ a: [1, 2] }), (e) => e.code === 16766 &&
    e.message === 'Error: hashed indexes do not currently support array values. Found array at path: a');
  await assert.rejects(c.insertOne({ x: [{ y: 1 }] }), (e) => e.code === 16766 && /Found array at path: x$/.test(e.message));
  await c.insertOne({ _id: 1, a: 1 });
  await assert.rejects(c.updateOne({ _id: 1 }, { $set: { a: [3] } }), (e) => e.code === 16766);
  assert.deepEqual(await c.find({}).toArray(), [{ _id: 1, a: 1 }]);

  const d = srv.freshDb('harr2').collection('c');
  await d.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: [1] }]);
  await assert.rejects(d.createIndex({ a: 'hashed' }), (e) => e.code === 16766);
  assert.equal((await d.listIndexes().toArray()).length, 1);
});

h.test('a Mongoose schema with a hashed index: syncIndexes creates it and queries use it', async () => {
  const db = srv.freshDb('hmongoose');
  const conn = await mongoose.createConnection(srv.uri, { dbName: db.databaseName }).asPromise();
  try {
    const schema = new mongoose.Schema({ tenant: String, n: Number });
    schema.index({ tenant: 'hashed' });
    const M = conn.model('Item', schema);
    await M.syncIndexes();
    const names = (await M.listIndexes()).map((i) => i.name).sort();
    assert.deepEqual(names, ['_id_', 'tenant_hashed']);
    await M.create([{ tenant: 'a', n: 1 }, { tenant: 'b', n: 2 }, { tenant: 'a', n: 3 }]);
    assert.deepEqual((await M.find({ tenant: 'a' }).sort({ n: 1 }).lean()).map((x) => x.n), [1, 3]);
    await M.syncIndexes(); // idempotent
    assert.equal((await M.listIndexes()).length, 2);
  } finally {
    await conn.close();
  }
});

for (const kill9 of [false, true]) {
  const how = kill9 ? 'kill -9' : 'clean restart';
  h.test(`a hashed index persists across a ${how} and queries still use it`, async () => {
    const dbName = srv.freshDb('hpersist').databaseName;
    let c = srv.client.db(dbName).collection('c');
    await c.createIndex({ a: 'hashed' });
    await c.insertMany([{ _id: 1, a: 'k1' }, { _id: 2, a: 'k2' }, { _id: 3, a: 7 }], J);
    await srv.server.restart({ kill9 });
    await srv.reconnect();
    c = srv.client.db(dbName).collection('c');
    assert.ok((await c.listIndexes().toArray()).some((i) => i.name === 'a_hashed'));
    assert.deepEqual(ids(await c.find({ a: 'k2' }).toArray()), [2]);
    assert.deepEqual(ids(await c.find({ a: { $in: [7, 'k1'] } }).toArray()), [1, 3]);
    assert.equal(ixscan(await winning(c, { a: 'k2' })).indexName, 'a_hashed');
    await c.insertOne({ _id: 4, a: 'k2' }, J);
    assert.deepEqual(ids(await c.find({ a: 'k2' }).toArray()), [2, 4]);
    const v = await srv.client.db(dbName).command({ validate: 'c' });
    assert.equal(v.valid, true, JSON.stringify(v));
  });
}
