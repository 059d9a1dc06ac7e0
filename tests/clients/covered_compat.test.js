'use strict';
/*
 * Covered finds (mongod 8.0's PROJECTION_COVERED over IXSCAN, with no FETCH):
 * a find whose filter the index bounds answer exactly, whose sort (if any)
 * is the index's order, and whose projection includes only fields of the
 * index's key pattern (_id excluded unless it is one of them) reads index
 * keys only: explain shows PROJECTION_COVERED (PROJECTION_DEFAULT for dotted
 * paths) over the IXSCAN, totalDocsExamined 0. Index entries hold their
 * keys' type bits (keyFormat 3), so every number comes back in its
 * document's own type. Each result is compared, byte for byte, with the same
 * find over a collection scan (hint {$natural: 1}); documents are inserted
 * with their fields in key pattern order, the order a covered projection
 * gives them. What mongod does not cover (multikey paths, null equality,
 * operators and expressions over other fields in the projection, a sort or filter field
 * outside the index, a collation index, a hashed field) still FETCHes.
 */
const assert = require('node:assert/strict');
const { Decimal128, Long, Double, Int32 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const D = (s) => Decimal128.fromString(s);

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

const hex = (docs) => docs.map((b) => Buffer.from(b).toString('hex'));

/* The find's raw documents, through the index the planner picks and over a collection scan. */
async function both(c, filter, projection, opts = {}) {
  const viaIndex = await c.find(filter, { projection, raw: true, ...opts }).toArray();
  const viaScan = await c.find(filter, { projection, raw: true, ...opts, hint: { $natural: 1 } }).toArray();
  return { viaIndex: hex(viaIndex), viaScan: hex(viaScan) };
}

/* Asserts the find is covered (and returns the same documents as a collection scan, in order when ordered). */
async function assertCovered(c, filter, projection, opts = {}, { ordered = false, stage = 'PROJECTION_COVERED' } = {}) {
  const what = `${JSON.stringify(filter)} ${JSON.stringify(projection)} ${JSON.stringify(opts)}`;
  const { viaIndex, viaScan } = await both(c, filter, projection, opts);
  if (ordered) assert.deepEqual(viaIndex, viaScan, what);
  else assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), what);
  const e = await c.find(filter, { projection, ...opts }).explain('executionStats');
  const s = stages(e.queryPlanner.winningPlan);
  assert.equal(s[0], stage, `${what}: ${s}`);
  assert.ok(s.includes('IXSCAN') && !s.includes('FETCH'), `${what}: ${s}`);
  assert.equal(e.executionStats.totalDocsExamined, 0, what);
  assert.ok(e.executionStats.totalKeysExamined >= viaIndex.length, what);
  assert.equal(e.executionStats.nReturned, viaIndex.length, what);
  const xs = stages(e.executionStats.executionStages);
  assert.ok(!xs.includes('FETCH'), `${what}: ${xs}`);
  return viaIndex.length;
}

/* Asserts the find fetches documents (mongod does not cover it) and still returns the collection scan's documents. */
async function assertFetches(c, filter, projection, opts = {}) {
  const what = `${JSON.stringify(filter)} ${JSON.stringify(projection)} ${JSON.stringify(opts)}`;
  const { viaIndex, viaScan } = await both(c, filter, projection, opts);
  assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), what);
  const e = await c.find(filter, { projection, ...opts }).explain('executionStats');
  const s = stages(e.queryPlanner.winningPlan);
  assert.ok(!s.includes('PROJECTION_COVERED'), `${what}: ${s}`);
  if (viaIndex.length > 0 && !s.includes('COLLSCAN')) assert.ok(e.executionStats.totalDocsExamined > 0, what);
  return s;
}

const NUMBERS = [
  new Int32(5), Long.fromNumber(5), new Double(5), D('5'), D('5.000'), D('5.0000000000000000000000000000001'),
  new Double(5.5), D('5.5'), new Double(-0), new Int32(0), Long.fromString('9007199254740993'),
  new Double(9007199254740992), D('1E+400'), D('-1E+400'), new Double(Infinity), new Double(-Infinity),
  new Double(NaN), D('NaN'), new Double(0.1), D('0.1'), new Int32(-7), Long.fromNumber(-7),
];
const OTHERS = ['x', 'X', '', 'abc', new Date(5), new Date(-5), true, false, { p: 1, q: new Double(2) }];

