'use strict';
// Cursors as applications meet them through the driver: killing a cursor a
// getMore is using (mongod's CursorManager::killCursor interrupts that
// operation with CursorKilled), what the profiler and currentOp show of a
// getMore (the comment it inherits from the command that opened the cursor),
// the time limit a find's getMores inherit, serverStatus cursor metrics.
const assert = require('node:assert/strict');
const h = require('./harness');

// Test commands for the maxTimeAlwaysTimeOut fail point.
const srv = h.useServer({ args: ['--setParameter', 'enableTestCommands=1'] });

h.test('killCursors of a cursor an awaitData getMore is waiting on: the getMore fails with 237 CursorKilled, the cursor is gone (kill_pinned_cursor.js)', async () => {
  const db = srv.freshDb('killpinned');
  await db.createCollection('cap', { capped: true, size: 100000 });
  await db.collection('cap').insertOne({ a: 1 });
  const c1 = await h.rawConnect(srv.port);
  const c2 = await h.rawConnect(srv.port);
  try {
    const f = await c1.command(db.databaseName, { find: 'cap', tailable: true, awaitData: true });
    assert.equal(f.ok, 1, JSON.stringify(f));
    const id = h.cursorId(f.cursor.id);
    // Waits up to a minute for a document that never comes, unless it is interrupted.
    const pending = c1.command(db.databaseName, { getMore: id, collection: 'cap', maxTimeMS: 60000 });
    const admin = srv.client.db('admin');
    await h.waitFor(async () => (await admin.aggregate([{ $currentOp: {} },
      { $match: { op: 'getmore', ns: `${db.databaseName}.cap` } }]).toArray()).length === 1, 'the getMore is running');
    const k = await c2.command(db.databaseName, { killCursors: 'cap', cursors: [id] });
    assert.deepEqual(k.cursorsKilled.map(String), [String(id)]);
    assert.deepEqual([k.cursorsNotFound, k.cursorsAlive, k.cursorsUnknown], [[], [], []]);
    const g = await pending;
    assert.equal(g.ok, 0, JSON.stringify(g));
    assert.equal(g.code, 237);
    assert.equal(g.codeName, 'CursorKilled');
    assert.match(g.errmsg, /operation was interrupted/);
    const again = await c2.command(db.databaseName, { getMore: id, collection: 'cap' });
    assert.equal(again.code, 43, JSON.stringify(again));
    // The connection carries on.
    assert.equal((await c1.command(db.databaseName, { ping: 1 })).ok, 1);
  } finally { c1.close(); c2.close(); }
});

h.test('a getMore without a comment shows its cursor\'s opening comment in the profiler and currentOp; its own comment wins (curop.cpp appendCommentField)', async () => {
  const db = srv.freshDb('gmcomment');
  await db.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  await db.command({ profile: 2 });
  try {
    const f = await db.command({ find: 'c', batchSize: 2, comment: { app: 'report', n: 1 } });
    const id = h.cursorId(f.cursor.id);
    await db.command({ getMore: id, collection: 'c', batchSize: 2 });
    await db.command({ getMore: id, collection: 'c', batchSize: 2, comment: 'own' });
    const a = await db.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: 2 }, comment: 'agg' });
    await db.command({ getMore: h.cursorId(a.cursor.id), collection: 'c', batchSize: 2 });
    const plain = await db.command({ find: 'c', batchSize: 2 });
    await db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'c', batchSize: 2 });
  } finally {
    await db.command({ profile: 0 });
  }
  const entries = await db.collection('system.profile').find({ op: 'getmore' }).sort({ ts: 1 }).toArray();
  assert.equal(entries.length, 4);
  assert.deepEqual(entries.map((e) => e.command.comment), [{ app: 'report', n: 1 }, 'own', 'agg', undefined]);
  // Appended after the getMore's own fields, as addField does.
  const keys = Object.keys(entries[0].command);
  assert.equal(keys[keys.length - 1], 'comment');
  assert.equal(entries[0].command.batchSize, 2);
  assert.deepEqual(entries[0].originatingCommand.comment, { app: 'report', n: 1 });

  await db.createCollection('cap', { capped: true, size: 100000 });
  await db.collection('cap').insertOne({ a: 1 });
  const c1 = await h.rawConnect(srv.port);
  try {
    const t = await c1.command(db.databaseName, { find: 'cap', tailable: true, awaitData: true, comment: 'tailer' });
    const id = h.cursorId(t.cursor.id);
    const pending = c1.command(db.databaseName, { getMore: id, collection: 'cap', maxTimeMS: 60000 });
    const admin = srv.client.db('admin');
    const ops = await h.waitFor(async () => {
      const r = await admin.aggregate([{ $currentOp: {} }, { $match: { op: 'getmore', ns: `${db.databaseName}.cap` } }]).toArray();
      return r.length === 1 ? r : null;
    }, 'the getMore is running');
    assert.equal(ops[0].command.comment, 'tailer');
    assert.equal(ops[0].originatingCommand.comment, 'tailer');
    await db.command({ killCursors: 'cap', cursors: [id] });
    assert.equal((await pending).code, 237);
  } finally { c1.close(); }
});

