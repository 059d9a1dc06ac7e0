'use strict';
/*
 * Index management as applications meet it, against mongod 8.0's source:
 * what a partialFilterExpression may hold (index_catalog_impl.cpp's
 * _checkValidFilterExpressions after index_key_validate.cpp's parse with
 * kBanAllSpecialFeatures), and the messages of its refusals.
 */
const assert = require('node:assert/strict');
const mongoose = require('mongoose');
const { Double, Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const keys = async (db, coll, name) => Number((await db.command({ validate: coll })).keysPerIndex[name]);

// _checkValidFilterExpressions allows $and / $or over EQ, LT, LTE, GT, GTE, EXISTS, TYPE,
// MATCH_IN and GEO; $all is an $and of equalities and $comment makes no node at all.
h.test('partial filters mongod 8.0 accepts: $geoWithin, $geoIntersects, $all, $comment; the index holds only the matching documents', async () => {
  const db = srv.freshDb('ic_pf_ok');
  const c = db.collection('c');
  await c.insertMany([
    { _id: 1, u: 'a', loc: [1, 1], gj: { type: 'Point', coordinates: [2, 2] }, tags: ['x', 'y'] },
    { _id: 2, u: 'b', loc: [50, 50], gj: { type: 'Point', coordinates: [20, 20] }, tags: ['x'] },
    { _id: 3, u: 'c', tags: ['x', 'y', 'z'] },
  ]);
  await c.createIndex({ u: 1 }, { name: 'near_origin', partialFilterExpression: { loc: { $geoWithin: { $center: [[0, 0], 10] } } } });
  await c.createIndex({ u: 1 }, {
    name: 'intersects',
    partialFilterExpression: { gj: { $geoIntersects: { $geometry: { type: 'Polygon', coordinates: [[[0, 0], [5, 0], [5, 5], [0, 5], [0, 0]]] } } } },
  });
  await c.createIndex({ u: 1 }, { name: 'xy', unique: true, partialFilterExpression: { tags: { $all: ['x', 'y'] } } });
  await c.createIndex({ _id: 1, u: 1 }, { name: 'commented', partialFilterExpression: { $comment: 'live rows', u: { $exists: true } } });
  const by = Object.fromEntries((await c.indexes()).map((i) => [i.name, i]));
  assert.deepEqual(by.xy.partialFilterExpression, { tags: { $all: ['x', 'y'] } });
  assert.deepEqual(by.commented.partialFilterExpression, { $comment: 'live rows', u: { $exists: true } });
  assert.equal(await keys(db, 'c', 'near_origin'), 1);
  assert.equal(await keys(db, 'c', 'intersects'), 1);
  assert.equal(await keys(db, 'c', 'xy'), 2);
  assert.equal(await keys(db, 'c', 'commented'), 3);
  // Unique only among the documents the filter takes.
  await c.insertOne({ _id: 4, u: 'a', tags: ['x'] });
  await h.expectCode(c.insertOne({ _id: 5, u: 'a', tags: ['y', 'x'] }), 11000, /index: xy dup key: \{ u: "a" \}/);
  assert.equal((await db.command({ validate: 'c' })).valid, true);
});

// internalPartialFilterExpressionMaxDepth (4): jstests/core/index/index_partial_create_drop.js.
h.test('a partial filter deeper than 4 levels is 67 "partialFilterExpression depth may not exceed 4"; 4 levels build', async () => {
  const db = srv.freshDb('ic_pf_depth');
  const c = db.collection('c');
  await c.createIndex({ x: 1 }, { name: 'd4', partialFilterExpression: { $and: [{ $and: [{ $and: [{ x: 3 }] }] }] } });
  const e = await h.expectCode(
    c.createIndex({ x: 1 }, { name: 'd5', partialFilterExpression: { $and: [{ $and: [{ $and: [{ $and: [{ x: 3 }] }] }] }] } }), 67);
  // The validated spec: the driver's field order, then the "v" mongod's validateIndexSpec appends.
  assert.equal(e.message, 'Error in specification { name: "d5", partialFilterExpression: '
    + '{ $and: [ { $and: [ { $and: [ { $and: [ { x: 3 } ] } ] } ] } ] }, key: { x: 1 }, v: 2 } :: caused by :: '
    + 'partialFilterExpression depth may not exceed 4');
  // Two predicates on a field are an $and of their own: one level more.
  await h.expectCode(c.createIndex({ x: 1 }, { name: 'd5b', partialFilterExpression: { $or: [{ $or: [{ $or: [{ x: { $gt: 1, $lt: 5 } }] }] }] } }),
    67, /depth may not exceed 4$/);
  await h.expectCode(c.createIndex({ x: 1 }, { name: 'o5', partialFilterExpression: { $or: [{ $or: [{ $or: [{ $or: [{ x: 1 }] }] }] }] } }),
    67, /depth may not exceed 4$/);
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_', 'd4']);
});

// The parse with kBanAllSpecialFeatures fails before any tree check, under the spec as given.
h.test('$expr and $jsonSchema are 224, $where 2, $near 5626500 in a partial filter, as mongod\'s parser with kBanAllSpecialFeatures', async () => {
  const c = srv.freshDb('ic_pf_ban').collection('c');
  const e = await h.expectCode(c.createIndex({ x: 1 }, { name: 'e', partialFilterExpression: { $expr: { $eq: ['$x', 5] } } }), 224);
  assert.equal(e.codeName, 'QueryFeatureNotAllowed');
  assert.equal(e.message, 'Error in specification { name: "e", partialFilterExpression: { $expr: { $eq: [ "$x", 5 ] } }, key: { x: 1 } } '
    + ':: caused by :: $expr is not allowed in this context');
  await h.expectCode(c.createIndex({ x: 1 }, { name: 'j', partialFilterExpression: { $jsonSchema: { required: ['x'] } } }), 224,
    /caused by :: \$jsonSchema is not allowed in this context$/);
  await h.expectCode(c.createIndex({ x: 1 }, { name: 'w', partialFilterExpression: { $where: 'true' } }), 2,
    /caused by :: \$where is not allowed in this context$/);
  await h.expectCode(c.createIndex({ x: 1 }, { name: 'n', partialFilterExpression: { x: { $near: [0, 0] } } }), 5626500,
    /caused by :: \$geoNear, \$near, and \$nearSphere are not allowed in this context/);
  await h.expectCode(c.createIndex({ x: 1 }, { name: 'n', sparse: true, partialFilterExpression: { $expr: { $eq: ['$x', 5] } } }), 224);
  await h.expectCode(c.indexes(), 26); // nothing was created, not even the collection
});

// "Expression not supported in partial index: " + MatchExpression::debugString of the first bad node.
h.test('refused partial filters name the node as mongod\'s debugString does', async () => {
  const db = srv.freshDb('ic_pf_msg');
  const c = db.collection('c');
  const cases = [
    [{ a: { $ne: 1 } }, '$not\n    a $eq 1\n'],
    [{ a: { $exists: false } }, '$not\n    a exists\n'],
    [{ a: { $nin: [3, 1, 'b', 1] } }, '$not\n    a $in [ 1 3 "b" ]\n'],
    [{ a: { $not: { $gt: 1 } } }, '$not\n    $and\n        a $gt 1\n'],
    [{ $nor: [{ a: 1 }, { b: { $lt: 2 } }] }, '$nor\n    a $eq 1\n    b $lt 2\n'],
    [{ a: /ab+c/i }, 'a regex /ab+c/i\n'],
    [{ a: { $regex: 'x', $options: 'm' } }, 'a regex /x/m\n'],
    [{ a: { $size: 2 } }, 'a $size : 2\n'],
    [{ a: { $mod: [2, 0] } }, 'a mod 2 % x == 0\n'],
    [{ a: { $elemMatch: { $gt: 1 } } }, 'a $elemMatch (value)\n     $gt 1\n'],
    [{ a: { $elemMatch: { b: 1, c: 2 } } }, 'a $elemMatch (obj)\n    $and\n        b $eq 1\n        c $eq 2\n'],
    [{ a: { $bitsAllSet: 5 } }, 'a $bitsAllSet: [0, 2]\n'],
    [{ a: { $all: [] } }, '$alwaysFalse\n'],
    [{ $or: [{ a: 1 }, { b: { $ne: 2 } }] }, '$not\n    b $eq 2\n'], // $or is allowed; its bad branch is named
    [{ a: { $gt: 1 }, b: { $exists: false } }, '$not\n    b exists\n'],
  ];
  for (const [pf, tree] of cases) {
    const e = await h.expectCode(c.createIndex({ a: 1 }, { name: 'p', partialFilterExpression: pf }), 67);
    assert.ok(e.message.endsWith(`, v: 2 } :: caused by :: Expression not supported in partial index: ${tree}`),
      `${JSON.stringify(pf)} -> ${JSON.stringify(e.message)}`);
    assert.equal(e.codeName, 'CannotCreateIndex');
  }
  // An explicit v stays where it was given.
  const e = await h.expectCode(db.command({ createIndexes: 'c',
    indexes: [{ v: 2, key: { a: 1 }, name: 'p', sparse: true, partialFilterExpression: { a: 1 } }] }), 67);
  assert.equal(e.message, 'Error in specification { v: 2, key: { a: 1 }, name: "p", sparse: true, partialFilterExpression: { a: 1 } } '
    + ':: caused by :: cannot mix "partialFilterExpression" and "sparse" options');
});

h.test('Mongoose: a schema\'s partial unique index over $geoWithin / $all syncs, and a $ne one fails syncIndexes with 67', async () => {
  const db = srv.freshDb('ic_pf_mongoose');
  const conn = await mongoose.createConnection(srv.uri, { dbName: db.databaseName }).asPromise();
  try {
    const schema = new mongoose.Schema({ sku: String, loc: [Number], tags: [String] });
    schema.index({ sku: 1 }, { unique: true, partialFilterExpression: { tags: { $all: ['live'] } } });
    schema.index({ loc: 1 }, { partialFilterExpression: { loc: { $geoWithin: { $box: [[0, 0], [10, 10]] } } } });
    const M = conn.model('Item', schema);
    await M.syncIndexes();
    assert.deepEqual((await M.listIndexes()).map((i) => i.name).sort(), ['_id_', 'loc_1', 'sku_1']);
    await M.create([{ sku: 'a', tags: ['live'], loc: [1, 1] }, { sku: 'a', tags: ['gone'], loc: [20, 20] }]);
    await assert.rejects(M.create({ sku: 'a', tags: ['live', 'new'] }), (e) => e.code === 11000);
    assert.equal(await keys(db, 'items', 'loc_1'), 1);

    const bad = new mongoose.Schema({ sku: String, deletedAt: Date });
    bad.index({ sku: 1 }, { unique: true, partialFilterExpression: { deletedAt: { $exists: false } } });
    const B = conn.model('Bad', bad);
    await assert.rejects(B.syncIndexes(), (e) => e.code === 67 && /Expression not supported in partial index: \$not\n {4}deletedAt exists\n$/.test(e.message));
  } finally {
    await conn.close();
  }
});

h.test('mongosh: db.c.createIndex with a $geoWithin partial filter builds; a $ne one is refused with mongod\'s message', async () => {
  const db = srv.freshDb('ic_pf_sh');
  await db.collection('c').insertOne({ a: 1, g: [1, 1] });
  const out = await h.mongosh(srv.port, db.databaseName, `
    const ok = db.c.createIndex({ a: 1 }, { partialFilterExpression: { g: { $geoWithin: { $center: [[0, 0], 5] } } } });
    let bad;
    try { db.c.createIndex({ b: 1 }, { partialFilterExpression: { b: { $ne: null } } }); } catch (e) { bad = e.code + ' ' + e.message.split(':: caused by :: ')[1]; }
    print(JSON.stringify({ ok, bad }));
  `);
  assert.deepEqual(JSON.parse(out), { ok: 'a_1', bad: '67 Expression not supported in partial index: $not\n    b $eq null\n' });
});

// create_indexes_cmd.cpp: indexesAlreadyExist answers {numIndexesBefore, numIndexesAfter, note}
// only; appendFinalIndexFieldsToResult adds "index already exists" when fewer indexes were
// added than the request named (its numSpecs), and createdCollectionAutomatically otherwise.
h.test('createIndexes replies: no createdCollectionAutomatically when all exist; "index already exists" when some did', async () => {
  const db = srv.freshDb('ic_reply');
  const c = db.collection('c');
  const create = (coll, indexes) => db.command({ createIndexes: coll, indexes });
  assert.deepEqual(await create('c', [{ key: { a: 1 }, name: 'a_1' }]),
    { numIndexesBefore: 1, numIndexesAfter: 2, createdCollectionAutomatically: true, ok: 1 });
  assert.deepEqual(await create('c', [{ key: { a: 1 }, name: 'a_1' }]),
    { numIndexesBefore: 2, numIndexesAfter: 2, note: 'all indexes already exist', ok: 1 });
  assert.deepEqual(await create('c', [{ key: { a: 1 }, name: 'a_1' }, { key: { b: 1 }, name: 'b_1' }]),
    { numIndexesBefore: 2, numIndexesAfter: 3, createdCollectionAutomatically: false, note: 'index already exists', ok: 1 });
  // A new collection's own _id index counts as one that existed.
  assert.deepEqual(await create('n', [{ key: { _id: 1 }, name: '_id_' }, { key: { z: 1 }, name: 'z_1' }]),
    { numIndexesBefore: 1, numIndexesAfter: 2, createdCollectionAutomatically: true, note: 'index already exists', ok: 1 });
  // What the drivers hand back stays the name(s).
  assert.equal(await c.createIndex({ a: 1 }), 'a_1');
  assert.deepEqual(await c.createIndexes([{ key: { a: 1 } }, { key: { c: 1 } }]), ['a_1', 'c_1']);
  const out = await h.mongosh(srv.port, db.databaseName, 'print(JSON.stringify(db.c.createIndex({ c: 1 })) + " " + JSON.stringify(db.runCommand({ createIndexes: "c", indexes: [{ key: { c: 1 }, name: "c_1" }] })))');
  assert.equal(out, '"c_1" {"numIndexesBefore":4,"numIndexesAfter":4,"note":"all indexes already exist","ok":1}');
});

// MultiIndexBlock::init meets the request's own earlier spec as an index in progress: an
// identical one is 96 "Cannot build two identical indexes", and any conflict fails the build
// under createIndexes' "Index build failed: <build UUID>: Collection <ns> ( <UUID> )" context.
h.test('one request naming an index twice on an existing collection: 96, or the conflict, as a failed build; nothing is built', async () => {
  const db = srv.freshDb('ic_twice');
  const c = db.collection('c');
  await c.insertOne({ a: 1 });
  const build = /^Index build failed: [0-9a-f-]{36}: Collection \w+\.c \( [0-9a-f-]{36} \) :: caused by :: /;
  const e = await h.expectCode(c.createIndexes([{ key: { a: 1 } }, { key: { b: 1 } }, { key: { a: 1 } }]), 96);
  assert.equal(e.codeName, 'OperationFailed');
  assert.match(e.message, new RegExp(`${build.source}Cannot build two identical indexes\\. Try again without duplicate indexes\\.$`));
  const e85 = await h.expectCode(c.createIndexes([{ key: { a: 1 }, name: 'x' }, { key: { a: 1 }, name: 'y' }]), 85);
  assert.match(e85.message, new RegExp(`${build.source}Index already exists with a different name: x$`));
  const e86 = await h.expectCode(c.createIndexes([{ key: { a: 1 }, name: 'x' }, { key: { b: 1 }, name: 'x' }]), 86);
  assert.match(e86.message, new RegExp(`${build.source}An existing index has the same name as the requested index`));
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_']);
  // A conflict with an index that exists already is no build failure: bare, as before.
  await c.createIndex({ a: 1 });
  await h.expectCode(c.createIndex({ a: 1 }, { name: 'other' }), 85, /^Index already exists with a different name: a_1$/);
});

// index_key_validate.cpp's validateIndexSpec, whose refusals createIndexes names
// "Error in specification <spec as given> :: caused by :: ...": v must be representable as
// an int (2 BadValue) and 1 or 2 (67, isIndexVersionAllowedForCreation); a collation needs v2.
h.test('the v option: 2 for a non-integral v, 67 for other versions or a collation on v1, all under "Error in specification"', async () => {
  const db = srv.freshDb('ic_v');
  const create = (spec) => db.command({ createIndexes: 'c', indexes: [spec] });
  let e = await h.expectCode(create({ key: { a: 1 }, name: 'a', v: 1.5 }), 2);
  assert.equal(e.message, 'Error in specification { key: { a: 1 }, name: "a", v: 1.5 } :: caused by :: '
    + 'Index version must be representable as a 32-bit integer, but got 1.5');
  await h.expectCode(create({ key: { a: 1 }, name: 'a', v: 1e10 }), 2, /representable as a 32-bit integer, but got 10000000000\.0$/);
  e = await h.expectCode(create({ key: { a: 1 }, name: 'a', v: 3 }), 67);
  assert.equal(e.message, 'Error in specification { key: { a: 1 }, name: "a", v: 3 } :: caused by :: '
    + 'Invalid index specification { key: { a: 1 }, name: "a", v: 3 }; cannot create an index with v=3');
  await h.expectCode(create({ key: { a: 1 }, name: 'a', v: 0 }), 67, /^Error in specification .* cannot create an index with v=0$/);
  e = await h.expectCode(create({ key: { a: 1 }, name: 'a', v: 1, collation: { locale: 'fr' } }), 67);
  assert.equal(e.message, 'Error in specification { key: { a: 1 }, name: "a", v: 1, collation: { locale: "fr" } } :: caused by :: '
    + 'Invalid index specification { key: { a: 1 }, name: "a", v: 1, collation: { locale: "fr" } }; '
    + 'cannot create an index with the \'collation\' option and v=1');
  await h.expectCode(create({ key: { a: 1 }, name: 'a', weights: { a: 1 } }), 67,
    /^Error in specification \{ key: \{ a: 1 \}, name: "a", weights: \{ a: 1 \} \} :: caused by :: Invalid index specification .*; the field 'weights' can only be specified with text indexes$/);
  // What builds: v 1 and 2 (2.0 is 2).
  await create({ key: { a: 1 }, name: 'a1', v: 1 });
  await create({ key: { b: 1 }, name: 'b2', v: 2.0 });
  const by = Object.fromEntries((await db.collection('c').indexes()).map((i) => [i.name, i]));
  assert.deepEqual([by.a1.v, by.b2.v], [1, 2]);
});

// validateIndexSpecCollation: only a v2 index inherits the collection's default collation.
h.test('on a collection with a default collation a v1 index stays simple, a v2 one takes the default', async () => {
  const db = srv.freshDb('ic_v1coll');
  await db.createCollection('c', { collation: { locale: 'en', strength: 2 } });
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, s: 'a' }, { _id: 2, s: 'A' }]);
  await db.command({ createIndexes: 'c', indexes: [{ key: { s: 1 }, name: 'v1', v: 1 }, { key: { s: -1 }, name: 'v2' }] });
  const by = Object.fromEntries((await c.indexes()).map((i) => [i.name, i]));
  assert.equal(by.v1.collation, undefined, JSON.stringify(by.v1));
  assert.equal(by.v2.collation.locale, 'en');
  // The simple v1 index answers a simple-collation query; the collection default reads both cases.
  assert.deepEqual((await c.find({ s: 'a' }).collation({ locale: 'simple' }).hint('v1').toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ s: 'a' }).hint('v2').toArray()).map((d) => d._id).sort(), [1, 2]);
});

