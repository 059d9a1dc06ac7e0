'use strict';
/*
 * Change streams ($changeStream) on a replica set, through the real driver's
 * collection.watch(), db.watch(), client.watch() and Mongoose's
 * Model.watch(): every event's shape (mongod 8.0), $match filtering,
 * fullDocument updateLookup, resuming (resumeAfter, startAfter,
 * startAtOperationTime, the driver's own resume after its cursor is
 * killed), postBatchResumeToken, awaitData getMores, a stream on a
 * secondary, 286 ChangeStreamHistoryLost, the option errors, and a
 * standalone's 40573 (unchanged).
 */
const assert = require('node:assert/strict');
const { Timestamp } = require('mongodb');
const mongoose = require('mongoose');
const h = require('./harness');
const R = require('./rs_harness');

const rs = R.useReplSet(3, { args: ['--setParameter', 'enableTestCommands=1'] });
const standalone = h.useServer();
/* A 1-member set with a 1 MB oplog, to roll it over under a stream. */
const small = R.useReplSet(1, { args: ['--oplogSize', '1'] });

/* The stream's next change, or a failure after ms. */
async function next(stream, ms = 10000) {
  let timer;
  const t = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`no change within ${ms} ms`)), ms); });
  try {
    return await Promise.race([stream.next(), t]);
  } finally {
    clearTimeout(timer);
  }
}

/* A stream whose aggregate has run (so later writes are after its start). */
async function open(target, pipeline = [], opts = {}) {
  const s = target.watch(pipeline, { maxAwaitTimeMS: 200, ...opts });
  await s.tryNext(); /* sends the aggregate */
  return s;
}

const isTok = (t) => t && typeof t._data === 'string' && /^[0-9A-F]+$/.test(t._data);

R.test('collection stream: insert, update, replace, delete and their shapes', async () => {
  const db = rs.freshDb('shapes');
  const c = db.collection('c');
  await c.insertOne({ _id: 0 });
  const s = await open(c);
  try {
    await c.insertOne({ _id: 1, a: 1, sub: { x: 1, y: 2 }, gone: true });
    await c.updateOne({ _id: 1 }, { $set: { a: 2, 'sub.x': 5 }, $unset: { gone: 1 } });
    await c.replaceOne({ _id: 1 }, { b: 'r' });
    await c.deleteOne({ _id: 1 });

    const ins = await next(s);
    assert.deepEqual(Object.keys(ins), ['_id', 'operationType', 'clusterTime', 'wallTime', 'fullDocument', 'ns', 'documentKey']);
    assert.equal(ins.operationType, 'insert');
    assert.ok(isTok(ins._id), JSON.stringify(ins._id));
    assert.equal(ins.clusterTime._bsontype, 'Timestamp');
    assert.ok(ins.wallTime instanceof Date);
    assert.deepEqual(ins.fullDocument, { _id: 1, a: 1, sub: { x: 1, y: 2 }, gone: true });
    assert.deepEqual(ins.ns, { db: db.databaseName, coll: 'c' });
    assert.deepEqual(ins.documentKey, { _id: 1 });

    const upd = await next(s);
    assert.equal(upd.operationType, 'update');
    assert.deepEqual(Object.keys(upd), ['_id', 'operationType', 'clusterTime', 'wallTime', 'ns', 'documentKey', 'updateDescription']);
    assert.deepEqual(upd.updateDescription, { updatedFields: { a: 2, 'sub.x': 5 }, removedFields: ['gone'], truncatedArrays: [] });
    assert.deepEqual(upd.documentKey, { _id: 1 });

    const rep = await next(s);
    assert.equal(rep.operationType, 'replace');
    assert.deepEqual(rep.fullDocument, { _id: 1, b: 'r' });
    assert.deepEqual(rep.documentKey, { _id: 1 });

    const del = await next(s);
    assert.equal(del.operationType, 'delete');
    assert.deepEqual(Object.keys(del), ['_id', 'operationType', 'clusterTime', 'wallTime', 'ns', 'documentKey']);
    assert.deepEqual(del.documentKey, { _id: 1 });

    /* Tokens and cluster times only go forward. */
    const toks = [ins, upd, rep, del].map((e) => e._id._data);
    assert.deepEqual([...toks].sort(), toks);
    assert.ok(new Set(toks).size === 4);
    assert.ok(R.tsCompare(ins.clusterTime, del.clusterTime) < 0);
  } finally {
    await s.close();
  }
});

R.test('updateDescription inside arrays, as mongod\'s oplog diffs: $push appends by index, a $set into an element names its path, a pipeline that shortens an array gives truncatedArrays, a rewritten array is reported whole', async () => {
  // The drivers' change-streams spec test "Test array truncation"; mongod's doc_diff.cpp.
  const c = rs.freshDb('arrays').collection('c');
  await c.insertOne({ _id: 1, array: ['foo', { a: 'bar' }, 1, 2, 3], nums: [1, 2, 3, 4], nest: [[1, 2], [3]] });
  const s = await open(c);
  try {
    await c.updateOne({ _id: 1 }, [{ $set: { array: ['foo', { a: 'bar' }] } }]);
    await c.updateOne({ _id: 1 }, { $push: { array: 7 } });
    await c.updateOne({ _id: 1 }, { $set: { 'array.1.a': 'baz' } });
    await c.updateOne({ _id: 1 }, { $set: { 'nums.0': 10 } });
    await c.updateOne({ _id: 1 }, { $pull: { nums: 2 } });
    await c.updateOne({ _id: 1 }, { $set: { nums: [7, 8, 9] } });
    await c.updateOne({ _id: 1 }, { $push: { 'nest.1': 4 }, $unset: { 'array.1.a': 1 } });
    const got = [];
    for (let i = 0; i < 7; i++) got.push((await next(s)).updateDescription);
    assert.deepEqual(got[0], { updatedFields: {}, removedFields: [], truncatedArrays: [{ field: 'array', newSize: 2 }] });
    assert.deepEqual(got[1], { updatedFields: { 'array.2': 7 }, removedFields: [], truncatedArrays: [] });
    assert.deepEqual(got[2], { updatedFields: { 'array.1.a': 'baz' }, removedFields: [], truncatedArrays: [] });
    assert.deepEqual(got[3], { updatedFields: { 'nums.0': 10 }, removedFields: [], truncatedArrays: [] });
    assert.deepEqual(got[4], { updatedFields: { nums: [10, 3, 4] }, removedFields: [], truncatedArrays: [] }, '$pull from the middle: whole');
    assert.deepEqual(got[5], { updatedFields: { nums: [7, 8, 9] }, removedFields: [], truncatedArrays: [] }, 'a new array: whole');
    assert.deepEqual(got[6], { updatedFields: { 'nest.1.1': 4 }, removedFields: ['array.1.a'], truncatedArrays: [] });
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, array: ['foo', {}, 7], nums: [7, 8, 9], nest: [[1, 2], [3, 4]] });
  } finally {
    await s.close();
  }
});

