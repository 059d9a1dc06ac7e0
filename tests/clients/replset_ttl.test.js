'use strict';
/*
 * SPEC E1/E2 on a 3-member replica set (issue 9): only the primary's TTL
 * monitor deletes; secondaries apply its deletes (one `d` oplog entry per
 * document) and never delete on their own, their
 * serverStatus().metrics.ttl.deletedDocuments stays 0. A step-down
 * interrupts a pass in flight and the new primary carries on; nothing is
 * deleted before it is due (checked against the `wall` of each delete's
 * oplog entry). E3 with a real member: restarted without --replSet on its
 * dbpath, it runs no TTL monitor and logs why (last: the member stays out).
 * I2 in a set: an archive: true index replicates; the primary's monitor
 * archives what it expires, exactly once; secondaries archive nothing.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');
const R = require('./rs_harness');

const rs = R.useReplSet(3);
const MAJ = { writeConcern: { w: 'majority', wtimeout: 15000 } };

/* Count of documents matching filter on every running member: {index: n}. */
function countsOn(dbName, filter = {}) {
  return rs.onEach((i) => rs.reader(i).db(dbName).collection('c').countDocuments(filter));
}

/* Waits until every running member's count of filter is want. */
async function waitCounts(dbName, filter, want, what, timeoutMs = 20000) {
  let last = {};
  await rs.waitUntil(async () => {
    last = await countsOn(dbName, filter);
    return Object.values(last).every((n) => n === want);
  }, { timeoutMs, what: `${what} (count ${want} on every member)` })
    .catch((e) => { e.message += ` last: ${JSON.stringify(last)}`; throw e; });
}

/* The d entries of dbName.c in member i's oplog: [{_id, wall}]. */
async function deletesInOplog(i, dbName) {
  const es = await rs.reader(i).db('local').collection('oplog.rs')
    .find({ ns: `${dbName}.c`, op: 'd' }).sort({ $natural: 1 }).toArray();
  return es.map((e) => ({ _id: e.o._id, wall: e.wall }));
}

/* Asserts that every d entry came at or after the deleted document's due time. */
function assertNoneEarly(deletes, dueById, where) {
  for (const d of deletes) {
    const due = dueById.get(d._id);
    if (due === undefined) continue;
    assert.ok(d.wall instanceof Date && d.wall.getTime() >= due,
      `${where}: ${d._id} deleted at ${d.wall && d.wall.toISOString()}, before it was due at ${new Date(due).toISOString()}`);
  }
}

R.test('E1 only the primary expires: due documents vanish on every member, secondaries\' metrics.ttl.deletedDocuments stay 0', { timeout: 90000 }, async () => {
  const p = await rs.waitForPrimary();
  const secs = [0, 1, 2].filter((i) => i !== p);
  const base = await rs.onEach((i) => rs.ttlDeleted(i));
  for (const s of secs) assert.equal(base[s], 0, `secondary ${s} has deleted nothing`);

  const db = rs.freshDb('e1');
  const dbName = db.databaseName;
  const c = db.collection('c');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0, ...MAJ });
  const t0 = Date.now();
  const due = Array.from({ length: 200 }, (_, k) => ({ _id: `due${k}`, at: new Date(t0 + 2500 + k) }));
  const later = Array.from({ length: 20 }, (_, k) => ({ _id: `later${k}`, at: new Date(t0 + 3600e3) }));
  const undated = Array.from({ length: 10 }, (_, k) => ({ _id: `none${k}`, at: `not a date ${k}` }));
  await c.insertMany([...due, ...later, ...undated], MAJ);

  await waitCounts(dbName, { _id: /^due/ }, 0, 'the due documents to vanish from every member', 20000);
  const docs = await rs.waitForReplication(dbName, 'c');
  assert.deepEqual(docs.map((d) => d._id).sort(), [...later, ...undated].map((d) => d._id).sort());

  const after = await rs.onEach((i) => rs.ttlDeleted(i));
  for (const s of secs) assert.equal(after[s], 0, `secondary ${s}: metrics.ttl.deletedDocuments ${after[s]}`);
  assert.ok(after[p] - base[p] >= 200, `primary deleted ${after[p] - base[p]} (want >= 200)`);

  // One d entry per expired document, on every member, none before its due time.
  const dueById = new Map(due.map((d) => [d._id, d.at.getTime()]));
  await rs.waitUntil(async () => {
    const per = await rs.onEach((i) => deletesInOplog(i, dbName));
    return Object.values(per).every((ds) => ds.length === 200);
  }, { what: '200 d entries for the expired documents in every member\'s local.oplog.rs' });
  const per = await rs.onEach((i) => deletesInOplog(i, dbName));
  for (const [i, ds] of Object.entries(per)) {
    assert.deepEqual(ds.map((d) => d._id).sort(), due.map((d) => d._id).sort(), `member ${i}'s d entries`);
    assertNoneEarly(ds, dueById, `member ${i}`);
  }
});

