'use strict';
/*
 * Covered blocking sorts (mongod 8.0's planner_analysis.cpp analyzeSort):
 * a find whose filter an index answers and whose projection the index
 * covers, sorted by key fields in an order the index does not give, sorts
 * the decoded index keys: no FETCH, totalDocsExamined 0. The SORT is
 * mongod's SortNodeDefault (explain type "default": SortNodeSimple needs
 * fetched documents), and a projection with no expression that keeps the
 * sort's fields goes below a SORT without a limit (tryPushdownProjectBeneathSort):
 * SORT over PROJECTION_COVERED over IXSCAN; with a limit (top-k) the
 * projection stays above. Results are compared byte for byte with the same
 * find over a collection scan (hint {$natural: 1}): documents are inserted
 * in their index order, so that ties of the sort come out in the same order
 * from either source (the sort is stable). An aggregate's $sort + $project
 * after its $match is covered the same way.
 */
const assert = require('node:assert/strict');
const { Decimal128, Long, Double, Int32 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const D = (s) => Decimal128.fromString(s);
const hex = (docs) => docs.map((b) => Buffer.from(b).toString('hex'));

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

function findStage(plan, name) {
  for (let s = plan; s; s = s.inputStage) if (s.stage === name) return s;
  return null;
}

// Values of every type the keys carry (type bits): numbers that compare equal in several types, strings, dates, null.
const VALUES = [
  new Int32(5), Long.fromNumber(5), new Double(5), D('5'), D('5.000'), new Double(5.5), D('5.5'),
  new Double(-0), new Int32(0), D('-0'), Long.fromString('9007199254740993'), new Double(9007199254740992),
  D('1E+400'), new Double(-Infinity), new Double(NaN), D('NaN'), new Double(0.1), D('0.1'), new Int32(-7),
  Long.fromNumber(-7), 'x', 'X', '', 'abc', new Date(5), new Date(-5), true, false, null,
];

/* Raw documents of the find through the planner's choice and through a collection scan, with the explain. */
async function both(c, filter, projection, opts = {}) {
  const viaIndex = hex(await c.find(filter, { projection, raw: true, ...opts }).toArray());
  const scanOpts = { ...opts, hint: { $natural: 1 } };
  const viaScan = hex(await c.find(filter, { projection, raw: true, ...scanOpts }).toArray());
  const e = await c.find(filter, { projection, ...opts }).explain('executionStats');
  return { viaIndex, viaScan, e };
}

/* Asserts the sorted find is covered, sorts in a SORT stage, and gives the collection scan's documents in order. */
async function assertCoveredSort(c, filter, projection, opts, shape) {
  const what = `${JSON.stringify(filter)} ${JSON.stringify(projection)} ${JSON.stringify(opts)}`;
  const { viaIndex, viaScan, e } = await both(c, filter, projection, opts);
  assert.deepEqual(viaIndex, viaScan, what);
  assert.ok(viaIndex.length > 0, what);
  assert.deepEqual(stages(e.queryPlanner.winningPlan), shape, what);
  const sort = findStage(e.queryPlanner.winningPlan, 'SORT');
  assert.equal(sort.type, 'default', what);
  assert.deepEqual(sort.sortPattern, opts.sort, what);
  assert.equal(Number(sort.memLimit), 104857600, what);
  if (opts.limit) assert.equal(Number(sort.limitAmount), opts.limit + (opts.skip || 0), what);
  else assert.equal(sort.limitAmount, undefined, what);
  assert.equal(e.executionStats.totalDocsExamined, 0, what);
  assert.equal(e.executionStats.nReturned, viaIndex.length, what);
  assert.ok(!stages(e.executionStats.executionStages).includes('FETCH'), what);
  return viaIndex.length;
}

/* Asserts the sorted find fetches (mongod does not cover it) and still gives the collection scan's documents. */
async function assertFetchedSort(c, filter, projection, opts) {
  const what = `${JSON.stringify(filter)} ${JSON.stringify(projection)} ${JSON.stringify(opts)}`;
  const { viaIndex, viaScan, e } = await both(c, filter, projection, opts);
  assert.deepEqual(viaIndex, viaScan, what);
  const s = stages(e.queryPlanner.winningPlan);
  assert.ok(s.includes('SORT') && !s.includes('PROJECTION_COVERED'), `${what}: ${s}`);
  if (s.includes('IXSCAN')) {
    assert.ok(s.includes('FETCH'), `${what}: ${s}`);
    assert.equal(findStage(e.queryPlanner.winningPlan, 'SORT').type, 'simple', what);
  }
  return s;
}

/*
 * {a: i, b: v}: a unique ascending int32 (the insertion order, so equal b's tie in a's order either way),
 * b every value of VALUES, twice (two a's each).
 */
async function pairs(name, keyPattern) {
  const c = srv.freshDb(name).collection('c');
  await c.createIndex(keyPattern);
  const docs = [];
  for (let i = 0; i < VALUES.length * 2; i++) docs.push({ a: new Int32(i), b: VALUES[(i * 7) % VALUES.length] });
  if (keyPattern.a < 0) docs.reverse(); // a descending index: its order is a's descending one
  // fields in key pattern order: the order a covered projection gives them
  await c.insertMany(docs.map((d) => Object.fromEntries(Object.keys(keyPattern).map((k) => [k, d[k]]))));
  return c;
}

h.test('a sort on the second key field sorts the keys: SORT (default) over PROJECTION_COVERED over IXSCAN', async () => {
  const c = await pairs('cvsort1', { a: 1, b: 1 });
  const n = VALUES.length * 2;
  const proj = { _id: 0, a: 1, b: 1 };
  const shape = ['SORT', 'PROJECTION_COVERED', 'IXSCAN'];
  assert.equal(await assertCoveredSort(c, { a: { $gte: 0 } }, proj, { sort: { b: 1 } }, shape), n);
  assert.equal(await assertCoveredSort(c, { a: { $gte: 0 } }, proj, { sort: { b: -1 } }, shape), n);
  assert.equal(await assertCoveredSort(c, { a: { $gt: 5, $lt: 40 } }, proj, { sort: { b: 1, a: -1 } }, shape), 34);
  assert.equal(await assertCoveredSort(c, { a: { $gt: 5 } }, { _id: 0, b: 1 }, { sort: { b: -1 } }, shape), n - 6);
  // the sort field outside the projection: the projection stays above the SORT (it would drop what SORT reads)
  assert.equal(await assertCoveredSort(c, { a: { $gte: 3 } }, { _id: 0, a: 1 }, { sort: { b: 1 } },
    ['PROJECTION_COVERED', 'SORT', 'IXSCAN']), n - 3);
  // an $in and a residual predicate the keys answer (the IXSCAN filter)
  assert.equal(await assertCoveredSort(c, { a: { $in: [1, 2, 3, 30, 31, 32, 50] }, b: { $ne: 5 } }, proj,
    { sort: { b: 1 } }, shape), 6);
  // the types themselves, as the documents hold them
  const got = await c.find({ a: { $lt: VALUES.length } }, { projection: { _id: 0, b: 1 }, sort: { b: 1 },
    promoteValues: false }).toArray();
  const ofFive = got.filter((d) => d.b !== null && typeof d.b === 'object' && d.b._bsontype &&
    ['Int32', 'Long', 'Double', 'Decimal128'].includes(d.b._bsontype) && Number(d.b.toString()) === 5);
  assert.deepEqual(ofFive.map((d) => d.b._bsontype).sort(), ['Decimal128', 'Decimal128', 'Double', 'Int32', 'Long']);
});

h.test('descending key fields decode and sort in both directions', async () => {
  const c = await pairs('cvsort2', { a: -1, b: -1 });
  const n = VALUES.length * 2;
  const proj = { _id: 0, a: 1, b: 1 };
  const shape = ['SORT', 'PROJECTION_COVERED', 'IXSCAN'];
  assert.equal(await assertCoveredSort(c, { a: { $gte: 0 } }, proj, { sort: { b: 1 } }, shape), n);
  assert.equal(await assertCoveredSort(c, { a: { $gte: 0 } }, proj, { sort: { b: -1 } }, shape), n);
  assert.equal(await assertCoveredSort(c, { a: { $lte: 20 } }, proj, { sort: { b: -1, a: 1 } }, shape), 21);
});

h.test('mixed types in the first key field: a sort the index order does not give, hinted whole-index scan', async () => {
  const c = srv.freshDb('cvsort3').collection('c');
  await c.createIndex({ a: 1, b: -1 });
  // a from VALUES (several values twice), b unique: sort {a: 1, b: 1} has no ties
  const docs = [];
  for (let i = 0; i < VALUES.length * 2; i++) docs.push({ a: VALUES[(i * 5) % VALUES.length], b: new Int32(i) });
  await c.insertMany(docs);
  const proj = { _id: 0, a: 1, b: 1 };
  const hint = { a: 1, b: -1 };
  const shape = ['SORT', 'PROJECTION_COVERED', 'IXSCAN'];
  const n = docs.length;
  assert.equal(await assertCoveredSort(c, {}, proj, { sort: { a: 1, b: 1 }, hint }, shape), n);
  assert.equal(await assertCoveredSort(c, {}, proj, { sort: { a: -1, b: -1 }, hint }, shape), n);
  assert.equal(await assertCoveredSort(c, {}, proj, { sort: { b: 1 }, hint }, shape), n);
  assert.equal(await assertCoveredSort(c, { a: { $gte: 0 } }, proj, { sort: { a: 1, b: 1 } }, shape), 30);
  // the collection scan's result compared only with itself would prove nothing: the order is the sort's
  const got = await c.find({}, { projection: proj, sort: { a: 1, b: 1 }, hint }).toArray();
  assert.equal(got[0].a, null);
  assert.deepEqual(got.slice(-2).map((d) => d.a), [new Date(5), new Date(5)].map((x) => x));
});

h.test('limit (top-k), skip and getMore batches: as the collection scan, with the plan shapes mongod gives', async () => {
  const c = await pairs('cvsort4', { a: 1, b: 1 });
  const proj = { _id: 0, a: 1, b: 1 };
  const f = { a: { $gte: 0 } };
  // top-k: the projection stays above the SORT, which carries limitAmount = limit + skip
  assert.equal(await assertCoveredSort(c, f, proj, { sort: { b: 1 }, limit: 7 }, ['PROJECTION_COVERED', 'SORT', 'IXSCAN']), 7);
  assert.equal(await assertCoveredSort(c, f, proj, { sort: { b: -1 }, limit: 5, skip: 4 },
    ['PROJECTION_COVERED', 'SKIP', 'SORT', 'IXSCAN']), 5);
  // a skip alone: SKIP over SORT over the pushed-down projection
  assert.equal(await assertCoveredSort(c, f, proj, { sort: { b: 1 }, skip: 9 },
    ['SKIP', 'SORT', 'PROJECTION_COVERED', 'IXSCAN']), VALUES.length * 2 - 9);
  // small batches: the first one sorts everything, getMores hand out the rest
  for (const batchSize of [1, 2, 5]) {
    const viaIndex = hex(await c.find(f, { projection: proj, sort: { b: 1, a: -1 }, batchSize, raw: true }).toArray());
    const viaScan = hex(await c.find(f, { projection: proj, sort: { b: 1, a: -1 }, batchSize, raw: true,
      hint: { $natural: 1 } }).toArray());
    assert.deepEqual(viaIndex, viaScan, `batchSize ${batchSize}`);
    assert.equal(viaIndex.length, VALUES.length * 2);
  }
  // a single-batch limit
  const one = await c.find(f, { projection: proj, sort: { b: -1 }, limit: -3 }).toArray();
  assert.equal(one.length, 3);
});

h.test('the memory budget and allowDiskUse hold for a covered sort as for a fetched one', { timeout: 120000 }, async () => {
  const c = srv.freshDb('cvsort5').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  const docs = [];
  for (let i = 0; i < 3000; i++) docs.push({ a: new Int32(i), b: `${(i * 7919) % 3000}`.padStart(60, '0') });
  await c.insertMany(docs);
  const admin = srv.client.db('admin');
  await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 50000 });
  try {
    const proj = { _id: 0, a: 1, b: 1 };
    const q = { a: { $gte: 0 } };
    const e = await c.find(q, { projection: proj, sort: { b: 1 } }).explain('queryPlanner');
    assert.deepEqual(stages(e.queryPlanner.winningPlan), ['SORT', 'PROJECTION_COVERED', 'IXSCAN']);
    // no disk: 292, as the fetched sort and the collection scan answer
    for (const hint of [undefined, { $natural: 1 }]) {
      await assert.rejects(c.find(q, { projection: proj, sort: { b: 1 }, allowDiskUse: false, hint }).toArray(),
        (err) => { assert.equal(err.code, 292); return true; });
    }
    // with disk: spills, same documents
    const viaIndex = hex(await c.find(q, { projection: proj, sort: { b: 1 }, allowDiskUse: true, raw: true, batchSize: 100 }).toArray());
    const viaScan = hex(await c.find(q, { projection: proj, sort: { b: 1 }, allowDiskUse: true, raw: true, batchSize: 100,
      hint: { $natural: 1 } }).toArray());
    assert.equal(viaIndex.length, 3000);
    assert.deepEqual(viaIndex, viaScan);
    // top-k within the budget needs no disk
    const top = await c.find(q, { projection: proj, sort: { b: -1 }, limit: 10, allowDiskUse: false }).toArray();
    assert.equal(top.length, 10);
    assert.equal(top[0].b, `${2999}`.padStart(60, '0'));
  } finally {
    await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 104857600 });
  }
});

