'use strict';
/*
 * TTL indexes and capped collections, as MongoDB 8.0:
 *   - createIndexes with expireAfterSeconds on a capped collection is 67
 *     CannotCreateIndex "Cannot create TTL index on a capped collection"
 *     (index_catalog_impl.cpp prepareSpecForCreate), before the comparison
 *     with existing indexes;
 *   - collMod index {expireAfterSeconds} on a capped collection is 72
 *     InvalidOptions "TTL indexes are not supported for capped collections."
 *     (coll_mod.cpp parseCollModRequest), before the value is checked;
 *   - convertToCapped / cloneCollectionAsCapped keep only the _id index, so
 *     a TTL index does not come along;
 *   - the TTL monitor never deletes from a capped collection (mongod: an
 *     invariant in TTLMonitor::_doTTLIndexDelete): a TTL index already on
 *     one (a catalog written before the check; made here with mongod's
 *     ignoreTTLIndexCappedCollectionCheck fail point) is skipped, also after
 *     a restart.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'enableTestCommands=1', '--setParameter', 'ttlMonitorSleepSecs=1'] });
const OLD = () => new Date(Date.now() - 2 * 3600 * 1000);

/* Waits until the TTL monitor removed the expired document of a non-capped control collection. */
async function waitForExpiry(coll) {
  await h.waitFor(async () => (await coll.countDocuments()) === 0, `TTL monitor deletes from ${coll.collectionName}`, 15000, 100);
}

h.test('createIndexes: a TTL index on a capped collection is 67 CannotCreateIndex, and nothing is built', async () => {
  const db = srv.freshDb('cttl');
  await db.createCollection('log', { capped: true, size: 1 << 20 });
  const err = await h.expectCode(db.command({ createIndexes: 'log', indexes: [{ key: { timestamp: -1 }, name: 'timestamp_1', expireAfterSeconds: 3600 }] }), 67);
  assert.equal(err.codeName, 'CannotCreateIndex');
  assert.equal(err.errmsg, 'Cannot create TTL index on a capped collection');
  // expireAfterSeconds: 0 too, and through the driver helper; one bad spec fails the whole request.
  await h.expectCode(db.collection('log').createIndex({ t: 1 }, { expireAfterSeconds: 0 }), 67);
  await h.expectCode(db.command({ createIndexes: 'log', indexes: [{ key: { a: 1 }, name: 'a_1' }, { key: { t: 1 }, name: 't_1', expireAfterSeconds: 10 }] }), 67);
  const names = (await db.collection('log').listIndexes().toArray()).map((i) => i.name);
  assert.deepEqual(names, ['_id_']);
  // Ordinary indexes are still fine on a capped collection.
  await db.collection('log').createIndex({ t: 1 });
  // The same spec as an existing non-TTL index but with expireAfterSeconds: still 67 (checked first, as mongod).
  await h.expectCode(db.collection('log').createIndex({ t: 1 }, { expireAfterSeconds: 5 }), 67);
  // A spec error is reported first (mongod validates the spec before the capped check).
  await h.expectCode(db.collection('log').createIndex({ u: 1 }, { expireAfterSeconds: -1 }), 67, /cannot be less than 0/);
  // A non-capped collection still takes TTL indexes.
  await db.collection('plain').createIndex({ t: 1 }, { expireAfterSeconds: 10 });
});

h.test('collMod: turning an index of a capped collection into a TTL index is 72 InvalidOptions', async () => {
  const db = srv.freshDb('cmttl');
  await db.createCollection('log2', { capped: true, size: 1 << 20 });
  await db.collection('log2').createIndex({ t: 1 });
  const err = await h.expectCode(db.command({ collMod: 'log2', index: { keyPattern: { t: 1 }, expireAfterSeconds: 3600 } }), 72);
  assert.equal(err.codeName, 'InvalidOptions');
  assert.equal(err.errmsg, 'TTL indexes are not supported for capped collections.');
  // By name, and before the value is checked (a negative N is still this error), and before the index is looked up.
  await h.expectCode(db.command({ collMod: 'log2', index: { name: 't_1', expireAfterSeconds: -5 } }), 72, /not supported for capped/);
  await h.expectCode(db.command({ collMod: 'log2', index: { name: 'nope', expireAfterSeconds: 5 } }), 72, /not supported for capped/);
  const ix = (await db.collection('log2').listIndexes().toArray()).find((i) => i.name === 't_1');
  assert.equal(ix.expireAfterSeconds, undefined, 'nothing changed');
  // hidden on the same index is fine.
  const r = await db.command({ collMod: 'log2', index: { name: 't_1', hidden: true } });
  assert.equal(r.hidden_new, true);
});

