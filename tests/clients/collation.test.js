'use strict';
/*
 * Collation (issue 12), on ICU: find, sort, distinct, count, updates,
 * deletes, aggregate, findAndModify, a collection's default collation,
 * indexes with a collation (keys that compare as the collation does, used
 * only by queries with the same collation), getMore keeping the collation,
 * and mongod's errors for bad collation documents.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const CI = { locale: 'en_US', strength: 2 }; // case-insensitive

async function seedWords(c) {
  await c.insertMany([
    { _id: 1, w: 'ping' }, { _id: 2, w: 'PING' }, { _id: 3, w: 'Ping' }, { _id: 4, w: 'pong' },
    { _id: 5, w: 'café' }, { _id: 6, w: 'cafe' },
  ]);
}

h.test('distinct with strength 2 treats PING and ping as one value (not two)', async () => {
  const c = srv.freshDb('coll').collection('d');
  await seedWords(c);
  const plain = await c.distinct('w', { w: /^p/i });
  assert.deepEqual(plain.sort(), ['PING', 'Ping', 'ping', 'pong']);
  const ci = await c.distinct('w', { w: { $in: ['ping', 'pong'] } }, { collation: CI });
  assert.equal(ci.length, 2, JSON.stringify(ci));
  assert.deepEqual(ci.map((s) => s.toLowerCase()).sort(), ['ping', 'pong']);
  // Strength 1 also ignores accents.
  const s1 = await c.distinct('w', { w: 'cafe' }, { collation: { locale: 'fr', strength: 1 } });
  assert.equal(s1.length, 1);
});

h.test('find and count match by the collation; the simple collation stays binary', async () => {
  const c = srv.freshDb('coll').collection('f');
  await seedWords(c);
  assert.deepEqual((await c.find({ w: 'ping' }).toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ w: 'ping' }).collation(CI).sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2, 3]);
  assert.equal(await c.countDocuments({ w: 'PING' }, { collation: CI }), 3);
  assert.equal(await c.countDocuments({ w: { $gt: 'PING' } }, { collation: CI }), 1, 'only pong sorts after ping');
  assert.deepEqual((await c.find({ w: 'cafe' }).collation({ locale: 'fr', strength: 1 }).toArray()).length, 2);
  assert.deepEqual((await c.find({ w: 'ping' }).collation({ locale: 'simple' }).toArray()).map((d) => d._id), [1]);
});

h.test('sort follows the locale: en puts a before B; numericOrdering sorts "10" after "9"', async () => {
  const c = srv.freshDb('coll').collection('s');
  await c.insertMany([{ _id: 1, s: 'b' }, { _id: 2, s: 'A' }, { _id: 3, s: 'a' }, { _id: 4, s: 'B' }]);
  assert.deepEqual((await c.find().sort({ s: 1 }).toArray()).map((d) => d.s), ['A', 'B', 'a', 'b']);
  assert.deepEqual((await c.find().sort({ s: 1 }).collation({ locale: 'en' }).toArray()).map((d) => d.s), ['a', 'A', 'b', 'B']);
  assert.deepEqual((await c.find().sort({ s: 1 }).collation({ locale: 'en', caseFirst: 'upper' }).toArray()).map((d) => d.s),
    ['A', 'a', 'B', 'b']);
  const n = srv.freshDb('coll').collection('n');
  await n.insertMany([{ v: '10' }, { v: '9' }, { v: '2' }, { v: '100' }]);
  assert.deepEqual((await n.find().sort({ v: 1 }).collation({ locale: 'en', numericOrdering: true }).toArray()).map((d) => d.v),
    ['2', '9', '10', '100']);
  assert.deepEqual((await n.find().sort({ v: 1 }).toArray()).map((d) => d.v), ['10', '100', '2', '9']);
});

h.test('updates, deletes and findAndModify take a collation, per statement', async () => {
  const c = srv.freshDb('coll').collection('u');
  await seedWords(c);
  const u = await c.updateMany({ w: 'PING' }, { $set: { hit: true } }, { collation: CI });
  assert.equal(u.matchedCount, 3);
  const f = await c.findOneAndUpdate({ w: 'PONG' }, { $set: { hit: true } }, { collation: CI, returnDocument: 'after' });
  assert.equal(f._id, 4);
  const d = await c.deleteMany({ w: 'CAFE' }, { collation: { locale: 'en', strength: 1 } });
  assert.equal(d.deletedCount, 2);
  assert.equal(await c.countDocuments({ hit: true }), 4);
  // A statement's collation only: the same command's other statement stays binary.
  const r = await c.bulkWrite([
    { deleteOne: { filter: { w: 'PING' }, collation: CI } },
    { deleteOne: { filter: { w: 'PONG' } } },
  ]);
  assert.equal(r.deletedCount, 1);
});

h.test('aggregate: $match, $group keys, $sort and expressions compare under the collation', async () => {
  const c = srv.freshDb('coll').collection('a');
  await seedWords(c);
  const g = await c.aggregate([
    { $match: { w: { $in: ['PING', 'PONG'] } } },
    { $group: { _id: '$w', n: { $sum: 1 } } },
    { $project: { _id: 0, k: { $toLower: '$_id' }, n: 1 } },
    { $sort: { k: 1 } },
  ], { collation: CI }).toArray();
  assert.deepEqual(g, [{ n: 3, k: 'ping' }, { n: 1, k: 'pong' }]);
  const e = await c.aggregate([{ $match: { _id: 1 } }, { $project: { _id: 0, eq: { $eq: ['$w', 'PING'] } } }], { collation: CI }).toArray();
  assert.deepEqual(e, [{ eq: true }]);
  const set = await c.aggregate([{ $group: { _id: null, s: { $addToSet: '$w' } } }], { collation: CI }).toArray();
  assert.equal(set[0].s.length, 4, JSON.stringify(set)); // ping, pong, café, cafe (accents differ at strength 2)
});

h.test('a collection default collation applies to its queries; listCollections shows it in full', async () => {
  const db = srv.freshDb('coll');
  await db.createCollection('dc', { collation: CI });
  const c = db.collection('dc');
  await seedWords(c);
  const info = (await db.listCollections({ name: 'dc' }).toArray())[0];
  assert.deepEqual(info.options.collation, {
    locale: 'en_US', caseLevel: false, caseFirst: 'off', strength: 2, numericOrdering: false,
    alternate: 'non-ignorable', maxVariable: 'punct', normalization: false, backwards: false, version: '57.1',
  });
  assert.equal(await c.countDocuments({ w: 'ping' }), 3, 'the default collation');
  // The _id index takes the default collation: an _id equality under it is one lookup (mongod's IDHACK takes a
  // query whose collation is the collection's), and finds the key its collation ties.
  const idx = await c.listIndexes().toArray();
  assert.equal(idx[0].name, '_id_');
  assert.equal(idx[0].collation.strength, 2);
  await c.insertOne({ _id: 'Key', n: 1 });
  await h.expectCode(c.insertOne({ _id: 'KEY', n: 2 }), 11000);
  const ex = await c.find({ _id: 'key' }).explain();
  assert.equal(ex.queryPlanner.winningPlan.stage, 'EXPRESS_IXSCAN'); /* 8.0's express _id lookup */
  assert.deepEqual(await c.find({ _id: 'key' }).toArray(), [{ _id: 'Key', n: 1 }]);
  assert.equal(await c.countDocuments({ w: 'ping' }, { collation: { locale: 'simple' } }), 1, 'overridden');
  // fr_CA compares accents backwards by default.
  await db.createCollection('fr', { collation: { locale: 'fr_CA' } });
  const fr = (await db.listCollections({ name: 'fr' }).toArray())[0];
  assert.equal(fr.options.collation.backwards, true);
});