h.test('numbers of every type, strings, dates and objects come back from the keys as the documents hold them', async () => {
  const db = srv.freshDb('covtypes');
  const c = db.collection('c');
  await c.createIndex({ a: 1 });
  const docs = [...NUMBERS, ...OTHERS].map((a, i) => ({ a, _id: i }));
  await c.insertMany(docs);
  const proj = { a: 1, _id: 0 };
  assert.equal(await assertCovered(c, { a: { $gte: -1000 } }, proj), 18);
  assert.equal(await assertCovered(c, { a: 5 }, proj), 5);
  assert.equal(await assertCovered(c, { a: { $in: [5, -7, 'x', new Date(5)] } }, proj), 9);
  assert.equal(await assertCovered(c, { a: { $gt: 'a', $lt: 'z' } }, proj), 2);
  assert.equal(await assertCovered(c, { a: { $lt: new Date(100) } }, proj), 2);
  assert.equal(await assertCovered(c, { a: { $gt: 0, $lte: 5.5 } }, proj, { sort: { a: 1 } }), 10);
  assert.equal(await assertCovered(c, { a: { p: 1, q: 2 } }, proj), 1);
  // the documents themselves, types and all
  const got = await c.find({ a: { $gt: 5, $lte: 5.5 } }, { projection: proj, sort: { a: 1 }, promoteValues: false })
    .toArray();
  assert.deepEqual(got.map((d) => d.a._bsontype), ['Decimal128', 'Double', 'Decimal128']);
  const neg = await c.find({ a: { $gte: -0, $lte: 0 } }, { projection: proj, promoteValues: false }).toArray();
  assert.deepEqual(neg.map((d) => [d.a._bsontype, Object.is(d.a.valueOf(), -0)]).sort(),
    [['Double', true], ['Int32', false]]);
  // findOne too
  const one = await c.findOne({ a: D('5.000') }, { projection: proj, sort: { a: 1 }, promoteValues: false });
  assert.ok(['Int32', 'Long', 'Double', 'Decimal128'].includes(one.a._bsontype));
  const e = await c.find({ a: 5 }, { projection: proj, limit: 1 }).explain('executionStats');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'LIMIT', 'IXSCAN']);
  assert.equal(e.executionStats.totalDocsExamined, 0);
  assert.equal(e.executionStats.nReturned, 1);
});

h.test('compound indexes with descending fields, sorts forward and backward, skip, limit and getMore', async () => {
  const db = srv.freshDb('covcompound');
  const c = db.collection('c');
  await c.createIndex({ a: 1, b: -1, s: 1 });
  const docs = [];
  let id = 0;
  for (let a = 0; a < 6; a++) {
    for (let b = 0; b < 7; b++) {
      const av = [new Int32(a), Long.fromNumber(a), new Double(a)][b % 3];
      const bv = b % 2 ? D(`${b}.0`) : new Int32(b);
      docs.push({ a: av, b: bv, s: `s${(a * 7 + b) % 5}`, _id: id++ });
    }
  }
  await c.insertMany(docs);
  const p = { a: 1, b: 1, s: 1, _id: 0 };
  await assertCovered(c, { a: 3 }, p, { sort: { b: -1 } }, { ordered: true });
  await assertCovered(c, { a: 3 }, p, { sort: { b: 1 } }, { ordered: true });
  await assertCovered(c, { a: { $gte: 2, $lt: 5 } }, p, { sort: { a: 1, b: -1 } }, { ordered: true });
  await assertCovered(c, { a: { $gte: 2, $lt: 5 } }, p, { sort: { a: -1, b: 1 } }, { ordered: true });
  await assertCovered(c, { a: { $in: [1, 4] }, b: { $gt: 2 } }, { b: 1, _id: 0 });
  await assertCovered(c, { a: 2, b: { $lte: 4 } }, { s: 1, a: 1, _id: 0 }, { sort: { b: -1 } }, { ordered: true });
  await assertCovered(c, { a: { $gte: 0 } }, p, { sort: { a: 1, b: -1 }, skip: 5, limit: 11 }, { ordered: true });
  // a cursor of several batches resumes the covered scan
  const all = await c.find({ a: { $gte: 0 } }, { projection: p, sort: { a: 1, b: -1 }, batchSize: 4, raw: true })
    .toArray();
  const scan = await c.find({ a: { $gte: 0 } }, { projection: p, sort: { a: 1, b: -1 }, hint: { $natural: 1 }, raw: true })
    .toArray();
  assert.equal(all.length, 42);
  assert.deepEqual(hex(all), hex(scan));
  // the projection's order does not matter: a covered document is in key pattern order
  const d = await c.findOne({ a: 1, b: 2 }, { projection: { s: 1, b: 1, a: 1, _id: 0 } });
  assert.deepEqual(Object.keys(d), ['a', 'b', 's']);
});

