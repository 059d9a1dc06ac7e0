'use strict';
// Smaller MongoDB 8.0 commands (src/cmd/cmd_misc.c) and command-level
// behaviours: capped conversions, dataSize, dbHash, top, lockInfo,
// connPoolStats, index filters, tailable cursors, readConcern and the
// Stable API, with mongod's reply shapes and error codes.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { BSON, Binary, Timestamp } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

function md5(buf) { return crypto.createHash('md5').update(buf).digest('hex'); }

// ---------- convertToCapped / cloneCollectionAsCapped ----------

h.test('convertToCapped keeps the documents, makes the collection capped and drops secondary indexes', async () => {
  const db = srv.freshDb('conv');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, v: 'x'.repeat(10) })));
  await c.createIndex({ v: 1 });
  const before = (await db.command({ listCollections: 1, filter: { name: 'c' } })).cursor.firstBatch[0];
  const r = await db.command({ convertToCapped: 'c', size: 100000 });
  assert.equal(r.ok, 1);
  const info = (await db.command({ listCollections: 1, filter: { name: 'c' } })).cursor.firstBatch[0];
  assert.equal(info.options.capped, true);
  assert.equal(info.options.size, 100000); // as create stores it
  assert.notDeepEqual(info.info.uuid, before.info.uuid, 'a new collection (new UUID)');
  const docs = await c.find().toArray();
  assert.equal(docs.length, 50);
  assert.deepEqual(docs.map((d) => d._id), Array.from({ length: 50 }, (_, i) => i));
  const idx = await c.listIndexes().toArray();
  assert.deepEqual(idx.map((i) => i.name), ['_id_']);
  const names = (await db.listCollections().toArray()).map((x) => x.name);
  assert.deepEqual(names, ['c'], 'no temporary collection left');
  // capped behaviour: tailable cursors are now allowed
  const t = await db.command({ find: 'c', tailable: true, batchSize: 1 });
  assert.notEqual(Number(t.cursor.id), 0);
  await db.command({ killCursors: 'c', cursors: [h.cursorId(t.cursor.id)] });
});

h.test('convertToCapped with a size smaller than the data keeps the newest documents', async () => {
  const db = srv.freshDb('conv_small');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: i, pad: 'y'.repeat(100) })));
  await db.command({ convertToCapped: 'c', size: 4096 });
  const docs = await c.find().toArray();
  assert.ok(docs.length > 0 && docs.length < 200, `kept ${docs.length}`);
  assert.equal(docs[docs.length - 1]._id, 199, 'the newest document is kept');
  const st = await db.command({ collStats: 'c' });
  assert.ok(st.size <= 4096, `size ${st.size} within the cap`);
});

h.test('convertToCapped errors: missing size, missing collection, view, time-series, bad size', async () => {
  const db = srv.freshDb('conv_err');
  await db.collection('c').insertOne({ _id: 1 });
  await h.expectCode(db.command({ convertToCapped: 'c' }), 72);
  await h.expectCode(db.command({ convertToCapped: 'nope', size: 1000 }), 26, /source collection .*nope does not exist/);
  await db.command({ create: 'v', viewOn: 'c', pipeline: [] });
  await h.expectCode(db.command({ convertToCapped: 'v', size: 1000 }), 166);
  await db.command({ create: 'ts', timeseries: { timeField: 't' } });
  await h.expectCode(db.command({ convertToCapped: 'ts', size: 1000 }), [166, 20]);
  await h.expectCode(db.command({ convertToCapped: 'c', size: 5308156746568725891247 }), 2);
  await h.expectCode(db.command({ convertToCapped: 'c', size: 'big' }), 14);
  await h.expectCode(db.command({ convertToCapped: 'c', size: 1000, bogus: 1 }), 40415);
  const info = (await db.command({ listCollections: 1, filter: { name: 'c' } })).cursor.firstBatch[0];
  assert.equal(info.options.capped, undefined, 'a failed conversion leaves the collection as it was');
  assert.equal(await db.collection('c').countDocuments(), 1);
});