// list_indexes.cpp: with includeIndexBuildInfo each built index is {spec: <spec>}, in every
// batch; includeBuildUUIDs leaves built ones as they are; both at once are 72 InvalidOptions.
h.test('listIndexes includeIndexBuildInfo wraps each spec in {spec}; with includeBuildUUIDs too it is 72', async () => {
  const db = srv.freshDb('ic_li');
  await db.collection('c').createIndex({ a: 1 }, { unique: true });
  const r = await db.command({ listIndexes: 'c', includeIndexBuildInfo: true });
  assert.deepEqual(r.cursor.firstBatch, [{ spec: { v: 2, key: { _id: 1 }, name: '_id_' } },
    { spec: { v: 2, key: { a: 1 }, name: 'a_1', unique: true } }]);
  const paged = await db.command({ listIndexes: 'c', includeIndexBuildInfo: true, cursor: { batchSize: 1 } });
  const more = await db.command({ getMore: paged.cursor.id, collection: 'c' });
  assert.deepEqual(more.cursor.nextBatch, [{ spec: { v: 2, key: { a: 1 }, name: 'a_1', unique: true } }]);
  assert.deepEqual((await db.command({ listIndexes: 'c', includeBuildUUIDs: true })).cursor.firstBatch.map((i) => i.name), ['_id_', 'a_1']);
  const e = await h.expectCode(db.command({ listIndexes: 'c', includeBuildUUIDs: true, includeIndexBuildInfo: true }), 72);
  assert.equal(e.message, 'The includeBuildUUIDs flag and includeBuildIndexInfo flag cannot both be set to true');
  await h.expectCode(db.command({ listIndexes: 'nosuch', includeBuildUUIDs: true, includeIndexBuildInfo: true }), 72);
});

