'use strict';
// Index DDL as MongoDB 8.0 answers it: createIndexes / listIndexes /
// dropIndexes, their options and every error code; multikey and parallel
// arrays; currentOp / killOp; and the protocol gaps (transactions on a
// standalone, retryable writes, sessions, write concerns).
const assert = require('node:assert/strict');
const { Long, UUID, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const names = async (c) => (await c.indexes()).map((i) => i.name);
const create = (db, coll, indexes) => db.command({ createIndexes: coll, indexes });

h.test('default names, compound and descending keys; listIndexes shows v, key, name', async () => {
  const db = srv.freshDb('names');
  const c = db.collection('c');
  assert.equal(await c.createIndex({ a: 1, b: -1 }), 'a_1_b_-1');
  assert.equal(await c.createIndex({ 'x.y': 1 }), 'x.y_1');
  const idx = await c.indexes();
  assert.deepEqual(idx[0], { v: 2, key: { _id: 1 }, name: '_id_' });
  assert.deepEqual(idx[1], { v: 2, key: { a: 1, b: -1 }, name: 'a_1_b_-1' });
  const r = await create(db, 'c', [{ key: { z: 1 }, name: 'zz' }]);
  assert.equal(r.numIndexesBefore, 3);
  assert.equal(r.numIndexesAfter, 4);
  assert.equal(r.createdCollectionAutomatically, false);
  const r2 = await create(db, 'new', [{ key: { z: 1 }, name: 'zz' }]);
  assert.equal(r2.createdCollectionAutomatically, true);
});

h.test('identical createIndexes is a no-op with note "all indexes already exist"', async () => {
  const db = srv.freshDb('noop');
  await create(db, 'c', [{ key: { a: 1 }, name: 'a_1', unique: true }]);
  const r = await create(db, 'c', [{ key: { a: 1 }, name: 'a_1', unique: true }]);
  assert.equal(r.note, 'all indexes already exist');
  assert.equal(r.numIndexesBefore, 2);
  assert.equal(r.numIndexesAfter, 2);
});

h.test('conflicts: 85 same name+signature other options, 85 same signature other name, 86 same name other key or signature', async () => {
  const db = srv.freshDb('conf');
  await create(db, 'c', [{ key: { a: 1 }, name: 'a_1' }]);
  const e = await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a_1', expireAfterSeconds: 5 }]), 85,
    /An equivalent index already exists with the same name but different options. Requested index: .*existing index: /);
  assert.equal(e.codeName, 'IndexOptionsConflict');
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'other', hidden: true }]), 85);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'other' }]), 85);
  const e2 = await h.expectCode(create(db, 'c', [{ key: { b: 1 }, name: 'a_1' }]), 86);
  assert.equal(e2.codeName, 'IndexKeySpecsConflict');
  /* unique is part of the signature: under the same name it is another index (86). */
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a_1', unique: true }]), 86);
  assert.deepEqual(await names(db.collection('c')), ['_id_', 'a_1']);
});

h.test('unique: duplicate insert gives 11000 with keyPattern and keyValue', async () => {
  const c = srv.freshDb('uniq').collection('c');
  await c.createIndex({ u: 1 }, { unique: true });
  await c.insertOne({ u: 5 });
  const e = await h.expectCode(c.insertOne({ u: 5 }), 11000);
  assert.deepEqual(e.keyPattern || e.writeErrors?.[0]?.err?.keyPattern, { u: 1 });
});

h.test('a unique build over duplicates fails with 11000 and leaves nothing in the catalog', async () => {
  const db = srv.freshDb('uniqbuild');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 3000 }, (_, i) => ({ _id: i, u: i === 2999 ? 0 : i })));
  await h.expectCode(create(db, 'c', [{ key: { v: 1 }, name: 'v_1' }, { key: { u: 1 }, name: 'u_1', unique: true }]), 11000);
  assert.deepEqual(await names(c), ['_id_']);
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true);
});