h.test('cloneCollectionAsCapped copies into a new capped collection and leaves the source', async () => {
  const db = srv.freshDb('clone');
  const src = db.collection('src');
  await src.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i })));
  await src.createIndex({ a: 1 });
  const r = await db.command({ cloneCollectionAsCapped: 'src', toCollection: 'dst', size: 8192 });
  assert.equal(r.ok, 1);
  assert.equal(await db.collection('dst').countDocuments(), 20);
  assert.equal(await src.countDocuments(), 20);
  const info = (await db.command({ listCollections: 1, filter: { name: 'dst' } })).cursor.firstBatch[0];
  assert.equal(info.options.capped, true);
  assert.equal(info.options.size, 8192);
  assert.deepEqual((await db.collection('dst').listIndexes().toArray()).map((i) => i.name), ['_id_']);
  assert.equal((await src.listIndexes().toArray()).length, 2, 'source indexes untouched');
  await h.expectCode(db.command({ cloneCollectionAsCapped: 'src', toCollection: 'dst', size: 8192 }), 48,
    /cloneCollectionAsCapped failed - destination collection .*dst already exists/);
  await h.expectCode(db.command({ cloneCollectionAsCapped: 'missing', toCollection: 'x', size: 8192 }), 26);
  await h.expectCode(db.command({ cloneCollectionAsCapped: 'src', size: 8192 }), 40414);
  await h.expectCode(db.command({ cloneCollectionAsCapped: 'src', toCollection: 'y' }), 72);
});

// ---------- dataSize / dbHash ----------

