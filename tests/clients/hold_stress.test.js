'use strict';
/*
 * Held connections under churn (src/net/net.c, "Held connections"): the
 * parked set, its waiters and its watchdog must never leave a connection
 * parked with nobody to read it. 24 connections make bursts of finds (2-8
 * one after another each, all connections at once) with the pool at its
 * cap (--workers 1 --maxWorkers 2: one waiter at most, so jobs queued for
 * workers keep calling the waiter off through the pool's wake descriptor
 * while other workers park connections), then pause, then make one find
 * each: every find must be answered within 2 s (they take well under a
 * millisecond; a connection left parked with no waiter and a resting
 * watchdog waited forever, which this caught in 5 of 6 runs of 60-150 s,
 * helper-84, session 53). HOLD_STRESS_SECS sets the length (15 s here;
 * `HOLD_STRESS_SECS=150 node --test tests/clients/hold_stress.test.js`
 * for the long run).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const SECS = Number(process.env.HOLD_STRESS_SECS || 15);
const N = 24;

/* p, or a rejection once it has not settled in ms. */
function within(p, ms, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no reply in ${ms} ms`)), ms); }),
  ]);
}

h.test(`held connections under churn at the worker cap: every find is answered (${SECS} s of bursts and pauses on ${N} connections)`,
  { timeout: (SECS + 60) * 1000 }, async () => {
    const s = new h.MayflyServer({ args: ['--workers', '1', '--maxWorkers', '2', '--setParameter', 'netConnectionHoldMicros=5000'] });
    await s.start();
    const conns = [];
    try {
      for (let i = 0; i < N; i++) conns.push(await h.rawConnect(s.port));
      const admin = await h.rawConnect(s.port);
      conns.push(admin);
      assert.equal((await admin.command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
      const find = async (c, what) => {
        const r = await within(c.command('t', { find: 'c', filter: { _id: 1 } }), 2000, what);
        assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }]);
      };
      const t0 = Date.now();
      let rounds = 0, finds = 0;
      while (Date.now() - t0 < SECS * 1000) {
        rounds++;
        await Promise.all(conns.slice(0, N).map(async (c, i) => {
          for (let j = 0; j < 2 + (i % 7); j++) {
            await find(c, `round ${rounds}, burst find ${j} on connection ${i}`);
            finds++;
          }
        }));
        await h.sleep(30);
        await Promise.all(conns.slice(0, N).map(async (c, i) => {
          await find(c, `round ${rounds}, the find after the pause on connection ${i}`);
          finds++;
        }));
      }
      const held = (await admin.command('admin', { serverStatus: 1 })).network;
      assert.ok(held.heldRequests > 0, `some of the ${finds} finds were held (${held.heldRequests})`);
      assert.equal(held.workers.held.maxWaiters, 1, 'one waiter at most with --maxWorkers 2');
    } finally {
      for (const c of conns) c.close();
      await s.stop();
      s.cleanup();
    }
  });
