'use strict';
/*
 * What expires, and when (SPEC C1-C6, C8): expiry at date + N, arrays
 * (earliest date decides), non-date values and missing fields never expire,
 * N = 0 (expire at a clock time), partial and hidden TTL indexes, dates
 * before 1970, and documents updated to a later date before they expire.
 *
 * The server runs with ttlMonitorSleepSecs=1 (and precise expiry, the default).
 * "Never expires" is checked after two complete TTL passes have run since the
 * document became (or would have become) due.
 */
const assert = require('node:assert/strict');
const { Timestamp, Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

async function ttlStatus(db) {
  return (await db.admin().command({ serverStatus: 1 })).metrics.ttl;
}

/* Waits until the monitor has completed `n` more passes (ttlMonitorSleepSecs=1 guarantees one a second). */
async function passesGo(db, n = 2) {
  const s0 = await ttlStatus(db);
  await h.waitFor(async () => (await ttlStatus(db)).passes >= s0.passes + n, `${n} more TTL passes`, 3000 + n * 2000);
}

async function ids(coll, filter = {}) {
  return (await coll.find(filter, { projection: { _id: 1 } }).sort({ _id: 1 }).toArray()).map((d) => d._id);
}

async function ttlColl(tag, secs, opts = {}) {
  const db = srv.freshDb(tag);
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: secs, ...opts });
  return { db, coll };
}

h.test('C1: a document expires when now >= date + N, and not before', async () => {
  const { coll } = await ttlColl('c1', 2);
  const at = new Date();
  const expiry = at.getTime() + 2000;
  await coll.insertOne({ _id: 'doc', at });
  // Still there shortly before its expiry.
  await h.sleep(Math.max(0, expiry - 500 - Date.now()));
  assert.equal(await coll.countDocuments({ _id: 'doc' }), 1, 'deleted more than 500 ms before date + N');
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'doc' })) === 0, 'document deleted after date + N', 6000, 25);
  const late = Date.now() - expiry;
  console.log(`C1: observed gone ${late} ms after date + N`);
  assert.ok(late >= 0, `observed gone ${-late} ms before date + N`);
});

h.test('C1: documents with dates far in the past expire; documents whose date + N is ahead stay', async () => {
  const { db, coll } = await ttlColl('c1b', 60);
  const now = Date.now();
  await coll.insertMany([
    { _id: 1, at: new Date(now - 61000) }, { _id: 2, at: new Date(now - 86400000) }, { _id: 3, at: new Date(0) },
    { _id: 4, at: new Date(now - 30000) }, { _id: 5, at: new Date(now) }, { _id: 6, at: new Date(now + 86400000) },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: [1, 2, 3] } })) === 0, 'expired documents deleted');
  await passesGo(db, 2);
  assert.deepEqual(await ids(coll), [4, 5, 6]);
});

h.test('C2: an array of dates expires at its earliest date', async () => {
  const { db, coll } = await ttlColl('c2', 0);
  const now = Date.now();
  await coll.insertMany([
    { _id: 'past-first', at: [new Date(now + 3600000), new Date(now - 60000), 'not a date'] },
    { _id: 'all-future', at: [new Date(now + 3600000), new Date(now + 7200000)] },
    { _id: 'soon', at: [new Date(now + 7200000), new Date(now + 1500), new Date(now + 3600000)] },
    { _id: 'nested-nondate', at: ['x', 5, new Date(now - 1000)] },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: ['past-first', 'nested-nondate'] } })) === 0,
    'arrays holding a past date deleted');
  assert.equal(await coll.countDocuments({ _id: 'soon' }), 1, 'array deleted before its earliest date');
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'soon' })) === 0, 'array whose earliest date came deleted', 6000);
  await passesGo(db, 2);
  assert.deepEqual(await ids(coll), ['all-future']);
});

h.test('C3: non-date values (string, number, null, bool, object, Timestamp, empty array) and a missing field never expire', async () => {
  const { db, coll } = await ttlColl('c3', 0);
  const now = Date.now();
  await coll.insertMany([
    { _id: 'string', at: new Date(now - 60000).toISOString() },
    { _id: 'number', at: now - 60000 },
    { _id: 'long', at: Long.fromNumber(now - 60000) },
    { _id: 'null', at: null },
    { _id: 'bool', at: true },
    { _id: 'object', at: { d: new Date(now - 60000) } },
    { _id: 'timestamp', at: new Timestamp({ t: Math.floor(now / 1000) - 60, i: 1 }) },
    { _id: 'emptyarray', at: [] },
    { _id: 'missing', other: new Date(now - 60000) },
    { _id: 'sentinel', at: new Date(now - 60000) },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'sentinel' })) === 0, 'the dated sentinel deleted');
  await passesGo(db, 2);
  assert.deepEqual(await ids(coll),
    ['bool', 'emptyarray', 'long', 'missing', 'null', 'number', 'object', 'string', 'timestamp'].sort());
});

h.test('C4: N = 0 expires each document at the clock time stored in its field (expireAt pattern)', async () => {
  const { db, coll } = await ttlColl('c4', 0);
  const now = Date.now();
  await coll.insertMany([
    { _id: 'past', at: new Date(now - 1000) },
    { _id: 'in2s', at: new Date(now + 2000) },
    { _id: 'in1h', at: new Date(now + 3600000) },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'past' })) === 0, 'document whose expireAt passed deleted');
  await h.sleep(Math.max(0, now + 1500 - Date.now()));
  assert.equal(await coll.countDocuments({ _id: 'in2s' }), 1, 'deleted before its expireAt clock time');
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'in2s' })) === 0, 'document deleted at its expireAt', 6000, 25);
  assert.ok(Date.now() >= now + 2000, 'observed gone before its expireAt');
  await passesGo(db, 1);
  assert.deepEqual(await ids(coll), ['in1h']);
});