R.test('E1 a secondary never deletes on its own: with only the primary\'s TTL monitor off, due documents stay on every member until it is back on', { timeout: 90000 }, async () => {
  const p = await rs.waitForPrimary();
  const secs = [0, 1, 2].filter((i) => i !== p);
  const db = rs.freshDb('e1idle');
  const dbName = db.databaseName;
  const c = db.collection('c');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0, ...MAJ });
  // Server parameters are per member: only the primary's monitor stops.
  await rs.adminCommand(p, { setParameter: 1, ttlMonitorEnabled: false });
  try {
    for (const s of secs) {
      const g = await rs.adminCommand(s, { getParameter: 1, ttlMonitorEnabled: 1 });
      assert.equal(g.ttlMonitorEnabled, true, `secondary ${s}'s own monitor stays enabled`);
    }
    const t0 = Date.now();
    await c.insertMany(Array.from({ length: 50 }, (_, k) => ({ _id: k, at: new Date(t0 + 500) })), MAJ);
    await h.sleep(Math.max(0, t0 + 4000 - Date.now()));
    assert.deepEqual(await countsOn(dbName), Object.fromEntries([0, 1, 2].map((i) => [i, 50])),
      'due for 3.5 s, yet no member deleted anything: secondaries do not expire on their own');
    for (const s of secs) assert.equal(await rs.ttlDeleted(s), 0);
  } finally {
    await rs.adminCommand(p, { setParameter: 1, ttlMonitorEnabled: true });
  }
  await waitCounts(dbName, {}, 0, 'the primary\'s monitor, back on, to expire them everywhere', 20000);
  for (const s of secs) assert.equal(await rs.ttlDeleted(s), 0);
});