h.test('null and missing: a missing field reads as null from the keys, as mongod\'s covered plans give it', async () => {
  const c = srv.freshDb('cvsort6').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany([{ a: 1, b: 3 }, { a: 2, b: null }, { a: 3 }, { a: 4, b: 1 }, { a: 5, b: null }]);
  const opts = { projection: { _id: 0, a: 1, b: 1 }, sort: { b: 1 } };
  const got = await c.find({ a: { $gte: 1 } }, opts).toArray();
  assert.deepEqual(got, [{ a: 2, b: null }, { a: 3, b: null }, { a: 5, b: null }, { a: 4, b: 1 }, { a: 1, b: 3 }]);
  const scan = await c.find({ a: { $gte: 1 } }, { ...opts, hint: { $natural: 1 } }).toArray();
  assert.deepEqual(scan, [{ a: 2, b: null }, { a: 3 }, { a: 5, b: null }, { a: 4, b: 1 }, { a: 1, b: 3 }]);
  const e = await c.find({ a: { $gte: 1 } }, opts).explain('executionStats');
  assert.equal(e.executionStats.totalDocsExamined, 0);
});

h.test('dotted key fields: SORT over PROJECTION_DEFAULT, nested as the keys rehydrate', async () => {
  const c = srv.freshDb('cvsort7').collection('c');
  await c.createIndex({ a: 1, 'b.c': 1 });
  await c.insertMany([
    { a: 0, b: { c: 1 } }, { a: 1, b: { c: 2 } }, { a: 2, b: { c: 'A' } }, { a: 3, b: { c: 'a' } }, { a: 4, b: { c: 3 } },
  ]);
  assert.equal(await assertCoveredSort(c, { a: { $gt: 0 } }, { _id: 0, a: 1, 'b.c': 1 }, { sort: { 'b.c': 1 } },
    ['SORT', 'PROJECTION_DEFAULT', 'IXSCAN']), 4);
  const got = await c.find({ a: { $gt: 0 } }, { projection: { _id: 0, a: 1, 'b.c': 1 }, sort: { 'b.c': 1 } }).toArray();
  assert.deepEqual(got, [{ a: 1, b: { c: 2 } }, { a: 4, b: { c: 3 } }, { a: 2, b: { c: 'A' } }, { a: 3, b: { c: 'a' } }]);
});

