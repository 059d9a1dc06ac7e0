'use strict';
/*
 * Multikey paths (mongod's MultikeyPaths), through the Node driver: an index
 * records, per field, which components of its path held an array in some
 * document, keeps that in its catalog entry (multikeyPaths), and the planner
 * treats a field whose path never held one as on an index that is not
 * multikey, as mongod 8.0's planner does:
 *  - explain's multiKeyPaths names the prefixes that held arrays ([] for the
 *    others), where every field used to be listed as multikey;
 *  - a field after a multikey one is bounded (only the leading field was),
 *    its predicates intersect into one range ({a: {$gt: 2, $lt: 5}} is
 *    (2, 5)), and a sort on it comes from the index (no SORT stage);
 *  - a field whose path held an array takes one range predicate, since an
 *    array's elements can meet each predicate apart, and a field sharing an
 *    array prefix with a bounded field ({"a.b": 1, "a.c": 1}) is not bounded;
 *  - the paths survive a clean restart and kill -9, and a document written
 *    after the restart that puts an array on a new component records it.
 * Every query is also run as a collection scan ({$natural: 1}): the index
 * must return the same documents.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const J = { writeConcern: { w: 1, j: true } };

/* The IXSCAN stage of a winning plan (through FETCH / SORT / LIMIT ...). */
function ixscan(plan) {
  for (let s = plan; s; s = s.inputStage) if (s.stage === 'IXSCAN') return s;
  return null;
}

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

/* The query's documents by the index and by a collection scan: the same, in order when sorted. */
async function sameAsScan(coll, filter, sort) {
  const byIndex = await coll.find(filter, { sort }).toArray();
  const byScan = await coll.find(filter, { sort, hint: { $natural: 1 } }).toArray();
  if (sort) assert.deepEqual(byIndex, byScan, JSON.stringify({ filter, sort }));
  else assert.deepEqual(byIndex.map((d) => d._id).sort(), byScan.map((d) => d._id).sort(), JSON.stringify(filter));
  return byIndex;
}

async function explainOf(coll, filter, sort) {
  const ex = await coll.find(filter, { sort }).explain('executionStats');
  return { plan: ex.queryPlanner.winningPlan, ix: ixscan(ex.queryPlanner.winningPlan), stats: ex.executionStats };
}

async function restart(kill9) {
  await srv.server.restart({ kill9 });
  await srv.reconnect();
}

h.test('a compound index multikey through one field: the other is bounded, intersected, sorted by, and listed as not multikey', async () => {
  const c = srv.freshDb('mkp').collection('c');
  const docs = [];
  for (let i = 0; i < 300; i++) docs.push({ _id: i, tags: [`t${i % 3}`, 'x'], a: i % 10 });
  await c.insertMany(docs);
  await c.createIndex({ tags: 1, a: 1 });

  const q = { tags: 't1', a: { $gt: 2, $lt: 5 } };
  let { ix, stats } = await explainOf(c, q);
  assert.equal(ix.isMultiKey, true);
  assert.deepEqual(ix.multiKeyPaths, { tags: ['tags'], a: [] });
  assert.deepEqual(ix.indexBounds, { tags: ['["t1", "t1"]'], a: ['(2, 5)'] });
  assert.equal(stats.nReturned, 20);
  assert.equal((await sameAsScan(c, q)).length, 20);
  // Only the keys in the bounds (an exclusive end's own keys are read and left to the filter), not every t1 key.
  ({ stats } = await explainOf(c, { tags: 't1', a: { $gte: 3, $lte: 4 } }));
  assert.equal(stats.nReturned, 20);
  assert.equal(stats.totalKeysExamined, 20, JSON.stringify(stats));

  // A sort on the field that never held an array comes from the index.
  let r = await explainOf(c, { tags: 'x' }, { a: -1 });
  assert.ok(!stages(r.plan).includes('SORT'), JSON.stringify(stages(r.plan)));
  assert.equal(r.ix.direction, 'backward');
  const sorted = await sameAsScan(c, { tags: 'x' }, { a: -1, _id: 1 });
  assert.equal(sorted.length, 300);
  assert.deepEqual((await c.find({ tags: 'x' }).sort({ a: -1 }).toArray()).map((d) => d.a),
    sorted.map((d) => d.a));

  // A document with an array in a: now a takes one range predicate, and one that meets them apart is found.
  await c.insertOne({ _id: 'apart', tags: 't1', a: [1, 7] }); // two arrays in one document would be parallel arrays
  ({ ix } = await explainOf(c, q));
  assert.deepEqual(ix.multiKeyPaths, { tags: ['tags'], a: ['a'] });
  assert.equal(ix.indexBounds.a.length, 1);
  assert.notDeepEqual(ix.indexBounds.a, ['(2, 5)']);
  const found = await sameAsScan(c, q);
  assert.ok(found.some((d) => d._id === 'apart'), 'a document whose elements meet the predicates apart');
  // ... and a sort on a is no longer the index's.
  r = await explainOf(c, { tags: 'x' }, { a: -1 });
  assert.ok(stages(r.plan).includes('SORT'), JSON.stringify(stages(r.plan)));
  await sameAsScan(c, { tags: 'x' }, { a: -1, _id: 1 });
});