h.test('sparse, partialFilterExpression, hidden and collation are stored and shown', async () => {
  const db = srv.freshDb('opts');
  const c = db.collection('c');
  await c.createIndex({ s: 1 }, { sparse: true });
  await c.createIndex({ p: 1 }, { partialFilterExpression: { p: { $gt: 5 }, q: { $exists: true } } });
  await c.createIndex({ h: 1 }, { hidden: true });
  await c.createIndex({ k: 1 }, { collation: { locale: 'simple' } });
  await c.createIndex({ o: 1 }, { partialFilterExpression: { $or: [{ o: 1 }, { o: { $in: [2, 3] } }, { t: { $type: 'string' } }] } });
  const idx = await c.indexes();
  const by = Object.fromEntries(idx.map((i) => [i.name, i]));
  assert.equal(by.s_1.sparse, true);
  assert.deepEqual(by.p_1.partialFilterExpression, { p: { $gt: 5 }, q: { $exists: true } });
  assert.equal(by.h_1.hidden, true);
  assert.equal(by.k_1.collation, undefined); /* mongod drops a simple collation from the spec (validateIndexSpecCollation) */
  await c.insertMany([{ s: 1 }, {}, { p: 1 }, { p: 10, q: 1 }]);
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true);
  assert.equal(Number(v.keysPerIndex.s_1), 1);
  assert.equal(Number(v.keysPerIndex.p_1), 1);
});

h.test('unsupported partialFilterExpression operators are refused with 67', async () => {
  const db = srv.freshDb('partbad');
  for (const pf of [{ a: { $ne: 1 } }, { a: { $exists: false } }, { $nor: [{ a: 1 }] }, { a: { $nin: [1] } },
    { a: { $not: { $gt: 1 } } }, { a: /x/ }]) {
    await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a_1', partialFilterExpression: pf }]), 67,
      /Expression not supported in partial index/);
  }
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a_1', partialFilterExpression: 5 }]), 14);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a_1', sparse: true, partialFilterExpression: { a: 1 } }]), 67);
});

h.test('unknown index options are refused with 197 like MongoDB 8.0', async () => {
  const db = srv.freshDb('unknown');
  const e = await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a_1', foo: 1 }]), 197,
    /The field 'foo' is not valid for an index specification/);
  assert.equal(e.codeName, 'InvalidIndexSpecificationOption');
  // Accepted options the server does not act on are stored verbatim.
  await create(db, 'c', [{ key: { a: 1 }, name: 'a_1', background: true, storageEngine: { wiredTiger: {} } }]);
  const ix = (await db.collection('c').indexes()).find((i) => i.name === 'a_1');
  assert.equal(ix.background, true);
  assert.deepEqual(ix.storageEngine, { wiredTiger: {} });
});

h.test('invalid key patterns and option types: 67, 2, 14, 9', async () => {
  const db = srv.freshDb('badkeys');
  await h.expectCode(create(db, 'c', [{ key: {}, name: 'e' }]), 67, /Index keys cannot be empty/);
  await h.expectCode(create(db, 'c', [{ key: { a: 0 }, name: 'z' }]), 67, /cannot be 0/);
  await h.expectCode(create(db, 'c', [{ key: { a: 'wildcard' }, name: 't' }]), 67); // text: text.test.js, geo: geo.test.js, hashed: hashed_index.test.js
  await h.expectCode(create(db, 'c', [{ key: { a: 'columnstore' }, name: 't' }]), 67);
  await h.expectCode(create(db, 'c', [{ key: { a: 'nosuch' }, name: 't' }]), 67, /Unknown index plugin/);
  await h.expectCode(create(db, 'c', [{ key: { a: { x: 1 } }, name: 't' }]), 67);
  await h.expectCode(create(db, 'c', [{ key: { $a: 1 }, name: 't' }]), 67);
  await h.expectCode(create(db, 'c', [{ key: { 'a..b': 1 }, name: 't' }]), 67);
  await h.expectCode(create(db, 'c', [{ key: 5, name: 't' }]), 14);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 5 }]), 14);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'u', unique: 'yes' }]), 14);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'u', hidden: 1 }]), 14);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: '' }]), 67);
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: 'a\u0000b', expireAfterSeconds: 1 }]), 67, /NUL bytes/);
  assert.ok(!(await db.collection('c').indexes().catch(() => [])).some((i) => i.name.startsWith('a')), 'no index cut short at the NUL');
  await h.expectCode(create(db, 'c', [{ key: { a: 1 }, name: '*' }]), 2);
  await h.expectCode(create(db, 'c', [{ name: 'nokey' }]), 9);
  await h.expectCode(create(db, 'c', []), 2);
  // Duplicate fields in a key pattern: 2 BadValue (built raw; JS objects cannot repeat keys).
  const { BSON } = require('mongodb');
  const body = Buffer.from(BSON.serialize({ createIndexes: 'c', indexes: [{ key: { q: 1, r: 1 }, name: 'd' }], $db: db.databaseName }));
  const at = body.indexOf(Buffer.from([0x10, 0x72, 0x00]));
  body[at + 1] = 0x71;
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command(db.databaseName, {}, {}, { rawBody: body });
    assert.equal(r.code, 2, JSON.stringify(r));
    assert.match(r.errmsg, /The field 'q' appears multiple times in the index key pattern/);
  } finally { conn.close(); }
  // Nothing was created, not even the collection.
  await h.expectCode(db.collection('c').indexes(), 26);
});

