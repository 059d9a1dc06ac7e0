'use strict';
/*
 * Replica sets with access control (--keyFile), MongoDB 8.0 semantics:
 *   - mayflyd --keyFile FILE implies --auth; members authenticate to each
 *     other as __system@local (SCRAM-SHA-256, the key as the password);
 *   - with no user yet, a loopback client may run replSetInitiate and
 *     createUser on admin (the localhost exception), nothing else (13);
 *     once a user exists (replicated to every member) the exception closes;
 *   - users are replicated: created on the primary, they log in on every
 *     member, including one added later with replSetReconfig;
 *   - a member started with a different key cannot join: replSetInitiate or
 *     replSetReconfig naming it is refused, or it stays unhealthy, while the
 *     set keeps taking w: "majority" writes;
 *   - a key file readable by group/others, too short or not base64 stops
 *     mayflyd at start-up with status 2 and a message on stderr.
 *
 * One 3-member set (rs_harness.js, every member with --keyFile) plus one
 * spare with the same key. The harness's own replSetInitiate goes through
 * the localhost exception (no user exists yet) and its clients carry no
 * credentials, so after the first user is created the tests use their own
 * credentialed clients. Members with a wrong key are MayflyServers started
 * by the tests themselves.
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const nodeTest = require('node:test');
const { spawn } = require('node:child_process');
const { MongoClient } = require('mongodb');
const h = require('./harness');
const R = require('./rs_harness');

/* The key files live in one 0700 directory, written before the set starts. */
const KEY_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-keyfile-'));
function writeKey(name, text, mode = 0o600) {
  const p = path.join(KEY_DIR, name);
  fs.writeFileSync(p, text, { mode });
  fs.chmodSync(p, mode);   /* the umask does not loosen or tighten what the test means */
  return p;
}
const KEY = writeKey('key', `${crypto.randomBytes(48).toString('base64')}\n`);
const WRONG_KEY = writeKey('wrong', `${crypto.randomBytes(48).toString('base64')}\n`);

const rs = R.useReplSet(3, { spares: 1, args: ['--keyFile', KEY] });
const SPARE = 3;

const ADMIN = 'admin';
const ADMIN_PWD = 'adm1n-Secret!pw';
const APP = 'app';
const APP_PWD = 'app-Secret!pw';
const APP_DB = 'rsauth_app';
const MAJ = { writeConcern: { w: 'majority', wtimeout: 15000 } };

/* Servers this file starts itself (wrong keys); stopped in after(). */
const ownServers = [];

nodeTest.after(async () => {
  for (const s of ownServers) {
    await s.stop().catch(() => {});
    s.cleanup();
  }
  fs.rmSync(KEY_DIR, { recursive: true, force: true });
});

const num = (v) => Number(v);

function errCode(e) {
  if (e.code !== undefined) return e.code;
  if (e.cause && e.cause.code !== undefined) return e.cause.code;
  return e.writeErrors && e.writeErrors[0] ? e.writeErrors[0].code : undefined;
}

function setUri(user, pwd, extra = '') {
  return `mongodb://${encodeURIComponent(user)}:${encodeURIComponent(pwd)}@${rs.hosts.join(',')}/` +
    `?replicaSet=rs0&authSource=admin&serverSelectionTimeoutMS=20000${extra ? `&${extra}` : ''}`;
}

function directUri(port, user, pwd, readPreference = 'secondary') {
  return `mongodb://${encodeURIComponent(user)}:${encodeURIComponent(pwd)}@127.0.0.1:${port}/` +
    `?authSource=admin&directConnection=true&readPreference=${readPreference}` +
    '&serverSelectionTimeoutMS=5000&retryWrites=false';
}

/* A connected client (closed by the harness's after hook). */
async function connect(uri, what) {
  const c = new MongoClient(uri, { maxPoolSize: 2 });
  rs.clients.push(c);
  try {
    await c.connect();
    await c.db('admin').command({ ping: 1 });
  } catch (e) {
    e.message = `${what}: ${e.message}`;
    throw e;
  }
  return c;
}

/*
 * A client logged in through uri, retried until the login works (a user
 * reaches a member by replication); closed by the harness's after hook.
 * opts: rs.waitUntil's {timeoutMs, what}.
 */