h.test('fields sharing an array prefix are not bounded together; a dotted path lists the component that held the array', async () => {
  const db = srv.freshDb('mkshared');
  const d = db.collection('d');
  await d.insertMany([
    { _id: 1, a: [{ b: 1, c: 1 }, { b: 2, c: 2 }] }, // b: 1 and c: 2 in different elements
    { _id: 2, a: { b: 1, c: 2 } },
    { _id: 3, a: { b: 1, c: 3 } },
  ]);
  await d.createIndex({ 'a.b': 1, 'a.c': 1 });
  const q = { 'a.b': 1, 'a.c': 2 };
  const { ix } = await explainOf(d, q);
  assert.deepEqual(ix.multiKeyPaths, { 'a.b': ['a'], 'a.c': ['a'] });
  assert.deepEqual(ix.indexBounds, { 'a.b': ['[1, 1]'], 'a.c': ['[MinKey, MaxKey]'] });
  assert.deepEqual((await sameAsScan(d, q)).map((x) => x._id).sort(), [1, 2]);

  // Different first components never pair through an array: both bounded.
  const e = db.collection('e');
  await e.insertMany([{ _id: 1, s: [{ p: 1 }, { p: 2 }], q: 5 }, { _id: 2, s: { p: [3, 4] }, q: 5 }, { _id: 3, s: { p: 9 }, q: 6 }]);
  await e.createIndex({ q: 1, 's.p': 1 });
  let r = await explainOf(e, { q: 5, 's.p': { $gte: 2 } });
  assert.deepEqual(r.ix.multiKeyPaths, { q: [], 's.p': ['s', 's.p'] });
  assert.deepEqual(r.ix.indexBounds, { q: ['[5, 5]'], 's.p': ['[2, inf.0]'] });
  assert.deepEqual((await sameAsScan(e, { q: 5, 's.p': { $gte: 2 } })).map((x) => x._id).sort(), [1, 2]);
  const f = db.collection('f');
  await f.insertMany([{ _id: 1, s: { p: [1, 2] } }, { _id: 2, s: { p: 3 } }]);
  await f.createIndex({ 's.p': 1 });
  r = await explainOf(f, { 's.p': 2 });
  assert.deepEqual(r.ix.multiKeyPaths, { 's.p': ['s.p'] });
  assert.deepEqual((await sameAsScan(f, { 's.p': 2 })).map((x) => x._id), [1]);
  // An index that is not multikey lists every field with [].
  const g = db.collection('g');
  await g.insertMany([{ _id: 1, u: 1, v: 2 }]);
  await g.createIndex({ u: 1, v: 1 });
  r = await explainOf(g, { u: 1 });
  assert.equal(r.ix.isMultiKey, false);
  assert.deepEqual(r.ix.multiKeyPaths, { u: [], v: [] });
});

h.test('an index built over documents with arrays records their paths (validate finds them all)', async () => {
  const db = srv.freshDb('mkbuild');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, k: 1, arr: [1, 2] }, { _id: 2, k: 2, arr: 3 }]);
  await c.createIndex({ k: 1, arr: 1 });
  const { ix } = await explainOf(c, { k: 1, arr: 2 });
  assert.deepEqual(ix.multiKeyPaths, { k: [], arr: ['arr'] });
  assert.deepEqual(ix.indexBounds, { k: ['[1, 1]'], arr: ['[2, 2]'] });
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true, JSON.stringify(v));
  assert.deepEqual(v.warnings, [], JSON.stringify(v.warnings));
});

for (const kill9 of [false, true]) {
  const how = kill9 ? 'kill -9' : 'a clean restart';
  h.test(`multikey paths survive ${how}, and a path made multikey after it is recorded and kept`, async () => {
    const name = srv.freshDb(kill9 ? 'mkkill' : 'mkclean').databaseName;
    let c = srv.client.db(name).collection('c');
    await c.createIndex({ u: 1, 'v.w': 1, z: 1 });
    await c.insertOne({ _id: 1, u: [1, 2], v: { w: 1 }, z: 1 }, J);
    await c.insertOne({ _id: 2, u: 3, v: { w: 4 }, z: 9 }, J);
    const q = { u: 1, 'v.w': { $gte: 0, $lte: 5 } };
    let { ix } = await explainOf(c, q);
    assert.deepEqual(ix.multiKeyPaths, { u: ['u'], 'v.w': [], z: [] });

    await restart(kill9);
    c = srv.client.db(name).collection('c');
    ({ ix } = await explainOf(c, q));
    assert.deepEqual(ix.multiKeyPaths, { u: ['u'], 'v.w': [], z: [] }, `after ${how}`);
    assert.deepEqual(ix.indexBounds, { u: ['[1, 1]'], 'v.w': ['[0, 5]'], z: ['[MinKey, MaxKey]'] });

    // v becomes an array after the restart: its component is written to the entry again.
    await c.insertOne({ _id: 3, u: 1, v: [{ w: 1 }, { w: 7 }], z: 2 }, J);
    await restart(kill9);
    c = srv.client.db(name).collection('c');
    ({ ix } = await explainOf(c, q));
    assert.deepEqual(ix.multiKeyPaths, { u: ['u'], 'v.w': ['v'], z: [] }, `the new path after ${how}`);
    assert.deepEqual((await sameAsScan(c, q)).map((d) => d._id).sort(), [1, 3]);
  });
}
