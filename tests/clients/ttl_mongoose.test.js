'use strict';
/*
 * Mongoose's `expires` schema option against mayflyd (SPEC H3, A1, C1, C4):
 * Model.init() creates the TTL index (listIndexes shows expireAfterSeconds)
 * and documents disappear once due.
 *
 * The server runs with ttlMonitorSleepSecs=1 (precise expiry is on by default).
 */
const assert = require('node:assert/strict');
const mongoose = require('mongoose');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });
let conn;

h.test('H3: connect with mongoose', async () => {
  const db = srv.freshDb('ttlmongoose');
  conn = await mongoose.createConnection(srv.uri, { dbName: db.databaseName }).asPromise();
  assert.equal(conn.readyState, 1);
});

h.test('H3: schema createdAt {type: Date, expires: 2} creates a TTL index with expireAfterSeconds 2, and documents disappear', async () => {
  const schema = new mongoose.Schema({ name: String, createdAt: { type: Date, expires: 2, default: Date.now } });
  const Session = conn.model('Session', schema);
  await Session.init();
  const ix = (await Session.collection.listIndexes().toArray()).find((i) => i.key && i.key.createdAt === 1);
  assert.ok(ix, 'TTL index on createdAt created by Mongoose');
  assert.equal(ix.expireAfterSeconds, 2);
  const t0 = Date.now();
  await Session.create([{ name: 'a' }, { name: 'b' }, { name: 'c' }]);
  await Session.create({ name: 'future', createdAt: new Date(Date.now() + 3600000) });
  assert.equal(await Session.countDocuments(), 4);
  await h.sleep(Math.max(0, t0 + 1200 - Date.now()));
  assert.equal(await Session.countDocuments({ name: { $in: ['a', 'b', 'c'] } }), 3, 'deleted before createdAt + 2 s');
  await h.waitFor(async () => (await Session.countDocuments({ name: { $in: ['a', 'b', 'c'] } })) === 0,
    'documents gone after createdAt + 2 s', 8000);
  assert.ok(Date.now() - t0 >= 2000, 'gone before 2 s had passed');
  assert.deepEqual((await Session.find().lean()).map((d) => d.name), ['future']);
});

h.test('H3: Mongoose expires as a string ("1s") and the expireAt pattern (expires: 0) work', async () => {
  const shortSchema = new mongoose.Schema({ at: { type: Date, expires: '1s' } });
  const Short = conn.model('Short', shortSchema);
  await Short.init();
  let ix = (await Short.collection.listIndexes().toArray()).find((i) => i.key && i.key.at === 1);
  assert.equal(ix.expireAfterSeconds, 1);

  const atSchema = new mongoose.Schema({ label: String, expireAt: { type: Date, expires: 0 } });
  const Timed = conn.model('Timed', atSchema);
  await Timed.init();
  ix = (await Timed.collection.listIndexes().toArray()).find((i) => i.key && i.key.expireAt === 1);
  assert.equal(ix.expireAfterSeconds, 0);

  await Short.create({ at: new Date() });
  await Timed.create([{ label: 'soon', expireAt: new Date(Date.now() + 1000) }, { label: 'later', expireAt: new Date(Date.now() + 3600000) }]);
  await h.waitFor(async () => (await Short.countDocuments()) === 0 && (await Timed.countDocuments({ label: 'soon' })) === 0,
    'documents gone', 8000);
  assert.equal(await Timed.countDocuments({ label: 'later' }), 1);
});

h.test('H3: close mongoose connection', async () => {
  await conn.close();
});
