'use strict';
/*
 * Concurrent upserts of one new key (MongoDB 8.0 behaviour, SERVER-14322):
 * the writers that lose the race to insert the document run again as
 * updates of the one the winner inserted, so every upsert succeeds, when the
 * filter holds only equalities on exactly the unique index's key fields
 * (write_ops_exec.cpp, shouldRetryDuplicateKeyException). Session stores and
 * caches depend on it: connect-mongo's set() is updateOne({_id: sid}, ...,
 * {upsert: true}), @keyv/mongo's updateOne({key: {$eq: k}}, ...) on a unique
 * {key: 1}; a stampede on one key used to answer some of them E11000.
 * Upserts whose filter holds more than the key still get E11000, as in mongod,
 * when the duplicate was there before the statement (its document left out by
 * the filter); one inserted by a concurrent writer meanwhile reruns the whole
 * statement (mongod's WriteConflict retry: WiredTigerIndex::_checkDups), so a
 * rate limiter's {key, $or: [{expire: {$gt: now}}, ...]} upsert with $inc
 * counts every hit (rate-limiter-flexible's RateLimiterMongo).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

/* rounds x n concurrent calls of op(round, i); returns the rejections. */
async function stampede(rounds, n, op) {
  const failures = [];
  for (let r = 0; r < rounds; r++) {
    const res = await Promise.allSettled(Array.from({ length: n }, (_, i) => op(r, i)));
    for (const x of res) if (x.status === 'rejected') failures.push(x.reason);
  }
  return failures;
}

h.test('concurrent _id upserts of one new key all succeed (connect-mongo set)', async () => {
  const c = srv.freshDb('race_id').collection('sessions');
  await c.insertOne({ _id: 'seed' });
  const fails = await stampede(60, 20, (r, i) => c.updateOne({ _id: `sid${r}` },
    { $set: { _id: `sid${r}`, session: `{"n":${i}}`, expires: new Date(Date.now() + 60000) } }, { upsert: true }));
  assert.deepEqual(fails.map((e) => e.message), [], 'no upsert failed');
  assert.equal(await c.countDocuments({}), 61, 'one document per key');
});

h.test('concurrent $eq upserts on a unique key all succeed (keyv set), and $inc counts every one', async () => {
  const db = srv.freshDb('race_key');
  const kv = db.collection('keyv');
  await kv.createIndex({ key: 1 }, { unique: true });
  const fails = await stampede(60, 20, (r, i) => kv.updateOne({ key: { $eq: `k${r}` } },
    { $set: { key: `k${r}`, value: `v${i}` }, $inc: { writes: 1 } }, { upsert: true }));
  assert.deepEqual(fails.map((e) => e.message), [], 'no upsert failed');
  const docs = await kv.find({}).toArray();
  assert.equal(docs.length, 60);
  for (const d of docs) assert.equal(d.writes, 20, `every upsert of ${d.key} ran once, as an insert or an update`);
});

h.test('concurrent findOneAndUpdate and replaceOne upserts of one new key all succeed', async () => {
  const c = srv.freshDb('race_fam').collection('c');
  await c.insertOne({ _id: 'seed' });
  const fails = await stampede(40, 20, (r) => c.findOneAndUpdate({ _id: `f${r}` }, { $inc: { n: 1 } }, { upsert: true }));
  assert.deepEqual(fails.map((e) => e.message), []);
  for (const d of await c.find({ _id: /^f/ }).toArray()) assert.equal(d.n, 20, JSON.stringify(d));
  const rfails = await stampede(40, 20, (r, i) => c.replaceOne({ _id: `r${r}` }, { v: i }, { upsert: true }));
  assert.deepEqual(rfails.map((e) => e.message), []);
  assert.equal(await c.countDocuments({ _id: /^r/ }), 40);
});

h.test('an upsert whose filter holds more than the unique key still answers E11000', async () => {
  const kv = srv.freshDb('race_no').collection('keyv');
  await kv.createIndex({ key: 1 }, { unique: true });
  await kv.insertOne({ key: 'x', other: 2 });
  // {key, other} is not the index's key: the insert's duplicate is not the document the filter looks for.
  const e = await kv.updateOne({ key: 'x', other: 1 }, { $set: { v: 1 } }, { upsert: true }).then(() => null, (x) => x);
  assert.equal(e && e.code, 11000, String(e));
  const f = await kv.findOneAndUpdate({ key: 'x', other: { $gt: 5 } }, { $set: { v: 1 } }, { upsert: true }).then(() => null, (x) => x);
  assert.equal(f && f.code, 11000, String(f));
  assert.deepEqual(await kv.find({}, { projection: { _id: 0 } }).toArray(), [{ key: 'x', other: 2 }]);
});

