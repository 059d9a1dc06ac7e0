'use strict';
/*
 * Replica sets (issue 9), a partitioned primary: the primary is cut off
 * from everyone (SIGSTOP: no heartbeat, no raft traffic, no client answer)
 * while the others elect a new primary and take writes, then it comes back
 * (SIGCONT) still believing it leads. Nothing it accepts in that state may
 * be acknowledged unless a majority holds it: writes sent straight to it fail
 * or time out, it becomes a secondary of the new primary, and every member
 * converges on the same documents with every acknowledged write.
 */
const assert = require('node:assert/strict');
const R = require('./rs_harness');

const rs = R.useReplSet(3);
const MAJ = { writeConcern: { w: 'majority', wtimeout: 20000 } };

R.test('a primary cut off (SIGSTOP) and back: the others elect a new one, the old one acknowledges nothing alone, all converge', { timeout: 120000 }, async () => {
  await rs.waitForSteadyState();
  const dbName = rs.freshDb('part').databaseName;
  const c = rs.client.db(dbName).collection('c');
  await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `before${i}` })), MAJ);
  const old = await rs.waitForPrimary();
  const proc = rs.members[old].server.proc;

  proc.kill('SIGSTOP');
  let resumed = false;
  try {
    const np = await rs.waitForPrimary({ exclude: [old], timeoutMs: 20000 });
    assert.notEqual(np, old);
    // The majority side takes writes.
    const acked = [];
    for (let i = 0; i < 20; i++) {
      await c.insertOne({ _id: `during${i}` }, MAJ);
      acked.push(`during${i}`);
    }
    // The old primary comes back, possibly still calling itself primary for a moment.
    proc.kill('SIGCONT');
    resumed = true;
    const stale = await rs.raw(old, dbName, { insert: 'c', documents: [{ _id: 'stale' }], writeConcern: { w: 1, wtimeout: 2000 } }, 10000);
    const staleAcked = stale && stale.ok === 1 && stale.n === 1 && !stale.writeConcernError;
    console.log(`# write sent to the returning old primary: ${JSON.stringify(stale)}`);
    // Its raft term is stale: nothing it writes can commit, so nothing may be acknowledged as written.
    assert.equal(staleAcked, false, `the cut-off primary acknowledged a write alone: ${JSON.stringify(stale)}`);

    // It rejoins as a secondary of the new primary.
    await rs.waitForSecondary(old, { timeoutMs: 30000 });
    const h = await rs.hello(old);
    assert.equal(h.isWritablePrimary, false);
    assert.equal(h.primary, rs.members[np].host);

    const docs = await rs.waitForReplication(dbName, 'c', { timeoutMs: 30000 });
    const ids = new Set(docs.map((d) => d._id));
    for (let i = 0; i < 20; i++) assert.ok(ids.has(`before${i}`), `before${i} kept`);
    for (const id of acked) assert.ok(ids.has(id), `${id} (acknowledged by the majority side) kept`);
    for (const i of [0, 1, 2]) {
      const mine = await rs.docsOn(i, dbName, 'c');
      assert.deepEqual(mine.map((d) => d._id), docs.map((d) => d._id), `member ${i} holds the same documents`);
    }
  } finally {
    if (!resumed) proc.kill('SIGCONT');
  }
});
