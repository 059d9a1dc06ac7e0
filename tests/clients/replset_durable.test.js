'use strict';
/*
 * Replica sets (issue 9), what must survive: retryable writes answered once
 * across a change of primary, raft snapshots that keep the log bounded and
 * bring a member that fell too far behind back through an initial sync, and
 * a whole set stopped (cleanly, then with kill -9) and started again.
 *
 * The members run with a tiny snapshot threshold (replSnapshotThreshold=32,
 * 8 entries kept behind), so a few hundred writes truncate the raft log
 * several times over.
 */
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Long, UUID } = require('mongodb');
const R = require('./rs_harness');

const rs = R.useReplSet(3, {
  args: ['--setParameter', 'replSnapshotThreshold=32', '--setParameter', 'replSnapshotTrailing=8'],
});
const MAJ = { writeConcern: { w: 'majority', wtimeout: 20000 } };

function other(p) { return [0, 1, 2].find((i) => i !== p); }

/* Until the set is steady and the replicaSet URI client writes to the current primary again. */
async function settle() {
  await rs.waitForSteadyState({ timeoutMs: 60000 });
  await rs.waitUntil(async () => {
    try {
      await rs.client.db('settle').collection('c').insertOne({}, MAJ);
      return true;
    } catch (e) {
      return false;
    }
  }, { timeoutMs: 30000, what: 'a write through the replicaSet URI client' });
}

R.test('retryable writes: the same lsid and txnNumber sent again, even to a new primary, is answered without running twice', { timeout: 120000 }, async () => {
  const dbName = rs.freshDb('retry').databaseName;
  const p = await rs.waitForPrimary();
  await rs.client.db(dbName).collection('c').insertOne({ _id: 'counter', n: 0 }, MAJ);
  const lsid = { id: new UUID() };
  const inc = { update: 'c', updates: [{ q: { _id: 'counter' }, u: { $inc: { n: 1 } } }], lsid, txnNumber: Long.fromNumber(1) };
  const ins = { insert: 'c', documents: [{ _id: 'once' }], lsid, txnNumber: Long.fromNumber(2) };

  const r1 = await rs.raw(p, dbName, inc);
  assert.equal(r1.ok, 1, JSON.stringify(r1));
  assert.equal(r1.nModified, 1);
  const again = await rs.raw(p, dbName, inc);
  assert.equal(again.ok, 1, JSON.stringify(again));
  assert.equal(again.n, 1, 'the retry reports what the first attempt did');
  assert.equal(again.nModified, 1);

  const i1 = await rs.raw(p, dbName, ins);
  assert.equal(i1.n, 1, JSON.stringify(i1));
  // An ordered insert stopped by a duplicate key part-way: its row says which statements ran (s), on every member.
  const part = { insert: 'c', documents: [{ _id: 'p1' }, { _id: 'once' }, { _id: 'p2' }], lsid, txnNumber: Long.fromNumber(6) };
  const lsidPart = { id: new UUID() };
  const pr = await rs.raw(p, dbName, { ...part, lsid: lsidPart });
  assert.equal(pr.n, 1, JSON.stringify(pr));
  assert.deepEqual(pr.writeErrors.map((w) => w.index), [1]);

  // The primary changes; the driver would resend the same txnNumber to the new one.
  await rs.adminCommand(p, { replSetStepDown: 30 }).catch(() => {});
  const np = await rs.waitForPrimary({ exclude: [p] });
  const i2 = await rs.raw(np, dbName, ins);
  assert.equal(i2.ok, 1, `the new primary answers the retried insert without E11000: ${JSON.stringify(i2)}`);
  assert.equal(i2.n, 1);
  // The part-way insert retried on the new primary: p1 is not inserted again, 'once' fails again, p2 never runs (ordered).
  const pr2 = await rs.raw(np, dbName, { ...part, lsid: lsidPart });
  assert.equal(pr2.n, 1, JSON.stringify(pr2));
  assert.deepEqual(pr2.writeErrors.map((w) => [w.index, w.code]), [[1, 11000]]);
  await rs.client.db(dbName).collection('c').deleteOne({ _id: 'p1' }, MAJ);

  // An older txnNumber on the session is refused (225, as mongod once a newer one started), a newer one runs.
  const old = await rs.raw(np, dbName, inc);
  assert.equal(old.code, 225, JSON.stringify(old));
  const next = await rs.raw(np, dbName, { ...inc, txnNumber: Long.fromNumber(3) });
  assert.equal(next.nModified, 1, JSON.stringify(next));

  // A findAndModify retried after it wrote gets the first attempt's reply again, never runs twice.
  const fam = { findAndModify: 'c', query: { _id: 'counter' }, update: { $inc: { n: 10 } }, new: true, lsid, txnNumber: Long.fromNumber(4) };
  const f1 = await rs.raw(np, dbName, fam);
  assert.equal(f1.ok, 1, JSON.stringify(f1));
  assert.equal(f1.value.n, 12);
  const f2 = await rs.raw(np, dbName, fam);
  assert.equal(f2.ok, 1, `a retried findAndModify: ${JSON.stringify(f2)}`);
  assert.deepEqual(f2.value, f1.value, 'the retry returns the post-image the first attempt returned');
  assert.deepEqual(f2.lastErrorObject, f1.lastErrorObject);

  // Two attempts of one retryable write at once, on two connections: the second waits for the first, then is answered from it.
  const twice = { update: 'c', updates: [{ q: { _id: 'counter' }, u: { $inc: { n: 100 } } }], lsid, txnNumber: Long.fromNumber(5) };
  const both = await Promise.all([rs.raw(np, dbName, twice), rs.raw(np, dbName, twice)]);
  for (const b of both) assert.equal(b.nModified, 1, JSON.stringify(b));

  const docs = await rs.waitForReplication(dbName, 'c');
  assert.deepEqual(docs, [{ _id: 'counter', n: 112 }, { _id: 'once' }], 'each write ran exactly once, on every member');
});

