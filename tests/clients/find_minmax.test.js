'use strict';
// find's min / max (an index key range [min, max) on the hinted index),
// returnKey (each result is the index key that led to it) and showRecordId
// ($recordId: the record id, a NumberLong), with mongod 8.0's errors, across
// getMore, in explain, and through the driver's cursor methods and mongosh.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

let db;
let c;

function leaf(plan) {
  let s = plan;
  while (s.inputStage) s = s.inputStage;
  return s;
}

const ids = (docs) => docs.map((d) => d._id);

h.test('setup', async () => {
  db = srv.freshDb('minmax');
  c = db.collection('c');
  const docs = [];
  for (let i = 0; i < 10; i++) docs.push({ _id: i, a: i % 5, b: i, s: `k${i}` });
  await c.insertMany(docs);
  await c.createIndex({ a: 1 });
  await c.createIndex({ a: 1, b: -1 });
  await c.createIndex({ b: -1 });
});

h.test('min inclusive, max exclusive on a single-field index', async () => {
  const r = await c.find({}, { min: { a: 2 }, max: { a: 3 }, hint: { a: 1 } }).toArray();
  assert.deepEqual(ids(r), [2, 7]);
  // The filter still applies.
  const f = await c.find({ b: { $gt: 5 } }, { min: { a: 1 }, max: { a: 4 }, hint: { a: 1 } }).toArray();
  assert.deepEqual(ids(f).sort((x, y) => x - y), [6, 7, 8]);
  // Index order: a ascending, then record order.
  const all = await c.find({}, { min: { a: 1 }, max: { a: 3 }, hint: 'a_1' }).toArray();
  assert.deepEqual(all.map((d) => d.a), [1, 1, 2, 2]);
});

h.test('min only and max only', async () => {
  assert.deepEqual(ids(await c.find({}, { min: { a: 4 }, hint: { a: 1 } }).toArray()), [4, 9]);
  assert.deepEqual(ids(await c.find({}, { max: { a: 1 }, hint: { a: 1 } }).toArray()), [0, 5]);
  // The driver's cursor methods send the same fields.
  const cur = c.find({}).hint({ a: 1 }).min({ a: 3 }).max({ a: 4 });
  assert.deepEqual(ids(await cur.toArray()), [3, 8]);
});

h.test('empty range and ranges past the data', async () => {
  assert.deepEqual(await c.find({}, { min: { a: 100 }, max: { a: 200 }, hint: { a: 1 } }).toArray(), []);
  assert.deepEqual(await c.find({}, { min: { a: 2.5 }, max: { a: 2.75 }, hint: { a: 1 } }).toArray(), []);
});

h.test('compound index with a descending field: whole keys compared in index order', async () => {
  // {a: 1, b: -1}: keys (a asc, b desc). [ {a: 1, b: 6}, {a: 2, b: 7} ) holds
  // (1, 6) (1, 1) (2, 7)? no: (2, 7) is max, excluded; (2, 2) comes after (2, 7).
  const r = await c.find({}, { min: { a: 1, b: 6 }, max: { a: 2, b: 7 }, hint: { a: 1, b: -1 } }).toArray();
  assert.deepEqual(ids(r), [6, 1]);
  const r2 = await c.find({}, { min: { a: 1, b: 6 }, max: { a: 2, b: 2 }, hint: { a: 1, b: -1 } }).toArray();
  assert.deepEqual(ids(r2), [6, 1, 7]);
  // A descending single field: min is the larger value.
  const d = await c.find({}, { min: { b: 7 }, max: { b: 4 }, hint: { b: -1 } }).toArray();
  assert.deepEqual(ids(d), [7, 6, 5]);
  // And min below max in value order is an empty range on a descending index.
  await h.expectCode(c.find({}, { min: { b: 4 }, max: { b: 7 }, hint: { b: -1 } }).toArray(), 51175);
});

h.test('a sort the index gives reversed scans the range backward; another sort still sorts', async () => {
  const r = await c.find({}, { min: { a: 1 }, max: { a: 3 }, hint: { a: 1 }, sort: { a: -1 } }).toArray();
  assert.deepEqual(r.map((d) => d.a), [2, 2, 1, 1]);
  const s = await c.find({}, { min: { a: 1 }, max: { a: 3 }, hint: { a: 1 }, sort: { b: -1 } }).toArray();
  assert.deepEqual(ids(s), [7, 6, 2, 1]);
  const sl = await c.find({}, { min: { a: 1 }, max: { a: 3 }, hint: { a: 1 }, sort: { b: 1 }, skip: 1, limit: 2 }).toArray();
  assert.deepEqual(ids(sl), [2, 6]);
});

