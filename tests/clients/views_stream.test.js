'use strict';
// Views and the stages that used to collect their whole input ($lookup,
// $sample, $count) run through the streaming pipeline: a read of a view is
// the view's pipeline (resolved through views on views) followed by the
// reader's stages, over the underlying collection, with the same memory
// budgets and cursors as aggregate over a collection. Through the Node driver.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const SMALL_BUDGET = 100000; // bytes
const DEFAULT_BUDGET = 104857600;

async function setSortBudget(bytes) {
  await srv.client.db('admin').command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: bytes });
}

async function filled(db, n, pad = 200) {
  const c = db.collection('base');
  const filler = 'x'.repeat(pad);
  const docs = [];
  for (let i = 0; i < n; i++) docs.push({ _id: i, g: i % 10, v: (i * 7919) % 100003, pad: filler });
  await c.insertMany(docs);
  return c;
}

h.test('a $sort over a view keeps the sort memory budget: 292 without disk use, spills with it', async () => {
  const db = srv.freshDb('vs_budget');
  await filled(db, 3000);
  await db.createCollection('even', { viewOn: 'base', pipeline: [{ $match: { g: { $in: [0, 2, 4, 6, 8] } } }] });
  await setSortBudget(SMALL_BUDGET);
  try {
    await assert.rejects(
      db.collection('even').aggregate([{ $sort: { v: 1 } }], { allowDiskUse: false }).toArray(),
      (e) => e.code === 292 && e.codeName === 'QueryExceededMemoryLimitNoDiskUseAllowed');
    await assert.rejects(
      db.collection('even').find({}, { allowDiskUse: false }).sort({ v: -1 }).toArray(),
      (e) => e.code === 292);
    const sorted = await db.collection('even').aggregate([{ $sort: { v: 1 } }, { $project: { pad: 0 } }]).toArray();
    assert.equal(sorted.length, 1500);
    for (let i = 1; i < sorted.length; i++) assert.ok(sorted[i - 1].v <= sorted[i].v, `sorted at ${i}`);
    assert.ok(sorted.every((d) => d.g % 2 === 0));
  } finally {
    await setSortBudget(DEFAULT_BUDGET);
  }
});

h.test('find on a view returns a cursor that resumes across getMore, with filter, sort, skip, limit and projection', async () => {
  const db = srv.freshDb('vs_find');
  await filled(db, 2000);
  await db.createCollection('small', { viewOn: 'base', pipeline: [{ $match: { v: { $lt: 50000 } } }, { $project: { pad: 0 } }] });
  const all = await db.collection('base').find({ v: { $lt: 50000 } }, { projection: { pad: 0 } }).toArray();
  const expect = all.filter((d) => d.g === 3).sort((a, b) => a.v - b.v).slice(5, 5 + 40).map((d) => ({ _id: d._id, v: d.v }));
  const cur = db.collection('small').find({ g: 3 }, { projection: { _id: 1, v: 1 } }).sort({ v: 1 }).skip(5).limit(40).batchSize(7);
  const got = await cur.toArray();
  assert.deepEqual(got, expect);

  // The first batch is partial: the rest comes by getMore from the view's cursor.
  const first = await db.command({ find: 'small', filter: {}, batchSize: 3 });
  assert.equal(first.cursor.firstBatch.length, 3);
  assert.notEqual(Number(first.cursor.id), 0);
  assert.equal(first.cursor.ns, `${db.databaseName}.small`);
  let n = 3;
  let id = h.cursorId(first.cursor.id);
  while (Number(id) !== 0) {
    const more = await db.command({ getMore: id, collection: 'small', batchSize: 500 });
    n += more.cursor.nextBatch.length;
    id = h.cursorId(more.cursor.id);
  }
  assert.equal(n, all.length);
  assert.ok(first.cursor.firstBatch.every((d) => d.pad === undefined), 'the view projection applies');
});