R.test('a transaction\'s events carry its lsid and txnNumber (as mongod\'s), so an application can group them; other events do not', async () => {
  const db = rs.freshDb('txnevents');
  const c = db.collection('c');
  await db.createCollection('c', { writeConcern: { w: 'majority' } });
  const s = await open(c);
  const session = rs.client.startSession();
  try {
    await c.insertOne({ _id: 0 });
    await session.withTransaction(async () => {
      await c.insertOne({ _id: 1 }, { session });
      await c.updateOne({ _id: 0 }, { $set: { t: true } }, { session });
    });
    const plain = await next(s);
    assert.equal(plain.lsid, undefined);
    assert.equal(plain.txnNumber, undefined);
    const ins = await next(s);
    const upd = await next(s);
    for (const ev of [ins, upd]) {
      assert.ok(ev.lsid && ev.lsid.id, JSON.stringify(ev));
      assert.equal(ev.lsid.id.toString('hex'), session.id.id.toString('hex'), 'the session\'s id');
      assert.equal(ev.lsid.uid.length(), 32, 'the user\'s SHA-256, as mongod keys sessions');
      assert.equal(Number(ev.txnNumber), Number(session.serverSession.txnNumber));
    }
    // mongod's ChangeStreamDefaultEventTransformation adds txnNumber and lsid before the resume token.
    assert.deepEqual(Object.keys(upd).slice(0, 3), ['txnNumber', 'lsid', '_id']);
    assert.equal(ins.operationType, 'insert');
    assert.equal(upd.operationType, 'update');
    // One clusterTime for the whole transaction, as mongod's (one applyOps entry); later than the plain insert's.
    assert.ok(ins.clusterTime.equals(upd.clusterTime), `${ins.clusterTime} vs ${upd.clusterTime}`);
    assert.ok(plain.clusterTime.lessThan(ins.clusterTime));
    assert.notDeepEqual(ins._id, upd._id, 'each event keeps its own resume token');
    // Starting at the transaction's clusterTime gives all of its events; resuming after the first gives the rest.
    const at = c.watch([], { maxAwaitTimeMS: 200, startAtOperationTime: ins.clusterTime });
    try {
      assert.deepEqual([(await next(at)).operationType, (await next(at)).operationType], ['insert', 'update']);
    } finally { await at.close(); }
    const after = c.watch([], { maxAwaitTimeMS: 200, resumeAfter: ins._id });
    try {
      assert.equal((await next(after)).operationType, 'update');
    } finally { await after.close(); }
  } finally {
    await session.endSession();
    await s.close();
  }
});

R.test('a big document: a small $set and a $set that rewrites most of it are both update events with their diff, as mongod logs every operator update ($v: 2)', async () => {
  const db = rs.freshDb('bigdiff');
  const c = db.collection('c');
  const big = (ch) => ch.repeat(1536 * 1024);
  await c.insertOne({ _id: 1, a: big('x') });
  const s = await open(c);
  try {
    await c.updateOne({ _id: 1 }, { $set: { n: 1 } });
    await c.updateOne({ _id: 1 }, { $set: { a: big('y') } });
    const small = await next(s);
    assert.equal(small.operationType, 'update');
    assert.deepEqual(small.updateDescription.updatedFields, { n: 1 });
    const whole = await next(s);
    assert.equal(whole.operationType, 'update', 'helper-122: this was a replace, which a watcher of updates misses');
    assert.deepEqual(Object.keys(whole.updateDescription.updatedFields), ['a']);
    assert.equal(whole.updateDescription.updatedFields.a.length, 1536 * 1024);
    assert.equal(whole.updateDescription.updatedFields.a[0], 'y');
    assert.equal(whole.fullDocument, undefined);
  } finally {
    await s.close();
  }
  /* Replication is unaffected: every member has the final document. */
  const docs = await rs.waitForReplication(db.databaseName, 'c', { timeoutMs: 20000 });
  assert.equal(docs[0].a[0], 'y');
});

