'use strict';
/*
 * TTL indexes and collMod (SPEC B1-B4): changing N by key pattern and by
 * name, converting a non-TTL index into a TTL index, every error with
 * MongoDB 8.0's code (and nothing changed afterwards), and a lowered N making
 * many documents due at once.
 *
 * The server runs with ttlMonitorSleepSecs=1 (and precise expiry, the default).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

async function indexes(coll) {
  return coll.listIndexes().toArray();
}

function byName(list, name) {
  return list.find((ix) => ix.name === name);
}

async function ttlStatus(db) {
  return (await db.admin().command({ serverStatus: 1 })).metrics.ttl;
}

/* A collection c with a TTL index at_1 (N=secs), a compound index and a plain index. */
async function setup(tag, secs = 3600) {
  const db = srv.freshDb(tag);
  const coll = db.collection('c');
  await db.createCollection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: secs });
  await coll.createIndex({ a: 1, b: 1 });
  await coll.createIndex({ plain: 1 });
  return { db, coll };
}

/* Runs a collMod that must fail with code (and message); listIndexes must be unchanged. */
async function refused(db, cmd, code, msgRe) {
  const coll = db.collection(cmd.collMod);
  const before = JSON.stringify(await indexes(coll));
  const err = await h.expectCode(db.command(cmd), code, msgRe);
  assert.equal(JSON.stringify(await indexes(coll)), before, 'listIndexes changed after a failed collMod');
  return err;
}

h.test('B1: collMod by keyPattern changes expireAfterSeconds; the reply carries expireAfterSeconds_old and _new', async () => {
  const { db, coll } = await setup('b1kp', 3600);
  const r = await db.command({ collMod: 'c', index: { keyPattern: { at: 1 }, expireAfterSeconds: 1800 } });
  assert.equal(r.ok, 1);
  assert.equal(Number(r.expireAfterSeconds_old), 3600);
  assert.equal(Number(r.expireAfterSeconds_new), 1800);
  assert.equal(byName(await indexes(coll), 'at_1').expireAfterSeconds, 1800);
});

h.test('B1: collMod by index name changes expireAfterSeconds; listIndexes shows the new N', async () => {
  const { db, coll } = await setup('b1name', 3600);
  const r = await db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: 42 } });
  assert.equal(Number(r.expireAfterSeconds_old), 3600);
  assert.equal(Number(r.expireAfterSeconds_new), 42);
  const ix = byName(await indexes(coll), 'at_1');
  assert.equal(ix.expireAfterSeconds, 42);
  assert.deepEqual(ix.key, { at: 1 });
});

h.test('B1: a non-integer N given to collMod is truncated (7.9 -> 7)', async () => {
  const { db, coll } = await setup('b1trunc', 3600);
  const r = await db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: 7.9 } });
  assert.equal(Number(r.expireAfterSeconds_new), 7);
  assert.equal(byName(await indexes(coll), 'at_1').expireAfterSeconds, 7);
});

h.test('B1: raising N by collMod keeps documents that would have expired under the old N', async () => {
  const { db, coll } = await setup('b1raise', 3600);
  const now = Date.now();
  await db.command({ collMod: 'c', index: { keyPattern: { at: 1 }, expireAfterSeconds: 7200 } });
  await coll.insertMany([{ _id: 'kept', at: new Date(now - 5400 * 1000) }, { _id: 'gone', at: new Date(now - 8000 * 1000) }]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'gone' })) === 0, 'document older than the new N deleted');
  const s0 = await ttlStatus(db);
  await h.waitFor(async () => (await ttlStatus(db)).passes >= s0.passes + 2, 'two more TTL passes', 6000);
  assert.equal(await coll.countDocuments({ _id: 'kept' }), 1, 'document younger than the new N was deleted');
});