h.test('covered documents are in key pattern order, _id covered when the index has it', async () => {
  const db = srv.freshDb('covorder');
  const c = db.collection('c');
  await c.createIndex({ b: 1, a: 1 });
  await c.createIndex({ k: 1, _id: 1 });
  await c.insertMany([{ _id: 1, a: 1, b: 2, k: 7 }, { _id: new Long(2), a: 3, b: 4, k: 8 }]);
  // mongod's ProjectionStageCovered appends the key's fields in key pattern order
  const d = await c.findOne({ b: 2 }, { projection: { a: 1, b: 1, _id: 0 } });
  assert.deepEqual(Object.keys(d), ['b', 'a']);
  const e = await c.find({ b: 2 }, { projection: { a: 1, b: 1, _id: 0 } }).explain();
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'IXSCAN']);
  assert.deepEqual(e.queryPlanner.winningPlan.transformBy, { a: 1, b: 1, _id: 0 });
  // _id is part of the {k, _id} index: an inclusion projection keeps it, covered, after k as the key has them
  const ek = await c.find({ k: { $gte: 7 } }, { projection: { k: 1 }, sort: { k: 1 } }).explain('executionStats');
  assert.deepEqual(stages(ek.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'IXSCAN']);
  assert.equal(ek.executionStats.totalDocsExamined, 0);
  const ks = await c.find({ k: { $gte: 7 } }, { projection: { k: 1 }, sort: { k: 1 }, promoteValues: false }).toArray();
  assert.deepEqual(ks.map((x) => Object.keys(x)), [['k', '_id'], ['k', '_id']]);
  assert.equal(ks[1]._id._bsontype, 'Long');
  await assertCovered(c, { k: 8 }, { _id: 1 });
  // _id not in the index: the implicit _id needs the document
  await assertFetches(c, { b: 2 }, { a: 1, b: 1 });
  await assertFetches(c, { b: { $gte: 0 } }, { a: 1 }, { sort: { b: 1 } });
});