h.test('hostile partial filters are refused without harm: huge and negative operands, long $in lists, deep $nor / $not', async () => {
  const db = srv.freshDb('ic_pf_hostile');
  const c = db.collection('c');
  let deep = { a: 1 };
  for (let i = 0; i < 60; i++) deep = { $nor: [deep] };
  const filters = [
    { a: { $bitsAllSet: -1 } }, { a: { $bitsAnySet: 1e300 } }, { a: { $bitsAllClear: [0, 63, 62] } },
    { a: { $size: 1e300 } }, { a: { $mod: [1e300, -1e300] } }, { a: { $nin: Array.from({ length: 5000 }, (_, i) => `v${i}`) } },
    { a: { $not: { $not: { $gt: 1 } } } }, deep, { a: { $elemMatch: { $elemMatch: { $elemMatch: { b: { $ne: 1 } } } } } },
    { a: { $regex: 'x'.repeat(3000) } }, { ['f'.repeat(2000)]: { $exists: false } },
  ];
  for (const pf of filters) {
    const e = await c.createIndex({ a: 1 }, { name: 'h', partialFilterExpression: pf }).then(() => null, (err) => err);
    assert.ok(e && [2, 9, 67].includes(e.code), `${JSON.stringify(pf).slice(0, 80)} -> ${e && e.code} ${e && e.message.slice(0, 200)}`);
  }
  const e = await h.expectCode(c.createIndex({ a: 1 }, { name: 'h', partialFilterExpression: { a: { $bitsAnySet: [63, 0] } } }), 67);
  assert.ok(e.message.endsWith('Expression not supported in partial index: a $bitsAnySet: [63, 0]\n'), e.message);
  assert.deepEqual(await db.command({ ping: 1 }), { ok: 1 });
});