h.test('getMore keeps the range', async () => {
  const big = db.collection('big');
  const docs = [];
  for (let i = 0; i < 300; i++) docs.push({ _id: i, x: i });
  await big.insertMany(docs);
  await big.createIndex({ x: 1 });
  const r = await big.find({}, { min: { x: 10 }, max: { x: 250 }, hint: { x: 1 }, batchSize: 7 }).toArray();
  assert.equal(r.length, 240);
  assert.deepEqual(ids(r), Array.from({ length: 240 }, (_, i) => i + 10));
  const k = await big.find({}, { min: { x: 10 }, max: { x: 30 }, hint: { x: 1 }, batchSize: 3, returnKey: true }).toArray();
  assert.deepEqual(k, Array.from({ length: 20 }, (_, i) => ({ x: i + 10 })));
});

h.test('errors and their codes', async () => {
  // No hint (mongod's QueryPlanner::plan).
  await h.expectCode(c.find({}, { min: { a: 1 } }).toArray(), 51173,
    /When using min\(\)\/max\(\) a hint of which index to use must be provided/);
  await h.expectCode(c.find({}, { max: { a: 1 } }).toArray(), 51173);
  // Field names not the key pattern's (prefix, other names, other order).
  await h.expectCode(c.find({}, { min: { a: 1 }, hint: { a: 1, b: -1 } }).toArray(), 51174,
    /The index chosen is not compatible with min\/max/);
  await h.expectCode(c.find({}, { min: { b: 1, a: 1 }, hint: { a: 1, b: -1 } }).toArray(), 51174);
  await h.expectCode(c.find({}, { max: { z: 1 }, hint: { a: 1 } }).toArray(), 51174);
  // min not before max.
  await h.expectCode(c.find({}, { min: { a: 3 }, max: { a: 3 }, hint: { a: 1 } }).toArray(), 51175,
    /does not come before the value provided for max\(\)/);
  await h.expectCode(c.find({}, { min: { a: 4 }, max: { a: 1 }, hint: { a: 1 } }).toArray(), 51175);
  await h.expectCode(c.find({}, { min: { a: MaxKeyValue() }, hint: { a: 1 } }).toArray(), 51175);
  // min and max naming different fields (find's parse-time check, before the hint).
  await h.expectCode(c.find({}, { min: { a: 1 }, max: { b: 3 } }).toArray(), 51176,
    /min and max must have the same field names/);
  await h.expectCode(c.find({}, { min: { a: 1, b: 1 }, max: { a: 3 }, hint: { a: 1, b: -1 } }).toArray(), 51176);
  // $natural.
  await h.expectCode(c.find({}, { min: { a: 1 }, hint: { $natural: 1 } }).toArray(), 291,
    /min and max are incompatible with \$natural/);
  // A hint naming no index is still 2.
  await h.expectCode(c.find({}, { min: { a: 1 }, hint: { zz: 1 } }).toArray(), 2);
  // A string bound under a collation other than the index's.
  await h.expectCode(c.find({}, { min: { a: 'x' }, hint: { a: 1 }, collation: { locale: 'en', strength: 2 } }).toArray(), 51174);
  const n = await c.find({}, { min: { a: 3 }, hint: { a: 1 }, collation: { locale: 'en', strength: 2 } }).toArray();
  assert.deepEqual(ids(n), [3, 8, 4, 9]);
  // Empty min / max are no bounds at all.
  assert.equal((await c.find({}, { min: {}, max: {} }).toArray()).length, 10);
});

function MaxKeyValue() {
  const { MaxKey } = require('mongodb');
  return new MaxKey();
}