h.test('dotted paths are covered by PROJECTION_DEFAULT, nested as mongod rehydrates the key', async () => {
  const db = srv.freshDb('covdotted');
  const c = db.collection('c');
  await c.createIndex({ 'x.y': 1, n: -1, 'x.z': 1 });
  await c.insertMany([
    { _id: 1, x: { y: new Int32(1), z: 'a' }, n: new Double(3) },
    { _id: 2, x: { y: Long.fromNumber(2), z: D('2.50') }, n: new Int32(4) },
    { _id: 3, x: { y: new Double(3), z: new Date(3) }, n: Long.fromNumber(5) },
  ]);
  await assertCovered(c, { 'x.y': { $gte: 1 } }, { 'x.y': 1, 'x.z': 1, _id: 0 }, {}, { stage: 'PROJECTION_DEFAULT' });
  await assertCovered(c, { 'x.y': { $gte: 2 } }, { 'x.z': 1, _id: 0 }, { sort: { 'x.y': -1 } },
    { ordered: true, stage: 'PROJECTION_DEFAULT' });
  const d = await c.findOne({ 'x.y': 2 }, { projection: { n: 1, 'x.z': 1, 'x.y': 1, _id: 0 }, promoteValues: false });
  // {x: {y, z}} grouped at x's first place, then n: the rehydrated key's order
  assert.deepEqual(Object.keys(d), ['x', 'n']);
  assert.deepEqual(Object.keys(d.x), ['y', 'z']);
  assert.equal(d.x.y._bsontype, 'Long');
  assert.equal(d.x.z.toString(), '2.50');
  // a prefix of an indexed path is not a key pattern field
  await assertFetches(c, { 'x.y': { $gte: 1 } }, { x: 1, _id: 0 });
  // a numeric component: the key holds the array's element, the projection reads the path its own way
  await c.createIndex({ 'p.0': 1 });
  await c.insertMany([{ _id: 10, p: [5, 6] }, { _id: 11, p: { 0: 5 } }]);
  await assertFetches(c, { 'p.0': 5 }, { 'p.0': 1, _id: 0 });
});

h.test('a field missing from a document is null in a covered result, as mongod\'s covered plans give it', async () => {
  const db = srv.freshDb('covmissing');
  const c = db.collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany([{ _id: 1, a: 1, b: 2 }, { _id: 2, a: 1 }, { _id: 3, a: 1, b: null }]);
  const docs = await c.find({ a: 1 }, { projection: { a: 1, b: 1, _id: 0 }, sort: { a: 1, b: 1 } }).toArray();
  assert.deepEqual(docs, [{ a: 1, b: null }, { a: 1, b: null }, { a: 1, b: 2 }]);
  const e = await c.find({ a: 1 }, { projection: { a: 1, b: 1, _id: 0 } }).explain('executionStats');
  assert.equal(e.queryPlanner.winningPlan.stage, 'PROJECTION_COVERED');
  assert.equal(e.executionStats.totalDocsExamined, 0);
  // null equality: the bounds hold null and missing alike, so mongod fetches
  await assertFetches(c, { a: 1, b: null }, { a: 1, b: 1, _id: 0 });
  await assertFetches(c, { a: null }, { a: 1, _id: 0 });
});

h.test('multikey: a path that held an array is never covered; other fields of the index still are', async () => {
  const db = srv.freshDb('covmultikey');
  const c = db.collection('c');
  await c.createIndex({ a: 1, t: 1 });
  await c.insertMany([{ _id: 1, a: 1, t: [1, 2, 3] }, { _id: 2, a: 2, t: 5 }, { _id: 3, a: new Double(1), t: [] }]);
  // t's path held an array: a covered only (one result per document, not per key)
  assert.equal(await assertCovered(c, { a: { $gte: 1 } }, { a: 1, _id: 0 }, { sort: { a: 1 } }), 3);
  await assertFetches(c, { a: { $gte: 1 } }, { a: 1, t: 1, _id: 0 });
  // one bound on t answers its predicate all the same (mongod's planner): a covered, ids de-duplicated
  assert.equal(await assertCovered(c, { a: 1, t: 2 }, { a: 1, _id: 0 }), 1);
  await assertFetches(c, { a: 1, t: { $gt: 1, $lt: 3 } }, { a: 1, _id: 0 });
  // a path that comes to hold an array while a covered cursor is open: the rest is fetched, still right
  await c.createIndex({ m: 1 });
  const many = [];
  for (let i = 0; i < 20; i++) many.push({ _id: 100 + i, m: i % 2 ? new Int32(i) : new Double(i) });
  await c.insertMany(many);
  const cur = c.find({ m: { $gte: 0, $lt: 100 } }, { projection: { m: 1, _id: 0 }, sort: { m: 1 }, batchSize: 3,
    raw: true });
  const first = [];
  for (let i = 0; i < 3; i++) first.push(await cur.next());
  await c.insertOne({ _id: 200, m: [500, 600] });
  const rest = await cur.toArray();
  const scan = await c.find({ m: { $gte: 0, $lt: 100 } }, { projection: { m: 1, _id: 0 }, sort: { m: 1 },
    hint: { $natural: 1 }, raw: true }).toArray();
  assert.deepEqual(hex([...first, ...rest]), hex(scan));
  await assertFetches(c, { m: { $gte: 0 } }, { m: 1, _id: 0 });
});