// IndexCatalogImpl::findIndexesByKeyPattern compares with SimpleBSONObjComparator: numbers by
// value, so {a: 1.0} or {a: NumberLong(1)} names the index on {a: 1} (dropIndexes, collMod).
h.test('dropIndexes and collMod find an index by a key pattern whose numbers are of another type', async () => {
  const db = srv.freshDb('ic_kp');
  const c = db.collection('c');
  await c.createIndexes([{ key: { a: 1 } }, { key: { b: -1, c: 1 } }, { key: { h: 'hashed' } }]);
  const m = await db.command({ collMod: 'c', index: { keyPattern: { b: Long.fromNumber(-1), c: new Double(1) }, hidden: true } });
  assert.deepEqual([m.hidden_old, m.hidden_new], [false, true]);
  assert.equal((await db.command({ dropIndexes: 'c', index: { a: new Double(1) } })).nIndexesWas, 4);
  assert.equal((await db.command({ dropIndexes: 'c', index: { b: new Double(-1), c: Long.fromNumber(1) } })).nIndexesWas, 3);
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_', 'h_hashed']);
  // Field names and their order still count, and a string is not a number.
  await h.expectCode(db.command({ dropIndexes: 'c', index: { H: 'hashed' } }), 27, /^can't find index with key: \{ H: "hashed" \}$/);
  await h.expectCode(db.command({ dropIndexes: 'c', index: { h: 1 } }), 27);
  await h.expectCode(db.command({ dropIndexes: 'c', index: { _id: new Double(1) } }), 72, /^cannot drop _id index$/);
});

// drop_indexes.idl: index is a variant of string, array<string> and object, parsed before the
// collection is looked up. Real mongod replies (recorded by FerretDB's integration tests):
// "... is the wrong type 'bool', expected types '[string, object']" and, for an array of
// non-strings, "... is the wrong type 'array', expected types '[string']".
h.test('dropIndexes: a wrong index type is 14 with the IDL variant\'s messages, before the collection is looked up', async () => {
  const db = srv.freshDb('ic_dropty');
  await db.collection('c').createIndexes([{ key: { v: -1 } }, { key: { 'v.foo': -1 } }]);
  const drop = (index, coll = 'c') => db.command({ dropIndexes: coll, index });
  await h.expectCode(drop(true), 14, /^BSON field 'dropIndexes\.index' is the wrong type 'bool', expected types '\[string, object'\]$/);
  await h.expectCode(drop(5, 'nosuch'), 14, /^BSON field 'dropIndexes\.index' is the wrong type 'int', expected types '\[string, object'\]$/);
  await h.expectCode(drop([{ v: -1 }, { 'v.foo': -1 }]), 14, /^BSON field 'dropIndexes\.index' is the wrong type 'array', expected types '\[string'\]$/);
  await h.expectCode(drop([1], 'nosuch'), 14, /^BSON field 'dropIndexes\.index' is the wrong type 'array', expected types '\[string'\]$/);
  await h.expectCode(drop(['v_-1', 2]), 14, /^BSON field 'dropIndexes\.index\.1' is the wrong type 'int', expected type 'string'$/);
  await h.expectCode(drop(['non-existent', 'invalid']), 27, /^index not found with name \[non-existent\]$/);
  assert.deepEqual((await db.collection('c').indexes()).map((i) => i.name), ['_id_', 'v_-1', 'v.foo_-1']);
  assert.equal((await drop(['v_-1', 'v.foo_-1'])).nIndexesWas, 3);
});

