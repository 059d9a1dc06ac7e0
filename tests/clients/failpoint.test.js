'use strict';
/*
 * configureFailPoint and the failCommand fail point (issue 12), as drivers
 * use them to test retries and timeouts, plus mayfly's own fail points in
 * the TTL monitor.
 *
 * The server runs with --setParameter enableTestCommands=1 (without it the
 * command does not exist: 59, checked on a second server). Every test turns
 * the points it set off again, so tests do not leak into each other.
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'enableTestCommands=1', '--setParameter', 'ttlMonitorSleepSecs=1'] });

const admin = () => srv.client.db('admin');
const fp = (cmd) => admin().command({ configureFailPoint: 'failCommand', ...cmd });
const off = (name = 'failCommand') => admin().command({ configureFailPoint: name, mode: 'off' });
/* Sets server parameters, one setParameter each, in order. */
const params = async (o) => { for (const [k, v] of Object.entries(o)) await admin().command({ setParameter: 1, [k]: v }); };

/* A client that records every command it sends. */
async function monitoredClient(extra = {}) {
  const c = await srv.newClient({ monitorCommands: true, ...extra });
  const started = [];
  c.on('commandStarted', (e) => started.push(e.commandName));
  return { c, started };
}

h.test('configureFailPoint needs enableTestCommands=1: otherwise 59 CommandNotFound and not listed', async () => {
  const plain = new h.MayflyServer();
  await plain.start();
  const c = new MongoClient(plain.uri);
  try {
    await c.connect();
    await h.expectCode(c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' }), 59);
    const cmds = await c.db('admin').command({ listCommands: 1 });
    assert.equal(cmds.commands.configureFailPoint, undefined);
  } finally {
    await c.close();
    const info = await plain.stop();
    plain.cleanup();
    assert.equal(info.code, 0);
  }
  const cmds = await admin().command({ listCommands: 1 });
  assert.ok(cmds.commands.configureFailPoint, 'listed when enabled');
  assert.ok(cmds.commands.waitForFailPoint, 'so is waitForFailPoint');
});

h.test('waitForFailPoint returns once a point has fired timesEntered times in all (configureFailPoint\'s count + n); maxTimeMS, unknown names and missing fields answer as mongod', async () => {
  const { count } = await fp({ mode: { times: 2 }, data: { errorCode: 2, failCommands: ['distinct'] } });
  const coll = srv.client.db('wfp').collection('c');
  const waited = admin().command({ waitForFailPoint: 'failCommand', timesEntered: count + 2, maxTimeMS: 10000 });
  let done = false;
  waited.then(() => { done = true; }, () => { done = true; });
  await h.expectCode(coll.distinct('x'), 2);
  await new Promise((res) => setTimeout(res, 100));
  assert.equal(done, false, 'one firing of two: still waiting');
  await h.expectCode(coll.distinct('x'), 2);
  assert.equal((await waited).ok, 1);
  await h.expectCode(admin().command({ waitForFailPoint: 'failCommand', timesEntered: count + 3, maxTimeMS: 200 }), 50);
  await h.expectCode(admin().command({ waitForFailPoint: 'noSuchPoint', timesEntered: 1, maxTimeMS: 100 }), 266, /^noSuchPoint not found$/);
  await h.expectCode(admin().command({ waitForFailPoint: 'failCommand', maxTimeMS: 100 }), 40414);
  await off();
});

h.test('configureFailPoint refuses bad input with mongod\'s codes', async () => {
  await h.expectCode(admin().command({ configureFailPoint: 'noSuchPoint', mode: 'alwaysOn' }), 266, /noSuchPoint not found/);
  await h.expectCode(admin().command({ configureFailPoint: 'failCommand' }), 20, /must supply a 'mode'/);
  await h.expectCode(fp({ mode: 'sometimes' }), 2, /unknown mode: sometimes/);
  await h.expectCode(fp({ mode: { times: -1 } }), 2, /must be positive/);
  await h.expectCode(fp({ mode: { times: 'x' } }), 14);
  await h.expectCode(fp({ mode: { often: 1 } }), 2);
  await h.expectCode(fp({ mode: 5 }), 14);
  await h.expectCode(fp({ mode: { activationProbability: 2 } }), 2);
  await h.expectCode(fp({ mode: 'alwaysOn', data: 3 }), 14);
  await h.expectCode(srv.client.db('test').command({ configureFailPoint: 'failCommand', mode: 'off' }), 13);
  await h.expectCode(fp({ mode: 'off', bogus: 1 }), 40415);
});

h.test('errorCode with {times: 1} fails the named command once; count reports earlier activations', async () => {
  const coll = srv.freshDb('fc').collection('c');
  await coll.insertOne({ _id: 1 });
  const r1 = await fp({ mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 2 } });
  const before = Number(r1.count);
  assert.equal(r1.ok, 1);
  // A command not named is untouched and does not use up the single activation.
  assert.equal(await coll.countDocuments({}), 1);
  const c = await srv.newClient({ retryReads: false });
  const err = await c.db(coll.dbName).collection('c').findOne({}).then(() => null, (e) => e);
  assert.ok(err, 'the find failed');
  assert.equal(err.code, 2);
  assert.equal(err.codeName, 'BadValue');
  assert.equal(err.message, "Failing command via 'failCommand' failpoint");
  assert.deepEqual(await c.db(coll.dbName).collection('c').findOne({}), { _id: 1 });
  const r2 = await off();
  assert.equal(Number(r2.count), before + 1);
});