h.test('at most 64 indexes per collection (67 "too many indexes")', async () => {
  const db = srv.freshDb('many');
  const specs = Array.from({ length: 63 }, (_, i) => ({ key: { [`f${i}`]: 1 }, name: `f${i}_1` }));
  await create(db, 'c', specs);
  await h.expectCode(create(db, 'c', [{ key: { g: 1 }, name: 'g_1' }]), 67, /add index fails, too many indexes for .*c key:/);
  assert.equal((await names(db.collection('c'))).length, 64);
});

h.test('large index keys are accepted (no key size limit since 4.2)', async () => {
  const c = srv.freshDb('bigkey').collection('c');
  await c.createIndex({ s: 1 });
  await c.insertOne({ s: 'x'.repeat(5000) });
  assert.equal(await c.countDocuments({ s: 'x'.repeat(5000) }), 1);
});

h.test('multikey: arrays index each element; compound over two arrays is 171 at build and insert', async () => {
  const db = srv.freshDb('multi');
  const c = db.collection('c');
  await c.insertMany([{ a: [1, 2], b: [3, 4] }]);
  await h.expectCode(c.createIndex({ a: 1, b: 1 }), 171, /cannot index parallel arrays/);
  assert.deepEqual(await names(c), ['_id_']);
  await c.deleteMany({});
  await c.createIndex({ a: 1, b: 1 });
  await c.insertOne({ a: [1, 2], b: 1 });
  await h.expectCode(c.insertOne({ a: [1, 2], b: [1, 2] }), 171);
  await h.expectCode(c.updateOne({ b: 1 }, { $set: { b: [5, 6] } }), 171);
  assert.equal(await c.countDocuments(), 1);
  const c2 = db.collection('c2');
  await c2.createIndex({ 'items.sku': 1, 'items.qty': 1 });
  await c2.insertOne({ items: [{ sku: 'a', qty: 1 }, { sku: 'b', qty: 2 }] });
  const v = await db.command({ validate: 'c2' });
  assert.equal(v.valid, true);
  assert.equal(Number(v.keysPerIndex['items.sku_1_items.qty_1']), 2);
});

h.test('dropIndexes by name, key pattern, list of names and "*"; errors 27 and 72', async () => {
  const db = srv.freshDb('drop');
  const c = db.collection('c');
  for (const k of ['a', 'b', 'c', 'd', 'e']) await c.createIndex({ [k]: 1 });
  const r = await db.command({ dropIndexes: 'c', index: 'a_1' });
  assert.equal(r.nIndexesWas, 6);
  await db.command({ dropIndexes: 'c', index: { b: 1 } });
  await db.command({ dropIndexes: 'c', index: ['c_1', 'd_1'] });
  assert.deepEqual(await names(c), ['_id_', 'e_1']);
  const e = await h.expectCode(db.command({ dropIndexes: 'c', index: 'nosuch' }), 27);
  assert.equal(e.codeName, 'IndexNotFound');
  await h.expectCode(db.command({ dropIndexes: 'c', index: { zz: 1 } }), 27);
  await h.expectCode(db.command({ dropIndexes: 'c', index: ['e_1', 'nosuch'] }), 27);
  assert.deepEqual(await names(c), ['_id_', 'e_1'], 'a failing list drops nothing');
  const e72 = await h.expectCode(db.command({ dropIndexes: 'c', index: '_id_' }), 72, /cannot drop _id index/);
  assert.equal(e72.codeName, 'InvalidOptions');
  await h.expectCode(db.command({ dropIndexes: 'c', index: { _id: 1 } }), 72);
  const star = await db.command({ dropIndexes: 'c', index: '*' });
  assert.deepEqual([star.nIndexesWas, star.msg], [2, 'non-_id indexes dropped for collection'], 'mongod\'s reply to "*"');
  assert.deepEqual(await names(c), ['_id_']);
  await h.expectCode(db.command({ dropIndexes: 'missing', index: '*' }), 26);
});