R.test('documents near 16 MB: their inserts and updates reach the oplog, the stream and every member (an entry may be 16 MB + 16 KB, as mongod\'s; an update too big to log with its images is logged as its diff)', { timeout: 120000 }, async () => {
  const db = rs.freshDb('nearmax');
  const c = db.collection('c');
  const s = await open(c);
  const MAJ = { writeConcern: { w: 'majority', wtimeout: 30000 } };
  try {
    await c.insertOne({ _id: 1, s: 'x'.repeat(16 * 1024 * 1024 - 100) }, MAJ);
    await c.insertOne({ _id: 2, a: 'y'.repeat(9 * 1024 * 1024) }, MAJ);
    await c.updateOne({ _id: 2 }, { $set: { t: 'z'.repeat(6 * 1024 * 1024) } }, MAJ);
    await c.insertOne({ _id: 3 }, MAJ);
    const big = await next(s, 30000);
    assert.equal(big.operationType, 'insert');
    assert.equal(big.documentKey._id, 1, 'the near-16 MB insert is an event, not a gap');
    assert.equal(big.fullDocument.s.length, 16 * 1024 * 1024 - 100);
    assert.equal((await next(s, 30000)).documentKey._id, 2);
    const upd = await next(s, 30000);
    assert.equal(upd.operationType, 'update');
    assert.equal(upd.documentKey._id, 2);
    assert.equal(upd.updateDescription.updatedFields.t.length, 6 * 1024 * 1024);
    assert.equal((await next(s, 30000)).documentKey._id, 3);
  } finally {
    await s.close();
  }
  const ns = `${db.databaseName}.c`;
  const entries = await rs.client.db('local').collection('oplog.rs').find({ ns }, { projection: { op: 1, 'o2._id': 1, 'o._id': 1 } }).toArray();
  assert.deepEqual(entries.map((e) => [e.op, e.o2 ? e.o2._id : e.o._id]), [['i', 1], ['i', 2], ['u', 2], ['i', 3]]);
  // Every member holds them.
  const docs = await rs.waitForReplication(db.databaseName, 'c', { timeoutMs: 60000 });
  assert.deepEqual(docs.map((d) => d._id), [1, 2, 3]);
  assert.equal(docs[1].t.length, 6 * 1024 * 1024);
});

R.test('drop and rename end a collection stream with invalidate; startAfter the invalidate goes on', async () => {
  const db = rs.freshDb('inval');
  const c = db.collection('c');
  await c.insertOne({ _id: 1 });
  const s = await open(c);
  await c.drop();
  const drop = await next(s);
  assert.equal(drop.operationType, 'drop');
  assert.deepEqual(drop.ns, { db: db.databaseName, coll: 'c' });
  const inv = await next(s);
  assert.equal(inv.operationType, 'invalidate');
  assert.deepEqual(Object.keys(inv), ['_id', 'operationType', 'clusterTime', 'wallTime']);
  assert.ok(inv._id._data > drop._id._data);
  assert.ok(s.closed || (await s.tryNext().then(() => false, () => true)) || s.closed, 'the stream is over');
  await s.close();

  /* startAfter the invalidate: the recreated collection's inserts. */
  await c.insertOne({ _id: 2 });
  const s2 = db.collection('c').watch([], { startAfter: inv._id });
  try {
    const ev = await next(s2);
    assert.equal(ev.operationType, 'insert');
    assert.deepEqual(ev.documentKey, { _id: 2 });
  } finally {
    await s2.close();
  }
  /* resumeAfter an invalidate is refused (260), as mongod. */
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: { resumeAfter: inv._id } }], cursor: {} }), 260);

  const d = db.collection('d');
  await d.insertOne({ _id: 1 });
  const s3 = await open(d);
  await d.rename('d2');
  const ren = await next(s3);
  assert.equal(ren.operationType, 'rename');
  assert.deepEqual(ren.ns, { db: db.databaseName, coll: 'd' });
  assert.deepEqual(ren.to, { db: db.databaseName, coll: 'd2' });
  assert.equal((await next(s3)).operationType, 'invalidate');
  await s3.close();
});

R.test('pipeline stages after $changeStream filter and reshape events', async () => {
  const c = rs.freshDb('match').collection('c');
  const s = await open(c, [{ $match: { operationType: 'insert', 'fullDocument.keep': true } }, { $addFields: { extra: 1 } }, { $project: { wallTime: 0 } }]);
  try {
    await c.insertOne({ _id: 1, keep: false });
    await c.updateOne({ _id: 1 }, { $set: { keep: true } });
    await c.insertOne({ _id: 2, keep: true });
    const ev = await next(s);
    assert.deepEqual(ev.documentKey, { _id: 2 });
    assert.equal(ev.extra, 1);
    assert.equal(ev.wallTime, undefined);
  } finally {
    await s.close();
  }
  /* A stage that would lose the token: 280; a blocking stage: 20. */
  const raw = rs.client.db(c.dbName);
  const r = await raw.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }, { $project: { _id: 0 } }], cursor: {} });
  await c.insertOne({ _id: 3 });
  await h.expectCode((async () => {
    for (let i = 0; i < 50; i++) {
      const g = await raw.command({ getMore: h.cursorId(r.cursor.id), collection: 'c', maxTimeMS: 200 });
      if (g.cursor.nextBatch.length) return g;
    }
    return null;
  })(), 280);
  await h.expectCode(raw.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }, { $sort: { x: 1 } }], cursor: {} }), 20);
});

R.test('fullDocument: updateLookup gives the current document', async () => {
  const c = rs.freshDb('lookup').collection('c');
  await c.insertOne({ _id: 1, n: 0 });
  const s = await open(c, [], { fullDocument: 'updateLookup' });
  try {
    await c.updateOne({ _id: 1 }, { $inc: { n: 1 } });
    const ev = await next(s);
    assert.equal(ev.operationType, 'update');
    assert.deepEqual(ev.fullDocument, { _id: 1, n: 1 });
    assert.deepEqual(ev.updateDescription.updatedFields, { n: 1 });
    await c.updateOne({ _id: 1 }, { $inc: { n: 1 } });
    await c.deleteOne({ _id: 1 });
    const ev2 = await next(s);
    assert.equal(ev2.operationType, 'update');
    assert.equal(ev2.fullDocument, null, 'deleted since: null');
  } finally {
    await s.close();
  }
});

R.test('fullDocument: updateLookup looks the document up under the collection\'s collation, not the stream\'s', async () => {
  const c = rs.freshDb('lookupcoll').collection('c');
  // Two _ids a strength 2 collation ties, in a collection of the simple collation.
  await c.insertMany([{ _id: 'abc', v: 'lower' }, { _id: 'ABC', v: 'upper' }]);
  const s = await open(c, [], { fullDocument: 'updateLookup', collation: { locale: 'en', strength: 2 } });
  try {
    await c.updateOne({ _id: 'ABC' }, { $set: { n: 1 } });
    const ev = await next(s);
    assert.deepEqual(ev.documentKey, { _id: 'ABC' });
    assert.deepEqual(ev.fullDocument, { _id: 'ABC', v: 'upper', n: 1 });
  } finally {
    await s.close();
  }
});