h.test('$currentOp idleCursors counts an awaitData getMore that waited as one batch (nBatchesReturned), and the documents it found', async () => {
  const db = srv.freshDb('awaitbatches');
  await db.createCollection('cap', { capped: true, size: 100000 });
  await db.collection('cap').insertOne({ a: 1 });
  const f = await db.command({ find: 'cap', tailable: true, awaitData: true });
  const id = h.cursorId(f.cursor.id);
  for (let i = 0; i < 2; i++) {
    const g = await db.command({ getMore: id, collection: 'cap', maxTimeMS: 300 });
    assert.deepEqual(g.cursor.nextBatch, []);
  }
  const idle = async () => (await srv.client.db('admin').aggregate([{ $currentOp: { idleCursors: true } },
    { $match: { type: 'idleCursor', ns: `${db.databaseName}.cap` } }]).toArray());
  let r = await idle();
  assert.equal(r.length, 1);
  assert.equal(r[0].cursor.nBatchesReturned, 3, 'the find and two getMores');
  assert.equal(r[0].cursor.nDocsReturned, 1);
  await db.collection('cap').insertOne({ a: 2 });
  const g = await db.command({ getMore: id, collection: 'cap', maxTimeMS: 30000 });
  assert.deepEqual(g.cursor.nextBatch.map((d) => d.a), [2]);
  r = await idle();
  assert.equal(r[0].cursor.nBatchesReturned, 4);
  assert.equal(r[0].cursor.nDocsReturned, 2);
  await db.command({ killCursors: 'cap', cursors: [id] });
});

h.test('serverStatus metrics.cursor counts cursors opened (totalOpened), closed after more than one batch (moreThanOneBatch) and their lifespans, as clientcursor.cpp', async () => {
  const db = srv.freshDb('cursormetrics');
  await db.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const metrics = async () => (await srv.client.db('admin').command({ serverStatus: 1 })).metrics.cursor;
  const before = await metrics();
  assert.deepEqual(Object.keys(before), ['lifespan', 'moreThanOneBatch', 'open', 'timedOut', 'totalOpened']);
  assert.deepEqual(Object.keys(before.lifespan), ['greaterThanOrEqual10Minutes', 'lessThan10Minutes',
    'lessThan15Seconds', 'lessThan1Minute', 'lessThan1Second', 'lessThan30Seconds', 'lessThan5Seconds']);
  const a = await db.command({ find: 'c', batchSize: 2 });
  const g = await db.command({ getMore: h.cursorId(a.cursor.id), collection: 'c' });
  assert.equal(String(g.cursor.id), '0');
  const b = await db.command({ find: 'c', batchSize: 2 });
  await db.command({ killCursors: 'c', cursors: [h.cursorId(b.cursor.id)] });
  const whole = await db.command({ find: 'c' }); // one batch, no cursor left open
  assert.equal(String(whole.cursor.id), '0');
  const after = await metrics();
  const n = (v) => Number(v);
  const spans = (m) => Object.values(m.lifespan).reduce((s, v) => s + n(v), 0);
  assert.equal(n(after.totalOpened) - n(before.totalOpened), 2);
  assert.equal(n(after.moreThanOneBatch) - n(before.moreThanOneBatch), 1);
  assert.equal(spans(after) - spans(before), 2);
  assert.equal(n(after.open.total), n(before.open.total));
});