h.test('index definitions survive a restart', async () => {
  const db = srv.freshDb('restart');
  const c = db.collection('c');
  await c.createIndex({ a: 1 }, { unique: true, partialFilterExpression: { a: { $gt: 0 } } });
  await c.insertMany([{ a: 1 }, { a: -1 }, { a: -1 }]);
  await srv.server.restart();
  await srv.reconnect();
  const c2 = srv.client.db(db.databaseName).collection('c');
  const ix = (await c2.indexes()).find((i) => i.name === 'a_1');
  assert.deepEqual(ix, { v: 2, key: { a: 1 }, name: 'a_1', unique: true, partialFilterExpression: { a: { $gt: 0 } } });
  await h.expectCode(c2.insertOne({ a: 1 }), 11000);
});

h.test('currentOp lists running commands and filters; killOp answers; both admin-only', async () => {
  const admin = srv.client.db('admin');
  const r = await admin.command({ currentOp: 1 });
  assert.ok(Array.isArray(r.inprog));
  const me = r.inprog.find((o) => o.command && o.command.currentOp === 1);
  assert.ok(me, 'currentOp shows itself');
  assert.equal(me.op, 'command');
  assert.match(me.desc, /^conn\d+$/);
  assert.ok(me.client);
  assert.equal(me.active, true);
  const none = await admin.command({ currentOp: 1, ns: 'no.such' });
  assert.equal(none.inprog.length, 0);
  const k = await admin.command({ killOp: 1, op: 999999 });
  assert.equal(k.info, 'attempting to kill op');
  await h.expectCode(srv.client.db('x').command({ currentOp: 1 }), 13);
});

h.test('an index build over 200k documents shows progress in currentOp from another connection', { timeout: 240000 }, async () => {
  const db = srv.freshDb('build');
  const c = db.collection('c');
  const N = 200000;
  for (let i = 0; i < N; i += 10000) {
    await c.insertMany(Array.from({ length: 10000 }, (_, j) => ({ _id: i + j, x: (i + j) % 977, s: `v${i + j}` })), { ordered: false });
  }
  const other = await srv.newClient();
  const build = c.createIndex({ x: 1, s: 1 });
  let seen = null;
  let done = false;
  build.finally(() => { done = true; });
  while (!done) {
    const r = await other.db('admin').command({ currentOp: 1, 'command.createIndexes': 'c' });
    const op = r.inprog.find((o) => o.msg === 'Index Build: scanning collection');
    if (op && op.progress && Number(op.progress.done) > 0) { seen = op; break; }
    await h.sleep(20);
  }
  await build;
  assert.ok(seen, 'currentOp never showed the build in progress');
  assert.equal(Number(seen.progress.total) >= Number(seen.progress.done), true);
  assert.equal(seen.ns, `${db.databaseName}.c`);
  const log = await srv.client.db('admin').command({ getLog: 'global' });
  assert.ok(log.log.some((l) => l.includes('Index Build: scanning collection')), 'progress logged');
});

