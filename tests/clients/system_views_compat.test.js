'use strict';
/*
 * <db>.system.views as MongoDB 8.0 shows it: the collection that holds a
 * database's view definitions (mongod's durable_view_catalog.cpp and
 * view_catalog.cpp _upsertIntoCatalog), created with the first view and kept
 * after the last, one document per view {_id: "<db>.<view>", viewOn,
 * pipeline[, collation]}. Clients read it (find, aggregate, count,
 * listCollections) but never write it (73, disallow_system_views_user_writes.js);
 * dropping it drops every view (views_drop.js), refused while time-series
 * collections exist (isDroppableCollection: 125); renaming from or to it is
 * 20. The mirror survives clean and kill -9 restarts. Also: a view pipeline
 * led by $collStats (view_catalog_helpers.cpp resolveView stops there) and
 * $lookup from "" (73, document_source_lookup.cpp's lite parse).
 */
const assert = require('node:assert/strict');
const h = require('./harness');
const R = require('./rs_harness');

const srv = h.useServer();
const rs = R.useReplSet(2);
const MAJ = { writeConcern: { w: 'majority' } };

async function listed(db) {
  const r = await db.command({ listCollections: 1 });
  return r.cursor.firstBatch;
}

async function defs(db) {
  return db.collection('system.views').find({}).sort({ _id: 1 }).toArray();
}

h.test('system.views is absent until the first view, then a plain collection in listCollections', async () => {
  const db = srv.freshDb('svlist');
  await db.collection('c').insertOne({ _id: 1, x: 1 });
  let names = (await listed(db)).map((e) => e.name);
  assert.deepEqual(names, ['c']);
  await db.command({ create: 'v', viewOn: 'c', pipeline: [{ $match: { x: 1 } }] });
  const all = await listed(db);
  const sv = all.find((e) => e.name === 'system.views');
  assert.ok(sv, JSON.stringify(all));
  assert.equal(sv.type, 'collection');
  assert.deepEqual(sv.options, {});
  assert.equal(sv.info.readOnly, false);
  assert.ok(sv.info.uuid, 'system.views has a UUID');
  assert.deepEqual(sv.idIndex, { v: 2, key: { _id: 1 }, name: '_id_' });
  names = all.map((e) => e.name).sort();
  assert.deepEqual(names, ['c', 'system.views', 'v']);
  // nameOnly and a filter see it like any collection.
  const r = await db.command({ listCollections: 1, filter: { type: 'collection' }, nameOnly: true });
  assert.deepEqual(r.cursor.firstBatch.map((e) => e.name).sort(), ['c', 'system.views']);
  // It has the _id index.
  const ix = await db.collection('system.views').indexes();
  assert.deepEqual(ix.map((i) => i.name), ['_id_']);
});

h.test('find, aggregate, count and distinct return the view definitions as mongod stores them', async () => {
  const db = srv.freshDb('svread');
  const dbName = db.databaseName;
  await db.collection('c').insertOne({ _id: 1, x: 'a' });
  await db.command({ create: 'v1', viewOn: 'c', pipeline: [{ $match: { x: 'a' } }, { $project: { x: 1 } }] });
  await db.command({ create: 'v2', viewOn: 'v1' });
  await db.command({ create: 'v3', viewOn: 'c', pipeline: [], collation: { locale: 'fr' } });
  const got = await defs(db);
  assert.equal(got.length, 3);
  assert.deepEqual(got[0], { _id: `${dbName}.v1`, viewOn: 'c', pipeline: [{ $match: { x: 'a' } }, { $project: { x: 1 } }] });
  assert.deepEqual(got[1], { _id: `${dbName}.v2`, viewOn: 'v1', pipeline: [] });
  assert.equal(got[2]._id, `${dbName}.v3`);
  assert.equal(got[2].viewOn, 'c');
  assert.deepEqual(got[2].pipeline, []);
  // The collation as listCollections shows the view's (the full spec).
  const info = (await listed(db)).find((e) => e.name === 'v3');
  assert.deepEqual(got[2].collation, info.options.collation);
  assert.equal(got[2].collation.locale, 'fr');
  assert.deepEqual(Object.keys(got[0]), ['_id', 'viewOn', 'pipeline']);
  assert.deepEqual(Object.keys(got[2]), ['_id', 'viewOn', 'pipeline', 'collation']);

  assert.equal(await db.collection('system.views').countDocuments({}), 3);
  assert.equal((await db.command({ count: 'system.views', query: { viewOn: 'c' } })).n, 2);
  const agg = await db.collection('system.views').aggregate([{ $match: { viewOn: 'c' } }, { $sort: { _id: 1 } },
    { $project: { _id: 1 } }]).toArray();
  assert.deepEqual(agg, [{ _id: `${dbName}.v1` }, { _id: `${dbName}.v3` }]);
  assert.deepEqual((await db.collection('system.views').distinct('viewOn')).sort(), ['c', 'v1']);
  const one = await db.collection('system.views').findOne({ _id: `${dbName}.v2` });
  assert.equal(one.viewOn, 'v1');
  // $lookup from it works as from any collection.
  const lk = await db.collection('c').aggregate([
    { $lookup: { from: 'system.views', pipeline: [{ $match: { viewOn: 'c' } }, { $count: 'n' }], as: 'views' } },
  ]).toArray();
  assert.deepEqual(lk[0].views, [{ n: 2 }]);
});

