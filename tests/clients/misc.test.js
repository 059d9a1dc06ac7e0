'use strict';
// Concurrency across clients, sessions and transactions on a standalone,
// write concerns, and assorted value handling.
const assert = require('node:assert/strict');
const { Long, UUID } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

h.test('concurrent writers on several clients: no lost or duplicated documents', async () => {
  const db = srv.freshDb('conc');
  const clients = await Promise.all(Array.from({ length: 4 }, () => srv.newClient({ maxPoolSize: 5 })));
  await Promise.all(clients.map(async (cl, w) => {
    const c = cl.db(db.databaseName).collection('c');
    const jobs = [];
    for (let i = 0; i < 250; i++) jobs.push(c.insertOne({ _id: `${w}-${i}`, w, i }));
    await Promise.all(jobs);
  }));
  const c = db.collection('c');
  assert.equal(await c.countDocuments(), 1000);
  for (let w = 0; w < 4; w++) assert.equal(await c.countDocuments({ w }), 250);
  for (const cl of clients) await cl.close();
});

h.test('concurrent $inc on one document from many connections is atomic', async () => {
  const db = srv.freshDb('inc');
  const c = db.collection('c');
  await c.insertOne({ _id: 'counter', n: 0 });
  const clients = await Promise.all(Array.from({ length: 4 }, () => srv.newClient({ maxPoolSize: 8 })));
  await Promise.all(clients.map(async (cl) => {
    const cc = cl.db(db.databaseName).collection('c');
    await Promise.all(Array.from({ length: 200 }, () => cc.updateOne({ _id: 'counter' }, { $inc: { n: 1 } })));
  }));
  assert.equal((await c.findOne({ _id: 'counter' })).n, 800);
  for (const cl of clients) await cl.close();
});

h.test('concurrent upserts of the same key create exactly one document', async () => {
  const db = srv.freshDb('upsertrace');
  const c = db.collection('c');
  await c.createIndex({ k: 1 }, { unique: true });
  const results = await Promise.allSettled(Array.from({ length: 40 }, () =>
    c.updateOne({ k: 'same' }, { $inc: { n: 1 } }, { upsert: true })));
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  assert.equal(await c.countDocuments({ k: 'same' }), 1);
  assert.equal((await c.findOne({ k: 'same' })).n, ok);
  for (const r of results) if (r.status === 'rejected') assert.equal(r.reason.code, 11000);
});

h.test('readers see complete documents while writers run', async () => {
  const db = srv.freshDb('readwrite');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: i, a: 0, b: 0 })));
  let stop = false;
  const writer = (async () => {
    for (let k = 1; k <= 30; k++) await c.updateMany({}, { $set: { a: k, b: k } });
    stop = true;
  })();
  while (!stop) {
    const docs = await c.find().toArray();
    assert.equal(docs.length, 200);
    for (const d of docs) assert.equal(d.a, d.b, 'a document is never half-updated');
  }
  await writer;
});

h.test('a transaction on a standalone fails with IllegalOperation (20)', async () => {
  const db = srv.freshDb('txn');
  await db.collection('c').insertOne({ a: 1 });
  // Raw command, so that the driver's own transaction checks play no part.
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command(db.databaseName, {
      insert: 'c', documents: [{ a: 2 }], lsid: { id: new UUID() }, txnNumber: Long.fromNumber(1),
      startTransaction: true, autocommit: false,
    });
    assert.equal(r.ok, 0, `transaction accepted: ${JSON.stringify(r)}`);
    assert.equal(r.code, 20);
  } finally { conn.close(); }
  assert.equal(await db.collection('c').countDocuments(), 1);
});

h.test('sessions: lsid is accepted on reads and writes; endSessions works', async () => {
  const db = srv.freshDb('sessions');
  const session = srv.client.startSession();
  await db.collection('c').insertOne({ a: 1 }, { session });
  assert.equal((await db.collection('c').find({}, { session }).toArray()).length, 1);
  await session.endSession();
  const r = await srv.client.db('admin').command({ startSession: 1 });
  assert.ok(r.id && r.id.id, 'startSession returns an id');
  assert.equal(Number(r.timeoutMinutes), 30);
});

h.test('write concerns w:1, w:majority, j:true and w:0 are accepted', async () => {
  const db = srv.freshDb('wc');
  const c = db.collection('c');
  await c.insertOne({ _id: 1 }, { writeConcern: { w: 1 } });
  await c.insertOne({ _id: 2 }, { writeConcern: { w: 'majority' } });
  await c.insertOne({ _id: 3 }, { writeConcern: { w: 1, j: true } });
  const r = await c.insertOne({ _id: 4 }, { writeConcern: { w: 0 } });
  assert.equal(r.acknowledged, false);
  // A w:0 write is followed by an acknowledged read on the same pool.
  await h.sleep(100);
  assert.equal(await c.countDocuments(), 4);
});