h.test('B2: collMod converts a non-TTL single-field index into a TTL index, then documents expire', async () => {
  const { db, coll } = await setup('b2', 3600);
  await coll.createIndex({ seen: 1 });
  const now = Date.now();
  await coll.insertMany([
    { _id: 1, seen: new Date(now - 600000) }, { _id: 2, seen: new Date(now - 120000) },
    { _id: 3, seen: new Date(now) }, { _id: 4, seen: new Date(now + 3600000) },
  ]);
  const s0 = await ttlStatus(db);
  await h.waitFor(async () => (await ttlStatus(db)).passes >= s0.passes + 2, 'two TTL passes', 6000);
  assert.equal(await coll.countDocuments(), 4, 'a non-TTL index must not expire anything');
  const r = await db.command({ collMod: 'c', index: { keyPattern: { seen: 1 }, expireAfterSeconds: 60 } });
  assert.equal(r.ok, 1);
  assert.equal(Number(r.expireAfterSeconds_new), 60);
  const ix = byName(await indexes(coll), 'seen_1');
  assert.equal(ix.expireAfterSeconds, 60);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: [1, 2] } })) === 0,
    'documents older than 60 s deleted after the conversion');
  assert.deepEqual((await coll.find().sort({ _id: 1 }).toArray()).map((d) => d._id), [3, 4]);
});

h.test('B3: collMod with a string expireAfterSeconds fails with 14 TypeMismatch and changes nothing', async () => {
  const { db } = await setup('b3str');
  const err = await refused(db, { collMod: 'c', index: { keyPattern: { at: 1 }, expireAfterSeconds: '10' } }, 14);
  assert.equal(err.codeName, 'TypeMismatch');
});

h.test('B3: collMod with a negative expireAfterSeconds fails with 72 InvalidOptions and changes nothing', async () => {
  const { db } = await setup('b3neg');
  const err = await refused(db, { collMod: 'c', index: { keyPattern: { at: 1 }, expireAfterSeconds: -1 } }, 72);
  assert.equal(err.codeName, 'InvalidOptions');
});

h.test('B3: collMod reads expireAfterSeconds as mongod\'s IDL safeInt: 2^31, Infinity and 2^63-1 saturate to 2^31-1, NaN is 0, -Infinity is refused', async () => {
  // collMod's CollModIndex.expireAfterSeconds is a safeInt (safeNumberInt): only a negative result is refused.
  const { db, coll } = await setup('b3nan');
  const { Long, Double } = require('mongodb');
  for (const big of [2147483648, Infinity, Long.fromString('9223372036854775807')]) {
    await db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: 60 } });
    const r = await db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: big } });
    assert.equal(Number(r.expireAfterSeconds_new), 2147483647, String(big));
    const ix = (await coll.listIndexes({ raw: false }).toArray()).find((i) => i.name === 'at_1');
    assert.equal(ix.expireAfterSeconds, 2147483647);
  }
  const r = await db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: new Double(NaN) } });
  assert.equal(Number(r.expireAfterSeconds_new), 0);
  assert.equal(byName(await indexes(coll), 'at_1').expireAfterSeconds, 0);
  await refused(db, { collMod: 'c', index: { name: 'at_1', expireAfterSeconds: -Infinity } }, 72,
    /TTL index 'expireAfterSeconds' option cannot be less than 0/);
});

h.test('B3: collMod on a missing index fails with 27 IndexNotFound (by keyPattern and by name)', async () => {
  const { db } = await setup('b3missing');
  const e1 = await refused(db, { collMod: 'c', index: { keyPattern: { nope: 1 }, expireAfterSeconds: 10 } }, 27);
  assert.equal(e1.codeName, 'IndexNotFound');
  await refused(db, { collMod: 'c', index: { name: 'nope_1', expireAfterSeconds: 10 } }, 27);
});

h.test('B3: collMod setting expireAfterSeconds on a compound index fails with 72', async () => {
  const { db } = await setup('b3compound');
  await refused(db, { collMod: 'c', index: { keyPattern: { a: 1, b: 1 }, expireAfterSeconds: 10 } }, 72);
  await refused(db, { collMod: 'c', index: { name: 'a_1_b_1', expireAfterSeconds: 10 } }, 72);
});