h.test('a driver retries a read after a retryable failCommand error (91 ShutdownInProgress)', async () => {
  const coll = srv.freshDb('retry').collection('c');
  await coll.insertMany([{ _id: 1 }, { _id: 2 }]);
  const { c, started } = await monitoredClient({ retryReads: true });
  await fp({ mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 91 } });
  try {
    const docs = await c.db(coll.dbName).collection('c').find({}).sort({ _id: 1 }).toArray();
    assert.deepEqual(docs, [{ _id: 1 }, { _id: 2 }]);
    assert.equal(started.filter((n) => n === 'find').length, 2, 'one failed find and its retry');
  } finally {
    await off();
  }
  // Without retries the same error reaches the application.
  await fp({ mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 91 } });
  const nr = await srv.newClient({ retryReads: false });
  await h.expectCode(nr.db(coll.dbName).collection('c').findOne({}), 91);
  await off();
});

h.test('closeConnection drops the connection with no reply; the driver retries the read on a new one', async () => {
  const coll = srv.freshDb('close').collection('c');
  await coll.insertOne({ _id: 1, v: 'x' });
  await fp({ mode: { times: 1 }, data: { failCommands: ['find'], closeConnection: true } });
  const { c, started } = await monitoredClient({ retryReads: true });
  try {
    assert.deepEqual(await c.db(coll.dbName).collection('c').findOne({ _id: 1 }), { _id: 1, v: 'x' });
    assert.equal(started.filter((n) => n === 'find').length, 2);
  } finally {
    await off();
  }
  // On a raw socket: no reply at all, the server closes the connection, and keeps serving.
  await fp({ mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true, failInternalCommands: true } });
  const sock = net.connect(srv.port, '127.0.0.1');
  await new Promise((res) => sock.once('connect', res));
  const got = [];
  sock.on('data', (d) => got.push(d));
  const closed = new Promise((res) => sock.once('close', res));
  sock.write(h.buildOpMsg(7, { ping: 1, $db: 'admin' }));
  await closed;
  assert.equal(Buffer.concat(got).length, 0, 'no reply bytes');
  assert.equal((await admin().command({ ping: 1 })).ok, 1);
  await off();
});

h.test('blockConnection delays the named command by blockTimeMS; other connections are not held', async () => {
  const coll = srv.freshDb('block').collection('c');
  await coll.insertOne({ _id: 1 });
  const app = 'blocked-app';
  const blocked = await srv.newClient({ appName: app });
  await fp({ mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 400, appName: app } });
  try {
    const t0 = Date.now();
    const p = blocked.db(coll.dbName).collection('c').findOne({ _id: 1 });
    // Meanwhile another client's find (other appName) answers at once.
    const t1 = Date.now();
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1 });
    const otherMs = Date.now() - t1;
    assert.deepEqual(await p, { _id: 1 }, 'a block alone lets the command run');
    const blockedMs = Date.now() - t0;
    assert.ok(blockedMs >= 380, `blocked ${blockedMs} ms`);
    assert.ok(otherMs < blockedMs, `the other find took ${otherMs} ms`);
  } finally {
    await off();
  }
  // A block counts against maxTimeMS, like mongod's interruptible sleep.
  await fp({ mode: 'alwaysOn', data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 5000, appName: app } });
  try {
    await h.expectCode(blocked.db(coll.dbName).collection('c').find({}).maxTimeMS(100).toArray(), 50);
  } finally {
    await off();
  }
  // blockConnection without blockTimeMS: 72 InvalidOptions.
  await fp({ mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, appName: app } });
  await h.expectCode(blocked.db(coll.dbName).collection('c').findOne({}), 72);
  await off();
});