h.test('an index with a collation: unique by the collation, used by queries with that collation only', async () => {
  const db = srv.freshDb('coll');
  const c = db.collection('ix');
  await c.createIndex({ w: 1 }, { name: 'w_ci', unique: true, collation: CI });
  await c.insertOne({ _id: 1, w: 'ping' });
  // As mongod 8.0's buildDupKeyErrorStatus: the collation in the message, a string as the hex of its collation key
  // (what the index stores), in the message and in keyValue, and the collation in the error's fields.
  const dup = await h.expectCode(c.insertOne({ _id: 2, w: 'PING' }), 11000,
    /^E11000 duplicate key error collection: \S+\.ix index: w_ci collation: \{ locale: "en_US", caseLevel: false, caseFirst: "off", strength: 2, .*\} dup key: \{ w: "0x[0-9a-f]+" \}$/);
  const info = dup.errorResponse || dup;
  assert.match(info.keyValue.w, /^0x[0-9a-f]+$/);
  assert.deepEqual(info.keyPattern, { w: 1 });
  assert.equal(info.collation.locale, 'en_US');
  assert.equal(info.collation.strength, 2);
  // The same collation key whatever the case: 'Ping' is refused with the same keyValue.
  const dup2 = await h.expectCode(c.insertOne({ _id: 2, w: 'Ping' }), 11000);
  assert.equal((dup2.errorResponse || dup2).keyValue.w, info.keyValue.w);
  await c.insertMany([{ _id: 3, w: 'pong' }, { _id: 4, w: 'apple' }, { _id: 5, w: 5 }]);
  const ix = (await c.listIndexes().toArray()).find((i) => i.name === 'w_ci');
  assert.equal(ix.collation.locale, 'en_US');
  assert.equal(ix.collation.strength, 2);
  const withColl = await c.find({ w: 'PING' }).collation(CI).explain();
  assert.match(JSON.stringify(withColl.queryPlanner.winningPlan), /IXSCAN/);
  assert.deepEqual(await c.find({ w: 'PONG' }).collation(CI).toArray(), [{ _id: 3, w: 'pong' }]);
  assert.deepEqual((await c.find({ w: { $gte: 'B' } }).collation(CI).sort({ w: 1 }).toArray()).map((d) => d._id), [1, 3]);
  const noColl = await c.find({ w: 'PING' }).explain();
  assert.doesNotMatch(JSON.stringify(noColl.queryPlanner.winningPlan), /IXSCAN/);
  assert.deepEqual(await c.find({ w: 'PING' }).toArray(), []);
  // Survives a restart: the collation is part of the stored spec.
  await srv.server.restart();
  await srv.reconnect();
  const c2 = srv.client.db(db.databaseName).collection('ix');
  await h.expectCode(c2.insertOne({ _id: 9, w: 'Pong' }), 11000);
  assert.deepEqual(await c2.find({ w: 'APPLE' }).collation(CI).toArray(), [{ _id: 4, w: 'apple' }]);
  // And after kill -9: the index keeps its collation and its keys.
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  const c3 = srv.client.db(db.databaseName).collection('ix');
  await h.expectCode(c3.insertOne({ _id: 10, w: 'APPLE' }), 11000);
  assert.equal((await c3.listIndexes().toArray()).find((i) => i.name === 'w_ci').collation.strength, 2);
});