h.test('a collation sorts the decoded keys by its rules, as the fetched sort does', async () => {
  const c = srv.freshDb('cvsort8').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany([{ a: 1, b: 'b' }, { a: 2, b: 'B' }, { a: 3, b: 'a' }, { a: 4, b: 'A' }, { a: 5, b: 10 }, { a: 6, b: 9 }]);
  const collation = { locale: 'en_US', strength: 3 };
  const opts = { projection: { _id: 0, a: 1, b: 1 }, sort: { b: 1 }, collation };
  const got = await c.find({ a: { $gte: 1 } }, opts).toArray();
  assert.deepEqual(got.map((d) => d.b), [9, 10, 'a', 'A', 'b', 'B']);
  const scan = await c.find({ a: { $gte: 1 } }, { ...opts, hint: { $natural: 1 } }).toArray();
  assert.deepEqual(got, scan);
  const e = await c.find({ a: { $gte: 1 } }, opts).explain('executionStats');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['SORT', 'PROJECTION_COVERED', 'IXSCAN']);
  assert.equal(e.executionStats.totalDocsExamined, 0);
});

h.test('what mongod does not cover still fetches: a sort field outside the index, a multikey sort field', async () => {
  const c = srv.freshDb('cvsort9').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany([{ a: 1, b: 1, c: 3 }, { a: 2, b: 2, c: 1 }, { a: 3, b: 1, c: 2 }]);
  // sort by c: FETCH, and the projection that keeps c goes below the (simple) SORT
  let s = await assertFetchedSort(c, { a: { $gte: 1 } }, { _id: 0, b: 1, c: 1 }, { sort: { c: 1 } });
  assert.deepEqual(s, ['SORT', 'PROJECTION_SIMPLE', 'FETCH', 'IXSCAN']);
  s = await assertFetchedSort(c, { a: { $gte: 1 } }, { _id: 0, b: 1 }, { sort: { c: 1 } });
  assert.deepEqual(s, ['PROJECTION_SIMPLE', 'SORT', 'FETCH', 'IXSCAN']);
  // a sort by $meta is no key field
  // b becomes multikey: its sort cannot be read from the keys
  await c.insertOne({ a: 4, b: [0, 5] });
  s = await assertFetchedSort(c, { a: { $gte: 1 } }, { _id: 0, b: 1 }, { sort: { b: 1 } });
  const got = await c.find({ a: { $gte: 1 } }, { projection: { _id: 0, b: 1 }, sort: { b: 1 } }).toArray();
  assert.deepEqual(got, [{ b: [0, 5] }, { b: 1 }, { b: 1 }, { b: 2 }]);
  // a only multikey: still covered when neither projected nor sorted (b's path holds no array)
  const d = srv.freshDb('cvsort9b').collection('c');
  await d.createIndex({ a: 1, b: 1 });
  await d.insertMany([{ a: 1, b: 2 }, { a: 2, b: 1 }]);
  assert.equal(await assertCoveredSort(d, { a: { $gte: 1 } }, { _id: 0, a: 1, b: 1 }, { sort: { b: 1 } },
    ['SORT', 'PROJECTION_COVERED', 'IXSCAN']), 2);
});

