'use strict';
/*
 * SPEC G3, mongod 8.0's autoCompact: background compaction gives back the
 * space that a TTL index's mass expiry leaves behind, without a compact
 * command per collection, through the Node driver.
 *
 * The main test lets a TTL index expire 90% of 30,000 documents of about
 * 1 KB of random hex (about 30 MB; snappy barely compresses it), then turns
 * autoCompact on with runOnce: collStats' storageSize (the file size) must
 * fall, serverStatus().wiredTiger.compact must count the compactions and
 * the bytes, background compaction must turn itself off after its pass,
 * and the documents left must be intact. Also: the command's IDL errors,
 * on/off twice (2), an fsyncLock holding compaction back until fsyncUnlock,
 * drops and writes while it runs, a restart leaving it off, and --inMemory
 * refusing it (20).
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const h = require('./harness');

const srv = h.useServer();
const BIG = { timeout: 180000 };

function admin() { return srv.client.db('admin'); }

async function compactStats() {
  return (await admin().command({ serverStatus: 1 })).wiredTiger.compact;
}

/* n documents of about 1 KB ({_id: i, keep, at, pad}); keep: i % 10 === 0 gets a Date far ahead, the rest one in the past. */
async function fill(coll, n) {
  const past = new Date(Date.now() - 3600 * 1000), ahead = new Date(Date.now() + 30 * 24 * 3600 * 1000);
  for (let start = 0; start < n; start += 5000) {
    const docs = [];
    for (let i = start; i < Math.min(n, start + 5000); i++) {
      const keep = i % 10 === 0;
      docs.push({ _id: i, keep, at: keep ? ahead : past, pad: crypto.randomBytes(500).toString('hex') });
    }
    await coll.insertMany(docs, { ordered: false });
  }
}

/* Waits until background compaction is off again (runOnce's pass is over). */
async function waitStopped(msg) {
  let last;
  await h.waitFor(async () => {
    last = await compactStats();
    return Number(last['background compact running']) === 0;
  }, msg, 60000, 100);
  return last;
}

h.test('G3: autoCompact with runOnce gives back the space a TTL mass expiry freed, counts it, and turns itself off', BIG, async (t) => {
  const db = srv.freshDb('ac');
  const c = db.collection('sessions');
  await fill(c, 30000);
  await admin().command({ fsync: 1 });
  const before = await db.command({ collStats: 'sessions' });
  assert.ok(before.storageSize > 20 * 1024 * 1024, `storageSize ${before.storageSize}`);

  // The TTL index deletes the 27,000 documents whose date has passed.
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await h.waitFor(async () => (await c.estimatedDocumentCount()) === 3000, 'TTL expiry of 27,000 documents', 60000, 100);
  await admin().command({ fsync: 1 });
  const expired = await db.command({ collStats: 'sessions' });
  assert.ok(expired.freeStorageSize > 15 * 1024 * 1024, `freeStorageSize ${expired.freeStorageSize}`);

  const s0 = await compactStats();
  assert.equal(Number(s0['background compact running']), 0);
  assert.deepEqual(await admin().command({ autoCompact: true, runOnce: true, freeSpaceTargetMB: 5 }), { ok: 1 });
  const s1 = await waitStopped('the runOnce pass to end');
  const after = await db.command({ collStats: 'sessions' });
  t.diagnostic(`storageSize ${before.storageSize} -> ${expired.storageSize} after expiry -> ${after.storageSize}; ` +
    `stats ${JSON.stringify(s1)}`);
  assert.ok(after.storageSize < expired.storageSize / 3, `storageSize ${expired.storageSize} -> ${after.storageSize}`);
  assert.ok(Number(s1['background compact successful calls']) > Number(s0['background compact successful calls']));
  assert.ok(Number(s1['background compact recovered bytes']) - Number(s0['background compact recovered bytes']) >
    15 * 1024 * 1024, JSON.stringify(s1));
  assert.ok(Number(s1['number of files tracked by background compaction']) >= 3, JSON.stringify(s1));
  // Off after runOnce: turning it off again is refused as "already disabled".
  await h.expectCode(admin().command({ autoCompact: false }), 2, /already disabled/);

  // What is left is intact, through its indexes too.
  assert.equal(await c.countDocuments({ keep: true }), 3000);
  assert.equal(await c.countDocuments({ at: { $gt: new Date() } }), 3000);
  const doc = await c.findOne({ _id: 29990 });
  assert.equal(doc.keep, true);
  assert.equal(doc.pad.length, 1000);
});

