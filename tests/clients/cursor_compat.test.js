'use strict';
// Cursors as applications meet them through the driver: killing a cursor a
// getMore is using (mongod's CursorManager::killCursor interrupts that
// operation with CursorKilled), what the profiler and currentOp show of a
// getMore (the comment it inherits from the command that opened the cursor).
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

h.test('killCursors of a cursor an awaitData getMore is waiting on: the getMore fails with 237 CursorKilled, the cursor is gone (kill_pinned_cursor.js)', async () => {
  const db = srv.freshDb('killpinned');
  await db.createCollection('cap', { capped: true, size: 100000 });
  await db.collection('cap').insertOne({ a: 1 });
  const c1 = await h.rawConnect(srv.port);
  const c2 = await h.rawConnect(srv.port);
  try {
    const f = await c1.command(db.databaseName, { find: 'cap', tailable: true, awaitData: true });
    assert.equal(f.ok, 1, JSON.stringify(f));
    const id = h.cursorId(f.cursor.id);
    // Waits up to a minute for a document that never comes, unless it is interrupted.
    const pending = c1.command(db.databaseName, { getMore: id, collection: 'cap', maxTimeMS: 60000 });
    const admin = srv.client.db('admin');
    await h.waitFor(async () => (await admin.aggregate([{ $currentOp: {} },
      { $match: { op: 'getmore', ns: `${db.databaseName}.cap` } }]).toArray()).length === 1, 'the getMore is running');
    const k = await c2.command(db.databaseName, { killCursors: 'cap', cursors: [id] });
    assert.deepEqual(k.cursorsKilled.map(String), [String(id)]);
    assert.deepEqual([k.cursorsNotFound, k.cursorsAlive, k.cursorsUnknown], [[], [], []]);
    const g = await pending;
    assert.equal(g.ok, 0, JSON.stringify(g));
    assert.equal(g.code, 237);
    assert.equal(g.codeName, 'CursorKilled');
    assert.match(g.errmsg, /operation was interrupted/);
    const again = await c2.command(db.databaseName, { getMore: id, collection: 'cap' });
    assert.equal(again.code, 43, JSON.stringify(again));
    // The connection carries on.
    assert.equal((await c1.command(db.databaseName, { ping: 1 })).ok, 1);
  } finally { c1.close(); c2.close(); }
});