h.test('dataSize sums BSON sizes, with key ranges, estimate and an unknown namespace', async () => {
  const db = srv.freshDb('dsize');
  const c = db.collection('c');
  const docs = Array.from({ length: 10 }, (_, i) => ({ _id: i, a: i, s: 'z'.repeat(i) }));
  await c.insertMany(docs);
  const total = docs.reduce((n, d) => n + BSON.calculateObjectSize(d), 0);
  const r = await db.command({ dataSize: `${db.databaseName}.c` });
  assert.equal(r.ok, 1);
  assert.equal(r.size, total);
  assert.equal(r.numObjects, 10);
  assert.equal(typeof r.millis, 'number');
  await c.createIndex({ a: 1 });
  const part = docs.filter((d) => d.a >= 2 && d.a < 5).reduce((n, d) => n + BSON.calculateObjectSize(d), 0);
  const rr = await db.command({ dataSize: `${db.databaseName}.c`, keyPattern: { a: 1 }, min: { a: 2 }, max: { a: 5 } });
  assert.equal(rr.size, part);
  assert.equal(rr.numObjects, 3);
  const inferred = await db.command({ dataSize: `${db.databaseName}.c`, min: { a: 2 }, max: { a: 5 } });
  assert.equal(inferred.numObjects, 3);
  const est = await db.command({ dataSize: `${db.databaseName}.c`, estimate: true });
  assert.equal(est.numObjects, 10);
  assert.equal(est.size, total);
  const none = await db.command({ dataSize: `${db.databaseName}.nothing` });
  assert.deepEqual([none.size, none.numObjects], [0, 0]);
  assert.equal(r.estimate, false);
  assert.equal(est.estimate, true);
  assert.equal(none.estimate, undefined);
  await h.expectCode(db.command({ dataSize: `${db.databaseName}.c`, keyPattern: { b: 1 }, min: { b: 1 }, max: { b: 2 } }), 96,
    /Couldn't find valid index containing key pattern/);
  await h.expectCode(db.command({ dataSize: `${db.databaseName}.c`, min: { a: 1 } }), 2, /Max must be set if min is set/);
  await h.expectCode(db.command({ dataSize: `${db.databaseName}.c`, max: { a: 1 } }), 2, /Max must not be set if min is not set/);
  await h.expectCode(db.command({ dataSize: `${db.databaseName}.c`, min: {}, max: { a: 1 } }), 2, /Only one of min or max/);
  await db.command({ create: 'v', viewOn: 'c', pipeline: [] });
  await h.expectCode(db.command({ dataSize: `${db.databaseName}.v` }), 166);
  // a multikey index cannot serve a range
  await db.collection('m').insertMany([{ k: [1, 2] }, { k: 3 }]);
  await db.collection('m').createIndex({ k: 1 });
  await h.expectCode(db.command({ dataSize: `${db.databaseName}.m`, keyPattern: { k: 1 }, min: { k: 0 }, max: { k: 9 } }), 96);
  await h.expectCode(db.command({ dataSize: 5 }), 14);
});

h.test('dbHash hashes each collection in _id order with MD5 and skips views', async () => {
  const db = srv.freshDb('dbhash');
  const a = [{ _id: 2, x: 'b' }, { _id: 1, x: 'a' }, { _id: 3, x: 'c' }];
  await db.collection('a').insertMany(a);
  await db.createCollection('b');
  await db.createCollection('capped', { capped: true, size: 4096 });
  await db.command({ create: 'v', viewOn: 'a', pipeline: [] });
  await db.command({ profile: 2 });
  await db.collection('a').findOne({ _id: 1 });
  await db.command({ profile: 0 });
  assert.ok((await db.listCollections().toArray()).some((x) => x.name === 'system.profile'));
  const r = await db.command({ dbHash: 1 });
  assert.equal(r.ok, 1);
  assert.equal(typeof r.host, 'string');
  // system.views holds v's definition and is hashed as mongod hashes it (a replicated system collection).
  assert.deepEqual(Object.keys(r.collections), ['a', 'b', 'capped', 'system.views']);
  const sorted = [...a].sort((x, y) => x._id - y._id);
  const expectA = md5(Buffer.concat(sorted.map((d) => BSON.serialize(d))));
  assert.equal(r.collections.a, expectA);
  assert.equal(r.collections.b, md5(Buffer.alloc(0)));
  assert.equal(r.md5, md5(r.collections.a + r.collections.b + r.collections.capped + r.collections['system.views']));
  assert.deepEqual(r.capped, ['capped']);
  assert.ok(r.uuids.a instanceof Binary && r.uuids.a.sub_type === 4);
  assert.equal(typeof r.timeMillis, 'number');
  const only = await db.command({ dbHash: 1, collections: ['a'] });
  assert.deepEqual(Object.keys(only.collections), ['a']);
  assert.equal(only.md5, md5(expectA));
  // a change changes the hash
  await db.collection('a').updateOne({ _id: 1 }, { $set: { x: 'A' } });
  const r2 = await db.command({ dbhash: 1 });
  assert.notEqual(r2.collections.a, r.collections.a);
  assert.equal(r2.collections.b, r.collections.b);
});

// ---------- top / lockInfo / connPoolStats ----------

h.test('top counts operations per namespace; lockInfo and connPoolStats answer with mongod\'s shapes', async () => {
  const db = srv.freshDb('diag');
  await db.collection('c').insertOne({});
  const admin = srv.client.db('admin');
  const t = await admin.command({ top: 1 });
  assert.equal(t.ok, 1);
  assert.equal(t.totals.note, 'all times in microseconds');
  const e = t.totals[`${db.databaseName}.c`];
  assert.ok(e, 'the collection is listed');
  for (const k of ['total', 'readLock', 'writeLock', 'queries', 'getmore', 'insert', 'update', 'remove', 'commands']) {
    assert.deepEqual(Object.keys(e[k]), ['time', 'count'], k);
  }
  // real counters: the operations above and these
  const c = db.collection('c');
  await c.insertOne({ x: 1 });
  await c.updateOne({}, { $set: { y: 1 } });
  await c.find().toArray();
  await c.find().toArray();
  await c.countDocuments();
  await c.deleteOne({ x: 1 });
  const e2 = (await admin.command({ top: 1 })).totals[`${db.databaseName}.c`];
  assert.equal(e2.insert.count, 2);
  assert.equal(e2.update.count, 1);
  assert.equal(e2.remove.count, 1);
  assert.equal(e2.queries.count, 2);
  assert.ok(e2.commands.count >= 1, 'the count aggregate');
  assert.equal(e2.writeLock.count, 4);
  await c.findOneAndUpdate({}, { $set: { z: 1 } });
  const e2b = (await admin.command({ top: 1 })).totals[`${db.databaseName}.c`];
  assert.equal(e2b.writeLock.count, 5, 'findAndModify takes a write lock');
  assert.equal(e2b.commands.count, e2.commands.count + 1);
  assert.equal(e2.total.count, e2.readLock.count + e2.writeLock.count);
  assert.equal(e2.total.count, e2.queries.count + e2.getmore.count + e2.insert.count + e2.update.count +
    e2.remove.count + e2.commands.count);
  assert.ok(e2.total.time > 0 && e2.total.time >= e2.insert.time, 'times in microseconds');
  // a dropped collection starts again from zero
  await c.drop();
  await c.insertOne({});
  const e3 = (await admin.command({ top: 1 })).totals[`${db.databaseName}.c`];
  assert.equal(e3.insert.count, 1);
  assert.equal(e3.remove.count, 0);
  await h.expectCode(db.command({ top: 1 }), 13);
  const l = await admin.command({ lockInfo: 1 });
  assert.deepEqual(l.lockInfo, []);
  await h.expectCode(db.command({ lockInfo: 1 }), 13);
  assert.deepEqual((await admin.command({ lockInfo: 1, includeStorageEngineDump: false })).lockInfo, []);
  await h.expectCode(admin.command({ lockInfo: 1, bogus: 1 }), 40415);
  const p = await admin.command({ connPoolStats: 1 });
  assert.equal(p.numClientConnections, 0);
  for (const k of ['totalInUse', 'totalAvailable', 'totalCreated', 'totalRefreshing']) assert.equal(p[k], 0, k);
  assert.deepEqual(p.hosts, {});
  assert.deepEqual(p.pools, {});
});

// ---------- index filters / plan cache ----------

h.test('planCacheSetFilter / ListFilters / ClearFilters keep filters per query shape', async () => {
  const db = srv.freshDb('filters');
  const c = db.collection('c');
  await c.insertOne({ a: 1, b: 1 });
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1 });
  assert.deepEqual((await db.command({ planCacheListFilters: 'c' })).filters, []);
  await db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [{ a: 1 }] });
  await db.command({ planCacheSetFilter: 'c', query: { b: { $gt: 1 } }, sort: { a: 1 }, indexes: ['b_1'] });
  // the same shape (other values) replaces the first filter
  await db.command({ planCacheSetFilter: 'c', query: { a: 7 }, indexes: [{ a: 1 }, { b: 1 }] });
  let f = (await db.command({ planCacheListFilters: 'c' })).filters;
  assert.equal(f.length, 2);
  const byA = f.find((x) => 'a' in x.query);
  assert.deepEqual(byA, { query: { a: 7 }, sort: {}, projection: {}, indexes: [{ a: 1 }, { b: 1 }] });
  const byB = f.find((x) => 'b' in x.query);
  assert.deepEqual(byB.sort, { a: 1 });
  assert.deepEqual(byB.indexes, ['b_1']);
  // the query still runs
  assert.equal((await c.find({ a: 1 }).toArray()).length, 1);
  await db.command({ planCacheClearFilters: 'c', query: { a: 3 } });
  f = (await db.command({ planCacheListFilters: 'c' })).filters;
  assert.equal(f.length, 1);
  await db.command({ planCacheClearFilters: 'c' });
  assert.deepEqual((await db.command({ planCacheListFilters: 'c' })).filters, []);
  // a dropped and re-created collection has no filters
  await db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [{ a: 1 }] });
  await c.drop();
  await c.insertOne({});
  assert.deepEqual((await db.command({ planCacheListFilters: 'c' })).filters, []);
  assert.equal((await db.command({ planCacheClear: 'c' })).ok, 1);
  assert.equal((await db.command({ planCacheClear: 'c', query: { a: 1 }, sort: { b: 1 } })).ok, 1);
  assert.equal((await db.command({ planCacheClear: 'missing' })).ok, 1);
  assert.deepEqual((await db.command({ planCacheListFilters: 'missing' })).filters, []);
  assert.equal((await db.command({ planCacheClearFilters: 'missing' })).ok, 1);
});

