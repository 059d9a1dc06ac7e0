'use strict';
/*
 * Issue 10's limits found "as a new user would", each answered with
 * MongoDB's code while the connection and server carry on:
 *   - an update padding an array past 1,500,000 elements (34 CannotBackfillArray),
 *   - stored nesting depth: 180 levels kept, 181 refused (15 Overflow),
 *   - a $db holding a NUL byte (73, and the database before the NUL untouched),
 *   - database and collection names that are not UTF-8 (73; listings keep working),
 *   - renameCollection to a system.* name (20 IllegalOperation),
 *   - a TTL date near the minimum Date (expires; no arithmetic overflow).
 */
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const { BSON } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

async function raw(db, cmd, opts) {
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command(db, cmd, undefined, opts);
    assert.ok(r, 'the server replied (did not close the connection)');
    return r;
  } finally { conn.close(); }
}

function code(r) {
  if (r.ok === 0) return r.code;
  if (r.writeErrors && r.writeErrors.length) return r.writeErrors[0].code;
  return undefined;
}

async function stillServing() {
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
}

function nested(levels) {
  // levels counts the stored document itself: {_id, d: {n: {n: ... {leaf}}}}
  let d = { leaf: 1 };
  for (let i = 0; i < levels - 2; i++) d = { n: d };
  return d;
}

h.test('an update that would pad an array past 1,500,000 elements answers 34 at once and changes nothing', async () => {
  const c = srv.freshDb('pad').collection('c');
  await c.insertOne({ _id: 1, arr: [1] });
  const t0 = Date.now();
  await assert.rejects(c.updateOne({ _id: 1 }, { $set: { 'arr.100000000': 1 } }), (e) => e.code === 34 &&
    /can't backfill more than 1500000 elements/.test(e.message));
  console.log(`# refused after ${Date.now() - t0} ms`);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, arr: [1] });
  await c.updateOne({ _id: 1 }, { $set: { 'arr.5': 6 } });
  assert.deepEqual((await c.findOne({ _id: 1 })).arr, [1, null, null, null, null, 6]);
  await stillServing();
});

h.test('stored documents may nest 180 levels; 181 answers 15 Overflow', async () => {
  const c = srv.freshDb('depth').collection('c');
  await c.insertOne({ _id: 180, d: nested(180) });
  const back = await c.findOne({ _id: 180 });
  let depth = 1;
  for (let d = back.d; d && typeof d === 'object'; d = d.n) depth++;
  assert.equal(depth, 180);
  const r = await raw(c.dbName, { insert: 'c', documents: [{ _id: 181, d: nested(181) }] });
  assert.equal(code(r), 15, JSON.stringify(r).slice(0, 300));
  assert.equal(await c.countDocuments(), 1);
  await stillServing();
});

h.test('a $db holding a NUL byte answers 73 and never reaches the database named before the NUL', async () => {
  const secret = srv.client.db('secret_nul').collection('c');
  await secret.insertOne({ _id: 'keep' });
  for (const cmd of [{ find: 'c' }, { insert: 'c', documents: [{ _id: 'evil' }] }, { dropDatabase: 1 }, { drop: 'c' }]) {
    const r = await raw('secret_nul\u0000evil', cmd);
    assert.equal(r.ok, 0, `${JSON.stringify(cmd)}: ${JSON.stringify(r)}`);
    assert.equal(r.code, 73);
  }
  assert.deepEqual(await secret.find().toArray(), [{ _id: 'keep' }]);
  await stillServing();
});

/* An OP_MSG body {create: <2 bytes>, $db: db} whose name bytes are 0xC3 0x28 (not UTF-8). */
function createWithBadName(db) {
  const body = Buffer.from(BSON.serialize({ create: 'ZZ', $db: db }));
  const at = body.indexOf(Buffer.from('ZZ\0'));
  body[at] = 0xc3;
  body[at + 1] = 0x28;
  return body;
}

h.test('database and collection names that are not UTF-8 answer 73; listDatabases and listCollections keep working', async () => {
  const db = srv.freshDb('utf8');
  await db.collection('ok').insertOne({ _id: 1 });
  const r = await raw(db.databaseName, {}, { rawBody: createWithBadName(db.databaseName) });
  assert.equal(r.code, 73, JSON.stringify(r));
  const dbBody = Buffer.from(BSON.serialize({ insert: 'c', documents: [{ _id: 1 }], $db: 'badZZ' }));
  const at = dbBody.indexOf(Buffer.from('badZZ\0'));
  dbBody[at + 3] = 0xc3;
  dbBody[at + 4] = 0x28;
  const r2 = await raw('x', {}, { rawBody: dbBody });
  assert.equal(r2.code, 73, JSON.stringify(r2));
  // Every driver can still list what exists.
  assert.deepEqual((await db.listCollections().toArray()).map((x) => x.name), ['ok']);
  const names = (await srv.client.db('admin').admin().listDatabases()).databases.map((d) => d.name);
  assert.ok(names.includes(db.databaseName));
  await stillServing();
});