// Real MongoDB replies recorded in FerretDB's integration tests (createIndexes invalid specs):
// validateIndexSpec requires a name (9), and the refusals made on the validated spec
// (_isSpecOk's, validateIdIndexSpec's) show it with the "v: 2" validateIndexSpec appended.
h.test('createIndexes without a name is 9; refusals of the validated spec show it with v: 2', async () => {
  const db = srv.freshDb('ic_named');
  const create = (spec) => db.command({ createIndexes: 'c', indexes: [spec] });
  let e = await h.expectCode(create({ key: { v: 1 } }), 9);
  assert.equal(e.message, 'Error in specification { key: { v: 1 } } :: caused by :: The \'name\' field is a required property of an index specification');
  e = await h.expectCode(create({ key: { v: -1 }, name: '' }), 67);
  assert.equal(e.message, 'Error in specification { key: { v: -1 }, name: "", v: 2 } :: caused by :: index name cannot be empty');
  e = await h.expectCode(create({ key: { _id: 1 }, name: '_id_', unique: true }), 197);
  assert.equal(e.message, 'The field \'unique\' is not valid for an _id index specification. Specification: { key: { _id: 1 }, name: "_id_", unique: true, v: 2 }');
  e = await h.expectCode(create({ key: { v: 1 }, name: 'u', unique: {} }), 14);
  assert.equal(e.message, 'Error in specification { key: { v: 1 }, name: "u", unique: {} } :: caused by :: The field \'unique has value unique: {}, which is not convertible to bool');
  await h.expectCode(db.collection('c').indexes(), 26); // nothing created
  // The drivers and shells name what they create.
  assert.equal(await db.collection('c').createIndex({ v: 1 }), 'v_1');
});