function loginOnceReplicated(uri, opts) {
  return rs.waitUntil(async () => {
    const cl = new MongoClient(uri, { maxPoolSize: 1 });
    try {
      await cl.connect();
      await cl.db('admin').command({ ping: 1 });
      rs.clients.push(cl);
      return cl;
    } catch (e) {
      await cl.close(true).catch(() => {});
      throw e;
    }
  }, opts);
}

let adminSet = null;   /* root user, replica-set URI */
function admin() { assert.ok(adminSet, 'the root user exists (an earlier test creates it)'); return adminSet; }

/* A member of the set other than the primary. */
async function secondaries() {
  const p = await rs.waitForPrimary();
  return { p, secs: [0, 1, 2].filter((i) => i !== p) };
}

/* Starts a mayflyd with --replSet rs0 and the given key file, not in any config. */
async function startOwnMember(keyPath, setName = 'rs0') {
  const port = await rs.freshPort();
  const raftPort = await rs.freshPort();
  const server = new h.MayflyServer({ args: ['--replSet', setName, '--raftPort', String(raftPort), '--keyFile', keyPath] });
  server.port = port;
  ownServers.push(server);
  await server.start();
  return { server, port, raftPort, host: `127.0.0.1:${port}` };
}

/* One raw OP_MSG command on a port (no credentials); the reply body. */
async function rawOn(port, db, cmd, ms = 20000) {
  const c = await h.rawConnect(port);
  try {
    await c.send(h.buildOpMsg(c.reqId++, { ...cmd, $db: db }));
    return await c.readReply(ms);
  } finally {
    c.close();
  }
}

/* Runs mayflyd with args until it exits (at most ms); {code, signal, stderr}. */
function runToExit(args, ms = 20000) {
  return new Promise((resolve, reject) => {
    const dbpath = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-test-'));
    const proc = spawn(h.binaryPath(), ['--bind_ip', '127.0.0.1', '--dbpath', dbpath, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ASAN_OPTIONS: process.env.ASAN_OPTIONS || 'detect_leaks=1' },
    });
    let stderr = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`mayflyd ${args.join(' ')} did not exit within ${ms} ms; stderr: ${stderr}`));
    }, ms);
    proc.on('error', (e) => { clearTimeout(t); reject(e); });
    proc.on('close', (code, signal) => {
      clearTimeout(t);
      fs.rmSync(dbpath, { recursive: true, force: true });
      resolve({ code, signal, stderr });
    });
  });
}

/* ------------------------------------------------------------------ tests */

R.test('the harness\'s replSetInitiate went through the localhost exception; hello answers without credentials', async () => {
  assert.equal(rs.initiateReply.ok, 1, JSON.stringify(rs.initiateReply));
  const p = await rs.waitForPrimary();
  for (const i of [0, 1, 2]) {
    const r = await rs.hello(i);
    assert.ok(r, `member ${i} answers hello without credentials`);
    assert.equal(r.setName, 'rs0');
    assert.equal(r.isWritablePrimary, i === p);
    assert.equal(r.secondary, i !== p);
  }
});

R.test('without credentials: find, insert and replSetGetStatus answer 13 Unauthorized on every member', async () => {
  const { p, secs } = await secondaries();
  const coll = rs.client.db(APP_DB).collection('c');
  let e = await h.expectCode(coll.find({}).toArray(), 13);
  assert.match(e.errmsg || e.message, /requires authentication/);
  await h.expectCode(coll.insertOne({ _id: 1 }), 13);
  for (const i of [p, ...secs]) {
    const f = await rs.raw(i, APP_DB, { find: 'c', filter: {}, $readPreference: { mode: 'secondaryPreferred' } });
    assert.equal(f.ok, 0, `member ${i}: ${JSON.stringify(f)}`);
    assert.equal(f.code, 13, `member ${i}: ${JSON.stringify(f)}`);
    assert.equal(f.codeName, 'Unauthorized');
    const st = await rs.raw(i, 'admin', { replSetGetStatus: 1 });
    assert.equal(st.code, 13, `member ${i} replSetGetStatus: ${JSON.stringify(st)}`);
  }
  // The connection stays usable after a refusal.
  e = await h.expectCode(rs.reader(secs[0]).db(APP_DB).collection('c').find({}).toArray(), 13);
  assert.equal((await rs.reader(secs[0]).db('admin').command({ ping: 1 })).ok, 1);
});