h.test('the getMores of a find or aggregate with maxTimeMS inherit its time limit: 50 under maxTimeAlwaysTimeOut, and the cursor is gone; without maxTimeMS they run (max_time_ms.js)', async () => {
  const db = srv.freshDb('leftover');
  await db.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const admin = srv.client.db('admin');
  const timed = await db.command({ find: 'c', batchSize: 2, maxTimeMS: 600000 });
  const g1 = await db.command({ getMore: h.cursorId(timed.cursor.id), collection: 'c', batchSize: 2 });
  assert.deepEqual(g1.cursor.nextBatch.map((d) => d._id), [2, 3]);
  const agg = await db.command({ aggregate: 'c', pipeline: [{ $sort: { _id: -1 } }], cursor: { batchSize: 2 }, maxTimeMS: 600000 });
  const plain = await db.command({ find: 'c', batchSize: 2 });
  await admin.command({ configureFailPoint: 'maxTimeAlwaysTimeOut', mode: 'alwaysOn' });
  try {
    await h.expectCode(db.command({ getMore: h.cursorId(timed.cursor.id), collection: 'c', batchSize: 2 }), 50,
      /operation exceeded time limit/);
    await h.expectCode(db.command({ getMore: h.cursorId(agg.cursor.id), collection: 'c', batchSize: 2 }), 50);
    const g = await db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'c', batchSize: 2 });
    assert.deepEqual(g.cursor.nextBatch.map((d) => d._id), [2, 3], 'no time limit, nothing to time out');
  } finally {
    await admin.command({ configureFailPoint: 'maxTimeAlwaysTimeOut', mode: 'off' });
  }
  // A getMore that failed deleted its cursor.
  await h.expectCode(db.command({ getMore: h.cursorId(timed.cursor.id), collection: 'c' }), 43);
  await h.expectCode(db.command({ getMore: h.cursorId(agg.cursor.id), collection: 'c' }), 43);
  const rest = await db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'c' });
  assert.equal(rest.cursor.nextBatch.length, 6);
});

h.test('getMore\'s collection is checked as its IDL validator does: empty or starting with "." is 73 InvalidNamespace', async () => {
  const db = srv.freshDb('gmname');
  await db.collection('c').insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
  const f = await db.command({ find: 'c', batchSize: 1 });
  const id = h.cursorId(f.cursor.id);
  await h.expectCode(db.command({ getMore: id, collection: '' }), 73, /^Collection names cannot be empty$/);
  await h.expectCode(db.command({ getMore: id, collection: '.c' }), 73, /^Collection names cannot start with '\.': \.c$/);
  const g = await db.command({ getMore: id, collection: 'c' });
  assert.equal(g.cursor.nextBatch.length, 4, 'the cursor was not touched');
});

h.test('killCursors names a collection as its IDL parses it: another type or an empty name is 73 InvalidNamespace; $cmd.listCollections is one', async () => {
  const db = srv.freshDb('kcname');
  await db.collection('c').insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
  const f = await db.command({ find: 'c', batchSize: 1 });
  const id = h.cursorId(f.cursor.id);
  await h.expectCode(db.command({ killCursors: 1, cursors: [id] }), 73, /^collection name has invalid type int$/);
  await h.expectCode(db.command({ killCursors: '', cursors: [id] }), 73, new RegExp(`^Invalid namespace specified '${db.databaseName}\\.'$`));
  const g = await db.command({ getMore: id, collection: 'c', batchSize: 1 });
  assert.deepEqual(g.cursor.nextBatch, [{ _id: 1 }], 'the failed killCursors killed nothing');
  for (let i = 0; i < 3; i++) await db.createCollection(`l${i}`);
  const lc = await db.command({ listCollections: 1, cursor: { batchSize: 1 } });
  const k = await db.command({ killCursors: '$cmd.listCollections', cursors: [h.cursorId(lc.cursor.id)] });
  assert.deepEqual(k.cursorsKilled.map(String), [String(lc.cursor.id)]);
  await db.command({ killCursors: 'c', cursors: [id] });
});

h.test('an awaitData getMore whose client hung up ends (279 ClientDisconnect) and frees its cursor, instead of waiting out its maxTimeMS', async () => {
  const db = srv.freshDb('hungup');
  await db.createCollection('cap', { capped: true, size: 100000 });
  await db.collection('cap').insertOne({ a: 1 });
  const c1 = await h.rawConnect(srv.port);
  const f = await c1.command(db.databaseName, { find: 'cap', tailable: true, awaitData: true });
  const id = h.cursorId(f.cursor.id);
  c1.command(db.databaseName, { getMore: id, collection: 'cap', maxTimeMS: 600000 }).catch(() => {});
  const admin = srv.client.db('admin');
  const running = async () => (await admin.aggregate([{ $currentOp: {} },
    { $match: { op: 'getmore', ns: `${db.databaseName}.cap` } }]).toArray()).length;
  await h.waitFor(async () => (await running()) === 1, 'the getMore is waiting');
  c1.close();
  await h.waitFor(async () => (await running()) === 0, 'the getMore ended with its client');
  await h.expectCode(db.command({ getMore: id, collection: 'cap' }), 43);
  assert.equal((await db.command({ ping: 1 })).ok, 1);
});