h.test('count, countDocuments and distinct on a view, and views on views', async () => {
  const db = srv.freshDb('vs_count');
  await filled(db, 1000);
  await db.createCollection('v1', { viewOn: 'base', pipeline: [{ $match: { g: { $lt: 5 } } }] });
  await db.createCollection('v2', { viewOn: 'v1', pipeline: [{ $addFields: { h: { $mod: ['$_id', 3] } } }] });
  assert.equal((await db.command({ count: 'v2', query: { h: 0 } })).n, [...Array(1000).keys()].filter((i) => i % 10 < 5 && i % 3 === 0).length);
  assert.equal((await db.command({ count: 'v2', query: {}, skip: 10, limit: 7 })).n, 7);
  assert.equal(await db.collection('v2').countDocuments({ g: 4 }), 100);
  assert.deepEqual((await db.collection('v2').distinct('h')).sort(), [0, 1, 2]);
  assert.deepEqual((await db.collection('v2').distinct('g', { h: 1 })).sort(), [0, 1, 2, 3, 4]);
  const counted = await db.collection('v2').aggregate([{ $count: 'n' }]).toArray();
  assert.deepEqual(counted, [{ n: 500 }]);
});

h.test('a chain of views deeper than 20 answers 165 ViewDepthLimitExceeded when it is defined, either way', async () => {
  const db = srv.freshDb('vs_depth');
  await db.collection('base').insertOne({ _id: 1 });
  let on = 'base';
  for (let i = 1; i <= 20; i++) {
    await db.createCollection(`d${i}`, { viewOn: on, pipeline: [] });
    on = `d${i}`;
  }
  assert.equal((await db.collection('d20').find().toArray()).length, 1);
  const msg = /^View depth limit exceeded; maximum depth is 20$/;
  await h.expectCode(db.createCollection('d21', { viewOn: 'd20', pipeline: [] }), 165, msg);
  // From above: a chain of views on a name that does not exist yet, then that name as a view.
  on = 'top';
  for (let i = 1; i <= 20; i++) {
    await db.createCollection(`u${i}`, { viewOn: on, pipeline: [] });
    on = `u${i}`;
  }
  await h.expectCode(db.createCollection('top', { viewOn: 'base', pipeline: [] }), 165, msg);
  // Through a $lookup's collection as well as through viewOn.
  await h.expectCode(db.createCollection('d21', { viewOn: 'base', pipeline: [{ $lookup: { from: 'd20', pipeline: [], as: 'x' } }] }), 165, msg);
  assert.deepEqual((await db.listCollections({ name: { $in: ['d21', 'top'] } }).toArray()), [], 'nothing refused was created');
});

