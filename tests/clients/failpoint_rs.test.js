'use strict';
/*
 * failCommand on a replica-set primary (issue 12): the driver's retryable
 * writes. A write sent with a txnNumber that fails with a retryable code, or
 * whose writeConcernError has one, carries "RetryableWriteError" (computed
 * by the server, as mongod does), and the driver retries it once; the
 * document is written exactly once.
 */
const assert = require('node:assert/strict');
const { MongoClient, Long, UUID } = require('mongodb');
const { useReplSet, test } = require('./rs_harness');

const set = useReplSet(1, { args: ['--setParameter', 'enableTestCommands=1'] });

async function client() {
  const c = new MongoClient(set.uri, { monitorCommands: true, retryWrites: true });
  const started = [];
  c.on('commandStarted', (e) => { if (e.commandName === 'insert') started.push(e.command); });
  await c.connect();
  return { c, started };
}

test('a retryable error on insert: RetryableWriteError, the driver retries with the same txnNumber', async () => {
  const { c, started } = await client();
  try {
    const admin = c.db('admin');
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 91 } });
    const coll = c.db('fprs').collection('a');
    await coll.insertOne({ _id: 1 });
    assert.equal(started.length, 2, 'the insert and its retry');
    assert.ok(started[0].txnNumber !== undefined);
    assert.equal(String(started[0].txnNumber), String(started[1].txnNumber));
    assert.equal(await coll.countDocuments({}), 1);
    // Without retryable codes there is no label and no retry.
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 2 } });
    const err = await coll.insertOne({ _id: 2 }).then(() => null, (e) => e);
    assert.equal(err.code, 2);
    assert.equal(err.hasErrorLabel('RetryableWriteError'), false);
    assert.equal(started.length, 3);
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

test('errorLabels: [] in failCommand replaces every label (mongod\'s errorLabelsOverride): no RetryableWriteError, no retry', async () => {
  const { c, started } = await client();
  try {
    const admin = c.db('admin');
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['insert'], errorCode: 189, errorLabels: [] } });
    const coll = c.db('fprs').collection('nolabels');
    const err = await coll.insertOne({ _id: 1 }).then(() => null, (e) => e);
    assert.equal(err && err.code, 189);
    assert.deepEqual(err.errorLabels || [], []);
    assert.equal(started.length, 1, 'not retried');
    assert.equal(await coll.countDocuments({}), 0);
    // A label given is the only one.
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['insert'], errorCode: 2, errorLabels: ['Foo'] } });
    const err2 = await coll.insertOne({ _id: 2 }).then(() => null, (e) => e);
    assert.deepEqual(err2.errorLabels, ['Foo']);
  } finally {
    await c.close();
  }
});

test('failCommand on a change stream\'s getMore adds no ResumableChangeStreamError (mongod checks the label before the cursor is pinned): the error reaches the application', async () => {
  // Drivers' spec test change-streams-resume-errorLabels "change stream does not resume if error does not
  // contain ResumableChangeStreamError": failCommand's error carries only the labels the point gives.
  const c = new MongoClient(set.uri);
  await c.connect();
  try {
    const coll = c.db('fprs').collection('cs');
    await coll.insertOne({ _id: 0 });
    const agg = await c.db('fprs').command({ aggregate: 'cs', pipeline: [{ $changeStream: {} }], cursor: {} });
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['getMore'], errorCode: 6 } });
    const err = await c.db('fprs').command({ getMore: require('./harness').cursorId(agg.cursor.id), collection: 'cs' }).then(() => null, (e) => e);
    assert.equal(err && err.code, 6);
    assert.deepEqual(err.errorLabels || [], []);
    // With the label given by the point, the driver resumes.
    const cs = coll.watch([], { maxAwaitTimeMS: 200 });
    await cs.tryNext();
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['getMore'], errorCode: 6, errorLabels: ['ResumableChangeStreamError'] } });
    await coll.insertOne({ _id: 1 });
    const ev = await cs.next();
    assert.equal(ev.documentKey._id, 1);
    await cs.close();
  } finally {
    await c.close();
  }
});