h.test('renameCollection to a system.* name answers 20 IllegalOperation and leaves the collection', async () => {
  const db = srv.freshDb('sysren');
  await db.collection('c').insertOne({ _id: 1 });
  for (const to of ['system.js2', 'system.users']) {
    await assert.rejects(srv.client.db('admin').command({ renameCollection: `${db.databaseName}.c`, to: `${db.databaseName}.${to}` }),
      (e) => e.code === 20 && /Invalid system namespace/.test(e.message), to);
  }
  // system.views is a collection clients may not write (userAllowedWriteNS; system_views_compat.test.js).
  await assert.rejects(srv.client.db('admin').command({ renameCollection: `${db.databaseName}.c`, to: `${db.databaseName}.system.views` }),
    (e) => e.code === 20 && /^error with target namespace: cannot write to /.test(e.message), 'system.views');
  assert.deepEqual((await db.listCollections().toArray()).map((x) => x.name), ['c']);
  await stillServing();
});

h.test('a TTL date near the minimum Date expires without arithmetic overflow', { timeout: 30000 }, async () => {
  const c = srv.freshDb('mindate').collection('c');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await c.insertMany([
    { _id: 'min', at: new Date(-8640000000000000) },
    { _id: 'old', at: new Date(-62135596800000) },
    { _id: 'future', at: new Date(Date.now() + 3600e3) },
  ]);
  const deadline = Date.now() + 10000;
  while ((await c.countDocuments({ _id: { $in: ['min', 'old'] } })) > 0 && Date.now() < deadline) await h.sleep(100);
  assert.deepEqual((await c.find().toArray()).map((d) => d._id), ['future']);
  const st = await srv.client.db('admin').command({ serverStatus: 1 });
  assert.ok(st.metrics.ttl.deletedDocuments >= 2);
  assert.ok(Number(st.metrics.ttl.lateness.maxMs) >= 0);
  await stillServing();
});

h.test('$concat and $reduce stop at 16 MB strings (16493) instead of building 128 MB; $concat keeps NUL bytes', { timeout: 60000 }, async () => {
  const c = srv.freshDb('strcap').collection('c');
  await c.insertOne({ _id: 1, s: 'x'.repeat(1 << 20), z: 'z\u0000z' });
  const t0 = Date.now();
  await assert.rejects(c.aggregate([{ $project: { big: { $reduce: {
    input: { $range: [0, 128] }, initialValue: '', in: { $concat: ['$$value', '$s'] } } } } }]).toArray(),
  (e) => e.code === 16493 && /longer than 16MB/.test(e.message));
  console.log(`# refused after ${Date.now() - t0} ms`);
  const ok = await c.aggregate([{ $project: { _id: 0, n: { $strLenBytes: { $concat: ['$s', '$s'] } }, z: { $concat: ['a', '$z', 'b'] } } }]).toArray();
  assert.deepEqual(ok, [{ n: 2 << 20, z: 'az\u0000zb' }]);
  await stillServing();
});

h.test('$regex patterns longer than 32,764 bytes answer 51091; 32,764 is accepted', async () => {
  const c = srv.freshDb('relen').collection('c');
  await c.insertOne({ _id: 1, z: 'c'.repeat(40000) });
  assert.equal(await c.countDocuments({ z: { $regex: 'c'.repeat(32764) } }), 1);
  await assert.rejects(c.countDocuments({ z: { $regex: 'c'.repeat(32765) } }), (e) => e.code === 51091);
  await assert.rejects(c.aggregate([{ $project: { m: { $regexMatch: { input: '$z', regex: 'c'.repeat(32765) } } } }]).toArray(),
    (e) => e.code === 51091);
  await stillServing();
});

h.test('a catastrophic $regex is bounded: it does not match (as mongod), $regexMatch answers 51156, the server stays responsive', { timeout: 120000 }, async () => {
  const db = srv.freshDb('rxbomb');
  await db.collection('c').insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, s: 'a'.repeat(40) + 'b' })));
  await db.collection('c').insertOne({ _id: 'ok', s: 'aaaa' });
  // (a+)+$ on 40 a's and a b backtracks 2^40 ways: unbounded, one document would pin a core for hours.
  const slow = db.collection('c').countDocuments({ s: { $regex: '^(a+)+$' } });
  const other = await srv.newClient();
  assert.equal((await other.db('admin').command({ ping: 1 })).ok, 1, 'another client is answered meanwhile');
  assert.equal(await slow, 1, 'only the short string matches; the budget-exhausted ones count as no match');
  await h.expectCode(db.collection('c').aggregate([
    { $project: { m: { $regexMatch: { input: '$s', regex: '^(a+)+$' } } } }]).toArray(), 51156);
  assert.equal(await db.collection('c').countDocuments({ s: { $regex: '^a+b$' } }), 20, 'ordinary patterns still match');
});