h.test('collMod and drop of a view update system.views; it stays after the last view', async () => {
  const db = srv.freshDb('svmod');
  const dbName = db.databaseName;
  await db.collection('c').insertOne({ _id: 1 });
  await db.command({ create: 'v', viewOn: 'c', pipeline: [] });
  await db.command({ collMod: 'v', viewOn: 'c', pipeline: [{ $match: { _id: 1 } }] });
  assert.deepEqual(await defs(db), [{ _id: `${dbName}.v`, viewOn: 'c', pipeline: [{ $match: { _id: 1 } }] }]);
  assert.equal(await db.collection('v').drop(), true);
  assert.deepEqual(await defs(db), []);
  const names = (await listed(db)).map((e) => e.name).sort();
  assert.deepEqual(names, ['c', 'system.views']);
  // A failed view creation writes nothing.
  await assert.rejects(db.command({ create: 'bad', viewOn: 'c', pipeline: [{ $out: 'x' }] }));
  await assert.rejects(db.command({ create: 'c', viewOn: 'c' }), (e) => e.code === 48);
  assert.deepEqual(await defs(db), []);
  // dropDatabase takes it along.
  await db.dropDatabase();
  assert.deepEqual(await listed(db), []);
});

h.test('a view on a database with none yet: a failing create leaves no system.views', async () => {
  const db = srv.freshDb('svnone');
  await db.collection('c').insertOne({ _id: 1 });
  await assert.rejects(db.command({ create: 'v', viewOn: 'c', pipeline: [{ $out: 'x' }] }));
  await assert.rejects(db.command({ create: 'c', viewOn: 'x' }), (e) => e.code === 48);
  assert.deepEqual((await listed(db)).map((e) => e.name), ['c']);
});

h.test('clients never write system.views (73 InvalidNamespace)', async () => {
  const db = srv.freshDb('svwrite');
  const dbName = db.databaseName;
  await db.command({ create: 'v', viewOn: 'c' });
  const sv = db.collection('system.views');
  const def = { _id: `${dbName}.w`, viewOn: 'c', pipeline: [] };
  await assert.rejects(sv.insertOne(def), (e) => e.code === 73 && /cannot write to/.test(e.message));
  await assert.rejects(sv.updateOne({}, { $set: { invalidField: true } }), (e) => e.code === 73);
  await assert.rejects(sv.deleteMany({}), (e) => e.code === 73);
  await assert.rejects(db.command({ findAndModify: 'system.views', query: {}, update: { invalidField: true } }),
    (e) => e.code === 73);
  assert.equal((await defs(db)).length, 1);
  // Creating a view named system.views is refused, as mongod's create.
  await assert.rejects(db.command({ create: 'system.views', viewOn: 'c' }),
    (e) => e.code === 73 && /Cannot create a view called/.test(e.message));
  // Renames from or to it: 20, mongod's userAllowedWriteNS messages.
  await db.collection('c').insertOne({ _id: 1 });
  await assert.rejects(db.admin().command({ renameCollection: `${dbName}.system.views`, to: `${dbName}.x` }),
    (e) => e.code === 20 && e.message === `error with source namespace: cannot write to ${dbName}.system.views`);
  await assert.rejects(db.admin().command({ renameCollection: `${dbName}.c`, to: `${dbName}.system.views`,
    dropTarget: true }),
  (e) => e.code === 20 && e.message === `error with target namespace: cannot write to ${dbName}.system.views`);
  assert.equal((await defs(db)).length, 1);
});