test('a retryable writeConcernError: the write ran, the retry answers it again, one document', async () => {
  const { c, started } = await client();
  try {
    await c.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['insert'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } },
    });
    const coll = c.db('fprs').collection('b');
    await coll.insertOne({ _id: 'w' });
    assert.equal(started.length, 2);
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: 'w' }]);
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

test('an upserting updateOne whose reply carried a retryable writeConcernError: the retry answers upsertedId and upsertedCount as the first attempt did', async () => {
  const c = new MongoClient(set.uri, { monitorCommands: true, retryWrites: true });
  const started = [];
  c.on('commandStarted', (e) => { if (e.commandName === 'update') started.push(e.command); });
  await c.connect();
  try {
    const coll = c.db('fprs').collection('up');
    for (const [k, filter] of [['oid', { k: 'new-1' }], ['given', { _id: 'given-id' }]]) {
      started.length = 0;
      await c.db('admin').command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['update'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } },
      });
      const r = await coll.updateOne(filter, { $set: { v: 1 } }, { upsert: true });
      assert.equal(started.length, 2, `${k}: the update and its retry`);
      assert.equal(started[1].txnNumber.toString(), started[0].txnNumber.toString());
      assert.equal(r.upsertedCount, 1, `${k}: ${JSON.stringify(r)}`);
      assert.equal(r.matchedCount, 0);
      assert.equal(r.modifiedCount, 0);
      const docs = await coll.find(filter).toArray();
      assert.equal(docs.length, 1, 'written once');
      assert.deepEqual(r.upsertedId, docs[0]._id);
    }
    /* A retried update that matched answers what it did, with no upserted. */
    await c.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['update'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } },
    });
    const m = await coll.updateOne({ _id: 'given-id' }, { $inc: { v: 1 } }, { upsert: true });
    assert.equal(m.matchedCount, 1);
    assert.equal(m.modifiedCount, 1);
    assert.equal(m.upsertedCount, 0);
    assert.equal((await coll.findOne({ _id: 'given-id' })).v, 2, 'the $inc ran once');
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

test('a findOneAndUpdate whose reply carried a retryable writeConcernError: the driver retries, the retry returns the first attempt\'s document, the update ran once', async () => {
  const c = new MongoClient(set.uri, { monitorCommands: true, retryWrites: true });
  const started = [];
  c.on('commandStarted', (e) => { if (e.commandName === 'findAndModify') started.push(e.command); });
  await c.connect();
  try {
    const coll = c.db('fprs').collection('fam');
    await coll.insertOne({ _id: 'n', v: 0 });
    // after: v 0 -> 1 returns the post-image {v: 1}; before: v 1 -> 2 returns the pre-image {v: 1}.
    for (const returnDocument of ['after', 'before']) {
      await c.db('admin').command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['findAndModify'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } },
      });
      const before = started.length;
      const doc = await coll.findOneAndUpdate({ _id: 'n' }, { $inc: { v: 1 } }, { returnDocument, projection: { v: 1 } });
      assert.equal(started.length - before, 2, 'the command and its retry');
      assert.equal(String(started[before].txnNumber), String(started[before + 1].txnNumber));
      assert.deepEqual(doc, { _id: 'n', v: 1 }, returnDocument);
    }
    assert.deepEqual(await coll.findOne({ _id: 'n' }), { _id: 'n', v: 2 }, 'each findOneAndUpdate ran once');
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

/* failCommand: the next `cmd` runs, then its reply carries a retryable writeConcernError (the driver retries it). */
async function wceOnce(c, cmd) {
  await c.db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: [cmd], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } },
  });
}