/* Creates db.name with changeStreamPreAndPostImages enabled (w: majority, so every member has the option). */
async function withImages(db, name) {
  await db.createCollection(name, { changeStreamPreAndPostImages: { enabled: true }, writeConcern: { w: 'majority' } });
  return db.collection(name);
}

R.test('changeStreamPreAndPostImages: fullDocumentBeforeChange and fullDocument "whenAvailable" give the images of update, replace and delete events', async () => {
  // jstests/change_streams/lookup_pre_image.js, lookup_post_image.js; mongod's ChangeStreamAddPreImageStage.
  const db = rs.freshDb('images');
  const c = await withImages(db, 'c');
  const plain = db.collection('plain');
  const info = await db.listCollections({ name: 'c' }).toArray();
  assert.deepEqual(info[0].options, { changeStreamPreAndPostImages: { enabled: true } });
  await c.insertOne({ _id: 1, a: 1, sub: { x: 1 } });
  await plain.insertOne({ _id: 1, a: 1 });
  const s = await open(db, [], { fullDocumentBeforeChange: 'whenAvailable', fullDocument: 'whenAvailable' });
  try {
    await c.updateOne({ _id: 1 }, { $set: { a: 2, 'sub.x': 2 } });
    await c.replaceOne({ _id: 1 }, { b: 'r' });
    await c.deleteOne({ _id: 1 });
    await plain.updateOne({ _id: 1 }, { $set: { a: 2 } });
    await plain.insertOne({ _id: 2 });

    const upd = await next(s);
    assert.equal(upd.operationType, 'update');
    assert.deepEqual(upd.fullDocumentBeforeChange, { _id: 1, a: 1, sub: { x: 1 } });
    assert.deepEqual(upd.fullDocument, { _id: 1, a: 2, sub: { x: 2 } }, 'the post-image');
    assert.deepEqual(upd.updateDescription.updatedFields, { a: 2, 'sub.x': 2 });
    const rep = await next(s);
    assert.equal(rep.operationType, 'replace');
    assert.deepEqual(rep.fullDocumentBeforeChange, { _id: 1, a: 2, sub: { x: 2 } });
    assert.deepEqual(rep.fullDocument, { _id: 1, b: 'r' });
    const del = await next(s);
    assert.equal(del.operationType, 'delete');
    assert.deepEqual(del.fullDocumentBeforeChange, { _id: 1, b: 'r' });
    assert.equal(del.fullDocument, undefined);
    // A collection without the option has no images: null, as mongod's "whenAvailable".
    const pupd = await next(s);
    assert.equal(pupd.ns.coll, 'plain');
    assert.equal(pupd.fullDocumentBeforeChange, null);
    assert.equal(pupd.fullDocument, null);
    const pins = await next(s);
    assert.equal(pins.operationType, 'insert');
    assert.ok(!('fullDocumentBeforeChange' in pins), 'inserts have no pre-image field');
  } finally {
    await s.close();
  }

  // "required" on a collection without images: 47 NoMatchingDocument at the event, with mongod's message.
  const r = await open(plain, [], { fullDocumentBeforeChange: 'required' });
  try {
    await plain.deleteOne({ _id: 2 });
    await assert.rejects(next(r), (err) => {
      assert.equal(err.code, 47, err.message);
      assert.match(err.message, /^Executor error during getMore :: caused by :: Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: /);
      return true;
    });
  } finally {
    await r.close();
  }
  const rp = await open(plain, [], { fullDocument: 'required' });
  try {
    await plain.updateOne({ _id: 1 }, { $set: { a: 3 } });
    await assert.rejects(next(rp), (err) => {
      assert.equal(err.code, 47, err.message);
      assert.match(err.message, /^Executor error during getMore :: caused by :: Change stream was configured to require a post-image for all update events, but the post-image was not found/);
      return true;
    });
  } finally {
    await rp.close();
  }
});

R.test('changeStreamPreAndPostImages through collMod: enabling it records images from then on, disabling removes the option; a TTL deletion\'s event carries the expired document', async () => {
  const db = rs.freshDb('images_mod');
  const c = db.collection('sessions');
  await c.insertOne({ _id: 's1', user: 'ann', n: 0 }, { writeConcern: { w: 'majority' } });
  const s = await open(c, [], { fullDocumentBeforeChange: 'whenAvailable' });
  try {
    await c.updateOne({ _id: 's1' }, { $inc: { n: 1 } });
    assert.equal((await next(s)).fullDocumentBeforeChange, null, 'not recorded before collMod');
    await db.command({ collMod: 'sessions', changeStreamPreAndPostImages: { enabled: true } });
    assert.deepEqual((await db.listCollections({ name: 'sessions' }).toArray())[0].options,
      { changeStreamPreAndPostImages: { enabled: true } });
    await c.updateOne({ _id: 's1' }, { $inc: { n: 1 } });
    assert.deepEqual((await next(s)).fullDocumentBeforeChange, { _id: 's1', user: 'ann', n: 1 });

    // The TTL monitor's deletions are deletes like any: the event carries what expired.
    await c.createIndex({ lastSeen: 1 }, { expireAfterSeconds: 60 });
    const expired = { _id: 's2', user: 'bob', lastSeen: new Date(Date.now() - 3600 * 1000) };
    await c.insertOne(expired);
    assert.equal((await next(s)).operationType, 'insert');
    const del = await next(s, 30000);
    assert.equal(del.operationType, 'delete');
    assert.deepEqual(del.documentKey, { _id: 's2' });
    assert.deepEqual(del.fullDocumentBeforeChange, expired, 'the TTL deletion\'s pre-image');

    await db.command({ collMod: 'sessions', changeStreamPreAndPostImages: { enabled: false } });
    assert.deepEqual((await db.listCollections({ name: 'sessions' }).toArray())[0].options, {}, 'false removes the option');
    await c.updateOne({ _id: 's1' }, { $inc: { n: 1 } });
    assert.equal((await next(s)).fullDocumentBeforeChange, null, 'not recorded after it is disabled');
  } finally {
    await s.close();
  }
});