R.test('raft snapshots keep the log bounded; a member that missed more than the kept log comes back through an initial sync', { timeout: 180000 }, async () => {
  await settle();
  const db = rs.freshDb('snap');
  const dbName = db.databaseName;
  const c = db.collection('c');
  await c.createIndex({ k: 1 }, { name: 'k_1' });
  await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, k: i % 7 })), MAJ);
  const p = await rs.waitForPrimary();
  const away = other(p);
  await rs.waitForReplication(dbName, 'c');
  await rs.kill(away, { kill9: false });

  // Far more entries than the log keeps (32 + 8): one entry per write.
  for (let i = 50; i < 350; i++) await c.insertOne({ _id: i, k: i % 7 }, MAJ);
  await c.deleteMany({ _id: { $lt: 10 } }, MAJ);
  await c.updateMany({ k: 3 }, { $set: { three: true } }, MAJ);
  await db.createCollection('later');
  await db.collection('later').insertOne({ _id: 'x' }, MAJ);

  // The primary's raft directory holds snapshots, and its log is not one segment per write.
  const raftDir = path.join(rs.members[p].server.dbpath, 'raft');
  const files = fs.readdirSync(raftDir);
  assert.ok(files.some((f) => f.startsWith('snapshot-')), `a raft snapshot was taken: ${files.join(' ')}`);

  await rs.restart(away);
  await rs.waitForSecondary(away, { timeoutMs: 60000 });
  const docs = await rs.waitForReplication(dbName, 'c', { timeoutMs: 60000 });
  assert.equal(docs.length, 340);
  assert.equal(docs.filter((d) => d.three).length, docs.filter((d) => d.k === 3).length);
  await rs.waitForReplication(dbName, 'later', { timeoutMs: 30000 });
  const ix = await rs.direct(away).db(dbName).collection('c').listIndexes().toArray();
  assert.deepEqual(ix.map((x) => x.name).sort(), ['_id_', 'k_1']);
  assert.match(rs.members[away].server.stderrTail(400), /initial sync from .* done/, 'it caught up by an initial sync');

  // And it keeps applying the log afterwards.
  await c.insertOne({ _id: 'after-sync' }, MAJ);
  const all = await rs.waitForReplication(dbName, 'c', { timeoutMs: 30000 });
  assert.ok(all.some((d) => d._id === 'after-sync'));
});

R.test('the whole set stopped cleanly, then killed with -9, starts again with its config and every acknowledged write', { timeout: 180000 }, async () => {
  await settle();
  const db = rs.freshDb('whole');
  const dbName = db.databaseName;
  await db.collection('c').createIndex({ v: 1 }, { name: 'v_1' });
  await db.collection('c').insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: i, v: i })), MAJ);
  let p = await rs.waitForPrimary();
  const { config: before } = await rs.adminCommand(p, { replSetGetConfig: 1 });

  for (const kill9 of [false, true]) {
    for (const i of [0, 1, 2]) await rs.kill(i, { kill9 });
    for (const i of [0, 1, 2]) await rs.restart(i);
    p = await rs.waitForPrimary({ timeoutMs: 60000 });
    await rs.waitForSteadyState({ timeoutMs: 60000 });
    const { config } = await rs.adminCommand(p, { replSetGetConfig: 1 });
    assert.deepEqual(config.members.map((m) => m.host), before.members.map((m) => m.host), 'the config survives');
    await rs.dropCached(p);
    const docs = await rs.waitForReplication(dbName, 'c', { timeoutMs: 60000 });
    assert.equal(docs.length, 100 + (kill9 ? 1 : 0), `after ${kill9 ? 'kill -9' : 'SIGTERM'}`);
    for (const i of [0, 1, 2]) {
      const ix = await rs.direct(i).db(dbName).collection('c').listIndexes().toArray();
      assert.deepEqual(ix.map((x) => x.name).sort(), ['_id_', 'v_1'], `member ${i} after ${kill9 ? 'kill -9' : 'SIGTERM'}`);
    }
    // A write between the rounds, acknowledged by the majority before the kill -9.
    if (!kill9) await rs.client.db(dbName).collection('c').insertOne({ _id: 'between' }, MAJ);
  }
});