h.test('view cycles through pipeline stages, and views whose collations differ, are refused as mongod\'s view graph refuses them', async () => {
  const db = srv.freshDb('vs_graph');
  await db.collection('base').insertOne({ _id: 1, s: 'a' });
  await db.createCollection('v1', { viewOn: 'base', pipeline: [] });
  const ns = (...names) => new RegExp(`^${names.map((n) => `${db.databaseName}\\.${n}`).join(' => ')}$`);
  // Each stage that reads a collection closes a cycle back to v1 (5 GraphContainsCycle) at create and at collMod.
  const back = [
    { $lookup: { from: 'v2', pipeline: [], as: 'x' } },
    { $lookup: { from: 'base', localField: 's', foreignField: 's', as: 'x' } },
    { $unionWith: { coll: 'v2' } },
    { $graphLookup: { from: 'v2', startWith: '$s', connectFromField: 's', connectToField: 's', as: 'x' } },
    { $facet: { f: [{ $lookup: { from: 'base', pipeline: [{ $unionWith: 'v2' }], as: 'x' } }] } },
  ];
  await db.createCollection('v2', { viewOn: 'base', pipeline: [{ $lookup: { from: 'v1', pipeline: [], as: 'y' } }] });
  for (const st of back) {
    if (st.$lookup && st.$lookup.from === 'base' && !st.$lookup.pipeline) continue; /* no cycle: reads base only */
    const e = await db.command({ collMod: 'v1', viewOn: 'base', pipeline: [st] }).then(() => null, (x) => x);
    assert.equal(e && e.code, 5, JSON.stringify(st));
    assert.ok(e.message.startsWith('View cycle detected: ') && ns('v1', 'v1', 'v2', 'v1').test(e.message.slice(21)), e.message);
  }
  const se = await db.createCollection('self', { viewOn: 'base', pipeline: [{ $unionWith: 'self' }] }).then(() => null, (x) => x);
  assert.equal(se && se.code, 5);
  assert.ok(ns('self', 'self', 'self').test(se.message.slice(21)), se.message);
  // A stage that reads no view in a loop is fine, and the view still works.
  await db.command({ collMod: 'v1', viewOn: 'base', pipeline: [back[1]] });
  assert.equal((await db.collection('v1').find().toArray())[0].x.length, 1);
  // Collations: a view reading a view with another collation (167), directly or through a stage.
  await db.createCollection('fr', { viewOn: 'base', pipeline: [], collation: { locale: 'fr' } });
  await h.expectCode(db.createCollection('plain', { viewOn: 'fr', pipeline: [] }), 167,
    new RegExp(`^View ${db.databaseName}\\.plain has conflicting collation with view ${db.databaseName}\\.fr$`));
  await h.expectCode(db.createCollection('plain', { viewOn: 'base', pipeline: [{ $lookup: { from: 'fr', pipeline: [], as: 'z' } }] }), 167,
    new RegExp(`^View ${db.databaseName}\\.plain has conflicting collation with view ${db.databaseName}\\.fr$`));
  await db.createCollection('fr2', { viewOn: 'fr', pipeline: [], collation: { locale: 'fr' } });
  // From above: a French view on a name that becomes a view without a collation.
  await db.createCollection('frtop', { viewOn: 'later', pipeline: [], collation: { locale: 'fr' } });
  await h.expectCode(db.createCollection('later', { viewOn: 'base', pipeline: [] }), 167,
    new RegExp(`^View ${db.databaseName}\\.later has a collation that does not match the collation of view ${db.databaseName}\\.frtop$`));
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
  assert.deepEqual(names, ['base', 'fr', 'fr2', 'frtop', 'system.views', 'v1', 'v2']);
});

h.test('collMod changes a view\'s definition (viewOn and pipeline together, as mongod); a cycle of views is 5 GraphContainsCycle, at create and at collMod', async () => {
  const db = srv.freshDb('vs_collmod');
  await db.collection('a').insertMany([{ _id: 1, k: 'x' }, { _id: 2, k: 'y' }]);
  await db.collection('b').insertMany([{ _id: 10, k: 'x' }]);
  await db.createCollection('v', { viewOn: 'a', pipeline: [{ $match: { k: 'x' } }] });
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 1, k: 'x' }]);
  await db.command({ collMod: 'v', viewOn: 'b', pipeline: [{ $project: { k: 0 } }] });
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 10 }]);
  const [info] = await db.listCollections({ name: 'v' }).toArray();
  assert.equal(info.type, 'view');
  assert.deepEqual(info.options, { viewOn: 'b', pipeline: [{ $project: { k: 0 } }] });
  // Both or neither; only views; the pipeline is checked as create checks it.
  await h.expectCode(db.command({ collMod: 'v', viewOn: 'a' }), 72, /^must specify both 'viewOn' and 'pipeline' when applying collMod to a view$/);
  await h.expectCode(db.command({ collMod: 'v', pipeline: [] }), 72);
  await h.expectCode(db.command({ collMod: 'a', viewOn: 'b', pipeline: [] }), 72, /^option only supported on a view: viewOn$/);
  await h.expectCode(db.command({ collMod: 'v', viewOn: 'a', pipeline: [{ $out: 'z' }] }), 167);
  await h.expectCode(db.command({ collMod: 'v', viewOn: 5, pipeline: [] }), 14);
  // Cycles: v2 on v, then v on v2 (collMod) or a view on itself (create).
  await db.createCollection('v2', { viewOn: 'v', pipeline: [] });
  await h.expectCode(db.command({ collMod: 'v', viewOn: 'v2', pipeline: [] }), 5, /^View cycle detected: /);
  await h.expectCode(db.createCollection('self', { viewOn: 'self', pipeline: [] }), 5);
  await db.createCollection('w1', { viewOn: 'w2', pipeline: [] }); /* w2 does not exist yet */
  await h.expectCode(db.createCollection('w2', { viewOn: 'w1', pipeline: [] }), 5);
  // Nothing of the refused commands stuck.
  assert.deepEqual(await db.collection('v2').find().toArray(), [{ _id: 10 }]);
});

