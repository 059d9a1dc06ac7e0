'use strict';
/*
 * killOp and interruption (issue 7): a killed find, aggregate, update,
 * delete or TTL batch stops at its next yield point with 11601 Interrupted;
 * SIGTERM interrupts what is running instead of waiting for it.
 *
 * Each test starts a slow operation on one connection, finds it in
 * currentOp from another, kills it, and checks the error the first
 * connection gets and that the server carries on.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

/* A filter every document fails, expensive enough that a scan of the collection takes a while. */
const SLOW_FILTER = {
  $expr: { $eq: [{ $strLenCP: { $concat: ['$s', '$s', '$s', '$s', '$s', '$s'] } }, -1] },
};

async function fill(coll, n) {
  const s = 'a fairly long string that the slow filter concatenates six times';
  for (let base = 0; base < n; base += 5000) {
    const docs = [];
    for (let i = base; i < Math.min(n, base + 5000); i++) docs.push({ _id: i, s, k: i % 7 });
    await coll.insertMany(docs, { ordered: false });
  }
}

/* Polls currentOp until an operation matching pred shows up; returns its opid. */
async function waitForOp(admin, pred, what) {
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline) {
    const r = await admin.command({ currentOp: 1 });
    const op = r.inprog.find(pred);
    if (op) return op.opid;
    await h.sleep(5);
  }
  throw new Error(`${what} never showed in currentOp`);
}

/* Runs op() on its own connection, kills it once it shows in currentOp, and returns its error. */
async function killWhileRunning(pred, what, op) {
  const other = await srv.newClient();
  try {
    const running = op(other).then(() => null, (e) => e);
    const opid = await waitForOp(srv.client.db('admin'), pred, what);
    const r = await srv.client.db('admin').command({ killOp: 1, op: opid });
    assert.equal(r.ok, 1);
    const err = await running;
    assert.ok(err, `${what} was killed, so it must fail`);
    return err;
  } finally {
    await other.close();
  }
}

let big;
h.test('setup: a collection large enough that a scan takes a while', { timeout: 240000 }, async () => {
  big = srv.client.db('killop').collection('big');
  await fill(big, 80000);
  assert.equal(await big.estimatedDocumentCount(), 80000);
});

h.test('a killed find fails with 11601 Interrupted', { timeout: 120000 }, async () => {
  const err = await killWhileRunning((o) => o.ns === 'killop.big' && o.op === 'query', 'find',
    (c) => c.db('killop').collection('big').find(SLOW_FILTER).toArray());
  assert.equal(err.code, 11601, err.message);
  assert.equal(err.codeName, 'Interrupted');
  let want = 0;
  for (let i = 0; i < 80000; i++) if (i % 7 === 3) want++;
  assert.equal(await big.countDocuments({ k: 3 }), want, 'the server carries on');
});

h.test('currentOp shows a running query\'s planSummary: the index it scans', { timeout: 120000 }, async () => {
  await big.createIndex({ k: 1 });
  try {
    let shown = null;
    const err = await killWhileRunning((o) => {
      if (o.ns === 'killop.big' && o.op === 'query' && o.planSummary) shown = o.planSummary;
      return shown !== null;
    }, 'find on k', (c) => c.db('killop').collection('big').find({ k: { $gte: 0 }, ...SLOW_FILTER }).toArray());
    assert.equal(err.code, 11601);
    assert.equal(shown, 'IXSCAN { k: 1 }');
  } finally {
    await big.dropIndex('k_1');
  }
});