h.test('appName limits the fail point to one application; {skip: n} lets n matching commands pass', async () => {
  const coll = srv.freshDb('app').collection('c');
  await coll.insertOne({ _id: 1 });
  const a = await srv.newClient({ appName: 'app-a', retryReads: false });
  const b = await srv.newClient({ appName: 'app-b', retryReads: false });
  await fp({ mode: 'alwaysOn', data: { failCommands: ['find'], errorCode: 11601, appName: 'app-a' } });
  try {
    await h.expectCode(a.db(coll.dbName).collection('c').findOne({}), 11601);
    assert.deepEqual(await b.db(coll.dbName).collection('c').findOne({}), { _id: 1 });
  } finally {
    await off();
  }
  await fp({ mode: { skip: 2 }, data: { failCommands: ['count'], errorCode: 2, appName: 'app-b' } });
  try {
    const bc = b.db(coll.dbName).collection('c');
    assert.equal(await bc.estimatedDocumentCount(), 1);
    assert.equal(await bc.estimatedDocumentCount(), 1);
    await h.expectCode(bc.estimatedDocumentCount(), 2);
    await h.expectCode(bc.estimatedDocumentCount(), 2);
  } finally {
    await off();
  }
});

h.test('errorLabels in the data are what the error carries; an unknown code is named Location<code>', async () => {
  const coll = srv.freshDb('labels').collection('c');
  await fp({ mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 112, errorLabels: ['TransientTransactionError'] } });
  const err = await coll.insertOne({ a: 1 }).then(() => null, (e) => e);
  assert.ok(err);
  assert.equal(err.code, 112);
  assert.ok(err.hasErrorLabel('TransientTransactionError'), JSON.stringify(err.errorLabels));
  assert.equal(await coll.countDocuments({}), 0, 'the insert did not run');
  await fp({ mode: { times: 1 }, data: { failCommands: ['ping'], errorCode: 9999 } });
  const raw = await admin().command({ ping: 1 }).then(() => null, (e) => e);
  assert.equal(raw.code, 9999);
  assert.equal(raw.codeName, 'Location9999');
});

h.test('writeConcernError is added to the reply of a write that did run', async () => {
  const coll = srv.freshDb('wce').collection('c');
  await fp({
    mode: { times: 1 },
    data: { failCommands: ['insert'], writeConcernError: { code: 100, codeName: 'UnsatisfiableWriteConcern', errmsg: 'Not enough data-bearing nodes' } },
  });
  const err = await coll.insertOne({ _id: 5 }).then(() => null, (e) => e);
  assert.ok(err, 'the driver reports the write concern error');
  assert.equal(err.code, 100);
  assert.deepEqual(await coll.findOne({ _id: 5 }), { _id: 5 }, 'the write itself happened');
  await coll.insertOne({ _id: 6 }); // used up
  // The raw reply: ok 1 and the writeConcernError document as given.
  await fp({ mode: { times: 1 }, data: { failCommands: ['insert'], writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } } });
  const raw = await h.rawConnect(srv.port);
  const r = await raw.command(coll.dbName, { insert: 'c', documents: [{ _id: 7 }] });
  raw.close();
  assert.equal(r.ok, 1);
  assert.equal(r.n, 1);
  assert.deepEqual(r.writeConcernError, { code: 64, errmsg: 'waiting for replication timed out' });
});

h.test('failCommands names a command by any of its names (isMaster fails hello)', async () => {
  await fp({ mode: { times: 1 }, data: { failCommands: ['isMaster'], errorCode: 2 } });
  await h.expectCode(admin().command({ hello: 1 }), 2);
  assert.equal((await admin().command({ hello: 1 })).ok, 1);
});

h.test('maxTimeAlwaysTimeOut: a command with maxTimeMS fails with 50 at once; one without runs', async () => {
  const coll = srv.freshDb('mt').collection('c');
  await coll.insertOne({ _id: 1 });
  await admin().command({ configureFailPoint: 'maxTimeAlwaysTimeOut', mode: 'alwaysOn' });
  try {
    await h.expectCode(coll.find({}).maxTimeMS(60000).toArray(), 50, /exceeded time limit/);
    await h.expectCode(coll.aggregate([{ $match: {} }], { maxTimeMS: 60000 }).toArray(), 50);
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: 1 }]);
  } finally {
    await off('maxTimeAlwaysTimeOut');
  }
  assert.deepEqual(await coll.find({}).maxTimeMS(60000).toArray(), [{ _id: 1 }]);
});

