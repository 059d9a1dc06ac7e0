'use strict';
/*
 * Index signatures, as MongoDB 8.0 (IndexDescriptor::compareIndexOptions,
 * jstests/core/index_signature.js): an index is its key pattern plus its
 * collation, partialFilterExpression, sparse, unique and
 * wildcardProjection (normalised), so indexes on one key pattern coexist when any of
 * those differ. Parse Server's start-up depends on it: {username: 1}
 * unique + sparse, then {username: 1} with a case-insensitive collation
 * (it stopped with 85 IndexOptionsConflict before). A key pattern then no
 * longer names one index: hint 27, dropIndex 181 and collMod 181 ask for
 * the name. Each index is used by the queries it suits, and all of it
 * survives a restart.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const CI = { locale: 'en_US', strength: 2 };

/* The index name of an explained find's IXSCAN, or null for a collection scan. */
async function indexUsed(c, filter, opts = {}) {
  let cur = c.find(filter);
  if (opts.collation) cur = cur.collation(opts.collation);
  if (opts.hint) cur = cur.hint(opts.hint);
  const find = (p) => (p == null ? null : p.stage === 'IXSCAN' ? p.indexName
    : find(p.inputStage) || (p.inputStages || []).map(find).find(Boolean) || null);
  return find((await cur.explain()).queryPlanner.winningPlan);
}

async function createCode(c, key, opts) {
  try {
    await c.createIndex(key, opts);
    return 0;
  } catch (e) {
    return e.code;
  }
}

h.test('Parse Server\'s _User indexes: {username: 1} unique sparse and {username: 1} case-insensitive both exist, each used by its queries', async () => {
  const c = srv.freshDb('parse').collection('_User');
  assert.equal(await c.createIndex({ username: 1 }, { unique: true, sparse: true }), 'username_1');
  assert.equal(await c.createIndex({ username: 1 }, { name: 'case_insensitive_username', collation: CI }), 'case_insensitive_username');
  assert.equal(await c.createIndex({ email: 1 }, { unique: true, sparse: true }), 'email_1');
  assert.equal(await c.createIndex({ email: 1 }, { name: 'case_insensitive_email', collation: CI }), 'case_insensitive_email');
  const ix = await c.indexes();
  assert.deepEqual(ix.map((i) => i.name), ['_id_', 'username_1', 'case_insensitive_username', 'email_1', 'case_insensitive_email']);
  assert.equal(ix[2].collation.locale, 'en_US');
  assert.equal(ix[2].collation.strength, 2);
  assert.equal(ix[2].unique, undefined);

  await c.insertMany([{ _id: 1, username: 'Alice' }, { _id: 2, username: 'bob' }]);
  /* The unique index still refuses an exact duplicate; the case-insensitive one is not unique. */
  await assert.rejects(c.insertOne({ _id: 3, username: 'Alice' }), (e) => e.code === 11000 && /username_1/.test(e.message));
  await c.insertOne({ _id: 4, username: 'ALICE' });
  assert.deepEqual((await c.find({ username: 'alice' }).collation(CI).sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 4]);
  assert.equal(await indexUsed(c, { username: 'alice' }, { collation: CI }), 'case_insensitive_username');
  assert.equal(await indexUsed(c, { username: 'Alice' }), 'username_1');
  assert.deepEqual((await c.find({ username: 'Alice' }).toArray()).map((d) => d._id), [1]);
  assert.equal(await indexUsed(c, { username: 'alice' }, { collation: CI, hint: 'case_insensitive_username' }), 'case_insensitive_username');

  /* Creating either again, exactly, is a no-op. */
  const again = await c.db.command({ createIndexes: c.collectionName, indexes: [{ key: { username: 1 }, name: 'case_insensitive_username', collation: CI }] });
  assert.equal(again.numIndexesBefore, 5);
  assert.equal(again.numIndexesAfter, 5);
});