h.test('killOp stops an index build: 11601 and no index left', { timeout: 240000 }, async () => {
  const db = srv.freshDb('kill');
  const c = db.collection('c');
  for (let i = 0; i < 100000; i += 10000) {
    await c.insertMany(Array.from({ length: 10000 }, (_, j) => ({ x: i + j })));
  }
  const other = await srv.newClient();
  const build = c.createIndex({ x: 1 }).then(() => null, (e) => e);
  let killed = false;
  for (let t = 0; t < 2000 && !killed; t++) {
    const r = await other.db('admin').command({ currentOp: 1, msg: 'Index Build: scanning collection', ns: `${db.databaseName}.c` });
    if (r.inprog.length) {
      await other.db('admin').command({ killOp: 1, op: r.inprog[0].opid });
      killed = true;
    } else {
      await h.sleep(5);
    }
  }
  const err = await build;
  assert.ok(killed, 'the build never showed in currentOp');
  if (process.env.MF_DEBUG) console.log('killOp result', err && err.code);
  if (err) {
    assert.equal(err.code, 11601);
    assert.deepEqual(await names(c), ['_id_']);
  } else {
    // The kill can land after the last chunk; then the build has completed normally.
    assert.deepEqual(await names(c), ['_id_', 'x_1']);
  }
});

h.test('transactions and transaction numbers on a standalone: 20 IllegalOperation, as mongod (retryable writes need a replica set)', async () => {
  const db = srv.freshDb('txn');
  const lsid = { id: new UUID() };
  const conn = await h.rawConnect(srv.port);
  try {
    let r = await conn.command(db.databaseName, { insert: 'c', documents: [{ a: 1 }], lsid, txnNumber: Long.fromNumber(1), autocommit: false });
    assert.equal(r.code, 20);
    assert.equal(r.codeName, 'IllegalOperation');
    assert.equal(r.errmsg, 'Transaction numbers are only allowed on a replica set member or mongos');
    r = await conn.command(db.databaseName, { find: 'c', lsid, txnNumber: Long.fromNumber(2) });
    assert.equal(r.code, 20);
    // mongod's jstest retryable_writes_standalone_api.js: a write with a transaction number fails on a standalone.
    for (const cmd of [
      { insert: 'c', documents: [{ _id: 1 }] },
      { update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { b: 1 } }, upsert: true }] },
      { findAndModify: 'c', query: { _id: 1 }, update: { $set: { b: 2 } }, upsert: true },
      { delete: 'c', deletes: [{ q: {}, limit: 1 }] },
    ]) {
      r = await conn.command(db.databaseName, { ...cmd, lsid, txnNumber: Long.fromNumber(3) });
      assert.equal(r.code, 20, JSON.stringify(r));
      assert.equal(r.errmsg, 'Transaction numbers are only allowed on a replica set member or mongos');
    }
    // Without one, the same writes run.
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 1 }], lsid });
    assert.equal(r.n, 1);
  } finally { conn.close(); }
  assert.equal(await db.collection('c').countDocuments(), 1);
});

h.test('sessions: lsid on reads and writes, startSession and endSessions', async () => {
  const db = srv.freshDb('sess');
  const session = srv.client.startSession();
  await db.collection('c').insertOne({ a: 1 }, { session });
  assert.equal((await db.collection('c').find({}, { session }).toArray()).length, 1);
  await session.endSession();
  const r = await srv.client.db('admin').command({ startSession: 1 });
  assert.ok(r.id && r.id.id);
  assert.equal(Number(r.timeoutMinutes), 30);
});