h.test('commands that take no min / max, and views', async () => {
  await h.expectCode(db.command({ count: 'c', query: {}, min: { a: 1 }, hint: { a: 1 } }), 40415);
  await h.expectCode(db.command({ findAndModify: 'c', query: {}, remove: true, min: { a: 1 } }), 40415);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [], cursor: {}, min: { a: 1 } }), 40415);
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  const v = db.collection('v');
  await h.expectCode(v.find({}, { min: { a: 1 }, hint: { a: 1 } }).toArray(), 168, /Option min not supported in aggregation/);
  await h.expectCode(v.find({}, { returnKey: true }).toArray(), 168, /Option returnKey not supported/);
  await h.expectCode(v.find({}, { showRecordId: true }).toArray(), 168, /Option showRecordId not supported/);
  // The rest of mongod's asAggregationCommand refusals, each in its words.
  const cmd = (extra) => db.command({ find: 'v', filter: {}, ...extra });
  await h.expectCode(cmd({ tailable: true }), 168, /^Tailable cursors are not supported in aggregation\.$/);
  await h.expectCode(cmd({ noCursorTimeout: true }), 168, /^Option noCursorTimeout not supported in aggregation\.$/);
  await h.expectCode(cmd({ allowPartialResults: true }), 168, /^Option allowPartialResults not supported in aggregation\.$/);
  // ntoreturn left find_command.idl in 7.0: an unknown field, on a view as on a collection.
  await h.expectCode(cmd({ ntoreturn: 2 }), 40415, /^BSON field 'find\.ntoreturn' is an unknown field\.$/);
  await h.expectCode(cmd({ sort: { $natural: 1 } }), 168, /^Sort option \$natural not supported in aggregation\.$/);
  await h.expectCode(cmd({ singleBatch: true }), 168, /^Option singleBatch not supported in aggregation\.$/);
  await h.expectCode(cmd({ readOnce: true }), 168, /^Option readOnce not supported in aggregation\.$/);
  // singleBatch with limit 1 (the drivers' findOne) is the exception; false flags are no options at all.
  await c.insertOne({ _id: 'view-probe', a: 1 });
  assert.equal((await cmd({ filter: { _id: 'view-probe' }, singleBatch: true, limit: 1 })).cursor.firstBatch.length, 1);
  assert.equal((await v.findOne({ _id: 'view-probe' }))._id, 'view-probe');
  assert.equal((await cmd({ filter: { _id: 'view-probe' }, noCursorTimeout: false, readOnce: false, allowPartialResults: false })).cursor.firstBatch.length, 1);
  await c.deleteOne({ _id: 'view-probe' });
});

h.test('explain shows the IXSCAN with the range as its bounds', async () => {
  const e = await db.command({ explain: { find: 'c', filter: { b: { $gt: 0 } }, min: { a: 2 }, max: { a: 3 }, hint: { a: 1 } },
    verbosity: 'executionStats' });
  const ix = leaf(e.queryPlanner.winningPlan);
  assert.equal(ix.stage, 'IXSCAN');
  assert.equal(ix.indexName, 'a_1');
  assert.deepEqual(ix.indexBounds, { a: ['[2, 3)'] });
  assert.equal(e.queryPlanner.winningPlan.stage, 'FETCH');
  assert.deepEqual(e.queryPlanner.winningPlan.filter, { b: { $gt: 0 } });
  assert.equal(e.executionStats.nReturned, 2);
  assert.equal(e.executionStats.totalKeysExamined, 2);
  const e2 = await db.command({ explain: { find: 'c', max: { a: 1, b: 0 }, hint: { a: 1, b: -1 } } });
  assert.deepEqual(leaf(e2.queryPlanner.winningPlan).indexBounds, { a: ['[MinKey, 1]'], b: ['[MaxKey, MinKey]'] });
  await h.expectCode(db.command({ explain: { find: 'c', min: { a: 1 } } }), 51173);
  await h.expectCode(db.command({ explain: { find: 'c', min: { a: 1 }, max: { b: 1 }, hint: { a: 1 } } }), 51176);
});