h.test('open cursors are capped per connection (maxOpenCursorsPerConnection) and in all (maxOpenCursors): 146, then freed slots are reused', async () => {
  const db = srv.freshDb('curcap');
  await db.collection('c').insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
  const admin = srv.client.db('admin');
  const one = await srv.newClient({ maxPoolSize: 1 });
  const odb = one.db(db.databaseName);
  await admin.command({ setParameter: 1, maxOpenCursorsPerConnection: 3 });
  try {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(h.cursorId((await odb.command({ find: 'c', batchSize: 1 })).cursor.id));
    await h.expectCode(odb.command({ find: 'c', batchSize: 1 }), 146);
    await h.expectCode(odb.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: 1 } }), 146);
    assert.equal((await odb.command({ find: 'c' })).cursor.id.toString(), '0', 'a query that leaves no cursor open still runs');
    const other = await srv.newClient({ maxPoolSize: 1 });
    const oc = await other.db(db.databaseName).command({ find: 'c', batchSize: 1 });
    assert.notEqual(oc.cursor.id.toString(), '0', 'another connection has its own allowance');
    await odb.command({ killCursors: 'c', cursors: [ids[0]] });
    const again = await odb.command({ find: 'c', batchSize: 1 });
    assert.notEqual(again.cursor.id.toString(), '0', 'a killed cursor frees its slot');
    const more = await odb.command({ getMore: h.cursorId(ids[1]), collection: 'c', batchSize: 1 });
    assert.equal(more.cursor.nextBatch.length, 1, 'open cursors keep working at the cap');
    await admin.command({ setParameter: 1, maxOpenCursors: 1 });
    await h.expectCode(other.db(db.databaseName).command({ find: 'c', batchSize: 1 }), 146);
  } finally {
    await admin.command({ setParameter: 1, maxOpenCursorsPerConnection: 20000 });
    await admin.command({ setParameter: 1, maxOpenCursors: 1000000 });
  }
});

h.test('a pipeline of more than 1,000 stages answers 7749501; 1,000 run', async () => {
  const db = srv.freshDb('pipelen');
  await db.collection('c').insertOne({ _id: 1 });
  const stages = (n) => Array.from({ length: n }, () => ({ $match: { _id: 1 } }));
  assert.equal((await db.collection('c').aggregate(stages(1000)).toArray()).length, 1);
  await h.expectCode(db.collection('c').aggregate(stages(1001)).toArray(), 7749501);
  await h.expectCode(db.collection('c').aggregate([{ $facet: { f: stages(1001) } }]).toArray(), 7749501);
});

h.test('$group $push and $addToSet stop at 100 MB per group (146 ExceededMemoryLimit); smaller groups work', { timeout: 120000 }, async () => {
  const c = srv.freshDb('pushcap').collection('c');
  const mb = 'p'.repeat(1 << 20);
  for (let i = 0; i < 110; i += 10) {
    await c.insertMany(Array.from({ length: 10 }, (_, k) => ({ _id: i + k, s: `${i + k}${mb}` })));
  }
  for (const acc of ['$push', '$addToSet']) {
    await assert.rejects(c.aggregate([{ $group: { _id: null, all: { [acc]: '$s' } } }]).toArray(),
      (e) => e.code === 146 && /used too much memory and cannot spill to disk/.test(e.message), acc);
  }
  const small = await c.aggregate([{ $match: { _id: { $lt: 5 } } }, { $group: { _id: null, n: { $push: '$_id' } } }]).toArray();
  assert.deepEqual(small[0].n.sort(), [0, 1, 2, 3, 4]);
  await stillServing();
});

h.test('--maxConns: past the limit a new connection is closed at once; open ones carry on and a freed slot is reused', { timeout: 60000 }, async () => {
  const s = new h.MayflyServer({ args: ['--maxConns', '3'] });
  await s.start();
  const conns = [];
  try {
    await h.sleep(200); // the start-up probe's connection has closed
    for (let i = 0; i < 3; i++) {
      const c = await h.rawConnect(s.port);
      conns.push(c);
      assert.equal((await c.command('admin', { ping: 1 })).ok, 1);
    }
    const extra = await h.rawConnect(s.port);
    assert.equal(await extra.command('admin', { ping: 1 }), null, 'the fourth connection is closed without an answer');
    extra.close();
    for (const c of conns) assert.equal((await c.command('admin', { ping: 1 })).ok, 1, 'the open ones still answer');
    conns.shift().close();
    await h.sleep(200);
    const again = await h.rawConnect(s.port);
    conns.push(again);
    assert.equal((await again.command('admin', { ping: 1 })).ok, 1, 'a freed slot takes a new connection');
    assert.match(s.stderrTail(100), /connection refused because too many open connections: 3/);
    // serverStatus counts it, as mongod's connections.rejected.
    const conn = (await again.command('admin', { serverStatus: 1 })).connections;
    assert.equal(conn.rejected, 1, JSON.stringify(conn));
    assert.equal(conn.threaded, conn.current);
  } finally {
    for (const c of conns) c.close();
    await s.stop();
    s.cleanup && s.cleanup();
  }
});

