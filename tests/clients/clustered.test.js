'use strict';
/*
 * Clustered collections (issue 12) and TTL on them: create with
 * clusteredIndex (and expireAfterSeconds), how listCollections and
 * listIndexes show them, documents whose _id is a date expiring, collMod of
 * expireAfterSeconds (a number or "off"), a restart, and mongod's errors.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function waitCount(c, filter, n, ms = 10000) {
  const deadline = Date.now() + ms;
  let got;
  while ((got = await c.countDocuments(filter)) !== n && Date.now() < deadline) await h.sleep(25);
  return got;
}

h.test('create with clusteredIndex: listCollections and listIndexes show it as mongod does', async () => {
  const db = srv.freshDb('cl');
  await db.createCollection('c', { clusteredIndex: { key: { _id: 1 }, unique: true, name: 'by_time' }, expireAfterSeconds: 3600 });
  const info = (await db.listCollections({ name: 'c' }).toArray())[0];
  assert.deepEqual(info.options.clusteredIndex, { v: 2, key: { _id: 1 }, name: 'by_time', unique: true });
  assert.equal(Number(info.options.expireAfterSeconds), 3600);
  const ix = await db.collection('c').listIndexes().toArray();
  assert.deepEqual(ix, [{ v: 2, key: { _id: 1 }, name: 'by_time', unique: true, clustered: true }]);
  const c = db.collection('c');
  await c.insertOne({ _id: new Date(), v: 1 });
  await h.expectCode(c.insertOne({ _id: (await c.findOne())._id }), 11000);
});

h.test('TTL on a clustered collection: documents whose _id is a past date expire, others stay', async () => {
  const db = srv.freshDb('cl');
  await db.createCollection('t', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 1 });
  const c = db.collection('t');
  const now = Date.now();
  await c.insertMany([
    { _id: new Date(now - 60000), k: 'old' },
    { _id: new Date(now - 5000), k: 'old' },
    { _id: new Date(now + 3600000), k: 'future' },
    { _id: 42, k: 'not a date' },
  ]);
  assert.equal(await waitCount(c, { k: 'old' }, 0), 0, 'past dates expired');
  assert.deepEqual((await c.find().sort({ k: 1 }).toArray()).map((d) => d.k), ['future', 'not a date']);
  // A document due in a second goes about then.
  await c.insertOne({ _id: new Date(Date.now() + 200), k: 'soon' });
  assert.equal(await waitCount(c, { k: 'soon' }, 0), 0);
  const st = await db.admin().command({ serverStatus: 1 });
  assert.ok(Number(st.metrics.ttl.deletedDocuments) >= 3);
});

h.test('collMod changes or removes a clustered collection\'s expireAfterSeconds; a restart keeps it', async () => {
  const db = srv.freshDb('cl');
  await db.createCollection('m', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 100000 });
  const c = db.collection('m');
  await c.insertOne({ _id: new Date(Date.now() - 10000), k: 1 });
  await h.sleep(1200);
  assert.equal(await c.countDocuments({}), 1, 'not due under 100000 s');
  const r = await db.command({ collMod: 'm', expireAfterSeconds: 1 });
  assert.equal(Number(r.expireAfterSeconds_old), 100000);
  assert.equal(Number(r.expireAfterSeconds_new), 1);
  assert.equal(await waitCount(c, {}, 0), 0, 'due once lowered');
  const off = await db.command({ collMod: 'm', expireAfterSeconds: 'off' });
  assert.equal(Number(off.expireAfterSeconds_old), 1);
  const info = (await db.listCollections({ name: 'm' }).toArray())[0];
  assert.equal(info.options.expireAfterSeconds, undefined);
  await c.insertOne({ _id: new Date(Date.now() - 10000), k: 2 });
  await db.command({ collMod: 'm', expireAfterSeconds: 2 });
  await srv.server.restart();
  await srv.reconnect();
  const c2 = srv.client.db(db.databaseName).collection('m');
  assert.equal(await waitCount(c2, {}, 0), 0, 'expired after the restart');
  const again = (await srv.client.db(db.databaseName).listCollections({ name: 'm' }).toArray())[0];
  assert.equal(Number(again.options.expireAfterSeconds), 2);
  assert.equal(again.options.clusteredIndex.unique, true);
  // And across kill -9: the collMod'd value and the clustered index are what the catalog holds.
  await srv.client.db(db.databaseName).command({ collMod: 'm', expireAfterSeconds: 7200 });
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  const k9 = (await srv.client.db(db.databaseName).listCollections({ name: 'm' }).toArray())[0];
  assert.equal(Number(k9.options.expireAfterSeconds), 7200);
  const k9ix = await srv.client.db(db.databaseName).collection('m').listIndexes().toArray();
  assert.deepEqual(k9ix, [{ v: 2, key: { _id: 1 }, name: '_id_', unique: true, clustered: true }]);
});

h.test('bad clusteredIndex and expireAfterSeconds get mongod\'s codes', async () => {
  const db = srv.freshDb('cl');
  const mk = (name, opts) => db.createCollection(name, opts);
  await h.expectCode(mk('a', { clusteredIndex: { key: { _id: 1 }, unique: false } }), 5979700);
  await h.expectCode(mk('b', { clusteredIndex: { key: { a: 1 }, unique: true } }), 197);
  await h.expectCode(mk('c', { clusteredIndex: { key: { _id: -1 }, unique: true } }), 197);
  await h.expectCode(mk('d', { clusteredIndex: { key: { _id: 1, b: 1 }, unique: true } }), 197);
  await h.expectCode(mk('e', { clusteredIndex: { unique: true } }), 40414);
  await h.expectCode(mk('f', { clusteredIndex: { key: { _id: 1 }, unique: true, v: 1 } }), 5979704);
  await h.expectCode(mk('g', { clusteredIndex: true }), 5979703);
  await h.expectCode(mk('h', { expireAfterSeconds: 10 }), 72);
  await h.expectCode(mk('i', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: -1 }), 72);
  await h.expectCode(mk('j', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 'x' }), 14,
    /^BSON field 'create.expireAfterSeconds' is the wrong type 'string', expected types '\[long, int, decimal, double\]'$/);
  // No later than now since the epoch (a time-series bucket's _id keeps 32-bit seconds): 2e9 s is 2033.
  const later = /^TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number$/;
  await h.expectCode(mk('l', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 2e9 }), 72, later);
  await h.expectCode(mk('m', { timeseries: { timeField: 't' }, expireAfterSeconds: 2e9 }), 72, later);
  await h.expectCode(mk('k', { clusteredIndex: { key: { _id: 1 }, unique: true, bogus: 1 } }), 40415);
  await h.expectCode(db.command({ collMod: 'nosuch', expireAfterSeconds: 5 }), 26);
  await db.createCollection('plain');
  await h.expectCode(db.command({ collMod: 'plain', expireAfterSeconds: 5 }), 72);
  const names = (await db.listCollections().toArray()).map((x) => x.name);
  assert.deepEqual(names, ['plain']);
  await h.expectCode(db.command({ collMod: 'plain', expireAfterSeconds: 5 }), 72);
});

h.test('a clustered or time-series expireAfterSeconds is kept as a long, truncated (NaN as 0), as mongod\'s safeInt64', async () => {
  const db = srv.freshDb('cl');
  const { Double } = require('mongodb');
  await db.createCollection('f', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 10.5 });
  const opts = async (n) => (await db.listCollections({ name: n }, { promoteLongs: false }).toArray())[0].options;
  let v = (await opts('f')).expireAfterSeconds;
  assert.equal(v._bsontype, 'Long');
  assert.equal(Number(v), 10);
  await db.command({ create: 'z', timeseries: { timeField: 't' }, expireAfterSeconds: new Double(NaN) });
  v = (await opts('z')).expireAfterSeconds;
  assert.equal(Number(v), 0);
  await h.expectCode(db.command({ collMod: 'f', expireAfterSeconds: 2e9 }), 72, /acceptable range/);
  const r = await db.command({ collMod: 'f', expireAfterSeconds: 1.7e9 });
  assert.equal(Number(r.expireAfterSeconds_new), 1700000000);
});