h.test('C5: a partial TTL index deletes only the documents matching its partialFilterExpression', async () => {
  const { db, coll } = await ttlColl('c5', 0, { partialFilterExpression: { kind: 'temp' } });
  const ix = (await coll.listIndexes().toArray()).find((i) => i.name === 'at_1');
  assert.deepEqual(ix.partialFilterExpression, { kind: 'temp' });
  assert.equal(ix.expireAfterSeconds, 0);
  const past = new Date(Date.now() - 60000);
  await coll.insertMany([
    { _id: 't1', kind: 'temp', at: past }, { _id: 't2', kind: 'temp', at: past },
    { _id: 'p1', kind: 'perm', at: past }, { _id: 'p2', at: past },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ kind: 'temp' })) === 0, 'matching documents deleted');
  await passesGo(db, 2);
  assert.deepEqual(await ids(coll), ['p1', 'p2']);
  // A document that stops matching before it is due is not deleted; one that starts matching is.
  const soon = new Date(Date.now() + 1200);
  await coll.insertMany([{ _id: 'leaves', kind: 'temp', at: soon }, { _id: 'joins', kind: 'perm', at: soon }]);
  await coll.updateOne({ _id: 'leaves' }, { $set: { kind: 'perm' } });
  await coll.updateOne({ _id: 'joins' }, { $set: { kind: 'temp' } });
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'joins' })) === 0, 'document that joined the filter deleted', 6000);
  await passesGo(db, 2);
  assert.deepEqual(await ids(coll), ['leaves', 'p1', 'p2']);
});

h.test('C6: a hidden TTL index (collMod hidden: true) still expires documents', async () => {
  const { db, coll } = await ttlColl('c6', 0);
  const r = await db.command({ collMod: 'c', index: { name: 'at_1', hidden: true } });
  assert.equal(r.ok, 1);
  const ix = (await coll.listIndexes().toArray()).find((i) => i.name === 'at_1');
  assert.equal(ix.hidden, true);
  assert.equal(ix.expireAfterSeconds, 0);
  const now = Date.now();
  await coll.insertMany([
    { _id: 'past', at: new Date(now - 60000) }, { _id: 'soon', at: new Date(now + 1000) },
    { _id: 'later', at: new Date(now + 3600000) },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: ['past', 'soon'] } })) === 0,
    'documents under a hidden TTL index deleted', 6000);
  assert.deepEqual(await ids(coll), ['later']);
});

h.test('C6: a TTL index created hidden expires documents', async () => {
  const { coll } = await ttlColl('c6b', 0, { hidden: true });
  await coll.insertOne({ _id: 1, at: new Date(Date.now() - 1000) });
  await h.waitFor(async () => (await coll.countDocuments()) === 0, 'document under an index created hidden deleted');
});

h.test('C8: dates before 1970 expire like any other date', async () => {
  const { db, coll } = await ttlColl('c8', 3600);
  await coll.insertMany([
    { _id: 'y1900', at: new Date('1900-01-01T00:00:00Z') },
    { _id: 'y1969', at: new Date('1969-12-31T23:59:59.999Z') },
    { _id: 'minus1ms', at: new Date(-1) },
    { _id: 'y0001', at: new Date('0001-01-01T00:00:00Z') },
    { _id: 'now', at: new Date() },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $ne: 'now' } })) === 0, 'pre-1970 documents deleted');
  await passesGo(db, 1);
  assert.deepEqual(await ids(coll), ['now']);
});

h.test('C1: a document updated to a later date before its expiry is not deleted early', async () => {
  const { db, coll } = await ttlColl('c1upd', 2);
  const now = Date.now();
  await coll.insertMany([{ _id: 'moved', at: new Date(now) }, { _id: 'control', at: new Date(now) }]);
  await h.sleep(800);
  await coll.updateOne({ _id: 'moved' }, { $set: { at: new Date(now + 3600000) } });
  await h.waitFor(async () => (await coll.countDocuments({ _id: 'control' })) === 0, 'control document deleted at date + N', 6000);
  await passesGo(db, 2);
  assert.deepEqual(await ids(coll), ['moved']);
});

h.test('C1: a document updated to an earlier date expires at the new date + N', async () => {
  const { coll } = await ttlColl('c1earlier', 2);
  const now = Date.now();
  await coll.insertOne({ _id: 'x', at: new Date(now + 3600000) });
  await coll.replaceOne({ _id: 'x' }, { at: new Date(now - 5000) });
  await h.waitFor(async () => (await coll.countDocuments()) === 0, 'document deleted after its date was moved back', 5000);
});

h.test('C1: several TTL indexes on one collection: whichever expires first deletes the document', async () => {
  const db = srv.freshDb('c1multi');
  const coll = db.collection('c');
  await coll.createIndex({ a: 1 }, { expireAfterSeconds: 3600 });
  await coll.createIndex({ b: 1 }, { expireAfterSeconds: 0 });
  const now = Date.now();
  await coll.insertMany([
    { _id: 'byA', a: new Date(now - 7200000), b: new Date(now + 3600000) },
    { _id: 'byB', a: new Date(now), b: new Date(now - 1000) },
    { _id: 'neither', a: new Date(now), b: new Date(now + 3600000) },
  ]);
  await h.waitFor(async () => (await coll.countDocuments({ _id: { $in: ['byA', 'byB'] } })) === 0, 'both documents deleted');
  await passesGo(db, 1);
  assert.deepEqual(await ids(coll), ['neither']);
});