R.test('E2 a step-down interrupts the pass in flight; the new primary carries on, expires what comes due later, and deletes nothing early', { timeout: 150000 }, async () => {
  const N = 6000;
  const LATER = 50;
  const SOON = 100;
  // Small TTL batches (every member: whoever is primary) so the pass lasts a while.
  await rs.setParameterAll({ ttlMonitorBatchDocs: 50 });
  try {
    const p = await rs.waitForPrimary();
    const db = rs.freshDb('e2');
    const dbName = db.databaseName;
    const c = db.collection('c');
    await c.createIndex({ at: 1 }, { expireAfterSeconds: 3600, name: 'at_ttl', ...MAJ });
    const t0 = Date.now();
    for (let k = 0; k < N; k += 1000) {
      await c.insertMany(Array.from({ length: Math.min(1000, N - k) }, (_, j) => ({ _id: `bulk${k + j}`, kind: 'bulk', at: new Date(t0 - 1000) })), MAJ);
    }
    const later = Array.from({ length: LATER }, (_, k) => ({ _id: `later${k}`, kind: 'later', at: new Date(t0 + 7200e3) }));
    await c.insertMany(later, MAJ);
    await rs.waitForReplication(dbName, 'c', { timeoutMs: 60000 });
    const base = await rs.onEach((i) => rs.ttlDeleted(i));

    // collMod makes the bulk due at once (the later ones in two hours).
    await db.command({ collMod: 'c', index: { name: 'at_ttl', expireAfterSeconds: 0 }, writeConcern: { w: 'majority' } });
    const pc = rs.direct(p).db(dbName).collection('c');
    const total = N + LATER;
    let atStepDown = total;
    await rs.waitUntil(async () => {
      atStepDown = await pc.estimatedDocumentCount();
      return atStepDown < total;
    }, { timeoutMs: 15000, pollMs: 5, what: 'the primary to start expiring the bulk' });
    const t1 = R.hr();
    try {
      await rs.adminCommand(p, { replSetStepDown: 60, secondaryCatchUpPeriodSecs: 10 });
    } catch (err) {
      if (!/closed|ECONNRESET|network/i.test(String(err.message))) throw err;
    }
    const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
    const third = [0, 1, 2].find((i) => i !== p && i !== np);
    console.log(`# E2: stepped down with ${atStepDown - LATER} of ${N} left; member ${np} primary after ` +
      `${(R.hr() - t1).toFixed(0)} ms${atStepDown === LATER ? ' (the pass had already finished: not mid-pass)' : ''}`);

    await waitCounts(dbName, { kind: 'bulk' }, 0, 'the bulk to be expired on every member', 60000);
    await h.sleep(300);
    const mid = await rs.onEach((i) => rs.ttlDeleted(i));
    const oldDelta = mid[p] - base[p];
    const newDelta = mid[np] - base[np];
    console.log(`# E2: deleted by the old primary ${oldDelta}, by the new one ${newDelta}`);
    assert.equal(mid[third] - base[third], 0, `member ${third}, never primary, deleted nothing`);
    // (A batch interrupted by the step-down may go uncounted, as in MongoDB,
    // whose monitor adds a delete's count only when it completes; the oplog
    // check below counts each deleted document once.)
    assert.ok(oldDelta + newDelta <= N, `no more deletions counted than documents (${oldDelta} + ${newDelta})`);
    if (atStepDown - LATER > 0 && oldDelta < N) assert.ok(newDelta > 0, 'the new primary carried on');

    // The new primary expires documents inserted now, not before they are due.
    const t2 = Date.now();
    const soon = Array.from({ length: SOON }, (_, k) => ({ _id: `soon${k}`, kind: 'soon', at: new Date(t2 + 4000 + k * 10) }));
    await c.insertMany(soon, MAJ);
    await h.sleep(Math.max(0, t2 + 3000 - Date.now()));
    if (Date.now() < t2 + 3800) {
      assert.deepEqual(await countsOn(dbName, { kind: 'soon' }), Object.fromEntries([0, 1, 2].map((i) => [i, SOON])),
        'not due yet: present on every member');
    }
    await waitCounts(dbName, { kind: 'soon' }, 0, 'the soon documents to expire on every member', 20000);
    const end = await rs.onEach((i) => rs.ttlDeleted(i));
    assert.ok(end[np] - mid[np] >= SOON, `the new primary expired the later inserts (${end[np] - mid[np]})`);
    assert.equal(end[p], mid[p], 'the old primary, now a secondary, deletes nothing more');
    assert.equal(end[third], mid[third]);
    // Both primaries removed records as ranges at most, never index entries (their range guard's check would
    // come after the wait for the raft entry: see mf_delete_rids).
    for (const i of [p, np]) {
      const t = (await rs.direct(i).db('admin').command({ serverStatus: 1 })).metrics.ttl;
      assert.equal(Number(t.indexRanges), 0, `member ${i}: metrics.ttl.indexRanges`);
    }

    // The ones due in two hours are everywhere; no d entry precedes its document's due time.
    const docs = await rs.waitForReplication(dbName, 'c');
    assert.deepEqual(docs.map((d) => d._id).sort(), later.map((d) => d._id).sort());
    const dueById = new Map(soon.map((d) => [d._id, d.at.getTime()]));
    for (let k = 0; k < N; k++) dueById.set(`bulk${k}`, t0 - 1000);
    for (const [i, ds] of Object.entries(await rs.onEach((i) => deletesInOplog(i, dbName)))) {
      assert.equal(ds.length, N + SOON, `member ${i}: one d entry per expired document`);
      assert.equal(new Set(ds.map((d) => d._id)).size, N + SOON, `member ${i}: no document deleted twice`);
      assert.ok(ds.every((d) => dueById.has(d._id)), `member ${i}: only due documents were deleted`);
      assertNoneEarly(ds, dueById, `member ${i}`);
    }
  } finally {
    await rs.setParameterAll({ ttlMonitorBatchDocs: 500 });
  }
});