test('an ordered insertMany stopped by a duplicate key, retried by the driver: the retry fails at the same document again instead of reporting success, and nothing is inserted twice', async () => {
  const c = new MongoClient(set.uri, { monitorCommands: true, retryWrites: true });
  const started = [];
  c.on('commandStarted', (e) => { if (e.commandName === 'insert') started.push(e.command); });
  await c.connect();
  try {
    const coll = c.db('fprs').collection('partial');
    await coll.insertOne({ _id: 'taken' });
    started.length = 0;
    await wceOnce(c, 'insert');
    const err = await coll.insertMany([{ _id: 'a' }, { _id: 'b' }, { _id: 'taken' }, { _id: 'c' }]).then(() => null, (e) => e);
    assert.equal(started.length, 2, 'the insert and its retry');
    assert.equal(String(started[0].txnNumber), String(started[1].txnNumber));
    assert.ok(err, 'the driver reports the duplicate key, not success');
    assert.equal(err.code, 11000, String(err));
    assert.equal(err.writeErrors.length, 1);
    assert.equal(err.writeErrors[0].index, 2);
    assert.equal(err.result.insertedCount, 2);
    assert.deepEqual((await coll.find({}).sort({ _id: 1 }).toArray()).map((d) => d._id), ['a', 'b', 'taken'],
      'ordered: the statement after the failed one never ran');

    // Unordered: every failed statement fails again on the retry, the others are answered, not run twice.
    await coll.insertOne({ _id: 'taken2' });
    started.length = 0;
    await wceOnce(c, 'insert');
    const err2 = await coll.insertMany([{ _id: 'x1' }, { _id: 'taken' }, { _id: 'x2' }, { _id: 'taken2' }, { _id: 'x3' }],
      { ordered: false }).then(() => null, (e) => e);
    assert.equal(started.length, 2);
    assert.ok(err2, 'the retry reports both duplicate keys');
    assert.deepEqual(err2.writeErrors.map((w) => [w.index, w.code]), [[1, 11000], [3, 11000]]);
    assert.equal(err2.result.insertedCount, 3);
    assert.equal(await coll.countDocuments({ _id: { $in: ['x1', 'x2', 'x3'] } }), 3);
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

test('a retried write that stopped part-way runs again only the statements that did not write (raw protocol: insert, update, delete), as mongod re-runs the statements its oplog does not show', async () => {
  const c = new MongoClient(set.uri);
  await c.connect();
  try {
    const db = c.db('fprs');
    const coll = db.collection('resume');
    await coll.insertMany([{ _id: 'taken' }, { _id: 'u1', n: 0 }, { _id: 'u2', a: 5 }, { _id: 'u3', n: 0 }, { _id: 'd1' }, { _id: 'd2' }]);
    const lsid = { id: new UUID() };
    const run = (cmd) => set.raw(0, 'fprs', cmd);

    // Insert: the first attempt stops at 'taken'; a retry with the conflict still there fails at it again.
    const ins = { insert: 'resume', documents: [{ _id: 'i1' }, { _id: 'taken' }, { _id: 'i2' }], lsid, txnNumber: Long.fromNumber(1) };
    const first = await run(ins);
    assert.equal(first.n, 1, JSON.stringify(first));
    assert.deepEqual(first.writeErrors.map((w) => w.index), [1]);
    const retry = await run(ins);
    assert.equal(retry.n, 1, JSON.stringify(retry));
    assert.deepEqual(retry.writeErrors.map((w) => [w.index, w.code]), [[1, 11000]]);
    // Once the conflict is gone, a retry runs the rest: the remaining documents are inserted, i1 is not inserted again.
    await coll.deleteOne({ _id: 'taken' });
    const last = await run(ins);
    assert.equal(last.n, 3, JSON.stringify(last));
    assert.equal(last.writeErrors, undefined);
    assert.equal(await coll.countDocuments({ _id: { $in: ['i1', 'taken', 'i2'] } }), 3);
    const done = await run(ins);
    assert.equal(done.n, 3, 'a retry of the finished command is answered from its session row');
    assert.equal(done.writeErrors, undefined);

    // Update: u1 modified, a statement that matches nothing, then u2 fails (28: a field under a number).
    const upd = {
      update: 'resume', lsid, txnNumber: Long.fromNumber(2),
      updates: [{ q: { _id: 'u1' }, u: { $inc: { n: 1 } } }, { q: { _id: 'none' }, u: { $set: { z: 1 } } },
        { q: { _id: 'u2' }, u: { $set: { 'a.b': 1 } } }, { q: { _id: 'u3' }, u: { $inc: { n: 1 } } }],
    };
    const u1 = await run(upd);
    assert.equal(u1.nModified, 1, JSON.stringify(u1));
    assert.deepEqual(u1.writeErrors.map((w) => [w.index, w.code]), [[2, 28]]);
    const u2 = await run(upd);
    assert.equal(u2.nModified, 1, JSON.stringify(u2));
    assert.equal(u2.n, 1);
    assert.deepEqual(u2.writeErrors.map((w) => [w.index, w.code]), [[2, 28]], 'the failed statement fails again');
    assert.deepEqual(await coll.find({ _id: { $in: ['u1', 'u3'] } }).sort({ _id: 1 }).toArray(),
      [{ _id: 'u1', n: 1 }, { _id: 'u3', n: 0 }], 'u1 incremented once, u3 never (ordered)');

    // Delete, unordered: d1 deleted, a bad filter fails, d2 deleted.
    const del = {
      delete: 'resume', ordered: false, lsid, txnNumber: Long.fromNumber(3),
      deletes: [{ q: { _id: 'd1' }, limit: 1 }, { q: { _id: { $bogus: 1 } }, limit: 1 }, { q: { _id: 'd2' }, limit: 1 }],
    };
    const d1 = await run(del);
    assert.equal(d1.n, 2, JSON.stringify(d1));
    assert.deepEqual(d1.writeErrors.map((w) => w.index), [1]);
    const d2 = await run(del);
    assert.equal(d2.n, 2, JSON.stringify(d2));
    assert.deepEqual(d2.writeErrors.map((w) => [w.index, w.code]), [[1, d1.writeErrors[0].code]]);

    const st = (await db.admin().command({ serverStatus: 1 })).transactions;
    assert.ok(Number(st.retriedCommandsCount) >= 5, JSON.stringify(st));
  } finally {
    await c.close();
  }
});

test('client.bulkWrite retried by the driver after a writeConcernError is answered from its session row (totals as the first attempt, nothing applied twice); one stopped part-way runs the rest', async () => {
  const c = new MongoClient(set.uri, { monitorCommands: true, retryWrites: true });
  const started = [];
  c.on('commandStarted', (e) => { if (e.commandName === 'bulkWrite') started.push(e.command); });
  await c.connect();
  try {
    const ns = 'fprs.bw';
    await c.db('fprs').collection('bw').insertMany([{ _id: 'm', n: 0 }, { _id: 'gone' }]);
    await wceOnce(c, 'bulkWrite');
    const r = await c.bulkWrite([
      { name: 'insertOne', namespace: ns, document: { _id: 'b1' } },
      { name: 'updateOne', namespace: ns, filter: { _id: 'm' }, update: { $inc: { n: 1 } } },
      { name: 'updateOne', namespace: ns, filter: { _id: 'new' }, update: { $set: { v: 1 } }, upsert: true },
      { name: 'deleteOne', namespace: ns, filter: { _id: 'gone' } },
      { name: 'insertOne', namespace: ns, document: { _id: 'b2' } },
    ]);
    assert.equal(started.length, 2, 'the bulkWrite and its retry');
    assert.equal(String(started[0].txnNumber), String(started[1].txnNumber));
    assert.deepEqual([r.insertedCount, r.matchedCount, r.modifiedCount, r.upsertedCount, r.deletedCount], [2, 1, 1, 1, 1]);
    const coll = c.db('fprs').collection('bw');
    assert.deepEqual(await coll.findOne({ _id: 'm' }), { _id: 'm', n: 1 }, 'the $inc ran once');
    assert.deepEqual((await coll.find({}).sort({ _id: 1 }).toArray()).map((d) => d._id), ['b1', 'b2', 'm', 'new']);

    // Ordered, stopped by a duplicate key: the retry fails at the same op, the ops before it are not run again.
    started.length = 0;
    await wceOnce(c, 'bulkWrite');
    const err = await c.bulkWrite([
      { name: 'updateOne', namespace: ns, filter: { _id: 'm' }, update: { $inc: { n: 1 } } },
      { name: 'insertOne', namespace: ns, document: { _id: 'b1' } },
      { name: 'insertOne', namespace: ns, document: { _id: 'never' } },
    ]).then(() => null, (e) => e);
    assert.equal(started.length, 2);
    assert.ok(err, 'the duplicate key is reported');
    assert.equal(err.writeErrors.get(1).code, 11000, String(err));
    assert.equal(err.partialResult.modifiedCount, 1);
    assert.deepEqual(await coll.findOne({ _id: 'm' }), { _id: 'm', n: 2 }, 'the $inc ran once more, not twice');
    assert.equal(await coll.countDocuments({ _id: 'never' }), 0);
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

test('bulkWrite retried over the raw protocol: unordered part-way runs only the failed ops again; with errorsOnly: false a retry after applied updates is refused with 217', async () => {
  const c = new MongoClient(set.uri);
  await c.connect();
  try {
    const coll = c.db('fprs').collection('bwraw');
    await coll.insertMany([{ _id: 'taken' }, { _id: 'u', n: 0 }]);
    const lsid = { id: new UUID() };
    const ns = [{ ns: 'fprs.bwraw' }];
    const cmd = {
      bulkWrite: 1, ordered: false, errorsOnly: true, nsInfo: ns, lsid, txnNumber: Long.fromNumber(1),
      ops: [{ insert: 0, document: { _id: 'r1' } }, { insert: 0, document: { _id: 'taken' } },
        { update: 0, filter: { _id: 'u' }, updateMods: { $inc: { n: 1 } } }, { insert: 0, document: { _id: 'r2' } }],
    };
    const first = await set.raw(0, 'admin', cmd);
    assert.deepEqual([first.nErrors, first.nInserted, first.nModified], [1, 2, 1], JSON.stringify(first));
    const again = await set.raw(0, 'admin', cmd);
    assert.equal(again.ok, 1, JSON.stringify(again));
    assert.deepEqual([again.nErrors, again.nInserted, again.nModified, again.nMatched], [1, 2, 1, 1], JSON.stringify(again));
    assert.deepEqual(again.cursor.firstBatch.map((d) => [d.idx, d.code]), [[1, 11000]], 'the failed op fails again');
    assert.deepEqual(await coll.findOne({ _id: 'u' }), { _id: 'u', n: 1 }, 'the update ran once');
    // errorsOnly: false wants every op's result; the applied update's is not kept.
    const verbose = { ...cmd, errorsOnly: false, txnNumber: Long.fromNumber(2),
      ops: [{ insert: 0, document: { _id: 'v1' } }, { update: 0, filter: { _id: 'u' }, updateMods: { $inc: { n: 1 } } }] };
    const v1 = await set.raw(0, 'admin', verbose);
    assert.equal(v1.nModified, 1, JSON.stringify(v1));
    const v2 = await set.raw(0, 'admin', verbose);
    assert.equal(v2.code, 217, JSON.stringify(v2));
    assert.deepEqual(await coll.findOne({ _id: 'u' }), { _id: 'u', n: 2 }, 'never run twice');
    // Inserts only: errorsOnly: false is rebuilt ({ok: 1, idx, n: 1} for each).
    const ins = { ...verbose, txnNumber: Long.fromNumber(3), ops: [{ insert: 0, document: { _id: 'w1' } }, { insert: 0, document: { _id: 'w2' } }] };
    await set.raw(0, 'admin', ins);
    const i2 = await set.raw(0, 'admin', ins);
    assert.equal(i2.nInserted, 2, JSON.stringify(i2));
    assert.deepEqual(i2.cursor.firstBatch.map((d) => [d.ok, d.idx, d.n]), [[1, 0, 1], [1, 1, 1]]);
  } finally {
    await c.close();
  }
});

test('concurrent upserts of one new key on a replica set all succeed: the losers update the winner\'s document', async () => {
  const c = new MongoClient(set.uri, { maxPoolSize: 40 });
  await c.connect();
  try {
    const coll = c.db('fprs').collection('race');
    await coll.createIndex({ key: 1 }, { unique: true });
    const failures = [];
    for (let r = 0; r < 20; r++) {
      const res = await Promise.allSettled(Array.from({ length: 20 }, (_, i) =>
        coll.updateOne({ key: { $eq: `k${r}` } }, { $set: { key: `k${r}`, last: i }, $inc: { n: 1 } }, { upsert: true })));
      for (const x of res) if (x.status === 'rejected') failures.push(x.reason.message);
    }
    assert.deepEqual(failures, []);
    const docs = await coll.find({}).toArray();
    assert.equal(docs.length, 20);
    for (const d of docs) assert.equal(d.n, 20, JSON.stringify(d));
  } finally {
    await c.close();
  }
});

test('on a replica set, transactions commit (transactions.test.js), a commit outside one fails; change streams open (changestream.test.js)', async () => {
  const c = new MongoClient(set.uri);
  await c.connect();
  try {
    const coll = c.db('fprs').collection('txn');
    await coll.insertOne({ _id: 1 });
    const session = c.startSession();
    try {
      await session.withTransaction(async () => { await coll.insertOne({ _id: 2 }, { session }); });
    } finally { await session.endSession(); }
    assert.deepEqual(await coll.find({}).sort({ _id: 1 }).toArray(), [{ _id: 1 }, { _id: 2 }], 'the transaction committed');
    const abort = await c.db('admin').command({ abortTransaction: 1 }).then(() => null, (x) => x);
    assert.ok(abort && abort.code > 0, `an abort outside a transaction fails: ${abort}`);
    const w = await c.db('fprs').command({ aggregate: 'txn', pipeline: [{ $changeStream: {} }], cursor: {} });
    assert.deepEqual(w.cursor.firstBatch, []);
    assert.ok(w.cursor.postBatchResumeToken);
    await c.db('fprs').command({ killCursors: 'txn', cursors: [require('./harness').cursorId(w.cursor.id)] });
  } finally {
    await c.close();
  }
});

test('$$CLUSTER_TIME is the member\'s cluster time (a Timestamp) in aggregation and pipeline updates; replies carry operationTime', async () => {
  const c = new MongoClient(set.uri);
  await c.connect();
  try {
    const coll = c.db('fprs').collection('ct');
    const w = await c.db('fprs').command({ insert: 'ct', documents: [{ _id: 1 }] });
    assert.equal(w.operationTime._bsontype, 'Timestamp');
    const [d] = await coll.aggregate([{ $project: { t: '$$CLUSTER_TIME' } }]).toArray();
    assert.equal(d.t._bsontype, 'Timestamp', JSON.stringify(d));
    assert.ok(!d.t.lessThan(w.operationTime), 'no earlier than the insert it reads');
    await coll.updateOne({ _id: 1 }, [{ $set: { at: '$$CLUSTER_TIME' } }]);
    const u = await coll.findOne({ _id: 1 });
    assert.equal(u.at._bsontype, 'Timestamp');
  } finally {
    await c.close();
  }
});

test('currentOp shows an operation running in a transaction with its transaction sub-document (mongod\'s reportUnstashedState): parameters, times so far, expiryTime; one outside a transaction has none', async () => {
  const app = 'active-txn-op';
  const c = new MongoClient(set.uri, { appName: app });
  const watcher = new MongoClient(set.uri);
  await c.connect();
  await watcher.connect();
  const admin = watcher.db('admin');
  const session = c.startSession();
  try {
    const coll = c.db('fprs').collection('activetxn');
    await coll.insertOne({ _id: 0 });
    session.startTransaction({ readConcern: { level: 'snapshot' } });
    await coll.insertOne({ _id: 1 }, { session });
    // The transaction's find blocks in the failpoint for a while: long enough to be seen running.
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 1500, appName: app } });
    const running = coll.find({}, { session }).toArray();
    const sid = session.id.id.toString('hex');
    let row;
    for (let i = 0; i < 1000 && !row; i++) {
      const ops = (await admin.command({ currentOp: 1, appName: app, 'command.find': 'activetxn' })).inprog;
      row = ops.find((o) => o.lsid && o.lsid.id.toString('hex') === sid);
      if (!row) await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(row, 'the transaction\'s find shows in currentOp');
    assert.equal(row.type, 'op');
    assert.equal(row.active, true);
    const tx = row.transaction;
    assert.ok(tx, `a transaction sub-document: ${JSON.stringify(row)}`);
    assert.deepEqual(Object.keys(tx), ['parameters', 'readTimestamp', 'startWallClockTime', 'timeOpenMicros', 'timeActiveMicros', 'timeInactiveMicros', 'expiryTime']);
    assert.deepEqual(Object.keys(tx.parameters), ['txnNumber', 'txnRetryCounter', 'autocommit', 'readConcern']);
    assert.equal(tx.parameters.txnRetryCounter, 0);
    // The member's optime when the transaction's snapshot began: after the insert before it, not after now.
    assert.equal(tx.readTimestamp._bsontype, 'Timestamp');
    assert.ok(tx.readTimestamp.t > 0, JSON.stringify(tx.readTimestamp));
    const now = (await admin.command({ ping: 1 })).operationTime;
    assert.ok(tx.readTimestamp.compare(now) <= 0, `${tx.readTimestamp} after ${now}`);
    assert.equal(Number(tx.parameters.txnNumber), Number(row.command.txnNumber));
    assert.equal(tx.parameters.autocommit, false);
    assert.deepEqual(tx.parameters.readConcern, { level: 'snapshot' });
    const open = Number(tx.timeOpenMicros), active = Number(tx.timeActiveMicros), inactive = Number(tx.timeInactiveMicros);
    assert.ok(active > 0 && inactive >= 0, JSON.stringify(tx));
    assert.equal(active + inactive, open);
    assert.match(tx.expiryTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$/);
    // The aggregation stage shows the same; the watcher's own operation, outside any transaction, has none.
    const agg = await admin.aggregate([{ $currentOp: { allUsers: true } }]).toArray();
    const same = agg.find((o) => o.opid === row.opid);
    assert.ok(same && same.transaction && Number(same.transaction.parameters.txnNumber) === Number(tx.parameters.txnNumber));
    const self = agg.find((o) => o.command && o.command.aggregate === 1);
    assert.ok(self && self.transaction === undefined, 'an operation outside a transaction has no transaction');
    assert.deepEqual((await running).map((d) => d._id), [0, 1], 'the find ends once the block is over, in its snapshot');
    await session.commitTransaction();
  } finally {
    await admin.command({ configureFailPoint: 'failCommand', mode: 'off' });
    await session.endSession();
    await c.close();
    await watcher.close();
  }
});

test('reIndex is refused on a replica set member with 20 IllegalOperation, as mongod; the indexes stay', async () => {
  const c = new MongoClient(set.uri);
  await c.connect();
  try {
    const db = c.db('fprs');
    await db.collection('ri').createIndex({ a: 1 });
    const err = await db.command({ reIndex: 'ri' }).then(() => null, (e) => e);
    assert.ok(err, 'refused');
    assert.equal(err.code, 20);
    assert.match(err.message, /reIndex is only allowed on a standalone mongod instance/);
    assert.equal((await db.collection('ri').listIndexes().toArray()).length, 2);
  } finally {
    await c.close();
  }
});