R.test('localhost exception: createUser of a root user on admin via the primary works; the exception then closes on every member', async () => {
  const { p, secs } = await secondaries();
  // On a secondary the exception lets createUser through to the replication check: not writable.
  const sec = await rs.raw(secs[0], 'admin', { createUser: 'nope', pwd: 'nope-pw', roles: ['root'] });
  assert.equal(sec.ok, 0, JSON.stringify(sec));
  assert.ok([10107, 13435].includes(sec.code), `createUser on a secondary: ${JSON.stringify(sec)}`);

  // Through the replica-set client (primary read preference: the primary).
  const r = await rs.client.db('admin').command({ createUser: ADMIN, pwd: ADMIN_PWD, roles: ['root'], writeConcern: { w: 'majority' } });
  assert.equal(r.ok, 1);

  // Closed: a second unauthenticated createUser, and replSetInitiate, answer 13 on the primary ...
  const again = await rs.raw(p, 'admin', { createUser: 'second', pwd: 'second-pw', roles: ['root'] });
  assert.equal(again.code, 13, JSON.stringify(again));
  const init = await rs.raw(p, 'admin', { replSetInitiate: {} });
  assert.equal(init.code, 13, JSON.stringify(init));
  // ... and, once the user has replicated, on the secondaries too.
  for (const i of secs) {
    await rs.waitUntil(async () => {
      const x = await rs.raw(i, 'admin', { replSetInitiate: {} });
      return x && x.code === 13;
    }, { what: `member ${i} to refuse an unauthenticated replSetInitiate with 13 (the exception closed)` });
  }

  adminSet = await connect(setUri(ADMIN, ADMIN_PWD), 'logging in as the root user through the replica-set URI');
  const st = await adminSet.db('admin').command({ connectionStatus: 1 });
  assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: ADMIN, db: 'admin' }]);
});

R.test('authenticated replica-set client: w: "majority" writes and reads through the set URI', async () => {
  const coll = admin().db(APP_DB).collection('c');
  const ins = await coll.insertMany([{ _id: 1, v: 'one' }, { _id: 2, v: 'two' }], MAJ);
  assert.equal(ins.insertedCount, 2);
  const upd = await coll.updateOne({ _id: 2 }, { $set: { v: 'TWO' } }, MAJ);
  assert.equal(upd.modifiedCount, 1);
  assert.deepEqual(await coll.find({}).sort({ _id: 1 }).toArray(), [{ _id: 1, v: 'one' }, { _id: 2, v: 'TWO' }]);
  const hello = await admin().db('admin').command({ hello: 1 });
  const p = await rs.waitForPrimary();
  assert.equal(hello.me, rs.members[p].host, 'writes went to the primary');
  const st = await admin().db('admin').command({ replSetGetStatus: 1 });
  assert.equal(st.members.length, 3);
  assert.ok(st.members.every((m) => m.health === 1), JSON.stringify(st.members));
});

R.test('the raft port: libraft\'s handshake with a forged proof gets the member\'s nonce and is closed before raft sees it; the set carries on', async () => {
  const p = await rs.waitForPrimary();
  const term0 = num((await admin().db('admin').command({ replSetGetStatus: 1 })).term);
  const forged = Buffer.concat([R.raftHandshake(99, '127.0.0.1:1'), Buffer.alloc(64, 0x5a),
    crypto.randomBytes(1024) /* what a raft message would follow with */]);
  for (const i of [0, 1, 2]) {
    const r = await R.raftProbe(rs.members[i].raftPort, forged);
    assert.equal(r.closed, true, `member ${i} closes it`);
    assert.ok(r.ms < 5000, `member ${i}: closed after ${r.ms} ms, not at the 10 s handshake limit`);
    assert.equal(r.received.length, 32, `member ${i} sent its 32-byte nonce and nothing else`);
  }
  await rs.waitUntil(() => rs.members[p].server.stderrLines.some((l) => /raft port: incoming connection from .* closed/.test(l)),
    { timeoutMs: 5000, what: 'the primary to log the refused raft connection' });
  const coll = admin().db(APP_DB).collection('raft_port');
  assert.equal((await coll.insertOne({ _id: 1 }, MAJ)).acknowledged, true);
  const st = await admin().db('admin').command({ replSetGetStatus: 1 });
  assert.ok(st.members.every((m) => m.health === 1), JSON.stringify(st.members));
  assert.equal(num(st.term), term0, 'no election: the forged connection never reached raft');
  await coll.drop(MAJ);
});