// Ordering::make (bson/ordering.h): uassert 13103 "too many compound keys" past 32 key fields,
// met when prepareSpecForCreate builds the spec's IndexDescriptor.
h.test('an index of 33 fields is 13103 "too many compound keys"; 32 build', async () => {
  const db = srv.freshDb('ic_33');
  const c = db.collection('c');
  const key = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, i % 2 ? -1 : 1]));
  const e = await h.expectCode(c.createIndex(key(33)), 13103, /^too many compound keys$/);
  assert.equal(e.codeName, 'Location13103');
  assert.equal(await c.createIndex(key(32), { name: 'k32' }), 'k32');
  await c.insertOne(Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`f${i}`, i])));
  assert.equal(await c.countDocuments({ f0: 0, f31: 31 }), 1);
});

// create_indexes_cmd.cpp's parseAndValidateIndexSpecs: ignoreUnknownIndexOptions (what
// mongorestore sends) removes the fields no index spec has (removeUnknownFields) before the
// spec is validated; without it they stay 197.
h.test('ignoreUnknownIndexOptions: unknown fields (an old dump\'s "safe", "w", ...) are removed, the rest is validated and kept', async () => {
  const db = srv.freshDb('ic_ignore');
  const r = await db.command({ createIndexes: 'c', ignoreUnknownIndexOptions: true, indexes: [
    { key: { a: 1 }, name: 'a_1', unique: true, safe: null, foo: 1 },
    { key: { b: -1 }, name: 'b_-1', w: 1, sparse: true },
  ] });
  assert.deepEqual(r, { numIndexesBefore: 1, numIndexesAfter: 3, createdCollectionAutomatically: true, ok: 1 });
  const by = Object.fromEntries((await db.collection('c').indexes()).map((i) => [i.name, i]));
  assert.deepEqual(by.a_1, { v: 2, key: { a: 1 }, name: 'a_1', unique: true });
  assert.deepEqual(by['b_-1'], { v: 2, key: { b: -1 }, name: 'b_-1', sparse: true });
  // The same spec again is the same index.
  const again = await db.command({ createIndexes: 'c', ignoreUnknownIndexOptions: true,
    indexes: [{ key: { a: 1 }, name: 'a_1', unique: true, bar: 2 }] });
  assert.equal(again.note, 'all indexes already exist');
  // What remains is still validated, and shown as it remains.
  const e = await h.expectCode(db.command({ createIndexes: 'c', ignoreUnknownIndexOptions: true,
    indexes: [{ key: { z: 0 }, name: 'z', foo: 1 }] }), 67);
  assert.equal(e.message, 'Error in specification { key: { z: 0 }, name: "z" } :: caused by :: Values in the index key pattern cannot be 0.');
  await h.expectCode(db.command({ createIndexes: 'c', ignoreUnknownIndexOptions: false, indexes: [{ key: { y: 1 }, name: 'y', foo: 1 }] }),
    197, /The field 'foo' is not valid for an index specification/);
});
