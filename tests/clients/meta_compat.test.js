'use strict';
// Three compatibility points, as mongod 8.0's sources have them:
//  - projection_parser.cpp's parseSubObject takes an object as an expression
//    only when it has one field starting with '$' (nFields() == 1 first): a
//    {$meta: ..., x: 1} or {$add: [...], x: 1} is a sub-projection, whose
//    "$meta" / "$add" field name fails FieldPath's check, 16410, in find and
//    in $project (the 15983 of parseExpression belongs to $addFields).
//  - ExpressionMeta::parse knows more $meta names than the three a find
//    fills in; a find validates only the text score and $geoNear data
//    (CanonicalQuery::isValid's unavailable metadata), so randVal, the
//    $search / $vectorSearch names and the time-series bucket bounds parse
//    and evaluate to missing: the field is left out (an existing one too).
//  - an upsert's new document goes through UpsertStage's
//    storage_validation::scanDocument, whose storageValidIdField refuses a
//    regex _id with 53 InvalidIdField; a plain insert keeps ops/insert.cpp's
//    fixDocumentForInsert refusal, 2 "can't use a regex for _id".
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const FIELD_PATH = /^FieldPath field names may not start with '\$'\. Consider using \$getField or \$setField\.$/;
const PROJECT_FIELD_PATH =
  /^Invalid \$project :: caused by :: FieldPath field names may not start with '\$'\. Consider using \$getField or \$setField\.$/;

h.test('an object with an operator first and more fields is a sub-projection: 16410 in find and $project', async () => {
  const c = srv.freshDb('metaobj').collection('c');
  await c.insertOne({ _id: 1, x: 2 });
  await h.expectCode(c.find({}, { projection: { s: { $meta: 'textScore', x: 1 } } }).toArray(), 16410, FIELD_PATH);
  await h.expectCode(c.find({}, { projection: { s: { $add: [1, 2], x: 1 } } }).toArray(), 16410, FIELD_PATH);
  await h.expectCode(c.aggregate([{ $project: { s: { $meta: 'textScore', x: 1 } } }]).toArray(), 16410,
    PROJECT_FIELD_PATH);
  await h.expectCode(c.aggregate([{ $project: { s: { $add: [1, 2], x: 1 } } }]).toArray(), 16410,
    PROJECT_FIELD_PATH);
  // One field: still an expression.
  assert.deepEqual(await c.aggregate([{ $project: { s: { $add: ['$x', 1] } } }]).toArray(), [{ _id: 1, s: 3 }]);
});

h.test('$meta names a find never has metadata for parse and leave the field out', async () => {
  const c = srv.freshDb('metaabsent').collection('c');
  await c.insertMany([{ _id: 1, x: 2, m: 'old' }, { _id: 2, x: 3 }]);
  const names = ['randVal', 'searchScore', 'searchHighlights', 'searchScoreDetails', 'vectorSearchScore',
    'searchSequenceToken', 'timeseriesBucketMinTime', 'timeseriesBucketMaxTime'];
  for (const name of names) {
    // Alone: an exclusion projection (computeProjectionType's $meta rule); the existing m is set to missing.
    assert.deepEqual(await c.find({}, { projection: { m: { $meta: name } } }).sort({ _id: 1 }).toArray(),
      [{ _id: 1, x: 2 }, { _id: 2, x: 3 }], name);
    // With an inclusion.
    assert.deepEqual(await c.find({}, { projection: { x: 1, s: { $meta: name } } }).sort({ _id: 1 }).toArray(),
      [{ _id: 1, x: 2 }, { _id: 2, x: 3 }], name);
    // With _id: 0: an exclusion of _id.
    assert.deepEqual(await c.find({ _id: 1 }, { projection: { _id: 0, s: { $meta: name } } }).toArray(),
      [{ x: 2, m: 'old' }], name);
  }
  // Still refused: an unknown name, and a non-string argument.
  await h.expectCode(c.find({}, { projection: { s: { $meta: 'bogus' } } }).toArray(), 17308,
    /^Unsupported argument to \$meta: bogus$/);
  await h.expectCode(c.find({}, { projection: { s: { $meta: 1 } } }).toArray(), 17307);
});