R.test('the root user logs in on each secondary (directConnection) and reads the replicated documents', async () => {
  const { p, secs } = await secondaries();
  for (const i of secs) {
    const c = await connect(directUri(rs.members[i].port, ADMIN, ADMIN_PWD),
      `logging in as ${ADMIN} on secondary ${i} (${rs.members[i].host})`);
    const hello = await c.db('admin').command({ hello: 1 });
    assert.equal(hello.secondary, true, `member ${i} is a secondary`);
    const st = await c.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: ADMIN, db: 'admin' }]);
    const coll = c.db(APP_DB).collection('c');
    const docs = await rs.waitUntil(async () => {
      const d = await coll.find({}).sort({ _id: 1 }).toArray();
      return d.length === 2 && d[1].v === 'TWO' ? d : null;
    }, { what: `member ${i} to hold both documents` });
    assert.deepEqual(docs, [{ _id: 1, v: 'one' }, { _id: 2, v: 'TWO' }]);
    // A write on a secondary is refused for replication, not for authorization.
    await h.expectCode(coll.insertOne({ _id: 3 }), [10107, 13435]);
    // The user's entry itself replicated.
    const ui = await c.db('admin').command({ usersInfo: { user: ADMIN, db: 'admin' } });
    assert.equal(ui.users.length, 1);
    assert.deepEqual(ui.users[0].roles, [{ role: 'root', db: 'admin' }]);
  }
  // admin.system.users is one replicated collection: the refused createUser on a
  // secondary (previous test) must not have created a local one of its own.
  const c0 = await connect(directUri(rs.members[p].port, ADMIN, ADMIN_PWD, 'primary'), `logging in as ${ADMIN} on the primary`);
  const want = (await c0.db('admin').listCollections({ name: 'system.users' }).toArray())[0];
  assert.ok(want && want.info && want.info.uuid, JSON.stringify(want));
  for (const i of secs) {
    const cl = await connect(directUri(rs.members[i].port, ADMIN, ADMIN_PWD), `logging in as ${ADMIN} on member ${i}`);
    const got = (await cl.db('admin').listCollections({ name: 'system.users' }).toArray())[0];
    assert.equal(String(got && got.info && got.info.uuid), String(want.info.uuid),
      `admin.system.users on member ${i} has the primary's UUID (a secondary must not create it locally)`);
  }
});

R.test('a readWrite user created on the primary logs in on the secondaries; its role holds there', async () => {
  await admin().db(APP_DB).command({ createUser: APP, pwd: APP_PWD, roles: [{ role: 'readWrite', db: APP_DB }], writeConcern: { w: 'majority' } });
  // Writes through the set as the new user.
  const appSet = await connect(setUri(APP, APP_PWD).replace('authSource=admin', `authSource=${APP_DB}`),
    'logging in as the readWrite user through the replica-set URI');
  await appSet.db(APP_DB).collection('c').insertOne({ _id: 'app', by: APP }, MAJ);
  await h.expectCode(appSet.db('other_db').collection('c').insertOne({ _id: 1 }), 13);

  const { secs } = await secondaries();
  for (const i of secs) {
    const uri = directUri(rs.members[i].port, APP, APP_PWD).replace('authSource=admin', `authSource=${APP_DB}`);
    // The user reaches the secondary by replication: retry the login until it has.
    const c = await loginOnceReplicated(uri, { what: `${APP}@${APP_DB} to log in on secondary ${i}` });
    const st = await c.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: APP, db: APP_DB }]);
    const doc = await rs.waitUntil(() => c.db(APP_DB).collection('c').findOne({ _id: 'app' }),
      { what: `the user's document on member ${i}` });
    assert.deepEqual(doc, { _id: 'app', by: APP });
    // readWrite on APP_DB only: other databases and cluster commands are refused.
    await h.expectCode(c.db('other_db').collection('c').find({}).toArray(), 13);
    await h.expectCode(c.db('admin').command({ replSetGetStatus: 1 }), 13);
  }
  // A wrong password fails on a secondary too.
  const bad = new MongoClient(directUri(rs.members[secs[0]].port, APP, 'wrong-pw').replace('authSource=admin', `authSource=${APP_DB}`));
  try {
    await bad.connect();
    await bad.db('admin').command({ ping: 1 });
    assert.fail('logging in with a wrong password should fail');
  } catch (e) {
    if (e.code === 'ERR_ASSERTION') throw e;
    assert.equal(errCode(e), 18, `${e.name}: ${e.message}`);
  } finally {
    await bad.close(true).catch(() => {});
  }
});