/*
 * Waits (20 s at most) until the server has hit fail point name again since
 * r0 (the reply that turned it on), keeping it on: for
 * hangTTLMonitorAfterReadAhead, a round has been read ahead and the monitor
 * holds there; for hangTTLDeleterInBatch, a TTL batch's transaction is open.
 */
async function untilHit(name, r0) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const r = await admin().command({ configureFailPoint: name, mode: 'alwaysOn' });
    if (Number(r.count) > Number(r0.count)) return;
    assert.ok(Date.now() < deadline, `the server never reached ${name}`);
    await h.sleep(20);
  }
}
const untilReadAhead = (r0) => untilHit('hangTTLMonitorAfterReadAhead', r0);

/* serverStatus().metrics.ttl. */
const ttl = async () => (await admin().command({ serverStatus: 1 })).metrics.ttl;

h.test('D9 read ahead: a document inserted into the keys a parallel round has read ahead (hangTTLMonitorAfterReadAhead) is deleted by a later pass, not left for the 10 s full scan', { timeout: 120000 }, async () => {
  const db = srv.freshDb('readahead');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const N = 3000;
  const base = Date.now() - 3600e3;
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 2, ttlMonitorBatchDocs: 50 });
  try {
    // _id i is dated base - i: the oldest (deleted first) is N - 1. A round reads 2 threads x 4 pieces
    // x 50 keys, so the first round takes positions 0-399 from the oldest and reads 400-799 ahead.
    await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, at: new Date(base - i) })));
    const r0 = await admin().command({ configureFailPoint: 'hangTTLMonitorAfterReadAhead', mode: 'alwaysOn' });
    await params({ ttlMonitorEnabled: true });
    try {
      await untilReadAhead(r0);
      // Position 600 from the oldest: inside the keys just read ahead, committed after that read.
      await coll.insertOne({ _id: 'ahead', at: new Date(base - (N - 1 - 600)) });
    } finally {
      await off('hangTTLMonitorAfterReadAhead');
    }
    const deadline = Date.now() + 5000;
    while ((await coll.countDocuments({})) > 0 && Date.now() < deadline) await h.sleep(50);
    assert.deepEqual(await coll.find({}).toArray(), [], 'left after the mass expiry');
  } finally {
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('D9 ranges: a batch\'s records go as ranges, one for each run of consecutive record ids it deleted; documents changed after the read (a due document inserted among them, one moved to the future, one deleted by a client) leave the collection and its indexes consistent', { timeout: 120000 }, async () => {
  const db = srv.freshDb('ranges');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const N = 3000;
  const base = Date.now() - 3600e3;
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 2, ttlMonitorBatchDocs: 50 });
  const before = await ttl();
  try {
    // As in the read-ahead test: the first round deletes positions 0-399 from the oldest, reads 400-799 ahead.
    await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, at: new Date(base - i) })));
    const r0 = await admin().command({ configureFailPoint: 'hangTTLMonitorAfterReadAhead', mode: 'alwaysOn' });
    await params({ ttlMonitorEnabled: true });
    const future = new Date(Date.now() + 3600e3);
    try {
      await untilReadAhead(r0);
      // Positions 600, 610 and 620 from the oldest, all inside the keys just read ahead.
      await coll.insertOne({ _id: 'inserted', at: new Date(base - (N - 1 - 600) + 0.5) });
      assert.equal((await coll.updateOne({ _id: N - 1 - 610 }, { $set: { at: future } })).modifiedCount, 1);
      assert.equal((await coll.deleteOne({ _id: N - 1 - 620 })).deletedCount, 1);
    } finally {
      await off('hangTTLMonitorAfterReadAhead');
    }
    const deadline = Date.now() + 20000;
    while ((await coll.countDocuments({})) > 1 && Date.now() < deadline) await h.sleep(50);
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: N - 1 - 610, at: future }], 'only the moved document is left');
    // Its TTL index entry is there (and nothing else is): found through the index, and validate agrees.
    assert.deepEqual(await coll.find({ at: { $gt: new Date() } }).hint({ at: 1 }).toArray(), [{ _id: N - 1 - 610, at: future }]);
    assert.deepEqual(await coll.find({ at: { $lte: new Date() } }).hint({ at: 1 }).toArray(), []);
    const v = await db.command({ validate: 'c', full: true });
    assert.equal(v.valid, true, JSON.stringify(v));
    assert.equal(Number(v.nrecords), 1);
    assert.equal(Number(v.keysPerIndex.at_1), 1, JSON.stringify(v.keysPerIndex));
    assert.equal(Number(v.keysPerIndex._id_), 1, JSON.stringify(v.keysPerIndex));
    // The records went as ranges, also on each side of the gaps the changed documents left (one kept, one gone);
    // the inserted document's record, its id far from the others', went on its own.
    const after = await ttl();
    const batches = Number(after.batches) - Number(before.batches);
    const ranges = Number(after.rangeBatches) - Number(before.rangeBatches);
    const deleted = Number(after.deletedDocuments) - Number(before.deletedDocuments);
    const alone = deleted - (Number(after.rangeRecords) - Number(before.rangeRecords));
    assert.equal(deleted, N - 1, 'every document but the one moved away');
    assert.ok(ranges >= batches - 2, `${ranges} of ${batches} batches' records in ranges`);
    assert.ok(alone >= 1 && alone <= 8 + 2 * 7, `${alone} records one by one (the inserted one, and runs of fewer than 8)`);
  } finally {
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('D9 ranges: with random _ids, consecutive records go as ranges and their _id and other index entries one by one; records with gaps (documents that stay) go as the runs between them, runs shorter than 8 one by one; every index stays consistent', { timeout: 120000 }, async () => {
  const db = srv.freshDb('ranges_rand');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await coll.createIndex({ tag: 1 });
  const rand = () => crypto.randomBytes(8).toString('hex');
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 1, ttlMonitorBatchDocs: 100 });
  const before = await ttl();
  try {
    const base = Date.now() - 3600e3;
    const future = new Date(Date.now() + 3600e3);
    // Expiring in insertion (record id) order, _ids random: the first 2000 all due, then every 10th of 500 stays
    // (runs of 9 due between them), then every 5th of 500 (runs of 4).
    const stays = (i) => (i >= 2000 && i < 2500 && i % 10 === 9) || (i >= 2500 && i % 5 === 4);
    const docs = Array.from({ length: 3000 }, (_, i) => ({ _id: rand(), at: stays(i) ? future : new Date(base + i), tag: i % 7 }));
    await coll.insertMany(docs);
    await params({ ttlMonitorEnabled: true });
    const deadline = Date.now() + 30000;
    while ((await coll.countDocuments({})) > 150 && Date.now() < deadline) await h.sleep(50);
    const kept = docs.filter((d) => d.at === future).sort((a, b) => (a._id < b._id ? -1 : 1));
    const left = await coll.find({}).sort({ _id: 1 }).toArray();
    assert.deepEqual(left, kept);
    const v = await db.command({ validate: 'c', full: true });
    assert.equal(v.valid, true, JSON.stringify(v));
    for (const ix of ['_id_', 'at_1', 'tag_1']) assert.equal(Number(v.keysPerIndex[ix]), 150, JSON.stringify(v.keysPerIndex));
    for (let t = 0; t < 7; t++) {
      assert.equal(await coll.countDocuments({ tag: t }, { hint: { tag: 1 } }), left.filter((d) => d.tag === t).length);
      assert.equal((await coll.find({ tag: t }).hint({ tag: 1 }).toArray()).length, left.filter((d) => d.tag === t).length);
    }
    const after = await ttl();
    const batches = Number(after.batches) - Number(before.batches);
    const ranges = Number(after.rangeBatches) - Number(before.rangeBatches);
    const inRanges = Number(after.rangeRecords) - Number(before.rangeRecords);
    // The first 2,450 deletions: runs of 9 or more. The last 400 (runs of 4): one by one.
    assert.ok(ranges >= 20 && ranges < batches, `${ranges} of ${batches} batches' records in ranges`);
    assert.ok(inRanges >= 2450 - 2 * 100 && inRanges <= 2450, `${inRanges} records in ranges`);
  } finally {
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('D9 ranges: a batch\'s index entries go as ranges only while no other write is in the collection\'s indexes; a document inserted into a batch\'s key ranges while its transaction is open (hangTTLDeleterInBatch) keeps its entries, also through kill -9', { timeout: 120000 }, async () => {
  const dbName = srv.freshDb('ixranges').databaseName;
  let db = srv.client.db(dbName);
  let coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await coll.createIndex({ tag: 1 });
  const N = 2000;
  const base = Date.now() - 3600e3;
  const future = new Date(Date.now() + 3600e3);
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 1, ttlMonitorBatchDocs: 100 });
  try {
    // Expiring in _id and tag order: the first batch takes _id and tag 0..990.
    await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i * 10, at: new Date(base + i), tag: i * 10 })),
      { writeConcern: { w: 1, j: true } });
    const before = await ttl();
    const r0 = await admin().command({ configureFailPoint: 'hangTTLDeleterInBatch', mode: 'alwaysOn' });
    await params({ ttlMonitorEnabled: true });
    try {
      await untilHit('hangTTLDeleterInBatch', r0);
      // Inside the open batch's _id and tag ranges, not due; committed (and synced) before the batch commits.
      await coll.insertOne({ _id: 505, at: future, tag: 505 }, { writeConcern: { w: 1, j: true } });
    } finally {
      await off('hangTTLDeleterInBatch');
    }
    const deadline = Date.now() + 30000;
    while ((await coll.countDocuments({})) > 1 && Date.now() < deadline) await h.sleep(50);
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: 505, at: future, tag: 505 }]);
    const after = await ttl();
    const batches = Number(after.batches) - Number(before.batches);
    const ixRanges = Number(after.indexRanges) - Number(before.indexRanges);
    // Most batches removed their _id, tag and TTL index entries as ranges; the one the insert went through did not
    // (nor does one of fewer than 8 documents, which the monitor's timing can make).
    assert.ok(batches >= 19 && ixRanges >= 3 * Math.floor(batches / 2) && ixRanges < 3 * batches, `${ixRanges} index ranges in ${batches} batches`);
    // The batches' commits reach the log before the kill: a synced write after them.
    await db.collection('sync').insertOne({ x: 1 }, { writeConcern: { w: 1, j: true } });
    await srv.server.restart({ kill9: true });
    await srv.reconnect();
    db = srv.client.db(dbName);
    coll = db.collection('c');
    // Recovery replays the later batches' truncates: the document inserted into the ranges keeps its entries.
    const v = await db.command({ validate: 'c', full: true });
    assert.equal(v.valid, true, JSON.stringify(v));
    for (const ix of ['_id_', 'at_1', 'tag_1']) assert.equal(Number(v.keysPerIndex[ix]), 1, JSON.stringify(v.keysPerIndex));
    assert.deepEqual(await coll.find({ tag: 505 }).hint({ tag: 1 }).toArray(), [{ _id: 505, at: future, tag: 505 }]);
    assert.deepEqual(await coll.find({ _id: 505 }).hint({ _id: 1 }).toArray(), [{ _id: 505, at: future, tag: 505 }]);
    assert.deepEqual(await coll.find({ at: future }).hint({ at: 1 }).toArray(), [{ _id: 505, at: future, tag: 505 }]);
  } finally {
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('D9 ranges: documents several clients insert at once still go as record ranges: each insert command\'s documents get consecutive record ids (reserved per transaction of 500), so a batch within one command\'s documents removes its records as one range', { timeout: 120000 }, async () => {
  const db = srv.freshDb('ranges_conc');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const clients = await Promise.all([0, 1, 2, 3].map(() => srv.newClient()));
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 1, ttlMonitorBatchDocs: 100 });
  const before = await ttl();
  try {
    // Four commands at once, each 2,000 documents expiring in its own stretch of time, in its insertion order.
    const base = Date.now() - 3600e3;
    await Promise.all(clients.map((c, k) => c.db(db.databaseName).collection('c').insertMany(
      Array.from({ length: 2000 }, (_, i) => ({ _id: k * 2000 + i, at: new Date(base + k * 2000 + i) })))));
    await params({ ttlMonitorEnabled: true });
    const deadline = Date.now() + 30000;
    while ((await coll.estimatedDocumentCount()) > 0 && Date.now() < deadline) await h.sleep(50);
    assert.equal(await coll.countDocuments({}), 0);
    const after = await ttl();
    const batches = Number(after.batches) - Number(before.batches);
    const ranges = Number(after.rangeBatches) - Number(before.rangeBatches);
    // A batch across two transactions' reservations goes as two ranges.
    assert.ok(batches >= 80 && ranges >= batches - 2, `${ranges} of ${batches} batches' records in ranges`);
    assert.ok(Number(after.rangeRecords) - Number(before.rangeRecords) >= 8000 - 2 * 100, 'records in ranges');
    const v = await db.command({ validate: 'c', full: true });
    assert.equal(v.valid, true, JSON.stringify(v));
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('D9 ranges: documents due at one instant, inserted by several clients at once: a batch (record id order) spans insert commands whose _ids are far apart, and each index\'s entries go as the runs of them nothing else lies between; documents that stay inside a run keep their entries', { timeout: 120000 }, async () => {
  const db = srv.freshDb('ranges_runs');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const clients = await Promise.all([0, 1, 2, 3].map(() => srv.newClient()));
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 1, ttlMonitorBatchDocs: 300 });
  try {
    const at = new Date(Date.now() - 3600e3);
    const future = new Date(Date.now() + 3600e3);
    // Not due, each inside one command's _id run: the _id index's runs end there.
    const stay = [0, 1, 2, 3].map((k) => ({ _id: k * 10000 + 500.5, at: future }));
    await coll.insertMany(stay);
    await Promise.all(clients.map((c, k) => c.db(db.databaseName).collection('c').insertMany(
      Array.from({ length: 2000 }, (_, i) => ({ _id: k * 10000 + i, at })))));
    const before = await ttl();
    await params({ ttlMonitorEnabled: true });
    const deadline = Date.now() + 30000;
    while ((await coll.estimatedDocumentCount()) > 4 && Date.now() < deadline) await h.sleep(50);
    assert.deepEqual(await coll.find({}).sort({ _id: 1 }).toArray(), stay);
    assert.deepEqual(await coll.find({ _id: { $gte: 0 } }).hint({ _id: 1 }).toArray(), stay);
    assert.deepEqual(await coll.find({ at: future }).hint({ at: 1 }).toArray(), stay);
    const v = await db.command({ validate: 'c', full: true });
    assert.equal(v.valid, true, JSON.stringify(v));
    for (const ix of ['_id_', 'at_1']) assert.equal(Number(v.keysPerIndex[ix]), 4, JSON.stringify(v.keysPerIndex));
    const after = await ttl();
    const batches = Number(after.batches) - Number(before.batches);
    const ixRanges = Number(after.indexRanges) - Number(before.indexRanges);
    // Every batch of 8 or more removed from both indexes in ranges; with one range per index, a batch whose _ids
    // come from two commands (or hold a document that stays) would go one by one.
    assert.ok(batches >= 27 && ixRanges >= 2 * (batches - 2), `${ixRanges} index ranges in ${batches} batches`);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('D9 pieces: a deleter slowed down (slowTTLDeleters) takes fewer of a mass expiry\'s pieces, and its share again once it is fast', { timeout: 120000 }, async () => {
  const db = srv.freshDb('slowdel');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const byWorkers = async () => Number((await ttl()).deletedByWorkers);
  const expire = async (n, tag) => {
    await params({ ttlMonitorEnabled: false });
    const at = new Date(Date.now() - 3600e3);
    for (let s = 0; s < n; s += 2000) {
      await coll.insertMany(Array.from({ length: Math.min(2000, n - s) }, (_, i) => ({ _id: `${tag}${s + i}`, at })));
    }
    const before = await byWorkers();
    await params({ ttlMonitorEnabled: true });
    const deadline = Date.now() + 60000;
    while ((await coll.estimatedDocumentCount()) > 0) {
      assert.ok(Date.now() < deadline, `${tag}: the mass expiry did not finish`);
      await h.sleep(50);
    }
    return (await byWorkers()) - before;
  };
  await params({ ttlMonitorWorkers: 2, ttlMonitorBatchDocs: 500 });
  try {
    // Rounds of 2 threads x 4 pieces of 500 keys, taken in turn. The slowed deleter sleeps a millisecond
    // per document after each piece it deletes (half a second), while the monitor takes the round's
    // other pieces: one piece in eight per round, 2,500 of the 20,000.
    await admin().command({ configureFailPoint: 'slowTTLDeleters', mode: 'alwaysOn', data: { usPerDoc: 1000 } });
    let slow;
    try {
      slow = await expire(20000, 'slow');
    } finally {
      await off('slowTTLDeleters');
    }
    assert.ok(slow <= 0.3 * 20000, `the slowed deleter took ${slow} of 20000 documents`);
    // Fast again: it takes a fair part of the next mass expiry.
    const N = 30000;
    const fast = await expire(N, 'fast');
    assert.ok(fast >= 0.1 * N, `the deleter took ${fast} of ${N} documents after it was fast again (${slow} of 20000 while slow)`);
  } finally {
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500 });
  }
});

h.test('hangTTLMonitorBetweenPasses holds expiry while on; ttlMonitorFailBatch fails batches that are retried', async () => {
  const coll = srv.freshDb('ttlfp').collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await admin().command({ configureFailPoint: 'hangTTLMonitorBetweenPasses', mode: 'alwaysOn' });
  try {
    await coll.insertMany([{ _id: 1, at: new Date(0) }, { _id: 2, at: new Date(0) }]);
    await h.sleep(2500);
    assert.equal(await coll.countDocuments({}), 2, 'nothing expired while the monitor hangs');
  } finally {
    await off('hangTTLMonitorBetweenPasses');
  }
  const deadline = Date.now() + 10000;
  while ((await coll.countDocuments({})) > 0 && Date.now() < deadline) await h.sleep(50);
  assert.equal(await coll.countDocuments({}), 0, 'expired once the point is off');

  const r0 = await admin().command({ configureFailPoint: 'ttlMonitorFailBatch', mode: { times: 2 } });
  await coll.insertOne({ _id: 3, at: new Date(0) });
  const d2 = Date.now() + 15000;
  while ((await coll.countDocuments({})) > 0 && Date.now() < d2) await h.sleep(50);
  assert.equal(await coll.countDocuments({}), 0, 'deleted after the failed batches');
  const r1 = await off('ttlMonitorFailBatch');
  assert.equal(Number(r1.count) - Number(r0.count), 2, 'both injected failures happened');
  assert.match(srv.server.stderrTail(400), /ttlMonitorFailBatch/);
});

h.test('D7 beyond: a write slow between its commit and its note (pauseTTLWriterBeforeNote) still wakes the monitor for the index whose deadline it brought forward', { timeout: 60000 }, async () => {
  // Periodic passes and full deadline reads rare, so only the write's own wake-up can bring the monitor back.
  await params({ ttlMonitorSleepSecs: 60, ttlMonitorDeadlineRefreshMS: 600000 });
  const db = srv.freshDb('fpnote');
  try {
    const a = db.collection('a');
    const b = db.collection('b');
    await a.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    await b.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    await b.insertOne({ _id: 'later', at: new Date(Date.now() + 3600e3) });
    const T = Date.now() + 1500;
    await a.insertOne({ _id: 'a', at: new Date(T) });
    await admin().command({ configureFailPoint: 'pauseTTLWriterBeforeNote', mode: 'alwaysOn', data: { ms: 300 } });
    const due = T + 600;
    try {
      await h.sleep(Math.max(0, T - 100 - Date.now()));
      // Committed just before a's deadline (so, later than it, no wake-up then); its note lands ~200 ms after
      // the pass at T has recomputed the deadline without it and settled on b's hour.
      await b.insertOne({ _id: 'soon', at: new Date(due) });
    } finally {
      await off('pauseTTLWriterBeforeNote');
    }
    const until = Date.now() + 5000;
    while ((await b.countDocuments({ _id: 'soon' })) > 0) {
      assert.ok(Date.now() < until, 'b\'s document was not deleted within 4 s of its expiry');
      await h.sleep(20);
    }
    const late = Date.now() - due;
    console.log(`a note made 300 ms after its commit: deleted ${late} ms after its expiry`);
    assert.ok(late < 1500, `deleted ${late} ms after its expiry`);
    assert.equal(await a.countDocuments(), 0);
    assert.equal(await b.countDocuments({ _id: 'later' }), 1);
  } finally {
    await params({ ttlMonitorSleepSecs: 1, ttlMonitorDeadlineRefreshMS: 1000 });
    await db.dropDatabase().catch(() => {});
  }
});

h.test('D7 beyond: a document moved, during a round that resumes at a key of Date R, to that same Date R with a smaller record id is deleted at once, not at the next periodic pass (the resumed read starts after it)', { timeout: 120000 }, async () => {
  const db = srv.freshDb('resumeeq');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const R = new Date(1000);
  await params({ ttlMonitorEnabled: false, ttlMonitorWorkers: 1, ttlMonitorBatchDocs: 50, ttlMonitorSleepSecs: 60 });
  try {
    // sigma has the smallest record id; the others are all due at R, so the batches resume at (R, record id).
    await coll.insertOne({ _id: 'sigma', at: new Date(Date.now() + 3600e3) });
    await coll.insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: i, at: R })));
    const r0 = await admin().command({ configureFailPoint: 'hangTTLDeleterInBatch', mode: 'alwaysOn' });
    await params({ ttlMonitorEnabled: true });
    try {
      await untilHit('hangTTLDeleterInBatch', r0);
      // The first batch holds; the next read resumes at (R, its 51st record id), past sigma's.
      assert.equal((await coll.updateOne({ _id: 'sigma' }, { $set: { at: R } })).modifiedCount, 1);
    } finally {
      await off('hangTTLDeleterInBatch');
    }
    // The periodic pass is 60 s away.
    const deadline = Date.now() + 10000;
    while ((await coll.countDocuments({})) > 0 && Date.now() < deadline) await h.sleep(50);
    assert.deepEqual(await coll.find({}).toArray(), [], 'left after the resumed rounds');
  } finally {
    await params({ ttlMonitorEnabled: true, ttlMonitorWorkers: 0, ttlMonitorBatchDocs: 500, ttlMonitorSleepSecs: 1 });
  }
});
