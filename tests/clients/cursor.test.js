'use strict';
// Cursor batching as mongod does it: 101-document default first batch, 16 MiB
// reply cap, limit/batchSize interplay, large driver batches split by
// maxMessageSizeBytes, tailable cursors refused on normal collections.
const assert = require('node:assert/strict');
const { Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

function cid(v) { return Long.isLong(v) ? v : Long.fromNumber(Number(v)); }

h.test('find without batchSize returns 101 documents in the first batch', async () => {
  const db = srv.freshDb('default101');
  await db.collection('c').insertMany(Array.from({ length: 250 }, (_, i) => ({ _id: i })));
  const r = await db.command({ find: 'c', sort: { _id: 1 } });
  assert.equal(r.cursor.firstBatch.length, 101);
  assert.notEqual(Number(r.cursor.id), 0);
  const g = await db.command({ getMore: cid(r.cursor.id), collection: 'c' });
  assert.equal(g.cursor.nextBatch.length, 149, 'getMore without batchSize returns the rest');
  assert.equal(Number(g.cursor.id), 0);
  assert.equal(g.cursor.nextBatch[0]._id, 101);
});

h.test('aggregate without a batchSize also returns 101 documents first', async () => {
  const db = srv.freshDb('agg101');
  await db.collection('c').insertMany(Array.from({ length: 150 }, (_, i) => ({ _id: i })));
  const r = await db.command({ aggregate: 'c', pipeline: [{ $sort: { _id: 1 } }], cursor: {} });
  assert.equal(r.cursor.firstBatch.length, 101);
  const r0 = await db.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: 0 } });
  assert.equal(r0.cursor.firstBatch.length, 0);
  assert.notEqual(Number(r0.cursor.id), 0);
});

h.test('a reply batch is capped at 16 MiB', async () => {
  const db = srv.freshDb('cap16');
  const c = db.collection('c');
  const pad = 'p'.repeat(1024 * 1024);
  for (let i = 0; i < 40; i += 10) {
    await c.insertMany(Array.from({ length: 10 }, (_, j) => ({ _id: i + j, pad })));
  }
  const r = await db.command({ find: 'c', batchSize: 1000, sort: { _id: 1 } });
  const n1 = r.cursor.firstBatch.length;
  assert.ok(n1 >= 1 && n1 <= 16, `first batch holds ${n1} 1 MiB documents`);
  assert.notEqual(Number(r.cursor.id), 0);
  let total = n1;
  let id = cid(r.cursor.id);
  while (Number(id) !== 0) {
    const g = await db.command({ getMore: id, collection: 'c', batchSize: 1000 });
    assert.ok(g.cursor.nextBatch.length <= 16, `getMore batch of ${g.cursor.nextBatch.length}`);
    total += g.cursor.nextBatch.length;
    id = cid(g.cursor.id);
  }
  assert.equal(total, 40);
  assert.equal((await c.find().toArray()).length, 40);
});

h.test('limit with a smaller batchSize stops exactly at the limit', async () => {
  const db = srv.freshDb('limitbatch');
  await db.collection('c').insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i })));
  const r = await db.command({ find: 'c', limit: 5, batchSize: 2, sort: { _id: 1 } });
  assert.deepEqual(r.cursor.firstBatch.map((d) => d._id), [0, 1]);
  let got = r.cursor.firstBatch.length;
  let id = cid(r.cursor.id);
  while (Number(id) !== 0) {
    const g = await db.command({ getMore: id, collection: 'c', batchSize: 2 });
    got += g.cursor.nextBatch.length;
    id = cid(g.cursor.id);
  }
  assert.equal(got, 5);
});

h.test('getMore errors: wrong collection 13, wrong type 14, unknown id 43', async () => {
  const db = srv.freshDb('getmoreerr');
  await db.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const r = await db.command({ find: 'c', batchSize: 2 });
  await h.expectCode(db.command({ getMore: cid(r.cursor.id), collection: 'other' }), 13);
  await h.expectCode(db.command({ getMore: 'abc', collection: 'c' }), 14);
  await h.expectCode(db.command({ getMore: Long.fromNumber(987654321), collection: 'c' }), 43);
  // The cursor is still usable after the failed attempts.
  const g = await db.command({ getMore: cid(r.cursor.id), collection: 'c' });
  assert.equal(g.cursor.nextBatch.length, 8);
});

h.test('cursor id 0 is never a cursor: getMore 0 is 43 and killCursors [0] reports it not found, whatever cursors are open or were killed (found by helper-65: it read freed memory or reached another live cursor)', async () => {
  const db = srv.freshDb('cursor0');
  await db.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const killed = await db.command({ find: 'c', batchSize: 2 });
  await db.command({ killCursors: 'c', cursors: [killed.cursor.id] });
  const live = await db.command({ find: 'c', batchSize: 2 });
  for (let i = 0; i < 3; i++) {
    await h.expectCode(db.command({ getMore: Long.fromNumber(0), collection: 'c' }), 43);
    const k = await db.command({ killCursors: 'c', cursors: [Long.fromNumber(0)] });
    assert.deepEqual(k.cursorsKilled, []);
    assert.deepEqual(k.cursorsNotFound.map(Number), [0]);
  }
  const g = await db.command({ getMore: cid(live.cursor.id), collection: 'c', batchSize: 2 });
  assert.deepEqual(g.cursor.nextBatch, [{ _id: 2 }, { _id: 3 }], 'the live cursor is untouched');
  assert.equal((await db.command({ ping: 1 })).ok, 1, 'the server is up');
});

