'use strict';
// Time-series collections (SPEC F1-F5) through the Node.js driver: creation
// and its bad input, storage in MongoDB-shaped buckets, reads that unpack
// them, bucket expiry at start + bucketMaxSpanSeconds + N (never before),
// partial TTL on the metaField, dates outside 1970-2038, collMod, and a
// kill -9 in the middle of a mass bucket expiry.
const assert = require('node:assert/strict');
const h = require('./harness');
const { ObjectId } = require('mongodb');

const srv = h.useServer();
const J = { writeConcern: { w: 1, j: true } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

h.test('F1 the seeds\' weather24h example: a time-series view over system.buckets, listed as MongoDB 8.0 lists it', async () => {
  const db = srv.freshDb('ts_f1');
  await db.createCollection('weather24h', { timeseries: { timeField: 'timestamp', metaField: 'sensor', granularity: 'hours' }, expireAfterSeconds: 86400 });
  const info = (await db.listCollections({ name: 'weather24h' }).toArray())[0];
  assert.equal(info.type, 'timeseries');
  assert.deepEqual(info.options, {
    timeseries: { timeField: 'timestamp', metaField: 'sensor', granularity: 'hours', bucketMaxSpanSeconds: 2592000 },
    expireAfterSeconds: 86400,
  });
  const buckets = (await db.listCollections({ name: 'system.buckets.weather24h' }).toArray())[0];
  assert.equal(buckets.type, 'collection');
  // The same create again is success; different options are 48.
  await db.createCollection('weather24h', { timeseries: { timeField: 'timestamp', metaField: 'sensor', granularity: 'hours' }, expireAfterSeconds: 86400 });
  await assert.rejects(db.createCollection('weather24h', { timeseries: { timeField: 'timestamp' } }), (e) => e.code === 48);
  // The default index, as users see it.
  const idx = await db.collection('weather24h').indexes();
  assert.deepEqual(idx.map((i) => [i.name, i.key]), [['sensor_1_timestamp_1', { sensor: 1, timestamp: 1 }]]);
  // The custom form.
  await db.createCollection('custom', { timeseries: { timeField: 't', bucketMaxSpanSeconds: 600, bucketRoundingSeconds: 600 } });
  const c = (await db.listCollections({ name: 'custom' }).toArray())[0];
  assert.deepEqual(c.options.timeseries, { timeField: 't', bucketRoundingSeconds: 600, bucketMaxSpanSeconds: 600 });
  // Default granularity.
  await db.createCollection('plain', { timeseries: { timeField: 't' } });
  const p = (await db.listCollections({ name: 'plain' }).toArray())[0];
  assert.deepEqual(p.options.timeseries, { timeField: 't', granularity: 'seconds', bucketMaxSpanSeconds: 3600 });
});

h.test('F1 bad input: each refused with MongoDB\'s code, nothing half-created', async () => {
  const db = srv.freshDb('ts_bad');
  const cases = [
    [{ metaField: 'm' }, 40414],
    [{ timeField: 't', metaField: 't' }, 72],
    [{ timeField: '_id' }, 72],
    [{ timeField: 'a.b' }, 72],
    [{ timeField: 't', metaField: '_id' }, 72],
    [{ timeField: 't', metaField: 'm.x' }, 72],
    [{ timeField: 't', granularity: 'days' }, 2],
    [{ timeField: 't', bucketMaxSpanSeconds: 100 }, 72],
    [{ timeField: 't', bucketMaxSpanSeconds: 100, bucketRoundingSeconds: 50 }, 72],
    [{ timeField: 't', granularity: 'hours', bucketMaxSpanSeconds: 100 }, 72],
    [{ timeField: 't', bucketMaxSpanSeconds: 0, bucketRoundingSeconds: 0 }, 51024],
    [{ timeField: 't', other: 1 }, 40415],
    [{ timeField: 5 }, 14],
  ];
  for (const [ts, code] of cases) {
    await assert.rejects(db.createCollection('bad', { timeseries: ts }), (e) => e.code === code, JSON.stringify(ts));
  }
  await assert.rejects(db.createCollection('bad', { timeseries: { timeField: 't' }, capped: true, size: 1000 }), (e) => e.code === 72);
  await assert.rejects(db.createCollection('bad', { expireAfterSeconds: 10 }), (e) => e.code === 72);
  await assert.rejects(db.createCollection('bad', { timeseries: { timeField: 't' }, expireAfterSeconds: -1 }), (e) => e.code === 51024);
  assert.deepEqual(await db.listCollections().toArray(), []);
  // Renames are refused (IllegalOperation), as in MongoDB.
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  const ren = (from, to) => srv.client.db('admin').command({ renameCollection: `${db.databaseName}.${from}`, to: `${db.databaseName}.${to}` });
  await assert.rejects(ren('ts', 'ts2'), (e) => e.code === 20 && /Renaming a timeseries collection is not allowed/.test(e.message));
  await db.createCollection('plain');
  await assert.rejects(ren('plain', 'system.buckets.x'), (e) => e.code === 20);
});

h.test('F1 storage in buckets: MongoDB\'s bucket shape, 1,000 measurements per bucket, reads unpack them field for field', async () => {
  const db = srv.freshDb('ts_store');
  await db.createCollection('w', { timeseries: { timeField: 'timestamp', metaField: 'sensor', granularity: 'hours' } });
  const w = db.collection('w');
  const base = Date.parse('2024-05-01T00:00:00Z');
  const docs = [];
  for (let i = 0; i < 2500; i++) {
    const d = { sensor: `s${i % 2}`, timestamp: new Date(base + i * 1000), temp: i % 37, _id: i };
    if (i % 10 === 0) d.extra = { nested: [i, 'x'], flag: true };
    docs.push(d);
  }
  docs.push({ timestamp: new Date(base), temp: -1, _id: 'nometa' });
  await w.insertMany(docs, { ordered: false });
  const buckets = await db.collection('system.buckets.w').find().toArray();
  assert.equal(buckets.length, 2 + 2 + 1); // 1,250 per sensor: 1,000 + 250 each, and the no-meta one
  const b0 = buckets.find((b) => b.meta === 's0');
  assert.deepEqual(Object.keys(b0), ['_id', 'control', 'meta', 'data']);
  assert.equal(b0.control.version, 1);
  assert.equal(b0.control.min.timestamp.getTime(), base); // rounded down to the day
  assert.ok(b0.control.max.timestamp >= b0.control.min.timestamp);
  assert.equal(Object.keys(b0.data.temp).length, 1000);
  assert.ok(!('sensor' in b0.data));

  // Field for field as inserted.
  const back = await w.find({ _id: { $in: [0, 1, 10, 'nometa'] } }).sort({ _id: 1 }).toArray();
  const want = docs.filter((d) => [0, 1, 10, 'nometa'].includes(d._id));
  const norm = (d) => JSON.stringify(Object.keys(d).sort().map((k) => [k, d[k]]));
  assert.deepEqual(back.map(norm).sort(), want.map(norm).sort());

  // Filters on time and meta, projection, sort, count, aggregate.
  const t0 = new Date(base + 100 * 1000);
  const t1 = new Date(base + 200 * 1000);
  const r = await w.find({ sensor: 's1', timestamp: { $gte: t0, $lt: t1 } }, { projection: { _id: 0, temp: 1 } }).sort({ timestamp: -1 }).toArray();
  assert.equal(r.length, 50);
  assert.deepEqual(r[0], { temp: 199 % 37 });
  assert.equal(await w.countDocuments({ sensor: 's0' }), 1250);
  assert.equal(await w.countDocuments({ timestamp: { $lt: new Date(base + 10 * 1000) } }), 11);
  const g = await w.aggregate([
    { $match: { sensor: { $in: ['s0', 's1'] } } },
    { $group: { _id: '$sensor', n: { $sum: 1 }, max: { $max: '$temp' } } },
    { $sort: { _id: 1 } },
    { $project: { _id: 1, n: 1, max: 1 } },
  ]).toArray();
  assert.deepEqual(g, [{ _id: 's0', n: 1250, max: 36 }, { _id: 's1', n: 1250, max: 36 }]);
  const bk = await w.aggregate([{ $bucket: { groupBy: '$temp', boundaries: [0, 10, 40], default: 'neg' } }]).toArray();
  assert.equal(bk.reduce((a, b) => a + b.count, 0), 2501);
  // The plan skips buckets through the meta index.
  const ex = await w.find({ sensor: 's1' }).explain('queryPlanner');
  assert.match(JSON.stringify(ex), /sensor_1_timestamp_1/);
  // Stats.
  const st = await db.command({ collStats: 'w' });
  assert.equal(st.timeseries.bucketsNs, `${db.databaseName}.system.buckets.w`);
  assert.equal(st.timeseries.bucketCount, 5);
  const cs = await w.aggregate([{ $collStats: { storageStats: {} } }]).toArray();
  assert.equal(cs[0].storageStats.timeseries.bucketCount, 5);
});

h.test('F1 inserts: a measurement without a Date timeField is 2; ordered stops there, unordered goes on', async () => {
  const db = srv.freshDb('ts_ins');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const w = db.collection('w');
  const now = new Date();
  const batch = [{ m: 1, t: now, v: 1 }, { m: 1, t: 'not a date', v: 2 }, { m: 1, v: 3 }, { m: 2, t: now, v: 4 }];
  await assert.rejects(w.insertMany(batch, { ordered: true }), (e) => {
    assert.equal(e.writeErrors.length, 1);
    assert.equal(e.writeErrors[0].code, 2);
    assert.equal(e.writeErrors[0].index, 1);
    assert.match(e.writeErrors[0].errmsg, /'t' must be present and contain a valid BSON UTC datetime value/);
    return true;
  });
  assert.equal(await w.countDocuments(), 1);
  await assert.rejects(w.insertMany(batch, { ordered: false }), (e) => e.writeErrors.length === 2 && e.result.insertedCount === 2);
  assert.equal(await w.countDocuments(), 3);
  assert.deepEqual((await w.find({}, { projection: { _id: 0, v: 1 } }).sort({ v: 1 }).toArray()).map((d) => d.v), [1, 1, 4]);
});

h.test('F1 deletes and updates: by metaField whole buckets go; others rewrite buckets measurement by measurement; arbitrary updates and upserts as in MongoDB 8.0', async () => {
  const db = srv.freshDb('ts_del');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const w = db.collection('w');
  const base = Date.now() - 3600e3;
  const docs = [];
  for (let i = 0; i < 300; i++) docs.push({ m: { site: `a${i % 3}` }, t: new Date(base + i * 1000), v: i });
  await w.insertMany(docs);
  assert.equal((await w.deleteMany({ 'm.site': 'a0' })).deletedCount, 100);
  assert.equal((await w.deleteMany({ v: { $gte: 290 } })).deletedCount, 7); // 290..299 without the a0 ones
  assert.equal(await w.countDocuments(), 193);
  assert.equal((await w.deleteOne({ 'm.site': 'a1' })).deletedCount, 1);
  assert.equal(await w.countDocuments({ 'm.site': 'a1' }), 96);
  const u = await w.updateMany({ 'm.site': 'a2' }, { $set: { 'm.site': 'b2' } });
  assert.equal(u.matchedCount, 96);
  assert.equal(await w.countDocuments({ 'm.site': 'b2' }), 96);
  // Arbitrary updates (MongoDB 7.0+): measurement fields, updateOne, moving to another meta, upsert.
  const r1 = await w.updateMany({ v: { $lt: 30 }, 'm.site': 'a1' }, { $inc: { v: 1000 } });
  assert.equal(r1.matchedCount, 9); // 1, 4, ... 28, less the one deleteOne took
  assert.equal(r1.modifiedCount, 9);
  assert.equal(await w.countDocuments({ v: { $gte: 1000 } }), 9);
  const r2 = await w.updateOne({ 'm.site': 'b2' }, { $set: { flag: true } });
  assert.equal(r2.modifiedCount, 1);
  assert.equal(await w.countDocuments({ flag: true }), 1);
  await w.updateMany({ v: { $in: [5, 8] } }, { $set: { 'm.site': 'moved' } });
  assert.equal(await w.countDocuments({ 'm.site': 'moved' }), 2);
  assert.deepEqual((await w.find({ 'm.site': 'moved' }, { projection: { _id: 0, v: 1 } }).sort({ v: 1 }).toArray()).map((d) => d.v), [5, 8]);
  const up = await w.updateOne({ 'm.site': 'new', v: 7777 }, { $set: { t: new Date(base) } }, { upsert: true });
  assert.equal(up.upsertedCount, 1);
  assert.equal(await w.countDocuments({ 'm.site': 'new', v: 7777 }), 1);
  // An update that leaves a measurement without a Date timeField is refused (2) and changes nothing.
  await assert.rejects(w.updateMany({ v: 11 }, { $set: { t: 'later' } }), (e) => e.code === 2);
  await assert.rejects(w.updateMany({ v: 11 }, { $unset: { t: '' } }), (e) => e.code === 2);
  assert.equal((await w.findOne({ v: 11 })).t.getTime(), base + 11000);
  assert.equal(await w.countDocuments(), 193); // 193 - deleteOne + the upsert
  // Inserting after deletes and updates goes on correctly.
  await w.insertOne({ m: { site: 'b2' }, t: new Date(base), v: 1000 });
  assert.equal(await w.countDocuments({ 'm.site': 'b2' }), 95); // 96, less v 5 and 8 moved, plus this one
});

h.test('F2 a bucket goes at its rounded start + bucketMaxSpanSeconds + N: never before, within a second after', async () => {
  const db = srv.freshDb('ts_f2');
  const span = 2;
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm', bucketMaxSpanSeconds: span, bucketRoundingSeconds: span }, expireAfterSeconds: 1 });
  const w = db.collection('w');
  const now = Date.now();
  await w.insertMany([{ m: 'due', t: new Date(now) }, { m: 'later', t: new Date(now + 60000) }]);
  const due = Math.floor(now / (span * 1000)) * span * 1000 + span * 1000 + 1000;
  let goneAt = 0;
  await h.waitFor(async () => {
    const asked = Date.now(); // a loaded machine can answer late: what counts is when the count was asked
    const n = await w.countDocuments({ m: 'due' });
    if (n === 0) goneAt = Date.now();
    if (n === 1) assert.ok(asked <= due + 1000, `still there ${asked - due} ms after it was due`);
    return n === 0;
  }, 'the due bucket expired', 8000, 10);
  assert.ok(goneAt > 0, 'the due bucket expired');
  assert.ok(goneAt >= due, `not before it was due (gone ${goneAt - due} ms after)`);
  assert.ok(goneAt - due < 1000, `within a second (${goneAt - due} ms)`);
  assert.equal(await w.countDocuments({ m: 'later' }), 1);
  const st = await db.admin().command({ serverStatus: 1 });
  assert.ok(st.metrics.ttl.deletedDocuments >= 1);
});

h.test('secondary indexes a time-series collection refuses, as mongod 8.0: text (72), sparse on a measurement (72), hashed / wildcard / 2d on a measurement (67); on the metaField they are kept (found by helper-66)', async () => {
  const db = srv.freshDb('ts_ixkinds');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const w = db.collection('w');
  await w.insertOne({ t: new Date(), m: { k: 'a', loc: { type: 'Point', coordinates: [1, 2] } }, s: 'x', v: 1 });
  await h.expectCode(w.createIndex({ s: 'text' }), 72, /^Text indexes are not supported on time-series collections$/);
  await h.expectCode(w.createIndex({ v: 1 }, { sparse: true }), 72, /^Sparse indexes are not supported on time-series measurements$/);
  for (const key of [{ v: 'hashed' }, { 'v.$**': 1 }, { '$**': 1 }, { v: '2d' }]) {
    await h.expectCode(w.createIndex(key), 67, /Invalid index spec for time-series collection: .*Indexes on measurement fields must be ascending or descending \(numbers only\), or '2dsphere'$/);
  }
  // Allowed: ascending/descending measurements, 2dsphere, and hashed or sparse on the metaField.
  await w.createIndex({ v: -1 });
  await w.createIndex({ 'm.k': 'hashed' });
  await w.createIndex({ 'm.k': 1 }, { sparse: true, name: 'mk_sparse' });
  await w.createIndex({ 'm.loc': '2dsphere' });
  const names = (await w.indexes()).map((i) => i.name).sort();
  assert.deepEqual(names, ['m.k_hashed', 'm.loc_2dsphere', 'm_1_t_1', 'mk_sparse', 'v_-1'].sort(), names.join());
  assert.equal(await w.countDocuments({ v: 1 }), 1);
});

h.test('a document written into system.buckets.<name> must be a bucket reads can unpack (121 otherwise), so the collection stays readable (found by helper-66)', async () => {
  const db = srv.freshDb('ts_bucketval');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const w = db.collection('w');
  const b = db.collection('system.buckets.w');
  await w.insertMany([{ t: new Date('2026-01-01T00:00:00Z'), m: 1, v: 1 }, { t: new Date('2026-01-01T00:00:01Z'), m: 1, v: 2 }]);
  const good = await b.findOne({});
  for (const bad of [{ a: 1 }, { ...good, _id: 7 }, { ...good, _id: new ObjectId(), data: null },
    { ...good, _id: new ObjectId(), control: { ...good.control, min: { ...good.control.min, t: 1 } } },
    { ...good, _id: new ObjectId(), control: { ...good.control, version: 9 } }]) {
    await h.expectCode(b.insertOne(bad), 121, /^Document failed validation/);
  }
  await h.expectCode(b.insertMany(Array.from({ length: 40 }, () => ({ x: 1 }))), 121);
  await h.expectCode(b.updateOne({ _id: good._id }, { $set: { 'control.max.t': 'late' } }), 121);
  await h.expectCode(b.updateOne({ _id: good._id }, { $unset: { data: '' } }), 121);
  assert.deepEqual((await w.find({}, { projection: { _id: 0, v: 1 } }).sort({ v: 1 }).toArray()).map((d) => d.v), [1, 2]);
  // A real bucket (a copy of one under a new _id) is taken and read back.
  await b.insertOne({ ...good, _id: new ObjectId() });
  assert.equal(await w.countDocuments({}), 4);
  // bypassDocumentValidation skips the check, as it skips mongod's validator.
  await db.command({ insert: 'system.buckets.w', documents: [{ ...good, _id: new ObjectId() }], bypassDocumentValidation: true });
  assert.equal(await w.countDocuments({}), 6);
});

h.test('F3 a partial TTL index on the metaField expires matching buckets sooner; bad partial TTL indexes are refused', async () => {
  const db = srv.freshDb('ts_f3');
  await db.createCollection('w', { timeseries: { timeField: 'timestamp', metaField: 'sensor', bucketMaxSpanSeconds: 1, bucketRoundingSeconds: 1 }, expireAfterSeconds: 3600 });
  const w = db.collection('w');
  await assert.rejects(w.createIndex({ timestamp: 1 }, { expireAfterSeconds: 1 }), (e) => e.code === 72);
  await assert.rejects(w.createIndex({ timestamp: 1 }, { expireAfterSeconds: 1, partialFilterExpression: { temp: { $gt: 5 } } }), (e) => e.code === 72);
  await assert.rejects(w.createIndex({ temp: 1 }, { expireAfterSeconds: 1, partialFilterExpression: { sensor: 'x' } }), (e) => e.code === 72);
  // Compound: 67, naming the key as mongod's convertToTTLTimeField does.
  await h.expectCode(w.createIndex({ timestamp: 1, sensor: 1 }, { expireAfterSeconds: 1, partialFilterExpression: { sensor: 'x' } }), 67,
    /^TTL indexes are single-field indexes, compound indexes do not support TTL\. Index spec: \{ timestamp: 1, sensor: 1 \}$/);
  await assert.rejects(w.createIndex({ timestamp: 1 }, { unique: true }), (e) => e.code === 72);
  const made = await db.command({ createIndexes: 'w', indexes: [{ key: { timestamp: 1 }, name: 'timestamp_1', expireAfterSeconds: 1,
    partialFilterExpression: { sensor: { $eq: 'MDB_NYC' } } }] });
  /* Counted as getIndexes() lists them (the metaField index, then this one), not the buckets' _id and time indexes. */
  assert.equal(made.numIndexesBefore, 1);
  assert.equal(made.numIndexesAfter, 2);
  assert.equal((await w.indexes()).length, 2);
  const ix = (await w.indexes()).find((i) => i.name === 'timestamp_1');
  assert.deepEqual(ix.key, { timestamp: 1 });
  assert.equal(ix.expireAfterSeconds, 1);
  assert.deepEqual(ix.partialFilterExpression, { sensor: { $eq: 'MDB_NYC' } });
  const now = new Date();
  await w.insertMany([{ sensor: 'MDB_NYC', timestamp: now, temp: 1 }, { sensor: 'MDB_SF', timestamp: now, temp: 2 }]);
  await h.waitFor(async () => (await w.countDocuments({ sensor: 'MDB_NYC' })) === 0, 'the MDB_NYC measurements expired', 6000, 20);
  assert.equal(await w.countDocuments({ sensor: 'MDB_SF' }), 1);
  await w.dropIndex('timestamp_1');
  assert.deepEqual((await w.indexes()).map((i) => i.name), ['sensor_1_timestamp_1']);
});

h.test('F4 measurements before 1970 and after 2038 are stored, read back and expire, and never stop expiry of the rest', async () => {
  const db = srv.freshDb('ts_f4');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm', bucketMaxSpanSeconds: 1, bucketRoundingSeconds: 1 }, expireAfterSeconds: 1 });
  const w = db.collection('w');
  const old = new Date('1960-06-01T12:00:00Z');
  const far = new Date('2100-01-01T00:00:00Z');
  await w.insertMany([{ m: 'old', t: old }, { m: 'far', t: far }]);
  const back = await w.find({ m: 'far' }).toArray();
  assert.equal(back[0].t.getTime(), far.getTime());
  await h.waitFor(async () => (await w.countDocuments({ m: 'old' })) === 0, 'the 1960 bucket expired', 3000, 20);
  await w.insertOne({ m: 'now', t: new Date() });
  await h.waitFor(async () => (await w.countDocuments({ m: 'now' })) === 0, 'expiry goes on beside a 2100 bucket', 6000, 20);
  assert.equal(await w.countDocuments({ m: 'far' }), 1);
  assert.equal(await w.countDocuments({ t: { $gt: new Date('2038-01-19T03:14:08Z') } }), 1);
});

h.test('F5 collMod sets, changes and removes expireAfterSeconds; bad values are 72', async () => {
  const db = srv.freshDb('ts_f5');
  await db.createCollection('weather24h', { timeseries: { timeField: 'timestamp', metaField: 'sensor', granularity: 'hours' }, expireAfterSeconds: 86400 });
  const opts = async () => (await db.listCollections({ name: 'weather24h' }).toArray())[0].options;
  await db.command({ collMod: 'weather24h', expireAfterSeconds: 600 });
  assert.equal((await opts()).expireAfterSeconds, 600);
  await db.command({ collMod: 'weather24h', expireAfterSeconds: 'off' });
  assert.equal((await opts()).expireAfterSeconds, undefined);
  await assert.rejects(db.command({ collMod: 'weather24h', expireAfterSeconds: 'soon' }), (e) => e.code === 72);
  await assert.rejects(db.command({ collMod: 'weather24h', expireAfterSeconds: -5 }), (e) => e.code === 72);
  await assert.rejects(db.command({ collMod: 'weather24h', timeseries: { granularity: 'seconds' } }), (e) => e.code === 72);
  /* Out of range: refused (they were cast to a negative number and stored, turning the TTL off). */
  const { Long, Decimal128 } = require('mongodb');
  // (NaN is read as 0 by the command's safeInt64, as mongod: not refused; see clustered.test.js.)
  for (const big of [Long.MAX_VALUE, Decimal128.fromString('1e40'), Infinity, 2e9]) {
    await h.expectCode(db.command({ collMod: 'weather24h', expireAfterSeconds: big }), 72, /acceptable range/);
    await h.expectCode(db.createCollection(`big${String(big).length}`, { timeseries: { timeField: 't' }, expireAfterSeconds: big }), 72, /acceptable range/);
  }
  assert.equal((await opts()).expireAfterSeconds, undefined, 'nothing stored');
  await db.createCollection('plain');
  await assert.rejects(db.command({ collMod: 'plain', expireAfterSeconds: 10 }), (e) => e.code === 72);
  // Setting it makes due buckets go at once.
  await db.createCollection('w2', { timeseries: { timeField: 't', bucketMaxSpanSeconds: 1, bucketRoundingSeconds: 1 } });
  await db.collection('w2').insertOne({ t: new Date(Date.now() - 60000) });
  await sleep(300);
  assert.equal(await db.collection('w2').countDocuments(), 1);
  await db.command({ collMod: 'w2', expireAfterSeconds: 10 });
  await h.waitFor(async () => (await db.collection('w2').countDocuments()) === 0, 'the w2 measurements expired', 3000, 20);
  // granularity only grows.
  await db.command({ collMod: 'weather24h', timeseries: { granularity: 'hours' } });
  await db.createCollection('g', { timeseries: { timeField: 't', granularity: 'seconds' } });
  await db.command({ collMod: 'g', timeseries: { granularity: 'minutes' } });
  assert.equal((await db.listCollections({ name: 'g' }).toArray())[0].options.timeseries.bucketMaxSpanSeconds, 86400);
});

h.test('F2 kill -9 during a mass bucket expiry: after restart every bucket not due is intact and validate is clean', async () => {
  const dbName = srv.freshDb('ts_crash').databaseName;
  let db = srv.client.db(dbName);
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm', bucketMaxSpanSeconds: 1, bucketRoundingSeconds: 1 } });
  const w = db.collection('w');
  const now = Date.now();
  for (let k = 0; k < 4; k++) {
    const docs = [];
    for (let i = 0; i < 5000; i++) docs.push({ m: `due${i % 500}`, t: new Date(now - 7200e3 + k * 5000 + (i % 10) * 100), v: i });
    await w.insertMany(docs, J);
  }
  const keep = [];
  for (let i = 0; i < 300; i++) keep.push({ m: `keep${i % 30}`, t: new Date(now + 3600e3 + i * 1000), v: i });
  await w.insertMany(keep, J);
  await db.command({ collMod: 'w', expireAfterSeconds: 60 }, J);
  await sleep(30);
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  const v = await db.command({ validate: 'w' });
  assert.equal(v.valid, true, JSON.stringify(v));
  assert.equal(await db.collection('w').countDocuments({ m: /^keep/ }), 300);
  await h.waitFor(async () => (await db.collection('w').countDocuments({ m: /^due/ })) === 0, 'the due buckets finish expiring', 20000, 20);
  assert.equal(await db.collection('w').countDocuments(), 300);
});

h.test('F1 buckets written to disk (fsync, clean restart) read back whole: the compressed pages decode', async () => {
  const dbName = srv.freshDb('ts_disk').databaseName;
  let db = srv.client.db(dbName);
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm' } });
  const base = Date.parse('2024-01-01T00:00:00Z');
  for (let k = 0; k < 5; k++) {
    const docs = [];
    for (let i = 0; i < 10000; i++) docs.push({ m: `s${i % 20}`, t: new Date(base + (k * 10000 + i) * 1000), v: (k * 10000 + i) * 0.5, s: `x${i % 7}` });
    await db.collection('w').insertMany(docs);
  }
  await srv.client.db('admin').command({ fsync: 1 });
  await srv.server.restart({ kill9: false });
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.equal(await db.collection('w').countDocuments(), 50000);
  const sum = await db.collection('w').aggregate([{ $group: { _id: null, s: { $sum: '$v' } } }]).toArray();
  assert.equal(sum[0].s, (49999 * 50000) / 2 * 0.5);
  assert.equal((await db.command({ validate: 'w' })).valid, true);
});

h.test('F1 aggregate over measurements with $dateTrunc / $dateAdd / $dateSubtract / $dateDiff (MongoDB 5.0+ date arithmetic)', async () => {
  const db = srv.freshDb('ts_dates');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm', granularity: 'minutes' } });
  const base = Date.parse('2024-03-15T10:00:00Z');
  const docs = [];
  for (let i = 0; i < 240; i++) docs.push({ m: 'a', t: new Date(base + i * 60000), v: i });
  await db.collection('w').insertMany(docs);
  const hourly = await db.collection('w').aggregate([
    { $group: { _id: { $dateTrunc: { date: '$t', unit: 'hour' } }, n: { $sum: 1 }, first: { $min: '$v' } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(hourly.map((b) => [b._id.toISOString(), b.n, b.first]), [
    ['2024-03-15T10:00:00.000Z', 60, 0], ['2024-03-15T11:00:00.000Z', 60, 60],
    ['2024-03-15T12:00:00.000Z', 60, 120], ['2024-03-15T13:00:00.000Z', 60, 180],
  ]);
  const d = new Date('2024-03-15T10:47:13.500Z');
  const [r] = await db.aggregate([{ $documents: [{ d, j: new Date('2024-01-31T12:00:00Z'), l: new Date('2024-02-29T00:00:00Z') }] }, {
    $project: {
      _id: 0,
      m15: { $dateTrunc: { date: '$d', unit: 'minute', binSize: 15 } },
      w: { $dateTrunc: { date: '$d', unit: 'week' } },
      wm: { $dateTrunc: { date: '$d', unit: 'week', startOfWeek: 'monday' } },
      q: { $dateTrunc: { date: '$d', unit: 'quarter' } },
      dtz: { $dateTrunc: { date: '$d', unit: 'day', timezone: '+05:30' } },
      a1: { $dateAdd: { startDate: '$j', unit: 'month', amount: 1 } },
      a2: { $dateAdd: { startDate: '$l', unit: 'year', amount: 1 } },
      s1: { $dateSubtract: { startDate: '$d', unit: 'day', amount: 1 } },
      df1: { $dateDiff: { startDate: '$j', endDate: new Date('2024-03-01T00:00:00Z'), unit: 'month' } },
      df2: { $dateDiff: { startDate: new Date('2023-12-31T23:59:59Z'), endDate: new Date('2024-01-01T00:00:00Z'), unit: 'year' } },
      df4: { $dateDiff: { startDate: '$j', endDate: '$d', unit: 'week' } },
      dn: { $dateTrunc: { date: null, unit: 'day' } },
    },
  }]).toArray();
  const iso = (x) => x.toISOString();
  assert.equal(iso(r.m15), '2024-03-15T10:45:00.000Z');
  assert.equal(iso(r.w), '2024-03-10T00:00:00.000Z');
  assert.equal(iso(r.wm), '2024-03-11T00:00:00.000Z');
  assert.equal(iso(r.q), '2024-01-01T00:00:00.000Z');
  assert.equal(iso(r.dtz), '2024-03-14T18:30:00.000Z');
  assert.equal(iso(r.a1), '2024-02-29T12:00:00.000Z');
  assert.equal(iso(r.a2), '2025-02-28T00:00:00.000Z');
  assert.equal(iso(r.s1), '2024-03-14T10:47:13.500Z');
  assert.equal(Number(r.df1), 2);
  assert.equal(Number(r.df2), 1);
  assert.equal(Number(r.df4), 6);
  assert.equal(r.dn, null);
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { x: { $dateTrunc: { date: '$$NOW', unit: 'fortnight' } } } }]).toArray(),
    (e) => e.code === 5439014); // parseTimeUnit: "... value cannot be recognized as a time unit" (was 9 here before)
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { x: { $dateAdd: { startDate: '$$NOW', unit: 'day' } } } }]).toArray(),
    (e) => e.code === 5166402); // requires startDate, unit, and amount
});