h.test('an awaitData getMore notices its client hanging up when the network loop reads the connection too (no hold, TLS)', async () => {
  // Without netConnectionHoldMicros (as for TLS or pipelined requests) the loop keeps reading a busy
  // connection: it sees the hang-up first and closes the socket, which the getMore then must not poll.
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'netConnectionHoldMicros=0'] });
  const { MongoClient } = require('mongodb');
  await s2.start();
  let cl;
  try {
    cl = await MongoClient.connect(s2.uri);
    const db = cl.db('hungup_nohold');
    await db.createCollection('cap', { capped: true, size: 100000 });
    await db.collection('cap').insertOne({ a: 1 });
    const c1 = await h.rawConnect(s2.port);
    const f = await c1.command(db.databaseName, { find: 'cap', tailable: true, awaitData: true });
    const id = h.cursorId(f.cursor.id);
    c1.command(db.databaseName, { getMore: id, collection: 'cap', maxTimeMS: 600000 }).catch(() => {});
    const running = async () => (await cl.db('admin').aggregate([{ $currentOp: {} },
      { $match: { op: 'getmore', ns: `${db.databaseName}.cap` } }]).toArray()).length;
    await h.waitFor(async () => (await running()) === 1, 'the getMore is waiting');
    c1.close();
    await h.waitFor(async () => (await running()) === 0, 'the getMore ended with its client');
    await h.expectCode(db.command({ getMore: id, collection: 'cap' }), 43);
  } finally {
    if (cl) await cl.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('killSessions interrupts an awaitData getMore of the killed session (11601 Interrupted) and kills its cursor', async () => {
  const db = srv.freshDb('killsess');
  await db.createCollection('cap', { capped: true, size: 100000 });
  await db.collection('cap').insertOne({ a: 1 });
  const lsid = { id: new (require('mongodb').UUID)() };
  const c1 = await h.rawConnect(srv.port);
  try {
    const f = await c1.command(db.databaseName, { find: 'cap', tailable: true, awaitData: true, lsid });
    const id = h.cursorId(f.cursor.id);
    const pending = c1.command(db.databaseName, { getMore: id, collection: 'cap', maxTimeMS: 60000, lsid });
    const admin = srv.client.db('admin');
    await h.waitFor(async () => (await admin.aggregate([{ $currentOp: {} },
      { $match: { op: 'getmore', ns: `${db.databaseName}.cap` } }]).toArray()).length === 1, 'the getMore is waiting');
    await admin.command({ killSessions: [lsid] });
    const g = await pending;
    assert.equal(g.code, 11601, JSON.stringify(g));
    const again = await c1.command(db.databaseName, { getMore: id, collection: 'cap', lsid });
    assert.equal(again.code, 43, JSON.stringify(again));
  } finally { c1.close(); }
});

h.test('create capped with a size or max past the int64 range: 51024 with the value clamped as safeInt64 reads it', async () => {
  const db = srv.freshDb('cappedhuge');
  const { Double, Decimal128 } = require('mongodb');
  for (const v of [new Double(1e300), Decimal128.fromString('1E+5000')]) {
    await h.expectCode(db.command({ create: 'a', capped: true, size: v }), 51024,
      /^BSON field 'size' value must be <= 1125899906842624, actual value '9223372036854775807'$/);
    await h.expectCode(db.command({ create: 'b', capped: true, size: 4096, max: v }), 51024,
      /^BSON field 'max' value must be < 2147483648, actual value '9223372036854775807'$/);
  }
  assert.deepEqual(await db.listCollections().toArray(), []);
});

h.test('aggregate cursor.batchSize read as safeInt64: NaN is 0 (an empty first batch), a huge double is unlimited, a string names its type (14)', async () => {
  const db = srv.freshDb('aggbatch');
  const { Double } = require('mongodb');
  await db.collection('c').insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
  const nan = await db.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: new Double(NaN) } });
  assert.equal(nan.cursor.firstBatch.length, 0);
  assert.notEqual(String(nan.cursor.id), '0');
  await db.command({ killCursors: 'c', cursors: [h.cursorId(nan.cursor.id)] });
  const huge = await db.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: new Double(1e300) } });
  assert.equal(huge.cursor.firstBatch.length, 5);
  assert.equal(String(huge.cursor.id), '0');
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: new Double(-1e300) } }), 51024,
    /actual value '-9223372036854775808'$/);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: 'x' } }), 14,
    /^BSON field 'aggregate.cursor.batchSize' is the wrong type 'string', expected types '\[long, int, decimal, double'\]$/);
});