R.test('changeStreamPreAndPostImages errors as mongod: the option\'s shape (14, 40414, 40415), admin/config/local and views (72), an unknown fullDocumentBeforeChange (2)', async () => {
  const db = rs.freshDb('images_err');
  await h.expectCode(db.createCollection('a', { changeStreamPreAndPostImages: { enabled: 1 } }), 14);
  await h.expectCode(db.createCollection('a', { changeStreamPreAndPostImages: {} }), 40414);
  await h.expectCode(db.createCollection('a', { changeStreamPreAndPostImages: { enabled: true, x: 1 } }), 40415);
  await h.expectCode(db.createCollection('a', { changeStreamPreAndPostImages: true }), 14);
  await h.expectCode(db.createCollection('v', { viewOn: 'a', pipeline: [], changeStreamPreAndPostImages: { enabled: true } }), 72);
  await h.expectCode(rs.client.db('admin').createCollection(`pi_${process.pid}`, { changeStreamPreAndPostImages: { enabled: true } }), 72);
  // enabled: false is accepted and not kept (mongod stores the option only when enabled).
  await db.createCollection('off', { changeStreamPreAndPostImages: { enabled: false } });
  assert.deepEqual((await db.listCollections({ name: 'off' }).toArray())[0].options, {});
  await h.expectCode(db.command({ collMod: 'off', changeStreamPreAndPostImages: { enabled: 'yes' } }), 14);
  await h.expectCode(db.command({ collMod: 'off', changeStreamPreAndPostImages: {} }), 40414);
  await db.createCollection('view', { viewOn: 'off', pipeline: [] });
  await h.expectCode(db.command({ collMod: 'view', changeStreamPreAndPostImages: { enabled: true } }), 72);
  await h.expectCode(db.command({ aggregate: 'off', pipeline: [{ $changeStream: { fullDocumentBeforeChange: 'sometimes' } }], cursor: {} }), 2);
  await h.expectCode(db.command({ aggregate: 'off', pipeline: [{ $changeStream: { fullDocumentBeforeChange: 1 } }], cursor: {} }), 14);
  // The command failures changed nothing.
  assert.deepEqual((await db.listCollections({}, { nameOnly: true }).toArray()).map((x) => x.name).sort(), ['off', 'system.views', 'view']);
});

R.test('resumeAfter, startAfter and startAtOperationTime continue where asked', async () => {
  const db = rs.freshDb('resume');
  const c = db.collection('c');
  const s = await open(c);
  await c.insertOne({ _id: 1 });
  const e1 = await next(s);
  await s.close();
  await c.insertMany([{ _id: 2 }, { _id: 3 }]);
  for (const opt of ['resumeAfter', 'startAfter']) {
    const s2 = c.watch([], { [opt]: e1._id });
    try {
      assert.deepEqual((await next(s2)).documentKey, { _id: 2 });
      assert.deepEqual((await next(s2)).documentKey, { _id: 3 });
    } finally {
      await s2.close();
    }
  }
  const s3 = c.watch([], { startAtOperationTime: e1.clusterTime });
  try {
    assert.deepEqual((await next(s3)).documentKey, { _id: 1 });
    assert.deepEqual((await next(s3)).documentKey, { _id: 2 });
  } finally {
    await s3.close();
  }
  /* Two resume options: 40674. */
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: { resumeAfter: e1._id, startAtOperationTime: e1.clusterTime } }], cursor: {} }), 40674);
});

R.test('the driver resumes by itself after its cursor is killed', async () => {
  const db = rs.freshDb('autoresume');
  const c = db.collection('c');
  const s = await open(c);
  try {
    await c.insertOne({ _id: 1 });
    assert.deepEqual((await next(s)).documentKey, { _id: 1 });
    const ops = await rs.client.db('admin').aggregate([{ $currentOp: { idleCursors: true } }, { $match: { type: 'idleCursor' } }]).toArray();
    const mine = ops.filter((o) => o.cursor && o.cursor.originatingCommand && o.cursor.originatingCommand.aggregate === 'c' &&
      o.ns === `${db.databaseName}.c`);
    let killed = 0;
    for (const o of mine) {
      const r = await db.command({ killCursors: 'c', cursors: [h.cursorId(o.cursor.cursorId)] });
      killed += r.cursorsKilled.length;
    }
    if (killed === 0) {
      /* No idle-cursor listing: kill it by the id the driver holds. */
      const id = s.cursor && s.cursor.id;
      assert.ok(id, 'the stream has a cursor id');
      const r = await db.command({ killCursors: 'c', cursors: [h.cursorId(id)] });
      killed = r.cursorsKilled.length;
    }
    assert.ok(killed >= 1, 'killed the stream cursor');
    await c.insertOne({ _id: 2 });
    await c.insertOne({ _id: 3 });
    assert.deepEqual((await next(s)).documentKey, { _id: 2 });
    assert.deepEqual((await next(s)).documentKey, { _id: 3 });
  } finally {
    await s.close();
  }
});