h.test('concurrent upserts with more than the key in the filter (rate-limiter-flexible) all succeed and count every hit; an expired entry still answers E11000', async () => {
  const db = srv.freshDb('race_rlf');
  const rl = db.collection('rlflx');
  await rl.createIndex({ expire: -1 }, { expireAfterSeconds: 0 });
  await rl.createIndex({ key: 1 }, { unique: true });
  const clients = [srv.client];
  for (let i = 0; i < 3; i++) clients.push(await srv.newClient({ maxPoolSize: 10 }));
  const coll = (i) => clients[i % clients.length].db(db.databaseName).collection('rlflx');
  // RateLimiterMongo._upsert: findOneAndUpdate {$or: [unexpired, no expiry], key} with $setOnInsert and $inc.
  const fails = await stampede(20, 20, (r, i) => coll(i).findOneAndUpdate(
    { $or: [{ expire: { $gt: new Date() } }, { expire: { $eq: null } }], key: `ip${r}` },
    { $setOnInsert: { key: `ip${r}`, expire: new Date(Date.now() + 60000) }, $inc: { points: 1 } },
    { upsert: true, returnDocument: 'after' }));
  assert.deepEqual(fails.map((e) => e.message), [], 'no consume() rejected');
  const docs = await rl.find({}).toArray();
  assert.equal(docs.length, 20);
  for (const d of docs) assert.equal(d.points, 20, `every hit on ${d.key} counted`);
  // updateOne with a range beside the key: the same.
  const hits = db.collection('hits');
  await hits.createIndex({ key: 1 }, { unique: true });
  const ufails = await stampede(20, 20, (r, i) => clients[i % clients.length].db(db.databaseName).collection('hits')
    .updateOne({ key: `k${r}`, expiresAt: { $gt: new Date() } },
      { $inc: { n: 1 }, $setOnInsert: { expiresAt: new Date(Date.now() + 60000) } }, { upsert: true }));
  assert.deepEqual(ufails.map((e) => e.message), []);
  for (const d of await hits.find({}).toArray()) assert.equal(d.n, 20, JSON.stringify(d));
  // An entry that expired (the TTL monitor has not removed it yet: its date is a minute ahead of the
  // filter's now, but the filter asks for later): the filter leaves it out and its key is taken: E11000.
  await rl.insertOne({ key: 'old', points: 5, expire: new Date(Date.now() + 60000) });
  const e = await rl.findOneAndUpdate({ key: 'old', expire: { $gt: new Date(Date.now() + 3600000) } },
    { $inc: { points: 1 } }, { upsert: true }).then(() => null, (x) => x);
  assert.equal(e && e.code, 11000, String(e));
  assert.equal((await rl.findOne({ key: 'old' })).points, 5);
});

h.test('on a collated unique index: concurrent upserts with the index\'s collation all succeed (strings compared by their collation keys); without it they are not retried, as mongod', async () => {
  const db = srv.freshDb('race_coll');
  const kv = db.collection('keyv');
  const ci = { locale: 'en', strength: 2 };
  await kv.createIndex({ key: 1 }, { unique: true, collation: ci });
  const fails = await stampede(40, 20, (r, i) => kv.updateOne({ key: { $eq: i % 2 ? `K${r}` : `k${r}` } },
    { $inc: { writes: 1 } }, { upsert: true, collation: ci }));
  assert.deepEqual(fails.map((e) => e.message), [], 'no upsert failed');
  const docs = await kv.find({}).toArray();
  assert.equal(docs.length, 40, 'one document per key, whatever its case');
  for (const d of docs) assert.equal(d.writes, 20, JSON.stringify(d));
  // Without the collation the filter matches no document of another case, and the insert's duplicate is no retry.
  await kv.insertOne({ key: 'Solo' });
  const e = await kv.updateOne({ key: 'solo' }, { $set: { v: 1 } }, { upsert: true }).then(() => null, (x) => x);
  assert.equal(e && e.code, 11000, String(e));
});