R.test('a retried findAndModify is answered from the image its first attempt returned, on the new primary too, and a mismatched retry is refused', { timeout: 120000 }, async () => {
  await settle();
  const dbName = rs.freshDb('famretry').databaseName;
  let p = await rs.waitForPrimary();
  await rs.client.db(dbName).collection('c').insertMany([
    { _id: 1, n: 0, tags: ['a', 'b'], secret: 's1' },
    { _id: 2, n: 0, secret: 's2' },
    { _id: 3, n: 0 },
  ], MAJ);
  const lsid = { id: new UUID() };
  let txn = 0;
  const cmd = (body) => ({ findAndModify: 'c', ...body, lsid, txnNumber: Long.fromNumber(++txn) });
  const twice = async (c) => {
    const a = await rs.raw(p, dbName, c);
    assert.equal(a.ok, 1, JSON.stringify(a));
    const b = await rs.raw(p, dbName, c);
    assert.equal(b.ok, 1, `retry of ${JSON.stringify(c)}: ${JSON.stringify(b)}`);
    const strip = ({ operationTime, $clusterTime, ...rest }) => rest;
    assert.deepEqual(strip(b), strip(a), 'the retry answers exactly as the first attempt did');
    return a;
  };

  // new: false returns the pre-image, projected by the command's fields.
  const pre = await twice(cmd({ query: { _id: 1 }, update: { $inc: { n: 1 } }, fields: { secret: 0 } }));
  assert.deepEqual(pre.value, { _id: 1, n: 0, tags: ['a', 'b'] });
  assert.deepEqual(pre.lastErrorObject, { n: 1, updatedExisting: true });
  // A positional projection of the pre-image.
  const pos = await twice(cmd({ query: { _id: 1, tags: 'b' }, update: { $inc: { n: 1 } }, fields: { 'tags.$': 1 } }));
  assert.deepEqual(pos.value, { _id: 1, tags: ['b'] });
  // A remove returns the removed document.
  const rem = await twice(cmd({ query: { _id: 2 }, remove: true }));
  assert.deepEqual(rem.value, { _id: 2, n: 0, secret: 's2' });
  assert.deepEqual(rem.lastErrorObject, { n: 1 });
  // Upserts: new: false answers null with upserted, new: true the inserted document.
  const up1 = await twice(cmd({ query: { _id: 10 }, update: { $set: { v: 1 } }, upsert: true }));
  assert.equal(up1.value, null);
  assert.deepEqual(up1.lastErrorObject, { n: 1, updatedExisting: false, upserted: 10 });
  const up2 = await twice(cmd({ query: { _id: 11 }, update: { $set: { v: 2 } }, upsert: true, new: true }));
  assert.deepEqual(up2.value, { _id: 11, v: 2 });

  // A retry that does not fit the write it retries is refused with mongod's codes.
  const last = cmd({ query: { _id: 3 }, update: { $inc: { n: 5 } }, new: true });
  const l1 = await rs.raw(p, dbName, last);
  assert.deepEqual(l1.value, { _id: 3, n: 5 });
  const asRemove = await rs.raw(p, dbName, { findAndModify: 'c', query: { _id: 3 }, remove: true, lsid, txnNumber: last.txnNumber });
  assert.equal(asRemove.ok, 0, JSON.stringify(asRemove));
  const asOld = await rs.raw(p, dbName, { ...last, new: false });
  assert.equal(asOld.code, 40612, JSON.stringify(asOld));

  // After a change of primary, the new one answers the same retry from the replicated record.
  await rs.adminCommand(p, { replSetStepDown: 30 }).catch(() => {});
  p = await rs.waitForPrimary({ exclude: [p] });
  const l2 = await rs.raw(p, dbName, last);
  assert.equal(l2.ok, 1, JSON.stringify(l2));
  assert.deepEqual(l2.value, l1.value);
  assert.deepEqual(l2.lastErrorObject, { n: 1, updatedExisting: true });

  // A findAndModify that matched nothing wrote nothing: its retry runs again.
  const none = cmd({ query: { _id: 99 }, update: { $set: { v: 1 } } });
  const n1 = await rs.raw(p, dbName, none);
  assert.equal(n1.value, null);
  await rs.client.db(dbName).collection('c').insertOne({ _id: 99, v: 0 }, MAJ);
  const n2 = await rs.raw(p, dbName, none);
  assert.deepEqual(n2.value, { _id: 99, v: 0 }, 'nothing was recorded, so the retry found the document inserted since');

  const docs = await rs.waitForReplication(dbName, 'c');
  assert.deepEqual(docs, [
    { _id: 1, n: 2, tags: ['a', 'b'], secret: 's1' },
    { _id: 3, n: 5 },
    { _id: 10, v: 1 },
    { _id: 11, v: 2 },
    { _id: 99, v: 1 },
  ], 'each findAndModify ran exactly once, on every member');
});