h.test('returnKey: the index key of each result', async () => {
  const r = await c.find({ a: { $gte: 3 } }, { returnKey: true, hint: { a: 1 } }).toArray();
  assert.deepEqual(r, [{ a: 3 }, { a: 3 }, { a: 4 }, { a: 4 }]);
  const cmp = await c.find({ a: 1 }, { returnKey: true, hint: { a: 1, b: -1 } }).toArray();
  assert.deepEqual(cmp, [{ a: 1, b: 6 }, { a: 1, b: 1 }]);
  // A collection scan has no key: {}.
  const cs = await c.find({ a: 1 }, { returnKey: true, hint: { $natural: 1 } }).toArray();
  assert.deepEqual(cs, [{}, {}]);
  // An _id lookup: {_id}.
  assert.deepEqual(await c.find({ _id: 4 }, { returnKey: true }).toArray(), [{ _id: 4 }]);
  // A projection is ignored, but for {$meta: "sortKey"}.
  const p = await c.find({}, { returnKey: true, hint: { a: 1 }, projection: { b: 1, s: 0 }, min: { a: 4 } }).toArray();
  assert.deepEqual(p, [{ a: 4 }, { a: 4 }]);
  const sk = await c.find({ a: { $lte: 1 } }, { returnKey: true, hint: { a: 1 }, sort: { b: -1 },
    projection: { c: { $meta: 'sortKey' }, 'd.e': { $meta: 'sortKey' } } }).toArray();
  assert.deepEqual(sk, [{ a: 1, c: [6], d: { e: [6] } }, { a: 0, c: [5], d: { e: [5] } },
    { a: 1, c: [1], d: { e: [1] } }, { a: 0, c: [0], d: { e: [0] } }]);
  // With an in-memory sort the keys are still the hinted index's.
  const ms = await c.find({ a: { $lte: 1 } }, { returnKey: true, hint: { a: 1 }, sort: { b: 1 } }).toArray();
  assert.deepEqual(ms, [{ a: 0 }, { a: 1 }, { a: 0 }, { a: 1 }]);
  // Exact number types come back (a key's numbers are stored canonically).
  const t = db.collection('types');
  await t.insertMany([{ _id: 1, v: 2.5 }, { _id: 2, v: 7 }, { _id: 3, v: [4, 9] }, { _id: 4 }]);
  await t.createIndex({ v: -1 });
  const tk = await t.find({}, { returnKey: true, hint: { v: -1 } }).toArray();
  assert.deepEqual(tk, [{ v: 9 }, { v: 7 }, { v: 2.5 }, { v: null }]);
  // The driver's cursor method.
  assert.deepEqual(await c.find({ a: 0 }).hint({ a: 1 }).returnKey(true).toArray(), [{ a: 0 }, { a: 0 }]);
});