R.test('change streams need find on what they watch: the whole cluster needs it on every database', async () => {
  const appSet = await connect(setUri(APP, APP_PWD).replace('authSource=admin', `authSource=${APP_DB}`),
    'logging in as the readWrite user through the replica-set URI');
  const r = await appSet.db(APP_DB).command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} });
  await appSet.db(APP_DB).command({ killCursors: 'c', cursors: [h.cursorId(r.cursor.id)] });
  await h.expectCode(appSet.db('other_db').command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} }), 13);
  await h.expectCode(appSet.db('admin').command({ aggregate: 1, pipeline: [{ $changeStream: { allChangesForCluster: true } }], cursor: {} }), 13);
  /* read on admin alone is not read on every database. */
  await admin().db('admin').command({ createUser: 'csreader', pwd: APP_PWD, roles: [{ role: 'read', db: 'admin' }], writeConcern: { w: 'majority' } });
  const rd = await connect(setUri('csreader', APP_PWD), 'logging in as read@admin');
  await h.expectCode(rd.db('admin').command({ aggregate: 1, pipeline: [{ $changeStream: { allChangesForCluster: true } }], cursor: {} }), 13);
  const root = await admin().db('admin').command({ aggregate: 1, pipeline: [{ $changeStream: { allChangesForCluster: true } }], cursor: {} });
  await admin().db('admin').command({ killCursors: '$cmd.aggregate', cursors: [h.cursorId(root.cursor.id)] });
});

R.test('a revoke reaches a user inside a multi-document transaction at once, and stays after it (privileges are not reloaded from the transaction\'s snapshot)', async () => {
  const db = admin().db(APP_DB);
  const sdb = admin().db('rsauth_tx');
  await sdb.collection('txsecret').insertOne({ _id: 1 }, MAJ);
  await admin().db('admin').command({ createRole: 'txRead', privileges: [{ resource: { db: 'rsauth_tx', collection: 'txsecret' }, actions: ['find'] }], roles: [], ...MAJ });
  await db.command({ createUser: 'txu', pwd: APP_PWD, roles: [{ role: 'txRead', db: 'admin' }, 'readWrite'], ...MAJ });
  const u = await connect(setUri('txu', APP_PWD).replace('authSource=admin', `authSource=${APP_DB}`), 'logging in as txu');
  const session = u.startSession();
  try {
    session.startTransaction();
    assert.equal((await u.db('rsauth_tx').collection('txsecret').find({}, { session }).toArray()).length, 1);
    await db.command({ revokeRolesFromUser: 'txu', roles: [{ role: 'txRead', db: 'admin' }], ...MAJ });
    await h.expectCode(u.db('rsauth_tx').collection('txsecret').find({}, { session }).toArray(), 13);
    await session.abortTransaction().catch(() => {});
  } finally {
    await session.endSession();
  }
  await h.expectCode(u.db('rsauth_tx').collection('txsecret').findOne(), 13);
  await u.db(APP_DB).collection('c2').insertOne({ _id: 'still readWrite' });
});

R.test('a spare with the same key joins through replSetReconfig, catches up, and the users log in on it', async () => {
  const spare = rs.members[SPARE];
  const { config } = await admin().db('admin').command({ replSetGetConfig: 1 });
  const added = { ...config, version: num(config.version) + 1, members: [...config.members, { _id: SPARE, host: spare.host }] };
  delete added.term;
  assert.equal((await admin().db('admin').command({ replSetReconfig: added })).ok, 1);
  spare.inSet = true;
  await rs.waitForSecondary(SPARE, { timeoutMs: 40000 });

  const c = await loginOnceReplicated(directUri(spare.port, ADMIN, ADMIN_PWD),
    { timeoutMs: 20000, what: `${ADMIN} to log in on the new member` });
  const docs = await rs.waitUntil(async () => {
    const d = await c.db(APP_DB).collection('c').find({}).sort({ _id: 1 }).toArray();
    return d.length === 3 ? d : null;
  }, { what: 'the new member to hold the set\'s documents' });
  assert.deepEqual(docs.map((d) => d._id), [1, 2, 'app']);

  await rs.waitUntil(async () => {
    const st = await admin().db('admin').command({ replSetGetStatus: 1 });
    const m = st.members.find((x) => x.name === spare.host);
    return m && m.health === 1 && m.stateStr === 'SECONDARY';
  }, { what: 'the primary to see the new member as a healthy SECONDARY' });

  // Remove it again: the set carries on with three.
  const { config: c4 } = await admin().db('admin').command({ replSetGetConfig: 1 });
  const removed = { ...c4, version: num(c4.version) + 1, members: c4.members.filter((m) => m.host !== spare.host) };
  delete removed.term;
  assert.equal((await admin().db('admin').command({ replSetReconfig: removed })).ok, 1);
  spare.inSet = false;
  await rs.waitUntil(async () => {
    const hs = await rs.hellos([0, 1, 2]);
    return hs.every((x) => x && x.hosts.length === 3 && !x.hosts.includes(spare.host));
  }, { what: 'the three members to list 3 hosts' });
  await admin().db(APP_DB).collection('c').insertOne({ _id: 'after-remove' }, MAJ);
  await admin().db(APP_DB).collection('c').deleteOne({ _id: 'after-remove' }, MAJ);
});