h.test('autoCompact: the command as mongod 8.0 parses it (admin only, IDL types, freeSpaceTargetMB >= 1, unknown fields)', async () => {
  await h.expectCode(srv.freshDb('acx').command({ autoCompact: true }), 13, /may only be run against the admin database/);
  await h.expectCode(admin().command({ autoCompact: 1 }), 14,
    /^BSON field 'autoCompact.autoCompact' is the wrong type 'int', expected type 'bool'$/);
  await h.expectCode(admin().command({ autoCompact: true, runOnce: 1 }), 14,
    /^BSON field 'autoCompact.runOnce' is the wrong type 'int', expected type 'bool'$/);
  await h.expectCode(admin().command({ autoCompact: true, freeSpaceTargetMB: 0 }), 51024,
    /^BSON field 'freeSpaceTargetMB' value must be >= 1, actual value '0'$/);
  await h.expectCode(admin().command({ autoCompact: true, freeSpaceTargetMB: 'x' }), 14);
  await h.expectCode(admin().command({ autoCompact: true, nope: 1 }), 40415, /'autoCompact.nope' is an unknown field/);
  // Nothing above turned it on.
  assert.equal(Number((await compactStats())['background compact running']), 0);
  await h.expectCode(admin().command({ autoCompact: false }), 2, /already disabled/);
  // On, on again (refused: stop it first to change its options), off.
  assert.equal((await admin().command({ autoCompact: true, freeSpaceTargetMB: 1000000 })).ok, 1);
  assert.equal(Number((await compactStats())['background compact running']), 1);
  await h.expectCode(admin().command({ autoCompact: true, runOnce: true }), 2, /already enabled/);
  assert.equal((await admin().command({ autoCompact: false })).ok, 1);
  assert.equal(Number((await compactStats())['background compact running']), 0);
  const lc = await admin().command({ listCommands: 1 });
  assert.ok(lc.commands.autoCompact, 'listCommands lists autoCompact');
});

h.test('autoCompact waits while an fsyncLock holds the files still, and compacts after fsyncUnlock', BIG, async () => {
  const db = srv.freshDb('aclock');
  const c = db.collection('ev');
  await fill(c, 20000);
  await admin().command({ fsync: 1 });
  await c.deleteMany({ keep: false });
  await admin().command({ fsync: 1 });
  const freed = await db.command({ collStats: 'ev' });
  assert.ok(freed.freeStorageSize > 10 * 1024 * 1024, `freeStorageSize ${freed.freeStorageSize}`);
  const s0 = await compactStats();
  await admin().command({ fsync: 1, lock: true });
  try {
    await admin().command({ autoCompact: true, runOnce: true, freeSpaceTargetMB: 2 });
    await h.sleep(1500);
    const held = await db.command({ collStats: 'ev' });
    assert.equal(held.storageSize, freed.storageSize, 'no file changes under fsyncLock');
    const s1 = await compactStats();
    assert.equal(Number(s1['background compact running']), 1);
    assert.equal(Number(s1['background compact successful calls']), Number(s0['background compact successful calls']));
  } finally {
    await admin().command({ fsyncUnlock: 1 });
  }
  await waitStopped('the pass after fsyncUnlock');
  const after = await db.command({ collStats: 'ev' });
  assert.ok(after.storageSize < freed.storageSize / 3, `storageSize ${freed.storageSize} -> ${after.storageSize}`);
  assert.equal(await c.countDocuments({}), 2000);
});

h.test('autoCompact runs beside writes and drops, and a restart (also kill -9) leaves it off with the data intact', BIG, async () => {
  const db = srv.freshDb('acbusy');
  const names = ['a', 'b', 'c'];
  for (const n of names) await fill(db.collection(n), 8000);
  await admin().command({ fsync: 1 });
  for (const n of names) await db.collection(n).deleteMany({ keep: false });
  await admin().command({ fsync: 1 });
  await admin().command({ autoCompact: true, freeSpaceTargetMB: 1 });
  // Writes go on while it compacts (no collection lock is held), and a drop is not kept waiting.
  const w = db.collection('a');
  for (let i = 0; i < 20; i++) await w.insertOne({ _id: `w${i}`, keep: true });
  await db.collection('b').drop();
  await h.waitFor(async () => Number((await compactStats())['background compact successful calls']) > 0,
    'a compaction beside the writes', 60000, 100);
  assert.equal(await w.countDocuments({ keep: true }), 800 + 20);
  assert.equal(await db.collection('c').countDocuments({}), 800);
  const names2 = (await db.listCollections().toArray()).map((x) => x.name).sort();
  assert.deepEqual(names2, ['a', 'c']);

  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  assert.equal(Number((await compactStats())['background compact running']), 0, 'not persisted, as mongod');
  assert.equal(await srv.client.db(db.databaseName).collection('a').countDocuments({ keep: true }), 820);
  assert.equal(await srv.client.db(db.databaseName).collection('c').countDocuments({}), 800);
  await srv.server.restart();
  await srv.reconnect();
  assert.equal(Number((await compactStats())['background compact running']), 0);
  assert.equal(await srv.client.db(db.databaseName).collection('c').countDocuments({}), 800);
});

h.test('autoCompact under --inMemory is refused with 20, as mongod\'s canRunAutoCompact', async () => {
  const mem = new h.MayflyServer({ args: ['--inMemory'] });
  await mem.start();
  try {
    const { MongoClient } = require('mongodb');
    const c = new MongoClient(mem.uri);
    await c.connect();
    try {
      await h.expectCode(c.db('admin').command({ autoCompact: true }), 20,
        /^autoCompact\(\) cannot be executed for in-memory configurations$/);
    } finally {
      await c.close();
    }
  } finally {
    await mem.stop();
    mem.cleanup();
  }
});
