'use strict';
/*
 * Edges of index management, hints and validation, against mongod 8.0's
 * source: the planner's error text (get_executor.cpp's finishPrepare wraps
 * QueryPlanner::plan's refusal as "error processing query: <CanonicalQuery::
 * toString> planner returned error :: caused by :: <reason>"), createIndexes'
 * rules for an _id key pattern (parseAndValidateIndexSpecs ->
 * validateIdIndexSpec, index_key_validate.cpp), dropIndexes with a name
 * given twice (drop_indexes.cpp's dropReadyIndexes), $text in a partial
 * filter (kBanAllSpecialFeatures), the $jsonSchema warning 3216000
 * (json_schema_parser.cpp) and validationAction "errorAndLog" (8.1 only).
 */
const assert = require('node:assert/strict');
const { Double, Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const HINT = ' planner returned error :: caused by :: hint provided does not correspond to an existing index';

async function failure(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected an error, got success');
}

// CanonicalQuery::toString(forErrMsg): "ns=<ns>[ batchSize=][ limit=][ skip=]Tree: <debugString>Sort: <sort>\nProj: <proj>\n".
h.test('a hint naming no index is 2 with the canonical query: ns, limit, skip, batchSize, the normalized tree, sort, projection, collation', async () => {
  const db = srv.freshDb('ie_hint');
  const c = db.collection('c');
  await c.insertOne({ a: 1 });
  const ns = `${db.databaseName}.c`;
  let e = await failure(c.find({}).hint({ nope: 1 }).toArray());
  assert.equal(e.code, 2);
  assert.equal(e.message, `error processing query: ns=${ns}Tree: $and\nSort: {}\nProj: {}\n${HINT}`);
  // Clients that match the reason as a suffix still do.
  assert.match(e.message, /hint provided does not correspond to an existing index$/);
  // One child: the $and goes; children sorted by match type then path; nested $and absorbed; $or of
  // equalities on one path is a $in; indentation four spaces a level.
  e = await failure(c.find({ b: { $gt: 2, $lt: 5 }, $and: [{ a: 1 }], $or: [{ x: 2 }, { x: 1 }] })
    .sort({ a: -1 }).project({ a: 1 }).limit(3).skip(2).hint('zz').toArray());
  assert.equal(e.message, `error processing query: ns=${ns} limit=3 skip=2Tree: $and\n    a $eq 1\n    b $lt 5\n    b $gt 2\n`
    + `    x $in [ 1 2 ]\nSort: { a: -1 }\nProj: { a: 1 }\n${HINT}`);
  e = await failure(c.find({ f: { $elemMatch: { g: 1 } }, e: { $elemMatch: { $gt: 1 } }, d: /x/i, a: { $in: [3, 1, 2, 1] },
    b: { $ne: 1 }, t: { $type: 'string' }, s: { $exists: true } }).hint('zz').toArray());
  assert.equal(e.message, `error processing query: ns=${ns}Tree: $and\n    f $elemMatch (obj)\n        g $eq 1\n`
    + '    e $elemMatch (value)\n         $gt 1\n    d regex /x/i\n    s exists\n    a $in [ 1 2 3 ]\n    $not\n        b $eq 1\n'
    + `    t $type: { 0: 2 }\nSort: {}\nProj: {}\n${HINT}`);
  // Operators rendered only approximately still end with the reason, and never harm the server.
  for (const filter of [{ a: { $in: [] } }, { a: { $in: [/x/, /y/] } }, { $expr: { $eq: ['$a', 1] } }, { a: { $bitsAllSet: 3 } },
    { loc: { $geoWithin: { $center: [[0, 0], 1] } } }, { $nor: [{ a: 1 }] }, { $or: [{ a: 1 }, { b: 1 }] }]) {
    e = await failure(db.command({ find: 'c', filter, hint: 'zz' }));
    assert.equal(e.code, 2);
    assert.ok(e.message.startsWith(`error processing query: ns=${ns}Tree: `) && e.message.endsWith(`\nSort: {}\nProj: {}\n${HINT}`), e.message);
  }
  e = await failure(db.command({ find: 'c', filter: { _id: 1, n: 'x' }, hint: 'zz', batchSize: 0, collation: { locale: 'en' } }));
  assert.equal(e.message, `error processing query: ns=${ns} batchSize=0Tree: $and\n    _id $eq 1\n    n $eq "x"\nSort: {}\nProj: {}\n`
    + `Collation: { locale: "en" }\n${HINT}`);
});

// The same rendering heads get_executor's refusal of a tailable cursor on a collection that is not capped
// (as the Go driver's integration test expects it from mongod: "...Tree: $and\nSort: {}\nProj: {}\n tailable ...").
h.test('a tailable find on a collection that is not capped: 2 "error processing query: <canonical query> tailable cursor requested on non capped collection"', async () => {
  const db = srv.freshDb('ie_tail');
  await db.collection('c').insertOne({ a: 1 });
  const ns = `${db.databaseName}.c`;
  await h.expectCode(db.command({ find: 'c', filter: {}, tailable: true }), 2,
    new RegExp(`^error processing query: ns=${ns.replace('.', '\\.')}Tree: \\$and\nSort: \\{\\}\nProj: \\{\\}\n tailable cursor requested on non capped collection$`));
  const e = await failure(db.command({ find: 'c', filter: { a: { $gt: 0 } }, tailable: true, batchSize: 5 }));
  assert.equal(e.message, `error processing query: ns=${ns} batchSize=5Tree: a $gt 0\nSort: {}\nProj: {}\n tailable cursor requested on non capped collection`);
});

h.test('count, distinct, aggregate, findAndModify, update and delete with a bad hint: the same 2, each with its own query', async () => {
  const db = srv.freshDb('ie_hint_cmds');
  const c = db.collection('c');
  await c.insertOne({ a: 1 });
  const ns = `${db.databaseName}.c`;
  const tree = 'Tree: a $eq 1\n';
  // parseFromCount: limit made positive, skip kept.
  let e = await failure(db.command({ count: 'c', query: { a: 1 }, hint: 'zz', limit: -2, skip: 1 }));
  assert.equal(e.code, 2);
  assert.equal(e.message, `error processing query: ns=${ns} limit=2 skip=1${tree}Sort: {}\nProj: {}\n${HINT}`);
  // getDistinctProjection: {_id: 0, key: 1}; the key cut before a numeric component; _id alone.
  e = await failure(c.distinct('a', { a: 1 }, { hint: 'zz' }));
  assert.equal(e.message, `error processing query: ns=${ns}${tree}Sort: {}\nProj: { _id: 0, a: 1 }\n${HINT}`);
  e = await failure(c.distinct('p.q.2.r', { a: 1 }, { hint: 'zz' }));
  assert.equal(e.message, `error processing query: ns=${ns}${tree}Sort: {}\nProj: { _id: 0, p.q: 1 }\n${HINT}`);
  e = await failure(c.distinct('_id', { a: 1 }, { hint: 'zz' }));
  assert.equal(e.message, `error processing query: ns=${ns}${tree}Sort: {}\nProj: { _id: 1 }\n${HINT}`);
  e = await failure(c.aggregate([{ $match: { a: 1 } }], { hint: 'zz' }).toArray());
  assert.equal(e.message, `error processing query: ns=${ns}${tree}Sort: {}\nProj: {}\n${HINT}`);
  // A findAndModify with a sort is a limit 1 query; its fields are the projection.
  e = await failure(c.findOneAndUpdate({ a: 1 }, { $set: { b: 1 } }, { hint: 'zz', sort: { a: 1 }, projection: { b: 1 } }));
  assert.equal(e.message, `error processing query: ns=${ns} limit=1${tree}Sort: { a: 1 }\nProj: { b: 1 }\n${HINT}`);
  for (const p of [c.updateOne({ a: 1 }, { $set: { b: 1 } }, { hint: 'zz' }), c.deleteOne({ a: 1 }, { hint: 'zz' })]) {
    e = await failure(p);
    assert.equal(e.code, 2);
    assert.equal(e.message, `error processing query: ns=${ns}${tree}Sort: {}\nProj: {}\n${HINT}`);
  }
  // A hidden index cannot be hinted either; the documents are untouched.
  await c.createIndex({ a: 1 }, { hidden: true });
  e = await failure(c.find({ a: 1 }).hint('a_1').toArray());
  assert.equal(e.message, `error processing query: ns=${ns}${tree}Sort: {}\nProj: {}\n${HINT}`);
  assert.deepEqual(await c.find({}, { projection: { _id: 0 } }).toArray(), [{ a: 1 }]);
});

h.test('the other planner refusals carry the same canonical query: an ambiguous key-pattern hint (27), min/max without a hint (51173)', async () => {
  const db = srv.freshDb('ie_plan_other');
  const c = db.collection('c');
  await c.insertOne({ a: 1 });
  await c.createIndex({ a: 1 }, { name: 'one' });
  await c.createIndex({ a: 1 }, { name: 'two', collation: { locale: 'fr' } });
  const ns = `${db.databaseName}.c`;
  let e = await failure(c.find({ a: 1 }).hint({ a: 1 }).toArray());
  assert.equal(e.code, 27);
  assert.equal(e.message, `error processing query: ns=${ns}Tree: a $eq 1\nSort: {}\nProj: {}\n planner returned error :: caused by :: `
    + "Hint matched multiple indexes, must hint by index name. Matched: kp: { a: 1 } name: 'one' and kp: { a: 1 } name: 'two'");
  e = await failure(db.command({ find: 'c', filter: {}, min: { a: 0 } }));
  assert.equal(e.code, 51173);
  assert.equal(e.message, `error processing query: ns=${ns}Tree: $and\nSort: {}\nProj: {}\n planner returned error :: caused by :: `
    + 'When using min()/max() a hint of which index to use must be provided');
});

// parseAndValidateIndexSpecs: isIdIndexPattern ({_id: n}, n's int value 1 or -1) sends the spec to
// validateIdIndexSpec whatever its name; any other key may not be named _id_.
h.test('createIndexes on {_id: ±1}: only v, key, name, ns, collation (197), exactly {_id: 1} (2); _id_ is reserved (2)', async () => {
  const db = srv.freshDb('ie_idspec');
  await db.collection('c').insertOne({ a: 1 });
  const create = (spec) => db.command({ createIndexes: 'c', indexes: [spec] });
  for (const [opt, val] of [['unique', false], ['unique', true], ['sparse', true], ['hidden', true], ['expireAfterSeconds', 5]]) {
    await h.expectCode(create({ key: { _id: 1 }, name: 'x', [opt]: val }), 197,
      new RegExp(`^The field '${opt}' is not valid for an _id index specification\\. Specification: \\{ key: \\{ _id: 1 \\}, name: "x", ${opt}: ${val}, v: 2 \\}$`));
  }
  await h.expectCode(create({ key: { _id: 1 }, name: 'p', partialFilterExpression: { a: 1 } }), 197,
    /^The field 'partialFilterExpression' is not valid for an _id index specification/);
  await h.expectCode(create({ key: { _id: -1 }, name: '_id_-1' }), 2, /^The field 'key' for an _id index must be \{_id: 1\}, but got \{ _id: -1 \}$/);
  await h.expectCode(create({ key: { _id: 1.5 }, name: 'f' }), 2, /^The field 'key' for an _id index must be \{_id: 1\}, but got \{ _id: 1\.5 \}$/);
  await h.expectCode(create({ key: { _id: -1 }, name: 'u', unique: true }), 197, /^The field 'unique' is not valid for an _id index/);
  await h.expectCode(create({ key: { a: 1 }, name: '_id_' }), 2,
    /^The index name '_id_' is reserved for the _id index, which must have key pattern \{_id: 1\}, found key: \{ a: 1 \}$/);
  await h.expectCode(create({ key: { _id: 'hashed' }, name: '_id_' }), 2, /reserved for the _id index, .* found key: \{ _id: "hashed" \}$/);
  // What passes validateIdIndexSpec: the _id index's own spec (a no-op, its 1 of any number type: key patterns
  // compare as SimpleBSONObjComparator does), another name (the _id_ index's twin: 85), hashed _id.
  assert.equal((await create({ key: { _id: 1 }, name: '_id_', v: 1 })).note, 'all indexes already exist');
  assert.equal((await create({ key: { _id: new Double(1) }, name: '_id_' })).note, 'all indexes already exist');
  await h.expectCode(create({ key: { _id: 1 }, name: 'other' }), 85, /^Index already exists with a different name: _id_$/);
  await create({ key: { _id: 'hashed' }, name: 'h' });
  assert.deepEqual((await db.collection('c').indexes()).map((i) => i.name), ['_id_', 'h']);
});

// validateIndexSpec checks every key pattern by the latest (v:2) rules, whatever the spec's v.
h.test('a v: 1 spec is still checked by the v: 2 key pattern rules: 0, -0.0, NaN, "" and other strings, bool, null, objects are 67', async () => {
  const db = srv.freshDb('ie_v1');
  await db.collection('c').insertOne({ a: 1 });
  const create = (key) => db.command({ createIndexes: 'c', indexes: [{ key, name: 'k', v: 1 }] });
  const cases = [
    [{ b: 0 }, /caused by :: Values in the index key pattern cannot be 0\.$/],
    [{ b: new Double(-0) }, /caused by :: Values in the index key pattern cannot be 0\.$/],
    [{ b: NaN }, /caused by :: Values in the index key pattern cannot be NaN\.$/],
    [{ b: '' }, /caused by :: Values in the index key pattern cannot be empty strings$/],
    [{ b: 'foo' }, /caused by :: Unknown index plugin 'foo'$/],
    [{ b: true }, /caused by :: Values in v:2 index key pattern cannot be of type bool\. Only numbers > 0, numbers < 0, and strings are allowed\.$/],
    [{ b: null }, /cannot be of type null\./],
    [{ b: {} }, /cannot be of type object\./],
  ];
  for (const [key, re] of cases) await h.expectCode(create(key), 67, re);
  await db.command({ createIndexes: 'c', indexes: [{ key: { b: -1 }, name: 'k', v: 1 }] });
  assert.equal((await db.collection('c').indexes()).find((i) => i.name === 'k').v, 1);
});

// findIndexesByKeyPattern and compareIndexOptions compare key patterns by value: {a: 1.0} and {a: NumberLong(1)} are {a: 1}.
h.test('a key pattern whose numbers are of another type is the same index: a no-op under its name, 85 under another', async () => {
  const db = srv.freshDb('ie_kpnum');
  await db.collection('c').insertOne({ a: 1 });
  const create = (spec) => db.command({ createIndexes: 'c', indexes: [spec] });
  await create({ key: { a: 1, b: -1 }, name: 'ab' });
  assert.equal((await create({ key: { a: new Double(1), b: Long.fromNumber(-1) }, name: 'ab' })).note, 'all indexes already exist');
  await h.expectCode(create({ key: { a: Long.fromNumber(1), b: -1 }, name: 'other' }), 85, /^Index already exists with a different name: ab$/);
  // A different value or order is another index.
  await create({ key: { a: 1, b: 1 }, name: 'ab2' });
  await create({ key: { b: -1, a: 1 }, name: 'ba' });
  assert.deepEqual((await db.collection('c').indexes()).map((i) => [i.name, i.key]),
    [['_id_', { _id: 1 }], ['ab', { a: 1, b: -1 }], ['ab2', { a: 1, b: 1 }], ['ba', { b: -1, a: 1 }]]);
});

h.test('dropIndexes with a name given twice is 27 for the second, and drops nothing (one write unit in mongod)', async () => {
  const db = srv.freshDb('ie_dropdup');
  const c = db.collection('c');
  await c.insertOne({ a: 1, b: 1 });
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1 });
  await h.expectCode(db.command({ dropIndexes: 'c', index: ['a_1', 'a_1'] }), 27, /^index not found with name \[a_1\]$/);
  await h.expectCode(db.command({ dropIndexes: 'c', index: ['b_1', 'a_1', 'b_1'] }), 27, /^index not found with name \[b_1\]$/);
  // The first bad name decides, in order: a missing one before a repeat.
  await h.expectCode(db.command({ dropIndexes: 'c', index: ['a_1', 'zz', 'a_1'] }), 27, /^index not found with name \[zz\]$/);
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_', 'a_1', 'b_1']);
  const r = await db.command({ dropIndexes: 'c', index: ['a_1', 'b_1'] });
  assert.equal(r.nIndexesWas, 3);
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_']);
});

