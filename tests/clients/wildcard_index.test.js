'use strict';
/*
 * Wildcard indexes ({'$**': 1}, {'a.b.$**': 1}, wildcardProjection), as
 * MongoDB 8.0: creation and listIndexes' shape, each refusal with mongod's
 * code, queries on one path through [path, value] bounds + FETCH returning
 * exactly what a collection scan returns (randomized documents with nested
 * objects and arrays, every predicate compared against hint {$natural: 1}),
 * explain, upkeep across insert / update / delete and an index built over
 * existing documents, dropIndex, Mongoose's schema.index({'meta.$**': 1}) +
 * syncIndexes, and persistence across a clean restart and kill -9.
 */
const assert = require('node:assert/strict');
const mongoose = require('mongoose');
const { Long, Decimal128, Double } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();
const J = { writeConcern: { w: 1, j: true } };

/* The IXSCAN of an explained plan, or null. */
function ixscan(plan) {
  if (plan == null) return null;
  if (plan.stage === 'IXSCAN') return plan;
  return ixscan(plan.inputStage) || (plan.inputStages || []).map(ixscan).find(Boolean) || null;
}

/* The IXSCAN of a wildcard index in an explained plan, or null. */
function wildScan(plan) {
  const ix = ixscan(plan);
  return ix && ix.indexName.includes('$**') ? ix : null;
}

async function winning(c, filter, opts = {}) {
  let cur = c.find(filter);
  if (opts.hint) cur = cur.hint(opts.hint);
  return (await cur.explain()).queryPlanner.winningPlan;
}

const ids = (docs) => docs.map((d) => d._id).sort((a, b) => a - b);

/* A deterministic pseudo-random generator (mulberry32), so a failure can be replayed. */
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

h.test('create and list: names, keys and wildcardProjection as mongod shows them', async () => {
  const c = srv.freshDb('wcreate').collection('c');
  assert.equal(await c.createIndex({ '$**': 1 }), '$**_1');
  assert.equal(await c.createIndex({ 'a.b.$**': -1 }), 'a.b.$**_-1');
  assert.equal(await c.createIndex({ '$**': -1 }, { name: 'proj', wildcardProjection: { a: 1, 'c.d': true, _id: 0 } }), 'proj');
  assert.equal(await c.createIndex({ 'p.$**': 1 }, { partialFilterExpression: { kind: 'x' } }), 'p.$**_1');
  assert.equal(await c.createIndex({ x: 1, '$**': 1 }, { wildcardProjection: { x: 0 } }), 'x_1_$**_1');
  assert.equal(await c.createIndex({ 'q.$**': 1, r: -1 }), 'q.$**_1_r_-1');
  // The same index again is no error.
  assert.equal(await c.createIndex({ '$**': 1 }), '$**_1');
  const list = await c.listIndexes().toArray();
  const byName = (n) => list.find((i) => i.name === n);
  assert.deepEqual(byName('$**_1'), { v: 2, key: { '$**': 1 }, name: '$**_1' });
  assert.deepEqual(byName('a.b.$**_-1'), { v: 2, key: { 'a.b.$**': -1 }, name: 'a.b.$**_-1' });
  assert.deepEqual(byName('proj'), { v: 2, key: { '$**': -1 }, name: 'proj', wildcardProjection: { a: 1, 'c.d': true, _id: 0 } });
  assert.deepEqual(byName('p.$**_1'), { v: 2, key: { 'p.$**': 1 }, name: 'p.$**_1', partialFilterExpression: { kind: 'x' } });
  assert.deepEqual(byName('x_1_$**_1'), { v: 2, key: { x: 1, '$**': 1 }, name: 'x_1_$**_1', wildcardProjection: { x: 0 } });

  await c.dropIndex('$**_1');
  await c.dropIndex({ 'a.b.$**': -1 });
  const left = (await c.listIndexes().toArray()).map((i) => i.name).sort();
  assert.deepEqual(left, ['_id_', 'p.$**_1', 'proj', 'q.$**_1_r_-1', 'x_1_$**_1']);
});

