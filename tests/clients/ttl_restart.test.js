'use strict';
/*
 * TTL expiry across restarts (SPEC D6): a TTL index and its pending expiries
 * survive kill -9 and a clean restart; documents due while the server was
 * down, or after it came back, are deleted; documents not due remain.
 *
 * The server runs with ttlMonitorSleepSecs=1 (precise expiry is on by default).
 * Writes use j: true so that they survive kill -9 (README: Durability).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

async function ids(coll) {
  return (await coll.find({}, { projection: { _id: 1 } }).sort({ _id: 1 }).toArray()).map((d) => d._id);
}

h.test('D6: kill -9 before documents are due, restart: they expire after the restart; documents not due remain', { timeout: 60000 }, async () => {
  const dbName = srv.freshDb('restart9').databaseName;
  let coll = srv.client.db(dbName).collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const now = Date.now();
  const due = now + 3000;
  const docs = [];
  for (let i = 0; i < 20; i++) docs.push({ _id: `due${String(i).padStart(2, '0')}`, at: new Date(due + i * 10) });
  for (let i = 0; i < 5; i++) docs.push({ _id: `keep${i}`, at: new Date(now + 3600000) });
  docs.push({ _id: 'nodate', at: 'tomorrow' });
  await coll.insertMany(docs, { writeConcern: { w: 1, j: true } });
  assert.equal(await coll.countDocuments(), 26);
  assert.ok(Date.now() < due - 500, 'setup took too long: documents about to be due before the kill');

  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  coll = srv.client.db(dbName).collection('c');

  const ix = (await coll.listIndexes().toArray()).find((i) => i.name === 'at_1');
  assert.ok(ix, 'TTL index survived kill -9');
  assert.equal(ix.expireAfterSeconds, 0);
  if (Date.now() < due - 300) {
    assert.equal(await coll.countDocuments(), 26, 'documents deleted before they were due');
  }
  await h.waitFor(async () => (await coll.countDocuments({ _id: /^due/ })) === 0, 'due documents expired after the restart', 10000);
  assert.ok(Date.now() >= due, 'expired before they were due');
  console.log(`D6 restart: due documents gone ${Date.now() - due} ms after their expiry`);
  const s0 = (await srv.client.db('admin').command({ serverStatus: 1 })).metrics.ttl;
  await h.waitFor(async () => (await srv.client.db('admin').command({ serverStatus: 1 })).metrics.ttl.passes >= s0.passes + 2,
    'two more TTL passes', 6000);
  assert.deepEqual(await ids(coll), ['keep0', 'keep1', 'keep2', 'keep3', 'keep4', 'nodate']);
});

h.test('D6: documents that became due while the server was down are deleted right after a clean restart', { timeout: 60000 }, async () => {
  const dbName = srv.freshDb('restartclean').databaseName;
  let coll = srv.client.db(dbName).collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 2 });
  const now = Date.now();
  await coll.insertMany([
    { _id: 'a', at: new Date(now) }, { _id: 'b', at: new Date(now - 500) }, { _id: 'keep', at: new Date(now + 3600000) },
  ]);
  await srv.server.stop();
  await h.sleep(Math.max(0, now + 2500 - Date.now()));
  await srv.server.start();
  await srv.reconnect();
  coll = srv.client.db(dbName).collection('c');
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: ['a', 'b'] } })) === 0,
    'documents due during the downtime deleted after restart', 5000);
  assert.deepEqual(await ids(coll), ['keep']);
});

h.test('D6: collMod changes to N survive a restart', { timeout: 60000 }, async () => {
  const dbName = srv.freshDb('restartcollmod').databaseName;
  let db = srv.client.db(dbName);
  await db.collection('c').createIndex({ at: 1 }, { expireAfterSeconds: 86400 });
  await db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: 60 } });
  await db.collection('plain').createIndex({ at: 1 });
  await db.command({ collMod: 'plain', index: { keyPattern: { at: 1 }, expireAfterSeconds: 30 } });
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  const n = async (c) => (await db.collection(c).listIndexes().toArray()).find((i) => i.name === 'at_1').expireAfterSeconds;
  assert.equal(await n('c'), 60);
  assert.equal(await n('plain'), 30);
  await db.collection('plain').insertMany([{ _id: 1, at: new Date(Date.now() - 40000) }, { _id: 2, at: new Date() }]);
  await h.waitFor(async () => (await db.collection('plain').countDocuments({ _id: 1 })) === 0, 'converted index expires after restart');
  assert.deepEqual(await ids(db.collection('plain')), [2]);
});

h.test('D6: kill -9 in the middle of a mass expiry (batches whose records went as one range), restart: validate finds the indexes consistent, the rest expires, documents not due remain', { timeout: 120000 }, async () => {
  const dbName = srv.freshDb('restartmass').databaseName;
  let db = srv.client.db(dbName);
  let coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const admin = () => srv.client.db('admin');
  await admin().command({ setParameter: 1, ttlMonitorEnabled: false });
  const N = 20000;
  const base = Date.now() - 3600e3;
  for (let s = 0; s < N; s += 2000) {
    await coll.insertMany(Array.from({ length: 2000 }, (_, i) => ({ _id: s + i, at: new Date(base + s + i) })),
      { writeConcern: { w: 1, j: true } });
  }
  await coll.insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: `keep${i}`, at: new Date(Date.now() + 3600e3) })),
    { writeConcern: { w: 1, j: true } });
  const before = (await admin().command({ serverStatus: 1 })).metrics.ttl;
  await admin().command({ setParameter: 1, ttlMonitorEnabled: true });
  await h.waitFor(async () => (await coll.estimatedDocumentCount()) < N * 0.8, 'a fifth of the due documents deleted', 60000, 5);
  const mid = (await admin().command({ serverStatus: 1 })).metrics.ttl;
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  coll = db.collection('c');
  assert.ok(Number(mid.rangeBatches) > Number(before.rangeBatches), 'batches went as ranges before the kill');

  // Right after recovery, before the monitor has deleted more: every index holds exactly the records' keys.
  const v1 = await db.command({ validate: 'c', full: true });
  assert.equal(v1.valid, true, JSON.stringify(v1));
  assert.equal(Number(v1.keysPerIndex.at_1), Number(v1.nrecords), JSON.stringify(v1));
  assert.equal(Number(v1.keysPerIndex._id_), Number(v1.nrecords), JSON.stringify(v1));
  await h.waitFor(async () => (await coll.countDocuments({ at: { $lte: new Date() } })) === 0, 'the rest expired', 60000);
  const left = await coll.find({}, { projection: { _id: 1 } }).toArray();
  assert.equal(left.length, 100);
  assert.ok(left.every((d) => /^keep/.test(d._id)));
  const v2 = await db.command({ validate: 'c', full: true });
  assert.equal(v2.valid, true, JSON.stringify(v2));
  assert.equal(Number(v2.keysPerIndex.at_1), 100);
  assert.equal(Number(v2.keysPerIndex._id_), 100);
});