h.test('the planner uses only the indexes an index filter allows for that query shape', async () => {
  const db = srv.freshDb('filters_plan');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, a: i % 10, b: i % 5 })));
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1 });
  const ixName = (e) => {
    let s = e.queryPlanner.winningPlan;
    while (s && !s.indexName && s.inputStage) s = s.inputStage;
    return s.indexName || s.stage;
  };
  const before = await c.find({ a: 3, b: 3 }).explain();
  assert.equal(before.queryPlanner.indexFilterSet, false);
  await db.command({ planCacheSetFilter: 'c', query: { a: 1, b: 1 }, indexes: [{ b: 1 }] });
  const e = await c.find({ a: 7, b: 2 }).explain();
  assert.equal(e.queryPlanner.indexFilterSet, true);
  assert.equal(ixName(e), 'b_1');
  assert.deepEqual((await c.find({ a: 7, b: 2 }).toArray()).map((d) => d._id), [7, 17, 27, 37, 47].filter((i) => i % 5 === 2));
  // another shape is not filtered
  const other = await c.find({ a: 7 }).explain();
  assert.equal(other.queryPlanner.indexFilterSet, false);
  assert.equal(ixName(other), 'a_1');
  // a filter naming no usable index makes the query a collection scan; a hint overrides the filter
  await db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: ['b_1'] });
  assert.equal(ixName(await c.find({ a: 4 }).explain()), 'COLLSCAN');
  assert.equal((await c.find({ a: 4 }).toArray()).length, 5);
  assert.equal(ixName(await c.find({ a: 4 }).hint({ a: 1 }).explain()), 'a_1');
  // count uses the same shape
  assert.equal(await c.countDocuments({ a: 4 }), 5);
  await db.command({ planCacheClearFilters: 'c' });
  assert.equal(ixName(await c.find({ a: 4 }).explain()), 'a_1');
});

