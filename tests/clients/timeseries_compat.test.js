'use strict';
// Time-series behaviour checked against MongoDB 8.0's source and jstests
// (timeseries_collmod.js, timeseries_index*.js, timeseries_index_stats.js,
// timeseries_options.cpp, timeseries_collmod.cpp, coll_mod.cpp,
// timeseries_index_schema_conversion_functions.cpp, list_indexes.cpp):
// collMod on the indexes and bucketing of a time-series collection, hints
// given as the user's key patterns, index option rules, $indexStats and
// listIndexes' cursor namespace.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const ts = (coll) => coll.options.timeseries;
async function tsOptions(db, name) {
  return ts((await db.listCollections({ name }).toArray())[0]);
}

h.test('collMod hides and unhides a time-series index by name or by its key pattern; TTL stays refused (72)', async () => {
  const db = srv.freshDb('tsc_hide');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const w = db.collection('w');
  await w.createIndex({ temp: 1 });
  // As timeseries_collmod.js: a secondary index hidden by key pattern.
  let r = await db.command({ collMod: 'w', index: { keyPattern: { temp: 1 }, hidden: true } });
  assert.equal(r.hidden_old, false);
  assert.equal(r.hidden_new, true);
  let idx = (await w.indexes()).find((i) => i.name === 'temp_1');
  assert.equal(idx.hidden, true);
  assert.deepEqual(idx.key, { temp: 1 });
  // The default index, by its time-series key pattern and by name.
  r = await db.command({ collMod: 'w', index: { keyPattern: { m: 1, t: 1 }, hidden: true } });
  assert.equal(r.hidden_new, true);
  r = await db.command({ collMod: 'w', index: { name: 'm_1_t_1', hidden: false } });
  assert.equal(r.hidden_old, true);
  assert.equal(r.hidden_new, false);
  r = await db.command({ collMod: 'w', index: { name: 'temp_1', hidden: false } });
  idx = (await w.indexes()).find((i) => i.name === 'temp_1');
  assert.equal(idx.hidden, undefined);
  // The shell helpers send the same command.
  await db.command({ collMod: 'w', index: { name: 'temp_1', hidden: true } });
  // A TTL conversion stays refused, as mongod's parseCollModRequest on a time-series collection.
  await h.expectCode(db.command({ collMod: 'w', index: { keyPattern: { t: 1 }, expireAfterSeconds: 100 } }), 72, /TTL indexes are not supported/);
  // No such index: 27, the key pattern shown as the buckets' one.
  await h.expectCode(db.command({ collMod: 'w', index: { keyPattern: { nope: 1 }, hidden: true } }), 27);
  // Validator and friends stay refused, with mongod's message.
  await h.expectCode(db.command({ collMod: 'w', validator: { t: { $exists: true } } }), 72, /not supported on a time-series collection: validator/);
  await h.expectCode(db.command({ collMod: 'w', validationLevel: 'moderate' }), 72);
  // Hiding and expireAfterSeconds together.
  r = await db.command({ collMod: 'w', index: { name: 'temp_1', hidden: false }, expireAfterSeconds: 60 });
  assert.equal(r.expireAfterSeconds_new, 60);
  assert.equal(r.hidden_new, false);
});

h.test('collMod on system.buckets.<name> is 73 InvalidNamespace, as timeseries_collmod.js', async () => {
  const db = srv.freshDb('tsc_buckets');
  await db.createCollection('w', { timeseries: { timeField: 't' } });
  await h.expectCode(db.command({ collMod: 'system.buckets.w', timeseries: { granularity: 'hours' } }), 73,
    /underlying buckets collection is not supported/);
  await h.expectCode(db.command({ collMod: 'system.buckets.w', expireAfterSeconds: 10 }), 73);
  await h.expectCode(db.command({ collMod: 'system.buckets.nothere', index: { name: 'x', hidden: true } }), 73);
});