h.test('B3: collMod setting expireAfterSeconds on the _id index fails with 72 "the _id field does not support TTL indexes"', async () => {
  const { db } = await setup('b3id');
  await refused(db, { collMod: 'c', index: { keyPattern: { _id: 1 }, expireAfterSeconds: 10 } }, 72,
    /the _id field does not support TTL indexes/);
  await refused(db, { collMod: 'c', index: { name: '_id_', expireAfterSeconds: 10 } }, 72);
});

h.test('B3: collMod with both name and keyPattern fails with 72', async () => {
  const { db } = await setup('b3both');
  await refused(db, { collMod: 'c', index: { name: 'at_1', keyPattern: { at: 1 }, expireAfterSeconds: 10 } }, 72);
});

h.test('B3 (8.0 wins): collMod with an unknown field inside index fails with 40415, as 8.0\'s strict IDL, and changes nothing', async () => {
  const { db } = await setup('b3unknown');
  await refused(db, { collMod: 'c', index: { name: 'at_1', expireAfterSeconds: 10, bogus: 1 } }, 40415,
    /^BSON field 'collMod.index.bogus' is an unknown field.$/);
});

h.test('B3: collMod.index with nothing to change fails with 72, in mongod\'s words', async () => {
  const { db } = await setup('b3nothing');
  await refused(db, { collMod: 'c', index: { name: 'at_1' } }, 72, /^no expireAfterSeconds, hidden, unique, or prepareUnique field$/);
});

h.test('collMod dryRun never changes an index: only a conversion to unique may ask for it (72 otherwise)', async () => {
  const { db } = await setup('dryrun');
  await refused(db, { collMod: 'c', index: { keyPattern: { plain: 1 }, expireAfterSeconds: 5 }, dryRun: true }, 72,
    /^dry run mode requires an index modification with unique: true.$/);
  await refused(db, { collMod: 'c', validationLevel: 'off', dryRun: true }, 72, /^dry run mode requires an valid index modification.$/);
  await refused(db, { collMod: 'c', index: { name: 'at_1', expireAfterSeconds: 5 }, dryRun: true }, 72);
  /* A conversion to unique needs prepareUnique first, dry run or not (collmod_unique.test.js covers the conversion). */
  await refused(db, { collMod: 'c', index: { name: 'plain_1', unique: true }, dryRun: true }, 72, /^Cannot make index unique with 'prepareUnique=false'/);
  await refused(db, { collMod: 'c', index: { name: 'plain_1', unique: true } }, 72, /^Cannot make index unique with 'prepareUnique=false'/);
  await refused(db, { collMod: 'c', index: { name: 'plain_1', expireAfterSeconds: 5 }, dryRun: 'yes' }, 14);
  /* dryRun: false is an ordinary collMod. */
  const r = await db.command({ collMod: 'c', index: { name: 'plain_1', expireAfterSeconds: 5 }, dryRun: false });
  assert.equal(Number(r.expireAfterSeconds_new), 5);
});