h.test('a field that becomes multikey while the cursors are open: same documents as the collection scan', async () => {
  const c = await pairs('cvsort10', { a: 1, b: 1 });
  const proj = { _id: 0, a: 1, b: 1 };
  const f = { a: { $gte: 0 } };
  const viaIndex = c.find(f, { projection: proj, sort: { b: 1 }, batchSize: 3, raw: true });
  const viaScan = c.find(f, { projection: proj, sort: { b: 1 }, batchSize: 3, raw: true, hint: { $natural: 1 } });
  const first = [hex([await viaIndex.next()]), hex([await viaScan.next()])];
  assert.deepEqual(first[0], first[1]);
  await c.insertOne({ a: 1000, b: [1, 2] });
  const rest = [hex(await viaIndex.toArray()), hex(await viaScan.toArray())];
  assert.deepEqual(rest[0], rest[1]);
  assert.equal(rest[0].length, VALUES.length * 2 - 1);
  // a new find now fetches, and still agrees with the collection scan
  await assertFetchedSort(c, f, proj, { sort: { b: 1 } });
});

h.test('an aggregate\'s $sort then $project after its $match sorts the decoded keys', async () => {
  const c = await pairs('cvsort11', { a: 1, b: 1 });
  const n = VALUES.length * 2;
  const pipelines = [
    [{ $match: { a: { $gte: 0 } } }, { $sort: { b: 1 } }, { $project: { _id: 0, a: 1, b: 1 } }],
    [{ $match: { a: { $gte: 3 } } }, { $sort: { b: -1, a: 1 } }, { $skip: 2 }, { $limit: 20 }, { $project: { _id: 0, b: 1 } }],
  ];
  for (const p of pipelines) {
    const viaIndex = hex(await c.aggregate(p, { raw: true, batchSize: 4 }).toArray());
    const viaScan = hex(await c.aggregate(p, { raw: true, batchSize: 4, hint: { $natural: 1 } }).toArray());
    assert.deepEqual(viaIndex, viaScan, JSON.stringify(p));
    assert.ok(viaIndex.length === n || viaIndex.length === 20, JSON.stringify(p));
    const e = await c.aggregate(p).explain('executionStats');
    const cursor = e.stages[0].$cursor;
    assert.equal(cursor.executionStats.totalDocsExamined, 0, JSON.stringify(e));
    assert.deepEqual(stages(cursor.queryPlanner.winningPlan), ['IXSCAN'], JSON.stringify(cursor.queryPlanner));
    const q = await c.aggregate(p).explain('queryPlanner');
    assert.deepEqual(stages(q.stages[0].$cursor.queryPlanner.winningPlan), ['IXSCAN']);
  }
  // a stage reading other fields between them: fetched
  const p = [{ $match: { a: { $gte: 0 } } }, { $sort: { b: 1 } }, { $addFields: { z: 1 } }, { $project: { _id: 0, b: 1 } }];
  const e = await c.aggregate(p).explain('executionStats');
  assert.ok(e.stages[0].$cursor.executionStats.totalDocsExamined > 0);
});