h.test('granularity after custom bucketing: allowed when neither span shrinks, with mongod\'s messages otherwise', async () => {
  const db = srv.freshDb('tsc_gran');
  await db.createCollection('c', { timeseries: { timeField: 't', bucketMaxSpanSeconds: 300, bucketRoundingSeconds: 300 } });
  await db.command({ collMod: 'c', timeseries: { granularity: 'hours' } });
  assert.deepEqual(await tsOptions(db, 'c'), { timeField: 't', granularity: 'hours', bucketMaxSpanSeconds: 2592000 });
  // Minutes' rounding (3600) is below 7200: refused.
  await db.createCollection('c2', { timeseries: { timeField: 't', bucketMaxSpanSeconds: 7200, bucketRoundingSeconds: 7200 } });
  await h.expectCode(db.command({ collMod: 'c2', timeseries: { granularity: 'minutes' } }), 72,
    /'bucketRoundingSeconds' needs to be equal or greater to transition/);
  // Seconds' span (3600) is below 7200.
  await h.expectCode(db.command({ collMod: 'c2', timeseries: { granularity: 'seconds' } }), 72,
    /'bucketMaxSpanSeconds' needs to be equal or greater to transition/);
  await db.command({ collMod: 'c2', timeseries: { granularity: 'hours' } });
  // Options given with a granularity.
  await h.expectCode(db.command({ collMod: 'c2', timeseries: { granularity: 'hours', bucketRoundingSeconds: 86400 } }), 72,
    /'bucketRoundingSeconds' is not configurable alongside the granularity parameter/);
  await h.expectCode(db.command({ collMod: 'c2', timeseries: { granularity: 'hours', bucketMaxSpanSeconds: 10 } }), 72,
    /not configurable to a value other than the default/);
  await db.command({ collMod: 'c2', timeseries: { granularity: 'hours', bucketMaxSpanSeconds: 2592000 } });
  // Downward and same-granularity transitions.
  await h.expectCode(db.command({ collMod: 'c2', timeseries: { granularity: 'minutes' } }), 72, /Invalid transition/);
  await db.command({ collMod: 'c2', timeseries: { granularity: 'hours' } }); // no-op
  // seconds -> hours directly.
  await db.createCollection('s', { timeseries: { timeField: 't' } });
  await db.command({ collMod: 's', timeseries: { granularity: 'hours' } });
  assert.equal((await tsOptions(db, 's')).granularity, 'hours');
  // Custom spans from a granularity, and the same values again (no-op).
  await db.createCollection('g', { timeseries: { timeField: 't', granularity: 'minutes' } });
  await h.expectCode(db.command({ collMod: 'g', timeseries: { bucketMaxSpanSeconds: 3600, bucketRoundingSeconds: 3600 } }), 72,
    /'bucketMaxSpanSeconds' needs to be equal or greater/);
  await db.command({ collMod: 'g', timeseries: { bucketMaxSpanSeconds: 86400, bucketRoundingSeconds: 86400 } });
  assert.deepEqual(await tsOptions(db, 'g'), { timeField: 't', bucketRoundingSeconds: 86400, bucketMaxSpanSeconds: 86400 });
  await db.command({ collMod: 'g', timeseries: { bucketMaxSpanSeconds: 86400, bucketRoundingSeconds: 86400 } });
  await h.expectCode(db.command({ collMod: 'g', timeseries: { bucketMaxSpanSeconds: 86400 } }), 72, /set alongside each other/);
  // Inserts still land after the changes.
  await db.collection('c').insertOne({ t: new Date() });
  assert.equal(await db.collection('c').countDocuments(), 1);
});

h.test('hints given as time-series key patterns reach the buckets\' index (find, aggregate, count, distinct)', async () => {
  const db = srv.freshDb('tsc_hint');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'md' } });
  const w = db.collection('w');
  const base = Date.UTC(2024, 0, 1);
  const docs = [];
  for (let i = 0; i < 20; i++) docs.push({ t: new Date(base + i * 1000), md: i % 3, temp: i });
  await w.insertMany(docs);
  await w.createIndex({ temp: 1 });
  await w.createIndex({ t: -1 });
  const r = await w.find({ md: 1 }).hint({ md: 1, t: 1 }).toArray();
  assert.equal(r.length, 7);
  assert.equal((await w.find({ temp: { $gte: 15 } }).hint({ temp: 1 }).toArray()).length, 5);
  assert.equal((await w.find({}).hint({ t: -1 }).toArray()).length, 20);
  const a = await w.aggregate([{ $match: { md: 2 } }, { $count: 'n' }], { hint: { md: 1, t: 1 } }).toArray();
  assert.deepEqual(a, [{ n: 6 }]);
  assert.equal(await w.countDocuments({ md: 0 }, { hint: { md: 1, t: 1 } }), 7);
  const c = await db.command({ count: 'w', query: { temp: { $lt: 3 } }, hint: { temp: 1 } });
  assert.equal(c.n, 3);
  const d = await db.command({ distinct: 'w', key: 'md', query: {}, hint: { md: 1, t: 1 } });
  assert.deepEqual(d.values.sort(), [0, 1, 2]);
  // Names and $natural as before; a key pattern of no index is still 2.
  assert.equal((await w.find({}).hint('temp_1').toArray()).length, 20);
  assert.equal((await w.find({}).hint({ $natural: 1 }).toArray()).length, 20);
  await h.expectCode(w.find({}).hint({ nope: 1 }).toArray(), 2, /hint provided does not correspond/);
});