h.test('w: 2 on a standalone is refused before writing (BadValue), through the driver too', async () => {
  const db = srv.freshDb('wc2');
  const e = await db.collection('c').insertOne({ _id: 1 }, { writeConcern: { w: 2 } }).then(() => null, (x) => x);
  assert.equal(e && e.code, 2, String(e));
  assert.match(e.message, /cannot use 'w' > 1 when a host is not replicated/);
  assert.equal(await db.collection('c').countDocuments(), 0, 'nothing was written (mongod jstest insert_one_w2)');
});

h.test('writeConcern {j: true, fsync: true} is 9 FailedToParse before writing, as mongod\'s WriteConcernOptions::parse (helper-67)', async () => {
  const db = srv.freshDb('wcjf');
  await h.expectCode(db.command({ insert: 'c', documents: [{ _id: 1 }], writeConcern: { j: true, fsync: true } }), 9,
    /^fsync and j options cannot be used together$/);
  assert.equal(await db.collection('c').countDocuments(), 0);
  // Either alone is fine.
  await db.command({ insert: 'c', documents: [{ _id: 2 }], writeConcern: { fsync: true } });
  await db.command({ insert: 'c', documents: [{ _id: 3 }], writeConcern: { j: true, fsync: false } });
  assert.equal(await db.collection('c').countDocuments(), 2);
});

h.test('UTF-8 strings, long keys and many fields round-trip', async () => {
  const c = srv.freshDb('utf8').collection('c');
  const doc = { _id: 'ключ', s: 'héllo wörld ✓ 日本語 🎉', ['k'.repeat(1000)]: 1 };
  for (let i = 0; i < 2000; i++) doc[`f${i}`] = i;
  await c.insertOne(doc);
  const got = await c.findOne({ _id: 'ключ' });
  assert.deepEqual(got, doc);
  assert.equal((await c.find({ s: /日本/ }).toArray()).length, 1);
});

h.test('string comparison is by UTF-8 bytes (binary), not locale', async () => {
  const c = srv.freshDb('strcmp').collection('c');
  await c.insertMany([{ _id: 1, s: 'b' }, { _id: 2, s: 'B' }, { _id: 3, s: 'é' }, { _id: 4, s: 'a' }, { _id: 5, s: 'ab' }]);
  const order = (await c.find().sort({ s: 1 }).toArray()).map((d) => d.s);
  assert.deepEqual(order, ['B', 'a', 'ab', 'b', 'é']);
});

h.test('large Long and double values keep their precision and type', async () => {
  const c = srv.freshDb('precision').collection('c');
  await c.insertOne({ _id: 1, big: Long.fromString('9223372036854775807'), neg: Long.fromString('-9223372036854775808'), d: 0.1 + 0.2, inf: Infinity, nan: NaN });
  const d = await c.findOne({ _id: 1 }, { promoteLongs: false });
  assert.equal(d.big.toString(), '9223372036854775807');
  assert.equal(d.neg.toString(), '-9223372036854775808');
  assert.equal(d.d, 0.30000000000000004);
  assert.equal(d.inf, Infinity);
  assert.ok(Number.isNaN(d.nan));
  assert.equal(await c.countDocuments({ nan: NaN }), 1);
});

h.test('$inc overflowing int32 promotes to int64', async () => {
  const c = srv.freshDb('overflow').collection('c');
  await c.insertOne({ _id: 1, n: 2147483647 });
  await c.updateOne({ _id: 1 }, { $inc: { n: 1 } });
  const d = await c.findOne({ _id: 1 }, { promoteLongs: false });
  assert.ok(d.n instanceof Long, 'promoted to long');
  assert.equal(d.n.toString(), '2147483648');
});

h.test('many collections in one database', async () => {
  const db = srv.freshDb('manycoll');
  for (let i = 0; i < 60; i++) await db.collection(`c${i}`).insertOne({ i });
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
  assert.equal(names.length, 60);
  assert.equal(Number((await db.command({ dbStats: 1 })).collections), 60);
});

h.test('a cursor survives inserts into its collection between batches', async () => {
  const c = srv.freshDb('cursorwrites').collection('c');
  await c.insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: i })));
  const cur = c.find({}, { batchSize: 10 }).sort({ _id: 1 });
  const seen = [];
  for await (const d of cur) {
    seen.push(d._id);
    if (d._id === 15) await c.deleteOne({ _id: 95 });
  }
  assert.ok(seen.length >= 99 && seen.length <= 100, `saw ${seen.length}`);
  assert.deepEqual(seen.slice(0, 20), Array.from({ length: 20 }, (_, i) => i));
});

h.test('generic command options are accepted: comment, maxTimeMS, readConcern, allowDiskUse, let', async () => {
  const db = srv.freshDb('generic');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  const r = await c.find({ a: { $gte: 1 } }, { comment: 'hello', maxTimeMS: 5000, readConcern: { level: 'local' }, allowDiskUse: true }).toArray();
  assert.equal(r.length, 2);
  const r2 = await db.command({ find: 'c', filter: { $expr: { $eq: ['$a', '$$target'] } }, let: { target: 2 } });
  assert.deepEqual(r2.cursor.firstBatch, [{ _id: 2, a: 2 }]);
  const r3 = await c.aggregate([{ $match: {} }], { comment: { tag: 1 }, maxTimeMS: 5000, allowDiskUse: true }).toArray();
  assert.equal(r3.length, 2);
  await c.updateOne({ _id: 1 }, { $set: { b: 1 } }, { comment: 'upd' });
  await c.deleteOne({ _id: 2 }, { comment: 'del' });
  assert.equal(await c.countDocuments({}, { comment: 'cnt', maxTimeMS: 5000 }), 1);
});