// Access control: a second server, with --auth.
const authSrv = h.useServer({ args: ['--auth'] });

h.test('with access control, killCursors of another user\'s cursor is 13 "not authorized to kill cursor on <ns>" unless the caller holds killAnyCursor (hostManager, clusterAdmin, root); its getMore stays refused', async () => {
  await authSrv.client.db('admin').command({ createUser: 'boss', pwd: 'pw', roles: ['root'] });
  const boss = await authSrv.login('boss', 'pw');
  await boss.db('admin').command({ createUser: 'ops', pwd: 'pw', roles: ['hostManager'] });
  await boss.db('kc').command({ createUser: 'a', pwd: 'pw', roles: ['readWrite'] });
  await boss.db('kc').command({ createUser: 'b', pwd: 'pw', roles: ['readWrite'] });
  await boss.db('kc').collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const a = await authSrv.login('a', 'pw', 'kc');
  const b = await authSrv.login('b', 'pw', 'kc');
  const ops = await authSrv.login('ops', 'pw');
  const open = async () => h.cursorId((await a.db('kc').command({ find: 'c', batchSize: 1 })).cursor.id);
  let id = await open();
  await h.expectCode(b.db('kc').command({ killCursors: 'c', cursors: [id] }), 13, /^not authorized to kill cursor on kc\.c$/);
  await h.expectCode(b.db('kc').command({ getMore: id, collection: 'c' }), 13);
  await h.expectCode(boss.db('kc').command({ getMore: id, collection: 'c' }), 13, /was not created by the authenticated user/);
  const k = await boss.db('kc').command({ killCursors: 'c', cursors: [id] });
  assert.deepEqual(k.cursorsKilled.map(String), [String(id)]);
  id = await open();
  const k2 = await ops.db('kc').command({ killCursors: 'c', cursors: [id] });
  assert.deepEqual(k2.cursorsKilled.map(String), [String(id)]);
  await h.expectCode(a.db('kc').command({ getMore: id, collection: 'c' }), 43);
  id = await open();
  const own = await a.db('kc').command({ killCursors: 'c', cursors: [id] });
  assert.deepEqual(own.cursorsKilled.map(String), [String(id)]);
  // Every id is checked before any is killed (doCheckAuthorization): b's own cursor listed first survives.
  id = await open();
  const mine = h.cursorId((await b.db('kc').command({ find: 'c', batchSize: 1 })).cursor.id);
  await h.expectCode(b.db('kc').command({ killCursors: 'c', cursors: [mine, id] }), 13, /^not authorized to kill cursor on kc\.c$/);
  const g = await b.db('kc').command({ getMore: mine, collection: 'c', batchSize: 1 });
  assert.deepEqual(g.cursor.nextBatch, [{ _id: 1 }], 'the failed killCursors killed none of the ids');
  const both = await boss.db('kc').command({ killCursors: 'c', cursors: [mine, id] });
  assert.deepEqual(both.cursorsKilled.map(String), [String(mine), String(id)]);
});

h.test('convertToCapped / cloneCollectionAsCapped options as CollectionOptions::appendBSON shows them: capped, size, max first, small numbers as ints', async () => {
  const db = srv.freshDb('capopts');
  await db.createCollection('m', { capped: true, size: 100000, max: 3, validator: { a: { $exists: true } } });
  await db.collection('m').insertMany([{ a: 1 }, { a: 2 }]);
  await db.command({ convertToCapped: 'm', size: 10000 });
  await db.collection('p').insertOne({ a: 1 });
  await db.command({ cloneCollectionAsCapped: 'p', toCollection: 'pc', size: 20000 });
  const opts = async (name) => (await db.command({ listCollections: 1, filter: { name } }, { promoteLongs: false }))
    .cursor.firstBatch[0].options;
  const m = await opts('m');
  assert.deepEqual(Object.keys(m), ['capped', 'size', 'max', 'validator']);
  assert.equal(m.size, 10000, 'an int, not a long');
  assert.equal(m.max, 3);
  const pc = await opts('pc');
  assert.deepEqual(Object.keys(pc), ['capped', 'size']);
  assert.equal(pc.size, 20000);
  assert.equal(await db.collection('m').countDocuments(), 2);
});