h.test('an index led by another field: a sort by its second field over a range of its first', async () => {
  const c = await pairs('cvsort12', { b: 1, a: 1 });
  // sort by a over an index led by b: a blocking sort of keys, b's range the bounds
  assert.equal(await assertCoveredSort(c, { b: { $gte: 0 } }, { _id: 0, a: 1, b: 1 }, { sort: { a: -1 } },
    ['SORT', 'PROJECTION_COVERED', 'IXSCAN']), 30);
});

/*
 * Projections with expressions (mongod's analyzeProjection: every path the
 * projection reads is provided by the IXSCAN, so no FETCH): PROJECTION_DEFAULT
 * over the IXSCAN, the expressions evaluated on the decoded keys.
 */
async function assertCoveredExpr(c, filter, projection, opts = {}, shape = ['PROJECTION_DEFAULT', 'IXSCAN']) {
  const what = `${JSON.stringify(filter)} ${JSON.stringify(projection)} ${JSON.stringify(opts)}`;
  const { viaIndex, viaScan, e } = await both(c, filter, projection, opts);
  if (opts.sort) assert.deepEqual(viaIndex, viaScan, what);
  else assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), what);
  assert.ok(viaIndex.length > 0, what);
  assert.deepEqual(stages(e.queryPlanner.winningPlan), shape, what);
  assert.equal(e.executionStats.totalDocsExamined, 0, what);
  assert.equal(e.executionStats.nReturned, viaIndex.length, what);
  return viaIndex.length;
}

