'use strict';
// Secondary indexes: management commands and their errors, and a differential
// check that queries answer identically with and without indexes.
const assert = require('node:assert/strict');
const { ObjectId, Long, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* Deterministic pseudo-random generator so failures are reproducible. */
function rng(seed) {
  let x = seed >>> 0;
  return () => { x = (x * 1664525 + 1013904223) >>> 0; return x / 4294967296; };
}

function makeDocs(n) {
  const r = rng(42);
  const pick = (arr) => arr[Math.floor(r() * arr.length)];
  const docs = [];
  for (let i = 0; i < n; i++) {
    const d = { _id: i };
    const kind = r();
    // a: mostly small ints, sometimes other numeric types, strings, null, missing or arrays.
    if (kind < 0.5) d.a = Math.floor(r() * 20);
    else if (kind < 0.6) d.a = Math.floor(r() * 20) + 0.5;
    else if (kind < 0.65) d.a = Long.fromNumber(Math.floor(r() * 20));
    else if (kind < 0.7) d.a = Decimal128.fromString(String(Math.floor(r() * 20)));
    else if (kind < 0.8) d.a = pick(['x', 'y', 'z', 'abc', '']);
    else if (kind < 0.85) d.a = null;
    else if (kind < 0.93) d.a = [Math.floor(r() * 20), Math.floor(r() * 20)];
    // else missing
    d.b = pick(['red', 'green', 'blue', null, 1, 2]);
    if (r() < 0.5) d.c = { d: Math.floor(r() * 5), e: pick(['p', 'q']) };
    if (r() < 0.3) d.arr = [{ k: Math.floor(r() * 4), v: pick(['s', 't']) }, { k: Math.floor(r() * 4) }];
    d.t = new Date(1700000000000 + Math.floor(r() * 1000) * 1000);
    docs.push(d);
  }
  return docs;
}

const QUERIES = [
  {}, { a: 5 }, { a: 5.5 }, { a: { $gt: 10 } }, { a: { $gte: 3, $lt: 7 } }, { a: { $lte: 2 } },
  { a: { $in: [1, 2, 'x', null] } }, { a: { $nin: [1, 2, 3] } }, { a: null }, { a: { $ne: null } },
  { a: { $exists: false } }, { a: { $exists: true } }, { a: { $type: 'string' } }, { a: { $gt: 'a' } },
  { a: { $gte: '' } }, { a: /^a/ }, { a: { $ne: 5 } }, { a: { $not: { $gt: 5 } } },
  { a: 5, b: 'red' }, { b: 'red', a: { $gt: 5 } }, { b: { $in: ['red', 'blue'] }, a: { $lt: 10 } },
  { $or: [{ a: 1 }, { b: 'green' }] }, { $or: [{ a: { $lt: 3 } }, { a: { $gt: 17 } }] },
  { 'c.d': 3 }, { 'c.d': { $gte: 2 }, 'c.e': 'p' }, { 'c.e': 'q', b: null },
  { 'arr.k': 2 }, { arr: { $elemMatch: { k: 2, v: 's' } } }, { 'arr.k': { $gt: 1, $lt: 3 } },
  { t: { $gte: new Date(1700000500000) } }, { a: { $elemMatch: { $gt: 15 } } }, { a: { $all: [1, 2] } },
  { _id: { $in: [5, 50, 500, 5000] } }, { _id: { $gte: 100, $lt: 120 } },
];

const INDEXES = [
  { a: 1 }, { b: 1, a: -1 }, { 'c.d': 1, 'c.e': 1 }, { 'arr.k': 1 }, { t: -1 },
];

async function compare(plain, indexed, q, opts = {}) {
  const sort = opts.sort || { _id: 1 };
  let p = plain.find(q).sort(sort);
  let i = indexed.find(q).sort(sort);
  if (opts.limit) { p = p.limit(opts.limit); i = i.limit(opts.limit); }
  if (opts.skip) { p = p.skip(opts.skip); i = i.skip(opts.skip); }
  const a = (await p.toArray()).map((d) => d._id);
  const b = (await i.toArray()).map((d) => d._id);
  assert.deepEqual(b, a, `query ${JSON.stringify(q)} sort ${JSON.stringify(sort)}: indexed result differs`);
  const n = await indexed.countDocuments(q);
  assert.equal(n, await plain.countDocuments(q), `count ${JSON.stringify(q)}`);
}

let plain; let indexed;

h.test('set up an indexed and an unindexed copy of the same data', async () => {
  const db = srv.freshDb('diff');
  plain = db.collection('plain');
  indexed = db.collection('indexed');
  const docs = makeDocs(2000);
  await plain.insertMany(docs.map((d) => ({ ...d })));
  // Create some indexes before and some after the insert.
  await indexed.createIndex(INDEXES[0]);
  await indexed.createIndex(INDEXES[1]);
  await indexed.insertMany(docs.map((d) => ({ ...d })));
  for (const spec of INDEXES.slice(2)) await indexed.createIndex(spec);
  assert.equal((await indexed.indexes()).length, INDEXES.length + 1);
});

h.test('every query returns the same documents with and without indexes', async () => {
  for (const q of QUERIES) await compare(plain, indexed, q);
});

h.test('sorts on indexed fields return the same order (ties broken by _id)', async () => {
  for (const sort of [{ a: 1, _id: 1 }, { a: -1, _id: 1 }, { b: 1, a: -1, _id: 1 }, { t: -1, _id: 1 }, { 'c.d': 1, 'c.e': 1, _id: -1 }]) {
    await compare(plain, indexed, {}, { sort });
    await compare(plain, indexed, { a: { $gte: 3 } }, { sort, limit: 25, skip: 5 });
  }
});

h.test('after updates and deletes the indexed copy still agrees', async () => {
  for (const c of [plain, indexed]) {
    // Arrays are excluded: $inc on an array would fail part-way in an order-dependent way.
    await c.updateMany({ $and: [{ a: { $lt: 5 } }, { a: { $not: { $type: 'array' } } }] }, { $inc: { a: 100 } });
    await c.updateMany({ b: 'red' }, { $set: { 'c.d': 9 }, $unset: { t: '' } });
    await c.deleteMany({ a: { $type: 'string' } });
    await c.updateMany({ 'arr.k': 1 }, { $set: { 'arr.$[].k': 7 } });
    await c.replaceOne({ _id: 10 }, { a: 3, b: 'blue', c: { d: 3, e: 'p' } });
  }
  for (const q of QUERIES) await compare(plain, indexed, q);
  await compare(plain, indexed, { a: { $gte: 100 } });
  await compare(plain, indexed, { 'c.d': 9 });
  await compare(plain, indexed, { 'arr.k': 7 });
});

h.test('validate agrees with the index contents after the churn', async () => {
  const r = await srv.client.db(indexed.dbName).command({ validate: 'indexed' });
  assert.equal(r.valid, true, JSON.stringify(r.errors));
  const n = await indexed.countDocuments();
  assert.equal(Number(r.nrecords), n);
  assert.equal(Number(r.keysPerIndex._id_), n);
});

h.test('hint with an unknown index fails with BadValue (2)', async () => {
  await h.expectCode(indexed.find({ a: 1 }).hint({ nosuch: 1 }).toArray(), 2);
  const viaHint = await indexed.find({ a: { $gte: 100 } }).hint({ a: 1 }).sort({ _id: 1 }).toArray();
  assert.deepEqual(viaHint.map((d) => d._id), (await plain.find({ a: { $gte: 100 } }).sort({ _id: 1 }).toArray()).map((d) => d._id));
});

h.test('unique index creation fails on existing duplicates with 11000', async () => {
  const c = srv.freshDb('uniqdup').collection('c');
  await c.insertMany([{ a: 1 }, { a: 1 }]);
  await h.expectCode(c.createIndex({ a: 1 }, { unique: true }), 11000);
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_']);
});

h.test('unique index treats missing and null as the same key', async () => {
  const c = srv.freshDb('uniqnull').collection('c');
  await c.createIndex({ a: 1 }, { unique: true });
  await c.insertOne({ _id: 1 });
  const e = await h.expectCode(c.insertOne({ _id: 2, a: null }), 11000);
  assert.match(e.errmsg, /dup key: \{ a: null \}/);
});

h.test('unique compound index allows partial overlap', async () => {
  const c = srv.freshDb('uniqcomp').collection('c');
  await c.createIndex({ a: 1, b: 1 }, { unique: true });
  await c.insertMany([{ a: 1, b: 1 }, { a: 1, b: 2 }, { a: 2, b: 1 }]);
  const e = await h.expectCode(c.insertOne({ a: 1, b: 2 }), 11000);
  assert.match(e.errmsg, /index: a_1_b_1 dup key: \{ a: 1, b: 2 \}/);
  assert.deepEqual(e.keyPattern, { a: 1, b: 1 });
  assert.deepEqual(e.keyValue, { a: 1, b: 2 });
});

h.test('unique index: an update that would create a duplicate fails and changes nothing', async () => {
  const c = srv.freshDb('uniqupd').collection('c');
  await c.createIndex({ e: 1 }, { unique: true });
  await c.insertMany([{ _id: 1, e: 'a' }, { _id: 2, e: 'b' }]);
  await h.expectCode(c.updateOne({ _id: 2 }, { $set: { e: 'a' } }), 11000);
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, e: 'a' }, { _id: 2, e: 'b' }]);
  assert.equal(await c.countDocuments({ e: 'a' }), 1);
});