R.test('a member with a different key cannot join through replSetReconfig; the set keeps taking majority writes', async (t) => {
  const bad = await startOwnMember(WRONG_KEY);
  const { config } = await admin().db('admin').command({ replSetGetConfig: 1 });
  const v0 = num(config.version);
  const added = { ...config, version: v0 + 1, members: [...config.members, { _id: 10, host: bad.host }] };
  delete added.term;
  let refused = null;
  try {
    await admin().db('admin').command({ replSetReconfig: added });
  } catch (e) {
    refused = e;
  }
  const coll = admin().db(APP_DB).collection('bad_key');
  if (refused) {
    // Refused outright: the config did not change.
    t.diagnostic(`replSetReconfig refused: code ${errCode(refused)} (${refused.codeName}): ${refused.errmsg || refused.message}`);
    assert.ok(errCode(refused) !== 13, `refused for the caller's privileges, not the member's key: ${refused.message}`);
    const { config: now } = await admin().db('admin').command({ replSetGetConfig: 1 });
    assert.equal(num(now.version), v0, 'a refused reconfig leaves the version');
    assert.ok(!now.members.some((m) => m.host === bad.host));
  } else {
    // Accepted into the config: the member never becomes healthy.
    const t0 = Date.now();
    let seen = null;
    await rs.waitUntil(async () => {
      const st = await admin().db('admin').command({ replSetGetStatus: 1 });
      seen = st.members.find((m) => m.name === bad.host);
      return seen && seen.health === 0;
    }, { timeoutMs: 10000, what: 'the primary to report the wrong-key member with health 0' })
      .catch((e) => { e.message += `\nlast entry: ${JSON.stringify(seen)}`; throw e; });
    assert.notEqual(seen.stateStr, 'SECONDARY', JSON.stringify(seen));
    while (Date.now() - t0 < 5000) {
      const x = await h.rawConnect(bad.port).then(async (c) => {
        try { return await c.command('admin', { hello: 1 }); } finally { c.close(); }
      });
      assert.notEqual(x && x.secondary, true, `the wrong-key member must not become a secondary: ${JSON.stringify(x)}`);
      await h.sleep(500);
    }
  }
  // The refusal is the members' authentication: the wrong-key member logs a
  // failed SCRAM conversation for __system@local.
  await rs.waitUntil(() => bad.server.stderrLines.some((l) => /authentication failed for __system@local/.test(l)),
    { timeoutMs: 10000, what: 'the wrong-key member to log a failed authentication of __system@local' })
    .catch((e) => { e.message += `\n--- wrong-key member stderr ---\n${bad.server.stderrTail(30)}`; throw e; });
  // Majority writes keep working either way.
  for (let k = 0; k < 5; k++) {
    const r = await coll.insertOne({ _id: k }, MAJ);
    assert.equal(r.acknowledged, true);
  }
  assert.equal(await coll.countDocuments({}), 5);

  // The wrong-key member holds no data and no users: nothing has reached it.
  const f = await rawOn(bad.port, APP_DB, { find: 'c', filter: {}, $readPreference: { mode: 'secondaryPreferred' } });
  assert.notEqual(f && f.ok, 1, `the wrong-key member answered a find: ${JSON.stringify(f)}`);

  if (!refused) {
    const { config: c5 } = await admin().db('admin').command({ replSetGetConfig: 1 });
    const removed = { ...c5, version: num(c5.version) + 1, members: c5.members.filter((m) => m.host !== bad.host) };
    delete removed.term;
    assert.equal((await admin().db('admin').command({ replSetReconfig: removed })).ok, 1);
  }
  const info = await bad.server.stop();
  assert.equal(info.code, 0, `the wrong-key member exits 0 on SIGTERM: ${JSON.stringify(info)}\n${bad.server.stderrTail(30)}`);
});