h.test('what mongod does not cover still fetches: operators, expressions, exclusions, other fields, collations, hashed', async () => {
  const db = srv.freshDb('covnot');
  const c = db.collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.createIndex({ s: 1 }, { collation: { locale: 'en', strength: 2 } });
  await c.createIndex({ h: 'hashed', g: 1 });
  const docs = [];
  for (let i = 0; i < 12; i++) docs.push({ _id: i, a: i % 4, b: [i, i + 1].length === 2 ? i : 0, c: i, s: `S${i}`, h: i, g: i });
  await c.insertMany(docs);
  await assertCovered(c, { a: 2 }, { a: 1, b: 1, _id: 0 });
  // a filter or sort field outside the index
  await assertFetches(c, { a: 2, c: { $gt: 3 } }, { a: 1, b: 1, _id: 0 });
  await assertFetches(c, { a: 2 }, { a: 1, b: 1, _id: 0 }, { sort: { c: 1 } });
  // the index does not give the sort, which reads key fields only: a blocking SORT over the decoded keys
  // (mongod's analyzeSort; covered_sort_compat.test.js has the rest)
  await assertCovered(c, { a: { $gte: 1 } }, { a: 1, b: 1, _id: 0 }, { sort: { b: 1 } }, { ordered: true, stage: 'SORT' });
  // expressions reading key fields only are covered (PROJECTION_DEFAULT; covered_sort_compat.test.js has the rest)
  await assertCovered(c, { a: 2 }, { a: 1, x: { $add: ['$b', 1] }, _id: 0 }, {}, { stage: 'PROJECTION_DEFAULT' });
  // projections that need the document: an exclusion, expressions over other fields, $slice, $elemMatch,
  // positional, a field outside
  await assertFetches(c, { a: 2 }, { c: 0, _id: 0 });
  await assertFetches(c, { a: 2 }, { a: 1, x: { $add: ['$c', 1] }, _id: 0 });
  await assertFetches(c, { a: 2 }, { a: { $slice: 1 }, _id: 0 });
  await assertFetches(c, { a: 2 }, { a: 1, c: 1, _id: 0 });
  await assertFetches(c, { a: 2 }, { a: 1, b: 1 });
  // predicates the bounds do not answer exactly: evaluated on the keys when a null key reads as a missing field
  // would (mongod's IXSCAN filter), else fetched
  await c.insertOne({ _id: 100, a: 'abc', b: 'x' });
  await c.insertOne({ _id: 102, a: null, b: 'z' });
  for (const f of [{ a: /^ab/ }, { a: { $ne: 2 } }, { a: { $nin: [1, 2] } }, { a: { $gte: 1 }, b: { $ne: 5 } },
    { a: { $in: [1, /^a/] }, b: { $mod: [2, 1] } }, { a: { $gte: 0 }, b: { $regex: '^[0-9]', $options: 'i' } },
    { a: { $gt: 0, $ne: 3 } }]) {
    await assertCovered(c, f, { a: 1, b: 1, _id: 0 }, { hint: { a: 1, b: 1 } });
  }
  const ef = await c.find({ a: /^ab/ }, { projection: { a: 1, _id: 0 } }).explain();
  assert.deepEqual(stages(ef.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'IXSCAN']);
  assert.ok(ef.queryPlanner.winningPlan.inputStage.filter, JSON.stringify(ef.queryPlanner.winningPlan));
  await c.insertOne({ _id: 101, b: 'y' }); // a missing: its key's null is not the document's
  await assertFetches(c, { a: { $exists: true } }, { a: 1, _id: 0 });
  await assertFetches(c, { a: { $gte: 0 }, b: { $exists: false } }, { a: 1, _id: 0 });
  await assertFetches(c, { a: { $gte: 0 }, b: { $type: 'null' } }, { a: 1, _id: 0 });
  await assertFetches(c, { a: { $gte: 0 }, b: { $in: [null, 3] } }, { a: 1, _id: 0 });
  await assertFetches(c, { a: { $gte: 0 }, b: { $not: { $gt: 3 } } }, { a: 1, _id: 0 });
  // a collation index holds sort keys, not the strings
  await assertFetches(c, { s: { $gte: 's' } }, { s: 1, _id: 0 }, { collation: { locale: 'en', strength: 2 } });
  // a hashed field's key is its hash; the other fields of a compound hashed index are covered
  await assertFetches(c, { h: 5 }, { h: 1, _id: 0 });
  // returnKey and showRecordId keep their own stages
  const rk = await c.find({ a: 2 }, { projection: { a: 1, _id: 0 }, returnKey: true }).toArray();
  assert.deepEqual(rk[0], { a: 2, b: 2 });
  const sr = await c.find({ a: 2 }, { projection: { a: 1, _id: 0 }, showRecordId: true }).toArray();
  assert.equal(typeof sr[0].$recordId, 'number');
});

