'use strict';
// $out into time-series collections, as MongoDB 8.0 does it (since 7.0.3:
// document_source_out.cpp): the target's contents are replaced atomically
// through a time-series temporary collection, measurements land in buckets,
// a measurement without its timeField fails the stage and leaves the target
// whole, and plain $out is unchanged. The stage's 'timeseries' option
// (create the target, or check it matches) needs agg.c to hand the option
// to the writer; those tests are skipped until it does.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const t0 = new Date('2026-01-01T00:00:00Z');
const at = (s) => new Date(t0.getTime() + s * 1000);

async function names(db) {
  return (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
}

h.test('$out into an existing time-series collection replaces its measurements, in buckets', async () => {
  const db = srv.freshDb('tsw_out');
  await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' }, expireAfterSeconds: 86400 * 3650 });
  await db.collection('ts').createIndex({ m: 1, v: -1 }, { name: 'mv' });
  await db.collection('ts').insertMany([{ t: at(0), m: 1, v: 1 }, { t: at(1), m: 2, v: 2 }]);
  await db.collection('src').insertMany([
    { t: at(10), m: 'a', v: 10 }, { t: at(11), m: 'a', v: 11 }, { t: at(12), m: 'b', v: 12 },
  ]);
  const out = await db.collection('src').aggregate([{ $project: { _id: 0 } }, { $out: 'ts' }]).toArray();
  assert.deepEqual(out, []);
  const got = await db.collection('ts').find({}, { projection: { _id: 0 } }).sort({ v: 1 }).toArray();
  assert.deepEqual(got, [{ t: at(10), m: 'a', v: 10 }, { t: at(11), m: 'a', v: 11 }, { t: at(12), m: 'b', v: 12 }]);
  // Measurements are in buckets: one per meta value, each measurement given an _id.
  const buckets = await db.collection('system.buckets.ts').find({}).sort({ meta: 1 }).toArray();
  assert.deepEqual(buckets.map((b) => [b.meta, b.control.count ?? Object.keys(b.data.v).length]), [['a', 2], ['b', 1]]);
  assert.deepEqual(buckets[0].control.min.t, at(0)); // rounded down to the minute (granularity seconds)
  assert.deepEqual(buckets[0].control.max.t, at(11));
  // Still a time-series collection with its options, expiry and indexes.
  const info = (await db.listCollections({ name: 'ts' }).toArray())[0];
  assert.equal(info.type, 'timeseries');
  assert.deepEqual(info.options, {
    timeseries: { timeField: 't', metaField: 'm', granularity: 'seconds', bucketMaxSpanSeconds: 3600 },
    expireAfterSeconds: 86400 * 3650,
  });
  const idx = (await db.collection('ts').indexes()).map((i) => i.name).sort();
  assert.deepEqual(idx, ['m_1_t_1', 'mv']);
  const all = await names(db);
  assert.ok(!all.some((n) => n.includes('tmp.agg_out')), all.join());
  // The collection takes inserts as before, and $out from itself works (reads, then replaces).
  await db.collection('ts').insertOne({ t: at(13), m: 'b', v: 13 });
  await db.collection('ts').aggregate([{ $match: { m: 'b' } }, { $out: 'ts' }]).toArray();
  assert.deepEqual((await db.collection('ts').find({}).sort({ v: 1 }).toArray()).map((d) => d.v), [12, 13]);
});

h.test('$out into a time-series collection: a measurement without a Date timeField fails the stage, the target stays whole', async () => {
  const db = srv.freshDb('tsw_out_bad');
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  await db.collection('ts').insertMany([{ t: at(0), v: 1 }, { t: at(1), v: 2 }]);
  await db.collection('src').insertMany([{ _id: 1, t: at(5), v: 5 }, { _id: 2, v: 6 }]);
  await h.expectCode(db.collection('src').aggregate([{ $sort: { _id: 1 } }, { $out: 'ts' }]).toArray(), 2,
    /'t' must be present and contain a valid BSON UTC datetime value/);
  await db.collection('src').updateOne({ _id: 2 }, { $set: { t: 'not a date' } });
  await h.expectCode(db.collection('src').aggregate([{ $out: 'ts' }]).toArray(), 2);
  assert.deepEqual((await db.collection('ts').find({}).sort({ v: 1 }).toArray()).map((d) => d.v), [1, 2]);
  const all = await names(db);
  assert.ok(!all.some((n) => n.includes('tmp.agg_out')), all.join());
  // An empty result empties the time-series collection, which stays one.
  await db.collection('src').aggregate([{ $match: { nothing: true } }, { $out: 'ts' }]).toArray();
  assert.equal(await db.collection('ts').countDocuments(), 0);
  assert.equal((await db.listCollections({ name: 'ts' }).toArray())[0].type, 'timeseries');
});

h.test('$out into plain collections and views is unchanged beside time-series ones', async () => {
  const db = srv.freshDb('tsw_out_plain');
  await db.collection('src').insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
  await db.collection('dst').insertOne({ _id: 9 });
  await db.collection('src').aggregate([{ $out: 'dst' }]).toArray();
  assert.deepEqual(await db.collection('dst').find({}).sort({ _id: 1 }).toArray(), [{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
  await db.createCollection('vw', { viewOn: 'src', pipeline: [] });
  await h.expectCode(db.collection('src').aggregate([{ $out: 'vw' }]).toArray(), 166);
});

h.test('$out with timeseries creates the time-series collection, and checks an existing target', async () => {
  const db = srv.freshDb('tsw_out_opt');
  await db.collection('src').insertMany([{ t: at(0), m: 1, v: 1 }, { t: at(1), m: 1, v: 2 }]);
  const spec = (coll, ts) => ({ $out: { db: db.databaseName, coll, timeseries: ts } });
  await db.collection('src').aggregate([{ $project: { _id: 0 } }, spec('made', { timeField: 't', metaField: 'm' })]).toArray();
  const info = (await db.listCollections({ name: 'made' }).toArray())[0];
  assert.equal(info.type, 'timeseries');
  assert.deepEqual(info.options.timeseries, { timeField: 't', metaField: 'm', granularity: 'seconds', bucketMaxSpanSeconds: 3600 });
  assert.equal(await db.collection('system.buckets.made').countDocuments(), 1);
  assert.deepEqual((await db.collection('made').find({}).sort({ v: 1 }).toArray()).map((d) => d.v), [1, 2]);
  // The same options again (defaults spelled out or not) replace its contents.
  await db.collection('src').aggregate([{ $match: { v: 2 } }, spec('made', { timeField: 't', metaField: 'm', granularity: 'seconds' })]).toArray();
  assert.deepEqual((await db.collection('made').find({}).toArray()).map((d) => d.v), [2]);
  // Other options: 7406103, target untouched.
  await h.expectCode(db.collection('src').aggregate([spec('made', { timeField: 't' })]).toArray(), 7406103,
    /Time-series options inputted must match the existing time-series collection/);
  await h.expectCode(db.collection('src').aggregate([spec('made', { timeField: 't', metaField: 'm', granularity: 'hours' })]).toArray(), 7406103);
  assert.equal(await db.collection('made').countDocuments(), 1);
  // A plain collection or a view there: 7268700.
  await db.collection('plain').insertOne({ x: 1 });
  await h.expectCode(db.collection('src').aggregate([spec('plain', { timeField: 't' })]).toArray(), 7268700,
    /Cannot create a time-series collection from a non time-series collection or view/);
  await db.createCollection('vw', { viewOn: 'src', pipeline: [] });
  await h.expectCode(db.collection('src').aggregate([spec('vw', { timeField: 't' })]).toArray(), 7268700);
  assert.equal(await db.collection('plain').countDocuments(), 1);
  // Bad options as create's: missing timeField 40414, unknown field 40415.
  await h.expectCode(db.collection('src').aggregate([spec('x', { metaField: 'm' })]).toArray(), 40414);
  await h.expectCode(db.collection('src').aggregate([spec('x', { timeField: 't', bogus: 1 })]).toArray(), 40415);
  // A missing timeField in a document: nothing created.
  await h.expectCode(db.collection('src').aggregate([{ $project: { t: 0 } }, spec('none', { timeField: 't' })]).toArray(), 2);
  const all = await names(db);
  assert.ok(!all.includes('none') && !all.includes('system.buckets.none') && !all.some((n) => n.includes('tmp.agg_out')), all.join());
});
