'use strict';
/*
 * $lookup, $graphLookup, $unionWith, $out, $merge and views as applications
 * meet them (Node driver, raw commands, mongosh), checked against MongoDB
 * 8.0's source, cited per test: the stages' parse errors
 * (document_source_lookup.cpp, document_source_graph_lookup.cpp,
 * document_source_merge.cpp, document_source_merge_spec.cpp), $lookup's
 * localField join, the $out / $merge target checks and $merge's mode
 * pairs, 'let' and unique-index rules (document_source_out.cpp,
 * merge_processor.cpp, process interface supportsUniqueKey), and views:
 * create / collMod validation and replies (create_command.cpp,
 * create_collection.cpp, collection_catalog.cpp,
 * view_catalog_helpers.cpp, drop_collection.cpp), explain of reads on views.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function agg(db, coll, pipeline, opts = {}) {
  const r = await db.command({ aggregate: coll, pipeline, cursor: {}, ...opts });
  return r.cursor.firstBatch;
}

h.test('$out refuses system collections (17385) and the admin, config and local databases (31321), as mongod', async () => {
  const db = srv.freshDb('lv_outns');
  await db.collection('s').insertMany([{ _id: 1 }, { _id: 2 }]);
  await h.expectCode(agg(db, 's', [{ $out: 'system.foo' }]), 17385, /^Can't \$out to special collection: system\.foo$/);
  for (const target of ['admin', 'config', 'local']) {
    const dbName = target;
    await h.expectCode(agg(db, 's', [{ $out: { db: dbName, coll: 'lv_out_x' } }]), 31321,
      new RegExp(`^Can't \\$out to internal database: ${dbName}$`));
    assert.equal(await srv.client.db(dbName).collection('lv_out_x').countDocuments(), 0, dbName);
  }
  // An invalid collection name reads as document_source_out.cpp's isValid() check.
  await h.expectCode(agg(db, 's', [{ $out: 'a$b' }]), 73, new RegExp(`^Invalid \\$out target namespace, ${db.databaseName}\\.a\\$b$`));
  // Through mongosh, as a shell user writes it.
  const out = await h.mongosh(srv.port, db.databaseName,
    `try { db.s.aggregate([{$out: {db: 'admin', coll: 'x'}}]); print('no error') } catch (e) { print(e.code + ' ' + e.codeName) }`);
  assert.equal(out, '31321 Location31321');
  // An ordinary target still works.
  await agg(db, 's', [{ $out: 'fine' }]);
  assert.equal(await db.collection('fine').countDocuments(), 2);
});

h.test('$merge refuses system collections (31319) and the admin, config and local databases (31320), as mongod', async () => {
  const db = srv.freshDb('lv_mergens');
  await db.collection('s').insertMany([{ _id: 1 }, { _id: 2 }]);
  await h.expectCode(agg(db, 's', [{ $merge: 'system.x' }]), 31319, /^Cannot \$merge to special collection: system\.x$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 'system.js' } }]), 31319);
  for (const dbName of ['admin', 'config', 'local']) {
    await h.expectCode(agg(db, 's', [{ $merge: { into: { db: dbName, coll: 'lv_merge_x' } } }]), 31320,
      new RegExp(`^Cannot \\$merge to internal database: ${dbName}$`));
    assert.equal(await srv.client.db(dbName).collection('lv_merge_x').countDocuments(), 0, dbName);
  }
  await h.expectCode(agg(db, 's', [{ $merge: { into: 'a$b' } }]), 73,
    new RegExp(`^Invalid \\$merge target namespace: '${db.databaseName}\\.a\\$b'$`));
  // Through the driver's aggregate cursor.
  const e = await db.collection('s').aggregate([{ $merge: { into: { db: 'admin', coll: 'y' } } }]).toArray().then(() => null, (x) => x);
  assert.equal(e && e.code, 31320);
  assert.equal(e.codeName, 'Location31320');
});

h.test('$merge mode combinations merge_processor.cpp has no strategy for are 51181; every supported one still runs', async () => {
  const db = srv.freshDb('lv_mergemodes');
  await db.collection('s').insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
  for (const [wm, wnm] of [['keepExisting', 'fail'], ['keepExisting', 'discard'], ['fail', 'fail'], ['fail', 'discard']]) {
    await h.expectCode(agg(db, 's', [{ $merge: { into: 't', whenMatched: wm, whenNotMatched: wnm } }]), 51181,
      new RegExp(`^Combination of \\$merge modes 'whenMatched: ${wm}' and 'whenNotMatched: ${wnm}' is not supported$`));
  }
  // Nothing was written by the refused combinations (the target does not even exist).
  assert.equal((await db.listCollections({ name: 't' }).toArray()).length, 0);
  const expected = {
    'replace/insert': [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'replace/discard': [{ _id: 1, v: 'a' }, { _id: 5 }],
    'merge/insert': [{ _id: 1, w: 'old', v: 'a' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'merge/discard': [{ _id: 1, w: 'old', v: 'a' }, { _id: 5 }],
    'keepExisting/insert': [{ _id: 1, w: 'old' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'pipeline/insert': [{ _id: 1, w: 'old', z: 'a' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'pipeline/discard': [{ _id: 1, w: 'old', z: 'a' }, { _id: 5 }],
  };
  for (const [key, want] of Object.entries(expected)) {
    const [wm, wnm] = key.split('/');
    await db.collection('t').deleteMany({});
    await db.collection('t').insertMany([{ _id: 1, w: 'old' }, { _id: 5 }]);
    const whenMatched = wm === 'pipeline' ? [{ $set: { z: '$$new.v' } }] : wm;
    await agg(db, 's', [{ $merge: { into: 't', whenMatched, whenNotMatched: wnm } }]);
    assert.deepEqual(await db.collection('t').find().sort({ _id: 1 }).toArray(), want, key);
  }
  // whenNotMatched fail with a source document that has no match: 13113, as before.
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', whenMatched: 'replace', whenNotMatched: 'fail' } }]), 13113);
});

h.test('$merge takes let only with a whenMatched pipeline (51199), and "new" only as $$ROOT (51273)', async () => {
  const db = srv.freshDb('lv_mergelet');
  await db.collection('s').insertMany([{ _id: 1, v: 'a' }]);
  await db.collection('t').insertOne({ _id: 1, w: 'old' });
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { x: 1 } } }]), 51199,
    /^Cannot use 'let' variables with 'whenMatched: merge' mode$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { x: 1 }, whenMatched: 'replace' } }]), 51199,
    /^Cannot use 'let' variables with 'whenMatched: replace' mode$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { new: 1 }, whenMatched: [{ $set: { a: '$$new' } }] } }]), 51273,
    /^'let' may not define a value for the reserved 'new' variable other than '\$\$ROOT'$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { new: '$v' }, whenMatched: [{ $set: { a: '$$new' } }] } }]), 51273);
  // The target is untouched by the refused stages.
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 1, w: 'old' }]);
  // new: "$$ROOT" spelled out, beside another variable, is accepted.
  await agg(db, 's', [{ $merge: { into: 't', let: { new: '$$ROOT', y: '$v' }, whenMatched: [{ $set: { a: '$$new.v', b: '$$y' } }] } }]);
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 1, w: 'old', a: 'a', b: 'a' }]);
});

h.test('a view cannot be called system.views: 73 "Cannot create a view called ..." (create and createView)', async () => {
  const db = srv.freshDb('lv_sysviews');
  await db.collection('s').insertOne({ _id: 1 });
  await h.expectCode(db.command({ create: 'system.views', viewOn: 's', pipeline: [] }), 73,
    /^Cannot create a view called 'system\.views': this is a reserved system namespace$/);
  await h.expectCode(db.createCollection('system.views', { viewOn: 's' }), 73);
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => `${c.name}:${c.type}`);
  assert.deepEqual(names, ['s:collection']);
  // An ordinary view next to it is fine.
  await db.command({ create: 'v', viewOn: 's', pipeline: [] });
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 1 }]);
});

/*
 * The local values of a localField join are document_path_support's
 * visitAllValuesAtPath: array elements that lack the field add nothing, and
 * only a path with no value at all joins as null (document_source_lookup.cpp
 * makeMatchStageFromInput; cases from jstests/aggregation/sources/lookup/
 * lookup_equijoin_semantics.js testMatchingMissingOnPath and friends).
 */