h.test('--maxConns is capped at 80% of the open-files limit, as mongod: a flood of connections is refused one by one and the storage engine keeps its descriptors', { timeout: 120000 }, async () => {
  // 500 descriptors: at most 400 connections, the rest for the HTTP port and WiredTiger's files and journal.
  const s = new h.MayflyServer({ wrapper: ['prlimit', '--nofile=500:500'], args: ['--maxConns', '5000'] });
  await s.start();
  const conns = [];
  try {
    await h.sleep(200);
    const first = await h.rawConnect(s.port);
    conns.push(first);
    const st = (await first.command('admin', { serverStatus: 1 })).connections;
    assert.equal(st.current + st.available, 400, JSON.stringify(st));
    assert.match(s.stderrTail(200), /--maxConns too high, can only handle 400/);
    // Try to hold 450 connections open: the ones past 400 are closed at once.
    let refused = 0;
    for (let i = 0; i < 449; i++) {
      const c = await h.rawConnect(s.port).catch(() => null);
      if (c) conns.push(c);
      else refused++;
    }
    const answers = await Promise.all(conns.map((c) => c.command('admin', { ping: 1 })));
    const served = answers.filter((r) => r && r.ok === 1).length;
    assert.equal(served, 400, `${served} connections answered, ${refused} refused at connect`);
    assert.match(s.stderrTail(400), /connection refused because too many open connections: 400/);
    // With every slot taken, the storage engine still opens new files: a new collection, an index, a write.
    const live = conns.filter((c, i) => answers[i] && answers[i].ok === 1);
    const c0 = live[0];
    for (let k = 0; k < 3; k++) {
      const r = await c0.command('flood', { insert: `c${k}`, documents: [{ _id: k, at: new Date() }] });
      assert.equal(r.ok, 1, JSON.stringify(r));
      assert.equal((await c0.command('flood', { createIndexes: `c${k}`, indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 3600 }] })).ok, 1);
    }
    const found = await c0.command('flood', { find: 'c2', filter: { _id: 2 } });
    assert.equal(found.cursor.firstBatch.length, 1);
    assert.equal((await c0.command('admin', { serverStatus: 1 })).connections.available, 0);
    for (const c of conns) c.close();
    conns.length = 0;
    await h.sleep(300);
    const again = await h.rawConnect(s.port);
    conns.push(again);
    assert.equal((await again.command('flood', { count: 'c0' })).n, 1, 'the server carries on after the flood');
    assert.equal(s.unexpectedExits.length, 0);
  } finally {
    for (const c of conns) c.close();
    await s.stop();
    s.cleanup();
  }
});