h.test('$lookup streams its input: equality (with an index, arrays, missing fields), from a view, and let + pipeline', async () => {
  const db = srv.freshDb('vs_lookup');
  const orders = db.collection('orders');
  const items = db.collection('items');
  await items.createIndex({ sku: 1 });
  const it = [];
  for (let i = 0; i < 500; i++) it.push({ _id: i, sku: `s${i % 100}`, qty: i });
  it.push({ _id: 'nosku', qty: -1 });
  await items.insertMany(it);
  const od = [];
  for (let i = 0; i < 300; i++) od.push({ _id: i, sku: i % 3 === 0 ? [`s${i % 100}`, `s${(i + 1) % 100}`] : `s${i % 100}` });
  od.push({ _id: 'none' }); // missing localField matches foreign docs with a missing/null sku
  await orders.insertMany(od);
  const out = await orders.aggregate([
    { $lookup: { from: 'items', localField: 'sku', foreignField: 'sku', as: 'm' } },
    { $project: { n: { $size: '$m' }, ids: '$m._id' } },
  ]).toArray();
  assert.equal(out.length, 301);
  for (const d of out) {
    if (d._id === 'none') {
      assert.deepEqual(d.ids, ['nosku']);
    } else {
      const want = d._id % 3 === 0 ? 10 : 5;
      assert.equal(d.n, want, `order ${d._id}`);
    }
  }
  await db.createCollection('bigItems', { viewOn: 'items', pipeline: [{ $match: { qty: { $gte: 250 } } }] });
  const fromView = await orders.aggregate([
    { $match: { _id: 7 } },
    { $lookup: { from: 'bigItems', localField: 'sku', foreignField: 'sku', as: 'm' } },
  ]).toArray();
  assert.deepEqual(fromView[0].m.map((m) => m._id).sort((a, b) => a - b), [307, 407]);
  const sub = await orders.aggregate([
    { $match: { _id: { $in: [1, 2] } } },
    { $lookup: { from: 'items', let: { s: '$sku' }, pipeline: [{ $match: { $expr: { $eq: ['$sku', '$$s'] } } }, { $count: 'c' }], as: 'k' } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(sub.map((d) => d.k), [[{ c: 5 }], [{ c: 5 }]]);
});

h.test('$sample keeps only its sample: distinct documents from the input, all of them when the input is smaller', async () => {
  const db = srv.freshDb('vs_sample');
  await filled(db, 2000, 10);
  // The input passes a stage $sample cannot see through, so the reservoir runs (not a pushed-down random cursor).
  const s = await db.collection('base').aggregate([{ $match: { g: 1 } }, { $addFields: { k: 1 } }, { $sample: { size: 25 } }]).toArray();
  assert.equal(s.length, 25);
  assert.equal(new Set(s.map((d) => d._id)).size, 25);
  assert.ok(s.every((d) => d.g === 1 && d.k === 1));
  const all = await db.collection('base').aggregate([{ $match: { g: 2 } }, { $sample: { size: 1000 } }]).toArray();
  assert.equal(all.length, 200);
  assert.equal(new Set(all.map((d) => d._id)).size, 200);
  // Over many runs, every document of a small input gets picked sometimes.
  const seen = new Set();
  for (let r = 0; r < 60; r++) {
    for (const d of await db.collection('base').aggregate([{ $match: { _id: { $lt: 10 } } }, { $sample: { size: 2 } }]).toArray()) seen.add(d._id);
  }
  assert.equal(seen.size, 10);
  // $count of nothing is no document at all, as in MongoDB.
  assert.deepEqual(await db.collection('base').aggregate([{ $match: { g: 99 } }, { $count: 'n' }]).toArray(), []);
});

h.test('find with a sort no index provides is a budgeted blocking sort: 292 without disk use, spills with it, find projections still apply', async () => {
  const db = srv.freshDb('vs_findsort');
  const c = await filled(db, 3000);
  await c.updateMany({}, [{ $set: { arr: [{ k: 1, w: '$v' }, { k: 2, w: '$g' }] } }]);
  await setSortBudget(SMALL_BUDGET);
  try {
    await assert.rejects(c.find({}, { allowDiskUse: false }).sort({ v: 1 }).toArray(), (e) => e.code === 292);
    // An index that provides the order needs no blocking sort, even without disk use.
    await c.createIndex({ v: 1 });
    assert.equal((await c.find({}, { allowDiskUse: false }).sort({ v: 1 }).limit(5).toArray()).length, 5);
    await c.dropIndex('v_1');
    // A top-k sort (limit) fits in the budget without disk.
    const top = await c.find({ g: 2 }, { allowDiskUse: false, projection: { _id: 1, v: 1 } }).sort({ v: -1 }).limit(3).toArray();
    const want = [...Array(3000).keys()].filter((i) => i % 10 === 2).map((i) => ({ _id: i, v: (i * 7919) % 100003 }))
      .sort((a, b) => b.v - a.v).slice(0, 3);
    assert.deepEqual(top, want);
    // With disk use (the default) the whole sort spills and the positional projection still sees the filter.
    const got = await c.find({ 'arr.k': 2 }, { projection: { 'arr.$': 1, v: 1 } }).sort({ v: 1, _id: 1 }).skip(10).batchSize(100).toArray();
    assert.equal(got.length, 2990);
    for (let i = 1; i < got.length; i++) assert.ok(got[i - 1].v <= got[i].v);
    assert.ok(got.every((d) => d.arr.length === 1 && d.arr[0].k === 2 && d.pad === undefined));
  } finally {
    await setSortBudget(DEFAULT_BUDGET);
  }
});

h.test('explain on a view shows the plan that runs: the resolved pipeline over the view\'s collection, using its indexes', async () => {
  const db = srv.freshDb('vs_explain');
  const c = await filled(db, 500, 10);
  await c.createIndex({ v: 1 });
  await db.createCollection('lowv', { viewOn: 'base', pipeline: [{ $match: { v: { $lt: 1000 } } }] });
  const ex = await db.collection('lowv').aggregate([{ $limit: 2 }]).explain('queryPlanner');
  const plan = ex.stages ? ex.stages[0].$cursor.queryPlanner : ex.queryPlanner;
  assert.equal(plan.namespace, `${db.databaseName}.base`);
  assert.match(JSON.stringify(plan.winningPlan), /IXSCAN/);
  const fx = await db.collection('lowv').find({ g: 1 }).sort({ v: 1 }).explain('queryPlanner');
  const fplan = fx.stages ? fx.stages[0].$cursor.queryPlanner : fx.queryPlanner;
  assert.equal(fplan.namespace, `${db.databaseName}.base`);
  assert.match(JSON.stringify(fplan.winningPlan), /IXSCAN/);
});

h.test('a view is not renamed, nor renamed onto: 166 "cannot rename view", 48 "a view already exists with that name", as mongod', async () => {
  const db = srv.freshDb('vren');
  await db.collection('c').insertOne({ _id: 1 });
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  const admin = srv.client.db('admin');
  const ns = db.databaseName;
  await h.expectCode(admin.command({ renameCollection: `${ns}.v`, to: `${ns}.v2` }), 166, new RegExp(`^cannot rename view: ${ns}\\.v$`));
  await h.expectCode(admin.command({ renameCollection: `${ns}.c`, to: `${ns}.v`, dropTarget: true }), 48,
    new RegExp(`^a view already exists with that name: ${ns}\\.v$`));
  const names = (await db.listCollections().toArray()).map((x) => `${x.name}:${x.type}`).sort();
  assert.deepEqual(names, ['c:collection', 'system.views:collection', 'v:view'], 'both left as they were');
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 1 }]);
});