h.test('sparse and partial indexes', async () => {
  const c = srv.freshDb('sparse').collection('c');
  await c.createIndex({ s: 1 }, { unique: true, sparse: true });
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3, s: 1 }]);
  await h.expectCode(c.insertOne({ s: 1 }), 11000);
  await c.createIndex({ p: 1 }, { unique: true, partialFilterExpression: { p: { $gt: 10 } } });
  await c.insertMany([{ p: 5 }, { p: 5 }, { p: 11 }]);
  await h.expectCode(c.insertOne({ p: 11 }), 11000);
  const idx = await c.indexes();
  assert.equal(idx.find((i) => i.name === 's_1').sparse, true);
  assert.deepEqual(idx.find((i) => i.name === 'p_1').partialFilterExpression, { p: { $gt: 10 } });
});

h.test('index specification conflicts: 85 and 86', async () => {
  const c = srv.freshDb('idxconf').collection('c');
  await c.createIndex({ a: 1 }, { name: 'first' });
  // Same key pattern, different name.
  await h.expectCode(c.createIndex({ a: 1 }, { name: 'second' }), 85);
  // Same name, different key pattern.
  await h.expectCode(c.createIndex({ b: 1 }, { name: 'first' }), 86);
  // Identical spec again is a no-op.
  assert.equal(await c.createIndex({ a: 1 }, { name: 'first' }), 'first');
});