h.test('F1 bad input: malformed documents written straight into system.buckets never crash reads, writes or expiry', async () => {
  const db = srv.freshDb('ts_garbage');
  await db.createCollection('w', { timeseries: { timeField: 't', metaField: 'm', bucketMaxSpanSeconds: 1, bucketRoundingSeconds: 1 }, expireAfterSeconds: 1 });
  const w = db.collection('w');
  const b = db.collection('system.buckets.w');
  await w.insertOne({ m: 'ok', t: new Date(Date.now() + 3600e3), v: 1 });
  const junk = [
    { _id: 1, control: 'nope' },
    { _id: 2, control: { version: 1, min: { t: new Date(0) }, max: { t: new Date(0) } }, meta: 'ok', data: { t: { 0: 'not a date' } } },
    { _id: 3, control: { version: 9 }, data: {} },
    { _id: 4, control: { version: 1, min: { t: new Date(0) }, max: { t: new Date(0) } }, data: { t: [1, 2, 3] } },
    { _id: 5, control: { version: 1, min: { t: new Date(0) }, max: { t: new Date(0) } }, meta: 'ok', data: { t: { 0: new Date(0), 5: new Date(1) } } },
  ];
  // Refused as buckets (121); with bypassDocumentValidation they get in, and reads must still not crash.
  await h.expectCode(b.insertMany(junk), 121);
  await b.insertMany(junk, { bypassDocumentValidation: true });
  await assert.rejects(w.find({}).toArray(), (e) => typeof e.code === 'number');
  // The server carries on: writes, a delete by meta, and expiry of the well-formed bucket still work.
  await w.insertOne({ m: 'ok', t: new Date(), v: 2 });
  await w.deleteMany({ m: 'nothing' });
  await w.insertOne({ m: 'soon', t: new Date(), v: 3 });
  await h.sleep(3500);
  assert.equal(await b.countDocuments({ meta: 'soon' }), 0, 'the well-formed due bucket expired');
  const ping = await db.admin().command({ ping: 1 });
  assert.equal(ping.ok, 1);
  await b.deleteMany({ _id: { $in: [1, 2, 3, 4, 5] } });
  // v 2 and v 3 were due after 2 s (span 1 + N 1) and went; v 1 is an hour ahead.
  assert.deepEqual((await w.find({}, { projection: { _id: 0, v: 1 } }).sort({ v: 1 }).toArray()).map((d) => d.v), [1]);
});