h.test('in aggregation expressions too: $meta checks its argument\'s type first (17307), and names never set evaluate to missing', async () => {
  // ExpressionMeta::parse: uassert 17307 on a non-string before the name's 17308.
  const c = srv.freshDb('metaagg').collection('c');
  await c.insertMany([{ _id: 1, x: 2, m: 'old' }, { _id: 2, x: 3 }]);
  for (const stage of ['$project', '$addFields']) {
    for (const bad of [1, null, { a: 1 }, ['textScore']]) {
      await h.expectCode(c.aggregate([{ [stage]: { s: { $meta: bad } } }]).toArray(), 17307,
        new RegExp(`^Invalid \\${stage} :: caused by :: \\$meta only supports string arguments$`));
    }
    await h.expectCode(c.aggregate([{ [stage]: { s: { $add: [1, { $meta: 2 }] } } }]).toArray(), 17307);
    await h.expectCode(c.aggregate([{ [stage]: { s: { $meta: 'bogus' } } }]).toArray(), 17308,
      new RegExp(`^Invalid \\${stage} :: caused by :: Unsupported argument to \\$meta: bogus$`));
  }
  const names = ['randVal', 'searchScore', 'searchHighlights', 'searchScoreDetails', 'vectorSearchScore',
    'searchSequenceToken', 'timeseriesBucketMinTime', 'timeseriesBucketMaxTime'];
  for (const name of names) {
    assert.deepEqual(await c.aggregate([{ $project: { x: 1, s: { $meta: name } } }, { $sort: { _id: 1 } }]).toArray(),
      [{ _id: 1, x: 2 }, { _id: 2, x: 3 }], name);
    // $addFields of a missing value: the field is not added (an existing one is removed).
    assert.deepEqual(await c.aggregate([{ $addFields: { m: { $meta: name } } }, { $sort: { _id: 1 } }]).toArray(),
      [{ _id: 1, x: 2 }, { _id: 2, x: 3 }], name);
    // Inside another expression it is missing: $ifNull takes its replacement, arithmetic gives null.
    assert.deepEqual(await c.aggregate([{ $match: { _id: 1 } },
      { $project: { d: { $ifNull: [{ $meta: name }, 'none'] }, n: { $add: [1, { $meta: name }] } } }]).toArray(),
      [{ _id: 1, d: 'none', n: null }], name);
  }
});

h.test('an upsert whose new document has a regex _id is 53; an insert of one stays 2', async () => {
  const db = srv.freshDb('upsertid');
  const c = db.collection('c');
  const want53 = { code: 53, errmsg: "The '_id' value cannot be of type regex" };
  const upsert = async (u) => {
    const r = await db.command({ update: 'c', updates: [{ q: { x: 1 }, u, upsert: true }] });
    assert.equal(r.n, 0);
    assert.equal(r.writeErrors.length, 1);
    return { code: r.writeErrors[0].code, errmsg: r.writeErrors[0].errmsg };
  };
  assert.deepEqual(await upsert({ $set: { _id: /a/ } }), want53);
  assert.deepEqual(await upsert({ _id: /a/ }), want53);
  assert.deepEqual(await upsert({ _id: /a/, y: 1 }), want53);
  assert.deepEqual(await upsert([{ $set: { _id: { $literal: /a/ } } }]), want53);
  // findAndModify's upsert runs in its plan executor: mongod's context comes first.
  await h.expectCode(c.findOneAndUpdate({ x: 1 }, { $set: { _id: /a/ } }, { upsert: true }), 53,
    /^Plan executor error during findAndModify :: caused by :: The '_id' value cannot be of type regex$/);
  assert.equal(await c.countDocuments(), 0);
  // A plain insert: fixDocumentForInsert's words.
  await h.expectCode(c.insertOne({ _id: /a/ }), 2, /^can't use a regex for _id$/);
  // A regex in the query is not an equality: the upsert generates an ObjectId.
  const r = await c.updateOne({ _id: /a/ }, { $set: { y: 1 } }, { upsert: true });
  assert.equal(r.upsertedCount, 1);
});