R.test('replSetInitiate naming a member with a different key fails with AuthenticationFailed or a quorum error', async () => {
  const good = await startOwnMember(KEY, 'rs9');
  const bad = await startOwnMember(WRONG_KEY, 'rs9');
  const r = await rawOn(good.port, 'admin', {
    replSetInitiate: { _id: 'rs9', members: [{ _id: 0, host: good.host }, { _id: 1, host: bad.host }] },
  });
  assert.ok(r, 'replSetInitiate answered');
  assert.ok(bad.server.stderrLines.some((l) => /authentication failed for __system@local/.test(l)),
    `the wrong-key member logs the failed authentication:\n${bad.server.stderrTail(20)}`);
  assert.equal(r.ok, 0, `replSetInitiate naming a wrong-key member must fail: ${JSON.stringify(r)}`);
  assert.ok([18, 74].includes(r.code), `code ${r.code} (${r.codeName}): ${r.errmsg}`);
  assert.match(String(r.errmsg), /auth|key/i, `the message names the authentication failure: ${r.errmsg}`);
  // Neither member took a config.
  for (const m of [good, bad]) {
    const x = await rawOn(m.port, 'admin', { hello: 1 });
    assert.ok(x && x.ok === 1, `${m.host} hello: ${JSON.stringify(x)}`);
    assert.equal(x.isWritablePrimary, false);
    assert.equal(x.secondary, false);
    assert.match(String(x.info), /valid replica set config/, `${m.host} hello: ${JSON.stringify(x)}`);
  }
  for (const m of [good, bad]) {
    const info = await m.server.stop();
    assert.equal(info.code, 0, `${m.host} exits 0 on SIGTERM: ${JSON.stringify(info)}\n${m.server.stderrTail(30)}`);
  }
});

R.test('a key file readable by group/others, too short or not base64 stops mayflyd at start-up with status 2', async () => {
  const port = await rs.freshPort();
  const open = writeKey('open', `${crypto.randomBytes(24).toString('base64')}\n`, 0o644);
  let r = await runToExit(['--port', String(port), '--keyFile', open]);
  assert.equal(r.code, 2, `0644 key file: ${JSON.stringify(r)}`);
  assert.match(r.stderr, /permission/i);
  assert.ok(r.stderr.includes(open), `the message names the file: ${r.stderr}`);

  const groupRead = writeKey('group', `${crypto.randomBytes(24).toString('base64')}\n`, 0o640);
  r = await runToExit(['--port', String(port), '--keyFile', groupRead]);
  assert.equal(r.code, 2, `0640 key file: ${JSON.stringify(r)}`);
  assert.match(r.stderr, /permission/i);

  r = await runToExit(['--port', String(port), '--keyFile', writeKey('short', 'abc\n')]);
  assert.equal(r.code, 2, `3-character key: ${JSON.stringify(r)}`);
  assert.match(r.stderr, /base64/);

  r = await runToExit(['--port', String(port), '--keyFile', writeKey('notb64', 'this-is-not*base64!\n')]);
  assert.equal(r.code, 2, `non-base64 key: ${JSON.stringify(r)}`);
  assert.match(r.stderr, /base64/);

  r = await runToExit(['--port', String(port), '--keyFile', path.join(KEY_DIR, 'missing')]);
  assert.equal(r.code, 2, `missing key file: ${JSON.stringify(r)}`);
  assert.match(r.stderr, /keyFile/);

  // Whitespace inside the key is ignored: a key split over lines starts (and answers hello).
  const split = writeKey('split', 'abcd ef\n gh\tij\n');
  const s = new h.MayflyServer({ args: ['--keyFile', split] });
  s.port = port;
  ownServers.push(s);
  await s.start();
  const c = await h.rawConnect(port);
  try {
    const hello = await c.command('admin', { hello: 1 });
    assert.equal(hello.ok, 1);
    const f = await c.command('x', { find: 'c' });
    assert.equal(f.code, 13, `--keyFile implies --auth: ${JSON.stringify(f)}`);
  } finally {
    c.close();
  }
  const info = await s.stop();
  assert.equal(info.code, 0, JSON.stringify(info));
});
