'use strict';
/*
 * SPEC G3: compact gives back the space that mass deletions leave behind, and
 * fsync, through the Node driver and mongosh.
 *
 * The main test inserts 50,000 documents of about 1 KB of random hex (about
 * 50 MB, which snappy barely compresses), deletes 90% of them, and compacts: the
 * reply's bytesFreed and collStats' storageSize (the file size) must show the
 * space back, and the remaining documents must be intact, also after kill -9.
 * mongod 8.0 compacts only files with at least freeSpaceTargetMB (default 20)
 * MB free, so the collection is made large enough for the default.
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const h = require('./harness');

const srv = h.useServer();
const BIG = { timeout: 180000 };

function admin() { return srv.client.db('admin'); }

/*
 * Inserts n documents {_id: i, keep: i % 10 === 0, k: i % 1000, pad: ~1 KB of
 * hex} in batches, then fsyncs: until a checkpoint writes them, new documents
 * live in the cache and the file (storageSize) stays small, as in mongod.
 */
async function fill(coll, n) {
  for (let start = 0; start < n; start += 5000) {
    const docs = [];
    for (let i = start; i < Math.min(n, start + 5000); i++) {
      docs.push({ _id: i, keep: i % 10 === 0, k: i % 1000, pad: crypto.randomBytes(500).toString('hex') });
    }
    await coll.insertMany(docs, { ordered: false });
  }
  await admin().command({ fsync: 1 });
}

async function stats(db, name) {
  return db.command({ collStats: name });
}

h.test('G3: compact after deleting 90% of 50,000 1 KB documents frees the space; the rest stays intact, also after kill -9', BIG, async (t) => {
  const db = srv.freshDb('g3');
  const c = db.collection('big');
  await fill(c, 50000);
  await c.createIndex({ k: 1 });
  assert.deepEqual(await admin().command({ fsync: 1 }), { numFiles: 1, ok: 1 });
  const before = await stats(db, 'big');
  assert.ok(before.storageSize > 40 * 1024 * 1024, `storageSize ${before.storageSize}`);

  const del = await c.deleteMany({ keep: false });
  assert.equal(del.deletedCount, 45000);
  // After a checkpoint the freed blocks show as freeStorageSize, what compact can give back.
  await admin().command({ fsync: 1 });
  const freed = await stats(db, 'big');
  assert.ok(freed.freeStorageSize > 30 * 1024 * 1024, `freeStorageSize ${freed.freeStorageSize}`);
  // dbStats adds up the same with freeStorage: 1 (mongod's fields), and leaves them out without it.
  const dbf = await db.command({ dbStats: 1, freeStorage: 1 });
  assert.equal(dbf.freeStorageSize, freed.freeStorageSize);
  assert.ok(dbf.indexFreeStorageSize >= 0);
  assert.equal(dbf.totalFreeStorageSize, dbf.freeStorageSize + dbf.indexFreeStorageSize);
  const keys = Object.keys(dbf);
  assert.ok(keys.indexOf('freeStorageSize') === keys.indexOf('storageSize') + 1, keys.join());
  assert.ok(dbf.fsTotalSize > 0 && dbf.fsUsedSize > 0);
  const plain = await db.command({ dbStats: 1 });
  assert.equal(plain.freeStorageSize, undefined);
  assert.equal(plain.totalFreeStorageSize, undefined);

  const dry = await db.command({ compact: 'big', dryRun: true });
  assert.equal(dry.ok, 1);
  assert.equal(dry.bytesFreed, undefined);
  assert.ok(dry.estimatedBytesFreed > 30 * 1024 * 1024, `estimatedBytesFreed ${dry.estimatedBytesFreed}`);

  const r = await db.command({ compact: 'big' });
  assert.deepEqual(Object.keys(r).sort(), ['bytesFreed', 'ok']);
  assert.equal(r.ok, 1);
  assert.ok(r.bytesFreed > 30 * 1024 * 1024, `bytesFreed ${r.bytesFreed}`);
  const after = await stats(db, 'big');
  t.diagnostic(`storageSize ${before.storageSize} -> ${after.storageSize}, totalSize ${before.totalSize} -> ` +
    `${after.totalSize}, bytesFreed ${r.bytesFreed}, estimatedBytesFreed ${dry.estimatedBytesFreed}`);
  assert.ok(after.storageSize < before.storageSize / 4, `storageSize ${before.storageSize} -> ${after.storageSize}`);
  assert.ok(after.totalSize < before.totalSize, `totalSize ${before.totalSize} -> ${after.totalSize}`);
  assert.equal(after.totalSize, after.storageSize + after.totalIndexSize);
  const cs = await c.aggregate([{ $collStats: { storageStats: {} } }]).toArray();
  assert.equal(cs[0].storageStats.storageSize, after.storageSize);
  const dbs = await db.stats();
  assert.ok(dbs.storageSize <= after.storageSize + 1024 * 1024, `dbStats storageSize ${dbs.storageSize}`);

  async function check(coll) {
    assert.equal(await coll.countDocuments(), 5000);
    assert.equal(await coll.countDocuments({ keep: false }), 0);
    const d = await coll.findOne({ _id: 49990 });
    assert.equal(d.k, 990);
    assert.equal(d.pad.length, 1000);
    assert.equal(await coll.countDocuments({ k: 500 }), 50); // through the k index
    assert.equal((await coll.find({ _id: { $gte: 1000, $lt: 1100 } }).toArray()).length, 10);
    const v = await coll.db.command({ validate: coll.collectionName });
    assert.equal(v.valid, true, JSON.stringify(v.errors));
  }
  await check(c);

  // A second compact has nothing left to free.
  const again = await db.command({ compact: 'big' });
  assert.ok(again.bytesFreed < 1024 * 1024, `second bytesFreed ${again.bytesFreed}`);

  await c.insertOne({ _id: 'after', pad: 'x' }, { writeConcern: { w: 1, j: true } });
  await c.deleteOne({ _id: 'after' }, { writeConcern: { w: 1, j: true } });
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  const c2 = srv.client.db(db.databaseName).collection('big');
  await check(c2);
  const reopened = await stats(srv.client.db(db.databaseName), 'big');
  assert.ok(reopened.storageSize < before.storageSize / 4, `storageSize after restart ${reopened.storageSize}`);
});