h.test('open files: the soft limit is raised to the hard one; under a low hard limit a connection flood stops short of the storage engine\'s descriptors, collections past the limit are refused with TooManyFilesOpen (264), and the server carries on', { timeout: 240000 }, async (t) => {
  // A soft limit of 1,024 under the hard one this test runs with (at most 70,000; only root may raise a
  // hard limit): raised at start, 80% of it for connections, mongod's warning only when under 64,000.
  const hard = Math.min(70000, Number(execFileSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim()) || 70000);
  if (hard <= 1024) { t.skip(`the hard limit here is ${hard}: nothing to raise`); return; }
  const raised = new h.MayflyServer({ wrapper: ['prlimit', `--nofile=1024:${hard}`] });
  await raised.start();
  try {
    assert.match(raised.stderrTail(200), new RegExp(`raised the soft limit on open files from 1024 to ${hard}`));
    const conn = await h.rawConnect(raised.port);
    const st = (await conn.command('admin', { serverStatus: 1 })).connections;
    assert.equal(st.current + st.available, Math.floor(hard * 0.8), JSON.stringify(st));
    const w = await conn.command('admin', { getLog: 'startupWarnings' });
    assert.equal(w.log.some((l) => new RegExp(`Soft rlimits for open file descriptors too low \\(currentValue: ${hard},`).test(l)),
      hard < 64000, JSON.stringify(w.log));
    conn.close();
  } finally {
    await raised.stop();
    raised.cleanup();
  }

  // Hard and soft 1,024: mongod's warning; every collection with a TTL index holds three files open.
  const s = new h.MayflyServer({ wrapper: ['prlimit', '--nofile=1024:1024'] });
  await s.start();
  const conn = await h.rawConnect(s.port);
  try {
    const w = await conn.command('admin', { getLog: 'startupWarnings' });
    assert.ok(w.log.some((l) => /Soft rlimits for open file descriptors too low.*currentValue: 1024.*recommendedMinimum: 64000/.test(l)),
      JSON.stringify(w.log));
    const makeColl = async (k) => {
      const r = await conn.command('fds', { insert: `c${k}`, documents: [{ _id: k, at: new Date() }] });
      assert.ok(r, `the server answered the insert into c${k}`);
      if (r.ok !== 1) return r;
      const ix = await conn.command('fds', { createIndexes: `c${k}`, indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 3600 }] });
      assert.ok(ix, `the server answered createIndexes on c${k}`);
      return ix.ok === 1 ? null : ix;
    };
    let made = 0;
    // 150 collections (450 files), then a flood of connections: under --maxConns (819) they would take every
    // descriptor left, and WiredTiger's journal would have none; the last 64 are kept.
    for (; made < 150; made++) assert.equal(await makeColl(made), null, `c${made}`);
    const flood = [];
    for (let i = 0; i < 700; i++) {
      const c = await h.rawConnect(s.port).catch(() => null);
      if (c) flood.push(c);
    }
    const pings = await Promise.all(flood.map((c) => c.command('admin', { ping: 1 }).catch(() => null)));
    const held = pings.filter((r) => r && r.ok === 1).length;
    assert.ok(held < 700 && held > 200, `${held} of 700 flood connections served`);
    assert.match(s.stderrTail(400), /connection refused because too few file descriptors are left/);
    assert.equal(await makeColl(made), null, 'a collection is still created with the flood held');
    made++;
    assert.equal((await conn.command('fds', { count: 'c0' })).n, 1);
    for (const c of flood) c.close();
    await h.sleep(500);
    let refusal = null;
    for (let k = made; k < 500 && !refusal; k++) {
      refusal = await makeColl(k);
      if (!refusal) made++;
    }
    assert.ok(refusal, 'a create was refused before 500 collections');
    assert.equal(refusal.code, 264, JSON.stringify(refusal));
    assert.equal(refusal.codeName, 'TooManyFilesOpen');
    assert.match(refusal.errmsg, /Too many open files/);
    // It names what it could not create as the user knows it, not the storage engine's table.
    assert.match(refusal.errmsg, new RegExp(`too few to create a collection or index \\((collection fds\\.c${made}|index '(_id_|at_1)' of fds\\.c${made})\\)`), refusal.errmsg);
    assert.doesNotMatch(refusal.errmsg, /table:/);
    assert.ok(made > 250, `${made} collections were made first`);
    // The server carries on: what exists is readable and writable, a refused create left nothing behind.
    assert.equal((await conn.command('fds', { count: 'c0' })).n, 1);
    assert.equal((await conn.command('fds', { insert: 'c1', documents: [{ _id: 'more', at: new Date() }] })).n, 1);
    // A refused create left nothing behind: a collection entry at most (its TTL index refused), and no orphan table file.
    const names = (await conn.command('fds', { listCollections: 1, nameOnly: true })).cursor.firstBatch.map((c) => c.name);
    assert.ok(names.length === made || names.length === made + 1, `${names.length} collections listed, ${made} made`);
    await conn.command('admin', { fsync: 1 });
    const collFiles = fs.readdirSync(s.dbpath).filter((f) => /^coll-.*\.wt$/.test(f)).length;
    assert.equal(collFiles, names.length, `${collFiles} collection files for ${names.length} collections`);
    // Dropping collections closes their files, and creating works again.
    for (let k = 0; k < 10; k++) assert.equal((await conn.command('fds', { drop: `c${k}` })).ok, 1);
    const again = await conn.command('fds', { insert: 'fresh', documents: [{ _id: 1, at: new Date() }] });
    assert.equal(again.ok, 1, JSON.stringify(again));
    assert.equal(s.unexpectedExits.length, 0);
    assert.doesNotMatch(s.stderrTail(400), /panic/);
  } finally {
    conn.close();
    await s.stop();
    s.cleanup();
  }
});