h.test('explain of an update, a delete or a findAndModify on a view is 166, as the write itself', async () => {
  const db = srv.freshDb('vs_explainw');
  await db.collection('base').insertOne({ _id: 1, k: 1 });
  await db.createCollection('v', { viewOn: 'base', pipeline: [] });
  const re = new RegExp(`^Namespace ${db.databaseName}\\.v is a view, not a collection$`);
  for (const inner of [{ update: 'v', updates: [{ q: {}, u: { $set: { k: 2 } } }] }, { delete: 'v', deletes: [{ q: {}, limit: 1 }] },
    { findAndModify: 'v', query: {}, update: { $set: { k: 2 } } }, { findandmodify: 'v', query: {}, remove: true }]) {
    await h.expectCode(db.command({ explain: inner, verbosity: 'queryPlanner' }), 166, re);
  }
  await assert.rejects(db.collection('v').updateOne({}, { $set: { k: 2 } }), (e) => e.code === 166);
  // A find's explain on the view still explains the pipeline it runs.
  const e = await db.command({ explain: { find: 'v', filter: {} }, verbosity: 'queryPlanner' });
  assert.equal(e.ok, 1);
  assert.deepEqual(await db.collection('base').find().toArray(), [{ _id: 1, k: 1 }]);
});

h.test('a hint on a read of a view plans the resolved pipeline over the collection: a bad one is 2 for find, aggregate, count and distinct', async () => {
  const db = srv.freshDb('vs_hint');
  await db.collection('b').insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  await db.collection('b').createIndex({ a: 1 });
  await db.createCollection('v', { viewOn: 'b', pipeline: [{ $match: { a: { $gte: 1 } } }] });
  const v = db.collection('v');
  // The planner's refusal, with the resolved query over the base collection (index_edges_compat.test.js).
  const bad = /^error processing query: ns=\S*vs_hint\.bTree: .* planner returned error :: caused by :: hint provided does not correspond to an existing index$/s;
  await h.expectCode(v.find({}).hint({ nope: 1 }).toArray(), 2, bad);
  await h.expectCode(v.aggregate([], { hint: { nope: 1 } }).toArray(), 2, bad);
  await h.expectCode(db.command({ count: 'v', query: {}, hint: { nope: 1 } }), 2, bad);
  await h.expectCode(db.command({ distinct: 'v', key: 'a', hint: 'nope_1' }), 2, bad);
  // A hint naming an index of the collection is used.
  assert.deepEqual((await v.find({}).hint({ a: 1 }).toArray()).map((d) => d._id), [1, 2]);
  assert.equal((await db.command({ count: 'v', query: { a: 2 }, hint: 'a_1' })).n, 1);
  const e = await v.aggregate([{ $match: { a: 2 } }], { hint: { a: 1 }, explain: true }).toArray();
  assert.ok(JSON.stringify(e).includes('a_1'), 'the plan uses the hinted index');
});