h.test('dropping system.views drops every view of the database', async () => {
  const db = srv.freshDb('svdrop');
  const dbName = db.databaseName;
  await db.collection('c').insertOne({ _id: 1, x: 1 });
  await db.command({ create: 'v1', viewOn: 'c' });
  await db.command({ create: 'v2', viewOn: 'v1', pipeline: [{ $match: { x: 1 } }] });
  const r = await db.command({ drop: 'system.views' });
  assert.equal(r.ok, 1);
  assert.equal(r.nIndexesWas, 1);
  assert.equal(r.ns, `${dbName}.system.views`);
  assert.deepEqual((await listed(db)).map((e) => e.name), ['c']);
  assert.deepEqual(await db.collection('v1').find().toArray(), []); // now an empty, missing collection
  // A view made later brings system.views back.
  await db.command({ create: 'v3', viewOn: 'c' });
  assert.deepEqual((await defs(db)).map((d) => d._id), [`${dbName}.v3`]);
  // The views_drop.js sequence: collection, view, then system.views; the database is empty.
  assert.equal(await db.collection('c').drop(), true);
  assert.equal(await db.collection('v3').drop(), true);
  assert.deepEqual(await defs(db), []);
  assert.equal(await db.collection('system.views').drop(), true);
  assert.deepEqual(await listed(db), []);
});

h.test('system.views cannot be dropped while time-series collections exist (125)', async () => {
  const db = srv.freshDb('svts');
  const dbName = db.databaseName;
  await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' } });
  const got = await defs(db);
  assert.equal(got.length, 1);
  assert.equal(got[0]._id, `${dbName}.ts`);
  assert.equal(got[0].viewOn, 'system.buckets.ts');
  assert.equal(Object.keys(got[0].pipeline[0])[0], '$_internalUnpackBucket');
  assert.equal(got[0].pipeline[0].$_internalUnpackBucket.timeField, 't');
  assert.equal(got[0].pipeline[0].$_internalUnpackBucket.metaField, 'm');
  await assert.rejects(db.command({ drop: 'system.views' }), (e) => e.code === 125 &&
    e.message === `cannot drop collection ${dbName}.system.views when time-series collections are present`);
  await db.collection('ts').insertOne({ t: new Date(), m: 1 });
  assert.equal(await db.collection('ts').countDocuments({}), 1);
  assert.equal(await db.collection('ts').drop(), true);
  assert.deepEqual(await defs(db), []);
  assert.equal((await db.command({ drop: 'system.views' })).ok, 1);
});

h.test('system.views survives a clean restart and kill -9, and views keep working', { timeout: 90000 }, async () => {
  const dbName = srv.freshDb('svrestart').databaseName;
  let db = srv.client.db(dbName);
  await db.collection('c').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }], { writeConcern: { w: 1, j: true } });
  await db.command({ create: 'v1', viewOn: 'c', pipeline: [{ $match: { x: 1 } }] });
  await db.command({ create: 'v2', viewOn: 'c', pipeline: [] });
  await db.command({ collMod: 'v2', viewOn: 'c', pipeline: [{ $match: { x: 2 } }] });
  const before = await defs(db);
  assert.equal(before.length, 2);

  await srv.server.restart();
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.deepEqual(await defs(db), before);
  assert.deepEqual(await db.collection('v2').find().toArray(), [{ _id: 2, x: 2 }]);

  await db.collection('v1').drop();
  await db.command({ create: 'v3', viewOn: 'v2' });
  const after = await defs(db);
  assert.deepEqual(after.map((d) => d._id), [`${dbName}.v2`, `${dbName}.v3`]);
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.deepEqual(await defs(db), after);
  assert.deepEqual(await db.collection('v3').find().toArray(), [{ _id: 2, x: 2 }]);
  assert.equal(await db.collection('system.views').countDocuments({}), 2);
  assert.equal((await db.command({ count: 'system.views' })).n, 2);

  // A dropped system.views stays dropped, with its views.
  await db.command({ drop: 'system.views' });
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.deepEqual((await listed(db)).map((e) => e.name), ['c']);
});