h.test('index filter commands refuse bad arguments as mongod does', async () => {
  const db = srv.freshDb('filters_err');
  await db.collection('c').insertOne({});
  await h.expectCode(db.command({ planCacheSetFilter: 'c', query: { a: 1 } }), 2, /required field indexes missing/);
  await h.expectCode(db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: {} }), 2, /must be an array/);
  await h.expectCode(db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [] }), 2, /at least one index/);
  await h.expectCode(db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [5] }), 2);
  await h.expectCode(db.command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [{}] }), 2, /cannot be empty/);
  await h.expectCode(db.command({ planCacheSetFilter: 'c', indexes: [{ a: 1 }] }), 2, /required field query missing/);
  await h.expectCode(db.command({ planCacheSetFilter: 'c', query: 1, indexes: [{ a: 1 }] }), 2);
  await h.expectCode(db.command({ planCacheSetFilter: 'missing', query: { a: 1 }, indexes: [{ a: 1 }] }), 2, /no such collection/);
  await h.expectCode(db.command({ planCacheClearFilters: 'c', sort: { a: 1 } }), 2, /without query/);
  await h.expectCode(db.command({ planCacheListFilters: 5 }), 73);
});

h.test('create with a pipeline but no viewOn is 72 InvalidOptions, as mongod\'s create command (found by helper-65)', async () => {
  const db = srv.freshDb('pipe_noview');
  await h.expectCode(db.command({ create: 'x', pipeline: [] }), 72, /^'pipeline' requires 'viewOn' to also be specified$/);
  const names = (await db.listCollections().toArray()).map((c) => c.name);
  assert.deepEqual(names, [], 'nothing created');
});

// ---------- validateDBMetadata ----------

h.test('validateDBMetadata reports indexes and views outside API version 1', async () => {
  const db = srv.freshDb('meta');
  const c = db.collection('c');
  await c.insertOne({ a: 1, t: 'x' });
  await c.createIndex({ s: 1 }, { sparse: true });
  await c.createIndex({ a: 1 });
  // A view may not start from $currentOp (73, its own parse); $listSessions, outside API version 1 too, may.
  await db.command({ create: 'v', viewOn: 'c', pipeline: [{ $listSessions: {} }] });
  await db.command({ create: 'ok_view', viewOn: 'c', pipeline: [{ $match: { a: 1 } }] });
  const r = await srv.client.db('admin').command({ validateDBMetadata: 1, db: db.databaseName,
    apiParameters: { version: '1', strict: true } });
  assert.equal(r.ok, 1);
  const ns = `${db.databaseName}.c`;
  const mine = r.apiVersionErrors.filter((e) => e.ns === ns).map((e) => e.errmsg).sort();
  assert.deepEqual(mine, ['The index with name s_1 is not allowed in API version 1.']);
  for (const e of r.apiVersionErrors) {
    assert.equal(e.code, 323);
    assert.equal(e.codeName, 'APIStrictError');
  }
  const view = r.apiVersionErrors.filter((e) => e.ns === `${db.databaseName}.v`);
  assert.equal(view.length, 1);
  assert.match(view[0].errmsg, /\$listSessions is not allowed with 'apiStrict: true' in API Version 1/);
  assert.equal(r.apiVersionErrors.length, 2);
  // without strict nothing is reported; collection narrows the check
  const loose = await db.command({ validateDBMetadata: 1, db: db.databaseName, apiParameters: { version: '1' } });
  assert.deepEqual(loose.apiVersionErrors, []);
  const one = await db.command({ validateDBMetadata: 1, db: db.databaseName, collection: 'ok_view',
    apiParameters: { version: '1', strict: true } });
  assert.deepEqual(one.apiVersionErrors, []);
  await h.expectCode(db.command({ validateDBMetadata: 1 }), 40414);
  await h.expectCode(db.command({ validateDBMetadata: 1, apiParameters: {} }), 40414);
  await h.expectCode(db.command({ validateDBMetadata: 1, apiParameters: { version: 1 } }), 14);
});

// ---------- Stable API / readConcern ----------