h.test('index options: sparse on the time and meta fields only; partialFilterExpression with collation is 85', async () => {
  const db = srv.freshDb('tsc_idxopt');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const w = db.collection('w');
  await w.insertMany([{ t: new Date(), m: { k: 1 }, v: 1 }, { t: new Date(), m: { k: 2 }, v: 2 }]);
  // As translateIndexSpecFromLogicalToBuckets: the timeField and metaField paths may be sparse.
  await w.createIndex({ t: 1 }, { sparse: true });
  await w.createIndex({ m: 1, t: -1 }, { sparse: true, name: 'm_t_sparse' });
  const idx = (await w.indexes()).find((i) => i.name === 't_1');
  assert.deepEqual(idx.key, { t: 1 });
  assert.equal(idx.sparse, true);
  assert.equal((await w.find({}).hint({ t: 1 }).toArray()).length, 2);
  await h.expectCode(w.createIndex({ v: 1 }, { sparse: true }), 72, /^Sparse indexes are not supported on time-series measurements$/);
  await h.expectCode(w.createIndex({ t: 1, v: 1 }, { sparse: true }), 72);
  await h.expectCode(w.createIndex({ 't.x': 1 }, { sparse: true }), 72);
  // The filter is rewritten for the buckets without the index collation's comparisons.
  await h.expectCode(w.createIndex({ 'm.k': 1 }, { partialFilterExpression: { 'm.k': { $gt: 0 } }, collation: { locale: 'en' } }), 85,
    /^On a time-series collection, partialFilterExpression and collation arguments are incompatible$/);
  await w.createIndex({ 'm.k': 1 }, { collation: { locale: 'en' } });
  await w.createIndex({ 'm.k': -1 }, { partialFilterExpression: { 'm.k': { $gt: 0 } } });
});

h.test('listIndexes\' cursor names the collection itself, as mongod 8.0\'s list_indexes.cpp; getMore follows it', async () => {
  const db = srv.freshDb('tsc_li');
  await db.collection('c').createIndexes([{ key: { a: 1 } }, { key: { b: 1 } }]);
  const r = await db.command({ listIndexes: 'c', cursor: { batchSize: 1 } });
  assert.equal(r.cursor.ns, `${db.databaseName}.c`);
  const more = await db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c' });
  assert.equal(more.cursor.ns, `${db.databaseName}.c`);
  assert.equal(more.cursor.nextBatch.length, 2);
  // The driver's own listIndexes with a small batch goes through getMore.
  assert.equal((await db.collection('c').listIndexes({ batchSize: 1 }).toArray()).length, 3);
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const t = await db.command({ listIndexes: 'w' });
  assert.equal(t.cursor.ns, `${db.databaseName}.w`);
});

h.test('$indexStats on a time-series collection lists its indexes as users defined them (timeseries_index_stats.js)', async () => {
  const db = srv.freshDb('tsc_istats');
  await db.createCollection('w', { timeseries: { timeField: 'tm', metaField: 'mm' } });
  const w = db.collection('w');
  await w.insertOne({ tm: new Date(), mm: { tag1: 'a', tag2: 'b' } });
  const keys = {
    index0: { 'mm.tag1': 1 },
    index1: { 'mm.tag2': -1, tm: -1 },
    index2: { 'mm.tag3': 1, 'mm.tag4': 1 },
    mm_1_tm_1: { mm: 1, tm: 1 },
  };
  for (const [name, key] of Object.entries(keys)) {
    if (name !== 'mm_1_tm_1') await w.createIndex(key, { name });
  }
  const stats = await w.aggregate([{ $indexStats: {} }]).toArray();
  assert.equal(stats.length, Object.keys(keys).length, JSON.stringify(stats));
  for (const s of stats) {
    assert.ok(Object.hasOwn(keys, s.name), s.name);
    assert.deepEqual(s.key, keys[s.name]);
    assert.deepEqual(s.spec.key, keys[s.name]);
    assert.equal(s.spec.name, s.name);
  }
  // The buckets' own view of them keeps _id and the buckets' keys.
  const bstats = await db.collection('system.buckets.w').aggregate([{ $indexStats: {} }]).toArray();
  assert.ok(bstats.length > stats.length);
  const multi = await w.aggregate([{ $indexStats: {} }, { $group: { _id: 0, names: { $addToSet: '$name' } } }]).toArray();
  assert.deepEqual(multi[0].names.sort(), Object.keys(keys).sort());
  // A plain view still answers 166.
  await db.createCollection('v', { viewOn: 'w', pipeline: [] });
  await h.expectCode(db.collection('v').aggregate([{ $indexStats: {} }]).toArray(), 166);
});