h.test('a time-series view a crash left without buckets goes at start-up, and its system.views document with it', { timeout: 90000 }, async () => {
  const dbName = srv.freshDb('svorphan').databaseName;
  let db = srv.client.db(dbName);
  await db.createCollection('w', { timeseries: { timeField: 't' } });
  await db.createCollection('keep', { timeseries: { timeField: 't' } });
  await db.collection('system.buckets.w').drop();
  assert.deepEqual((await defs(db)).map((d) => d._id), [`${dbName}.keep`, `${dbName}.w`]);
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.deepEqual((await defs(db)).map((d) => d._id), [`${dbName}.keep`]);
  const names = (await listed(db)).map((e) => e.name).sort();
  assert.deepEqual(names, ['keep', 'system.buckets.keep', 'system.views']);
});

h.test('a view may start with $collStats: it reports on its viewOn and resolution stops there (views_coll_stats.js)', async () => {
  const db = srv.freshDb('svcs');
  const dbName = db.databaseName;
  await db.collection('b').insertMany([{ _id: 1 }, { _id: 2 }]);
  await db.command({ create: 'a', viewOn: 'b', pipeline: [{ $collStats: { latencyStats: {} } }] });
  assert.deepEqual(await db.collection('a').aggregate([{ $project: { _id: 0, ns: 1 } }]).toArray(), [{ ns: `${dbName}.b` }]);
  // The reader's own leading $collStats is about the view itself.
  assert.deepEqual(await db.collection('a').aggregate([{ $collStats: { latencyStats: {} } }, { $project: { _id: 0, ns: 1 } }]).toArray(),
    [{ ns: `${dbName}.a` }]);
  // A view on it with its own $collStats: the resolution stops at the first one found.
  await db.command({ create: 'a2', viewOn: 'a', pipeline: [{ $collStats: { latencyStats: {} } }, { $match: {} }] });
  assert.deepEqual(await db.collection('a2').aggregate([{ $project: { _id: 0, ns: 1 } }]).toArray(), [{ ns: `${dbName}.a` }]);
  await db.command({ create: 'a3', viewOn: 'b', pipeline: [{ $collStats: { count: {} } }] });
  assert.deepEqual(await db.collection('a3').aggregate([{ $project: { _id: 0, ns: 1, count: 1 } }]).toArray(),
    [{ ns: `${dbName}.b`, count: 2 }]);
  assert.equal(await db.collection('a3').countDocuments({}), 1);
  // find, count and distinct read it as the aggregation would (mongod runs them as one).
  assert.deepEqual(await db.collection('a3').find({}, { projection: { _id: 0, ns: 1, count: 1 } }).toArray(),
    [{ ns: `${dbName}.b`, count: 2 }]);
  assert.deepEqual(await db.collection('a3').find({ count: 5 }).toArray(), []);
  assert.equal((await db.command({ count: 'a3' })).n, 1);
  assert.deepEqual(await db.collection('a3').distinct('ns'), [`${dbName}.b`]);
  assert.deepEqual(await db.collection('b').aggregate([{ $unionWith: { coll: 'a3', pipeline: [{ $project: { _id: 0, ns: 1 } }] } }]).toArray(),
    [{ _id: 1 }, { _id: 2 }, { ns: `${dbName}.b` }]);
  // Its spec is checked at creation; elsewhere than first it is 40602, as in any pipeline.
  await assert.rejects(db.command({ create: 'bad', viewOn: 'b', pipeline: [{ $collStats: { bad: {} } }] }),
    (e) => e.code === 40415);
  await assert.rejects(db.command({ create: 'bad', viewOn: 'b', pipeline: [{ $match: {} }, { $collStats: {} }] }),
    (e) => e.code === 40602);
  assert.deepEqual((await defs(db)).map((d) => d._id), [`${dbName}.a`, `${dbName}.a2`, `${dbName}.a3`]);
});

h.test('$lookup from "" is 73 "invalid $lookup namespace: <db>." (mongod 8.0\'s lite parse)', async () => {
  const db = srv.freshDb('svlk');
  const dbName = db.databaseName;
  await db.collection('b').insertOne({ _id: 1 });
  const msg = `invalid $lookup namespace: ${dbName}.`;
  await assert.rejects(db.collection('b').aggregate([{ $lookup: { from: '', localField: 'x', foreignField: 'y', as: 'r' } }]).toArray(),
    (e) => e.code === 73 && e.message === msg);
  await assert.rejects(db.collection('b').aggregate([{ $lookup: { from: '', pipeline: [], as: 'r' } }]).toArray(),
    (e) => e.code === 73 && e.message === msg);
  await assert.rejects(db.collection('b').aggregate([{ $facet: { f: [{ $lookup: { from: '', pipeline: [], as: 'r' } }] } }]).toArray(),
    (e) => e.code === 73 && e.message === msg);
  // A $lookup without from (a collectionless sub-pipeline) is not this error.
  const ok = await db.collection('b').aggregate([{ $lookup: { pipeline: [{ $documents: [{ z: 1 }] }], as: 'r' } }]).toArray();
  assert.deepEqual(ok, [{ _id: 1, r: [{ z: 1 }] }]);
});