h.test('the signature: collation, partialFilterExpression, sparse and unique each make another index; other options conflict (85), a name on another signature 86', async () => {
  const c = srv.freshDb('sig').collection('c');
  assert.equal(await c.createIndex({ a: 1 }), 'a_1');
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_fr', collation: { locale: 'fr' } }), 0);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_p', partialFilterExpression: { b: { $exists: true } } }), 0);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_s', sparse: true }), 0);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_u', unique: true }), 0);
  assert.equal((await c.indexes()).length, 6);
  /* The same signature under another name: 85, whether or not other options differ. */
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_again' }), 85);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_hidden', hidden: true }), 85);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_fr2', collation: { locale: 'fr' } }), 85);
  /* An existing name: its own signature with other options is 85, another signature 86. */
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_fr', collation: { locale: 'fr' }, hidden: true }), 85);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_fr', collation: { locale: 'de' } }), 86);
  assert.equal(await createCode(c, { a: 1 }, { name: 'a_s' }), 86);
  assert.equal((await c.indexes()).length, 6, 'nothing created by the refused ones');
  /* A partial index is used only when the query implies its filter, as before. */
  await c.insertMany([{ _id: 1, a: 1, b: 1 }, { _id: 2, a: 2 }]);
  await assert.rejects(c.insertOne({ _id: 3, a: 1 }), (e) => e.code === 11000 && /a_u/.test(e.message), 'a_u is unique');
  assert.deepEqual((await c.find({ a: { $gte: 1 }, b: { $exists: true } }).hint('a_p').toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ a: { $gte: 1 } }).sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2]);
});

h.test('a key pattern shared by several indexes: hint by key 27, dropIndex by key 181 and collMod by keyPattern 181 ask for the name; by name they work', async () => {
  const db = srv.freshDb('amb');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, x: 'A' }, { _id: 2, x: 'a' }]);
  await c.createIndex({ x: 1 }, { name: 'x_plain' });
  await c.createIndex({ x: 1 }, { name: 'x_ci', collation: CI });
  await assert.rejects(c.find({ x: 'a' }).hint({ x: 1 }).toArray(),
    (e) => e.code === 27 && /Hint matched multiple indexes, must hint by index name/.test(e.message));
  assert.deepEqual((await c.find({ x: 'a' }).hint('x_plain').toArray()).map((d) => d._id), [2]);
  await assert.rejects(c.dropIndex({ x: 1 }),
    (e) => e.code === 181 && e.codeName === 'AmbiguousIndexKeyPattern' && /2 indexes found for key/.test(e.message));
  await assert.rejects(db.command({ collMod: 'c', index: { keyPattern: { x: 1 }, hidden: true } }),
    (e) => e.code === 181 && /matches 2 indexes, must use index name/.test(e.message));
  const mod = await db.command({ collMod: 'c', index: { name: 'x_ci', hidden: true } });
  assert.equal(mod.hidden_new, true);
  /* A hidden index is not one a hint can name, so the key pattern now hints x_plain. */
  assert.deepEqual((await c.find({ x: 'a' }).hint({ x: 1 }).toArray()).map((d) => d._id), [2]);
  await c.dropIndex('x_ci');
  await c.dropIndex({ x: 1 });
  assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_']);
});

for (const kill9 of [false, true]) {
  h.test(`indexes sharing a key pattern survive a ${kill9 ? 'kill -9' : 'clean restart'} and stay distinct`, async () => {
    const name = srv.freshDb(kill9 ? 'k9' : 'clean').databaseName;
    let c = srv.client.db(name).collection('c');
    await c.createIndex({ u: 1 }, { unique: true, sparse: true });
    await c.createIndex({ u: 1 }, { name: 'u_ci', collation: CI });
    await c.insertOne({ _id: 1, u: 'Zed' }, { writeConcern: { w: 1, j: true } });
    await srv.server.restart({ kill9 });
    await srv.reconnect();
    c = srv.client.db(name).collection('c');
    assert.deepEqual((await c.indexes()).map((i) => i.name), ['_id_', 'u_1', 'u_ci']);
    await assert.rejects(c.insertOne({ _id: 2, u: 'Zed' }), (e) => e.code === 11000);
    assert.equal(await indexUsed(c, { u: 'zed' }, { collation: CI }), 'u_ci');
    assert.deepEqual((await c.find({ u: 'zed' }).collation(CI).toArray()).map((d) => d._id), [1]);
  });
}