h.test('G3: freeSpaceTargetMB: files with less free space are left as they are', BIG, async () => {
  const db = srv.freshDb('g3target');
  const c = db.collection('c');
  await fill(c, 30000);
  await c.deleteMany({ keep: false });
  const dry = await db.command({ compact: 'c', dryRun: true, freeSpaceTargetMB: 1000000 });
  assert.deepEqual(dry, { estimatedBytesFreed: 0, ok: 1 });
  const none = await db.command({ compact: 'c', freeSpaceTargetMB: 1000000 });
  assert.equal(none.bytesFreed, 0);
  const some = await db.command({ compact: 'c', freeSpaceTargetMB: 1, force: true });
  assert.ok(some.bytesFreed > 10 * 1024 * 1024, `bytesFreed ${some.bytesFreed}`);
  assert.equal(await c.countDocuments(), 3000);
});

h.test('G3: compact errors: missing collection 26, view 166, bad arguments', async () => {
  const db = srv.freshDb('g3err');
  await h.expectCode(db.command({ compact: 'nope' }), 26, /^collection does not exist$/);
  await db.collection('base').insertOne({ a: 1 });
  await db.createCollection('v', { viewOn: 'base', pipeline: [] });
  await h.expectCode(db.command({ compact: 'v' }), 166, /^can't compact a view$/);
  await h.expectCode(db.command({ compact: 1 }), 73);
  await h.expectCode(db.command({ compact: 'base', force: 1 }), 14,
    /BSON field 'compact.force' is the wrong type 'int', expected type 'bool'/);
  await h.expectCode(db.command({ compact: 'base', dryRun: 'yes' }), 14);
  await h.expectCode(db.command({ compact: 'base', freeSpaceTargetMB: 'x' }), 14);
  await h.expectCode(db.command({ compact: 'base', freeSpaceTargetMB: 0 }), 51024);
  await h.expectCode(db.command({ compact: 'base', bogus: 1 }), 40415);
  // Small collections are below the default target: nothing to free, still ok.
  assert.deepEqual(await db.command({ compact: 'base', comment: 'c' }), { bytesFreed: 0, ok: 1 });
  assert.equal(await db.collection('base').countDocuments(), 1);
});

h.test('G3: writes to another collection go on while a collection is compacted', BIG, async (t) => {
  const db = srv.freshDb('g3conc');
  const big = db.collection('big');
  await fill(big, 40000);
  await big.deleteMany({ keep: false });
  const other = srv.client.db(db.databaseName).collection('other');
  let done = false;
  let inserted = 0;
  const finished = []; // completion times of the inserts
  const writer = (async () => {
    while (!done) {
      await other.insertOne({ n: inserted });
      finished.push(Date.now());
      inserted++;
    }
  })();
  await h.sleep(50);
  const t0 = Date.now();
  const r = await db.command({ compact: 'big' });
  const t1 = Date.now();
  done = true;
  await writer;
  const during = finished.filter((x) => x > t0 && x < t1).length;
  t.diagnostic(`compact took ${t1 - t0} ms, ${during} inserts into another collection finished meanwhile`);
  assert.ok(r.bytesFreed > 10 * 1024 * 1024, `bytesFreed ${r.bytesFreed}`);
  assert.ok(during > 0, `no insert finished during the ${t1 - t0} ms of compact`);
  assert.equal(await other.countDocuments(), inserted);
  assert.equal(await big.countDocuments(), 4000);
});

h.test('G3: compact stops at maxTimeMS; the data stays intact and a later compact finishes', BIG, async () => {
  const db = srv.freshDb('g3time');
  const c = db.collection('c');
  await fill(c, 30000);
  await c.deleteMany({ keep: false });
  await h.expectCode(db.command({ compact: 'c', maxTimeMS: 1 }), 50);
  assert.equal(await c.countDocuments(), 3000);
  const r = await db.command({ compact: 'c' });
  assert.equal(r.ok, 1);
  assert.equal(await c.countDocuments(), 3000);
  assert.equal((await db.command({ validate: 'c' })).valid, true);
});

h.test('fsync: {numFiles: 1, ok: 1} on admin; 13 elsewhere; fsyncUnlock when not locked is 20', async () => {
  assert.deepEqual(await admin().command({ fsync: 1 }), { numFiles: 1, ok: 1 });
  assert.deepEqual(await admin().command({ fsync: 1, lock: false }), { numFiles: 1, ok: 1 });
  const db = srv.freshDb('fs');
  await h.expectCode(db.command({ fsync: 1 }), 13, /^fsync may only be run against the admin database\.$/);
  await h.expectCode(admin().command({ fsyncUnlock: 1 }), 20, /^fsyncUnlock called when not locked$/);
  const cmds = (await admin().command({ listCommands: 1 })).commands;
  assert.ok(cmds.compact && cmds.fsync && cmds.fsyncUnlock);
  assert.equal(cmds.fsync.adminOnly, true);
  assert.equal(cmds.compact.adminOnly, false);
});

h.test('fsync lock (db.fsyncLock()): writes, DDL and TTL deletions wait until fsyncUnlock, reads go on; locks nest; killOp and maxTimeMS end a waiting write; currentOp shows it', { timeout: 120000 }, async () => {
  // mongod 8.0's fsync.cpp / fsync_unlock: lockCount, the replies' info, currentOp's fsyncLock.
  const db = srv.freshDb('fslock');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1 }, { _id: 2 }]);
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await c.insertOne({ _id: 'ttl', at: new Date(Date.now() + 1500) });
  const other = await srv.newClient();
  const oc = other.db(db.databaseName).collection('c');
  let pending = null;
  try {
    const locked = await admin().command({ fsync: 1, lock: true });
    assert.deepEqual(locked, { info: 'now locked against writes, use db.fsyncUnlock() to unlock', lockCount: 1,
      seeAlso: 'http://dochub.mongodb.org/core/fsynccommand', ok: 1 });
    // Reads go on.
    assert.equal(await oc.countDocuments(), 3);
    assert.deepEqual(await oc.findOne({ _id: 1 }), { _id: 1 });
    // A write waits: maxTimeMS ends it with 50, killOp with 11601, and neither wrote anything.
    await h.expectCode(other.db(db.databaseName).command({ insert: 'c', documents: [{ _id: 'late' }], maxTimeMS: 300 }), 50);
    const killed = oc.insertOne({ _id: 'killed' }).then(() => null, (e) => e);
    let op = null;
    for (let i = 0; i < 200 && !op; i++) {
      const cur = await admin().command({ currentOp: 1 });
      assert.equal(cur.fsyncLock, true, 'currentOp says the server is fsync-locked');
      assert.equal(cur.info, 'use db.fsyncUnlock() to terminate the fsync write/snapshot lock');
      op = cur.inprog.find((o) => o.ns === `${db.databaseName}.c` && o.command && o.command.insert === 'c');
      if (!op) await h.sleep(10);
    }
    assert.ok(op, 'the waiting insert shows in currentOp');
    assert.equal(op.waitingForLock, true);
    await admin().command({ killOp: 1, op: op.opid });
    assert.equal((await killed).code, 11601);
    // DDL waits too.
    await h.expectCode(other.db(db.databaseName).command({ createIndexes: 'c', indexes: [{ key: { z: 1 }, name: 'z_1' }], maxTimeMS: 300 }), 50);
    await h.expectCode(other.db(db.databaseName).command({ create: 'newcoll', maxTimeMS: 300 }), 50);
    // The TTL document's time passes while locked: it stays.
    await h.sleep(2500);
    assert.equal(await oc.countDocuments({ _id: 'ttl' }), 1, 'no TTL deletion while locked');
    // Locks nest: two locks need two unlocks.
    assert.equal((await admin().command({ fsync: 1, lock: true })).lockCount, 2);
    pending = oc.insertOne({ _id: 'after' });
    assert.deepEqual(await admin().command({ fsyncUnlock: 1 }), { info: 'fsyncUnlock completed', lockCount: 1, ok: 1 });
    await h.sleep(300);
    assert.equal(await c.countDocuments({ _id: 'after' }), 0, 'still locked at lockCount 1');
    assert.deepEqual(await admin().command({ fsyncUnlock: 1 }), { info: 'fsyncUnlock completed', lockCount: 0, ok: 1 });
    await pending;
    pending = null;
  } finally {
    if (pending) {
      await admin().command({ fsyncUnlock: 1 }).catch(() => {});
      await pending.catch(() => {});
    }
    await other.close();
  }
  assert.deepEqual((await c.find({ _id: { $in: ['late', 'killed', 'after'] } }).toArray()).map((d) => d._id), ['after']);
  assert.equal((await admin().command({ currentOp: 1 })).fsyncLock, undefined);
  await h.expectCode(admin().command({ fsyncUnlock: 1 }), 20);
  // Unlocked, the TTL monitor deletes the expired document.
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline && (await c.countDocuments({ _id: 'ttl' })) > 0) await h.sleep(100);
  assert.equal(await c.countDocuments({ _id: 'ttl' }), 0, 'the TTL deletion went on after the unlock');
  // mongosh's helpers.
  const out = await h.mongosh(srv.port, 'admin',
    'const l = db.fsyncLock(); const u = db.fsyncUnlock(); print(l.lockCount, u.lockCount, l.ok, u.ok)');
  assert.equal(out, "Long('1') Long('0') 1 1", 'lockCount is a long, as mongod\'s');
});