h.test('$text in a partialFilterExpression is the parser\'s 2 "$text is not allowed in this context", at the top or under $and', async () => {
  const db = srv.freshDb('ie_pftext');
  const c = db.collection('c');
  await c.insertOne({ q: 1 });
  for (const pf of [{ $text: { $search: 'x' } }, { $and: [{ $text: { $search: 'x' } }] }, { q: 1, $text: { $search: 'x' } }]) {
    await h.expectCode(c.createIndex({ q: 1 }, { name: 'pt', partialFilterExpression: pf }), 2,
      /^Error in specification \{ .*partialFilterExpression: .* :: caused by :: \$text is not allowed in this context$/);
  }
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_']);
});

async function logged3216000(admin) {
  const g = await admin.command({ getLog: 'global' });
  return g.log.map((l) => JSON.parse(l)).filter((l) => l.id === 3216000);
}

// json_schema_parser.cpp: requiredMissingID = parsing a collection validator && empty path && !required.contains("_id");
// a patternProperties pattern matching "_id" clears it; additionalProperties: false then logs 3216000.
h.test('a validator $jsonSchema with additionalProperties: false and no _id in required logs warning 3216000 (getLog), and rejects every document', async () => {
  const db = srv.freshDb('ie_3216000');
  const admin = srv.client.db('admin');
  const before = (await logged3216000(admin)).length;
  let n0;
  await db.createCollection('closed', { validator: { $jsonSchema: { properties: { a: {} }, required: ['a'], additionalProperties: false } } });
  const lines = await logged3216000(admin);
  assert.ok(lines.length > before, 'warning 3216000 logged');
  const l = lines[lines.length - 1];
  assert.equal(l.s, 'W');
  assert.equal(l.c, 'QUERY');
  assert.equal(l.msg, "$jsonSchema validator does not allow '_id' field. This validator will reject all documents, consider adding '_id' to the allowed fields.");
  assert.match(l.ctx, /^conn\d+$/);
  // Only a warning: the collection exists, and its validator refuses every document (each has an _id).
  await h.expectCode(db.collection('closed').insertOne({ a: 1 }), 121);
  // The check reads 'required' only: _id allowed by 'properties' but not required still warns (and documents pass).
  n0 = (await logged3216000(admin)).length;
  await db.createCollection('open', { validator: { $jsonSchema: { properties: { _id: {}, a: {} }, required: ['a'], additionalProperties: false } } });
  assert.ok((await logged3216000(admin)).length > n0);
  await db.collection('open').insertOne({ a: 1 });
  // No warning for: _id required, a pattern matching _id, additionalProperties true or a schema, a nested schema, a query.
  const quiet = [
    { required: ['_id', 'a'], properties: { _id: {}, a: {} }, additionalProperties: false },
    { patternProperties: { '_.*': {} }, additionalProperties: false },
    { additionalProperties: true },
    { additionalProperties: { bsonType: 'int' } },
    { properties: { sub: { additionalProperties: false } } },
  ];
  let n = (await logged3216000(admin)).length;
  for (const [i, schema] of quiet.entries()) await db.createCollection(`q${i}`, { validator: { $jsonSchema: schema } });
  // A pattern must match "_id" whole (ANCHORED | ENDANCHORED): '^_' does not, so that one warns.
  await db.createCollection('prefix', { validator: { $jsonSchema: { patternProperties: { '^_': {} }, additionalProperties: false } } });
  assert.ok((await logged3216000(admin)).length > n);
  n = (await logged3216000(admin)).length;
  await db.collection('q0').find({ $jsonSchema: { additionalProperties: false } }).toArray();
  assert.equal((await logged3216000(admin)).length, n);
  await db.collection('q0').insertOne({ _id: 1, a: 1 });
  // A top-level allOf / not keeps the document's path: warned; collMod warns as create does.
  await db.createCollection('allof', { validator: { $jsonSchema: { allOf: [{ additionalProperties: false }] } } });
  assert.ok((await logged3216000(admin)).length > n);
  n = (await logged3216000(admin)).length;
  await db.command({ collMod: 'q2', validator: { $jsonSchema: { additionalProperties: false } } });
  assert.ok((await logged3216000(admin)).length > n);
});

// 8.0's ValidationAction enum is error and warn; errorAndLog came with 8.1.
h.test('validationAction "errorAndLog" is refused as an unknown enum value (2) by create and collMod', async () => {
  const db = srv.freshDb('ie_errlog');
  await h.expectCode(db.createCollection('v', { validator: { a: 1 }, validationAction: 'errorAndLog' }), 2,
    /^Enumeration value 'errorAndLog' for field 'create\.validationAction' is not a valid value\.$/);
  await db.createCollection('w', { validator: { a: 1 } });
  await h.expectCode(db.command({ collMod: 'w', validationAction: 'errorAndLog' }), 2,
    /^Enumeration value 'errorAndLog' for field 'collMod\.validationAction' is not a valid value\.$/);
  const info = (await db.listCollections({ name: 'w' }).toArray())[0];
  assert.equal(info.options.validationAction, undefined);
  assert.equal(await db.listCollections({ name: 'v' }).toArray().then((l) => l.length), 0);
  await db.command({ collMod: 'w', validationAction: 'warn' });
});