h.test('apiVersion, apiStrict and apiDeprecationErrors are checked as mongod does', async () => {
  const db = srv.freshDb('api');
  await db.collection('c').insertOne({ _id: 1 });
  const ok = await db.command({ find: 'c', apiVersion: '1', apiStrict: true, apiDeprecationErrors: true });
  assert.equal(ok.cursor.firstBatch.length, 1);
  await h.expectCode(db.command({ ping: 1, apiVersion: '2' }), 322, /Cannot accept API version 2/);
  await h.expectCode(db.command({ ping: 1, apiVersion: '3' }), 322, /API version must be "1"/);
  await h.expectCode(db.command({ ping: 1, apiVersion: 1 }), 14);
  await h.expectCode(db.command({ ping: 1, apiStrict: true }), 4886600);
  await h.expectCode(db.command({ ping: 1, apiDeprecationErrors: false }), 4886600);
  await h.expectCode(db.command({ ping: 1, apiVersion: '1', apiStrict: 1 }), 14);
  await h.expectCode(db.command({ dbStats: 1, apiVersion: '1', apiStrict: true }), 323,
    /Provided apiStrict:true, but the command dbStats is not in API Version 1/);
  assert.equal((await db.command({ dbStats: 1, apiVersion: '1', apiStrict: false })).ok, 1);
  assert.equal((await db.command({ dbStats: 1, apiVersion: '1' })).ok, 1);
  await h.expectCode(db.command({ distinct: 'c', key: '_id', apiVersion: '1', apiStrict: true }), 323);
  await h.expectCode(db.command({ aggregate: 1, pipeline: [{ $currentOp: {} }], cursor: {}, apiVersion: '1', apiStrict: true }),
    323, /\$currentOp is not allowed with 'apiStrict: true' in API Version 1/);
  const agg = await db.command({ aggregate: 'c', pipeline: [{ $match: {} }, { $sortByCount: '$_id' }], cursor: {},
    apiVersion: '1', apiStrict: true });
  assert.equal(agg.cursor.firstBatch.length, 1);
  await h.expectCode(db.command({ create: 'v', viewOn: 'c', pipeline: [{ $currentOp: {} }], apiVersion: '1', apiStrict: true }),
    323);
  await h.expectCode(db.command({ collStats: 'c', apiVersion: '1', apiStrict: true }), 323);
  await h.expectCode(db.command({ createUser: 'u', pwd: 'p', roles: [], apiVersion: '1', apiStrict: true }), 323);
});

h.test('a driver with serverApi {version: "1", strict: true} runs V1 commands and is refused others', async () => {
  const client = await srv.newClient({ serverApi: { version: '1', strict: true, deprecationErrors: true } });
  const db = client.db(srv.freshDb('api_driver').databaseName);
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }, { _id: 3, a: 3 }]);
  assert.equal(await c.countDocuments({ a: { $gte: 2 } }), 2);
  assert.equal((await c.find().batchSize(1).toArray()).length, 3); // getMore and killCursors are V1
  await c.updateOne({ _id: 1 }, { $set: { b: 1 } });
  await c.createIndex({ a: 1 });
  assert.equal((await c.aggregate([{ $match: { a: 1 } }]).toArray()).length, 1);
  await h.expectCode(db.command({ dbStats: 1 }), 323);
  await h.expectCode(db.command({ isMaster: 1 }), 323); // hello is in API version 1, isMaster is not
  await client.close();
});

h.test('readConcern combinations mongod\'s ReadConcernArgs refuses answer 72 InvalidOptions with its messages, before anything else', async () => {
  const db = srv.freshDb('rc_combo');
  const T = new Timestamp({ t: 5, i: 1 });
  const Z = new Timestamp({ t: 0, i: 0 });
  const cases = [
    [{ level: 'local', atClusterTime: T }, /^atClusterTime field can be set only if level is equal to snapshot$/],
    [{ atClusterTime: T }, /^atClusterTime field can be set only if level is equal to snapshot$/],
    [{ level: 'snapshot', afterClusterTime: T, atClusterTime: T }, /^Can not specify both afterClusterTime and atClusterTime$/],
    [{ afterClusterTime: T, afterOpTime: { ts: T, t: 1 } }, /^Can not specify both afterClusterTime and afterOpTime$/],
    [{ level: 'available', afterClusterTime: T }, /^afterClusterTime field can be set only if level is equal to majority, local, or snapshot$/],
    [{ level: 'snapshot', afterOpTime: { ts: T, t: 1 } }, /^afterOpTime field cannot be set if level is equal to snapshot$/],
    [{ level: 'majority', afterClusterTime: Z }, /^afterClusterTime cannot be a null timestamp$/],
    [{ level: 'snapshot', atClusterTime: Z }, /^atClusterTime cannot be a null timestamp$/],
  ];
  for (const [readConcern, msg] of cases) {
    const e = await h.expectCode(db.command({ find: 'c', readConcern }), 72, msg);
    assert.equal(e.codeName, 'InvalidOptions');
  }
});