h.test('open files: a restart with more collections and indexes than files it may open serves them in turn (264 while idle ones close), expires on time and never stops; a crash recovery that cannot open them all says so and loses nothing', { timeout: 300000 }, async () => {
  // 300 collections with a TTL index are 900 files; the restarts below may open 400. Half the documents are
  // due, the TTL monitor kept off until then, so that it must reach every index under the limit.
  const N = 300;
  const dbpath = fs.mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'mayfly-fds-'));
  const due = new Date(Date.now() - 7200 * 1000);
  // A refusal names what it could not open as the user knows it, never the storage engine's table.
  const namesTable = (msg, k) => {
    assert.match(msg, new RegExp(`too few to open (collection fds\\.c${k}|index '(_id_|at_1)' of fds\\.c${k});`), msg);
    assert.doesNotMatch(msg, /table:/, msg);
  };
  const findAll = async (conn, k, filter) => {
    // TooManyFilesOpen (264) while idle tables are being closed, never another error.
    for (let a = 0; a < 300; a++) {
      const r = await conn.command('fds', { find: `c${k}`, filter });
      assert.ok(r, `the server answered the find on c${k}`);
      if (r.ok === 1) return r.cursor.firstBatch;
      assert.equal(r.code, 264, JSON.stringify(r));
      assert.equal(r.codeName, 'TooManyFilesOpen');
      namesTable(r.errmsg, k);
      await h.sleep(100);
    }
    assert.fail(`c${k} was not readable within 30 s`);
  };
  // A connection may be refused while the TTL monitor's first reads hold the descriptors; it is served soon.
  const connectUnderLimit = async (server) => {
    for (let i = 0; i < 150; i++) {
      const c = await h.rawConnect(server.port).catch(() => null);
      const p = c && await c.command('admin', { ping: 1 }).catch(() => null);
      if (p && p.ok === 1) return c;
      if (c) c.close();
      await h.sleep(200);
    }
    assert.fail('a connection is served within 30 s');
  };
  let s = new h.MayflyServer({ dbpath });
  try {
    await s.start();
    let conn = await h.rawConnect(s.port);
    assert.equal((await conn.command('admin', { setParameter: 1, ttlMonitorEnabled: false })).ok, 1);
    for (let k = 0; k < N; k++) {
      const r = await conn.command('fds', { insert: `c${k}`, documents: [{ _id: k, at: k % 2 ? due : new Date() }], writeConcern: { j: true } });
      assert.equal(r.n, 1, JSON.stringify(r));
      const ix = await conn.command('fds', { createIndexes: `c${k}`, indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 3600 }] });
      assert.equal(ix.ok, 1, JSON.stringify(ix));
    }
    conn.close();

    // kill -9 before the first checkpoint (60 s): recovery must open all 900 files at once, which 400 do not
    // allow. The start fails with that said, and a start with the machine's limit recovers every write.
    await s.kill9();
    s = new h.MayflyServer({ dbpath, wrapper: ['prlimit', '--nofile=400:400'] });
    await assert.rejects(s.start(), /exited during start-up \(code=1/);
    assert.match(s.stderrTail(60), /too many open files \(the limit is 400\): recovering from the journal opens every collection and index changed since the last checkpoint at once; nothing is lost/);
    assert.doesNotMatch(s.stderrTail(60), /WiredTiger panic, stopping/);
    s = new h.MayflyServer({ dbpath, args: ['--setParameter', 'ttlMonitorEnabled=false'] });
    await s.start();
    conn = await h.rawConnect(s.port);
    for (let k = 0; k < N; k++) assert.equal((await findAll(conn, k, {})).length, 1, `c${k}'s acknowledged write survived kill -9`);
    conn.close();
    await s.stop();

    s = new h.MayflyServer({ dbpath, wrapper: ['prlimit', '--nofile=400:400'] });
    await s.start();
    conn = await connectUnderLimit(s);
    // Every collection is readable in turn, and the monitor reaches every index: the due half is deleted.
    const deadline = Date.now() + 120000;
    for (let k = 0; k < N; k++) {
      let n = (await findAll(conn, k, {})).length;
      while (k % 2 && n !== 0 && Date.now() < deadline) { await h.sleep(200); n = (await findAll(conn, k, {})).length; }
      assert.equal(n, k % 2 ? 0 : 1, `c${k} holds ${n} documents`);
    }
    assert.match(s.stderrTail(2000), /Too many open files: \d+ of the 400 file descriptors/, 'the pressure is logged');
    // Writes carry on (retried while an open is refused), acknowledged by the journal, into every collection.
    for (let k = 0; k < N; k++) {
      for (let a = 0; ; a++) {
        const w = await conn.command('fds', { insert: `c${k}`, documents: [{ _id: `w${k}`, at: new Date() }], writeConcern: { j: true } });
        assert.ok(w, `the server answered the insert into c${k}`);
        if (w.ok === 1 && w.n === 1) break;
        assert.equal(code(w), 264, JSON.stringify(w)); // a write error, as mongod reports one
        namesTable(w.writeErrors ? w.writeErrors[0].errmsg : w.errmsg, k);
        assert.ok(a < 300, `c${k} was not writable within 30 s`);
        await h.sleep(100);
      }
    }
    assert.equal(s.unexpectedExits.length, 0);
    assert.doesNotMatch(s.stderrTail(2000), /panic/);
    conn.close();
    // ... and they survive kill -9.
    await s.kill9();
    s = new h.MayflyServer({ dbpath });
    await s.start();
    conn = await h.rawConnect(s.port);
    for (let k = 0; k < N; k++) assert.equal((await findAll(conn, k, { _id: `w${k}` })).length, 1, `c${k}'s write after the restart survived kill -9`);

    // With ttlMonitorPrecise off and an hour between periodic passes, a pass cut short by 264 still goes on
    // shortly where it stopped: a due document in every collection, then a start under the limit.
    assert.equal((await conn.command('admin', { setParameter: 1, ttlMonitorEnabled: false })).ok, 1);
    for (let k = 0; k < N; k++) {
      const r = await conn.command('fds', { insert: `c${k}`, documents: [{ _id: `d${k}`, at: due }], writeConcern: { j: true } });
      assert.equal(r.n, 1, JSON.stringify(r));
    }
    conn.close();
    await s.stop();
    s = new h.MayflyServer({ dbpath, wrapper: ['prlimit', '--nofile=400:400'],
      args: ['--setParameter', 'ttlMonitorPrecise=false', '--setParameter', 'ttlMonitorSleepSecs=3600'] });
    await s.start();
    conn = await connectUnderLimit(s);
    const passDeadline = Date.now() + 90000;
    for (let k = 0; k < N; k++) {
      let n = (await findAll(conn, k, { _id: `d${k}` })).length;
      while (n !== 0 && Date.now() < passDeadline) { await h.sleep(200); n = (await findAll(conn, k, { _id: `d${k}` })).length; }
      assert.equal(n, 0, `c${k}'s due document deleted by the first pass and its continuations, not an hour later`);
    }
    assert.match(s.stderrTail(2000), /Too many open files: \d+ of the 400 file descriptors/, 'the pass met the limit');
    conn.close();
  } finally {
    await s.stop().catch(() => {});
    fs.rmSync(dbpath, { recursive: true, force: true });
  }
});

