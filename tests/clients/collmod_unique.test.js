'use strict';
/*
 * collMod converting indexes between unique and not (MongoDB 6.0+, as 8.0
 * answers): prepareUnique first (new duplicates refused with 11000, old ones
 * kept), then unique: true (refused with 359 CannotConvertIndexToUnique and
 * the violating _ids while duplicates remain; dryRun checks without
 * changing), and forceNonUnique: true back, both for an index collMod made
 * unique and for one created unique. Each state survives a clean restart
 * and kill -9. Cases follow mongod's own jstests (collmod_convert_to_unique,
 * collmod_convert_to_unique_violations).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function ixByKey(coll, key) {
  const list = await coll.listIndexes().toArray();
  return list.find((ix) => JSON.stringify(ix.key) === JSON.stringify(key));
}

function sortViolations(v) {
  return v.map((g) => ({ ids: [...g.ids].map(String).sort() }))
    .sort((a, b) => (a.ids[0] < b.ids[0] ? -1 : a.ids[0] > b.ids[0] ? 1 : 0));
}

async function violations(db, keyPattern) {
  const err = await h.expectCode(db.command({ collMod: 'c', index: { keyPattern, unique: true } }), 359,
    /^Cannot convert the index to unique\. Please resolve conflicting documents before running collMod again\.$/);
  assert.equal(err.codeName, 'CannotConvertIndexToUnique');
  return sortViolations(err.errorResponse.violations);
}

h.test('conversion to unique takes prepareUnique first; wrong values are refused with mongod codes', async () => {
  const db = srv.freshDb('convert');
  const coll = db.collection('c');
  await db.createCollection('c');
  await coll.createIndex({ a: 1 });
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true } }), 72,
    /Cannot make index unique with 'prepareUnique=false'\. Run collMod to set it first\./);
  const r = await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: true } });
  assert.equal(r.prepareUnique_old, false);
  assert.equal(r.prepareUnique_new, true);
  assert.equal((await ixByKey(coll, { a: 1 })).prepareUnique, true);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: '100' } }), 14);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: false } }), 2,
    /Cannot make index non-unique/);
  await h.expectCode(db.command({ collMod: 'c_missing', index: { keyPattern: { a: 1 }, unique: true } }), 26);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true, forceNonUnique: true } }), 72);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: false, hidden: true } }), 72,
    /prepareUnique cannot be combined with any other modification\./);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, forceNonUnique: false } }), 2,
    /'forceNonUnique: false' is not supported/);
  // Unchanged by the refusals.
  const ix = await ixByKey(coll, { a: 1 });
  assert.equal(ix.prepareUnique, true);
  assert.equal(ix.unique, undefined);
  assert.equal(ix.hidden, undefined);
});

h.test('prepareUnique refuses new duplicates (insert, update, upsert) and keeps old ones; unique conversion reports them', async () => {
  const db = srv.freshDb('prepare');
  const coll = db.collection('c');
  await coll.createIndex({ a: 1 });
  await coll.insertMany([{ _id: 1, a: 100 }, { _id: 2, a: 100 }, { _id: 3, a: 7 }]);
  await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: true } });
  // The duplicates already there stay and can still be updated on other fields.
  await coll.updateOne({ _id: 1 }, { $set: { note: 'kept' } });
  assert.equal(await coll.countDocuments({ a: 100 }), 2);
  // New ones are refused, whatever the write.
  const e1 = await h.expectCode(coll.insertOne({ _id: 4, a: 7 }), 11000, /E11000 duplicate key error collection: .*\.c index: a_1 dup key: \{ a: 7 \}/);
  assert.deepEqual(e1.errorResponse?.keyValue ?? e1.keyValue, { a: 7 });
  await h.expectCode(coll.updateOne({ _id: 3 }, { $set: { a: 100 } }), 11000);
  await h.expectCode(coll.updateOne({ _id: 9 }, { $set: { a: 7 } }, { upsert: true }), 11000);
  await h.expectCode(coll.replaceOne({ _id: 3 }, { a: 100 }), 11000);
  // A value no other document has is fine, and a document may keep its own value.
  await coll.insertOne({ _id: 5, a: 8 });
  await coll.updateOne({ _id: 5 }, { $set: { a: 8, b: 1 } });
  assert.equal(await coll.countDocuments({}), 4);

  assert.deepEqual(await violations(db, { a: 1 }), [{ ids: ['1', '2'] }]);
  // Still not unique after the refusal.
  assert.equal((await ixByKey(coll, { a: 1 })).unique, undefined);
  assert.equal((await ixByKey(coll, { a: 1 })).prepareUnique, true);

  // Resolve, convert: the reply says unique_new, listIndexes shows unique and no prepareUnique.
  await coll.deleteOne({ _id: 2 });
  const r = await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true } });
  assert.equal(r.unique_new, true);
  const ix = await ixByKey(coll, { a: 1 });
  assert.equal(ix.unique, true);
  assert.equal(ix.prepareUnique, undefined);
  await h.expectCode(coll.insertOne({ _id: 100, a: 100 }), 11000);
  // Converting a unique index again changes nothing.
  const again = await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true } });
  assert.equal(again.unique_new, undefined);
  // Queries still use the index and find every document.
  const found = await coll.find({ a: { $gte: 0 } }).hint({ a: 1 }).toArray();
  assert.deepEqual(found.map((d) => d._id).sort(), [1, 3, 5]);
  const v = await db.command({ validate: 'c', full: true });
  assert.equal(v.valid, true, JSON.stringify(v));
});

h.test('violations list every group, on compound indexes too (mongod collmod_convert_to_unique_violations)', async () => {
  const db = srv.freshDb('viol');
  const coll = db.collection('c');
  await db.createCollection('c');
  await coll.createIndex({ a: 1 });
  await coll.createIndex({ a: 1, b: 1 });
  const cycle = async (key) => {
    await db.command({ collMod: 'c', index: { keyPattern: key, prepareUnique: true } });
    const v = await violations(db, key);
    await db.command({ collMod: 'c', index: { keyPattern: key, prepareUnique: false } });
    return v;
  };
  await coll.insertMany([{ _id: 1, a: 100, b: 1 }, { _id: 2, a: 100, b: 2 }]);
  assert.deepEqual(await cycle({ a: 1 }), [{ ids: ['1', '2'] }]);
  await coll.insertOne({ _id: 3, a: 100, b: 3 });
  await coll.insertOne({ _id: 4, a: 101, b: 4 });
  await coll.insertMany([{ _id: 5, a: 105, b: 5 }, { _id: 6, a: 105, b: 6 }]);
  assert.deepEqual(await cycle({ a: 1 }), [{ ids: ['1', '2', '3'] }, { ids: ['5', '6'] }]);
  await coll.insertOne({ _id: 7, a: 105, b: 6 });
  await coll.insertOne({ _id: 8, a: 105, b: 6 });
  await coll.insertOne({ _id: 9, a: 101, b: 4 });
  await coll.insertOne({ _id: '10', a: 101, b: 4 });
  assert.deepEqual(await cycle({ a: 1, b: 1 }), [{ ids: ['10', '4', '9'] }, { ids: ['6', '7', '8'] }]);
});

h.test('dryRun checks a conversion to unique and changes nothing', async () => {
  const db = srv.freshDb('dry');
  const coll = db.collection('c');
  await coll.createIndex({ a: 1 });
  await coll.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, hidden: true }, dryRun: true }), 72);
  await h.expectCode(db.command({ collMod: 'c', validationLevel: 'off', dryRun: true }), 72);
  await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: true } });
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, hidden: true, unique: true }, dryRun: true }), 72,
    /unique: true cannot be combined with any other modification in dry run mode\./);
  await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true }, validationLevel: 'off', dryRun: true }), 72);
  const ok = await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true }, dryRun: true });
  assert.equal(ok.ok, 1);
  assert.equal(ok.unique_new, undefined);
  assert.equal((await ixByKey(coll, { a: 1 })).unique, undefined, 'dry run must not convert');
  // With a duplicate the dry run reports it (prepareUnique was off while it went in).
  await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: false } });
  await coll.insertOne({ _id: 3, a: 2 });
  await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: true } });
  const err = await h.expectCode(db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true }, dryRun: true }), 359);
  assert.deepEqual(sortViolations(err.errorResponse.violations), [{ ids: ['2', '3'] }]);
  assert.equal((await ixByKey(coll, { a: 1 })).unique, undefined);
});

h.test('forceNonUnique: an index made unique by collMod, and one created unique, accept duplicates again', async () => {
  const db = srv.freshDb('force');
  const coll = db.collection('c');
  await coll.createIndex({ a: 1 });
  await coll.createIndex({ u: 1 }, { unique: true });
  await coll.insertMany([{ _id: 1, a: 1, u: 1 }, { _id: 2, a: 2, u: 2 }]);
  await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: true } });
  await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true } });
  // Not unique: nothing to do, no reply field.
  await coll.createIndex({ plain: 1 });
  const noop = await db.command({ collMod: 'c', index: { keyPattern: { plain: 1 }, forceNonUnique: true } });
  assert.equal(noop.forceNonUnique_new, undefined);
  for (const key of [{ a: 1 }, { u: 1 }]) {
    const r = await db.command({ collMod: 'c', index: { keyPattern: key, forceNonUnique: true } });
    assert.equal(r.forceNonUnique_new, true);
    assert.equal((await ixByKey(coll, key)).unique, undefined);
  }
  await coll.insertOne({ _id: 3, a: 1, u: 1 });
  assert.equal(await coll.countDocuments({ a: 1 }), 2);
  assert.deepEqual((await coll.find({ u: 1 }).hint({ u: 1 }).toArray()).map((d) => d._id).sort(), [1, 3]);
  assert.deepEqual((await coll.find({ u: { $gte: 0 } }).hint({ u: 1 }).toArray()).map((d) => d._id).sort(), [1, 2, 3]);
  await coll.deleteOne({ _id: 1 });
  assert.deepEqual((await coll.find({ u: 1 }).hint({ u: 1 }).toArray()).map((d) => d._id), [3]);
  const v = await db.command({ validate: 'c', full: true });
  assert.equal(v.valid, true, JSON.stringify(v));
  // The _id index stays unique.
  await h.expectCode(db.command({ collMod: 'c', index: { name: '_id_', forceNonUnique: true } }), 72);
  // And back to unique through the two steps.
  await coll.deleteOne({ _id: 3 });
  await db.command({ collMod: 'c', index: { keyPattern: { u: 1 }, prepareUnique: true } });
  await db.command({ collMod: 'c', index: { keyPattern: { u: 1 }, unique: true } });
  await h.expectCode(coll.insertOne({ _id: 4, u: 2 }), 11000);
});

h.test('concurrent inserts of one value into a prepareUnique index: exactly one wins', async () => {
  const db = srv.freshDb('race');
  const coll = db.collection('c');
  // The Node driver's createIndex drops options it does not know, prepareUnique among them.
  await db.command({ createIndexes: 'c', indexes: [{ key: { k: 1 }, name: 'k_1', prepareUnique: true }] });
  assert.equal((await ixByKey(coll, { k: 1 })).prepareUnique, true);
  const clients = await Promise.all([1, 2, 3, 4].map(() => srv.newClient()));
  for (let round = 0; round < 30; round++) {
    const results = await Promise.allSettled(clients.map((c, i) =>
      c.db(db.databaseName).collection('c').insertOne({ _id: `${round}-${i}`, k: round })));
    const won = results.filter((r) => r.status === 'fulfilled').length;
    assert.equal(won, 1, `round ${round}: ${won} inserts of one value succeeded`);
    for (const r of results) {
      if (r.status === 'rejected') assert.equal(r.reason.code, 11000);
    }
  }
  assert.equal(await coll.countDocuments({}), 30);
});

for (const kill9 of [false, true]) {
  h.test(`unique, prepareUnique and forceNonUnique survive ${kill9 ? 'kill -9' : 'a clean restart'}`, { timeout: 60000 }, async () => {
    const dbName = srv.freshDb(kill9 ? 'persist9' : 'persist').databaseName;
    let db = srv.client.db(dbName);
    let coll = db.collection('c');
    const wc = { writeConcern: { w: 1, j: true } };
    await coll.createIndex({ a: 1 });
    await coll.createIndex({ p: 1 });
    await coll.createIndex({ u: 1 }, { unique: true });
    await coll.insertMany([{ _id: 1, a: 1, p: 1, u: 1 }, { _id: 2, a: 2, p: 1, u: 2 }], wc);
    await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, prepareUnique: true }, ...wc });
    await db.command({ collMod: 'c', index: { keyPattern: { a: 1 }, unique: true }, ...wc });
    await db.command({ collMod: 'c', index: { keyPattern: { p: 1 }, prepareUnique: true }, ...wc });
    await db.command({ collMod: 'c', index: { keyPattern: { u: 1 }, forceNonUnique: true }, ...wc });
    await coll.insertOne({ _id: 3, a: 3, p: 2, u: 1 }, wc);
    await srv.server.restart({ kill9 });
    await srv.reconnect();
    db = srv.client.db(dbName);
    coll = db.collection('c');
    const a = await ixByKey(coll, { a: 1 });
    const p = await ixByKey(coll, { p: 1 });
    const u = await ixByKey(coll, { u: 1 });
    assert.equal(a.unique, true);
    assert.equal(a.prepareUnique, undefined);
    assert.equal(p.prepareUnique, true);
    assert.equal(u.unique, undefined);
    await h.expectCode(coll.insertOne({ _id: 4, a: 1 }), 11000);
    await h.expectCode(coll.insertOne({ _id: 5, p: 2 }), 11000);
    await coll.insertOne({ _id: 6, u: 2 });
    assert.deepEqual((await coll.find({ a: { $gte: 0 } }).hint({ a: 1 }).toArray()).map((d) => d._id).sort(), [1, 2, 3]);
    assert.deepEqual((await coll.find({ u: 1 }).hint({ u: 1 }).toArray()).map((d) => d._id).sort(), [1, 3]);
    const v = await db.command({ validate: 'c', full: true });
    assert.equal(v.valid, true, JSON.stringify(v));
  });
}
