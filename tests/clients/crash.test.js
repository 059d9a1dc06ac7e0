'use strict';
// Crash safety of documents and their index entries: kill -9 during bulk
// inserts into a collection with three secondary indexes, and during an
// index build; after a restart on the same dbpath, validate finds every
// index in step with the documents. Also checks that currentOp shows an
// index build in progress from a second connection.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const DB = 'crashdb';

async function validateAll(coll, expectIndexes) {
  const db = srv.client.db(DB);
  const n = await db.collection(coll).countDocuments();
  const v = await db.command({ validate: coll });
  assert.equal(v.valid, true, `validate errors: ${JSON.stringify(v.errors)}`);
  assert.equal(Number(v.nrecords), n, 'nrecords agrees with countDocuments');
  for (const name of expectIndexes) {
    assert.equal(Number(v.keysPerIndex[name]), n, `index ${name} has one key per document`);
  }
  return n;
}

h.test('kill -9 during insertMany (j: false) with three secondary indexes; restart; validate is clean', { timeout: 180000 }, async () => {
  const db = srv.client.db(DB);
  const c = db.collection('bulk');
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1, a: -1 });
  await c.createIndex({ u: 1 }, { unique: true });
  let i = 0;
  let stop = false;
  const writer = (async () => {
    while (!stop) {
      const docs = Array.from({ length: 500 }, () => { i += 1; return { a: i % 1000, b: `s${i % 37}`, u: i, pad: 'x'.repeat(100) }; });
      try {
        await c.insertMany(docs, { writeConcern: { w: 1, j: false } });
      } catch (_) {
        return; // the server went away
      }
    }
  })();
  // Let a good number of batches land, then pull the plug mid-stream.
  while (i < 30000) await h.sleep(20);
  await srv.server.kill9();
  stop = true;
  await writer;
  await srv.server.start();
  await srv.reconnect();
  const n = await validateAll('bulk', ['_id_', 'a_1', 'b_1_a_-1', 'u_1']);
  assert.ok(n > 0, 'some acknowledged batches survived');
  // New writes after recovery do not collide with recovered record ids or keys.
  const c2 = srv.client.db(DB).collection('bulk');
  await c2.insertMany(Array.from({ length: 100 }, (_, k) => ({ a: k, b: 'after', u: -1 - k })));
  await h.expectCode(c2.insertOne({ u: -1 }), 11000);
  await validateAll('bulk', ['_id_', 'a_1', 'b_1_a_-1', 'u_1']);
});

h.test('currentOp shows an index build in progress; kill -9 during the build leaves no index behind', { timeout: 240000 }, async () => {
  const db = srv.client.db(DB);
  const c = db.collection('build');
  for (let k = 0; k < 200000; k += 10000) {
    await c.insertMany(Array.from({ length: 10000 }, (_, j) => ({ x: (k + j) % 5003, y: k + j })));
  }
  const other = await srv.newClient();
  const build = c.createIndex({ x: 1, y: 1 }).then(() => null, (e) => e);
  let seen = null;
  for (let t = 0; t < 4000 && !seen; t++) {
    const r = await other.db('admin').command({ currentOp: 1, msg: 'Index Build: scanning collection' });
    const op = r.inprog.find((o) => o.ns === `${DB}.build`);
    if (op && Number(op.progress.done) > 0) seen = op;
    else await h.sleep(5);
  }
  assert.ok(seen, 'currentOp never showed the index build');
  assert.ok(Number(seen.progress.total) >= 150000, `progress.total ${seen.progress.total}`);
  assert.equal(seen.command.createIndexes, 'build');
  await srv.server.kill9();
  await build;
  await srv.server.start();
  await srv.reconnect();
  const c2 = srv.client.db(DB).collection('build');
  const names = (await c2.indexes()).map((ix) => ix.name);
  assert.deepEqual(names, ['_id_'], 'a build interrupted by a crash is not in the catalog');
  assert.equal(await validateAll('build', ['_id_']), 200000);
  // The build can be run again to completion.
  await c2.createIndex({ x: 1, y: 1 });
  await validateAll('build', ['_id_', 'x_1_y_1']);
});

h.test('deleteMany of old documents while a writer inserts newer ones, kill -9 midway; restart; validate is clean and no document the delete did not match is gone', { timeout: 180000 }, async () => {
  const db = srv.client.db(DB);
  const c = db.collection('purge');
  await c.createIndex({ at: 1 });
  await c.createIndex({ k: 1 });
  const base = Date.now() - 3600e3;
  for (let s = 0; s < 60000; s += 2000) {
    await c.insertMany(Array.from({ length: 2000 }, (_, i) => ({ _id: s + i, at: new Date(base + s + i), k: (s + i) % 97 })));
  }
  // A writer keeps inserting documents the purge does not match (newer dates), some with _ids inside the purged range's.
  let stop = false;
  let n = 0;
  const writer = (async () => {
    while (!stop) {
      n += 1;
      try {
        await c.insertOne({ _id: `new${n}`, at: new Date(), k: n % 97 }, { writeConcern: { w: 1, j: true } });
      } catch (_) {
        return;
      }
    }
  })();
  const cut = new Date(base + 50000);
  const purge = c.deleteMany({ at: { $lt: cut } }).catch(() => null);
  while ((await c.estimatedDocumentCount()) > 40000) await h.sleep(5);
  await srv.server.kill9();
  stop = true;
  await writer;
  await purge;
  await srv.server.start();
  await srv.reconnect();
  const c2 = srv.client.db(DB).collection('purge');
  await validateAll('purge', ['_id_', 'at_1', 'k_1']);
  // Nothing newer than the cut went; what is left of the old ones is intact and found through every index.
  assert.equal(await c2.countDocuments({ _id: { $gte: 50000, $lt: 60000 } }), 10000);
  const oldLeft = await c2.countDocuments({ at: { $lt: cut } });
  assert.equal(await c2.countDocuments({ at: { $lt: cut } }, { hint: { at: 1 } }), oldLeft);
  assert.equal(await c2.countDocuments({ _id: { $lt: 50000 } }, { hint: { _id: 1 } }), oldLeft);
  // The purge completes after the restart.
  const r = await c2.deleteMany({ at: { $lt: cut } });
  assert.equal(r.deletedCount, oldLeft);
  assert.equal(await c2.countDocuments({ _id: { $lt: 60000 } }), 10000);
  await validateAll('purge', ['_id_', 'at_1', 'k_1']);
});