h.test('a change of type alone rewrites the entry: the covered value follows the document', async () => {
  const db = srv.freshDb('covretype');
  const c = db.collection('c');
  await c.createIndex({ a: 1 });
  await c.createIndex({ u: 1 }, { unique: true });
  await c.insertMany([{ _id: 1, a: new Int32(5), u: new Int32(1) }, { _id: 2, a: Long.fromNumber(6), u: new Int32(2) }]);
  const types = async (f, p) => (await c.find(f, { projection: p, sort: { [Object.keys(p)[0]]: 1 }, promoteValues: false })
    .toArray()).map((d) => d[Object.keys(p)[0]]._bsontype);
  assert.deepEqual(await types({ a: { $gte: 0 } }, { a: 1, _id: 0 }), ['Int32', 'Long']);
  await c.updateOne({ _id: 1 }, { $set: { a: new Double(5), u: D('1.0') } });
  await c.updateOne({ _id: 2 }, { $set: { a: D('6') } });
  assert.deepEqual(await types({ a: { $gte: 0 } }, { a: 1, _id: 0 }), ['Double', 'Decimal128']);
  assert.deepEqual(await types({ u: { $gte: 0 } }, { u: 1, _id: 0 }), ['Decimal128', 'Int32']);
  await assertCovered(c, { a: { $gte: 0 } }, { a: 1, _id: 0 });
  await assertCovered(c, { u: { $gte: 0 } }, { u: 1, _id: 0 });
  await c.replaceOne({ _id: 1 }, { u: Long.fromNumber(1), a: Long.fromNumber(5) });
  assert.deepEqual(await types({ u: { $gte: 0 } }, { u: 1, _id: 0 }), ['Long', 'Int32']);
  assert.deepEqual(await types({ a: { $gte: 0 } }, { a: 1, _id: 0 }), ['Long', 'Decimal128']);
  // the index is checked as whole: validate finds every key
  const v = await db.command({ validate: 'c', full: true });
  assert.equal(v.valid, true);
});