h.test('getMore keeps the collation of the find that opened the cursor', async () => {
  const c = srv.freshDb('coll').collection('gm');
  const docs = [];
  for (let i = 0; i < 50; i++) docs.push({ _id: i, w: i % 2 ? 'KEY' : 'key', other: i % 5 === 0 ? 'x' : 'y' });
  await c.insertMany(docs);
  const got = await c.find({ w: 'Key' }).collation(CI).batchSize(3).toArray();
  assert.equal(got.length, 50);
  const agg = await c.aggregate([{ $match: { w: 'KEY' } }], { collation: CI, cursor: { batchSize: 2 } }).toArray();
  assert.equal(agg.length, 50);
});

h.test('bad collation documents get mongod\'s codes', async () => {
  const c = srv.freshDb('coll').collection('e');
  await c.insertOne({ a: 1 });
  await h.expectCode(c.find({}).collation({ locale: 'zz_nope' }).toArray(), 2, /Field 'locale' is invalid in: \{ locale: "zz_nope" \}/);
  await h.expectCode(c.find({}).collation({ locale: 'en', strength: 6 }).toArray(), 51024);
  await h.expectCode(c.find({}).collation({ strength: 2 }).toArray(), 40414);
  await h.expectCode(c.find({}).collation({ locale: 'en', bogus: 1 }).toArray(), 40415);
  await h.expectCode(c.find({}).collation({ locale: 5 }).toArray(), 14);
  await h.expectCode(c.find({}).collation({ locale: 'en', caseFirst: 'sideways' }).toArray(), 2);
  await h.expectCode(c.find({}).collation({ locale: 'simple', strength: 2 }).toArray(), 2);
  await h.expectCode(c.s.db.createCollection('badc', { collation: { locale: 'xx' } }), 2);
  await h.expectCode(c.createIndex({ a: 1 }, { collation: { locale: 'en', strength: 0 } }), 51024);
});

h.test('a view\'s default collation cannot be overridden: another collation on find, aggregate, count or distinct is 167 OptionNotSupportedOnView; the view\'s own (or simple on a simple view) is accepted', async () => {
  // mongod's view resolution (resolved_view / view_catalog): "Cannot override a view's default collation".
  const db = srv.freshDb('viewcoll');
  await db.collection('src').insertMany([{ _id: 1, s: 'a' }, { _id: 2, s: 'A' }]);
  await db.createCollection('plain', { viewOn: 'src', pipeline: [] });
  await db.createCollection('ci', { viewOn: 'src', pipeline: [], collation: CI });
  const re = /^Cannot override a view's default collation$/;
  await h.expectCode(db.collection('plain').find({ s: 'a' }).collation({ locale: 'fr' }).toArray(), 167, re);
  await h.expectCode(db.collection('plain').aggregate([{ $match: { s: 'a' } }], { collation: CI }).toArray(), 167, re);
  await h.expectCode(db.collection('ci').countDocuments({ s: 'a' }, { collation: { locale: 'fr' } }), 167, re);
  await h.expectCode(db.collection('ci').distinct('s', {}, { collation: { locale: 'simple' } }), 167, re);
  // The view's own collation, given again, and simple on a simple view, are fine.
  assert.equal((await db.collection('plain').find({ s: 'a' }).collation({ locale: 'simple' }).toArray()).length, 1);
  assert.equal((await db.collection('ci').find({ s: 'a' }).collation(CI).toArray()).length, 2);
  assert.equal((await db.collection('ci').find({ s: 'a' }).toArray()).length, 2, 'the view\'s collation applies');
});