h.test('a standalone refuses w: 2 and w modes before writing (BadValue, as mongod); bad shapes fail', async () => {
  const db = srv.freshDb('wc');
  const conn = await h.rawConnect(srv.port);
  try {
    let r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 1 }], writeConcern: { w: 2 } });
    assert.equal(r.ok, 0);
    assert.equal(r.code, 2);
    assert.equal(r.codeName, 'BadValue');
    assert.equal(r.errmsg, "cannot use 'w' > 1 when a host is not replicated");
    r = await conn.command(db.databaseName, { update: 'c', updates: [{ q: {}, u: { $set: { a: 1 } }, upsert: true }], writeConcern: { w: 'tagged' } });
    assert.equal(r.code, 2);
    assert.equal(r.errmsg, 'cannot use non-majority \'w\' mode "tagged" when a host is not a member of a replica set');
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 1 }], writeConcern: { w: 'majority', j: true } });
    assert.equal(r.ok, 1, 'majority and j are fine on a standalone with a journal');
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 2 }], writeConcern: { w: -1 } });
    assert.equal(r.code, 9);
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 3 }], writeConcern: { w: true } });
    assert.equal(r.code, 9);
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 4 }], writeConcern: { j: 'x' } });
    assert.equal(r.code, 14);
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 5 }], writeConcern: 'majority' });
    assert.equal(r.code, 14);
    // A numeric w is read as mongod's safeNumberLong reads it: 1.5 is 1 (fine here), 50.5 is 50, -0.5 is 0.
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 6 }], writeConcern: { w: 1.5 } });
    assert.equal(r.ok, 1, JSON.stringify(r));
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 7 }], writeConcern: { w: 2.5 } });
    assert.equal(r.errmsg, "cannot use 'w' > 1 when a host is not replicated");
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 8 }], writeConcern: { w: 50.5 } });
    assert.equal(r.errmsg, "cannot use 'w' > 1 when a host is not replicated");
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 9 }], writeConcern: { w: 51.5 } });
    assert.deepEqual([r.code, r.errmsg], [9, 'w has to be a non-negative number and not greater than 50; found: 51']);
    // A decimal rounds half to even (Decimal128::toLong): 1.5 is 2, refused here; -0.6 is -1.
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 10 }], writeConcern: { w: Decimal128.fromString('1.5') } });
    assert.equal(r.errmsg, "cannot use 'w' > 1 when a host is not replicated");
    r = await conn.command(db.databaseName, { insert: 'c', documents: [{ _id: 11 }], writeConcern: { w: Decimal128.fromString('-0.6') } });
    assert.deepEqual([r.code, r.errmsg], [9, 'w has to be a non-negative number and not greater than 50; found: -1']);
  } finally { conn.close(); }
  assert.equal(await db.collection('c').countDocuments(), 2);
});