h.test('wildcard indexes: the wildcardProjection is part of the signature, compared normalised (nested or dotted, any order, _id: 0 the default), as jstests/core/index_signature.js', async () => {
  const db = srv.freshDb('wild');
  await db.createCollection('c');
  const c = db.collection('c');
  const make = async (name, proj) => {
    const before = (await c.indexes()).length;
    try {
      await c.createIndex({ '$**': 1 }, proj ? { name, wildcardProjection: proj } : { name });
    } catch (e) {
      return e.code;
    }
    return (await c.indexes()).length - before === 1 ? 'new' : 'exists';
  };
  assert.equal(await make('wc_all'), 'new');
  assert.equal(await make('wc_a', { a: 1 }), 'new');
  assert.equal(await make('wc_noa', { a: 0 }), 'new');
  assert.equal(await make('wc_a', { _id: 0, a: 1 }), 'exists');
  assert.equal(await make('wc_noid_a', { _id: 0, a: 1 }), 85);
  assert.equal(await make('wc_id_a', { _id: 1, a: 1 }), 'new');
  assert.equal(await make('wc_noa', { _id: 0, a: 0 }), 'exists');
  assert.equal(await make('wc_noid_noa', { _id: 0, a: 0 }), 85);
  assert.equal(await make('wc_noa_id', { a: 0, _id: 1 }), 'new');
  assert.equal(await make('wc_a_sub_b_c', { 'a.b': 1, 'a.c': 1 }), 'new');
  assert.equal(await make('wc_a_sub_b_c', { a: { b: 1, c: 1 } }), 'exists');
  assert.equal(await make('wc_a_sub_b_c_1', { a: { b: 1, c: 1 } }), 85);
  assert.equal(await make('wc_a_sub_b_c', { a: { c: 1, b: 1 } }), 'exists');
  assert.equal(await make('wc_a_sub_b_c_1', { 'a.c': 1, 'a.b': 1 }), 85);
  /* Each is a working index of its own: a hint by name scans its paths only. */
  await c.insertMany([{ _id: 1, a: { b: 5 }, z: 5 }, { _id: 2, z: 5 }]);
  assert.deepEqual((await c.find({ 'a.b': 5 }).hint('wc_a').toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ z: 5 }).hint('wc_noa').sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2]);
});

// An index whose key is {_id: 1} or {_id: -1} is an _id index under any name:
// createIndexes' parse (parseAndValidateIndexSpecs) puts it through validateIdIndexSpec,
// so sparse, partialFilterExpression and unique (even true) are 197, and a plain one is
// the _id_ index's twin (85). Mongoose's own docs use the sparse case,
// schema.index({_id: 1}, {sparse: true}). Found by helper-102; codes by helper-144
// (index_edges_compat.test.js has the rest of validateIdIndexSpec).
h.test('an index on {_id: 1} under another name is an _id index: 197 for sparse, partial, unique; 85 as a twin', async () => {
  const db = srv.freshDb('idrules');
  await db.collection('c').insertOne({ a: 1 });
  const create = (spec) => db.command({ createIndexes: 'c', indexes: [spec] });
  await h.expectCode(create({ key: { _id: 1 }, name: 's', sparse: true }), 197,
    /^The field 'sparse' is not valid for an _id index specification/);
  await h.expectCode(create({ key: { _id: 1 }, name: 'p', partialFilterExpression: { a: 1 } }), 197,
    /^The field 'partialFilterExpression' is not valid for an _id index specification/);
  await h.expectCode(create({ key: { _id: 1 }, name: 'n', unique: false }), 197,
    /^The field 'unique' is not valid for an _id index specification/);
  await h.expectCode(create({ key: { _id: 1 }, name: '_id_1', unique: true }), 197,
    /^The field 'unique' is not valid for an _id index specification/);
  await h.expectCode(create({ key: { _id: 1 }, name: 'x' }), 85, /^Index already exists with a different name: _id_$/);
  // The same spec as the _id index's own is a no-op; a compound or hashed index on _id is an ordinary one.
  assert.equal((await create({ key: { _id: 1 }, name: '_id_' })).note, 'all indexes already exist');
  await create({ key: { _id: 1, a: 1 }, name: 'c', sparse: true });
  await create({ key: { _id: 'hashed' }, name: 'h' });
  assert.deepEqual((await db.collection('c').indexes()).map((i) => i.name), ['_id_', 'c', 'h']);
});