R.test('I2 in a replica set: the primary archives what it expires, the option replicates, secondaries archive nothing of it', { timeout: 90000 }, async () => {
  const p = await rs.waitForPrimary();
  const db = rs.freshDb('i2');
  const dbName = db.databaseName;
  await db.command({ createIndexes: 'c', indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 0, archive: true }], ...MAJ });
  // The index option is replicated with the index: every member lists it.
  await rs.waitUntil(async () => {
    const specs = await rs.onEach((i) => rs.reader(i).db(dbName).collection('c').listIndexes().toArray());
    return Object.values(specs).every((l) => l.some((x) => x.name === 'at_1' && x.archive === true));
  }, { what: 'archive: true on every member' });
  const N = 300;
  const t0 = Date.now();
  await db.collection('c').insertMany(Array.from({ length: N }, (_, k) => ({ _id: k, at: new Date(t0 - 1000), v: `doc ${k}` })), MAJ);
  await waitCounts(dbName, {}, 0, 'the documents to expire on every member', 20000);
  const archived = async (i) => (await rs.reader(i).db(dbName).collection('c').aggregate([{ $archived: {} }, { $sort: { _id: 1 } }]).toArray());
  const onPrimary = await archived(p);
  assert.deepEqual(onPrimary.map((d) => d._id), Array.from({ length: N }, (_, k) => k), 'each expired document archived once, on the primary');
  assert.equal(onPrimary[7].v, 'doc 7');
  const st = await rs.direct(p).db(dbName).command({ collStats: 'c' });
  assert.equal(st.archiveCount, N);
  for (const i of [0, 1, 2].filter((x) => x !== p)) {
    // A secondary applied the deletes but expired nothing itself: its archive of the collection is empty.
    assert.deepEqual(await archived(i), [], `member ${i} (secondary) archived nothing`);
  }
});