R.test('awaitData getMore waits up to maxTimeMS; postBatchResumeToken advances', async () => {
  const db = rs.freshDb('await');
  const r = await db.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} });
  assert.deepEqual(r.cursor.firstBatch, []);
  assert.ok(isTok(r.cursor.postBatchResumeToken));
  assert.notEqual(String(r.cursor.id), '0');
  const pb0 = r.cursor.postBatchResumeToken._data;

  let t0 = Date.now();
  const g1 = await db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c', maxTimeMS: 400 });
  const waited = Date.now() - t0;
  assert.deepEqual(g1.cursor.nextBatch, []);
  assert.ok(waited >= 300, `waited ${waited} ms`);
  assert.ok(isTok(g1.cursor.postBatchResumeToken));

  /* A write elsewhere moves the token on without an event. */
  await db.collection('other').insertOne({ x: 1 });
  let g2;
  await rs.waitUntil(async () => {
    g2 = await db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c', maxTimeMS: 100 });
    return g2.cursor.postBatchResumeToken._data > pb0;
  }, { what: 'postBatchResumeToken to advance' });
  assert.deepEqual(g2.cursor.nextBatch, []);

  /* A write during the wait ends it early. */
  t0 = Date.now();
  const pending = db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c', maxTimeMS: 5000 });
  await h.sleep(150);
  await db.collection('c').insertOne({ _id: 7 });
  const g3 = await pending;
  assert.equal(g3.cursor.nextBatch.length, 1);
  assert.ok(Date.now() - t0 < 4000);
  assert.equal(g3.cursor.postBatchResumeToken._data, g3.cursor.nextBatch[0]._id._data);
  assert.ok(g3.cursor.postBatchResumeToken._data > g2.cursor.postBatchResumeToken._data);
  await db.command({ killCursors: 'c', cursors: [h.cursorId(r.cursor.id)] });
});

R.test('db.watch and client.watch see every collection (and other databases)', async () => {
  const db = rs.freshDb('dbw');
  const other = rs.freshDb('dbw2');
  const ds = await open(db);
  const cs = await open(rs.client);
  try {
    await db.collection('a').insertOne({ _id: 1 });
    await other.collection('z').insertOne({ _id: 9 });
    await db.collection('b').insertOne({ _id: 2 });
    await db.collection('b').drop();
    const e1 = await next(ds);
    assert.deepEqual(e1.ns, { db: db.databaseName, coll: 'a' });
    const e2 = await next(ds);
    assert.deepEqual(e2.ns, { db: db.databaseName, coll: 'b' });
    const e3 = await next(ds);
    assert.equal(e3.operationType, 'drop', 'a database stream goes on past a drop');
    const seen = [];
    while (seen.length < 3) {
      const e = await next(cs);
      if ([db.databaseName, other.databaseName].includes(e.ns.db)) seen.push(`${e.ns.coll}:${e.operationType}`);
    }
    assert.deepEqual(seen, ['a:insert', 'z:insert', 'b:insert']);
  } finally {
    await ds.close();
    await cs.close();
  }
  /* dropDatabase: the drops of its collections, dropDatabase, then invalidate for the database stream. */
  const ds2 = await open(db);
  try {
    await db.dropDatabase();
    const seen = [];
    for (;;) {
      const e = await next(ds2);
      seen.push(e.operationType);
      if (e.operationType === 'dropDatabase') assert.deepEqual(e.ns, { db: db.databaseName });
      if (e.operationType === 'invalidate') break;
    }
    assert.deepEqual(seen, ['drop', 'dropDatabase', 'invalidate']);
  } finally {
    await ds2.close();
  }
  await h.expectCode(rs.client.db('admin').command({ aggregate: 1, pipeline: [{ $changeStream: {} }], cursor: {} }), 73);
  await h.expectCode(db.command({ aggregate: 1, pipeline: [{ $changeStream: { allChangesForCluster: true } }], cursor: {} }), 73);
});

R.test('showExpandedEvents: create, createIndexes, dropIndexes, rename\'s operationDescription', async () => {
  const db = rs.freshDb('expanded');
  const s = await open(db, [], { showExpandedEvents: true });
  try {
    await db.createCollection('e');
    await db.collection('e').createIndex({ k: 1 }, { name: 'k_1' });
    await db.collection('e').dropIndex('k_1');
    const cr = await next(s);
    assert.equal(cr.operationType, 'create');
    assert.deepEqual(cr.ns, { db: db.databaseName, coll: 'e' });
    assert.equal(cr.collectionUUID && cr.collectionUUID.sub_type, 4);
    // The _id index's spec, as mongod's create oplog entry carries it (makeCreateCollObject).
    assert.deepEqual(cr.operationDescription, { idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } });
    const ci = await next(s);
    assert.equal(ci.operationType, 'createIndexes');
    assert.equal(ci.operationDescription.indexes[0].name, 'k_1');
    assert.deepEqual(ci.operationDescription.indexes[0].key, { k: 1 });
    const di = await next(s);
    assert.equal(di.operationType, 'dropIndexes');
    assert.equal(di.operationDescription.indexes[0].name, 'k_1');
    await db.collection('e').insertOne({ _id: 1 });
    const ins = await next(s);
    assert.deepEqual(Object.keys(ins).slice(0, 5), ['_id', 'operationType', 'clusterTime', 'collectionUUID', 'wallTime']);
    assert.equal(ins.collectionUUID.toString('hex'), cr.collectionUUID.toString('hex'));
    // A rename names its target in operationDescription as well as in to.
    await rs.client.db('admin').command({ renameCollection: `${db.databaseName}.e`, to: `${db.databaseName}.e2` });
    const rn = await next(s);
    assert.equal(rn.operationType, 'rename');
    assert.deepEqual(rn.to, { db: db.databaseName, coll: 'e2' });
    assert.deepEqual(rn.operationDescription, { to: { db: db.databaseName, coll: 'e2' } });
  } finally {
    await s.close();
  }
});

R.test('a stream on a secondary sees the primary\'s writes', async () => {
  const db = rs.freshDb('sec');
  await db.collection('c').insertOne({ _id: 0 }, { writeConcern: { w: 3 } });
  const sc = await rs.newClient(rs.uriFor('', 'readPreference=secondary'));
  const s = await open(sc.db(db.databaseName).collection('c'));
  try {
    await db.collection('c').insertOne({ _id: 1 });
    const ev = await next(s, 15000);
    assert.deepEqual(ev.documentKey, { _id: 1 });
    /* The primary's diff travels in the entry: the secondary's update event has the same description. */
    await db.collection('c').updateOne({ _id: 1 }, { $set: { a: 1 } });
    const up = await next(s, 15000);
    assert.equal(up.operationType, 'update');
    assert.deepEqual(up.updateDescription, { updatedFields: { a: 1 }, removedFields: [], truncatedArrays: [] });

  } finally {
    await s.close();
  }
});