h.test('a find on a view takes its projection as an aggregation $project: find-only forms fail as there (31324, 168, 16020)', async () => {
  const db = srv.freshDb('vs_proj');
  await db.collection('b').insertOne({ _id: 1, a: [1, 2, 3], s: 'x' });
  await db.createCollection('v', { viewOn: 'b', pipeline: [] });
  const v = db.collection('v');
  await h.expectCode(v.find({ a: 2 }, { projection: { 'a.$': 1 } }).toArray(), 31324,
    /^Invalid \$project :: caused by :: Cannot use positional projection in aggregation projection$/);
  await h.expectCode(v.find({}, { projection: { a: { $elemMatch: { $gt: 1 } } } }).toArray(), 168, /Unrecognized expression '\$elemMatch'/);
  await h.expectCode(v.find({}, { projection: { a: { $slice: 1 } } }).toArray(), 16020);
  // What an aggregation projection takes works as before.
  assert.deepEqual(await v.find({}, { projection: { s: 1 } }).toArray(), [{ _id: 1, s: 'x' }]);
  assert.deepEqual(await v.find({}, { projection: { a: { $slice: ['$a', 2] }, _id: 0 } }).toArray(), [{ a: [1, 2] }]);
  // The collection itself keeps find's projection forms.
  assert.deepEqual(await db.collection('b').find({ a: 2 }, { projection: { 'a.$': 1 } }).toArray(), [{ _id: 1, a: [2] }]);
});