h.test('invalid index specifications are refused', async () => {
  const c = srv.freshDb('idxbad').collection('c');
  await c.insertOne({});
  const db = srv.client.db(c.dbName);
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: {}, name: 'e' }] }), [67, 2]);
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: { a: 'nosuchtype' }, name: 'x' }] }), [67, 85]);
});

h.test('dropIndexes "*" drops all but _id; listIndexes on a missing collection fails with 26', async () => {
  const db = srv.freshDb('dropall');
  const c = db.collection('c');
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1 });
  await c.dropIndexes();
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_']);
  await h.expectCode(db.command({ listIndexes: 'missing' }), 26);
});

h.test('a multikey index over arrays of documents answers $elemMatch and dotted queries', async () => {
  const c = srv.freshDb('multikey').collection('c');
  await c.createIndex({ 'items.sku': 1, 'items.qty': 1 });
  await c.insertMany([
    { _id: 1, items: [{ sku: 'a', qty: 1 }, { sku: 'b', qty: 5 }] },
    { _id: 2, items: [{ sku: 'a', qty: 5 }] },
    { _id: 3, items: { sku: 'a', qty: 1 } },
  ]);
  const ids = async (q) => (await c.find(q).sort({ _id: 1 }).toArray()).map((d) => d._id);
  assert.deepEqual(await ids({ 'items.sku': 'a', 'items.qty': 5 }), [1, 2]);
  assert.deepEqual(await ids({ items: { $elemMatch: { sku: 'a', qty: 5 } } }), [2]);
  assert.deepEqual(await ids({ 'items.sku': 'a', 'items.qty': { $lt: 2 } }), [1, 3]);
});

h.test('ObjectId _id range queries', async () => {
  const c = srv.freshDb('oidrange').collection('c');
  const ids = Array.from({ length: 10 }, (_, i) => ObjectId.createFromTime(1700000000 + i));
  await c.insertMany(ids.map((_id, i) => ({ _id, i })));
  const r = await c.find({ _id: { $gt: ids[3], $lte: ids[6] } }).sort({ _id: 1 }).toArray();
  assert.deepEqual(r.map((d) => d.i), [4, 5, 6]);
});