h.test('startup warnings: no access control is always warned; listening beyond loopback is warned too; getLog shows them', { timeout: 60000 }, async () => {
  // The open-files warning depends on the machine's limits (see the TooManyFilesOpen test).
  const machineFree = (log) => log.filter((l) => !/Soft rlimits for open file descriptors too low/.test(l));
  const local = await srv.client.db('admin').command({ getLog: 'startupWarnings' });
  assert.equal(machineFree(local.log).length, 1, JSON.stringify(local.log));
  assert.match(local.log[0], /Access control is not enabled for the database/);
  assert.match(srv.server.stderrTail(400), /Access control is not enabled/);

  const s = new h.MayflyServer({ args: ['--bind_ip', '0.0.0.0'] });
  await s.start();
  try {
    assert.match(s.stderrTail(200), /This server is bound to 0\.0\.0\.0 and can be reached from other hosts/);
    const conn = await h.rawConnect(s.port);
    const r = await conn.command('admin', { getLog: 'startupWarnings' });
    conn.close();
    const lines = machineFree(r.log);
    assert.equal(lines.length, 2);
    assert.match(lines[1], /bound to 0\.0\.0\.0/);
  } finally {
    await s.stop();
    s.cleanup();
  }
});

h.test('$addToSet over 200,000 distinct values is a hash set, not a scan per value (was 2*10^10 comparisons)', { timeout: 120000 }, async () => {
  const c = srv.freshDb('addset').collection('c');
  for (let i = 0; i < 200000; i += 10000) {
    await c.insertMany(Array.from({ length: 10000 }, (_, k) => ({ v: i + k, dup: (i + k) % 7, num: (i + k) % 3 === 0 ? 1.0 : 1 })));
  }
  const t0 = Date.now();
  const [r] = await c.aggregate([{ $group: { _id: null, s: { $addToSet: '$v' }, d: { $addToSet: '$dup' }, n: { $addToSet: '$num' } } }]).toArray();
  console.log(`# $addToSet of 200,000 distinct values: ${Date.now() - t0} ms`);
  assert.equal(r.s.length, 200000);
  assert.deepEqual(r.d.sort(), [0, 1, 2, 3, 4, 5, 6]);
  assert.equal(r.n.length, 1, '1.0 and 1 are the same value, as in MongoDB');
  await stillServing();
});

const MB = 1024 * 1024;

// $lookup's bounds (helper-69, session 48): a join that grows past
// internalLookupStageIntermediateDocumentMaxSizeBytes answers 4568, nesting
// past 20 sub-pipelines answers 232, and a join whose work multiplies with
// nesting ends on maxTimeMS and killOp, the server serving on.
function nestedLookup(depth, from, inner) {
  let st = inner;
  for (let i = 0; i < depth; i++) st = [{ $lookup: { from, pipeline: st, as: 'm' } }];
  return st;
}

h.test('a $lookup whose joined documents total past the limit answers 4568 with mongod\'s message', { timeout: 60000 }, async () => {
  const db = srv.freshDb('lookupcap');
  const admin = srv.client.db('admin');
  await db.collection('big').insertMany(Array.from({ length: 18 }, (_, i) => ({ _id: i, b: 'x'.repeat(MB) })));
  await db.collection('one').insertOne({ _id: 1 });
  const prev = await admin.command({ setParameter: 1, internalLookupStageIntermediateDocumentMaxSizeBytes: 16 * 1024 * 1024 });
  assert.equal(prev.was, 104857600, 'the default is mongod\'s 100 MB');
  try {
    await h.expectCode(admin.command({ setParameter: 1, internalLookupStageIntermediateDocumentMaxSizeBytes: 1000 }), 2);
    const join = { $lookup: { from: 'big', pipeline: [], as: 'all' } };
    await assert.rejects(db.collection('one').aggregate([join]).toArray(), (e) => e.code === 4568 &&
      e.message === "PlanExecutor error during aggregation :: caused by :: Total size of documents in big matching pipeline's $lookup stage exceeds 16777216 bytes");
    // Under the limit the join is whole: 15 documents of 1 MiB, projected down after the stage.
    const r = await db.collection('one').aggregate([{ $lookup: { from: 'big', pipeline: [{ $match: { _id: { $lt: 15 } } }], as: 'all' } },
      { $project: { n: { $size: '$all' } } }]).toArray();
    assert.deepEqual(r, [{ _id: 1, n: 15 }]);
    // Nested joins multiply their size; the outer $lookup's limit stops them before memory does.
    const small = db.collection('small');
    await small.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, pad: 'p'.repeat(100) })));
    const t0 = Date.now();
    await assert.rejects(small.aggregate(nestedLookup(6, 'small', [])).toArray(), (e) => e.code === 4568 &&
      /^PlanExecutor error during aggregation :: caused by :: Total size of documents in small matching pipeline's \$lookup stage exceeds 16777216 bytes$/.test(e.message));
    console.log(`# six nested $lookups of 20 documents refused after ${Date.now() - t0} ms`);
  } finally {
    await admin.command({ setParameter: 1, internalLookupStageIntermediateDocumentMaxSizeBytes: 104857600 });
  }
  await stillServing();
});