// validateIndexSpecCollation: an explicit simple collation is dropped from the stored spec
// (an index without one is simple), after the collection's default has gone to the specs
// that named none; so it lists without a collation and is the same index as one created
// without it. Found by helper-102.
h.test('an explicit simple collation is not kept in the index spec, and still overrides a collection default', async () => {
  const db = srv.freshDb('simplecoll');
  const plain = db.collection('plain');
  await plain.insertOne({ h: 'a' });
  await plain.createIndex({ h: 1 }, { collation: { locale: 'simple' } });
  const ix = (await plain.indexes()).find((i) => i.name === 'h_1');
  assert.deepEqual(ix, { v: 2, key: { h: 1 }, name: 'h_1' });
  assert.equal((await db.command({ createIndexes: 'plain', indexes: [{ key: { h: 1 }, name: 'h_1' }] })).note,
    'all indexes already exist');
  await db.createCollection('en', { collation: { locale: 'en', strength: 2 } });
  const en = db.collection('en');
  await en.insertMany([{ _id: 1, h: 'a' }, { _id: 2, h: 'A' }]);
  await en.createIndex({ h: 1 }, { name: 'simple', collation: { locale: 'simple' } });
  await en.createIndex({ h: 1 }, { name: 'dflt' });
  const byName = Object.fromEntries((await en.indexes()).map((i) => [i.name, i]));
  assert.equal(byName.simple.collation, undefined);
  assert.equal(byName.dflt.collation.locale, 'en');
  // The simple index answers a simple-collation query; the collection's default one does not.
  const q = en.find({ h: 'a' }).collation({ locale: 'simple' }).hint('simple');
  assert.deepEqual((await q.toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await en.find({ h: 'a' }).hint('dflt').toArray()).map((d) => d._id).sort(), [1, 2]);
});

// _isSpecOk's last _id rule: an index on {_id: 1} must have the collection's default
// collation (found by helper-103); {_id: -1} never gets that far, validateIdIndexSpec's
// key rule refuses it (2).
h.test('an index on {_id: 1} needs the collection default collation (67); {_id: -1} is 2', async () => {
  const db = srv.freshDb('idcoll');
  await db.collection('c').insertOne({});
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: { _id: 1 }, name: 'y', collation: { locale: 'fr' } }] }),
    67, /^_id index must have the collection default collation$/);
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: { _id: -1 }, name: 'z' }] }), 2,
    /^The field 'key' for an _id index must be \{_id: 1\}/);
  await db.createCollection('fr', { collation: { locale: 'fr' } });
  await h.expectCode(db.command({ createIndexes: 'fr', indexes: [{ key: { _id: 1 }, name: 's', collation: { locale: 'simple' } }] }),
    67, /^_id index must have the collection default collation$/);
  assert.deepEqual((await db.collection('fr').indexes()).map((i) => i.name), ['_id_']);
});

// The stored spec of an explicitly simple index has no collation: after a restart it must
// still load as simple, not take the collection's default (the default goes only to specs
// at creation, as mongod's validateIndexSpecCollation does).
h.test('an explicitly simple index on a collection with a default collation stays simple across kill -9 and a clean restart', { timeout: 90000 }, async () => {
  const dbName = srv.freshDb('simplerestart').databaseName;
  let db = srv.client.db(dbName);
  await db.createCollection('en', { collation: { locale: 'en', strength: 2 } });
  await db.collection('en').insertMany([{ _id: 1, h: 'a' }, { _id: 2, h: 'A' }], { writeConcern: { w: 1, j: true } });
  await db.collection('en').createIndex({ h: 1 }, { name: 'simple', collation: { locale: 'simple' } });
  await db.collection('en').createIndex({ h: 1 }, { name: 'dflt' });
  for (const how of [{ kill9: true }, {}]) {
    await srv.server.restart(how);
    await srv.reconnect();
    db = srv.client.db(dbName);
    const en = db.collection('en');
    const byName = Object.fromEntries((await en.indexes()).map((i) => [i.name, i]));
    assert.equal(byName.simple.collation, undefined, JSON.stringify(how));
    assert.equal(byName.dflt.collation.locale, 'en', JSON.stringify(how));
    const simple = await en.find({ h: 'a' }).collation({ locale: 'simple' }).hint('simple').toArray();
    assert.deepEqual(simple.map((d) => d._id), [1], JSON.stringify(how));
    // Loaded as simple, the index bounds the simple-collation query to its one key ('A' sorts apart from 'a').
    const ex = await en.find({ h: 'a' }).collation({ locale: 'simple' }).hint('simple').explain('executionStats');
    assert.equal(ex.executionStats.totalKeysExamined, 1, JSON.stringify(how));
    const dflt = await en.find({ h: 'a' }).hint('dflt').toArray();
    assert.deepEqual(dflt.map((d) => d._id).sort(), [1, 2], JSON.stringify(how));
  }
});