h.test('currentOp shows the client\'s appName, so db.currentOp({appName}) finds an application\'s operations, and killOp ends them', { timeout: 120000 }, async () => {
  const app = await srv.newClient({ appName: 'billing-worker' });
  const session = app.startSession();
  try {
    const running = app.db('killop').collection('big').find(SLOW_FILTER, { session }).toArray().then(() => null, (e) => e);
    const admin = srv.client.db('admin');
    let ops = [];
    // Until it shows with its plan (noted as its scan starts, a moment after the operation registers).
    for (let i = 0; i < 3000 && !(ops.length === 1 && ops[0].planSummary); i++) {
      ops = (await admin.command({ currentOp: 1, appName: 'billing-worker' })).inprog;
      if (!(ops.length === 1 && ops[0].planSummary)) await h.sleep(5);
    }
    assert.equal(ops.length, 1, 'the application\'s find, found by its appName');
    assert.equal(ops[0].appName, 'billing-worker');
    assert.equal(ops[0].ns, 'killop.big');
    const keys = Object.keys(ops[0]);
    assert.equal(keys.indexOf('appName'), keys.indexOf('client') + 1, 'appName right after client, as mongod');
    // The handshake's client metadata, as mongod shows it (the driver's name and version, the OS, the application).
    const meta = ops[0].clientMetadata;
    assert.ok(meta, `clientMetadata: ${JSON.stringify(ops[0])}`);
    assert.equal(meta.application.name, 'billing-worker');
    assert.match(meta.driver.name, /nodejs/);
    assert.equal(typeof meta.os.type, 'string');
    assert.equal(keys.indexOf('clientMetadata'), keys.indexOf('appName') + 1, 'clientMetadata right after appName, as mongod');
    // Its logical session, as mongod shows it right after opid: the session's id and the 32-byte digest of its user.
    assert.ok(ops[0].lsid, 'lsid');
    assert.equal(ops[0].lsid.id.toString('hex'), session.id.id.toString('hex'));
    assert.equal(ops[0].lsid.uid.buffer.length, 32);
    assert.equal(keys.indexOf('lsid'), keys.indexOf('opid') + 1, 'lsid right after opid');
    // mongod's host first, currentOpTime the time of the report, and a user connection's operation marked as one.
    assert.equal(keys.indexOf('host'), 1);
    assert.match(ops[0].host, new RegExp(`:${srv.port}$`), 'host is the server\'s "hostname:port"');
    assert.match(ops[0].currentOpTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    assert.ok(Date.parse(ops[0].currentOpTime) >= Date.now() - 60000);
    assert.equal(ops[0].isFromUserConnection, true);
    assert.equal(ops[0].effectiveUsers, undefined, 'no authenticated user, no effectiveUsers');
    // The plan it runs, as mongod's planSummary, while it runs (before numYields, as mongod).
    assert.equal(ops[0].planSummary, 'COLLSCAN');
    assert.equal(keys.indexOf('planSummary'), keys.indexOf('numYields') - 1, 'planSummary right before numYields');
    // ... and logged once per connection as mongod's "client metadata" line (id 51800).
    const logged = (await admin.command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
      .filter((l) => l.id === 51800 && l.attr.doc.application && l.attr.doc.application.name === 'billing-worker');
    assert.ok(logged.length >= 1, 'the client metadata line');
    assert.equal(logged[0].c, 'NETWORK');
    assert.equal(logged[0].msg, 'client metadata');
    assert.ok(Array.isArray(logged[0].attr.negotiatedCompressors));
    assert.match(logged[0].attr.remote, /^127\.0\.0\.1:\d+$/);
    assert.equal((await admin.command({ currentOp: 1, appName: 'someone-else' })).inprog.length, 0);
    await admin.command({ killOp: 1, op: ops[0].opid });
    assert.equal((await running).code, 11601);
  } finally {
    await session.endSession();
    await app.close();
  }
});

h.test('db.currentOp(true) ($all) and $currentOp {idleConnections: true} list idle connections as mongod (type op, desc connN, connectionId, client, appName, clientMetadata, active: false); plain currentOp does not; a closed connection is gone', { timeout: 120000 }, async () => {
  const app = await srv.newClient({ appName: 'idle-reporter', minPoolSize: 1, maxPoolSize: 1 });
  try {
    await app.db('admin').command({ ping: 1 });
    const admin = srv.client.db('admin');
    const idleOf = (docs) => docs.filter((d) => d.appName === 'idle-reporter' && d.active === false);
    // Plain currentOp lists operations only.
    assert.equal(idleOf((await admin.command({ currentOp: 1 })).inprog).length, 0);
    const all = (await admin.command({ currentOp: 1, $all: true })).inprog;
    const idle = idleOf(all);
    assert.ok(idle.length >= 1, `the application's idle connection: ${JSON.stringify(all.map((d) => [d.desc, d.appName, d.active]))}`);
    const c = idle[0];
    assert.equal(c.type, 'op');
    assert.equal(c.desc, `conn${c.connectionId}`);
    assert.match(c.client, /^127\.0\.0\.1:\d+$/);
    assert.equal(c.clientMetadata.application.name, 'idle-reporter');
    assert.match(c.clientMetadata.driver.name, /nodejs/);
    assert.equal(typeof c.host, 'string');
    assert.equal(c.isFromUserConnection, true);
    assert.match(c.currentOpTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    assert.ok(Math.abs(Date.parse(c.currentOpTime) - Date.now()) < 60000, 'currentOpTime is now');
    assert.equal(c.opid, undefined, 'no operation, no opid');
    assert.equal(c.effectiveUsers, undefined, 'no authenticated user');
    // The connection running currentOp is active, so it is not listed as idle; its own op is.
    const self = all.filter((d) => d.command && d.command.currentOp);
    assert.equal(self.length, 1);
    assert.equal(all.filter((d) => d.connectionId === self[0].connectionId && d.active === false).length, 0);
    // The aggregation stage, with a filter on its fields.
    const viaAgg = await admin.aggregate([{ $currentOp: { allUsers: true, idleConnections: true } },
      { $match: { appName: 'idle-reporter', active: false } }]).toArray();
    assert.ok(viaAgg.some((d) => d.connectionId === c.connectionId));
    const noIdle = await admin.aggregate([{ $currentOp: { allUsers: true } }, { $match: { appName: 'idle-reporter' } }]).toArray();
    assert.equal(noIdle.length, 0);
    // Filters apply to them as to operations: db.currentOp({$all: true, connectionId}).
    const one = (await admin.command({ currentOp: 1, $all: true, connectionId: c.connectionId })).inprog;
    assert.equal(one.length, 1);
    await app.close();
    let left = [];
    for (let i = 0; i < 200; i++) {
      left = (await admin.command({ currentOp: 1, $all: true, connectionId: c.connectionId })).inprog;
      if (left.length === 0) break;
      await h.sleep(10);
    }
    assert.equal(left.length, 0, 'a closed connection is no longer listed');
  } finally {
    await app.close();
  }
});

h.test('a killed aggregate fails with 11601 Interrupted', { timeout: 120000 }, async () => {
  const err = await killWhileRunning((o) => o.ns === 'killop.big' && o.command && o.command.aggregate, 'aggregate',
    (c) => c.db('killop').collection('big').aggregate([{ $match: SLOW_FILTER }, { $group: { _id: '$k', n: { $sum: 1 } } }]).toArray());
  assert.equal(err.code, 11601, err.message);
});

h.test('a killed updateMany stops with 11601 and what it did is whole documents', { timeout: 120000 }, async () => {
  const err = await killWhileRunning((o) => o.ns === 'killop.big' && o.op === 'update', 'updateMany',
    (c) => c.db('killop').collection('big').updateMany(
      { $expr: { $ne: [{ $strLenCP: { $concat: ['$s', '$s', '$s', '$s'] } }, -1] } },
      [{ $set: { touched: true, t: { $concat: ['$s', '$s'] } } }]));
  assert.equal(err.code, 11601, `${err.code} ${err.message}`);
  // Whatever was updated before the kill is updated whole (both fields), nothing half-done.
  const partial = await big.countDocuments({ touched: true, t: { $exists: false } });
  assert.equal(partial, 0);
});

h.test('a killed deleteMany stops with 11601 and leaves the rest', { timeout: 120000 }, async () => {
  const coll = srv.client.db('killop').collection('del');
  await fill(coll, 80000);
  const err = await killWhileRunning((o) => o.ns === 'killop.del' && o.op === 'remove', 'deleteMany',
    (c) => c.db('killop').collection('del').deleteMany({ $expr: { $ne: [{ $strLenCP: { $concat: ['$s', '$s', '$s', '$s'] } }, -1] } }));
  assert.equal(err.code, 11601, `${err.code} ${err.message}`);
  const left = await coll.countDocuments();
  assert.ok(left > 0 && left <= 80000, `documents left after the kill: ${left}`);
});

h.test('a killed TTL batch stops with 11601 and the monitor deletes the rest later', { timeout: 180000 }, async () => {
  const admin = srv.client.db('admin');
  const coll = srv.client.db('killop').collection('ttl');
  await admin.command({ setParameter: 1, ttlMonitorEnabled: false });
  try {
    await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const past = new Date(Date.now() - 60000);
    for (let base = 0; base < 100000; base += 10000) {
      await coll.insertMany(Array.from({ length: 10000 }, (_, i) => ({ _id: base + i, at: past, pad: 'x'.repeat(200) })));
    }
    // One big batch in one transaction, so the kill lands inside it.
    await admin.command({ setParameter: 1, ttlMonitorBatchDocs: 100000, ttlIndexDeleteTargetDocs: 0, ttlIndexDeleteTargetTimeMS: 0 });
  } finally {
    await admin.command({ setParameter: 1, ttlMonitorEnabled: true });
  }
  let opid = null;
  const deadline = Date.now() + 30000;
  while (opid === null && Date.now() < deadline) {
    const r = await admin.command({ currentOp: 1, desc: 'TTLMonitor' });
    if (r.inprog.length > 0) {
      opid = r.inprog[0].opid;
      assert.equal(r.inprog[0].isFromUserConnection, false, 'the monitor\'s work is the server\'s own');
    } else await h.sleep(1);
  }
  assert.ok(opid !== null, 'a TTL batch showed in currentOp');
  await admin.command({ killOp: 1, op: opid });
  // The kill is logged by the monitor with its code.
  let logged = false;
  const logDeadline = Date.now() + 30000;
  while (!logged && Date.now() < logDeadline) {
    const log = await admin.command({ getLog: 'global' });
    logged = log.log.some((l) => /TTL batch .* interrupted: 11601/.test(l));
    if (!logged) await h.sleep(50);
  }
  assert.ok(logged, 'the TTL batch reported 11601 Interrupted');
  await admin.command({ setParameter: 1, ttlMonitorBatchDocs: 500, ttlIndexDeleteTargetDocs: 50000, ttlIndexDeleteTargetTimeMS: 1000 });
  // The monitor goes on and deletes everything due.
  const goneBy = Date.now() + 120000;
  while (Date.now() < goneBy && (await coll.estimatedDocumentCount()) > 0) await h.sleep(200);
  assert.equal(await coll.countDocuments(), 0);
});

h.test('killOp of an unknown opid answers ok, as mongod does', async () => {
  const r = await srv.client.db('admin').command({ killOp: 1, op: 987654321 });
  assert.equal(r.ok, 1);
});

h.test('killOp parses op as mongod\'s parseOpId: missing 4 NoSuchKey, not a number 14, not an integer 2 BadValue, past 32 bits 26823; an integral double or long is an opid', async () => {
  const admin = srv.client.db('admin');
  const { Long, Decimal128 } = require('mongodb');
  await h.expectCode(admin.command({ killOp: 1 }), 4, /^Missing expected field "op"$/);
  await h.expectCode(admin.command({ killOp: 1, op: 'invalid' }), 14, /^Expected field "op" to have numeric type, but found string$/);
  await h.expectCode(admin.command({ killOp: 1, op: 1.1 }), 2,
    /^Expected field "op" to have a value exactly representable as a 64-bit integer, but found op: 1\.1$/);
  await h.expectCode(admin.command({ killOp: 1, op: Number.MAX_VALUE }), 2, /but found op: 1\.797693134862316e\+308$/);
  await h.expectCode(admin.command({ killOp: 1, op: Long.fromString('9223372036854775807') }), 26823,
    /^invalid op : 9223372036854775807\. Op ID cannot be represented with 32 bits$/);
  await h.expectCode(admin.command({ killOp: 1, op: 2 ** 31 }), 26823, /^invalid op : 2147483648\./);
  for (const op of [123456, 123456.0, Long.fromNumber(123456), Decimal128.fromString('123456')]) {
    const r = await admin.command({ killOp: 1, op });
    assert.deepEqual(r, { info: 'attempting to kill op', ok: 1 });
  }
});

h.test('SIGTERM interrupts a running query and the server shuts down cleanly', { timeout: 120000 }, async () => {
  const s = new h.MayflyServer();
  await s.start();
  const { MongoClient } = require('mongodb');
  const c = new MongoClient(s.uri);
  try {
    const coll = c.db('t').collection('big');
    await fill(coll, 60000);
    const running = coll.find({ $expr: { $eq: [{ $strLenCP: { $concat: ['$s', '$s', '$s', '$s', '$s', '$s', '$s', '$s'] } }, -1] } })
      .toArray().then(() => null, (e) => e);
    const admin = c.db('admin');
    await waitForOp(admin, (o) => o.ns === 't.big' && o.op === 'query', 'find');
    const t0 = Date.now();
    s.expectingExit = true;
    s.proc.kill('SIGTERM');
    const err = await running;
    assert.ok(err, 'the query did not run to completion');
    const info = await s.waitExit(60000);
    assert.equal(info.code, 0, `clean exit: ${JSON.stringify(info)}`);
    assert.ok(Date.now() - t0 < 60000);
    // Restart on the same data: everything is there.
    await s.start();
    const c2 = new MongoClient(s.uri);
    assert.equal(await c2.db('t').collection('big').countDocuments(), 60000);
    await c2.close();
  } finally {
    await c.close().catch(() => {});
    await s.stop().catch(() => {});
    s.cleanup();
  }
});

h.test('validate yields to maxTimeMS (50) on a large collection', { timeout: 120000 }, async () => {
  const err = await srv.client.db('killop').command({ validate: 'big', maxTimeMS: 1 }).then(() => null, (e) => e);
  assert.ok(err, 'validate stopped');
  assert.equal(err.code, 50, err.message);
  const ok = await srv.client.db('killop').command({ validate: 'big' });
  assert.equal(ok.valid, true);
});
