'use strict';
/*
 * Issue 10, disk full: a dbpath on a small tmpfs filled by `j: true`
 * inserts, batched and single. When WiredTiger cannot write its journal it
 * panics; the server must then stop (so a supervisor restarts it) instead of
 * answering ping while every data command fails, and after the disk has room
 * again a restart must hold every acknowledged write, with validate clean.
 *
 * Needs root and the right to mount (mount -t tmpfs); CI runs as root.
 * Where a tmpfs cannot be mounted the test says so in its output and skips.
 */
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

async function fill(port, single) {
  const c = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true&serverSelectionTimeoutMS=3000`);
  await c.connect();
  const coll = c.db('d').collection(single ? 'one' : 'many');
  const acked = [];
  const pad = 'x'.repeat(20000);
  let err = null;
  for (let i = 0; i < 200000 && !err; i += single ? 1 : 10) {
    try {
      if (single) {
        await coll.insertOne({ _id: i, pad }, { writeConcern: { j: true } });
        acked.push(i);
      } else {
        await coll.insertMany(Array.from({ length: 10 }, (_, k) => ({ _id: i + k, pad })), { writeConcern: { j: true } });
        for (let k = 0; k < 10; k++) acked.push(i + k);
      }
    } catch (e) { err = e; }
  }
  await c.close(true).catch(() => {});
  return { acked, err };
}

for (const single of [false, true]) {
  h.test(`disk full under j:true ${single ? 'insertOne' : 'insertMany'}: the server stops on the panic; after a restart every acknowledged write is there`,
    { timeout: 180000, skip: isRoot ? false : 'needs root to mount a tmpfs' }, async (t) => {
      const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-full-'));
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=40m', 'tmpfs', mnt], { stdio: 'pipe' });
      } catch (e) {
        /* A container without CAP_SYS_ADMIN: say so loudly; run it where mounting is allowed. */
        console.log(`# SKIPPED: cannot mount a tmpfs here (${String(e.stderr || e.message).trim()})`);
        fs.rmSync(mnt, { recursive: true, force: true });
        t.skip('cannot mount a tmpfs here');
        return;
      }
      const srv = new h.MayflyServer({ dbpath: mnt });
      try {
        await srv.start();
        srv.expectingExit = true; // it is expected to stop on the panic
        const { acked, err } = await fill(srv.port, single);
        assert.ok(err, 'the disk filled up before 200,000 documents');
        assert.ok(acked.length > 0);
        const info = await srv.waitExit(20000);
        assert.ok(info, 'the server stopped after WiredTiger panicked (it does not keep answering ping)');
        assert.match(srv.stderrTail(50), /WiredTiger panic, stopping the server/);

        execFileSync('mount', ['-o', 'remount,size=400m', mnt]);
        srv.exitInfo = null;
        srv.expectingExit = false;
        await srv.start();
        const c = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
        await c.connect();
        try {
          const coll = c.db('d').collection(single ? 'one' : 'many');
          const ids = new Set((await coll.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
          const missing = acked.filter((i) => !ids.has(i));
          console.log(`# ${acked.length} acknowledged before the disk filled; ${missing.length} missing after restart`);
          assert.deepEqual(missing, [], 'every acknowledged j:true write survives the panic');
          assert.equal((await c.db('d').command({ validate: single ? 'one' : 'many' })).valid, true);
        } finally {
          await c.close();
        }
      } finally {
        await srv.stop().catch(() => {});
        try { execFileSync('umount', ['-l', mnt]); } catch (_) { /* already gone */ }
        fs.rmSync(mnt, { recursive: true, force: true });
      }
    });
}