h.test('createIndexes with an explicit v keeps it: {v: 2, unique: true} lists v 2 and unique true', async () => {
  const db = srv.freshDb('ixv');
  await db.command({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1', v: 2, unique: true, sparse: false }] });
  const ix = (await db.collection('c').indexes()).find((i) => i.name === 'a_1');
  assert.equal(ix.v, 2);
  assert.equal(ix.unique, true);
  assert.equal(ix.sparse, false);
});

h.test('createIndexes commitQuorum: a number or a string, else 9; a standalone refuses any with 2 (mongosh\'s third createIndex argument)', async () => {
  const db = srv.freshDb('cq');
  const cq = (v) => db.command({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }], commitQuorum: v });
  /* The manual's createIndex(keys, {partialFilterExpression}, {expireAfterSeconds}) sends the TTL as commitQuorum. */
  await h.expectCode(cq({ expireAfterSeconds: 3600 }), 9, /commitQuorum has to be a number or a string/);
  await h.expectCode(cq(true), 9);
  await h.expectCode(cq(-1), 9, /non-negative/);
  await h.expectCode(cq(51), 9);
  await h.expectCode(cq(''), 9, /empty string/);
  await h.expectCode(cq('majority'), 2, /Standalones can't specify commitQuorum/);
  await h.expectCode(cq(1), 2, /Standalones/);
  assert.deepEqual((await db.collection('c').indexes().catch(() => [])).map((i) => i.name).filter((n) => n === 'a_1'), [],
    'nothing was built');
  const out = await h.mongosh(srv.port, db.databaseName, `
    try {
      db.eventlog.createIndex({ timestamp: 1 }, { partialFilterExpression: { sensor: { $eq: "x" } } }, { expireAfterSeconds: 3600 });
      print("created");
    } catch (e) { print("code=" + e.code); }
  `);
  assert.match(out, /code=9/);
});

h.test('reIndex rebuilds every index from its spec, as mongod 8.0: {nIndexesWas, nIndexes, indexes}; the data, uniqueness, TTL options and validate hold; no collection is 26, a view 166; it survives a restart', async () => {
  const db = srv.freshDb('reindex');
  const c = db.collection('c');
  await c.createIndexes([
    { key: { a: 1 }, name: 'a_1' },
    { key: { b: 1 }, name: 'b_1', unique: true },
    { key: { at: 1 }, name: 'at_1', expireAfterSeconds: 3600 },
    { key: { 'tags.$**': 1 }, name: 'wild' },
  ]);
  const docs = [];
  for (let i = 0; i < 2500; i++) docs.push({ _id: i, a: i % 10, b: i, at: new Date(), tags: { k: `t${i % 3}` }, arr: [i, i + 1] });
  await c.insertMany(docs);
  const before = await c.listIndexes().toArray();
  const r = await db.command({ reIndex: 'c' });
  assert.equal(r.ok, 1);
  assert.equal(r.nIndexesWas, 5);
  assert.equal(r.nIndexes, 5);
  assert.deepEqual(r.indexes.map((x) => x.name), ['_id_', 'a_1', 'b_1', 'at_1', 'wild']);
  assert.deepEqual(await c.listIndexes().toArray(), before, 'the same specs, TTL option included');
  // Every index answers again, through hints, with every key.
  assert.equal(await c.countDocuments({ a: 3 }, { hint: 'a_1' }), 250);
  assert.equal((await c.find({ b: 1234 }).hint('b_1').toArray()).length, 1);
  assert.equal(await c.countDocuments({ 'tags.k': 't1' }, { hint: 'wild' }), 833);
  assert.equal(await c.countDocuments({ _id: { $gte: 2000 } }, { hint: '_id_' }), 500);
  await h.expectCode(c.insertOne({ _id: 'dup', b: 7 }), 11000);
  const v = await db.command({ validate: 'c', full: true });
  assert.equal(v.valid, true, JSON.stringify(v.errors));
  assert.equal(v.keysPerIndex.a_1, 2500);
  // Writes after it maintain the new tables; a restart finds them.
  await c.deleteMany({ a: 0 });
  await c.updateMany({ a: 1 }, { $set: { a: 11 } });
  await srv.server.restart();
  await srv.reconnect();
  const c2 = srv.client.db(db.databaseName).collection('c');
  assert.equal(await c2.countDocuments({ a: 11 }, { hint: 'a_1' }), 250);
  assert.equal(await c2.countDocuments({ a: 0 }, { hint: 'a_1' }), 0);
  const v2 = await srv.client.db(db.databaseName).command({ validate: 'c', full: true });
  assert.equal(v2.valid, true, JSON.stringify(v2.errors));
  assert.equal(v2.nrecords, 2250);
  // kill -9 right after a reIndex: the new tables are the ones the catalog names, the old ones gone.
  assert.equal((await srv.client.db(db.databaseName).command({ reIndex: 'c' })).nIndexes, 5);
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  const v3 = await srv.client.db(db.databaseName).command({ validate: 'c', full: true });
  assert.equal(v3.valid, true, JSON.stringify(v3.errors));
  assert.equal(v3.keysPerIndex.b_1, 2250);
  assert.equal(await srv.client.db(db.databaseName).collection('c').countDocuments({ a: 11 }, { hint: 'a_1' }), 250);
  // Refusals, as mongod's.
  const d2 = srv.client.db(db.databaseName);
  await h.expectCode(d2.command({ reIndex: 'nosuch' }), 26);
  await d2.createCollection('v', { viewOn: 'c', pipeline: [] });
  await h.expectCode(d2.command({ reIndex: 'v' }), 166);
  await h.expectCode(d2.command({ reIndex: 5 }), 73);
});

h.test('after reIndex the TTL monitor keeps expiring through the rebuilt TTL index: documents due before and after the rebuild go on time, the rest stay', { timeout: 60000 }, async () => {
  const db = srv.freshDb('reindex_ttl');
  const c = db.collection('s');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const now = Date.now();
  const docs = [];
  for (let i = 0; i < 3000; i++) docs.push({ _id: i, at: new Date(now + (i < 1000 ? 1500 : i < 2000 ? 2500 : 3600e3)) });
  await c.insertMany(docs);
  assert.equal((await db.command({ reIndex: 's' })).nIndexes, 2);
  const by = Date.now() + 30000;
  while (Date.now() < by && (await c.countDocuments()) > 1000) await h.sleep(50);
  assert.equal(await c.countDocuments(), 1000, 'the 2,000 due ones expired, the later ones stayed');
  assert.equal(await c.countDocuments({ _id: { $lt: 2000 } }), 0);
  const v = await db.command({ validate: 's', full: true });
  assert.equal(v.valid, true, JSON.stringify(v.errors));
  assert.equal(v.keysPerIndex.at_1, 1000);
});