const NUMS = [new Int32(5), Long.fromNumber(5), new Double(5), D('5'), D('5.000'), new Double(5.5), D('5.5'),
  new Double(-0), new Int32(0), D('-0'), Long.fromString('9007199254740993'), new Double(0.1), D('0.1'),
  new Int32(-7), Long.fromNumber(-7), new Int32(2147483647)];

h.test('expressions over key fields are covered: PROJECTION_DEFAULT over IXSCAN, evaluated on the keys', async () => {
  const c = srv.freshDb('cvexpr1').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  const docs = NUMS.map((b, i) => ({ a: new Int32(i), b }));
  await c.insertMany(docs);
  const f = { a: { $gte: 0 } };
  const n = NUMS.length;
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, s: { $add: ['$a', 1] } }), n);
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, s: { $add: ['$a', '$b'] }, m: { $multiply: ['$b', 2] } }), n);
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, x: '$b' }), n);
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, a: 1, t: { $type: '$b' }, lit: { $literal: 5 }, k: 'const' }), n);
  assert.equal(await assertCoveredExpr(c, { a: { $lt: 5 } }, { _id: 0, only: { $literal: '$notAPath' } }), 5);
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, cmp: { $cmp: ['$b', 5] }, str: { $toString: '$b' } }), n);
  // a value set below a key field: it depends on that field, which the keys give
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, 'b.y': '$a', a: 1 }), n);
  // with a sort the index gives, and with a blocking sort (the projection stays above: it has expressions)
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, s: { $add: ['$a', 1] } }, { sort: { a: -1 } }), n);
  assert.equal(await assertCoveredExpr(c, f, { _id: 0, a: 1, d: { $subtract: ['$b', 1] } }, { sort: { b: 1, a: 1 } },
    ['PROJECTION_DEFAULT', 'SORT', 'IXSCAN']), n);
  // the values, types and all
  const got = await c.find({ a: { $lt: 3 } }, { projection: { _id: 0, s: { $add: ['$b', 1] } }, sort: { a: 1 },
    promoteValues: false }).toArray();
  assert.deepEqual(got.map((d) => [d.s._bsontype, d.s.toString()]), [['Int32', '6'], ['Long', '6'], ['Double', '6']]);
});