h.test('convertToCapped and cloneCollectionAsCapped drop a TTL index: the capped result keeps its documents', async () => {
  const db = srv.freshDb('convttl');
  const control = db.collection('control');
  await control.createIndex({ t: 1 }, { expireAfterSeconds: 0 });
  for (const name of ['a', 'b']) {
    await db.collection(name).createIndex({ t: 1 }, { expireAfterSeconds: 0 });
  }
  await db.command({ convertToCapped: 'a', size: 1 << 20 });
  await db.command({ cloneCollectionAsCapped: 'b', toCollection: 'b_capped', size: 1 << 20 });
  for (const name of ['a', 'b_capped']) {
    const names = (await db.collection(name).listIndexes().toArray()).map((i) => i.name);
    assert.deepEqual(names, ['_id_'], `${name} keeps only _id`);
    await db.collection(name).insertOne({ t: OLD() });
    await h.expectCode(db.collection(name).createIndex({ t: 1 }, { expireAfterSeconds: 0 }), 67);
  }
  await control.insertOne({ t: OLD() });
  await waitForExpiry(control);
  assert.equal(await db.collection('a').countDocuments(), 1);
  assert.equal(await db.collection('b_capped').countDocuments(), 1);
});

for (const kill9 of [false, true]) {
  h.test(`a TTL index already on a capped collection is skipped by the TTL monitor, also after ${kill9 ? 'kill -9' : 'a clean restart'}`, async () => {
    const db = srv.freshDb(kill9 ? 'oldk' : 'oldc');
    const dbName = db.databaseName;
    const admin = srv.client.db('admin');
    await db.createCollection('log', { capped: true, size: 1 << 20 });
    await admin.command({ configureFailPoint: 'ignoreTTLIndexCappedCollectionCheck', mode: 'alwaysOn' });
    try {
      await db.collection('log').createIndex({ t: 1 }, { expireAfterSeconds: 0 });
    } finally {
      await admin.command({ configureFailPoint: 'ignoreTTLIndexCappedCollectionCheck', mode: 'off' });
    }
    const J = { writeConcern: { w: 1, j: true } };
    await db.collection('log').insertMany([{ t: OLD(), m: 'old' }, { t: new Date(), m: 'new' }], J);
    await db.collection('control').createIndex({ t: 1 }, { expireAfterSeconds: 0 });
    await db.collection('control').insertOne({ t: OLD() }, J);
    await waitForExpiry(db.collection('control'));
    assert.deepEqual((await db.collection('log').find().sort({ _id: 1 }).toArray()).map((d) => d.m), ['old', 'new']);
    // The index is listed as it is stored; collMod cannot change its N (72, as mongod).
    const ix = (await db.collection('log').listIndexes().toArray()).find((i) => i.name === 't_1');
    assert.equal(ix.expireAfterSeconds, 0);
    await h.expectCode(db.command({ collMod: 'log', index: { name: 't_1', expireAfterSeconds: 5 } }), 72);

    await srv.server.restart({ kill9 });
    await srv.reconnect();
    const db2 = srv.client.db(dbName);
    await db2.collection('control').insertOne({ t: OLD() });
    await waitForExpiry(db2.collection('control'));
    assert.deepEqual((await db2.collection('log').find().sort({ _id: 1 }).toArray()).map((d) => d.m), ['old', 'new']);
    // The monitor did run after the restart (it deleted the control document).
    const st = await srv.client.db('admin').command({ serverStatus: 1 });
    assert.ok(st.metrics.ttl.deletedDocuments >= 1, 'the monitor ran');
  });
}
