'use strict';
/*
 * Logical sessions (issue 12), MongoDB 8.0 semantics through the Node driver:
 *   - startSession answers {id: {id: UUID}, timeoutMinutes: 30} and the
 *     session is in the server's cache at once;
 *   - a driver session (explicit client.startSession(), or the implicit one
 *     of every command) shows in {$listLocalSessions: {}} on {aggregate: 1}
 *     with mongod's shape {_id: {id, uid}, lastUse}; lastUse moves on use;
 *   - endSessions (also what client.close() sends), killSessions,
 *     killAllSessions, killAllSessionsByPattern remove sessions;
 *   - the stage's codes: 40602 not first, 73 on a collection, 14/40415/40414/
 *     12 for bad options, $listSessions only on config.system.sessions;
 *   - a malformed lsid on any command (14, 40414, 40415, 207);
 *   - under --auth (a second, short-lived server): the session carries its
 *     user ("user@db") and uid = SHA-256 of it; a user sees only their own
 *     sessions, allUsers / another user needs the cluster privilege (13);
 *   - maxSessions: past it a new session is 261 TooManyLogicalSessions;
 *   - a cursor belongs to the session that opened it (getMore: 50736-50738)
 *     and dies with it (killSessions, killAllSessions).
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { MongoClient, Binary, UUID } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');

function hexOf(id) {
  if (id instanceof UUID) return id.toHexString(false);
  if (id && id.buffer) return Buffer.from(id.buffer).toString('hex');
  return Buffer.from(id).toString('hex');
}

async function listLocal(client, spec = {}) {
  return client.db('admin').aggregate([{ $listLocalSessions: spec }]).toArray();
}

function idsOf(rows) { return rows.map((r) => hexOf(r._id.id)); }

h.test('startSession returns an id and timeoutMinutes, and the session is cached', async () => {
  const admin = srv.client.db('admin');
  const r = await admin.command({ startSession: 1 });
  assert.equal(r.ok, 1);
  assert.equal(r.timeoutMinutes, 30);
  assert.equal(r.id.id.sub_type, 4, 'a UUID');
  const rows = await listLocal(srv.client);
  const mine = rows.find((x) => hexOf(x._id.id) === hexOf(r.id.id));
  assert.ok(mine, `the new session is listed: ${JSON.stringify(rows)}`);
  assert.deepEqual(Object.keys(mine).sort(), ['_id', 'lastUse']);
  assert.deepEqual(Object.keys(mine._id), ['id', 'uid']);
  assert.equal(hexOf(mine._id.uid), sha256(''), 'no access control: the uid is SHA-256 of ""');
  assert.ok(mine.lastUse instanceof Date);
  assert.ok(Math.abs(mine.lastUse.getTime() - Date.now()) < 60000);
  await admin.command({ endSessions: [{ id: r.id.id }] });
  assert.ok(!idsOf(await listLocal(srv.client)).includes(hexOf(r.id.id)), 'endSessions removed it');
});

h.test('a driver session shows in $listLocalSessions; client.close() ends it', async () => {
  const c = new MongoClient(srv.uri);
  await c.connect();
  const s = c.startSession();
  const db = c.db(srv.freshDb('drv').databaseName);
  await db.collection('x').insertOne({ a: 1 }, { session: s });
  const id = hexOf(s.id.id);
  const rows = await listLocal(srv.client);
  const row = rows.find((x) => hexOf(x._id.id) === id);
  assert.ok(row, 'the explicit session is listed');
  const before = row.lastUse.getTime();
  await new Promise((res) => setTimeout(res, 20));
  await db.collection('x').findOne({}, { session: s });
  const again = (await listLocal(srv.client)).find((x) => hexOf(x._id.id) === id);
  assert.ok(again.lastUse.getTime() > before, 'lastUse moves when the session is used');
  await s.endSession(); // back to the driver's pool
  await c.close(); // sends endSessions for the pooled sessions, without waiting for the reply
  // close() does not wait for endSessions' answer: give the server a moment to run it.
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    gone = !idsOf(await listLocal(srv.client)).includes(id);
    if (!gone) await new Promise((res) => setTimeout(res, 20));
  }
  assert.ok(gone, 'endSessions from close() removed it');
});

h.test('killSessions, killAllSessions and killAllSessionsByPattern remove sessions', async () => {
  const admin = srv.client.db('admin');
  const a = (await admin.command({ startSession: 1 })).id.id;
  const b = (await admin.command({ startSession: 1 })).id.id;
  await admin.command({ killSessions: [{ id: a }] });
  let ids = idsOf(await listLocal(srv.client));
  assert.ok(!ids.includes(hexOf(a)) && ids.includes(hexOf(b)), 'killSessions removed only a');
  await admin.command({ refreshSessions: [{ id: a }] });
  assert.ok(idsOf(await listLocal(srv.client)).includes(hexOf(a)), 'refreshSessions records it');
  await admin.command({ killAllSessionsByPattern: [{ lsid: { id: a } }] });
  ids = idsOf(await listLocal(srv.client));
  assert.ok(!ids.includes(hexOf(a)) && ids.includes(hexOf(b)));
  await admin.command({ killAllSessions: [] });
  ids = idsOf(await admin.aggregate([{ $listLocalSessions: { allUsers: true } }]).toArray());
  assert.ok(!ids.includes(hexOf(b)), 'killAllSessions: [] removed every session');
  // mayfly's own connection's next command brings its implicit session back.
  await admin.command({ ping: 1 });
  assert.ok((await listLocal(srv.client)).length >= 1);
});

h.test('$listLocalSessions filters: allUsers, users, and later stages', async () => {
  const admin = srv.client.db('admin');
  const s = (await admin.command({ startSession: 1 })).id.id;
  const all = await listLocal(srv.client, { allUsers: true });
  assert.ok(idsOf(all).includes(hexOf(s)));
  const none = await listLocal(srv.client, { users: [{ user: 'nobody', db: 'admin' }] });
  assert.deepEqual(none, [], 'no session belongs to nobody@admin');
  const anon = await listLocal(srv.client, { users: [{ user: '', db: '' }] });
  assert.ok(idsOf(anon).includes(hexOf(s)), '{user: "", db: ""} is the unauthenticated owner');
  const counted = await admin.aggregate([
    { $listLocalSessions: {} }, { $match: { '_id.id': s } }, { $count: 'n' }]).toArray();
  assert.deepEqual(counted, [{ n: 1 }]);
  // Any database, with {aggregate: 1}, as mongod.
  const other = await srv.freshDb('anydb').aggregate([{ $listLocalSessions: {} }]).toArray();
  assert.ok(idsOf(other).includes(hexOf(s)));
});

h.test('$listLocalSessions and $listSessions errors', async () => {
  const admin = srv.client.db('admin');
  const db = srv.freshDb('lserr');
  await db.collection('c').insertOne({});
  const agg = (d, pipeline, coll = 1) => d.command({ aggregate: coll, pipeline, cursor: {} });
  await h.expectCode(agg(admin, [{ $match: {} }, { $listLocalSessions: {} }]), 40602,
    /\$listLocalSessions is only valid as the first stage in a pipeline/);
  await h.expectCode(agg(db, [{ $listLocalSessions: {} }], 'c'), 73,
    /must be run against the database with \{aggregate: 1\}, not a collection/);
  await h.expectCode(agg(admin, [{ $listLocalSessions: 1 }]), 14,
    /\$listLocalSessions options must be specified in an object, but found: int/);
  await h.expectCode(agg(admin, [{ $listLocalSessions: { foo: 1 } }]), 40415,
    /BSON field '\$listLocalSessions.foo' is an unknown field/);
  await h.expectCode(agg(admin, [{ $listLocalSessions: { allUsers: 1 } }]), 14,
    /'\$listLocalSessions.allUsers' is the wrong type 'int', expected type 'bool'/);
  await h.expectCode(agg(admin, [{ $listLocalSessions: { users: {} } }]), 14, /expected type 'array'/);
  await h.expectCode(agg(admin, [{ $listLocalSessions: { users: [{ user: 'a' }] } }]), 40414,
    /'\$listLocalSessions.users.db' is missing but a required field/);
  await h.expectCode(agg(admin, [{ $listLocalSessions: { users: [{ user: 'a', db: 'b', x: 1 }] } }]), 40415);
  await h.expectCode(agg(admin, [{ $listLocalSessions: { allUsers: true, users: [{ user: 'a', db: 'b' }] } }]), 12,
    /may not specify \{allUsers:true\} and \{users:\[\.\.\.\]\} at the same time/);
  await h.expectCode(agg(admin, [{ $listSessions: {} }]), 73,
    /\$listSessions must be run against the 'system.sessions' collection in the 'config' database/);
  await h.expectCode(agg(admin, [{ $documents: [{}] }, { $facet: { a: [{ $listLocalSessions: {} }] } }]), 40600,
    /^\$listLocalSessions is not allowed to be used within a \$facet stage$/);
  await h.expectCode(agg(db, [{ $unionWith: { coll: 'c', pipeline: [{ $listLocalSessions: {} }] } }], 'c'), 31441,
    /^\$listLocalSessions is not allowed within a \$unionWith's sub-pipeline$/);
  // A $lookup sub-pipeline may list sessions (mongod's LookupRequirement::kAllowed).
  const looked = await db.collection('c').aggregate([
    { $lookup: { from: 'c', pipeline: [{ $listLocalSessions: {} }], as: 'sessions' } }]).toArray();
  assert.ok(looked[0].sessions.length >= 1, `the driver's own session is seen from a $lookup: ${JSON.stringify(looked)}`);
  const config = srv.client.db('config');
  const s = (await admin.command({ startSession: 1 })).id.id;
  const rows = await config.collection('system.sessions').aggregate([{ $listSessions: { allUsers: true } }]).toArray();
  assert.ok(idsOf(rows).includes(hexOf(s)), '$listSessions answers from the same cache');
});

h.test('a malformed lsid is refused as mongod does', async () => {
  // Raw OP_MSG: the driver would replace the lsid with its own session's.
  const conn = await h.rawConnect(srv.port);
  try {
    const expect = async (cmd, code, re) => {
      const r = await conn.command('admin', cmd);
      assert.equal(r.ok, 0, `${JSON.stringify(cmd)} should fail`);
      assert.equal(r.code, code, `${JSON.stringify(cmd)}: ${JSON.stringify(r)}`);
      if (re) assert.match(r.errmsg, re);
    };
    await expect({ ping: 1, lsid: 5 }, 14,
      /^BSON field 'OperationSessionInfo.lsid' is the wrong type 'int', expected type 'object'$/);
    await expect({ ping: 1, lsid: {} }, 40414,
      /^BSON field 'OperationSessionInfo.lsid.id' is missing but a required field$/);
    await expect({ ping: 1, lsid: { id: 'x' } }, 14,
      /^BSON field 'OperationSessionInfo.lsid.id' is the wrong type 'string', expected type 'binData'$/);
    await expect({ ping: 1, lsid: { id: new Binary(Buffer.alloc(16), 0) } }, 14,
      /wrong binData type 'general', expected type 'UUID'/);
    await expect({ ping: 1, lsid: { id: new UUID(), extra: 1 } }, 40415,
      /^BSON field 'OperationSessionInfo.lsid.extra' is an unknown field.$/);
    await expect({ ping: 1, lsid: { id: new Binary(Buffer.alloc(5), 4) } }, 207);
    await expect({ endSessions: 1 }, 14, /'endSessions.endSessions' is the wrong type 'int', expected type 'array'/);
    await expect({ endSessions: [{}] }, 40414);
    await expect({ killAllSessions: [{ user: 'a' }] }, 40414);
    // A well-formed lsid records its session.
    const id = new UUID();
    assert.equal((await conn.command('admin', { ping: 1, lsid: { id } })).ok, 1);
    assert.ok(idsOf(await listLocal(srv.client)).includes(hexOf(id)));
  } finally { conn.close(); }
});

h.test('a cursor belongs to its session: getMore in another one is 50736 / 50737 / 50738', async () => {
  const db = srv.freshDb('cursess');
  await db.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const conn = await h.rawConnect(srv.port);
  try {
    const a = new UUID();
    const b = new UUID();
    const name = db.databaseName;
    const open = async (lsid) => {
      const r = await conn.command(name, { find: 'c', batchSize: 1, ...(lsid ? { lsid: { id: lsid } } : {}) });
      assert.equal(r.ok, 1, JSON.stringify(r));
      return h.cursorId(r.cursor.id);
    };
    const more = (id, lsid) => conn.command(name, { getMore: id, collection: 'c', batchSize: 1,
      ...(lsid ? { lsid: { id: lsid } } : {}) });
    const id = await open(a);
    let r = await more(id, b);
    assert.equal(r.code, 50738, JSON.stringify(r));
    assert.match(r.errmsg, new RegExp(`^Cannot run getMore on cursor \\d+, which was created in session ${a.toHexString(true)} - ` +
      `${crypto.createHash('sha256').update('').digest('base64').replace(/[+/]/g, '\\$&')} -  - , in session ${b.toHexString(true)} - `));
    r = await more(id, null);
    assert.equal(r.code, 50737, JSON.stringify(r));
    assert.match(r.errmsg, /which was created in session .* without an lsid$/);
    r = await more(id, a);
    assert.equal(r.ok, 1, `the cursor lives on, in its own session: ${JSON.stringify(r)}`);
    const bare = await open(null);
    r = await more(bare, a);
    assert.equal(r.code, 50736, JSON.stringify(r));
    assert.match(r.errmsg, /which was not created in a session, in session /);
    assert.equal((await more(bare, null)).ok, 1);

    // killSessions kills the session's cursors; killAllSessions those of every session, not sessionless ones.
    const inA = await open(a);
    assert.equal((await conn.command('admin', { killSessions: [{ id: a }] })).ok, 1);
    r = await more(inA, a);
    assert.equal(r.code, 43, `killSessions killed the cursor: ${JSON.stringify(r)}`);
    const inB = await open(b);
    const none = await open(null);
    assert.equal((await conn.command('admin', { killAllSessions: [] })).ok, 1);
    assert.equal((await more(inB, b)).code, 43, 'killAllSessions killed the session cursor');
    r = await more(none, null);
    assert.equal(r.ok, 1, `a cursor outside sessions lives on: ${JSON.stringify(r)}`);
  } finally { conn.close(); }
});

h.test('under --auth a session belongs to its user; other users need the cluster privilege', async () => {
  const s = new h.MayflyServer({ args: ['--auth', '--setParameter', 'maxSessions=6'] });
  const clients = [];
  try {
    await s.start();
    const local = new MongoClient(s.uri);
    clients.push(local);
    await local.db('admin').command({ createUser: 'root', pwd: 'pw-root-1', roles: ['root'] });
    const uri = (u, p) => `mongodb://${u}:${p}@127.0.0.1:${s.port}/?authSource=admin&directConnection=true`;
    const root = new MongoClient(uri('root', 'pw-root-1'), { maxPoolSize: 1 });
    clients.push(root);
    await root.db('admin').command({ createUser: 'app', pwd: 'pw-app-1', roles: [{ role: 'readWrite', db: 'data' }] });
    const app = new MongoClient(uri('app', 'pw-app-1'), { maxPoolSize: 1 });
    clients.push(app);
    const sess = app.startSession();
    await app.db('data').collection('c').insertOne({ a: 1 }, { session: sess });

    const mine = await listLocal(app);
    const row = mine.find((x) => hexOf(x._id.id) === hexOf(sess.id.id));
    assert.ok(row, `app sees its session: ${JSON.stringify(mine)}`);
    assert.equal(row.user, 'app@admin');
    assert.equal(hexOf(row._id.uid), sha256('app@admin'));
    assert.ok(mine.every((x) => x.user === 'app@admin'), 'only its own sessions');
    await h.expectCode(listLocal(app, { allUsers: true }), 13);
    await h.expectCode(listLocal(app, { users: [{ user: 'root', db: 'admin' }] }), 13);
    assert.equal((await listLocal(app, { users: [{ user: 'app', db: 'admin' }] })).length, mine.length,
      'naming oneself needs no privilege');

    const all = await listLocal(root, { allUsers: true });
    assert.ok(all.some((x) => x.user === 'app@admin') && all.some((x) => x.user === 'root@admin'));
    const apps = await listLocal(root, { users: [{ user: 'app', db: 'admin' }] });
    assert.ok(apps.length >= 1 && apps.every((x) => x.user === 'app@admin'));

    // endSessions only ends the caller's own session of that id.
    await root.db('admin').command({ endSessions: [{ id: sess.id.id }] });
    assert.ok(idsOf(await listLocal(app)).includes(hexOf(sess.id.id)), "root's endSessions does not end app's session");
    await app.db('admin').command({ endSessions: [{ id: sess.id.id }] });
    assert.ok(!idsOf(await listLocal(app)).includes(hexOf(sess.id.id)));

    // killAllSessions needs the cluster privilege; root kills app's sessions.
    await h.expectCode(app.db('admin').command({ killAllSessions: [] }), 13);
    await root.db('admin').command({ killAllSessions: [{ user: 'app', db: 'admin' }] });
    const left = await listLocal(root, { allUsers: true });
    assert.ok(!left.some((x) => x.user === 'app@admin'), JSON.stringify(left));

    // maxSessions=6: new sessions past it are refused with 261, known ones still work.
    const admin = root.db('admin');
    let refused = null;
    for (let i = 0; i < 8 && !refused; i++) {
      try { await admin.command({ startSession: 1 }); } catch (e) { refused = e; }
    }
    assert.ok(refused, 'the cache filled up');
    assert.equal(refused.code, 261);
    assert.match(refused.message, /the number of active sessions is too high/);
    await admin.command({ ping: 1 }); // root's own session is cached: it still runs
    await admin.command({ killAllSessions: [] });
    await admin.command({ startSession: 1 });
  } catch (e) {
    e.message += `\n--- auth server stderr tail ---\n${s.stderrTail(20)}`;
    throw e;
  } finally {
    for (const c of clients) await c.close(true).catch(() => {});
    const info = await s.stop();
    s.cleanup();
    assert.equal(info && info.code, 0, `the --auth server shuts down cleanly: ${JSON.stringify(info)}`);
  }
});