h.test('showRecordId: $recordId is a distinct NumberLong per document', async () => {
  const r = await c.find({}, { showRecordId: true, promoteLongs: false }).toArray();
  assert.equal(r.length, 10);
  const seen = new Set();
  for (const d of r) {
    assert.equal(d.$recordId._bsontype, 'Long', JSON.stringify(d));
    assert.ok(d.$recordId.toNumber() > 0);
    seen.add(d.$recordId.toString());
    // $recordId comes last, after the document's own fields.
    assert.equal(Object.keys(d).at(-1), '$recordId');
  }
  assert.equal(seen.size, 10);
  // The same record id whichever path reads the document.
  const byId = new Map(r.map((d) => [d._id, d.$recordId.toString()]));
  const ix = await c.find({ a: 2 }, { showRecordId: true, hint: { a: 1 }, promoteLongs: false }).toArray();
  for (const d of ix) assert.equal(d.$recordId.toString(), byId.get(d._id));
  const one = await c.find({ _id: 3 }, { showRecordId: true, promoteLongs: false }).toArray();
  assert.equal(one[0].$recordId.toString(), byId.get(3));
  // With a projection, after the projected fields; with an in-memory sort; across getMore.
  const p = await c.find({ a: 1 }, { showRecordId: true, projection: { b: 1, _id: 0 }, promoteLongs: false }).toArray();
  assert.deepEqual(p.map((d) => Object.keys(d)), [['b', '$recordId'], ['b', '$recordId']]);
  const s = await c.find({}, { showRecordId: true, sort: { s: -1 }, batchSize: 3, promoteLongs: false }).toArray();
  assert.deepEqual(ids(s), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
  for (const d of s) assert.equal(d.$recordId.toString(), byId.get(d._id));
  // With returnKey: mongod's ReturnKeyStage keeps only the key (and sortKey fields).
  const rk = await c.find({ a: 2 }, { showRecordId: true, returnKey: true, hint: { a: 1 } }).toArray();
  assert.deepEqual(rk, [{ a: 2 }, { a: 2 }]);
  // The driver's cursor method.
  const m = await c.find({ _id: 1 }).showRecordId(true).toArray();
  assert.equal(typeof m[0].$recordId, 'number');
});

h.test('a find projection\'s {$meta: "recordId"} and {$meta: "sortKey"} (mongod 8.0\'s metadata; they were 17308)', async () => {
  const byId = new Map((await c.find({}, { showRecordId: true, promoteLongs: false }).toArray())
    .map((d) => [d._id, d.$recordId.toString()]));
  // recordId: the document's record id, the one showRecordId shows, whichever plan reads it.
  for (const opts of [{}, { hint: { a: 1 } }, { sort: { s: -1 } }, { sort: { a: 1 }, hint: { a: 1 } }]) {
    const r = await c.find({}, { ...opts, projection: { r: { $meta: 'recordId' }, a: 1 }, promoteLongs: false }).toArray();
    assert.equal(r.length, 10, JSON.stringify(opts));
    for (const d of r) {
      assert.deepEqual(Object.keys(d), ['_id', 'a', 'r']);
      assert.equal(d.r._bsontype, 'Long');
      assert.equal(d.r.toString(), byId.get(d._id));
    }
  }
  // Beside an exclusion the rest of the document stays.
  const ex = await c.findOne({ _id: 2 }, { projection: { r: { $meta: 'recordId' }, s: 0 } });
  assert.equal(ex.s, undefined);
  assert.equal(ex.b, 2);
  assert.equal(String(ex.r), byId.get(2));
  // sortKey: the document's key under the sort, one element per sort field (an array's least element
  // ascending, its greatest descending), whether an index or a blocking sort orders the results.
  const t = db.collection('sortkey');
  await t.insertMany([{ _id: 1, v: [5, 1], w: 'x' }, { _id: 2, v: 3, w: 'y' }, { _id: 3, w: 'z' }]);
  assert.deepEqual(await t.find({}, { sort: { v: 1, _id: -1 }, projection: { k: { $meta: 'sortKey' }, _id: 1 } }).toArray(),
    [{ _id: 3, k: [null, 3] }, { _id: 1, k: [1, 1] }, { _id: 2, k: [3, 2] }]);
  assert.deepEqual(await t.find({}, { sort: { v: -1 }, projection: { k: { $meta: 'sortKey' }, w: 1, _id: 0 } }).toArray(),
    [{ w: 'x', k: [5] }, { w: 'y', k: [3] }, { w: 'z', k: [null] }]);
  // Alone it adds its field to the whole document (neither inclusion nor exclusion, as mongod).
  assert.deepEqual(await t.findOne({ _id: 2 }, { sort: { v: 1 }, projection: { k: { $meta: 'sortKey' } } }),
    { _id: 2, v: 3, w: 'y', k: [3] });
  const ix = await c.find({ a: { $lte: 1 } }, { sort: { a: 1, _id: 1 }, hint: { a: 1 }, projection: { k: { $meta: 'sortKey' }, _id: 0, b: 1 } }).toArray();
  assert.deepEqual(ix, [{ b: 0, k: [0, 0] }, { b: 5, k: [0, 5] }, { b: 1, k: [1, 1] }, { b: 6, k: [1, 6] }]);
  // Without a sort it is mongod's BadValue; an unknown name is still 17308.
  await h.expectCode(c.find({}, { projection: { k: { $meta: 'sortKey' } } }).toArray(), 2,
    /^cannot use sortKey \$meta projection without a sort$/);
  await h.expectCode(c.find({}, { projection: { k: { $meta: 'nope' } } }).toArray(), 17308);
});

h.test('mongosh cursor.min() / max() / returnKey()', async () => {
  const out = await h.mongosh(srv.port, db.databaseName,
    'print(JSON.stringify(db.c.find({}, {_id: 1}).hint({a: 1}).min({a: 1}).max({a: 2}).toArray()));' +
    'print(JSON.stringify(db.c.find({a: 4}).hint({a: 1}).returnKey(true).toArray()))');
  const lines = out.split('\n');
  assert.deepEqual(JSON.parse(lines[0]), [{ _id: 1 }, { _id: 6 }]);
  assert.deepEqual(JSON.parse(lines[1]), [{ a: 4 }, { a: 4 }]);
});