h.test('refusals carry mongod\'s codes and messages', async () => {
  const db = srv.freshDb('wrefuse');
  await db.createCollection('c');
  const create = (spec) => db.command({ createIndexes: 'c', indexes: [{ name: 'w', ...spec }] });
  const cases = [
    [{ key: { '$**': 1 }, unique: true }, 67, /^Index type 'wildcard' does not support the 'unique' option$/],
    [{ key: { '$**': 1 }, sparse: true }, 67, /^Index type 'wildcard' does not support the 'sparse' option$/],
    [{ key: { '$**': 1 }, expireAfterSeconds: 10 }, 67,
      /^cannot make a TTL index :: caused by :: Index type 'wildcard' does not support the 'expireAfterSeconds' option$/],
    [{ key: { a: 1 }, wildcardProjection: { a: 1 } }, 2, /^The field 'wildcardProjection' is only allowed in 'wildcard' indexes$/],
    [{ key: { 'a.$**': 1 }, wildcardProjection: { a: 1 } }, 9, /only allowed when 'key' is \{"\$\*\*": ±1\}/],
    [{ key: { '$**': 1 }, wildcardProjection: {} }, 9, /^The 'wildcardProjection' field can't be an empty object$/],
    [{ key: { '$**': 1 }, wildcardProjection: 5 }, 14, /must be a non-empty object, but got int$/],
    [{ key: { '$**': 1 }, wildcardProjection: { a: 1, b: 0 } }, 31254,
      /^Failed to parse projection: wildcardProjection :: caused by :: Cannot do exclusion on field b in inclusion projection$/],
    [{ key: { '$**': 1 }, wildcardProjection: { a: 1, 'a.b': 1 } }, 31249, /^Failed to parse projection: wildcardProjection :: caused by :: Path collision at a\.b/],
    [{ key: { '$**': 1 }, wildcardProjection: { a: { $slice: 1 } } }, 2, /cannot use computed fields/],
    [{ key: { a: 1, '$**': 1 } }, 67, /^Compound wildcard indexes on all fields must also specify 'wildcardProjection' option$/],
    [{ key: { '$**': 1, 'a.$**': 1 } }, 7246201, /^Index Key can contain only one wildcard index field$/],
    [{ key: { 'a.$**': 1, 'a.b': 1 } }, 7246204, /'a.b' is overlapping with the wildcard index field/],
    [{ key: { x: 1, '$**': 1 }, wildcardProjection: { y: 0 } }, 7246209, /must exclude all regular index fields, however 'x'/],
    [{ key: { x: 1, '$**': 1 }, wildcardProjection: { a: 0 } }, 7246210, /must exclude all regular index fields, however 'x'/],
    [{ key: { x: 1, '$**': 1 }, wildcardProjection: { x: 0, a: 0, 'a.b': 0 } }, 7246200, /cannot overlap, however 'a' is overlapped with 'a.b/],
    [{ key: { x: 1, '$**': 1 }, wildcardProjection: { x: 0, a: 1 } }, 7246211, /^Inclusion and exclusion statements cannot combine/],
    [{ key: { x: 1, '$**': 1 }, wildcardProjection: { x: 1 } }, 7246208, /'x' index field is ovverlapping with 'x'/],
    [{ key: { '$**': 1, h: 'hashed' } }, 67, /^Can't use more than one index plugin for a single index\.$/],
    [{ key: { h: 'hashed', '$**': 1 } }, 67, /^Can't use more than one index plugin for a single index\.$/],
    [{ key: { '$**': 1, t: 'text' } }, 67, /^Can't use more than one index plugin for a single index\.$/],
    [{ key: { '$**': 1, g: '2dsphere' } }, 67, /^Can't use more than one index plugin for a single index\.$/],
    [{ key: { '$**': 'wildcard' } }, 67, /must be a non-zero number, not a string/],
    [{ key: { 'a.$**.b': 1 } }, 67, /field name starts with '\$'/],
    [{ key: { '$**': 0 } }, 67, /cannot be 0/],
  ];
  for (const [spec, code, re] of cases) {
    await assert.rejects(create(spec), (e) => {
      assert.equal(e.code, code, `${JSON.stringify(spec)}: ${e.code} ${e.message}`);
      assert.match(e.message, re, JSON.stringify(spec));
      return true;
    });
  }
  // A partial wildcard index is allowed; nothing above was created.
  await create({ key: { '$**': 1 }, partialFilterExpression: { a: { $exists: true } } });
  assert.deepEqual((await db.collection('c').listIndexes().toArray()).map((i) => i.name).sort(), ['_id_', 'w']);
});

h.test('explain: an equality on a nested path is an IXSCAN of the wildcard index under a FETCH', async () => {
  const c = srv.freshDb('wexplain').collection('c');
  await c.createIndex({ '$**': 1 });
  await c.insertMany([{ _id: 1, a: { b: 5 } }, { _id: 2, a: { b: [5, 6] } }, { _id: 3, a: [{ b: 5 }, { b: 7 }] }, { _id: 4 }]);
  const plan = await winning(c, { 'a.b': 5 });
  assert.equal(plan.stage, 'FETCH');
  assert.ok(plan.filter, 'the FETCH re-checks the whole filter');
  const ix = ixscan(plan);
  assert.equal(ix.indexName, '$**_1');
  assert.deepEqual(ix.keyPattern, { $_path: 1, 'a.b': 1 });
  assert.equal(ix.isMultiKey, true);
  assert.deepEqual(ix.indexBounds, { $_path: ['["a.b", "a.b"]'], 'a.b': ['[5, 5]'] });
  assert.deepEqual(ids(await c.find({ 'a.b': 5 }).toArray()), [1, 2, 3]);
  const stats = (await c.find({ 'a.b': 5 }).explain('executionStats')).executionStats;
  assert.equal(stats.nReturned, 3);
  assert.equal(stats.totalDocsExamined, 3, 'only the documents with that key are fetched');

  // Ranges and $in too; the other rules keep a collection scan.
  assert.deepEqual(ixscan(await winning(c, { 'a.b': { $gt: 5 } })).indexBounds['a.b'], ['(5, inf.0]']);
  assert.deepEqual(ixscan(await winning(c, { 'a.b': { $in: [6, 7] } })).indexBounds['a.b'], ['[6, 6]', '[7, 7]']);
  // $exists: true scans the path and its subpaths (mongod's bounds).
  assert.deepEqual(ixscan(await winning(c, { a: { $exists: true } })).indexBounds,
    { $_path: ['["a", "a"]', '["a.", "a/")'], a: ['[MinKey, MaxKey]'] });
  assert.deepEqual(ids(await c.find({ a: { $exists: true } }).toArray()), [1, 2, 3]);
  assert.deepEqual(ids(await c.find({ 'a.b': { $exists: true } }).toArray()), [1, 2, 3]);
  for (const f of [{ 'a.b': null }, { 'a.b': { $ne: 5 } }, { 'a.b': { $nin: [5] } }, { 'a.b': { $exists: false } },
    { 'a.b': { $not: { $gt: 5 } } }, { _id: { $gt: 1 } }, { 'a.0.b': 5 }, { a: { b: 5 } }, { 'a.b': [5, 6] },
    { $or: [{ 'a.b': 5 }, { z: null }] }, {}]) {
    assert.equal(wildScan(await winning(c, f)), null, `${JSON.stringify(f)} must not use the wildcard index`);
  }
  // hint by name and by key pattern; a hint the filter cannot use is refused.
  assert.equal(ixscan(await winning(c, { 'a.b': 6 }, { hint: '$**_1' })).indexName, '$**_1');
  assert.equal(ixscan(await winning(c, { 'a.b': 6 }, { hint: { '$**': 1 } })).indexName, '$**_1');
  assert.deepEqual(ids(await c.find({ 'a.b': 6 }).hint({ '$**': 1 }).toArray()), [2]);
  for (const f of [{}, { 'a.b': null }, { 'a.b': { $ne: 5 } }]) {
    await assert.rejects(c.find(f).hint('$**_1').toArray(), (e) => e.code === 291 &&
      /refusing to build whole-index solution, because it's a wildcard index/.test(e.message), JSON.stringify(f));
  }
  await assert.rejects(c.find({}).min({ a: 1 }).hint('$**_1').toArray(), (e) => e.code === 51174);
  // A $or whose every branch it can bound: an OR of its IXSCANs under one FETCH.
  const orPlan = await winning(c, { $or: [{ 'a.b': 7 }, { 'a.b': { $lt: 6 } }, { z: 1 }] });
  assert.equal(orPlan.stage, 'FETCH');
  assert.equal(orPlan.inputStage.stage, 'OR');
  assert.deepEqual(orPlan.inputStage.inputStages.map((s) => s.indexName), ['$**_1', '$**_1', '$**_1']);
  assert.deepEqual(ids(await c.find({ $or: [{ 'a.b': 7 }, { 'a.b': { $lt: 6 } }, { z: 1 }] }).toArray()), [1, 2, 3]);
  // A sort still comes out right (a blocking SORT above the FETCH).
  assert.deepEqual((await c.find({ 'a.b': { $gte: 5 } }).sort({ _id: -1 }).toArray()).map((d) => d._id), [3, 2, 1]);
});

/* Random documents: nested objects and arrays (arrays of arrays too), mixed types, dotted and numeric field names. */
function randomValue(r, depth) {
  const k = r();
  if (depth > 2 || k < 0.45) {
    const s = r();
    if (s < 0.35) return Math.floor(r() * 6);
    if (s < 0.45) return Math.floor(r() * 6) + 0.5;
    if (s < 0.5) return new Long(Math.floor(r() * 6));
    if (s < 0.53) return Decimal128.fromString(String(Math.floor(r() * 6)));
    if (s < 0.7) return ['a', 'b', 'c', 'ab'][Math.floor(r() * 4)];
    if (s < 0.77) return null;
    if (s < 0.84) return r() < 0.5;
    if (s < 0.9) return new Date(1700000000000 + Math.floor(r() * 3) * 1000);
    return new Double(Math.floor(r() * 6));
  }
  if (k < 0.7) {
    const o = {};
    const n = Math.floor(r() * 4);
    for (let i = 0; i < n; i++) o[['a', 'b', 'c', '0', 'd.e'][Math.floor(r() * 5)]] = randomValue(r, depth + 1);
    return o;
  }
  const n = Math.floor(r() * 4);
  const a = [];
  for (let i = 0; i < n; i++) a.push(randomValue(r, depth + 1));
  return a;
}

h.test('randomized documents: every query returns exactly the collection scan\'s documents', async () => {
  const db = srv.freshDb('wrandom');
  const c = db.collection('c');
  const r = rng(20261202);
  const docs = [];
  for (let i = 0; i < 400; i++) {
    const d = { _id: i };
    const n = 1 + Math.floor(r() * 3);
    for (let j = 0; j < n; j++) d[['a', 'b', 'm'][Math.floor(r() * 3)]] = randomValue(r, 0);
    docs.push(d);
  }
  // Half before the index (built over existing documents), half after (kept by inserts).
  await c.insertMany(docs.slice(0, 200));
  await c.createIndex({ '$**': 1 });
  await c.createIndex({ 'm.$**': 1 });
  await c.insertMany(docs.slice(200));
  const paths = ['a', 'b', 'm', 'a.a', 'a.b', 'a.c', 'b.a', 'm.a', 'm.b', 'a.a.b', 'a.b.c', 'm.c.a', 'a.0', 'a.d', 'a.d.e'];
  const values = [0, 1, 2, 2.5, new Long(3), Decimal128.fromString('4'), 'a', 'ab', true, false,
    new Date(1700000001000)];
  const filters = [];
  for (const p of paths) {
    for (const v of values) filters.push({ [p]: v });
    filters.push({ [p]: { $gt: 1 } }, { [p]: { $gte: 2, $lt: 4 } }, { [p]: { $lte: 'ab' } }, { [p]: { $in: [0, 'b', false] } },
      { [p]: { $gt: 0, $ne: 3 } }, { [p]: { $exists: true } }, { [p]: null }, { [p]: { $lt: new Date(1700000002000) } },
      { [p]: 1, other: { $exists: false } }, { $and: [{ [p]: { $gte: 1 } }, { [p]: { $lte: 3 } }] },
      { $or: [{ [p]: 'a' }, { [p]: { $gt: 3 } }, { 'b.a': 1 }] }, { $or: [{ [p]: 2 }, { [p]: null }] });
  }
  let used = 0;
  const check = async () => {
    for (const f of filters) {
      const got = ids(await c.find(f).toArray());
      const want = ids(await c.find(f).hint({ $natural: 1 }).toArray());
      assert.deepEqual(got, want, `filter ${JSON.stringify(f)}`);
      if (wildScan(await winning(c, f))) used++;
    }
  };
  await check();
  assert.ok(used > filters.length / 3, `the index served ${used} of ${filters.length} filters`);
  // Upkeep: updates that move values between paths and types, then deletes.
  for (let i = 0; i < 400; i += 3) {
    await c.updateOne({ _id: i }, { $set: { a: randomValue(r, 0) }, $unset: { b: '' } });
  }
  await c.updateMany({ 'a.b': { $gte: 2 } }, { $set: { b: { a: 'ab', c: [1, { a: 2 }] } } });
  await c.deleteMany({ m: { $in: [0, 'a'] } });
  await c.deleteMany({ 'a.a': { $gt: 3 } });
  used = 0;
  await check();
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true, JSON.stringify(v));
});

h.test('odd shapes: dotted and numeric field names, nested arrays, empty objects and arrays', async () => {
  const c = srv.freshDb('wodd').collection('c');
  await c.createIndex({ '$**': 1 });
  await c.insertMany([
    { _id: 1, a: { 'x.y': 1 } }, { _id: 2, a: [{ 'x.y': 1 }] }, { _id: 3, a: [[{ b: 1 }]] }, { _id: 4, a: [[1], 1] },
    { _id: 5, a: {} }, { _id: 6, a: [] }, { _id: 7, a: { 0: { b: 1 } } }, { _id: 8, a: [{ b: [[1]] }] },
    { _id: 9, 'a.b': 1 }, { _id: 10, a: null }, { _id: 11, a: [null, { b: null }] }, { _id: 12, b: 1 },
  ]);
  const filters = [{ a: { $exists: true } }, { 'a.b': { $exists: true } }, { 'a.x': { $exists: true } }, { a: 1 },
    { 'a.b': 1 }, { a: { $gte: 1 } }, { 'a.b': { $lte: 1 } }, { 'a.x.y': 1 }, { 'a.0.b': 1 }, { 'a.0': 1 },
    { a: { $in: [1, 2] } }, { 'a.b': { $exists: true, $ne: null } }];
  for (const f of filters) {
    assert.deepEqual(ids(await c.find(f).toArray()), ids(await c.find(f).hint({ $natural: 1 }).toArray()), JSON.stringify(f));
  }
});

h.test('update and delete keep the index right, and deletes through it remove the right documents', async () => {
  const db = srv.freshDb('wupkeep');
  const c = db.collection('c');
  await c.createIndex({ '$**': 1 });
  await c.insertMany([{ _id: 1, meta: { color: 'red', size: 2 } }, { _id: 2, meta: { color: ['red', 'blue'] } },
    { _id: 3, meta: { color: 'blue' } }]);
  assert.deepEqual(ids(await c.find({ 'meta.color': 'red' }).toArray()), [1, 2]);
  await c.updateOne({ _id: 1 }, { $set: { 'meta.color': 'green' } });
  await c.updateOne({ _id: 3 }, { $set: { meta: { color: { shade: 'red' } } } });
  assert.deepEqual(ids(await c.find({ 'meta.color': 'red' }).toArray()), [2]);
  assert.deepEqual(ids(await c.find({ 'meta.color': 'green' }).toArray()), [1]);
  assert.deepEqual(ids(await c.find({ 'meta.color.shade': 'red' }).toArray()), [3]);
  await c.replaceOne({ _id: 2 }, { other: 1 });
  assert.deepEqual(ids(await c.find({ 'meta.color': 'red' }).toArray()), []);
  assert.deepEqual(ids(await c.find({ other: 1 }).toArray()), [2]);
  const d = await c.deleteMany({ 'meta.size': { $gte: 2 } });
  assert.equal(d.deletedCount, 1);
  assert.deepEqual(ids(await c.find({}).toArray()), [2, 3]);
  assert.equal(await c.countDocuments({ 'meta.color.shade': 'red' }), 1);
  // An update through the index that moves its documents' keys forward updates each once.
  await c.insertMany([{ _id: 10, n: { v: [1] } }, { _id: 11, n: { v: [2, 3] } }, { _id: 12, n: { v: [5] } }]);
  const u = await c.updateMany({ 'n.v': { $gte: 1 } }, { $inc: { 'n.w': 1 }, $push: { 'n.v': 100 } });
  assert.equal(u.modifiedCount, 3);
  assert.deepEqual((await c.find({ _id: { $gte: 10 } }).sort({ _id: 1 }).toArray()).map((d) => d.n.w), [1, 1, 1]);
  assert.deepEqual(ids(await c.find({ 'n.v': 100 }).toArray()), [10, 11, 12]);
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true, JSON.stringify(v));
});

h.test('a projection or a subtree limits what is indexed and which queries use it', async () => {
  const c = srv.freshDb('wproj').collection('c');
  await c.createIndex({ '$**': 1 }, { wildcardProjection: { meta: 1, 'x.y': 1 } });
  await c.createIndex({ 'sub.$**': 1 });
  await c.insertMany([{ _id: 1, meta: { k: 1 }, x: { y: 2, z: 3 }, sub: { q: 4 }, w: 5 },
    { _id: 2, meta: { k: 2 }, x: { y: [2, 3] }, sub: [{ q: 4 }, { q: 6 }] }]);
  assert.equal(ixscan(await winning(c, { 'meta.k': 1 })).indexName, '$**_1');
  assert.equal(ixscan(await winning(c, { 'x.y': 3 })).indexName, '$**_1');
  assert.equal(ixscan(await winning(c, { 'sub.q': 4 })).indexName, 'sub.$**_1');
  assert.equal(ixscan(await winning(c, { w: 5 })), null);
  assert.equal(ixscan(await winning(c, { 'x.z': 3 })), null);
  assert.deepEqual(ids(await c.find({ 'x.y': 3 }).toArray()), [2]);
  assert.deepEqual(ids(await c.find({ 'sub.q': 4 }).toArray()), [1, 2]);
  assert.deepEqual(ids(await c.find({ 'sub.q': { $gt: 4 } }).toArray()), [2]);
});

h.test('a compound wildcard index is used through its regular fields only', async () => {
  const c = srv.freshDb('wcompound').collection('c');
  await c.createIndex({ tenant: 1, '$**': 1 }, { wildcardProjection: { tenant: 0 } });
  await c.insertMany([{ _id: 1, tenant: 'a', v: 1 }, { _id: 2, tenant: 'b', v: 1 }, { _id: 3, tenant: 'a', v: 2 }]);
  assert.deepEqual(ids(await c.find({ tenant: 'a', v: 1 }).toArray()), [1]);
  const ix = ixscan(await winning(c, { tenant: 'a' }));
  assert.equal(ix.indexName, 'tenant_1_$**_1');
  assert.deepEqual(ids(await c.find({ tenant: 'a' }).toArray()), [1, 3]);
  assert.deepEqual(ids(await c.find({ v: 1 }).toArray()), [1, 2]);
  // Still a two-field index to collMod's TTL check and min / max, as mongod's.
  await assert.rejects(c.s.db.command({ collMod: 'c', index: { name: 'tenant_1_$**_1', expireAfterSeconds: 5 } }),
    (e) => e.code === 72 && /compound indexes do not support TTL/.test(e.message));
  await assert.rejects(c.find({}).min({ tenant: 'a' }).hint('tenant_1_$**_1').toArray(), (e) => e.code === 51174);
});

h.test('Mongoose: schema.index({\'meta.$**\': 1}) then syncIndexes creates it, and queries on meta use it', async () => {
  const db = srv.freshDb('wmongoose');
  const conn = await mongoose.createConnection(srv.uri, { dbName: db.databaseName }).asPromise();
  try {
    const schema = new mongoose.Schema({ name: String, meta: mongoose.Schema.Types.Mixed });
    schema.index({ 'meta.$**': 1 });
    const M = conn.model('Item', schema);
    await M.syncIndexes();
    const names = (await M.listIndexes()).map((i) => i.name).sort();
    assert.deepEqual(names, ['_id_', 'meta.$**_1']);
    await M.create([{ name: 'x', meta: { tags: ['a', 'b'], n: 1 } }, { name: 'y', meta: { tags: 'b', n: 2 } }, { name: 'z' }]);
    assert.deepEqual((await M.find({ 'meta.tags': 'b' }).sort({ name: 1 }).lean()).map((d) => d.name), ['x', 'y']);
    assert.deepEqual((await M.find({ 'meta.n': { $gte: 2 } }).lean()).map((d) => d.name), ['y']);
    const plan = await M.find({ 'meta.tags': 'a' }).explain();
    assert.equal(ixscan(plan.queryPlanner.winningPlan).indexName, 'meta.$**_1');
    await M.syncIndexes(); // idempotent: nothing dropped or created again
    assert.equal((await M.listIndexes()).length, 2);
  } finally {
    await conn.close();
  }
});

for (const kill9 of [false, true]) {
  const how = kill9 ? 'kill -9' : 'clean restart';
  h.test(`a wildcard index persists across a ${how} with its projection, and queries still use it`, async () => {
    const dbName = srv.freshDb('wpersist').databaseName;
    let c = srv.client.db(dbName).collection('c');
    await c.createIndex({ '$**': 1 }, { wildcardProjection: { a: 0 } });
    await c.insertMany([{ _id: 1, a: 1, b: { c: 'k' } }, { _id: 2, a: 2, b: { c: ['k', 'l'] } }, { _id: 3, b: 7 }], J);
    await srv.server.restart({ kill9 });
    await srv.reconnect();
    c = srv.client.db(dbName).collection('c');
    const spec = (await c.listIndexes().toArray()).find((i) => i.name === '$**_1');
    assert.deepEqual(spec, { v: 2, key: { '$**': 1 }, name: '$**_1', wildcardProjection: { a: 0 } });
    assert.deepEqual(ids(await c.find({ 'b.c': 'k' }).toArray()), [1, 2]);
    assert.equal(ixscan(await winning(c, { 'b.c': 'l' })).indexName, '$**_1');
    assert.equal(ixscan(await winning(c, { a: 1 })), null, 'the projection still excludes a');
    await c.insertOne({ _id: 4, b: { c: 'l' } }, J);
    assert.deepEqual(ids(await c.find({ 'b.c': 'l' }).toArray()), [2, 4]);
    const v = await srv.client.db(dbName).command({ validate: 'c' });
    assert.equal(v.valid, true, JSON.stringify(v));
  });
}