h.test('F1 a time-series view left without its buckets is dropped at start-up (as after a crash between the two)', async () => {
  const dbName = srv.freshDb('ts_orphan').databaseName;
  let db = srv.client.db(dbName);
  await db.createCollection('w', { timeseries: { timeField: 't' } });
  await db.createCollection('keep', { timeseries: { timeField: 't' } });
  await db.collection('system.buckets.w').drop();
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
  assert.deepEqual(names, ['keep', 'system.buckets.keep', 'system.views']);
  assert.match(srv.server.stderrTail(200), /half of a time-series collection a crash left/);
});

h.test('$merge into a time-series collection is 166 and leaves it whole ($out into one: timeseries_writes.test.js); $out\'s timeseries option must be an object (14)', async () => {
  const db = srv.freshDb('tsout');
  const t0 = new Date('2026-01-01T00:00:00Z');
  await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' } });
  await db.collection('ts').insertMany([{ t: t0, m: 1, v: 1 }, { t: t0, m: 2, v: 2 }]);
  await db.collection('src').insertMany([{ t: t0, m: 3, v: 3 }]);
  await h.expectCode(db.collection('src').aggregate([{ $out: { db: db.databaseName, coll: 'ts2', timeseries: 't' } }]).toArray(), 14,
    /^BSON field '\$out.timeseries' is the wrong type 'string', expected type 'object'$/);
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
  assert.ok(!names.includes('ts2') && !names.some((n) => n.startsWith('tmp.agg_out')), names.join());
  // $merge cannot add to a time-series collection either (mongod 8.0: a view on its buckets). Found by
  // helper-66: it answered ok and wrote nothing.
  await h.expectCode(db.collection('src').aggregate([{ $merge: { into: 'ts' } }]).toArray(), 166,
    new RegExp(`^Namespace ${db.databaseName}\\.ts is a view, not a collection$`));
  assert.equal(await db.collection('ts').countDocuments(), 2);
});