h.test('$lookup and $unionWith sub-pipelines nest 20 deep; the 21st answers 232', async () => {
  const db = srv.freshDb('lookupdepth');
  await db.collection('c').insertOne({ _id: 1 });
  const ok = await db.collection('c').aggregate(nestedLookup(20, 'c', [{ $project: { _id: 1 } }])).toArray();
  assert.equal(ok.length, 1);
  const msg = 'Maximum number of nested sub-pipelines exceeded. Limit is 20';
  await assert.rejects(db.collection('c').aggregate(nestedLookup(21, 'c', [])).toArray(), (e) => e.code === 232 &&
    e.codeName === 'MaxSubPipelineDepthExceeded' && e.message === msg);
  let u = [];
  for (let i = 0; i < 21; i++) u = [{ $unionWith: { coll: 'c', pipeline: u } }];
  await assert.rejects(db.collection('c').aggregate(u).toArray(), (e) => e.code === 232 && e.message === msg);
  await stillServing();
});

h.test('nested $lookups whose work multiplies end on maxTimeMS (50) and on killOp (11601)', { timeout: 60000 }, async () => {
  const db = srv.freshDb('lookupwork');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 30 }, (_, i) => ({ _id: i })));
  // 30^8 scans, each finding nothing at the bottom: no size limit applies, only interruption.
  const pipeline = nestedLookup(8, 'c', [{ $match: { _id: -1 } }]);
  let t0 = Date.now();
  await assert.rejects(c.aggregate(pipeline, { maxTimeMS: 300 }).toArray(), (e) => e.code === 50);
  console.log(`# maxTimeMS 300 ended it after ${Date.now() - t0} ms`);
  const running = c.aggregate(pipeline, { comment: 'lookupwork-kill' }).toArray().then(() => null, (e) => e);
  const admin = srv.client.db('admin');
  let opid;
  for (let i = 0; i < 200 && opid === undefined; i++) {
    const ops = await admin.aggregate([{ $currentOp: {} }, { $match: { 'command.comment': 'lookupwork-kill' } }]).toArray();
    if (ops.length) opid = ops[0].opid;
    else await new Promise((r) => setTimeout(r, 25));
  }
  assert.notEqual(opid, undefined, 'the aggregate shows in $currentOp');
  t0 = Date.now();
  await admin.command({ killOp: 1, op: opid });
  const err = await running;
  assert.ok(err && err.code === 11601, `killOp ended it: ${err && err.message}`);
  console.log(`# killOp ended it after ${Date.now() - t0} ms`);
  await stillServing();
});

h.test('$lookup\'s as, localField and foreignField are field paths: 40352, 40353, 15998, 16410 as mongod\'s FieldPath', async () => {
  const db = srv.freshDb('lookuppaths');
  await db.collection('c').insertOne({ _id: 1, a: 1 });
  const run = (spec) => db.collection('c').aggregate([{ $lookup: { from: 'c', ...spec } }]).toArray();
  const eq = { localField: 'a', foreignField: 'a' };
  await h.expectCode(run({ ...eq, as: '' }), 40352, /^FieldPath cannot be constructed with empty string$/);
  await h.expectCode(run({ ...eq, as: 'x.' }), 40353);
  await h.expectCode(run({ ...eq, as: 'x..y' }), 15998);
  await h.expectCode(run({ ...eq, as: '$x' }), 16410, /^FieldPath field names may not start with '\$'/);
  await h.expectCode(run({ localField: '$a', foreignField: 'a', as: 'x' }), 16410);
  await h.expectCode(run({ localField: 'a', foreignField: 'a..b', as: 'x' }), 15998);
  await h.expectCode(run({ pipeline: [], as: '' }), 40352);
  // Dotted paths are fine.
  const [d] = await run({ localField: 'a', foreignField: 'a', as: 'x.y' });
  assert.deepEqual(d.x.y.map((e) => e._id), [1]);
  await stillServing();
});

h.test('$facet: output names are field names (15998, 16410, 16412) and a $facet inside a $facet is 40600', async () => {
  const db = srv.freshDb('facetnames');
  await db.collection('c').insertOne({ _id: 1 });
  const run = (spec) => db.collection('c').aggregate([{ $facet: spec }]).toArray();
  await h.expectCode(run({ '': [] }), 15998, /^FieldPath field names may not be empty strings\.$/);
  await h.expectCode(run({ $x: [] }), 16410);
  await h.expectCode(run({ 'a.b': [] }), 16412, /^FieldPath field names may not contain '\.'/);
  await h.expectCode(run({ a: [{ $match: {} }, { $facet: { b: [] } }] }), 40600,
    /^\$facet is not allowed to be used within a \$facet stage$/);
  // Through a $lookup inside the facet a $facet is allowed, as in mongod.
  const [r] = await run({ a: [{ $lookup: { from: 'c', pipeline: [{ $facet: { b: [{ $count: 'n' }] } }], as: 'l' } }] });
  assert.deepEqual(r.a[0].l, [{ b: [{ n: 1 }] }]);
  await stillServing();
});