h.test('expressions reading a field outside the index, $$ROOT or $$CURRENT still fetch', async () => {
  const c = srv.freshDb('cvexpr2').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany([{ a: 1, b: 2, c: 3 }, { a: 2, b: 3, c: 4 }]);
  const f = { a: { $gte: 1 } };
  // (a value set at "c.y" depends on c, which may be an array: mongod's getRequiredFields has c)
  for (const proj of [{ _id: 0, s: { $add: ['$a', '$c'] } }, { _id: 0, r: '$$ROOT' }, { _id: 0, r: '$$CURRENT.a' },
    { s: { $add: ['$a', 1] } }, { _id: 0, s: '$a.x' }, { _id: 0, b: { $slice: 1 } }, { _id: 0, 'c.y': '$a' },
    { _id: 0, c: { y: { $add: ['$a', 1] } } }, { _id: 0, a: 1, z: { w: { $literal: 1 } } }]) {
    const { viaIndex, viaScan, e } = await both(c, f, proj);
    assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), JSON.stringify(proj));
    const s = stages(e.queryPlanner.winningPlan);
    assert.ok(s.includes('FETCH'), `${JSON.stringify(proj)}: ${s}`);
    assert.ok(e.executionStats.totalDocsExamined > 0, JSON.stringify(proj));
  }
  // a multikey path read by an expression: fetched
  await c.insertOne({ a: 3, b: [1, 2] });
  const { viaIndex, viaScan, e } = await both(c, f, { _id: 0, s: { $size: { $ifNull: [[], '$b'] } }, x: '$b' });
  assert.deepEqual([...viaIndex].sort(), [...viaScan].sort());
  assert.ok(stages(e.queryPlanner.winningPlan).includes('FETCH'));
});

h.test('an aggregate\'s $project with expressions over key fields is covered too', async () => {
  const c = srv.freshDb('cvexpr3').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany(NUMS.map((b, i) => ({ a: new Int32(i), b })));
  const pipelines = [
    [{ $match: { a: { $gte: 2 } } }, { $project: { _id: 0, s: { $add: ['$a', '$b'] } } }],
    [{ $match: { a: { $gte: 2 } } }, { $sort: { b: -1, a: 1 } }, { $project: { _id: 0, b: 1, t: { $type: '$b' } } }],
  ];
  for (const p of pipelines) {
    const viaIndex = hex(await c.aggregate(p, { raw: true }).toArray());
    const viaScan = hex(await c.aggregate(p, { raw: true, hint: { $natural: 1 } }).toArray());
    if (p.length === 3) assert.deepEqual(viaIndex, viaScan, JSON.stringify(p));
    else assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), JSON.stringify(p));
    assert.equal(viaIndex.length, NUMS.length - 2);
    const e = await c.aggregate(p).explain('executionStats');
    const es = e.stages ? e.stages[0].$cursor.executionStats : e.executionStats;
    assert.equal(es.totalDocsExamined, 0, JSON.stringify(e));
  }
});