h.test('$lookup localField: a path missing in some array elements joins on the values present, not also on null', async () => {
  const db = srv.freshDb('lv_lkmissing');
  const local = db.collection('local');
  await local.insertMany([
    { _id: 0, a: { no_x: 1 } }, { _id: 1, a: { no_x: [1, 2] } }, { _id: 2, a: [{ no_x: 1 }, { no_x: 2 }] },
    { _id: 3, a: [{ no_x: 2 }, { x: 1 }] }, { _id: 4, a: [{ no_x: [1, 2] }, { x: 1 }] }, { _id: 5, a: { x: null } },
    { _id: 6, a: [{ x: null }, { x: 1 }] }, { _id: 7, a: [{ x: null }, { x: [1] }] }, { _id: 8, no_a: 1 },
    { _id: 9, a: [1] }, { _id: 10, a: [] }, { _id: 11, a: [[1]] }, { _id: 12, a: [[]] },
    { _id: 20, a: { x: 2, y: 1 } }, { _id: 21, a: [{ x: 2 }, { x: 3 }] },
  ]);
  const matchedIds = async () => (await local.aggregate([
    { $lookup: { from: 'foreign', localField: 'a.x', foreignField: 'b', as: 'm' } },
  ]).toArray()).filter((d) => d.m.length > 0).map((d) => d._id).sort((x, y) => x - y);
  await db.collection('foreign').insertOne({ _id: 0, b: null });
  assert.deepEqual(await matchedIds(), [0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12]);
  await db.collection('foreign').deleteMany({});
  await db.collection('foreign').insertOne({ _id: 0, no_b: 1 });
  assert.deepEqual(await matchedIds(), [0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12]);

  // A numeric path component: a.0.x of [{x: 1}, {y: 1}] is 1 only (testMatchingPathWithNumericComponentToNull).
  await db.collection('l2').insertMany([
    { _id: 0, a: { x: 1 } }, { _id: 3, a: [{ x: null }, { x: 1 }] }, { _id: 5, a: [1, 2] },
    { _id: 10, a: [{ x: 1 }, { y: 1 }] }, { _id: 11, a: [{ x: [1, 2] }] },
  ]);
  await db.collection('f2').insertOne({ _id: 0, b: null });
  const r = await db.collection('l2').aggregate([
    { $lookup: { from: 'f2', localField: 'a.0.x', foreignField: 'b', as: 'm' } },
  ]).toArray();
  assert.deepEqual(r.filter((d) => d.m.length > 0).map((d) => d._id).sort((x, y) => x - y), [0, 3, 5]);

  // A partly missing path still joins on the value it has.
  await db.collection('l3').insertOne({ _id: 1, a: [{ b: 1 }, { c: 2 }] });
  await db.collection('f3').insertMany([{ _id: 1, y: 1 }, { _id: 2, y: null }, { _id: 3 }]);
  const r3 = await db.collection('l3').aggregate([
    { $lookup: { from: 'f3', localField: 'a.b', foreignField: 'y', as: 'm' } }, { $project: { m: '$m._id' } },
  ]).toArray();
  assert.deepEqual(r3, [{ _id: 1, m: [1] }]);
});