h.test('readConcern snapshot, linearizable, afterOpTime (123) and afterClusterTime (20) are refused on a standalone', async () => {
  const db = srv.freshDb('rc');
  await db.collection('c').insertOne({ _id: 1 });
  await h.expectCode(db.command({ find: 'c', readConcern: { level: 'snapshot' } }), 123,
    /replica set member/);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [], cursor: {}, readConcern: { level: 'snapshot' } }), 123);
  await h.expectCode(db.command({ find: 'c', readConcern: { level: 'linearizable' } }), 123,
    /node needs to be a replica set member to use read concern/);
  await h.expectCode(db.command({ find: 'c', readConcern: { afterOpTime: { ts: new Timestamp({ t: 1, i: 1 }), t: 1 } } }), 123);
  await h.expectCode(db.command({ find: 'c', readConcern: { level: 'local', afterClusterTime: new Timestamp({ t: 1, i: 1 }) } }), 20,
    /afterClusterTime/);
  for (const level of ['local', 'available', 'majority']) {
    const r = await db.command({ find: 'c', readConcern: { level } });
    assert.equal(r.cursor.firstBatch.length, 1, level);
  }
});

// ---------- tailable cursors ----------

h.test('a tailable awaitData find on an empty capped collection returns a dead cursor', async () => {
  const db = srv.freshDb('tail_empty');
  await db.createCollection('cap', { capped: true, size: 4096 });
  const r = await db.command({ find: 'cap', tailable: true, awaitData: true });
  assert.equal(Number(r.cursor.id), 0);
  assert.deepEqual(r.cursor.firstBatch, []);
  // the driver's tailable loop ends instead of calling getMore forever
  const cur = db.collection('cap').find({}, { tailable: true, awaitData: true });
  assert.deepEqual(await cur.toArray(), []);
  // with documents that the filter does not match, the cursor stays open (the scan saw records)
  await db.collection('cap').insertOne({ _id: 1, a: 1 });
  const r2 = await db.command({ find: 'cap', filter: { a: 2 }, tailable: true });
  assert.notEqual(Number(r2.cursor.id), 0);
  await db.collection('cap').insertOne({ _id: 2, a: 2 });
  const g = await db.command({ getMore: h.cursorId(r2.cursor.id), collection: 'cap' });
  assert.deepEqual(g.cursor.nextBatch, [{ _id: 2, a: 2 }]);
  assert.notEqual(Number(g.cursor.id), 0);
  await db.command({ killCursors: 'cap', cursors: [r2.cursor.id] });
});

h.test('a tailable cursor whose last document was deleted dies with 136 CappedPositionLost', async () => {
  const db = srv.freshDb('tail_lost');
  await db.createCollection('cap', { capped: true, size: 4096 });
  const c = db.collection('cap');
  await c.insertMany([{ _id: 1 }, { _id: 2 }]);
  const r = await db.command({ find: 'cap', tailable: true });
  assert.equal(r.cursor.firstBatch.length, 2);
  const id = r.cursor.id;
  assert.notEqual(Number(id), 0);
  await c.deleteOne({ _id: 2 });
  await h.expectCode(db.command({ getMore: h.cursorId(id), collection: 'cap' }), 136,
    /failure to restore tailable cursor position/);
  await h.expectCode(db.command({ getMore: h.cursorId(id), collection: 'cap' }), 43); // the cursor is gone
  // rolled over by the cap: the position is lost as well
  await db.createCollection('small', { capped: true, size: 4096, max: 2 });
  const s = db.collection('small');
  await s.insertMany([{ _id: 1 }, { _id: 2 }]);
  const t = await db.command({ find: 'small', tailable: true, batchSize: 5 });
  await s.insertMany([{ _id: 3 }, { _id: 4 }]);
  await h.expectCode(db.command({ getMore: h.cursorId(t.cursor.id), collection: 'small' }), 136);
});

h.test('an awaitData getMore waits up to maxTimeMS for new documents, then answers an empty batch', async () => {
  const db = srv.freshDb('tail_await');
  await db.createCollection('cap', { capped: true, size: 4096 });
  await db.collection('cap').insertOne({ _id: 1 });
  const r = await db.command({ find: 'cap', tailable: true, awaitData: true });
  const id = r.cursor.id;
  let t0 = Date.now();
  const empty = await db.command({ getMore: h.cursorId(id), collection: 'cap', maxTimeMS: 200 });
  const waited = Date.now() - t0;
  assert.deepEqual(empty.cursor.nextBatch, []);
  assert.notEqual(Number(empty.cursor.id), 0);
  assert.ok(waited >= 150, `waited ${waited} ms`);
  t0 = Date.now();
  const other = await srv.newClient();
  setTimeout(() => { other.db(db.databaseName).collection('cap').insertOne({ _id: 2 }).catch(() => {}); }, 100);
  const got = await db.command({ getMore: h.cursorId(id), collection: 'cap', maxTimeMS: 5000 });
  assert.deepEqual(got.cursor.nextBatch, [{ _id: 2 }]);
  assert.ok(Date.now() - t0 < 4000, 'returned when the document arrived');
  // without awaitData a tailable getMore answers at once, and takes no maxTimeMS (2; the cursor lives on)
  const plain = await db.command({ find: 'cap', tailable: true });
  t0 = Date.now();
  await db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'cap' });
  assert.ok(Date.now() - t0 < 500);
  await h.expectCode(db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'cap', maxTimeMS: 100 }), 2,
    /cannot set maxTimeMS on getMore command for a non-awaitData cursor/);
  assert.deepEqual((await db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'cap' })).cursor.nextBatch, []);
  await db.command({ killCursors: 'cap', cursors: [id, plain.cursor.id] });
});