h.test('collMod hidden takes a number as its truth value (safeBool, as mongod); the _id index cannot be hidden (2 BadValue)', async () => {
  const { db, coll } = await setup('hidenum');
  const r = await db.command({ collMod: 'c', index: { name: 'plain_1', hidden: 1 } });
  assert.equal(r.hidden_new, true);
  assert.equal(byName(await indexes(coll), 'plain_1').hidden, true);
  await db.command({ collMod: 'c', index: { name: 'plain_1', hidden: 0 } });
  assert.equal(byName(await indexes(coll), 'plain_1').hidden, undefined);
  await refused(db, { collMod: 'c', index: { name: '_id_', hidden: true } }, 2, /^can't hide _id index$/);
  await refused(db, { collMod: 'c', index: { name: 'plain_1', hidden: 'yes' } }, 14);
});

h.test('collMod expireAfterSeconds of a collection that is not clustered is 72 in mongod\'s words; a bool is 14', async () => {
  const { db } = await setup('collexp');
  await refused(db, { collMod: 'c', expireAfterSeconds: 60 }, 72, /^'expireAfterSeconds' option is only supported on collections clustered by _id$/);
  await refused(db, { collMod: 'c', expireAfterSeconds: true }, 14, /wrong type 'bool'/);
  await refused(db, { collMod: 'c', timeseries: { granularity: 'hours' } }, 72, /^option only supported on a time-series collection: timeseries$/);
});

h.test('B3: collMod on a missing collection fails with 26 NamespaceNotFound and creates nothing', async () => {
  const db = srv.freshDb('b3nocoll');
  await db.createCollection('other');
  const err = await h.expectCode(db.command({ collMod: 'ghost', index: { keyPattern: { at: 1 }, expireAfterSeconds: 10 } }), 26);
  assert.equal(err.codeName, 'NamespaceNotFound');
  assert.equal((await db.listCollections({ name: 'ghost' }).toArray()).length, 0);
});

h.test('B3: collMod of a TTL index (or validator) on a view fails with 72 "option not supported on a view"', async () => {
  const db = srv.freshDb('b3view');
  await db.collection('c').createIndex({ d: 1 }, { expireAfterSeconds: 60 });
  await db.createCollection('v1', { viewOn: 'c', pipeline: [] });
  const e1 = await h.expectCode(db.command({ collMod: 'v1', index: { name: 'd_1', expireAfterSeconds: 1 } }), 72);
  assert.equal(e1.codeName, 'InvalidOptions');
  assert.match(e1.message, /option not supported on a view: index/);
  await h.expectCode(db.command({ collMod: 'v1', validator: { a: 1 } }), 72, /on a view: validator/);
  const ix = (await db.collection('c').indexes()).find((i) => i.name === 'd_1');
  assert.equal(ix.expireAfterSeconds, 60, 'the collection\'s index is untouched');
});

h.test('B3: after a failed collMod the TTL index still expires with its old N', async () => {
  const { db, coll } = await setup('b3after', 1);
  await h.expectCode(db.command({ collMod: 'c', index: { name: 'at_1', expireAfterSeconds: -5 } }), 72);
  assert.equal(byName(await indexes(coll), 'at_1').expireAfterSeconds, 1);
  await coll.insertOne({ _id: 1, at: new Date(Date.now() - 5000) });
  await h.waitFor(async () => (await coll.countDocuments()) === 0, 'document expired under the unchanged N=1');
});

h.test('B4: lowering N with collMod makes many documents due at once and they are all deleted; younger ones stay', async () => {
  const { db, coll } = await setup('b4', 86400);
  const now = Date.now();
  const docs = [];
  for (let i = 0; i < 3000; i++) docs.push({ _id: i, at: new Date(now - 3600000 - i * 100) });
  for (let i = 3000; i < 3100; i++) docs.push({ _id: i, at: new Date(now) });
  await coll.insertMany(docs);
  const s0 = await ttlStatus(db);
  await h.waitFor(async () => (await ttlStatus(db)).passes >= s0.passes + 1, 'one TTL pass', 6000);
  assert.equal(await coll.countDocuments(), 3100, 'nothing is due under N=86400');
  const t0 = Date.now();
  const r = await db.command({ collMod: 'c', index: { keyPattern: { at: 1 }, expireAfterSeconds: 600 } });
  assert.equal(Number(r.expireAfterSeconds_old), 86400);
  assert.equal(Number(r.expireAfterSeconds_new), 600);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $lt: 3000 } })) === 0,
    '3000 documents made due by the lowered N deleted', 20000, 100);
  console.log(`B4: 3000 documents made due by collMod deleted within ${Date.now() - t0} ms`);
  assert.equal(await coll.countDocuments(), 100);
  const s1 = await ttlStatus(db);
  assert.ok(s1.deletedDocuments - s0.deletedDocuments >= 3000,
    `deletedDocuments grew by ${s1.deletedDocuments - s0.deletedDocuments}, expected >= 3000`);
});