R.test('a secondary under a 400-file limit applies 300 new collections with TTL indexes (900 files), waiting out TooManyFilesOpen instead of stopping, and receives the primary\'s expiry', { timeout: 240000 }, async () => {
  const p = await rs.waitForPrimary();
  const s = [0, 1, 2].find((i) => i !== p);
  const server = rs.members[s].server;
  const db = rs.freshDb('fds');
  const dbName = db.databaseName;
  await rs.kill(s, { kill9: false });
  server.wrapper = ['prlimit', '--nofile=400:400'];
  try {
    await rs.restart(s);
    await rs.waitForSecondary(s, { timeoutMs: 60000 });
    const N = 300;
    for (let k = 0; k < N; k++) {
      const c = db.collection(`c${k}`);
      await c.insertOne({ _id: k, at: new Date() }, MAJ);
      await c.createIndex({ at: 1 }, { expireAfterSeconds: 3600, ...MAJ });
      if (k % 2) await c.insertOne({ _id: 'due', at: new Date(Date.now() - 7200e3) }, MAJ);
    }
    // Member s holds exactly what the primary holds: each collection's own document, the due ones deleted by
    // the primary's monitor and the deletes applied. Its reads may meet 264 while idle tables close: retried.
    const left = new Set(Array.from({ length: N }, (_, k) => k));
    let last = null;
    await rs.waitUntil(async () => {
      for (const k of [...left]) {
        const r = await rs.raw(s, dbName, { find: `c${k}`, filter: {}, $readPreference: { mode: 'secondaryPreferred' } });
        if (r && r.ok === 1) {
          last = [k, r.cursor.firstBatch];
          if (r.cursor.firstBatch.length === 1 && r.cursor.firstBatch[0]._id === k) left.delete(k);
        } else {
          assert.ok(r === null || r.code === 264, JSON.stringify(r));
        }
      }
      return left.size === 0;
    }, { timeoutMs: 150000, what: 'every collection on the member under the limit' })
      .catch((e) => { e.message += ` (${left.size} left, last ${JSON.stringify(last)})`; throw e; });
    const log = server.stderrTail(5000);
    assert.doesNotMatch(log, /applying stops here|panic/);
    assert.match(log, /applying raft entry \d+ waits for file descriptors/, 'the applier met the limit and waited');
    assert.equal(server.unexpectedExits.length, 0);
    assert.equal((await rs.hello(s)).secondary, true, 'still a secondary');
  } finally {
    server.wrapper = [];
    await rs.kill(s, { kill9: false }).catch(() => {});
    await rs.restart(s);
    await rs.waitForSecondary(s, { timeoutMs: 60000 });
    await db.dropDatabase(MAJ); // the 900 files are not left to the tests after this one
  }
});

R.test('E3 a member restarted without --replSet (its local.system.replset holds the set\'s config) runs no TTL monitor and logs why', { timeout: 90000 }, async () => {
  const p = await rs.waitForPrimary();
  const s = [0, 1, 2].find((i) => i !== p);
  const db = rs.freshDb('e3');
  const dbName = db.databaseName;
  await db.collection('c').createIndex({ at: 1 }, { expireAfterSeconds: 0, ...MAJ });
  await db.collection('c').insertOne({ _id: 'replicated', at: new Date(Date.now() + 3600e3) }, MAJ);
  await waitCounts(dbName, {}, 1, 'the collection on every member');

  // Take member s out of the set: stop it and start mayflyd on its dbpath without --replSet.
  const info = await rs.kill(s, { kill9: false });
  assert.equal(info && info.code, 0, `member ${s} exits 0 on SIGTERM: ${JSON.stringify(info)}`);
  const solo = new h.MayflyServer({ dbpath: rs.members[s].server.dbpath });
  await solo.start();
  const c = new MongoClient(solo.uri);
  try {
    const coll = c.db(dbName).collection('c');
    assert.equal(await coll.countDocuments({ _id: 'replicated' }), 1, 'the member\'s data is there');
    const hello = await c.db('admin').command({ hello: 1 });
    assert.equal(hello.setName, undefined, 'started without --replSet: a standalone');
    await coll.insertOne({ _id: 'due', at: new Date(Date.now() - 1000) }, { writeConcern: { w: 1, j: true } });
    await h.sleep(3000);
    assert.equal(await coll.countDocuments({ _id: 'due' }), 1, 'due for 4 s and still there: no TTL monitor');
    const st = await c.db('admin').command({ serverStatus: 1 });
    assert.equal(Number(st.metrics.ttl.deletedDocuments), 0);
    assert.match(solo.stderrTail(400), /TTL monitor not running/, 'the log says the TTL monitor does not run');
    assert.match(solo.stderrTail(400), /replica-set configuration/, 'and why');
  } finally {
    await c.close(true).catch(() => {});
    const sinfo = await solo.stop();
    assert.equal(sinfo && sinfo.code, 0, `the standalone exits 0: ${JSON.stringify(sinfo)}\n${solo.stderrTail(20)}`);
  }
  // Member s stays out (its data now differs from the set's); the other two carry on.
  await rs.waitForPrimary();
});