R.test('a replica set: each member keeps the same system.views; its drop replicates; a transaction may not read it (263)', async () => {
  const db = rs.freshDb('svrs');
  const dbName = db.databaseName;
  await db.collection('c').insertOne({ _id: 1, x: 1 }, MAJ);
  await db.command({ create: 'v1', viewOn: 'c', pipeline: [{ $match: { x: 1 } }] });
  await db.command({ create: 'v2', viewOn: 'v1', collation: { locale: 'simple' } });
  await db.command({ collMod: 'v2', viewOn: 'c', pipeline: [] });
  await db.command({ create: 'v3', viewOn: 'c' });
  await db.collection('v3').drop();
  await db.collection('c').insertOne({ _id: 2 }, MAJ);
  const p = await rs.waitForPrimary();
  const want = await db.collection('system.views').find().sort({ _id: 1 }).toArray();
  assert.deepEqual(want.map((d) => d._id), [`${dbName}.v1`, `${dbName}.v2`]);
  const s = 1 - p;
  const onSecondary = async () => rs.reader(s).db(dbName).collection('system.views').find().sort({ _id: 1 }).toArray();
  await rs.waitUntil(async () => JSON.stringify(await onSecondary()) === JSON.stringify(want),
    { what: 'the secondary to hold the same view definitions' });
  // The same dbHash for system.views on both members (its documents are the same, not replicated twice).
  const hashes = await Promise.all([p, s].map((i) => rs.direct(i).db(dbName).command({ dbHash: 1, collections: ['system.views'] })));
  assert.equal(hashes[0].collections['system.views'], hashes[1].collections['system.views']);
  // No oplog entry writes system.views: the views' DDL carries their definitions.
  const ops = await rs.direct(p).db('local').collection('oplog.rs').find({ ns: `${dbName}.system.views` }).toArray();
  assert.deepEqual(ops, []);

  // A transaction may not read it (mongod's shard_role acquisition).
  const session = rs.client.startSession();
  try {
    session.startTransaction();
    await assert.rejects(db.collection('system.views').find({}, { session }).toArray(),
      (e) => e.code === 263 && e.message === 'Cannot access system.views collection in a transaction');
    await session.abortTransaction().catch(() => {});
  } finally {
    await session.endSession();
  }

  // Dropping it drops the views on every member.
  await db.command({ drop: 'system.views', writeConcern: { w: 'majority' } });
  await rs.waitUntil(async () => {
    const names = (await rs.reader(s).db(dbName).command({ listCollections: 1, nameOnly: true })).cursor.firstBatch
      .map((e) => e.name);
    return JSON.stringify(names) === JSON.stringify(['c']);
  }, { what: 'the secondary to drop system.views and the views' });
});

/*
 * Other system collections: isDroppableCollection (catalog/drop_collection.cpp)
 * lets a client drop system.js, time-series buckets and a few internal ones; the
 * rest, admin.system.users among them, are 20 "cannot drop system collection".
 */
h.test('drop of a system collection outside isDroppableCollection\'s list is 20; system.js and buckets may go', async () => {
  const admin = srv.client.db('admin');
  await admin.command({ createUser: 'sysdrop_u', pwd: 'pw', roles: [] });
  await h.expectCode(admin.command({ drop: 'system.users' }), 20, /^cannot drop system collection admin\.system\.users$/);
  assert.ok(await admin.collection('system.users').findOne({ _id: 'admin.sysdrop_u' }), 'the users stay');
  await admin.command({ dropUser: 'sysdrop_u' });
  const db = srv.freshDb('sysdrop');
  await db.collection('system.js').insertOne({ _id: 'f', value: 1 });
  assert.equal((await db.command({ drop: 'system.js' })).ok, 1);
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  await db.collection('ts').insertOne({ t: new Date() });
  assert.equal((await db.command({ drop: 'system.buckets.ts' })).ok, 1);
  assert.ok(!(await db.listCollections({ name: 'system.buckets.ts' }).toArray()).length);
});