h.test('after a restart the index still holds its type bits (keyFormat 3 in the catalog), and writes keep them', async () => {
  const db = srv.freshDb('covformat');
  const name = db.databaseName;
  let c = db.collection('c');
  await c.createIndex({ a: 1 });
  await c.createIndex({ u: -1 }, { unique: true });
  await c.insertMany([{ _id: 1, a: new Double(2), u: Long.fromNumber(1) }, { _id: 2, a: D('3.0'), u: new Double(2) }]);
  await srv.server.restart();
  await srv.reconnect();
  c = srv.client.db(name).collection('c');
  await c.insertOne({ _id: 3, a: Long.fromNumber(4), u: D('3.00') });
  await c.updateOne({ _id: 1 }, { $set: { u: new Int32(1) } });
  const got = await c.find({ a: { $gte: 0 } }, { projection: { a: 1, _id: 0 }, sort: { a: 1 }, promoteValues: false })
    .toArray();
  assert.deepEqual(got.map((d) => d.a._bsontype), ['Double', 'Decimal128', 'Long']);
  assert.equal(got[1].a.toString(), '3.0');
  const us = await c.find({ u: { $gte: 0 } }, { projection: { u: 1, _id: 0 }, sort: { u: -1 }, promoteValues: false })
    .toArray();
  assert.deepEqual(us.map((d) => [d.u._bsontype, d.u.toString()]), [['Decimal128', '3.00'], ['Double', '2'], ['Int32', '1']]);
  await assertCovered(c, { u: { $gte: 0 } }, { u: 1, _id: 0 });
  await assertCovered(c, { a: { $gte: 0 } }, { a: 1, _id: 0 });
  // a duplicate is still refused on the unique index whose entries carry type bits
  await h.expectCode(c.insertOne({ _id: 4, u: 2 }), 11000);
  const v = await srv.client.db(name).command({ validate: 'c', full: true });
  assert.equal(v.valid, true);
});

h.test('after kill -9 the journaled writes\' type bits survive: inserts, a type-only update and a delete, covered and validated', async () => {
  const db = srv.freshDb('covkill');
  const name = db.databaseName;
  let c = db.collection('c');
  await c.createIndex({ a: 1 });
  await c.createIndex({ u: -1 }, { unique: true });
  const j = { writeConcern: { w: 1, j: true } };
  await c.insertMany([
    { _id: 1, a: new Int32(5), u: Long.fromNumber(1) },
    { _id: 2, a: D('6.00'), u: new Double(2) },
    { _id: 3, a: new Double(7), u: D('3.0') },
    { _id: 4, a: Long.fromNumber(8), u: new Int32(4) },
  ], j);
  // only the number's type changes (5 to 5.0, 4 to 4L): the entries are rewritten
  await c.updateOne({ _id: 1 }, { $set: { a: new Double(5) } }, j);
  await c.updateOne({ _id: 4 }, { $set: { u: Long.fromNumber(4) } }, j);
  await c.deleteOne({ _id: 3 }, j);
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  c = srv.client.db(name).collection('c');
  await assertCovered(c, { a: { $gte: 0 } }, { a: 1, _id: 0 });
  await assertCovered(c, { u: { $gte: 0 } }, { u: 1, _id: 0 });
  const as = await c.find({ a: { $gte: 0 } }, { projection: { a: 1, _id: 0 }, sort: { a: 1 }, promoteValues: false })
    .toArray();
  assert.deepEqual(as.map((d) => [d.a._bsontype, d.a.toString()]), [['Double', '5'], ['Decimal128', '6.00'], ['Long', '8']]);
  const us = await c.find({ u: { $gte: 0 } }, { projection: { u: 1, _id: 0 }, sort: { u: -1 }, promoteValues: false })
    .toArray();
  assert.deepEqual(us.map((d) => [d.u._bsontype, d.u.toString()]), [['Long', '4'], ['Double', '2'], ['Long', '1']]);
  // the covered answers equal the documents' own values, read without the index
  const scan = await c.find({ a: { $gte: 0 } }, { projection: { a: 1, _id: 0 }, sort: { a: 1 }, hint: { $natural: 1 }, raw: true })
    .toArray();
  const cov = await c.find({ a: { $gte: 0 } }, { projection: { a: 1, _id: 0 }, sort: { a: 1 }, raw: true }).toArray();
  assert.deepEqual(hex(cov), hex(scan));
  // the deleted document's key is gone from the unique index: its value can be used again
  await c.insertOne({ _id: 5, a: 9, u: D('3.0') }, j);
  await h.expectCode(c.insertOne({ _id: 6, u: 2 }), 11000);
  const v = await srv.client.db(name).command({ validate: 'c', full: true });
  assert.equal(v.valid, true);
  assert.equal(v.nrecords, 4);
});