h.test('an expression\'s key field that becomes multikey mid-cursor: the rest is fetched, as the collection scan gives it', async () => {
  const c = srv.freshDb('cvexpr4').collection('c');
  await c.createIndex({ a: 1, b: 1 });
  await c.insertMany(NUMS.map((b, i) => ({ a: new Int32(i), b })));
  const proj = { _id: 0, a: 1, x: '$b', s: { $add: ['$a', 1] } };
  // no sort: the index scan streams in a's order, the collection scan in the insertion order, the same
  const opts = { projection: proj, batchSize: 2, raw: true };
  const e = await c.find({ a: { $gte: 0 } }, { projection: proj }).explain('queryPlanner');
  assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_DEFAULT', 'IXSCAN']);
  const viaIndex = c.find({ a: { $gte: 0 } }, opts);
  const viaScan = c.find({ a: { $gte: 0 } }, { ...opts, hint: { $natural: 1 } });
  const head = [[], []];
  for (let i = 0; i < 3; i++) {
    head[0].push(await viaIndex.next());
    head[1].push(await viaScan.next());
  }
  assert.deepEqual(hex(head[0]), hex(head[1]));
  // b becomes multikey; the new document sorts last by a in both scans (the scan's last record too)
  await c.insertOne({ a: new Int32(1000), b: [new Int32(1), new Int32(2)] });
  const rest = [hex(await viaIndex.toArray()), hex(await viaScan.toArray())];
  assert.deepEqual(rest[0], rest[1]);
  assert.equal(rest[0].length, NUMS.length - 3 + 1);
  const last = await c.find({ a: 1000 }, { projection: proj }).toArray();
  assert.deepEqual(last, [{ a: 1000, x: [1, 2], s: 1001 }]);
});

h.test('one bound on a multikey field is exact (mongod\'s planner): the other key fields are covered, ids de-duplicated', async () => {
  // mongod's covered_index_sort_no_fetch_optimization.js: {a: [1]} makes a multikey, b.c is still covered
  const c = srv.freshDb('cvmk1').collection('c');
  await c.createIndex({ a: 1, 'b.c': 1 });
  await c.insertMany([
    { a: 0, b: { c: 1 } }, { a: 1, b: { c: 2 } }, { a: 2, b: { c: 'A' } }, { a: 3, b: { c: 'a' } }, { a: 4, b: { c: 3 } },
    { a: [1], b: { c: 1 } }, { a: [2, 7, 9], b: { c: 0 } },
  ]);
  assert.equal(await assertCoveredSort(c, { a: { $gt: 0 } }, { 'b.c': 1, _id: 0 }, { sort: { 'b.c': 1 } },
    ['SORT', 'PROJECTION_DEFAULT', 'IXSCAN']), 6);
  const got = await c.find({ a: { $gt: 0 } }, { projection: { 'b.c': 1, _id: 0 }, sort: { 'b.c': 1 } }).toArray();
  assert.deepEqual(got, [{ b: { c: 0 } }, { b: { c: 1 } }, { b: { c: 2 } }, { b: { c: 3 } }, { b: { c: 'A' } }, { b: { c: 'a' } }]);
  // an equality and an $in too
  for (const f of [{ a: 7 }, { a: { $in: [1, 9] } }, { a: { $lte: 2 } }]) {
    const { viaIndex, viaScan, e } = await both(c, f, { 'b.c': 1, _id: 0 });
    assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), JSON.stringify(f));
    assert.deepEqual(stages(e.queryPlanner.winningPlan), ['PROJECTION_DEFAULT', 'IXSCAN'], JSON.stringify(f));
    assert.equal(e.executionStats.totalDocsExamined, 0, JSON.stringify(f));
  }
  // two bounds on it (their elements may meet each apart), or the multikey field projected: fetched
  for (const [f, proj] of [[{ a: { $gt: 1, $lt: 3 } }, { 'b.c': 1, _id: 0 }], [{ a: { $gt: 0 } }, { a: 1, _id: 0 }]]) {
    const { viaIndex, viaScan, e } = await both(c, f, proj);
    assert.deepEqual([...viaIndex].sort(), [...viaScan].sort(), JSON.stringify(f));
    assert.ok(stages(e.queryPlanner.winningPlan).includes('FETCH'), JSON.stringify(f));
  }
});
