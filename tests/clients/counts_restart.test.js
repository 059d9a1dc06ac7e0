'use strict';
/*
 * Collection counts after a restart. Sizes are stored once a second, so
 * after kill -9 the stored ones lag the records WiredTiger recovered (mongod's
 * fast counts stay off until a validate). mayfly counts every collection
 * again when the last stop was not clean, before it serves: count,
 * estimatedDocumentCount, collStats and $collStats agree with the documents
 * right after the restart, and stay right after more writes and a clean
 * restart. A clean restart does not count again.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function counts(db) {
  const coll = db.collection('c');
  const stats = await db.command({ collStats: 'c' });
  const [agg] = await coll.aggregate([{ $collStats: { storageStats: {} } }]).toArray();
  return {
    documents: await coll.countDocuments({}),
    estimated: await coll.estimatedDocumentCount(),
    countCmd: (await db.command({ count: 'c' })).n,
    collStats: stats.count,
    aggStats: agg.storageStats.count,
    size: stats.size,
  };
}

h.test('kill -9 right after j:true inserts: every count agrees with the documents after the restart', { timeout: 90000 }, async () => {
  const dbName = srv.freshDb('crashcount').databaseName;
  let db = srv.client.db(dbName);
  const docs = Array.from({ length: 2000 }, (_, i) => ({ _id: i, pad: 'x'.repeat(40) }));
  await db.collection('c').insertMany(docs, { writeConcern: { w: 1, j: true } });
  await db.collection('c').deleteMany({ _id: { $lt: 100 } }, { writeConcern: { w: 1, j: true } });
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.ok(srv.server.stderrLines.some((l) => /not shut down cleanly: collection sizes counted again/.test(l)),
    'the restart after kill -9 counted the collections again');
  let c = await counts(db);
  assert.equal(c.documents, 1900);
  assert.deepEqual([c.estimated, c.countCmd, c.collStats, c.aggStats], [1900, 1900, 1900, 1900], JSON.stringify(c));
  const size = c.size;
  assert.ok(size >= 1900 * 40, `size counts the documents' bytes: ${size}`);

  // More writes keep it exact, and a clean restart keeps it (without counting again).
  await db.collection('c').insertMany([{ _id: 'a' }, { _id: 'b' }], { writeConcern: { w: 1, j: true } });
  await srv.server.restart();
  await srv.reconnect();
  db = srv.client.db(dbName);
  const lines = srv.server.stderrLines;
  const lastStart = lines.map((l, i) => (/starting: pid=/.test(l) ? i : -1)).filter((i) => i >= 0).pop();
  assert.ok(!lines.slice(lastStart).some((l) => /counted again/.test(l)), 'a clean restart does not count again');
  c = await counts(db);
  assert.deepEqual([c.documents, c.estimated, c.countCmd, c.collStats, c.aggStats], [1902, 1902, 1902, 1902, 1902]);
});