R.test('Mongoose Model.watch()', async () => {
  const conn = mongoose.createConnection(rs.uriFor(`cs_mongoose_${process.pid % 10000}`));
  await conn.asPromise();
  try {
    const M = conn.model('Thing', new mongoose.Schema({ name: String }));
    await M.init();
    const s = M.watch([], { maxAwaitTimeMS: 200 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const got = new Promise((resolve, reject) => { s.on('change', resolve); s.on('error', reject); });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await M.create({ name: 'x' });
    const ev = await Promise.race([got, h.sleep(10000).then(() => { throw new Error('no change'); })]);
    assert.equal(ev.operationType, 'insert');
    assert.equal(ev.fullDocument.name, 'x');
    await s.close();
  } finally {
    await conn.close();
  }
});

R.test('errors as mongod: history lost 286, first stage 40602, unknown option 40415', async () => {
  const db = rs.freshDb('errs');
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: { startAtOperationTime: new Timestamp({ t: 1, i: 1 }) } }], cursor: {} }), 286);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: { resumeAfter: { _data: '000000010000000100' } } }], cursor: {} }), 286);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $match: {} }, { $changeStream: {} }], cursor: {} }), 40602);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: { bogus: 1 } }], cursor: {} }), 40415);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: { fullDocument: 'nope' } }], cursor: {} }), 2);
  await h.expectCode(db.command({ explain: { aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} } }), 115);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], explain: true }), 115);
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  await h.expectCode(db.command({ aggregate: 'v', pipeline: [{ $changeStream: {} }], cursor: {} }), 166);
  // Found by helper-66, as mongod's change_stream_pipeline_helpers / resume_token.cpp:
  const cs = (spec) => db.command({ aggregate: 'c', pipeline: [{ $changeStream: spec }], cursor: {} });
  const tok = { _data: '000000010000000100' };
  // both resumeAfter and startAfter: 50865, before either token is read
  await h.expectCode(cs({ resumeAfter: tok, startAfter: tok }), 50865,
    /^Do not specify both 'resumeAfter' and 'startAfter' in a \$changeStream stage$/);
  await h.expectCode(cs({ resumeAfter: { x: 1 }, startAfter: { y: 1 } }), 50865);
  // a token without a string _data: 40647
  await h.expectCode(cs({ resumeAfter: { foo: 1 } }), 40647, /^Bad resume token: _data of missing or of wrong type\. Expected string, got /);
  await h.expectCode(cs({ startAfter: { _data: 1 } }), 40647);
  await h.expectCode(cs({ resumeAfter: tok, startAtOperationTime: new Timestamp({ t: 1, i: 1 }) }), 40674,
    /^Only one type of resume option is allowed, but multiple were found$/);
  // $changeStream inside $lookup (51047) or $facet (40600), not the standalone's 40573
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $lookup: { from: 'c', pipeline: [{ $changeStream: {} }], as: 'x' } }], cursor: {} }), 51047);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $facet: { a: [{ $changeStream: {} }] } }], cursor: {} }), 40600);
});

R.test('pre-images persist: after kill -9 and after a clean restart, a stream resumed from before the writes still reports them, and the option is kept', { timeout: 120000 }, async () => {
  const db = small.freshDb('images_persist');
  const c = await withImages(db, 'c');
  await c.insertMany([{ _id: 1, v: 'one' }, { _id: 2, v: 'two' }]);
  const start = await open(c, [], { fullDocumentBeforeChange: 'required' });
  const token = start.resumeToken;
  await start.close();
  await c.updateOne({ _id: 1 }, { $set: { v: 'uno' } }, { writeConcern: { w: 'majority', j: true } });
  await c.deleteOne({ _id: 2 }, { writeConcern: { w: 'majority', j: true } });
  for (const how of [{ kill9: true }, { kill9: false }]) {
    await small.kill(0, how);
    await small.restart(0);
    await small.waitForPrimary();
    assert.deepEqual((await db.listCollections({ name: 'c' }).toArray())[0].options,
      { changeStreamPreAndPostImages: { enabled: true } }, `the option after ${how.kill9 ? 'kill -9' : 'a clean stop'}`);
    /* Not open(): its first tryNext would take the first event. */
    const s = c.watch([], { resumeAfter: token, fullDocumentBeforeChange: 'required', maxAwaitTimeMS: 200 });
    try {
      const upd = await next(s);
      assert.deepEqual(upd.fullDocumentBeforeChange, { _id: 1, v: 'one' }, `after ${how.kill9 ? 'kill -9' : 'a clean stop'}`);
      const del = await next(s);
      assert.deepEqual(del.fullDocumentBeforeChange, { _id: 2, v: 'two' });
    } finally {
      await s.close();
    }
  }
});

R.test('an oplog that rolled over a stream\'s position: 286 on its next getMore', async () => {
  const db = small.freshDb('rollover');
  const r = await db.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} });
  await db.collection('c').insertOne({ _id: 0 });
  let got = [];
  await small.waitUntil(async () => {
    const g = await db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c', maxTimeMS: 200 });
    got = got.concat(g.cursor.nextBatch);
    return got.length === 1;
  }, { what: 'the first event' });
  const big = 'x'.repeat(100000);
  for (let i = 1; i < 40; i++) await db.collection('c').insertOne({ _id: i, big });
  /* local.oplog.rs is written just behind the applier: look until the rollover reached the stream. */
  await h.expectCode((async () => {
    for (let i = 0; i < 50; i++) await db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c', maxTimeMS: 200 });
    return 'no error';
  })(), 286);
});