h.test('bad arguments to these commands are refused without harming the server', async () => {
  const db = srv.freshDb('robust');
  await db.collection('c').insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  await db.collection('c').createIndex({ a: 1 });
  const names = ['convertToCapped', 'cloneCollectionAsCapped', 'dataSize', 'dbHash', 'validateDBMetadata',
    'planCacheClear', 'planCacheClearFilters', 'planCacheListFilters', 'planCacheSetFilter'];
  const values = [1, 'c', '', 'nope.c', `${db.databaseName}.c`, null, {}, [], { a: 1 }, [1, 'x', {}], -1, 1e300, true];
  const extras = [{}, { size: -5 }, { size: 0 }, { size: 'x' }, { toCollection: 5 }, { toCollection: '' },
    { keyPattern: 5 }, { min: { a: 1 }, max: 5 }, { min: { a: 'x' }, max: { a: [] } }, { keyPattern: { a: 1 }, min: { b: 1 }, max: { b: 2 } },
    { collections: 'x' }, { collections: [1] }, { apiParameters: 5 }, { apiParameters: { version: '1', strict: 'x' } },
    { query: 5 }, { query: { a: { $gt: 1 } }, indexes: [{ a: 1 }], sort: 5 }, { query: {}, indexes: [[]] },
    { estimate: 'x' }, { maxObjects: 1 }, { db: 5 }, { collection: [] }];
  for (const n of names) {
    for (const v of values) {
      for (const x of extras) {
        const r = await db.command({ [n]: v, ...x }).catch((e) => e);
        assert.ok(r.ok === 1 || typeof r.code === 'number', `${n} ${JSON.stringify(v)} ${JSON.stringify(x)}: ${r && r.message}`);
      }
    }
  }
  assert.equal((await db.command({ ping: 1 })).ok, 1);
  assert.equal(await db.collection('c').countDocuments(), 2);
});

h.test('listIndexes and listCollections honour cursor.batchSize: the first batch, then the rest through getMore, as mongod', async () => {
  const db = srv.freshDb('listbatch');
  const c = db.collection('c');
  for (const k of ['a', 'b', 'c', 'd']) await c.createIndex({ [k]: 1 });
  const r = await db.command({ listIndexes: 'c', cursor: { batchSize: 2 } });
  assert.equal(r.cursor.firstBatch.length, 2);
  assert.notEqual(Number(r.cursor.id), 0);
  assert.equal(r.cursor.ns, `${db.databaseName}.c`, 'the collection itself, as mongod 8.0\'s list_indexes.cpp');
  const more = await db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c' });
  assert.deepEqual(more.cursor.nextBatch.map((x) => x.name), ['b_1', 'c_1', 'd_1']);
  assert.equal(Number(more.cursor.id), 0);
  assert.deepEqual((await c.listIndexes({ batchSize: 1 }).toArray()).map((x) => x.name), ['_id_', 'a_1', 'b_1', 'c_1', 'd_1']);
  const zero = await db.command({ listIndexes: 'c', cursor: { batchSize: 0 } });
  assert.equal(zero.cursor.firstBatch.length, 0);
  await db.command({ killCursors: 'c', cursors: [zero.cursor.id] });
  for (const n of ['x1', 'x2', 'x3']) await db.createCollection(n);
  const lc = await db.command({ listCollections: 1, nameOnly: true, cursor: { batchSize: 1 } });
  assert.equal(lc.cursor.firstBatch.length, 1);
  assert.notEqual(Number(lc.cursor.id), 0);
  const names = (await db.listCollections({}, { nameOnly: true, batchSize: 1 }).toArray()).map((x) => x.name).sort();
  assert.deepEqual(names, ['c', 'x1', 'x2', 'x3']);
  const all = await db.command({ listIndexes: 'c' });
  assert.equal(Number(all.cursor.id), 0, 'without batchSize: one batch');
  await db.command({ killCursors: '$cmd.listCollections', cursors: [lc.cursor.id] });
});