h.test('$lookup localField: a regular expression joins only an equal regular expression, never by pattern', async () => {
  const db = srv.freshDb('lv_lkregex');
  await db.collection('f').insertMany([{ _id: 1, y: 1 }, { _id: 4, y: /^a/ }, { _id: 5, y: 'abc' }, { _id: 6, y: /^a/i }]);
  await db.collection('l').insertMany([{ _id: 1, r: /^a/ }, { _id: 2, r: [/^a/, 1] }, { _id: 3, r: 'abc' }]);
  const r = await db.collection('l').aggregate([
    { $lookup: { from: 'f', localField: 'r', foreignField: 'y', as: 'm' } },
    { $project: { m: { $sortArray: { input: '$m._id', sortBy: 1 } } } }, { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(r, [{ _id: 1, m: [4] }, { _id: 2, m: [1, 4] }, { _id: 3, m: [5] }]);
});

h.test('$lookup with localField / foreignField over a $documents pipeline: with and without from, the join follows $documents', async () => {
  const db = srv.freshDb('lv_lkdocs');
  const locations = db.collection('locations');
  await locations.insertMany([{ _id: 1, zip: 94301 }, { _id: 2, zip: 10019 }, { _id: 3, zip: 1 }]);
  const docs = [{ zip_id: 94301, name: 'Palo Alto, CA' }, { zip_id: 10019, name: 'New York, NY' }];
  // The manual's example: no 'from', the pipeline starts with $documents.
  const r = await locations.aggregate([
    { $lookup: { localField: 'zip', foreignField: 'zip_id', as: 'city_state', pipeline: [{ $documents: docs }] } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(r, [
    { _id: 1, zip: 94301, city_state: [{ zip_id: 94301, name: 'Palo Alto, CA' }] },
    { _id: 2, zip: 10019, city_state: [{ zip_id: 10019, name: 'New York, NY' }] },
    { _id: 3, zip: 1, city_state: [] },
  ]);
  // Stages after $documents run on the joined documents only; with a 'from' the $documents still supplies them.
  for (const from of [undefined, 'unused']) {
    const spec = { localField: 'zip', foreignField: 'zip_id', as: 'cs', pipeline: [{ $documents: docs }, { $project: { _id: 0, name: 1 } }] };
    if (from) spec.from = from;
    const r2 = await locations.aggregate([{ $lookup: spec }, { $sort: { _id: 1 } }, { $project: { cs: 1 } }]).toArray();
    assert.deepEqual(r2, [{ _id: 1, cs: [{ name: 'Palo Alto, CA' }] }, { _id: 2, cs: [{ name: 'New York, NY' }] }, { _id: 3, cs: [] }], String(from));
  }
});

/*
 * $lookup's parse errors, in mongod's order: LiteParsed::parse first (the
 * spec object, 'from' or the $documents pipeline that replaces it, the
 * pipeline's shape), then createFromBson's argument loop
 * (document_source_lookup.cpp).
 */
h.test('$lookup parse errors carry mongod\'s codes and messages', async () => {
  const db = srv.freshDb('lv_lkparse');
  await db.collection('a').insertOne({ _id: 1, x: 1 });
  const lk = (spec) => agg(db, 'a', [{ $lookup: spec }]);
  await h.expectCode(agg(db, 'a', [{ $lookup: 1 }]), 9, /^the \$lookup stage specification must be an object, but found int$/);
  await h.expectCode(lk({ from: 1, localField: 'x', foreignField: 'y', as: 'r' }), 9,
    /^\$lookup 'from' field must be a string, but found int$/);
  await h.expectCode(lk({ from: { db: db.databaseName, coll: 'b' }, localField: 'x', foreignField: 'y', as: 'r' }), 9,
    new RegExp(`^\\$lookup with syntax \\{from: \\{db:<>, coll:<>\\},..\\} is not supported for db: ${db.databaseName} and coll: b$`));
  await h.expectCode(lk({ localField: 'x', foreignField: 'y', as: 'r' }), 9, /^must specify 'pipeline' when 'from' is empty$/);
  await h.expectCode(lk({ pipeline: [{ $match: {} }], as: 'r' }), 9,
    /^\$lookup stage without explicit collection must have a pipeline with \$documents as first stage$/);
  await h.expectCode(lk({ from: 'b', pipeline: 1, as: 'r' }), 14, /^'pipeline' option must be specified as an array$/);
  await h.expectCode(lk({ from: 'b', pipeline: [1], as: 'r' }), 14, /^Each element of the 'pipeline' array must be an object$/);
  await h.expectCode(lk({ from: 'b', let: 1, pipeline: [], as: 'r' }), 9, /^\$lookup argument 'let: 1' must be an object, is type int$/);
  await h.expectCode(lk({ from: 'b', localField: 'x', foreignField: 1, as: 'r' }), 9,
    /^\$lookup argument 'foreignField' must be a string, found foreignField: 1: int$/);
  await h.expectCode(lk({ from: 'b', localField: 'x', foreignField: 'y', as: { a: 'x' } }), 9,
    /^\$lookup argument 'as' must be a string, found as: \{ a: "x" \}: object$/);
  // An unknown argument is first checked as a string argument, then named.
  await h.expectCode(lk({ from: 'b', localField: 'x', foreignField: 'y', as: 'r', foo: 1 }), 9,
    /^\$lookup argument 'foo' must be a string, found foo: 1: int$/);
  await h.expectCode(lk({ from: 'b', localField: 'x', foreignField: 'y', as: 'r', foo: 'z' }), 9, /^unknown argument to \$lookup: foo$/);
  // Through mongosh.
  const out = await h.mongosh(srv.port, db.databaseName,
    `try { db.a.aggregate([{$lookup: {from: 7, as: 'r', localField: 'x', foreignField: 'y'}}]).toArray(); print('no error') } catch (e) { print(e.code + ' ' + e.message) }`);
  assert.equal(out, "9 $lookup 'from' field must be a string, but found int");
});

/*
 * $merge's spec as document_source_merge_spec.cpp parses it ('on', and
 * 'whenMatched' with an IDL context of its own) and as createFromBson takes
 * the 'on' fields (convertToFieldPaths: FieldPath, 31465), before looking for
 * the unique index (51183).
 */
h.test('$merge spec errors: on fields (51134, 51186, 31465, FieldPath) and whenMatched (51191, the enum) as mongod words them', async () => {
  const db = srv.freshDb('lv_mergespec');
  await db.collection('s').insertOne({ _id: 1, k: 1 });
  const m = (spec) => agg(db, 's', [{ $merge: { into: 't', ...spec } }]);
  // LiteParsed::parse sees a spec of another type first: 14, not createFromBson's 51182.
  await h.expectCode(agg(db, 's', [{ $merge: 1 }]), 14, /^\$merge requires a string or object argument, but found int$/);
  await h.expectCode(m({ on: ['k', 'k'] }), 31465, /^Found a duplicate field 'k'$/);
  await h.expectCode(m({ on: '$k' }), 16410);
  await h.expectCode(m({ on: [1] }), 51134, /^\$merge 'on' array elements must be strings, but found int$/);
  await h.expectCode(m({ on: 1 }), 51186, /^\$merge 'on' field {2}must be either a string or an array of strings, but found int$/);
  await h.expectCode(m({ whenMatched: 1 }), 51191, /^\$merge 'whenMatched' field {2}must be either a string or an array, but found int$/);
  await h.expectCode(m({ whenMatched: 'upsert' }), 2, /^Enumeration value 'upsert' for field 'whenMatched' is not a valid value\.$/);
  await h.expectCode(m({ whenMatched: 'pipeline' }), 2, /^Enumeration value 'pipeline' for field 'whenMatched' is not a valid value\.$/);
  await h.expectCode(m({ whenNotMatched: 'upsert' }), 2, /^Enumeration value 'upsert' for field '\$merge\.whenNotMatched' is not a valid value\.$/);
  assert.equal((await db.listCollections({ name: 't' }).toArray()).length, 0);
});

/*
 * $graphLookup's maxDepth goes through BSONElement::safeNumberLong (a double
 * truncated, NaN 0) before 40101 / 40102 report that value; a bad
 * restrictSearchWithMatch carries the option's context
 * (document_source_graph_lookup.cpp createFromBson).
 */
h.test('$graphLookup maxDepth errors report safeNumberLong\'s value; restrictSearchWithMatch parse errors carry their context', async () => {
  const db = srv.freshDb('lv_graph');
  await db.collection('e').insertMany([{ _id: 1, n: 'a', r: 'b' }, { _id: 2, n: 'b', r: 'c' }, { _id: 3, n: 'c' }]);
  const g = (o) => agg(db, 'e', [{ $match: { _id: 1 } },
    { $graphLookup: { from: 'e', startWith: '$r', connectFromField: 'r', connectToField: 'n', as: 'g', ...o } },
    { $project: { g: { $sortArray: { input: '$g._id', sortBy: 1 } } } }]);
  await h.expectCode(g({ maxDepth: 1.5 }), 40102, /^maxDepth could not be represented as a long long: 1$/);
  await h.expectCode(g({ maxDepth: -0.5 }), 40102, /^maxDepth could not be represented as a long long: 0$/);
  await h.expectCode(g({ maxDepth: NaN }), 40102, /^maxDepth could not be represented as a long long: 0$/);
  await h.expectCode(g({ maxDepth: -1 }), 40101, /^maxDepth requires a nonnegative argument, found: -1$/);
  assert.deepEqual(await g({ maxDepth: 0 }), [{ _id: 1, g: [2] }]);
  assert.deepEqual(await g({ maxDepth: 2.0 }), [{ _id: 1, g: [2, 3] }]);
  await h.expectCode(g({ restrictSearchWithMatch: { a: { $foo: 1 } } }), 2,
    /^Failed to parse 'restrictSearchWithMatch' option to \$graphLookup :: caused by :: unknown operator: \$foo$/);
  await h.expectCode(g({ restrictSearchWithMatch: { $where: 'true' } }), 2,
    /^Failed to parse 'restrictSearchWithMatch' option to \$graphLookup :: caused by :: \$where is not allowed in this context$/);
});

/*
 * queryPlanner.collation: the full spec of the collation a query runs
 * under, right after parsedQuery, when it is not the simple one
 * (plan_explainer's generatePlannerInfo); a view's default collation is the
 * one its reads run under (jstests/core/views/views_collation.js).
 */
h.test('explain shows queryPlanner.collation for a view\'s default collation and an explicit one, none for simple', async () => {
  const db = srv.freshDb('lv_explcoll');
  await db.command({ create: 'case_sensitive_coll' });
  await db.command({ create: 'case_insensitive_view', viewOn: 'case_sensitive_coll', collation: { locale: 'en', strength: 1 } });
  await db.collection('case_sensitive_coll').insertMany([{ f: 'case' }, { f: 'Case' }, { f: 'CASE' }]);
  assert.equal((await db.command({ find: 'case_insensitive_view', filter: { f: 'case' } })).cursor.firstBatch.length, 3);
  let ex = await db.command({ explain: { find: 'case_insensitive_view', filter: { f: 'case' } } });
  assert.equal(ex.queryPlanner.collation.strength, 1, JSON.stringify(ex.queryPlanner));
  assert.equal(ex.queryPlanner.collation.locale, 'en');
  assert.deepEqual(Object.keys(ex.queryPlanner).slice(0, 4), ['namespace', 'parsedQuery', 'collation', 'indexFilterSet']);
  ex = await db.collection('case_insensitive_view').aggregate([{ $match: { f: 'case' } }]).explain();
  assert.equal(ex.queryPlanner.collation.strength, 1, JSON.stringify(ex.queryPlanner));
  ex = await db.command({ explain: { find: 'case_sensitive_coll', filter: { f: 'case' }, collation: { locale: 'fr', strength: 2 } } });
  assert.deepEqual(ex.queryPlanner.collation, {
    locale: 'fr', caseLevel: false, caseFirst: 'off', strength: 2, numericOrdering: false, alternate: 'non-ignorable',
    maxVariable: 'punct', normalization: false, backwards: false, version: '57.1',
  });
  ex = await db.command({ explain: { find: 'case_sensitive_coll', filter: { f: 'case' } } });
  assert.equal(ex.queryPlanner.collation, undefined);
});

/*
 * create of a name that is already a view: the same definition succeeds;
 * another is 48 naming what differs, in create_command.cpp
 * checkCollectionOptions' order: viewOn, pipeline, collation.
 */
h.test('creating an existing view again: ok when identical, else 48 naming the viewOn, pipeline or collation that differs', async () => {
  const db = srv.freshDb('lv_viewexists');
  const ns = db.databaseName;
  const def = { create: 'v', viewOn: 's', pipeline: [{ $match: { a: 1 } }], collation: { locale: 'fr' } };
  await db.command(def);
  assert.equal((await db.command(def)).ok, 1);
  await h.expectCode(db.command({ ...def, viewOn: 't' }), 48,
    new RegExp(`^namespace ${ns}\\.v already exists, but is a view on ${ns}\\.s rather than ${ns}\\.t$`));
  await h.expectCode(db.command({ create: 'v' }), 48,
    new RegExp(`^namespace ${ns}\\.v already exists, but is a view on ${ns}\\.s rather than ${ns}$`));
  await h.expectCode(db.command({ ...def, pipeline: [] }), 48,
    new RegExp(`^namespace ${ns}\\.v already exists, but with pipeline \\{ 0: \\{ \\$match: \\{ a: 1 \\} \\} \\} rather than \\{\\}$`));
  await h.expectCode(db.command({ ...def, collation: { locale: 'en', strength: 2 } }), 48,
    new RegExp(`^namespace ${ns}\\.v already exists, but with collation: \\{ locale: "fr", caseLevel: false, caseFirst: "off", ` +
      'strength: 3, numericOrdering: false, alternate: "non-ignorable", maxVariable: "punct", normalization: false, ' +
      'backwards: false, version: "57\\.1" \\} rather than \\{ locale: "en", strength: 2 \\}$'));
  await db.command({ create: 'v2', viewOn: 's' });
  await h.expectCode(db.createCollection('v2', { viewOn: 's', collation: { locale: 'fr' } }), 48,
    /already exists, but with collation: \{\} rather than \{ locale: "fr" \}$/);
  // The simple collation spelled out is the view's own (no collation).
  assert.equal((await db.command({ create: 'v2', viewOn: 's', collation: { locale: 'simple' } })).ok, 1);
});

/*
 * $out {timeseries} into a time-series collection with other options: 7406103
 * prints both option sets as BSONObj::toString does (document_source_out.cpp
 * validateTimeseries), not as extended JSON.
 */
h.test('$out with time-series options other than the target\'s: 7406103 prints them as mongod\'s toString', async () => {
  const db = srv.freshDb('lv_outts');
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  await db.collection('s').insertOne({ _id: 1 });
  await h.expectCode(agg(db, 's', [{ $project: { t: '$$NOW' } }, { $out: { db: db.databaseName, coll: 'ts', timeseries: { timeField: 'u' } } }]),
    7406103, new RegExp('^Time-series options inputted must match the existing time-series collection\\. ' +
      'Received: \\{ timeField: "u", granularity: "seconds", bucketMaxSpanSeconds: 3600 \\}' +
      'Found: timeseries: \\{ timeField: "t", granularity: "seconds", bucketMaxSpanSeconds: 3600 \\}$'));
});

/*
 * drop's reply is drop.idl's DropReply in its field order (nIndexesWas, ns);
 * dropping a view sets ns alone (drop_collection.cpp _dropView).
 */
h.test('drop of a view answers {ns, ok} with no nIndexesWas; a collection {nIndexesWas, ns, ok} in that order', async () => {
  const db = srv.freshDb('lv_dropview');
  await db.collection('s').insertOne({ a: 1 });
  await db.collection('s').createIndex({ a: 1 });
  await db.command({ create: 'v', viewOn: 's' });
  const rv = await db.command({ drop: 'v' });
  assert.deepEqual(Object.keys(rv), ['ns', 'ok']);
  assert.equal(rv.ns, `${db.databaseName}.v`);
  const rc = await db.command({ drop: 's' });
  assert.deepEqual(Object.keys(rc), ['nIndexesWas', 'ns', 'ok']);
  assert.equal(rc.nIndexesWas, 2);
  // pymongo / the driver's drop() still report success.
  await db.command({ create: 'v2', viewOn: 's' });
  assert.equal(await db.collection('v2').drop(), true);
  // system.views stays after its last view is dropped, as mongod's (system_views_compat.test.js).
  assert.deepEqual((await db.listCollections().toArray()).map((c) => c.name), ['system.views']);
});

/*
 * A view whose pipeline writes: 167 naming the stage, its position and the
 * view (view_catalog_helpers.cpp validatePipeline), at create and collMod;
 * nested in $lookup it is $lookup's 51047, in $facet 40600
 * (jstests/core/views/views_creation.js).
 */
h.test('a view pipeline with $out / $merge is 167 naming the stage, its location and the view; nested, the nesting stage\'s code', async () => {
  const db = srv.freshDb('lv_viewwrites');
  const ns = db.databaseName;
  await db.collection('s').insertOne({ _id: 1 });
  await h.expectCode(db.command({ create: 'v', viewOn: 's', pipeline: [{ $out: 'x' }] }), 167,
    new RegExp(`^The aggregation stage \\$out in location 0 of the pipeline cannot be used in the view definition of ${ns}\\.v because it writes to disk$`));
  await h.expectCode(db.createCollection('v', { viewOn: 's', pipeline: [{ $match: {} }, { $merge: 'x' }] }), 167,
    new RegExp(`^The aggregation stage \\$merge in location 1 of the pipeline cannot be used in the view definition of ${ns}\\.v because it writes to disk$`));
  await h.expectCode(db.command({ create: 'v', viewOn: 's', pipeline: [{ $lookup: { from: 'o', pipeline: [{ $out: 'x' }], as: 'r' } }] }), 51047,
    /^\$out is not allowed within a \$lookup's sub-pipeline$/);
  // The same in an aggregate (lookupPipeValidator in document_source_lookup.cpp), $merge too.
  await h.expectCode(agg(db, 's', [{ $lookup: { from: 'o', pipeline: [{ $merge: 'x' }], as: 'r' } }]), 51047,
    /^\$merge is not allowed within a \$lookup's sub-pipeline$/);
  await h.expectCode(db.command({ create: 'v', viewOn: 's', pipeline: [{ $facet: { o: [{ $out: 'x' }] } }] }), 40600);
  await db.command({ create: 'w', viewOn: 's' });
  await h.expectCode(db.command({ collMod: 'w', viewOn: 's', pipeline: [{ $out: 'x' }] }), 167,
    new RegExp(`in the view definition of ${ns}\\.w because it writes to disk$`));
  assert.deepEqual((await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort(), ['s', 'system.views', 'w']);
});

/*
 * explain of a count on a view: count_cmd.cpp runs it as the aggregate
 * countCommandAsAggregationCommand builds ($match, $skip, $limit, $count),
 * so it explains that aggregate over the view's collection, with the view's
 * collation under $cursor (jstests/core/views/views_collation.js,
 * getAggPlanStage(explain, "$cursor")).
 */
h.test('explain of a count on a view is the aggregate it runs: the view\'s collection, its real statistics, $cursor with the collation', async () => {
  const db = srv.freshDb('lv_countexpl');
  await db.command({ create: 'case_sensitive_coll' });
  await db.command({ create: 'case_insensitive_view', viewOn: 'case_sensitive_coll', collation: { locale: 'en', strength: 1 } });
  await db.collection('case_sensitive_coll').insertMany([{ f: 'case' }, { f: 'Case' }, { f: 'CASE' }, { f: 'other' }]);
  assert.equal((await db.command({ count: 'case_insensitive_view', query: { f: 'case' } })).n, 3);
  const ex = await db.command({ explain: { count: 'case_insensitive_view', query: { f: 'case' } }, verbosity: 'executionStats' });
  assert.ok(Array.isArray(ex.stages), JSON.stringify(ex).slice(0, 300));
  const cursor = ex.stages[0].$cursor;
  assert.equal(cursor.queryPlanner.namespace, `${db.databaseName}.case_sensitive_coll`);
  assert.equal(cursor.queryPlanner.collation.strength, 1);
  assert.equal(cursor.executionStats.totalDocsExamined, 4);
  // $count explains as the $group + $project it desugars to (DocumentSourceCount::createFromBson).
  const [group, last] = ex.stages.slice(-2);
  assert.deepEqual(group.$group, { _id: { $const: null }, count: { $sum: { $const: 1 } } });
  assert.deepEqual(last.$project, { count: true, _id: false });
  assert.equal(last.nReturned, 1); // executionStats: the stage's own count
  // A collation other than the view's is 167, explained or run.
  await h.expectCode(db.command({ explain: { count: 'case_insensitive_view', collation: { locale: 'fr' } } }), 167);
});

/*
 * $merge 'on' needs a unique, non-partial index on exactly those fields whose
 * collation is the aggregation's (supportsUniqueKey: collatorsMatch(index,
 * expCtx)); otherwise 51183.
 */
h.test('$merge on a field whose unique index has another collation than the aggregation is 51183; with the same collation it merges', async () => {
  const db = srv.freshDb('lv_mergecoll');
  await db.collection('s').insertMany([{ _id: 1, k: 'a', v: 1 }]);
  await db.collection('t').createIndex({ k: 1 }, { unique: true, collation: { locale: 'fr' } });
  await db.collection('t').insertOne({ _id: 9, k: 'a', w: 0 });
  await h.expectCode(agg(db, 's', [{ $project: { _id: 0 } }, { $merge: { into: 't', on: 'k' } }]), 51183,
    /^Cannot find index to verify that join fields will be unique$/);
  await agg(db, 's', [{ $project: { _id: 0 } }, { $merge: { into: 't', on: 'k' } }], { collation: { locale: 'fr' } });
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 9, k: 'a', w: 0, v: 1 }]);
  // A source collection's default collation is the aggregation's.
  await db.createCollection('sfr', { collation: { locale: 'fr' } });
  await db.collection('sfr').insertOne({ k: 'a', v: 2 });
  await agg(db, 'sfr', [{ $project: { _id: 0 } }, { $merge: { into: 't', on: 'k' } }]);
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 9, k: 'a', w: 0, v: 2 }]);
  // A partial unique index does not qualify either.
  await db.collection('tp').createIndex({ k: 1 }, { unique: true, partialFilterExpression: { v: { $gt: 0 } } });
  await h.expectCode(agg(db, 's', [{ $merge: { into: 'tp', on: 'k' } }]), 51183);
});

/*
 * A source document whose 'on' field is an array: 51185 "... is an array"
 * (merge_processor.cpp extractMergeOnFieldsFromDoc checks it before the
 * nullish 51132); missing or null stays 51132.
 */
h.test('$merge with an array in an \'on\' field is 51185; missing or null is 51132', async () => {
  const db = srv.freshDb('lv_mergeonarr');
  await db.collection('t').createIndex({ k: 1 }, { unique: true });
  await db.collection('s').insertOne({ _id: 1, k: [1, 2] });
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', on: 'k' } }]), 51185,
    /\$merge write error: 'on' field 'k' is an array$/);
  await h.expectCode(agg(db, 's', [{ $set: { k: null } }, { $merge: { into: 't', on: 'k' } }]), 51132,
    /\$merge write error: 'on' field 'k' cannot be missing, null, undefined or an array$/);
  await h.expectCode(agg(db, 's', [{ $unset: 'k' }, { $merge: { into: 't', on: 'k' } }]), 51132);
  assert.equal(await db.collection('t').countDocuments(), 0);
});

/* A view on an invalid collection name: 73 "invalid name for 'viewOn': ..." (collection_catalog.cpp createView). */
h.test('a view whose viewOn is not a valid collection name is 73 "invalid name for \'viewOn\'"', async () => {
  const db = srv.freshDb('lv_viewonname');
  await h.expectCode(db.command({ create: 'v', viewOn: 'a$b' }), 73, /^invalid name for 'viewOn': a\$b$/);
  await h.expectCode(db.createCollection('v', { viewOn: '.x', pipeline: [] }), 73, /^invalid name for 'viewOn': \.x$/);
  assert.equal((await db.listCollections().toArray()).length, 0);
  // A dotted name is a valid collection name.
  assert.equal((await db.command({ create: 'v', viewOn: 'a.b' })).ok, 1);
});

/*
 * $graphLookup's LiteParsed::parse answers before createFromBson's 401xx
 * checks: the spec object, a 'from' that is present and a string
 * (document_source_graph_lookup.cpp).
 */
h.test('$graphLookup spec and from errors are LiteParsed::parse\'s FailedToParse, as mongod', async () => {
  const db = srv.freshDb('lv_graphlite');
  await db.collection('e').insertOne({ _id: 1, r: 'a' });
  const g = (spec) => agg(db, 'e', [{ $graphLookup: spec }]);
  await h.expectCode(g(1), 9, /^the \$graphLookup stage specification must be an object, but found int$/);
  await h.expectCode(g({ startWith: '$r', connectFromField: 'r', connectToField: 'n', as: 'g' }), 9,
    /^missing 'from' option to \$graphLookup stage specification: \{ startWith: "\$r", connectFromField: "r", connectToField: "n", as: "g" \}$/);
  await h.expectCode(g({ from: 1, startWith: '$r', connectFromField: 'r', connectToField: 'n', as: 'g' }), 9,
    /^\$graphLookup 'from' field must be a string, but found int$/);
  await h.expectCode(g({ from: { db: db.databaseName, coll: 'e' }, startWith: '$r', connectFromField: 'r', connectToField: 'n', as: 'g' }), 9,
    new RegExp(`^\\$graphLookup with syntax \\{from: \\{db:<>, coll:<>\\},..\\} is not supported for db: ${db.databaseName} and coll: e$`));
  // The other arguments keep createFromBson's codes.
  await h.expectCode(g({ from: 'e', startWith: '$r', connectFromField: 'r', connectToField: 'n', as: 5 }), 40103,
    /^expected string as argument for as, found: int$/);
  await h.expectCode(g({ from: 'e', startWith: '$r', connectToField: 'n', as: 'g' }), 40105);
});

/*
 * A view cannot start from a stage independent of any collection: 73
 * (view_catalog_helpers.cpp validatePipeline: "'$documents' cannot be used
 * in a view definition"; $currentOp fails its own admin-database check
 * first, as view_catalog_test's CreateViewWithPipelineFailsOnCollectionlessStage
 * expects 73 for it). In a $lookup's pipeline $documents stays allowed.
 */
h.test('a view whose pipeline starts with $documents or $currentOp is 73; $documents inside $lookup is fine', async () => {
  const db = srv.freshDb('lv_viewdocs');
  await db.collection('s').insertOne({ _id: 1 });
  await h.expectCode(db.command({ create: 'v', viewOn: 's', pipeline: [{ $documents: [{ a: 1 }] }] }), 73,
    /^'\$documents' cannot be used in a view definition$/);
  await h.expectCode(db.command({ create: 'v', viewOn: 's', pipeline: [{ $currentOp: {} }] }), 73);
  await db.command({ create: 'w', viewOn: 's' });
  await h.expectCode(db.command({ collMod: 'w', viewOn: 's', pipeline: [{ $documents: [] }] }), 73);
  await db.command({ create: 'v', viewOn: 's', pipeline: [{ $lookup: { pipeline: [{ $documents: [{ a: 1 }] }], as: 'r' } }] });
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 1, r: [{ a: 1 }] }]);
});

/*
 * $out writes into "tmp.agg_out." << UUID::gen() (document_source_out.cpp),
 * which its errors name, e.g. a duplicate key in the pipeline's output.
 */
h.test('$out\'s temporary collection is tmp.agg_out.<UUID>, as its duplicate key error shows; none is left behind', async () => {
  const db = srv.freshDb('lv_outtmp');
  await db.collection('s').insertMany([{ _id: 1 }, { _id: 2 }]);
  const e = await agg(db, 's', [{ $project: { _id: { $literal: 1 } } }, { $out: 'dd' }]).then(() => null, (x) => x);
  assert.equal(e && e.code, 11000);
  assert.match(e.message, new RegExp(`collection: ${db.databaseName}\\.tmp\\.agg_out\\.[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12} index: _id_ dup key: \\{ _id: 1 \\}`));
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
  assert.deepEqual(names, ['s']);
});