h.test('hint by index name and by key pattern', async () => {
  const c = srv.freshDb('hint').collection('c');
  await c.insertMany([{ a: 1 }, { a: 2 }]);
  await c.createIndex({ a: 1 });
  assert.equal((await c.find({ a: 2 }).hint('a_1').toArray()).length, 1);
  assert.equal((await c.find({ a: 2 }).hint({ a: 1 }).toArray()).length, 1);
  assert.equal((await c.find({}).hint({ $natural: 1 }).toArray()).length, 2);
});

h.test('currentOp and killOp are available', async () => {
  const r = await srv.client.db('admin').command({ currentOp: 1 });
  assert.equal(r.ok, 1);
  assert.ok(Array.isArray(r.inprog));
});

h.test('listCommands lists the CRUD commands; isdbgrid is not a command (not a mongos)', async () => {
  const admin = srv.client.db('admin');
  const lc = await admin.command({ listCommands: 1 });
  assert.equal(lc.ok, 1);
  for (const name of ['find', 'insert', 'update', 'delete', 'aggregate', 'hello', 'getMore']) {
    assert.ok(lc.commands[name], `listCommands includes ${name}`);
  }
  // mongod is not a mongos: isdbgrid is not a command.
  await h.expectCode(admin.command({ isdbgrid: 1 }), 59);
});

h.test('connecting with credentials for a user that does not exist fails with AuthenticationFailed (18)', async () => {
  const { MongoClient } = require('mongodb');
  const uri = `mongodb://nouser:nopass@127.0.0.1:${srv.port}/?directConnection=true&serverSelectionTimeoutMS=5000&authSource=admin`;
  const cl = new MongoClient(uri);
  try {
    await h.expectCode(cl.connect(), 18);
  } finally { await cl.close().catch(() => {}); }
  // The server keeps serving unauthenticated clients.
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
});

h.test('an in-memory replica set (--inMemory --replSet) initiates, elects itself and serves change streams and transactions', async () => {
  // Its own config write must not ask for j: true, which an in-memory server refuses (code 2).
  const own = new h.MayflyServer({ args: ['--inMemory', '--replSet', 'rsmem'] });
  await own.start();
  const { MongoClient } = require('mongodb');
  const direct = new MongoClient(own.uri);
  let cl;
  try {
    await direct.connect();
    assert.equal((await direct.db('admin').command({ replSetInitiate: {} })).ok, 1);
    await h.waitFor(async () => (await direct.db('admin').command({ hello: 1 })).isWritablePrimary === true,
      'the in-memory member becomes primary', 15000);
    cl = new MongoClient(`mongodb://127.0.0.1:${own.port}/?replicaSet=rsmem&serverSelectionTimeoutMS=10000`);
    await cl.connect();
    const c = cl.db('rsmem').collection('c');
    const cs = c.watch();
    assert.equal(await cs.tryNext(), null); /* opens the stream before the write */
    await c.insertOne({ _id: 1 });
    const ev = await cs.next();
    assert.equal(ev.operationType, 'insert');
    assert.deepEqual(ev.documentKey, { _id: 1 });
    await cs.close();
    const s = cl.startSession();
    await s.withTransaction(async () => {
      await c.insertOne({ _id: 2 }, { session: s });
      await c.updateOne({ _id: 1 }, { $set: { t: true } }, { session: s });
    });
    await s.endSession();
    assert.deepEqual(await c.find({}).sort({ _id: 1 }).toArray(), [{ _id: 1, t: true }, { _id: 2 }]);
  } finally {
    if (cl) await cl.close().catch(() => {});
    await direct.close().catch(() => {});
    await own.stop();
    own.cleanup();
  }
});

h.test('j: true on a server with no journal (--inMemory) is refused before writing, as mongod on an ephemeral engine', async () => {
  const own = new h.MayflyServer({ args: ['--inMemory'] });
  await own.start();
  const { MongoClient } = require('mongodb');
  const cl = new MongoClient(own.uri);
  try {
    await cl.connect();
    const c = cl.db('wcj').collection('c');
    const e = await c.insertOne({ _id: 1 }, { writeConcern: { j: true } }).then(() => null, (x) => x);
    assert.equal(e && e.code, 2, String(e));
    assert.match(e.message, /cannot use 'j' option when a host does not have journaling enabled/);
    await c.insertOne({ _id: 2 }, { writeConcern: { j: false } });
    assert.deepEqual(await c.find({}).toArray(), [{ _id: 2 }]);
  } finally {
    await cl.close().catch(() => {});
    await own.stop();
    own.cleanup();
  }
});