R.test('a change stream getMore that fails in a resumable way carries ResumableChangeStreamError (and the driver resumes on it); other errors and other cursors do not', async () => {
  // error_labels.cpp isResumableChangeStreamError; the drivers' change-streams-resume-errorLabels tests,
  // which use the failGetMoreAfterCursorCheckout fail point as here.
  const db = rs.freshDb('resumable');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }], { writeConcern: { w: 'majority' } });
  const p = await rs.waitForPrimary();
  const fp = (mode, data) => rs.adminCommand(p, { configureFailPoint: 'failGetMoreAfterCursorCheckout', mode, ...(data ? { data } : {}) });
  /* Raw commands, sessionless: the getMores below must come from the cursors' (absent) session. */
  const stream = async () => {
    const cs = await rs.raw(p, db.databaseName, { aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} });
    assert.equal(cs.ok, 1, JSON.stringify(cs));
    return h.cursorId(cs.cursor.id);
  };
  const find = await rs.raw(p, db.databaseName, { find: 'c', batchSize: 1 });
  assert.equal(find.ok, 1, JSON.stringify(find));
  try {
    for (const code of [11600, 6, 91, 189, 10107, 133, 234]) {
      const id = await stream();
      await fp({ times: 1 }, { errorCode: code });
      const r = await rs.raw(p, db.databaseName, { getMore: id, collection: 'c', maxTimeMS: 100 });
      assert.equal(r.ok, 0);
      assert.equal(r.code, code);
      assert.equal(r.errmsg, "Hit the 'failGetMoreAfterCursorCheckout' failpoint");
      assert.deepEqual(r.errorLabels, ['ResumableChangeStreamError'], `code ${code}: ${JSON.stringify(r)}`);
      // As mongod: the failed getMore deleted its cursor.
      const again = await rs.raw(p, db.databaseName, { getMore: id, collection: 'c', maxTimeMS: 100 });
      assert.equal(again.code, 43, JSON.stringify(again));
    }
    await fp({ times: 1 }, { errorCode: 2 });
    let r = await rs.raw(p, db.databaseName, { getMore: await stream(), collection: 'c', maxTimeMS: 100 });
    assert.equal(r.code, 2);
    assert.equal(r.errorLabels, undefined, 'BadValue is not resumable');
    await fp({ times: 1 }, { errorCode: 11600 });
    r = await rs.raw(p, db.databaseName, { getMore: h.cursorId(find.cursor.id), collection: 'c' });
    assert.equal(r.code, 11600);
    assert.equal(r.errorLabels, undefined, 'a find cursor\'s getMore is not a change stream');
  } finally {
    await fp('off');
  }

  // The driver: one getMore fails with HostUnreachable; the stream resumes by itself and loses nothing.
  const before = (await fp('off')).count; /* how often the point fired so far (mongod's count is cumulative) */
  const s = await open(c);
  try {
    await fp({ times: 1 }, { errorCode: 6 });
    await c.insertOne({ _id: 4 }, { writeConcern: { w: 'majority' } });
    await c.insertOne({ _id: 5 }, { writeConcern: { w: 'majority' } });
    assert.deepEqual((await next(s)).documentKey, { _id: 4 });
    assert.deepEqual((await next(s)).documentKey, { _id: 5 });
    const st = await rs.adminCommand(p, { configureFailPoint: 'failGetMoreAfterCursorCheckout', mode: 'off' });
    assert.equal(st.count - before, 1, 'the fail point fired once');
  } finally {
    await fp('off');
    await s.close();
  }
});

/* Last on the 3-member set: it moves the primary. */
R.test('a stream goes on across a step-down: the driver follows the new primary, no event lost or repeated', async () => {
  const db = rs.freshDb('stepdown');
  const c = db.collection('c');
  const s = await open(c);
  try {
    await c.insertOne({ _id: 1 }, { writeConcern: { w: 3 } });
    assert.deepEqual((await next(s)).documentKey, { _id: 1 });
    const p = await rs.waitForPrimary();
    await rs.adminCommand(p, { replSetStepDown: 30, secondaryCatchUpPeriodSecs: 10 }).catch((e) => {
      if (!/closed|ECONNRESET|network/i.test(String(e.message))) throw e;
    });
    await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
    for (let i = 2; i <= 4; i++) {
      for (let k = 0; ; k++) {
        try { await c.insertOne({ _id: i }); break; } catch (e) { if (k > 50) throw e; await h.sleep(100); }
      }
    }
    const ids = [];
    while (ids.length < 3) ids.push((await next(s, 20000)).documentKey._id);
    assert.deepEqual(ids, [2, 3, 4]);
  } finally {
    await s.close();
  }
});

R.test('a stream goes on across a clean shutdown of the primary: its interrupted getMore is resumable, the driver resumes on the new primary', { timeout: 120000 }, async () => {
  const db = rs.freshDb('shutdown');
  const c = db.collection('c');
  await rs.waitForSteadyState();
  const s = await open(c);
  const p = await rs.waitForPrimary();
  try {
    await c.insertOne({ _id: 1 }, { writeConcern: { w: 3 } });
    assert.deepEqual((await next(s)).documentKey, { _id: 1 });
    // The stream's awaitData getMore is waiting on the primary when it stops (SIGTERM).
    const waiting = next(s, 60000);
    await h.sleep(100);
    await rs.kill(p, { kill9: false });
    await rs.waitForPrimary({ exclude: [p], timeoutMs: 20000 });
    for (let k = 0; ; k++) {
      try { await c.insertOne({ _id: 2 }); break; } catch (e) { if (k > 100) throw e; await h.sleep(100); }
    }
    assert.deepEqual((await waiting).documentKey, { _id: 2 }, 'the event written after the failover');
  } finally {
    await s.close();
    await rs.restart(p);
    await rs.waitForSteadyState();
  }
});

h.test('a standalone still answers 40573', async () => {
  const db = standalone.freshDb('standalone');
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} }), 40573);
  await h.expectCode(db.collection('c').watch().tryNext(), 40573);
});