h.test('G3: a time-series collection compacts its buckets (system.buckets.<name>)', BIG, async (t) => {
  const db = srv.freshDb('g3ts');
  await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' } }).catch(() => {});
  const info = await db.listCollections({ name: 'ts' }).toArray();
  if (!info.length || info[0].type !== 'timeseries') {
    t.skip('time-series collections are not available');
    return;
  }
  const ts = db.collection('ts');
  const t0 = Date.now() - 3600 * 1000;
  for (let start = 0; start < 20000; start += 5000) {
    const docs = [];
    for (let i = start; i < start + 5000; i++) {
      docs.push({ t: new Date(t0 + i), m: i % 10, pad: crypto.randomBytes(250).toString('hex') });
    }
    await ts.insertMany(docs, { ordered: false });
  }
  await admin().command({ fsync: 1 });
  const before = await stats(db, 'ts');
  await ts.deleteMany({ m: { $ne: 0 } }); // by metaField: whole buckets go
  assert.equal(await ts.countDocuments(), 2000);
  // Buckets of about 128 KB: compaction can move them only because record
  // tables keep large documents on their leaf pages (mf_storage_table_config).
  const r = await db.command({ compact: 'ts', freeSpaceTargetMB: 1 });
  const after = await stats(db, 'ts');
  t.diagnostic(`time-series bytesFreed ${r.bytesFreed}, storageSize ${before.storageSize} -> ${after.storageSize}`);
  assert.ok(r.bytesFreed > before.storageSize / 2, `bytesFreed ${r.bytesFreed} of ${before.storageSize}`);
  assert.ok(after.storageSize < before.storageSize / 2, `storageSize ${before.storageSize} -> ${after.storageSize}`);
  assert.equal(await ts.countDocuments(), 2000);
  assert.equal(await ts.countDocuments({ m: 0 }), 2000);
});

h.test('G3 (mongosh): db.runCommand({compact}) and db.adminCommand({fsync})', BIG, async () => {
  const db = srv.freshDb('g3sh');
  await fill(db.collection('c'), 30000);
  await db.collection('c').deleteMany({ keep: false });
  const out = await h.mongosh(srv.port, db.databaseName, `
    const before = db.c.stats().storageSize;
    print("fsync=" + JSON.stringify(db.adminCommand({ fsync: 1 })));
    const r = db.runCommand({ compact: "c" });
    print("ok=" + r.ok + " freed=" + (r.bytesFreed > 10 * 1024 * 1024));
    print("smaller=" + (db.c.stats().storageSize < before / 4));
    print("count=" + db.c.countDocuments());
    try { db.runCommand({ compact: "missing" }); print("no error"); } catch (e) { print("code=" + e.code); }
  `);
  assert.match(out, /fsync=\{"numFiles":1,"ok":1\}/);
  assert.match(out, /ok=1 freed=true/);
  assert.match(out, /smaller=true/);
  assert.match(out, /count=3000/);
  assert.match(out, /code=26/);
});
