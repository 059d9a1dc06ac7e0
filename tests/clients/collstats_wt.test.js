'use strict';
/*
 * collStats' WiredTiger sections and $collStats queryExecStats, as mongod
 * 8.0 with WiredTiger reports them (src/cmd/cmd_coll.c, storage.h
 * mf_storage_table_stats_bson, query/exec.c count_accesses):
 * - wiredTiger: {metadata: {formatVersion: 1}, creationString, type: "file",
 *   uri: "statistics:table:coll-...", then WiredTiger's data-source
 *   statistics grouped by the part of their description before ": "
 *   ("block-manager", "btree", "cache", ...)}, never scaled;
 * - indexDetails: the same for each index's table, keyed by index name;
 * - queryExecStats.collectionScans {total, nonTailable}: client queries
 *   whose plan was a COLLSCAN of the collection, once per query (a getMore
 *   does not count again), tailable ones in total only.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const GROUPS = ['block-manager', 'btree', 'cache', 'cursor', 'reconciliation', 'transaction', 'compression'];

/* Every group holds only numbers, and at least one. */
function assertGroups(wt, where) {
  for (const g of GROUPS) {
    assert.equal(typeof wt[g], 'object', `${where}: group ${g} missing: ${Object.keys(wt)}`);
    const vals = Object.entries(wt[g]);
    assert.ok(vals.length > 0, `${where}: group ${g} is empty`);
    for (const [k, v] of vals) assert.equal(typeof v, 'number', `${where}: ${g}.${k} is ${typeof v}`);
  }
  /* Groups after the four leading fields, in byte order (mongod's std::map). */
  const keys = Object.keys(wt);
  assert.deepEqual(keys.slice(0, 4), ['metadata', 'creationString', 'type', 'uri']);
  const groups = keys.slice(4);
  assert.deepEqual(groups, [...groups].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
}

async function loaded(db, name, n = 1000) {
  const c = db.collection(name);
  const docs = [];
  for (let i = 0; i < n; i++) docs.push({ i, g: i % 7, s: `v${i}`.padEnd(60, 'x') });
  await c.insertMany(docs);
  return c;
}

async function scans(db, name) {
  const [d] = await db.collection(name).aggregate([{ $collStats: { queryExecStats: {} } }]).toArray();
  return d.queryExecStats.collectionScans;
}

h.test('collStats: wiredTiger section of the collection table after 1,000 documents', async () => {
  const db = srv.freshDb('wt');
  const c = await loaded(db, 'c');
  await db.admin().command({ fsync: 1 }); /* a checkpoint: the file holds the documents */
  const st = await db.command({ collStats: 'c' });
  assert.equal(st.count, 1000);
  const wt = st.wiredTiger;
  assert.deepEqual(wt.metadata, { formatVersion: 1 });
  assert.equal(wt.type, 'file');
  assert.match(wt.uri, /^statistics:table:coll-[0-9a-f]+$/);
  assert.equal(typeof wt.creationString, 'string');
  assert.match(wt.creationString, /(^|,)key_format=q(,|$)/);
  assert.match(wt.creationString, /(^|,)value_format=u(,|$)/);
  assertGroups(wt, 'wiredTiger');
  const bm = wt['block-manager'];
  assert.equal(bm['file allocation unit size'], 4096);
  assert.equal(typeof bm['file bytes available for reuse'], 'number');
  assert.equal(typeof bm['blocks allocated'], 'number');
  /* The block manager's file size is the file collStats' storageSize is (nothing written since the checkpoint). */
  assert.equal(bm['file size in bytes'], st.storageSize);
  assert.ok(st.storageSize > 4096 * 4, `storageSize ${st.storageSize}`);
  assert.ok(wt.cache['bytes currently in the cache'] > 0, JSON.stringify(wt.cache));
  /* Field order as mongod: the section after capped, indexDetails right after nindexes. */
  const keys = Object.keys(st);
  assert.equal(keys.indexOf('wiredTiger'), keys.indexOf('capped') + 1);
  assert.equal(keys.indexOf('indexDetails'), keys.indexOf('nindexes') + 1);
  await c.drop();
});

h.test('collStats: indexDetails has _id_ and every created index, each its own table', async () => {
  const db = srv.freshDb('idx');
  const c = await loaded(db, 'c');
  await c.createIndex({ i: 1 }, { unique: true });
  await c.createIndex({ g: 1, s: -1 });
  await c.createIndex({ s: 1 }, { name: 'by_s', sparse: true });
  const st = await db.command({ collStats: 'c' });
  const names = Object.keys(st.indexDetails).sort();
  assert.deepEqual(names, ['_id_', 'by_s', 'g_1_s_-1', 'i_1'].sort());
  assert.deepEqual(Object.keys(st.indexDetails).sort(), Object.keys(st.indexSizes).sort());
  const uris = new Set([st.wiredTiger.uri]);
  for (const n of names) {
    const d = st.indexDetails[n];
    assert.match(d.uri, /^statistics:table:index-[0-9a-f]+$/, n);
    uris.add(d.uri);
    assert.equal(d.type, 'file');
    assert.match(d.creationString, /(^|,)key_format=u(,|$)/, n);
    /* mongod's index data formats: 12 for a unique index other than _id, else 8; infoObj is the spec. */
    assert.equal(d.metadata.formatVersion, n === 'i_1' ? 12 : 8, n);
    const info = JSON.parse(d.metadata.infoObj);
    assert.equal(info.name, n);
    assertGroups(d, `indexDetails.${n}`);
    assert.ok(d.cache['bytes currently in the cache'] > 0, n);
  }
  assert.equal(uris.size, names.length + 1, 'each index names its own table');
  assert.equal(JSON.parse(st.indexDetails.by_s.metadata.infoObj).sparse, true);
  /* A dropped index leaves indexDetails. */
  await c.dropIndex('by_s');
  const st2 = await db.command({ collStats: 'c' });
  assert.deepEqual(Object.keys(st2.indexDetails).sort(), ['_id_', 'g_1_s_-1', 'i_1']);
});

h.test('collStats scale: sizes scaled, the WiredTiger statistics not', async () => {
  const db = srv.freshDb('scale');
  await loaded(db, 'c');
  await db.admin().command({ fsync: 1 });
  const one = await db.command({ collStats: 'c' });
  const k = await db.command({ collStats: 'c', scale: 1024 });
  assert.equal(k.scaleFactor, 1024);
  assert.equal(k.storageSize, Math.floor(one.storageSize / 1024));
  assert.equal(k.wiredTiger['block-manager']['file allocation unit size'], 4096);
  assert.equal(k.wiredTiger['block-manager']['file size in bytes'], one.storageSize);
  assert.equal(k.indexDetails._id_['block-manager']['file allocation unit size'], 4096);
  assert.equal(k.indexDetails._id_['block-manager']['file size in bytes'], one.indexSizes._id_);
});

h.test('$collStats storageStats carries wiredTiger and indexDetails too', async () => {
  const db = srv.freshDb('agg');
  const c = await loaded(db, 'c', 50);
  await c.createIndex({ g: 1 });
  const [d] = await c.aggregate([{ $collStats: { storageStats: { scale: 2 } } }]).toArray();
  const ss = d.storageStats;
  assert.equal(ss.scaleFactor, 2);
  assert.match(ss.wiredTiger.uri, /^statistics:table:coll-/);
  assertGroups(ss.wiredTiger, 'storageStats.wiredTiger');
  assert.deepEqual(Object.keys(ss.indexDetails).sort(), ['_id_', 'g_1']);
  const st = await db.command({ collStats: 'c' });
  assert.equal(ss.wiredTiger.uri, st.wiredTiger.uri);
  assert.equal(ss.indexDetails.g_1.uri, st.indexDetails.g_1.uri);
});

h.test('$collStats queryExecStats counts the collection scans of client queries', async () => {
  const db = srv.freshDb('qes');
  const c = await loaded(db, 'c');
  await c.createIndex({ i: 1 });
  const other = await loaded(db, 'other', 10);
  const before = await scans(db, 'c');
  assert.equal(typeof before.total, 'number');
  assert.equal(typeof before.nonTailable, 'number');

  /* Collection scans: 5. */
  assert.equal((await c.find({ g: 3 }).toArray()).length, 143); /* 1 (its getMores do not count again) */
  assert.equal((await c.find({}).batchSize(10).toArray()).length, 1000); /* 2: one query, 100 batches */
  assert.equal(await c.countDocuments({ g: 1 }), 143); /* 3 */
  assert.equal((await c.aggregate([{ $match: { s: /^v12x/ } }]).toArray()).length, 1); /* 4 */
  await c.updateMany({ g: 6 }, { $set: { u: true } }); /* 5 */
  /* Not collection scans: an index scan, an _id lookup, another collection's scan, a count of all. */
  assert.equal((await c.find({ i: { $gte: 990 } }).toArray()).length, 10);
  assert.equal((await c.find({ _id: (await c.findOne({ i: 5 }))._id }).toArray()).length, 1);
  assert.equal((await other.find({ g: 1 }).toArray()).length, 2);
  assert.equal(await c.estimatedDocumentCount(), 1000);

  const after = await scans(db, 'c');
  assert.equal(after.total - before.total, 5, JSON.stringify({ before, after }));
  assert.equal(after.nonTailable - before.nonTailable, 5, JSON.stringify({ before, after }));
  /* Asking is not a scan. */
  assert.deepEqual(await scans(db, 'c'), after);
  /* Combined with the other sections, in mongod's order. */
  const [d] = await c.aggregate([{ $collStats: { queryExecStats: {}, count: {}, latencyStats: {} } }]).toArray();
  assert.deepEqual(Object.keys(d), ['ns', 'host', 'localTime', 'latencyStats', 'count', 'queryExecStats']);
});

h.test('$collStats queryExecStats: a tailable scan counts in total only', async () => {
  const db = srv.freshDb('tail');
  await db.createCollection('cap', { capped: true, size: 1 << 20 });
  const cap = db.collection('cap');
  await cap.insertMany([{ a: 1 }, { a: 2 }, { a: 3 }]);
  const before = await scans(db, 'cap');
  const cur = cap.find({}, { tailable: true, batchSize: 2 });
  assert.equal((await cur.next()).a, 1);
  assert.equal((await cur.next()).a, 2);
  assert.equal((await cur.next()).a, 3); /* a getMore on the same scan */
  await cur.close();
  assert.equal((await cap.find({ a: 2 }).toArray()).length, 1);
  const after = await scans(db, 'cap');
  assert.equal(after.total - before.total, 2, JSON.stringify({ before, after }));
  assert.equal(after.nonTailable - before.nonTailable, 1, JSON.stringify({ before, after }));
});

h.test('$collStats queryExecStats: errors as mongod (missing, view, bad spec)', async () => {
  const db = srv.freshDb('err');
  await loaded(db, 'c', 5);
  await h.expectCode(db.collection('nope').aggregate([{ $collStats: { queryExecStats: {} } }]).toArray(), 26,
    /Unable to retrieve queryExecStats in \$collStats stage :: caused by :: Collection \[.*\.nope\] not found/);
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  await h.expectCode(db.collection('v').aggregate([{ $collStats: { queryExecStats: {} } }]).toArray(), 166,
    /is a view, not a collection/);
  await h.expectCode(db.command({ collStats: 'v' }), 166);
  await h.expectCode(db.collection('c').aggregate([{ $collStats: { queryExecStats: { x: 1 } } }]).toArray(), 31170);
  await h.expectCode(db.collection('c').aggregate([{ $collStats: { queryExecStats: 1 } }]).toArray(), 14);
  await h.expectCode(db.command({ collStats: 'c', scale: 'x' }), 14);
  await h.expectCode(db.command({ collStats: 'c', scale: 0 }), 2);
  assert.equal((await db.command({ collStats: 'nope' })).count, 0); /* the command answers zeros (mongod's CmdCollStats) */
  /* The server is still there. */
  assert.equal((await db.command({ collStats: 'c' })).count, 5);
});

h.test('time-series: collStats shows the buckets table; its queries scan the buckets', async () => {
  const db = srv.freshDb('ts');
  await db.createCollection('m', { timeseries: { timeField: 't', metaField: 'k' } });
  const m = db.collection('m');
  const t0 = Date.UTC(2025, 0, 1);
  await m.insertMany(Array.from({ length: 200 }, (_, i) => ({ t: new Date(t0 + i * 1000), k: i % 4, v: i })));
  const st = await db.command({ collStats: 'm' });
  assert.equal(st.timeseries.bucketsNs, `${db.databaseName}.system.buckets.m`);
  assert.match(st.wiredTiger.uri, /^statistics:table:coll-/);
  assertGroups(st.wiredTiger, 'buckets wiredTiger');
  assert.ok(Object.keys(st.indexDetails).length >= 1, JSON.stringify(Object.keys(st.indexDetails)));
  const b = await db.command({ collStats: 'system.buckets.m' });
  assert.equal(b.wiredTiger.uri, st.wiredTiger.uri);

  const before = await scans(db, 'm');
  assert.equal((await m.find({ v: { $gte: 150 } }).toArray()).length, 50);
  const after = await scans(db, 'm');
  assert.ok(after.total >= before.total + 1, JSON.stringify({ before, after }));
  assert.deepEqual(await scans(db, 'system.buckets.m'), after);
});