h.test('a getMore after its collection was dropped, renamed, dropped with its database or dropped and created again fails with 175 QueryPlanKilled, not a short batch', async () => {
  // PlanExecutor restore (requires_collection_stage.cpp): "collection dropped. UUID ..." / "collection renamed from ...".
  const db = srv.freshDb('gmdrop');
  const open = async (name) => {
    await db.collection(name).insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
    return cid((await db.command({ find: name, batchSize: 2 })).cursor.id);
  };
  const getMore = (id, name) => db.command({ getMore: id, collection: name });
  let id = await open('dropped');
  await db.collection('dropped').drop();
  await h.expectCode(getMore(id, 'dropped'), 175, /collection dropped\. UUID [0-9a-f-]{36}$/);
  id = await open('renamed');
  await db.collection('renamed').rename('renamed2');
  await h.expectCode(getMore(id, 'renamed'), 175,
    new RegExp(`collection renamed from '${db.databaseName}\\.renamed' to '${db.databaseName}\\.renamed2'\\. UUID `));
  id = await open('again');
  await db.collection('again').drop();
  await db.collection('again').insertOne({ _id: 'new' });
  await h.expectCode(getMore(id, 'again'), 175, /collection dropped/);
  // A cursor whose scan had finished ends normally: nothing was cut short.
  const done = await db.command({ find: 'renamed2', batchSize: 20 });
  assert.equal(done.cursor.id.toString(), '0');
  const other = srv.freshDb('gmdropdb');
  await other.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const oid = cid((await other.command({ find: 'c', batchSize: 2 })).cursor.id);
  await other.dropDatabase();
  await h.expectCode(other.command({ getMore: oid, collection: 'c' }), 175, /collection dropped/);
});

h.test('a tailable cursor on a normal collection is refused (BadValue 2)', async () => {
  const db = srv.freshDb('tailable');
  await db.collection('c').insertOne({ a: 1 });
  await h.expectCode(db.command({ find: 'c', tailable: true }), 2);
});

h.test('insertMany larger than 48 MB is split by the driver and fully stored', async () => {
  const c = srv.freshDb('split48').collection('c');
  const pad = 'q'.repeat(1024 * 1024);
  const docs = Array.from({ length: 60 }, (_, i) => ({ _id: i, pad }));
  const r = await c.insertMany(docs);
  assert.equal(r.insertedCount, 60);
  assert.equal(await c.countDocuments(), 60);
});

h.test('one OP_MSG near the 48 MB limit is accepted', async () => {
  const db = srv.freshDb('near48');
  const pad = 'r'.repeat(1024 * 1024);
  const docs = Array.from({ length: 45 }, (_, i) => ({ _id: i, pad }));
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command(db.databaseName, { insert: 'c' }, { documents: docs });
    assert.ok(r, 'reply received');
    assert.equal(r.ok, 1, JSON.stringify(r).slice(0, 300));
    assert.equal(r.n, 45);
  } finally { conn.close(); }
});

h.test('100,000 small documents in one insertMany (maxWriteBatchSize) are all stored', async () => {
  const c = srv.freshDb('maxbatch').collection('c');
  const r = await c.insertMany(Array.from({ length: 100000 }, (_, i) => ({ _id: i })));
  assert.equal(r.insertedCount, 100000);
  assert.equal(await c.estimatedDocumentCount(), 100000);
});

h.test('cursors on different connections are independent; many open cursors', async () => {
  const db = srv.freshDb('manycursors');
  await db.collection('c').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i })));
  const ids = [];
  for (let k = 0; k < 30; k++) {
    const r = await db.command({ find: 'c', batchSize: 1, sort: { _id: 1 } });
    ids.push(cid(r.cursor.id));
  }
  assert.equal(new Set(ids.map(String)).size, 30, 'cursor ids are unique');
  const other = await srv.newClient();
  // Another client's commands run in its own (implicit) session: as in mongod, the cursor is not its to continue.
  await h.expectCode(other.db(db.databaseName).command({ getMore: h.cursorId(ids[7]), collection: 'c', batchSize: 3 }), 50738);
  // A cursor opened outside any session may be continued from another connection (same user, no auth).
  const c1 = await h.rawConnect(srv.port);
  const c2 = await h.rawConnect(srv.port);
  try {
    const f = await c1.command(db.databaseName, { find: 'c', batchSize: 1, sort: { _id: 1 } });
    const g = await c2.command(db.databaseName, { getMore: h.cursorId(f.cursor.id), collection: 'c', batchSize: 3 });
    assert.deepEqual(g.cursor.nextBatch.map((d) => d._id), [1, 2, 3]);
    await c2.command(db.databaseName, { killCursors: 'c', cursors: [h.cursorId(f.cursor.id)] });
  } finally { c1.close(); c2.close(); }
  const k = await db.command({ killCursors: 'c', cursors: ids });
  assert.equal(k.cursorsKilled.length, 30);
});