h.test('aggregate: a pushed-down $match and $project of key fields only is covered too', async () => {
  const db = srv.freshDb('covagg');
  const c = db.collection('c');
  await c.createIndex({ a: 1, b: -1 });
  await c.insertMany([
    { _id: 1, a: new Int32(1), b: D('2.50') }, { _id: 2, a: Long.fromNumber(2), b: new Double(3) },
    { _id: 3, a: new Double(3), b: 'x' }, { _id: 4, a: 4, b: 1 },
  ]);
  const pipe = [{ $match: { a: { $gte: 1, $lte: 3 } } }, { $sort: { a: 1 } }, { $project: { b: 1, a: 1, _id: 0 } }];
  const got = await c.aggregate(pipe, { raw: true }).toArray();
  const scan = await c.aggregate(pipe, { raw: true, hint: { $natural: 1 } }).toArray();
  assert.deepEqual(hex(got), hex(scan));
  assert.equal(got.length, 3);
  const e = await c.aggregate(pipe).explain('executionStats');
  assert.equal(e.queryPlanner.optimizedPipeline, true);
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_COVERED', 'IXSCAN']);
  assert.equal(e.executionStats.totalDocsExamined, 0);
  assert.equal(e.executionStats.nReturned, 3);
  const typed = await c.aggregate(pipe, { promoteValues: false }).toArray();
  assert.deepEqual(typed.map((d) => [d.a._bsontype, d.b._bsontype || typeof d.b]),
    [['Int32', 'Decimal128'], ['Long', 'Double'], ['Double', 'string']]);
  // once b's path held an array, projecting it needs the documents
  await c.insertOne({ _id: 5, a: 5, b: [1, 2] });
  const e2 = await c.aggregate([{ $match: { a: { $gte: 1 } } }, { $project: { b: 1, _id: 0 } }]).explain('executionStats');
  assert.ok(!stages(e2.queryPlanner.winningPlan).includes('PROJECTION_COVERED'));
  assert.ok(e2.executionStats.totalDocsExamined > 0);
});

h.test('object and array values inside a key keep their numbers\' types, however many (a unique index too)', async () => {
  const db = srv.freshDb('covobjects');
  const c = db.collection('c');
  await c.createIndex({ o: 1 }, { unique: true });
  await c.createIndex({ k: -1, o: 1 });
  const big = (i) => ({
    x: [new Int32(i), new Double(i + 0.5), D(`${i}.000`), Long.fromNumber(i)],
    y: { p: D('1E+400'), q: new Double(-0), r: [D('0.10'), D('0.1'), D('0.100')], s: 'str', t: new Date(i) },
    z: [[D(`${i}.5`)], { u: Long.fromString('9007199254740993') }],
  });
  const docs = [];
  for (let i = 0; i < 6; i++) docs.push({ k: new Int32(i % 2), o: big(i), _id: i });
  await c.insertMany(docs);
  await assertCovered(c, { o: { $gte: {} } }, { o: 1, _id: 0 }, { sort: { o: 1 } }, { ordered: true });
  await assertCovered(c, { k: 1 }, { k: 1, o: 1, _id: 0 }, { sort: { o: 1 } }, { ordered: true });
  const got = await c.findOne({ o: big(3) }, { projection: { o: 1, _id: 0 }, promoteValues: false });
  assert.deepEqual(got.o.y.r.map((v) => v.toString()), ['0.10', '0.1', '0.100']);
  assert.ok(Object.is(got.o.y.q.valueOf(), -0));
  assert.equal(got.o.x[3]._bsontype, 'Long');
  // retyped inside the object: the unique entry is rewritten
  await c.updateOne({ _id: 3 }, { $set: { 'o.x.0': new Double(3) } });
  const again = await c.findOne({ o: { $gte: {} }, k: { $exists: true } }, { projection: { o: 1, _id: 0 },
    sort: { o: 1 }, skip: 3, promoteValues: false, hint: { o: 1 } });
  assert.equal(again.o.x[0]._bsontype, 'Double');
  await assertCovered(c, { o: { $gte: {} } }, { o: 1, _id: 0 }, { sort: { o: 1 } }, { ordered: true });
});
