'use strict';
/*
 * Authentication and authorization (issue 10), MongoDB 8.0 semantics, through
 * the Node driver, raw OP_MSG connections and mongosh:
 *   - mayflyd --auth: unauthenticated clients may run only hello/isMaster,
 *     ping, buildInfo, saslStart, saslContinue, logout, connectionStatus,
 *     endSessions, whatsmyuri and listCommands; anything else answers 13
 *     Unauthorized "Command <name> requires authentication" and the
 *     connection stays usable;
 *   - the localhost exception: with no user at all, createUser on admin only,
 *     closed once a user exists;
 *   - SCRAM-SHA-256 and SCRAM-SHA-1, with and without speculative
 *     authentication in the hello handshake; wrong password / unknown user 18;
 *   - SASLprep of SCRAM-SHA-256 passwords (the auth spec's prose test step 4;
 *     a refused password answers mongod's 50692);
 *   - createUser, updateUser, dropUser, usersInfo, grantRolesToUser,
 *     revokeRolesFromUser, dropAllUsersFromDatabase, logout, connectionStatus;
 *   - admin.system.users holds SCRAM credentials, never the password;
 *   - credentials survive SIGTERM and kill -9 restarts;
 *   - the built-in roles: read, readWrite, dbAdmin, userAdmin, dbOwner,
 *     clusterMonitor, readAnyDatabase, readWriteAnyDatabase,
 *     userAdminAnyDatabase, root; listDatabases for users without the
 *     cluster privilege answers only their databases;
 *   - mongosh with a credentialed URI, db.auth() and show dbs;
 *   - access control switched on from a YAML --config file.
 *
 * One server (--auth) for the file; the tests run in order and the first
 * ones use the localhost exception to create the root user every later test
 * logs in as. The config-file test starts a second, short-lived server.
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--auth', '--setParameter', 'enableTestCommands=1'] });

const ROOT_USER = 'root';
const ROOT_PWD = 'r00t-Secret!pw';

/* ---------------------------------------------------------------- helpers */

function pwdOf(name) { return `pw-${name}-Xq7!`; }

function authUri(user, pwd, { mech, source = 'admin', db = '', port } = {}) {
  const q = new URLSearchParams({ directConnection: 'true', serverSelectionTimeoutMS: '5000', authSource: source });
  if (mech) q.set('authMechanism', mech);
  return `mongodb://${encodeURIComponent(user)}:${encodeURIComponent(pwd)}@127.0.0.1:${port || srv.port}/${db}?${q}`;
}

/* A logged-in client (one pooled connection, so a refused command and the next one share it). */
async function login(user, pwd, opts = {}) {
  const c = new MongoClient(authUri(user, pwd, opts), { maxPoolSize: 1 });
  srv.clients.push(c);
  try {
    await c.connect();
  } catch (e) {
    e.message = `logging in as ${user} (authSource=${opts.source || 'admin'}` +
      `${opts.mech ? `, ${opts.mech}` : ''}) should succeed: ${e.message}`;
    throw e;
  }
  return c;
}

/* Asserts that logging in fails with 18 AuthenticationFailed. */
async function expectLoginFails(user, pwd, opts, what) {
  const c = new MongoClient(authUri(user, pwd, opts), { maxPoolSize: 1 });
  try {
    await c.connect();
    await c.db('admin').command({ connectionStatus: 1 });
  } catch (e) {
    const code = e.code !== undefined ? e.code : (e.cause && e.cause.code);
    assert.equal(code, 18, `${what}: expected 18 AuthenticationFailed, got ${code} (${e.name}: ${e.message})`);
    return e;
  } finally {
    await c.close(true).catch(() => {});
  }
  assert.fail(`${what}: the login succeeded, expected 18 AuthenticationFailed`);
}

let rootCache = null;
/* The root user's client (root is created through the localhost exception by an early test). */
async function root() {
  if (rootCache) return rootCache;
  try {
    rootCache = await login(ROOT_USER, ROOT_PWD);
  } catch (e) {
    e.message = `cannot log in as the root user the localhost-exception test creates: ${e.message}`;
    throw e;
  }
  return rootCache;
}

/* Root creates a user (on db, default admin) and the test logs in as it. */
async function makeUser(name, roles, { db = 'admin', mechanisms, login: doLogin = true } = {}) {
  const cmd = { createUser: name, pwd: pwdOf(name), roles };
  if (mechanisms) cmd.mechanisms = mechanisms;
  const r = await (await root()).db(db).command(cmd);
  assert.equal(r.ok, 1);
  return doLogin ? login(name, pwdOf(name), { source: db }) : null;
}

/* Root puts documents into db.coll so that other users have something to read. */
async function seed(dbName, coll = 'c', docs = [{ _id: 1, a: 1 }, { _id: 2, a: 2 }]) {
  await (await root()).db(dbName).collection(coll).insertMany(docs);
}

async function denied(what, promise) {
  try {
    return await h.expectCode(promise, 13);
  } catch (e) {
    e.message = `${what} should be refused with 13 Unauthorized: ${e.message}`;
    throw e;
  }
}

async function allowed(what, promise) {
  try {
    return await promise;
  } catch (e) {
    e.message = `${what} should be allowed: ${e.message}`;
    throw e;
  }
}

async function connStatus(client, db = 'admin') {
  const r = await client.db(db).command({ connectionStatus: 1 });
  return r.authInfo;
}

const byKey = (a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b));
const sortRoles = (roles) => roles.map((r) => ({ role: r.role, db: r.db })).sort(byKey);

async function dbNames(client) {
  return (await client.db('admin').admin().listDatabases()).databases.map((d) => d.name).sort();
}

/* --------------------------------------------------- raw wire + SCRAM client */

async function rawCmd(conn, db, cmd) {
  const r = await conn.command(db, cmd);
  assert.ok(r, `the server answered ${Object.keys(cmd)[0]} (did not close the connection)`);
  return r;
}

function bin(b) {
  if (Buffer.isBuffer(b)) return b;
  if (b && b.buffer) return Buffer.from(b.buffer.subarray(0, b.position));
  throw new Error(`not a binary payload: ${JSON.stringify(b)}`);
}

const hashOf = (mech) => (mech === 'SCRAM-SHA-1' ? 'sha1' : 'sha256');
const hmac = (alg, key, data) => crypto.createHmac(alg, key).update(data).digest();

/* SCRAM keys as MongoDB derives them (SHA-1 salts hex(MD5(user:mongo:pwd)), SHA-256 the password). */
function scramKeys(mech, user, pwd, salt, iterations) {
  const alg = hashOf(mech);
  const input = mech === 'SCRAM-SHA-1'
    ? crypto.createHash('md5').update(`${user}:mongo:${pwd}`).digest('hex') : pwd;
  const salted = crypto.pbkdf2Sync(input, salt, iterations, alg === 'sha1' ? 20 : 32, alg);
  const clientKey = hmac(alg, salted, 'Client Key');
  return {
    clientKey,
    storedKey: crypto.createHash(alg).update(clientKey).digest(),
    serverKey: hmac(alg, salted, 'Server Key'),
  };
}

function parseScram(buf) {
  const out = {};
  for (const part of buf.toString('utf8').split(',')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i)] = part.slice(i + 1);
  }
  return out;
}

/* The client side of one SCRAM conversation (RFC 5802), checked against the server's signature. */
class ScramClient {
  constructor(mech, user, pwd) {
    this.mech = mech;
    this.user = user;
    this.pwd = pwd;
    this.nonce = crypto.randomBytes(24).toString('base64');
    this.bare = `n=${user},r=${this.nonce}`;
  }

  first() { return Buffer.from(`n,,${this.bare}`); }

  final(serverFirstBuf, { badProof = false } = {}) {
    const serverFirst = serverFirstBuf.toString('utf8');
    const f = parseScram(serverFirstBuf);
    assert.ok(f.r && f.r.startsWith(this.nonce) && f.r.length > this.nonce.length,
      `server-first ${JSON.stringify(serverFirst)} extends the client nonce`);
    assert.ok(Number(f.i) >= 4096, `iteration count ${f.i} >= 4096`);
    const keys = scramKeys(this.mech, this.user, this.pwd, Buffer.from(f.s, 'base64'), Number(f.i));
    const alg = hashOf(this.mech);
    const withoutProof = `c=biws,r=${f.r}`;
    const authMessage = `${this.bare},${serverFirst},${withoutProof}`;
    const sig = hmac(alg, keys.storedKey, authMessage);
    const proof = Buffer.alloc(sig.length);
    for (let i = 0; i < sig.length; i++) proof[i] = keys.clientKey[i] ^ sig[i];
    if (badProof) proof[0] ^= 0xff;
    this.expectedServerSig = hmac(alg, keys.serverKey, authMessage).toString('base64');
    return Buffer.from(`${withoutProof},p=${proof.toString('base64')}`);
  }

  checkServerFinal(buf) {
    assert.equal(parseScram(buf).v, this.expectedServerSig,
      'the server-final signature proves the server knows the credential');
  }
}

/*
 * Finishes a conversation after its saslStart reply (r1, from saslStart or a
 * hello's speculativeAuthenticate): saslContinue with the proof, and the
 * empty exchange if the server asks for it. Returns the last reply.
 */
async function scramContinue(conn, db, sc, r1, { badProof = false } = {}) {
  assert.equal(r1.done, false, `the first SCRAM step is not done: ${JSON.stringify(r1)}`);
  const r2 = await rawCmd(conn, db, {
    saslContinue: 1, conversationId: r1.conversationId, payload: sc.final(bin(r1.payload), { badProof }),
  });
  if (r2.ok !== 1) return r2;
  sc.checkServerFinal(bin(r2.payload));
  if (r2.done) return r2;
  return rawCmd(conn, db, { saslContinue: 1, conversationId: r1.conversationId, payload: Buffer.alloc(0) });
}

async function rawLogin(conn, mech, user, pwd, { db = 'admin', badProof = false } = {}) {
  const sc = new ScramClient(mech, user, pwd);
  const r1 = await rawCmd(conn, db, {
    saslStart: 1, mechanism: mech, payload: sc.first(), autoAuthorize: 1, options: { skipEmptyExchange: true },
  });
  if (r1.ok !== 1) return r1;
  return scramContinue(conn, db, sc, r1, { badProof });
}

/* =================================================== unauthenticated clients */

h.test('unauthenticated, hello/isMaster, ping, buildInfo, connectionStatus, whatsmyuri, listCommands, endSessions, logout, saslStart and saslContinue still answer', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    for (const [db, cmd] of [
      ['admin', { hello: 1 }], ['admin', { isMaster: 1 }], ['test', { ping: 1 }], ['admin', { buildInfo: 1 }],
      ['admin', { whatsmyuri: 1 }], ['admin', { listCommands: 1 }], ['admin', { endSessions: [] }],
      ['admin', { logout: 1 }], ['test', { logout: 1 }],
    ]) {
      const r = await rawCmd(conn, db, cmd);
      assert.equal(r.ok, 1, `unauthenticated ${JSON.stringify(cmd)} on ${db} should answer ok: ${JSON.stringify(r)}`);
    }
    const st = await rawCmd(conn, 'admin', { connectionStatus: 1 });
    assert.equal(st.ok, 1, JSON.stringify(st));
    assert.deepEqual(st.authInfo.authenticatedUsers, [], 'no authenticated users yet');
    assert.deepEqual(st.authInfo.authenticatedUserRoles, [], 'no roles yet');
    // saslStart / saslContinue are reachable: they fail as authentication, never as 13.
    const sc = new ScramClient('SCRAM-SHA-256', 'nobody', 'x');
    const s1 = await rawCmd(conn, 'admin', { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: sc.first() });
    assert.notEqual(s1.code, 13, `saslStart must not need authentication: ${JSON.stringify(s1)}`);
    const s2 = await rawCmd(conn, 'admin', { saslContinue: 1, conversationId: 4242, payload: Buffer.from('c=biws,r=x,p=AAAA') });
    assert.equal(s2.ok, 0, 'saslContinue of a conversation that never started fails');
    assert.notEqual(s2.code, 13, `saslContinue must not need authentication: ${JSON.stringify(s2)}`);
  } finally { conn.close(); }
});

h.test('unauthenticated, every other command answers 13 Unauthorized "Command <name> requires authentication" and the connection stays usable', async () => {
  const conn = await h.rawConnect(srv.port);
  const probe = 'unauth_probe';
  try {
    const cases = [
      ['find', probe, { find: 'c' }],
      ['insert', probe, { insert: 'c', documents: [{ _id: 1 }] }],
      ['update', probe, { update: 'c', updates: [{ q: {}, u: { $set: { a: 1 } }, upsert: true }] }],
      ['delete', probe, { delete: 'c', deletes: [{ q: {}, limit: 0 }] }],
      ['findAndModify', probe, { findAndModify: 'c', query: {}, update: { $set: { a: 1 } }, upsert: true }],
      ['aggregate', probe, { aggregate: 'c', pipeline: [], cursor: {} }],
      ['count', probe, { count: 'c' }],
      ['distinct', probe, { distinct: 'c', key: 'a' }],
      ['create', probe, { create: 'c' }],
      ['drop', probe, { drop: 'c' }],
      ['createIndexes', probe, { createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }] }],
      ['listCollections', probe, { listCollections: 1 }],
      ['listIndexes', probe, { listIndexes: 'c' }],
      ['dbStats', probe, { dbStats: 1 }],
      ['dropDatabase', probe, { dropDatabase: 1 }],
      ['listDatabases', 'admin', { listDatabases: 1 }],
      ['serverStatus', 'admin', { serverStatus: 1 }],
      ['getParameter', 'admin', { getParameter: 1, logLevel: 1 }],
      ['setParameter', 'admin', { setParameter: 1, logLevel: 0 }],
      ['getCmdLineOpts', 'admin', { getCmdLineOpts: 1 }],
      ['currentOp', 'admin', { currentOp: 1 }],
      ['hostInfo', 'admin', { hostInfo: 1 }],
      ['getLog', 'admin', { getLog: 'startupWarnings' }],
      ['renameCollection', 'admin', { renameCollection: `${probe}.c`, to: `${probe}.d` }],
      ['usersInfo', 'admin', { usersInfo: 1 }],
      ['dropUser', probe, { dropUser: 'someone' }],
    ];
    for (const [name, db, cmd] of cases) {
      const r = await rawCmd(conn, db, cmd);
      assert.equal(r.ok, 0, `unauthenticated ${name} on ${db} should be refused: ${JSON.stringify(r).slice(0, 300)}`);
      assert.equal(r.code, 13, `unauthenticated ${name}: code 13 Unauthorized, got ${JSON.stringify(r).slice(0, 300)}`);
      assert.equal(r.codeName, 'Unauthorized', `${name}: codeName`);
      assert.match(r.errmsg, new RegExp(`Command ${name} requires authentication`), `${name}: message`);
      const p = await rawCmd(conn, 'admin', { ping: 1 });
      assert.equal(p.ok, 1, `the connection stays usable after the refused ${name}`);
    }
  } finally { conn.close(); }
  // The driver sees the same: MongoServerError 13 on an unauthenticated client.
  const e = await denied('an unauthenticated driver find', srv.client.db(probe).collection('c').findOne({}));
  assert.equal(e.codeName, 'Unauthorized');
});

/* ===================================================== localhost exception */

h.test('localhost exception: with no user, a loopback client may create only the first user, only on admin; then it is closed', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    const onTest = await rawCmd(conn, 'test', { createUser: 'early', pwd: 'x', roles: [] });
    assert.equal(onTest.code, 13, `createUser on db test through the localhost exception: 13, got ${JSON.stringify(onTest)}`);
    for (const [db, cmd] of [['admin', { find: 'system.users' }], ['test', { insert: 'c', documents: [{}] }],
      ['admin', { insert: 'c', documents: [{}] }]]) {
      const r = await rawCmd(conn, db, cmd);
      assert.equal(r.code, 13, `the localhost exception allows nothing but createUser: ${JSON.stringify(cmd)} -> ${JSON.stringify(r)}`);
    }
    const first = await rawCmd(conn, 'admin', { createUser: ROOT_USER, pwd: ROOT_PWD, roles: ['root'] });
    assert.equal(first.ok, 1, `the first user on admin through the localhost exception: ${JSON.stringify(first)}`);
    // The exception does not log the connection in.
    const f = await rawCmd(conn, 'admin', { find: 'system.users' });
    assert.equal(f.code, 13, 'creating the first user does not authenticate the connection');
    const second = await rawCmd(conn, 'admin', { createUser: 'second', pwd: 'x', roles: ['root'] });
    assert.equal(second.code, 13, `a second unauthenticated createUser (same connection): 13, got ${JSON.stringify(second)}`);
  } finally { conn.close(); }
  const other = await h.rawConnect(srv.port);
  try {
    const r = await rawCmd(other, 'admin', { createUser: 'third', pwd: 'x', roles: ['root'] });
    assert.equal(r.code, 13, `a second unauthenticated createUser (new connection): 13, got ${JSON.stringify(r)}`);
  } finally { other.close(); }
  const c = await root();
  const users = (await c.db('admin').command({ usersInfo: 1 })).users.map((u) => u.user).sort();
  assert.deepEqual(users, [ROOT_USER], 'only the first user was created');
  assert.ok(!(await dbNames(c)).includes('unauth_probe'), 'nothing an unauthenticated client sent created a database');
});

/* ============================================================ logging in */

h.test('the root user logs in with the default mechanism, SCRAM-SHA-256 and SCRAM-SHA-1; connectionStatus names user and roles', async () => {
  for (const mech of [undefined, 'SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    const c = await login(ROOT_USER, ROOT_PWD, { mech, db: 'appdb' });
    const info = await connStatus(c);
    assert.deepEqual(info.authenticatedUsers.map((u) => ({ user: u.user, db: u.db })),
      [{ user: ROOT_USER, db: 'admin' }], `authenticatedUsers (${mech || 'default'})`);
    assert.deepEqual(sortRoles(info.authenticatedUserRoles), [{ role: 'root', db: 'admin' }],
      `authenticatedUserRoles (${mech || 'default'})`);
    await allowed(`root's find (${mech || 'default'})`, c.db('appdb').collection('c').find().toArray());
  }
});

h.test('currentOp shows an authenticated client\'s operation with effectiveUsers [{user, db}] and its session\'s uid, the SHA-256 of "user@db"', async () => {
  const c = await login(ROOT_USER, ROOT_PWD, { db: 'appdb' });
  const session = c.startSession();
  try {
    const r = await c.db('admin').command({ currentOp: 1, $ownOps: true }, { session });
    const self = r.inprog.find((o) => o.command && o.command.currentOp);
    assert.ok(self, JSON.stringify(r.inprog));
    assert.deepEqual(self.effectiveUsers, [{ user: ROOT_USER, db: 'admin' }]);
    const keys = Object.keys(self);
    assert.equal(keys.indexOf('effectiveUsers'), keys.indexOf('currentOpTime') + 1, 'after currentOpTime, as mongod');
    assert.equal(self.lsid.id.toString('hex'), session.id.id.toString('hex'));
    const digest = crypto.createHash('sha256').update(`${ROOT_USER}@admin`).digest('hex');
    assert.equal(Buffer.from(self.lsid.uid.buffer).toString('hex'), digest);
    // Idle, the connection shows the same user (db.currentOp(true)), and a connection that never logged in none.
    const idle = (await (await root()).db('admin').command({ currentOp: 1, $all: true, active: false, connectionId: self.connectionId })).inprog;
    assert.equal(idle.length, 1, JSON.stringify(idle));
    assert.deepEqual(idle[0].effectiveUsers, [{ user: ROOT_USER, db: 'admin' }]);
    const anon = (await (await root()).db('admin').command({ currentOp: 1, $all: true, active: false, effectiveUsers: { $exists: false } })).inprog;
    assert.ok(anon.every((d) => d.connectionId !== self.connectionId));
  } finally {
    await session.endSession();
  }
});

h.test('a user without inprog lists only its own operations: currentOp {$ownOps: true} and $currentOp (allUsers: false, the default); everyone\'s (plain currentOp, allUsers: true) is 13, as mongod', async () => {
  const worker = await makeUser('opsworker', [{ role: 'readWrite', db: 'appdb' }]);
  const admin = worker.db('admin');
  const mine = (docs) => docs.every((d) => d.effectiveUsers && d.effectiveUsers[0].user === 'opsworker' && d.effectiveUsers[0].db === 'admin');
  await denied('currentOp without $ownOps', admin.command({ currentOp: 1 }));
  await denied('$currentOp with allUsers: true', admin.aggregate([{ $currentOp: { allUsers: true } }]).toArray());
  // Root's connection is open and idle: listed for root, never for the worker.
  const rootAdmin = (await root()).db('admin');
  await rootAdmin.command({ ping: 1 });
  const own = (await allowed('currentOp {$ownOps: true}', admin.command({ currentOp: 1, $ownOps: true, $all: true }))).inprog;
  assert.ok(own.some((d) => d.command && d.command.currentOp), 'its own currentOp');
  assert.ok(mine(own), `only the worker's: ${JSON.stringify(own.map((d) => [d.desc, d.effectiveUsers]))}`);
  const agg = await allowed('$currentOp', admin.aggregate([{ $currentOp: { idleConnections: true } }]).toArray());
  assert.ok(agg.some((d) => d.command && d.command.aggregate === 1), 'its own aggregate');
  assert.ok(mine(agg), `only the worker's: ${JSON.stringify(agg.map((d) => [d.desc, d.effectiveUsers]))}`);
  // Root sees everyone's, the worker's connections among them.
  const everyone = (await rootAdmin.command({ currentOp: 1, $all: true })).inprog;
  assert.ok(everyone.some((d) => d.effectiveUsers && d.effectiveUsers[0].user === 'opsworker'));
  assert.ok(everyone.some((d) => d.effectiveUsers && d.effectiveUsers[0].user === ROOT_USER));
  // Root's own view ($ownOps) leaves the worker out.
  const rootOwn = (await rootAdmin.command({ currentOp: 1, $all: true, $ownOps: true })).inprog;
  assert.ok(rootOwn.length >= 1 && rootOwn.every((d) => d.effectiveUsers && d.effectiveUsers[0].user === ROOT_USER));
  // Idle cursors are matched by their session's uid: the worker's own is listed, root's is not.
  await seed('appdb', 'owncur', [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  const wc = worker.db('appdb').collection('owncur').find({}, { batchSize: 1 });
  const rc = (await root()).db('appdb').collection('owncur').find({}, { batchSize: 1 });
  try {
    await wc.next();
    await rc.next();
    const idle = await allowed('$currentOp idleCursors', admin.aggregate([{ $currentOp: { idleCursors: true } }, { $match: { type: 'idleCursor' } }]).toArray());
    const wuid = crypto.createHash('sha256').update('opsworker@admin').digest('hex');
    assert.equal(idle.filter((d) => d.ns === 'appdb.owncur').length, 1, `only the worker's cursor: ${JSON.stringify(idle)}`);
    assert.ok(idle.every((d) => Buffer.from(d.lsid.uid.buffer).toString('hex') === wuid));
    const all = await rootAdmin.aggregate([{ $currentOp: { idleCursors: true, allUsers: true } }, { $match: { type: 'idleCursor', ns: 'appdb.owncur' } }]).toArray();
    assert.equal(all.length, 2, 'root with allUsers sees both');
  } finally {
    await wc.close();
    await rc.close();
  }
});

h.test('killOp without the killop privilege ends the caller\'s own operations only: another user\'s, a background one or a missing opid is 13, as mongod', async () => {
  const killer = await makeUser('opskiller', [{ role: 'read', db: 'killdb' }]);
  await seed('killdb');
  const rootAdmin = (await root()).db('admin');
  /* A client of user (password pwd) whose finds on killdb.c block in the failpoint until killed. */
  const blocked = async (user, pwd, app) => {
    const c = new MongoClient(`${authUri(user, pwd)}&appName=${app}`, { maxPoolSize: 1 });
    srv.clients.push(c);
    await c.connect();
    const running = c.db('killdb').collection('c').find({}).toArray().then(() => null, (e) => e);
    let ops = [];
    for (let i = 0; i < 2000 && ops.length === 0; i++) {
      ops = (await rootAdmin.command({ currentOp: 1, appName: app, 'command.find': 'c' })).inprog;
      if (ops.length === 0) await h.sleep(5);
    }
    assert.equal(ops.length, 1, `${app}'s find shows in currentOp`);
    return { running, opid: ops[0].opid };
  };
  // Every find blocks (the two below; nothing else in this test runs one) until killed.
  await rootAdmin.command({ configureFailPoint: 'failCommand', mode: 'alwaysOn',
    data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 60000 } });
  try {
    const mine = await blocked('opskiller', pwdOf('opskiller'), 'kill-own');
    const roots = await blocked(ROOT_USER, ROOT_PWD, 'kill-root');
    const admin = killer.db('admin');
    // Someone else's operation, and an opid nothing runs under: 13 "Unauthorized", and root's find runs on.
    const other = await denied('killOp of root\'s find', admin.command({ killOp: 1, op: roots.opid }));
    assert.equal(other.codeName, 'Unauthorized');
    await denied('killOp of a missing opid', admin.command({ killOp: 1, op: 2147480000 }));
    assert.equal((await rootAdmin.command({ currentOp: 1, opid: roots.opid })).inprog.length, 1, 'root\'s find still runs');
    // An opid past 32 bits: mongod's 26823.
    await h.expectCode(admin.command({ killOp: 1, op: 2 ** 40 }), 26823);
    // Its own operation, from another connection of the same user: killed, as mongod's coauthorized clients.
    const r = await allowed('killOp of its own find', admin.command({ killOp: 1, op: mine.opid }));
    assert.equal(r.info, 'attempting to kill op');
    const err = await mine.running;
    assert.ok(err, 'the killed find fails');
    assert.equal(err.code, 11601, err.message);
    // With the privilege (root), anyone's; a missing opid is no error.
    assert.equal((await rootAdmin.command({ killOp: 1, op: roots.opid })).ok, 1);
    assert.equal((await roots.running).code, 11601);
    assert.equal((await rootAdmin.command({ killOp: 1, op: 2147480000 })).ok, 1);
  } finally {
    await rootAdmin.command({ configureFailPoint: 'failCommand', mode: 'off' });
  }
  // An unauthenticated connection may kill nothing.
  const conn = await h.rawConnect(srv.port);
  try {
    assert.equal((await rawCmd(conn, 'admin', { killOp: 1, op: 1 })).code, 13);
  } finally { conn.close(); }
});

h.test('a wrong password or an unknown user fails with 18 AuthenticationFailed (both mechanisms); the server keeps serving', async () => {
  for (const mech of [undefined, 'SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    await expectLoginFails(ROOT_USER, 'not-the-password', { mech }, `root with a wrong password (${mech || 'default'})`);
    await expectLoginFails('nosuchuser', 'whatever', { mech }, `an unknown user (${mech || 'default'})`);
  }
  await expectLoginFails(ROOT_USER, ROOT_PWD, { source: 'test' }, 'root with authSource=test (root lives on admin)');
  assert.equal((await (await root()).db('admin').command({ ping: 1 })).ok, 1);
});

h.test('raw saslStart/saslContinue conversations log a connection in (SCRAM-SHA-256 and SCRAM-SHA-1), verified by the server signature', async () => {
  for (const mech of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    const conn = await h.rawConnect(srv.port);
    try {
      const before = await rawCmd(conn, 'admin', { find: 'system.users' });
      assert.equal(before.code, 13, `before logging in, find on admin.system.users answers 13: ${JSON.stringify(before).slice(0, 200)}`);
      const r = await rawLogin(conn, mech, ROOT_USER, ROOT_PWD);
      assert.equal(r.ok, 1, `${mech} conversation: ${JSON.stringify(r)}`);
      assert.equal(r.done, true, `${mech}: the conversation ends done`);
      const st = await rawCmd(conn, 'admin', { connectionStatus: 1 });
      assert.deepEqual(st.authInfo.authenticatedUsers.map((u) => u.user), [ROOT_USER], `${mech}: connectionStatus`);
      const f = await rawCmd(conn, 'admin', { find: 'system.users', filter: { _id: `admin.${ROOT_USER}` } });
      assert.equal(f.ok, 1, `${mech}: the connection is authenticated: ${JSON.stringify(f).slice(0, 300)}`);
    } finally { conn.close(); }
  }
});

h.test('speculative authentication in hello (SCRAM-SHA-256) and isMaster (SCRAM-SHA-1) logs in with one fewer round trip', async () => {
  for (const [helloName, mech] of [['hello', 'SCRAM-SHA-256'], ['isMaster', 'SCRAM-SHA-1']]) {
    const conn = await h.rawConnect(srv.port);
    try {
      const sc = new ScramClient(mech, ROOT_USER, ROOT_PWD);
      const hello = await rawCmd(conn, 'admin', {
        [helloName]: 1,
        speculativeAuthenticate: { saslStart: 1, mechanism: mech, payload: sc.first(), db: 'admin', options: { skipEmptyExchange: true } },
      });
      assert.equal(hello.ok, 1, JSON.stringify(hello).slice(0, 300));
      assert.ok(hello.speculativeAuthenticate, `${helloName} answers speculativeAuthenticate (${mech}): ${JSON.stringify(hello).slice(0, 400)}`);
      const r = await scramContinue(conn, 'admin', sc, hello.speculativeAuthenticate);
      assert.equal(r.ok, 1, `${mech}: saslContinue after the speculative step: ${JSON.stringify(r)}`);
      const st = await rawCmd(conn, 'admin', { connectionStatus: 1 });
      assert.deepEqual(st.authInfo.authenticatedUsers.map((u) => u.user), [ROOT_USER], `${mech}: logged in speculatively`);
    } finally { conn.close(); }
  }
  // A speculative attempt for an unknown user does not fail the hello; the connection stays unauthenticated.
  const conn = await h.rawConnect(srv.port);
  try {
    const sc = new ScramClient('SCRAM-SHA-256', 'nosuchuser', 'x');
    const hello = await rawCmd(conn, 'admin', {
      hello: 1, speculativeAuthenticate: { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: sc.first(), db: 'admin' },
    });
    assert.equal(hello.ok, 1, 'hello answers even though its speculative authentication fails');
    assert.equal(hello.speculativeAuthenticate, undefined, 'no speculativeAuthenticate in the reply of a failed attempt');
    const st = await rawCmd(conn, 'admin', { connectionStatus: 1 });
    assert.deepEqual(st.authInfo.authenticatedUsers, []);
  } finally { conn.close(); }
});

h.test('a wrong SCRAM proof answers 18 AuthenticationFailed; the connection stays usable and unauthenticated', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    const bad = await rawLogin(conn, 'SCRAM-SHA-256', ROOT_USER, ROOT_PWD, { badProof: true });
    assert.equal(bad.ok, 0, 'a tampered proof is refused');
    assert.equal(bad.code, 18, `a tampered proof: 18, got ${JSON.stringify(bad)}`);
    assert.equal((await rawCmd(conn, 'admin', { ping: 1 })).ok, 1, 'the connection stays usable');
    assert.equal((await rawCmd(conn, 'admin', { find: 'system.users' })).code, 13,
      'after the refused proof the connection is still unauthenticated (find answers 13)');
    const good = await rawLogin(conn, 'SCRAM-SHA-256', ROOT_USER, ROOT_PWD);
    assert.equal(good.ok, 1, `the right proof on the same connection then works: ${JSON.stringify(good)}`);
  } finally { conn.close(); }
});

/* ====================================================== user management */

h.test('createUser stores roles as {role, db}, customData and both SCRAM mechanisms; usersInfo answers MongoDB\'s shape', async () => {
  const c = await root();
  await c.db('appdb').command({
    createUser: 'alice', pwd: pwdOf('alice'), roles: ['readWrite', { role: 'read', db: 'other' }], customData: { team: 'blue' },
  });
  const r = await c.db('appdb').command({ usersInfo: { user: 'alice', db: 'appdb' } });
  assert.equal(r.users.length, 1, JSON.stringify(r));
  const u = r.users[0];
  assert.equal(u._id, 'appdb.alice');
  assert.equal(u.user, 'alice');
  assert.equal(u.db, 'appdb');
  assert.ok(u.userId && u.userId.sub_type === 4, `userId is a UUID: ${JSON.stringify(u.userId)}`);
  assert.deepEqual(sortRoles(u.roles), [{ role: 'read', db: 'other' }, { role: 'readWrite', db: 'appdb' }]);
  assert.deepEqual(u.customData, { team: 'blue' });
  assert.deepEqual([...u.mechanisms].sort(), ['SCRAM-SHA-1', 'SCRAM-SHA-256'], 'default mechanisms: both');
  assert.equal(u.credentials, undefined, 'no credentials without showCredentials');
  assert.equal(u.pwd, undefined);
  const a = await login('alice', pwdOf('alice'), { source: 'appdb' });
  const info = await connStatus(a);
  assert.deepEqual(info.authenticatedUsers.map((x) => ({ user: x.user, db: x.db })), [{ user: 'alice', db: 'appdb' }]);
  assert.deepEqual(sortRoles(info.authenticatedUserRoles), [{ role: 'read', db: 'other' }, { role: 'readWrite', db: 'appdb' }]);
  assert.equal(info.authenticatedUserPrivileges, undefined, 'privileges only with showPrivileges');
  // showPrivileges: what the roles grant, per resource (as usersInfo's inheritedPrivileges).
  const sp = (await a.db('appdb').command({ connectionStatus: 1, showPrivileges: true })).authInfo;
  const onDb = (db) => sp.authenticatedUserPrivileges.find((p) => p.resource.db === db && p.resource.collection === '');
  assert.ok(onDb('appdb') && onDb('appdb').actions.includes('insert'), JSON.stringify(sp));
  assert.ok(onDb('other') && onDb('other').actions.includes('find') && !onDb('other').actions.includes('insert'));
});

h.test('createUser refuses an existing user (51003), an unknown role (31) and admin-only roles outside admin (31)', async () => {
  const c = await root();
  await c.db('cudb').command({ createUser: 'dup', pwd: 'p1', roles: ['read'] });
  const exists = await h.expectCode(c.db('cudb').command({ createUser: 'dup', pwd: 'p2', roles: ['read'] }), 51003,
    /^User "dup@cudb" already exists$/);
  // mongod raises ErrorCodes::Error(51003), which has no name of its own (helper-67: it was UserAlreadyExists).
  assert.equal(exists.codeName, 'Location51003');
  const bad = [
    ['an unknown role', { createUser: 'bad1', pwd: 'p', roles: ['nosuchrole'] }],
    ['an unknown role on another db', { createUser: 'bad2', pwd: 'p', roles: [{ role: 'nosuchrole', db: 'other' }] }],
    ['root on db test', { createUser: 'bad3', pwd: 'p', roles: [{ role: 'root', db: 'test' }] }],
    ['readAnyDatabase on cudb', { createUser: 'bad4', pwd: 'p', roles: [{ role: 'readAnyDatabase', db: 'cudb' }] }],
    ['clusterMonitor on cudb', { createUser: 'bad5', pwd: 'p', roles: ['clusterMonitor'] }],
    ['userAdminAnyDatabase on cudb', { createUser: 'bad6', pwd: 'p', roles: ['userAdminAnyDatabase'] }],
    ['readWriteAnyDatabase on cudb', { createUser: 'bad7', pwd: 'p', roles: ['readWriteAnyDatabase'] }],
  ];
  for (const [what, cmd] of bad) {
    try {
      await h.expectCode(c.db('cudb').command(cmd), 31);
    } catch (e) {
      e.message = `createUser with ${what} should answer 31 RoleNotFound: ${e.message}`;
      throw e;
    }
  }
  const names = (await c.db('cudb').command({ usersInfo: 1 })).users.map((u) => u.user);
  assert.deepEqual(names, ['dup'], 'no refused user was created');
  const dup = (await c.db('cudb').command({ usersInfo: 'dup' })).users[0];
  assert.deepEqual(sortRoles(dup.roles), [{ role: 'read', db: 'cudb' }], 'the existing user is unchanged');
});

h.test('usersInfo answers the forms 1, "name", {user, db}, [..] and {forAllDBs: true}; showCredentials adds credentials', async () => {
  const c = await root();
  for (const [db, u] of [['ui', 'u1'], ['ui', 'u2'], ['ui2', 'u3']]) {
    await c.db(db).command({ createUser: u, pwd: pwdOf(u), roles: ['read'] });
  }
  const ids = (r) => r.users.map((u) => u._id).sort();
  assert.deepEqual(ids(await c.db('ui').command({ usersInfo: 1 })), ['ui.u1', 'ui.u2'], 'usersInfo: 1');
  assert.deepEqual(ids(await c.db('ui').command({ usersInfo: 'u1' })), ['ui.u1'], "usersInfo: 'u1'");
  assert.deepEqual(ids(await c.db('admin').command({ usersInfo: { user: 'u3', db: 'ui2' } })), ['ui2.u3'], 'usersInfo: {user, db}');
  assert.deepEqual(ids(await c.db('ui').command({ usersInfo: ['u1', { user: 'u3', db: 'ui2' }] })), ['ui.u1', 'ui2.u3'], 'usersInfo: [..]');
  assert.deepEqual(ids(await c.db('ui').command({ usersInfo: 'nobody' })), [], 'an unknown name: no users, ok');
  const all = ids(await c.db('admin').command({ usersInfo: { forAllDBs: true } }));
  for (const id of ['admin.root', 'ui.u1', 'ui.u2', 'ui2.u3']) {
    assert.ok(all.includes(id), `forAllDBs lists ${id}: ${JSON.stringify(all)}`);
  }
  const plain = (await c.db('ui').command({ usersInfo: 'u1' })).users[0];
  assert.equal(plain.credentials, undefined, 'no credentials by default');
  const withCreds = (await c.db('ui').command({ usersInfo: 'u1', showCredentials: true })).users[0];
  assert.ok(withCreds.credentials, `showCredentials: true adds credentials: ${JSON.stringify(withCreds)}`);
  assert.deepEqual(Object.keys(withCreds.credentials).sort(), ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
  assert.ok(!JSON.stringify(withCreds).includes(pwdOf('u1')), 'the credentials never hold the password');
});

function b64(v) {
  if (typeof v === 'string') return v;
  return bin(v).toString('base64');
}

function checkCredential(doc, mech, user, pwd) {
  const cr = doc.credentials[mech];
  assert.ok(cr, `${doc._id}: credentials.${mech} present: ${JSON.stringify(doc.credentials)}`);
  assert.ok(Number.isInteger(cr.iterationCount) && cr.iterationCount >= 4096, `${mech} iterationCount ${cr.iterationCount}`);
  for (const f of ['salt', 'storedKey', 'serverKey']) assert.ok(cr[f], `${mech}.${f} present`);
  const keys = scramKeys(mech, user, pwd, Buffer.from(b64(cr.salt), 'base64'), cr.iterationCount);
  assert.equal(b64(cr.storedKey), keys.storedKey.toString('base64'), `${mech} storedKey = H(HMAC(SaltedPassword, "Client Key"))`);
  assert.equal(b64(cr.serverKey), keys.serverKey.toString('base64'), `${mech} serverKey = HMAC(SaltedPassword, "Server Key")`);
}

h.test('users live in admin.system.users as {_id, userId, user, db, credentials, roles} with SCRAM keys and never the password', async () => {
  const c = await root();
  const pwd = 'Plain-Text-Canary-9431';
  await c.db('stdb').command({ createUser: 'canary', pwd, roles: ['readWrite'] });
  await c.db('stdb').command({ createUser: 'sha1only', pwd: pwdOf('sha1only'), roles: ['read'], mechanisms: ['SCRAM-SHA-1'] });
  const sys = c.db('admin').collection('system.users');
  const doc = await sys.findOne({ _id: 'stdb.canary' });
  assert.ok(doc, 'root reads the user from admin.system.users');
  assert.equal(doc.user, 'canary');
  assert.equal(doc.db, 'stdb');
  assert.ok(doc.userId && doc.userId.sub_type === 4, 'userId is a UUID');
  assert.deepEqual(sortRoles(doc.roles), [{ role: 'readWrite', db: 'stdb' }]);
  assert.equal(doc.pwd, undefined, 'no pwd field');
  assert.ok(!JSON.stringify(doc).includes(pwd), `the password appears nowhere in ${JSON.stringify(doc)}`);
  assert.deepEqual(Object.keys(doc.credentials).sort(), ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
  checkCredential(doc, 'SCRAM-SHA-1', 'canary', pwd);
  checkCredential(doc, 'SCRAM-SHA-256', 'canary', pwd);
  const s1 = await sys.findOne({ _id: 'stdb.sha1only' });
  assert.deepEqual(Object.keys(s1.credentials), ['SCRAM-SHA-1'], 'mechanisms: [SCRAM-SHA-1] stores only SCRAM-SHA-1');
  checkCredential(s1, 'SCRAM-SHA-1', 'sha1only', pwdOf('sha1only'));
  const n = await sys.countDocuments({ _id: { $in: ['admin.root', 'stdb.canary', 'stdb.sha1only'] } });
  assert.equal(n, 3, 'every user, whatever its db, is a document of admin.system.users');
});

h.test('a user created with mechanisms [SCRAM-SHA-1] logs in with SCRAM-SHA-1 (also negotiated by default) and fails with SCRAM-SHA-256 (18)', async () => {
  await (await root()).db('stdb').command({ createUser: 'sha1only', pwd: pwdOf('sha1only'), roles: ['read'], mechanisms: ['SCRAM-SHA-1'] })
    .catch((e) => { if (e.code !== 51003) throw e; }); // the previous test creates it too
  const c = await login('sha1only', pwdOf('sha1only'), { source: 'stdb', mech: 'SCRAM-SHA-1' });
  assert.deepEqual((await connStatus(c)).authenticatedUsers.map((u) => u.user), ['sha1only']);
  await expectLoginFails('sha1only', pwdOf('sha1only'), { source: 'stdb', mech: 'SCRAM-SHA-256' },
    'a SCRAM-SHA-1-only user with authMechanism=SCRAM-SHA-256');
  const info = (await (await root()).db('stdb').command({ usersInfo: 'sha1only' })).users[0];
  assert.deepEqual(info.mechanisms, ['SCRAM-SHA-1']);
  // Without authMechanism the driver asks hello for saslSupportedMechs and picks SCRAM-SHA-1.
  const conn = await h.rawConnect(srv.port);
  try {
    const hello = await rawCmd(conn, 'admin', { hello: 1, saslSupportedMechs: 'stdb.sha1only' });
    assert.deepEqual(hello.saslSupportedMechs, ['SCRAM-SHA-1'], `hello saslSupportedMechs: ${JSON.stringify(hello).slice(0, 300)}`);
  } finally { conn.close(); }
  const d = await login('sha1only', pwdOf('sha1only'), { source: 'stdb' });
  assert.deepEqual((await connStatus(d)).authenticatedUsers.map((u) => u.user), ['sha1only'], 'default mechanism negotiation');
});

h.test('updateUser with a new pwd: the old password then fails (18) and the new one works; roles and customData are replaced', async () => {
  const c = await root();
  await c.db('updb').command({ createUser: 'bob', pwd: 'old-pass-1', roles: ['read'], customData: { v: 1 } });
  await login('bob', 'old-pass-1', { source: 'updb' });
  await c.db('updb').command({ updateUser: 'bob', pwd: 'new-pass-2' });
  for (const mech of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    await expectLoginFails('bob', 'old-pass-1', { source: 'updb', mech }, `bob's old password after updateUser (${mech})`);
    await login('bob', 'new-pass-2', { source: 'updb', mech });
  }
  const doc = await c.db('admin').collection('system.users').findOne({ _id: 'updb.bob' });
  assert.ok(!JSON.stringify(doc).includes('new-pass-2'), 'the new password is not stored either');
  checkCredential(doc, 'SCRAM-SHA-256', 'bob', 'new-pass-2');
  await c.db('updb').command({ updateUser: 'bob', roles: ['readWrite', { role: 'read', db: 'other' }], customData: { v: 2 } });
  const u = (await c.db('updb').command({ usersInfo: 'bob' })).users[0];
  assert.deepEqual(sortRoles(u.roles), [{ role: 'read', db: 'other' }, { role: 'readWrite', db: 'updb' }], 'updateUser roles replace');
  assert.deepEqual(u.customData, { v: 2 });
  await h.expectCode(c.db('updb').command({ updateUser: 'nobody', pwd: 'x' }), 11);
});

/*
 * SASLprep (RFC 4013) of SCRAM-SHA-256 passwords: MongoDB's auth spec,
 * SCRAM-SHA-256 prose test step 4. mongod builds a user's SCRAM-SHA-256
 * credential from the SASLprep'd password (buildCredentials: icuSaslPrep) and
 * never prepares user names. The Node driver 7 SASLpreps the password itself
 * (@mongodb-js/saslprep, always loaded), so these logins go through exactly
 * what a SASLprep-ing client sends. The raw ScramClient of this file does no
 * SASLprep: given "IV" it is what any such client sends for "\u2163".
 */
h.test('SASLprep: users IX/"IX" and "\\u2168"/"\\u2163" (SCRAM-SHA-256) log in as IX/IX, IX/"I\\u00ADX", "\\u2168"/"IV", "\\u2168"/"I\\u00ADV" (auth spec prose test, step 4)', async () => {
  const c = await root();
  const spdb = c.db('saslprepdb');
  await spdb.command({ createUser: 'IX', pwd: 'IX', roles: ['read'], mechanisms: ['SCRAM-SHA-256'] });
  await spdb.command({ createUser: '\u2168', pwd: '\u2163', roles: ['read'], mechanisms: ['SCRAM-SHA-256'] });
  for (const [user, pwd] of [['IX', 'IX'], ['IX', 'I\u00ADX'], ['\u2168', 'IV'], ['\u2168', 'I\u00ADV'], ['\u2168', '\u2163']]) {
    const cl = await login(user, pwd, { source: 'saslprepdb', mech: 'SCRAM-SHA-256' });
    assert.deepEqual((await connStatus(cl)).authenticatedUsers.map((u) => [u.user, u.db]), [[user, 'saslprepdb']],
      `logged in as ${JSON.stringify(user)} with ${JSON.stringify(pwd)}: the user name is not SASLprep'd`);
    await cl.db('saslprepdb').collection('c').findOne({});
  }
  // The stored credential is that of the prepared password "IV", and the user stays "\u2168" (not "IX").
  const doc = await c.db('admin').collection('system.users').findOne({ _id: 'saslprepdb.\u2168' });
  assert.ok(doc, 'the user is stored under its name as given');
  assert.equal(doc.user, '\u2168');
  checkCredential(doc, 'SCRAM-SHA-256', '\u2168', 'IV');
  await expectLoginFails('\u2168', 'IX', { source: 'saslprepdb', mech: 'SCRAM-SHA-256' }, '"\\u2168" with IX\'s password');
  await expectLoginFails('IX', 'IV', { source: 'saslprepdb', mech: 'SCRAM-SHA-256' }, 'IX with "\\u2168"\'s password');
  // A raw client: the prepared password logs in, the unprepared one does not (the server never sees a password).
  const conn = await h.rawConnect(srv.port);
  try {
    const ok = await rawLogin(conn, 'SCRAM-SHA-256', '\u2168', 'IV', { db: 'saslprepdb' });
    assert.equal(ok.ok, 1, `raw login "\\u2168"/"IV": ${JSON.stringify(ok)}`);
    const bad = await rawLogin(conn, 'SCRAM-SHA-256', '\u2168', '\u2163', { db: 'saslprepdb' });
    assert.equal(bad.code, 18, `raw login with the unprepared "\\u2163": ${JSON.stringify(bad)}`);
  } finally { conn.close(); }
  // updateUser prepares a new password the same way.
  await spdb.command({ updateUser: 'IX', pwd: '\u2163' });
  await login('IX', 'I\u00ADV', { source: 'saslprepdb', mech: 'SCRAM-SHA-256' });
  await expectLoginFails('IX', 'IX', { source: 'saslprepdb', mech: 'SCRAM-SHA-256' }, 'IX\'s old password after updateUser');
  checkCredential(await c.db('admin').collection('system.users').findOne({ _id: 'saslprepdb.IX' }), 'SCRAM-SHA-256', 'IX', 'IV');
});

h.test('SASLprep: a password it refuses fails createUser and updateUser with mongod\'s 50692 (prohibited, bidi); SCRAM-SHA-1 alone takes it unprepared', async () => {
  const c = await root();
  const spdb = c.db('saslprepdb');
  const cases = [
    ['pass\u0000word', 'U_STRINGPREP_PROHIBITED_ERROR'], // U+0000, RFC 4013 2.3 (C.2.1)
    ['bell\u0007', 'U_STRINGPREP_PROHIBITED_ERROR'], // a control character
    ['\u0627\u0031', 'U_STRINGPREP_CHECK_BIDI_ERROR'], // RandALCat first, not last (RFC 3454 6)
  ];
  for (const [pwd, icu] of cases) {
    for (const mechanisms of [undefined, ['SCRAM-SHA-256']]) {
      const cmd = { createUser: 'badpw', pwd, roles: ['read'] };
      if (mechanisms) cmd.mechanisms = mechanisms;
      const e = await h.expectCode(spdb.command(cmd), 50692);
      assert.equal(e.codeName, 'Location50692');
      assert.equal(e.errmsg, `Error preflighting normalization: ${icu}`);
    }
    assert.deepEqual((await spdb.command({ usersInfo: 'badpw' })).users, [], 'no user is created');
    const e = await h.expectCode(spdb.command({ updateUser: 'IX', pwd }), 50692);
    assert.equal(e.errmsg, `Error preflighting normalization: ${icu}`);
  }
  // IX keeps its password ("\u2163" from the test before, or its first one if run alone).
  const doc = await c.db('admin').collection('system.users').findOne({ _id: 'saslprepdb.IX' });
  assert.ok(doc && doc.credentials['SCRAM-SHA-256'], 'IX still has its SCRAM-SHA-256 credential');
  // SCRAM-SHA-1 hashes MD5(user:mongo:password) with no SASLprep: mongod accepts the password.
  await spdb.command({ createUser: 'sha1bell', pwd: 'bell\u0007', roles: ['read'], mechanisms: ['SCRAM-SHA-1'] });
  await login('sha1bell', 'bell\u0007', { source: 'saslprepdb', mech: 'SCRAM-SHA-1' });
});

h.test('grantRolesToUser and revokeRolesFromUser change what the user may do', async () => {
  const c = await root();
  await seed('grdb');
  await c.db('grdb').command({ createUser: 'gus', pwd: pwdOf('gus'), roles: ['read'] });
  let g = await login('gus', pwdOf('gus'), { source: 'grdb' });
  await denied('insert with read only', g.db('grdb').collection('c').insertOne({ _id: 'g1' }));
  await c.db('grdb').command({ grantRolesToUser: 'gus', roles: ['readWrite', { role: 'read', db: 'grdb2' }] });
  let u = (await c.db('grdb').command({ usersInfo: 'gus' })).users[0];
  assert.deepEqual(sortRoles(u.roles), [{ role: 'read', db: 'grdb' }, { role: 'read', db: 'grdb2' }, { role: 'readWrite', db: 'grdb' }]);
  g = await login('gus', pwdOf('gus'), { source: 'grdb' });
  await allowed('insert after grantRolesToUser readWrite', g.db('grdb').collection('c').insertOne({ _id: 'g2' }));
  await c.db('grdb').command({ revokeRolesFromUser: 'gus', roles: ['readWrite'] });
  u = (await c.db('grdb').command({ usersInfo: 'gus' })).users[0];
  assert.deepEqual(sortRoles(u.roles), [{ role: 'read', db: 'grdb' }, { role: 'read', db: 'grdb2' }]);
  g = await login('gus', pwdOf('gus'), { source: 'grdb' });
  await denied('insert after revokeRolesFromUser readWrite', g.db('grdb').collection('c').insertOne({ _id: 'g3' }));
  await allowed('find with the remaining read role', g.db('grdb').collection('c').find().toArray());
  await h.expectCode(c.db('grdb').command({ grantRolesToUser: 'gus', roles: ['nosuchrole'] }), 31);
});

h.test('dropUser removes the login (then 18); a missing user answers 11 UserNotFound; dropAllUsersFromDatabase answers n', async () => {
  const c = await root();
  await c.db('dudb').command({ createUser: 'd1', pwd: pwdOf('d1'), roles: ['read'] });
  await c.db('dudb').command({ createUser: 'd2', pwd: pwdOf('d2'), roles: ['read'] });
  await c.db('dudb').command({ createUser: 'd3', pwd: pwdOf('d3'), roles: ['read'] });
  await c.db('dudb2').command({ createUser: 'keep', pwd: pwdOf('keep'), roles: ['read'] });
  await login('d1', pwdOf('d1'), { source: 'dudb' });
  assert.equal((await c.db('dudb').command({ dropUser: 'd1' })).ok, 1);
  await expectLoginFails('d1', pwdOf('d1'), { source: 'dudb' }, 'a dropped user');
  await h.expectCode(c.db('dudb').command({ dropUser: 'd1' }), 11);
  await h.expectCode(c.db('dudb').command({ dropUser: 'neverexisted' }), 11);
  const r = await c.db('dudb').command({ dropAllUsersFromDatabase: 1 });
  assert.equal(r.n, 2, `dropAllUsersFromDatabase answers n = 2: ${JSON.stringify(r)}`);
  assert.deepEqual((await c.db('dudb').command({ usersInfo: 1 })).users, []);
  assert.equal(await c.db('admin').collection('system.users').countDocuments({ db: 'dudb' }), 0);
  await expectLoginFails('d2', pwdOf('d2'), { source: 'dudb' }, 'a user dropped by dropAllUsersFromDatabase');
  await login('keep', pwdOf('keep'), { source: 'dudb2' });
});

h.test('a dropped user leaves its open connections, and a user created again under its name is another user (mongod\'s userId check)', async () => {
  // Found by helper-67: a connection stayed logged in after dropUser and, once the name was created
  // again (another password, another role), read with the new user's privileges.
  const c = await root();
  await seed('reudb');
  await c.db('reudb').collection('c').insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: 10 + i })));
  await c.db('reudb').command({ createUser: 'victim', pwd: pwdOf('victim'), roles: ['readWrite'] });
  const v = await login('victim', pwdOf('victim'), { source: 'reudb' });
  const vdb = v.db('reudb');
  const first = await vdb.command({ find: 'c', batchSize: 1 });
  assert.deepEqual((await connStatus(v)).authenticatedUsers, [{ user: 'victim', db: 'reudb' }]);
  await c.db('reudb').command({ dropUser: 'victim' });
  await denied('find after dropUser', vdb.collection('c').find().toArray());
  assert.deepEqual((await connStatus(v)).authenticatedUsers, [], 'the dropped user is off the connection');
  await c.db('reudb').command({ createUser: 'victim', pwd: 'another-password-1', roles: ['read'] });
  await denied('find as the old user after the name was created again', vdb.collection('c').find().toArray());
  await denied('getMore of the old user\'s cursor', vdb.command({ getMore: h.cursorId(first.cursor.id), collection: 'c' }));
  assert.deepEqual((await connStatus(v)).authenticatedUsers, []);
  // The new user logs in with its own password, and only that.
  await expectLoginFails('victim', pwdOf('victim'), { source: 'reudb' }, 'the old password');
  const n = await login('victim', 'another-password-1', { source: 'reudb' });
  assert.equal((await n.db('reudb').collection('c').find().toArray()).length, 22);
  // A role change reloads the user but keeps it on the connection: the same userId.
  await c.db('reudb').command({ grantRolesToUser: 'victim', roles: ['readWrite'] });
  await allowed('the new user keeps its connection across a role change', n.db('reudb').collection('c').insertOne({ _id: 'n1' }));
});

h.test('user and role commands: an unknown field is 40415; digestPassword false is pwd pre-digested (SCRAM-SHA-1 only), 2 with SCRAM-SHA-256 (helper-67)', async () => {
  const c = await root();
  const db = c.db('idldb');
  for (const [cmd, field] of [
    [{ createUser: 'uf', pwd: 'x', roles: [], foo: 1 }, 'createUser.foo'],
    [{ usersInfo: 1, foo: 1 }, 'usersInfo.foo'],
    [{ createRole: 'rf', privileges: [], roles: [], bar: true }, 'createRole.bar'],
    [{ rolesInfo: 1, nope: 1 }, 'rolesInfo.nope'],
    [{ dropUser: 'nobody', extra: 1 }, 'dropUser.extra'],
  ]) {
    await h.expectCode(db.command(cmd), 40415, new RegExp(`^BSON field '${field.replace('.', '\\.')}' is an unknown field\\.$`));
  }
  assert.deepEqual((await db.command({ usersInfo: 'uf' })).users, [], 'the refused createUser created nothing');
  // Generic arguments and the documented options pass.
  await db.command({ createUser: 'okf', pwd: pwdOf('okf'), roles: [], customData: { a: 1 }, mechanisms: ['SCRAM-SHA-256'],
    comment: 'c', writeConcern: { w: 1 } });
  await db.command({ usersInfo: 'okf', showCredentials: true, showCustomData: true, showPrivileges: true });
  // digestPassword: false with SCRAM-SHA-256 (the default mechanisms include it) is 2 BadValue.
  await h.expectCode(db.command({ createUser: 'dg', pwd: 'x', roles: [], digestPassword: false }), 2,
    /^Use of SCRAM-SHA-256 requires undigested passwords$/);
  // With SCRAM-SHA-1 only, pwd is taken as already digested: hex MD5("user:mongo:password").
  const digest = require('node:crypto').createHash('md5').update('dg:mongo:plain-pw-1').digest('hex');
  await db.command({ createUser: 'dg', pwd: digest, roles: ['read'], mechanisms: ['SCRAM-SHA-1'], digestPassword: false });
  await login('dg', 'plain-pw-1', { source: 'idldb', mech: 'SCRAM-SHA-1' });
  await expectLoginFails('dg', digest, { source: 'idldb', mech: 'SCRAM-SHA-1' }, 'the digest itself as the password');
  await db.command({ updateUser: 'dg', pwd: require('node:crypto').createHash('md5').update('dg:mongo:plain-pw-2').digest('hex'),
    digestPassword: false, mechanisms: ['SCRAM-SHA-1'] });
  await login('dg', 'plain-pw-2', { source: 'idldb', mech: 'SCRAM-SHA-1' });
});

h.test('logout on the authentication database leaves the connection unauthenticated', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    const li = await rawLogin(conn, 'SCRAM-SHA-256', ROOT_USER, ROOT_PWD);
    assert.equal(li.ok, 1, `root logs in on a raw connection: ${JSON.stringify(li)}`);
    assert.equal((await rawCmd(conn, 'appdb', { find: 'c' })).ok, 1, 'authenticated find');
    const out = await rawCmd(conn, 'admin', { logout: 1 });
    assert.equal(out.ok, 1, JSON.stringify(out));
    const st = await rawCmd(conn, 'admin', { connectionStatus: 1 });
    assert.deepEqual(st.authInfo.authenticatedUsers, [], 'no user after logout');
    assert.deepEqual(st.authInfo.authenticatedUserRoles, [], 'no roles after logout');
    const f = await rawCmd(conn, 'appdb', { find: 'c' });
    assert.equal(f.code, 13, `find after logout: 13, got ${JSON.stringify(f).slice(0, 200)}`);
    assert.equal((await rawLogin(conn, 'SCRAM-SHA-1', ROOT_USER, ROOT_PWD)).ok, 1, 'the connection can log in again');
    assert.equal((await rawCmd(conn, 'appdb', { find: 'c' })).ok, 1, 'find after logging in again');
  } finally { conn.close(); }
});

h.test('one user per connection, as mongod 8.0: another user\'s correct password answers 5626701 (same database) or 5626702 (another), the first login stays; the same user logs in again', async () => {
  await makeUser('second', ['read'], { login: false });
  await makeUser('elsewhere', ['read'], { db: 'otherauthdb', login: false });
  const conn = await h.rawConnect(srv.port);
  try {
    assert.equal((await rawLogin(conn, 'SCRAM-SHA-256', ROOT_USER, ROOT_PWD)).ok, 1);
    const same = await rawLogin(conn, 'SCRAM-SHA-256', 'second', pwdOf('second'));
    assert.equal(same.code, 5626701, JSON.stringify(same));
    assert.equal(same.errmsg, `Each client connection may only be authenticated once. Previously authenticated as: ${ROOT_USER}@admin`);
    const other = await rawLogin(conn, 'SCRAM-SHA-1', 'elsewhere', pwdOf('elsewhere'), { db: 'otherauthdb' });
    assert.equal(other.code, 5626702, JSON.stringify(other));
    assert.equal(other.errmsg, `Client has attempted to authenticate on multiple databases.Already authenticated as: ${ROOT_USER}@admin`);
    const wrong = await rawLogin(conn, 'SCRAM-SHA-256', 'second', 'not-the-password');
    assert.equal(wrong.code, 18, 'a wrong password is still 18 first');
    const st = await rawCmd(conn, 'admin', { connectionStatus: 1 });
    assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: ROOT_USER, db: 'admin' }], 'still root');
    assert.equal((await rawCmd(conn, 'admin', { setParameter: 1, logLevel: 0 })).ok, 1, 'with root\'s privileges');
    assert.equal((await rawLogin(conn, 'SCRAM-SHA-1', ROOT_USER, ROOT_PWD)).ok, 1, 'the same user may log in again');
    assert.equal((await rawCmd(conn, 'admin', { logout: 1 })).ok, 1);
    assert.equal((await rawLogin(conn, 'SCRAM-SHA-256', 'second', pwdOf('second'))).ok, 1, 'after logout another user may');
  } finally { conn.close(); }
});

h.test('a user may always run usersInfo on themselves, but not on another user (13)', async () => {
  const r = await makeUser('selfie', ['read'], { db: 'selfdb' });
  const me = await allowed('usersInfo on oneself', r.db('selfdb').command({ usersInfo: 'selfie' }));
  assert.deepEqual(me.users.map((u) => u._id), ['selfdb.selfie']);
  const me2 = await allowed('usersInfo {user, db} on oneself from admin', r.db('admin').command({ usersInfo: { user: 'selfie', db: 'selfdb' } }));
  assert.equal(me2.users.length, 1);
  await denied('usersInfo on another user', r.db('appdb').command({ usersInfo: 'alice' }));
  await denied('usersInfo: 1 on the own db (lists others)', r.db('selfdb').command({ usersInfo: 1 }));
});

h.test('usersInfo naming another database\'s user takes viewUser on that database: a userAdmin of one db reads no admin credentials (13)', async () => {
  const ua = await makeUser('uiadm', ['userAdmin'], { db: 'uiadmdb' });
  const db = ua.db('uiadmdb');
  const ids = (r) => r.users.map((u) => u._id);
  assert.deepEqual(ids(await allowed('its own db\'s users', db.command({ usersInfo: { user: 'uiadm', db: 'uiadmdb' } }))), ['uiadmdb.uiadm']);
  const e = await denied('{user, db} of admin', db.command({ usersInfo: { user: ROOT_USER, db: 'admin' }, showCredentials: true }));
  assert.equal(e.errmsg, 'not authorized on admin to execute command { usersInfo: ... }');
  await denied('[..] naming admin\'s root', db.command({ usersInfo: ['uiadm', { user: ROOT_USER, db: 'admin' }], showPrivileges: true }));
  await denied('a user of another ordinary db', db.command({ usersInfo: [{ user: 'selfie', db: 'selfdb' }] }));
  assert.deepEqual(ids(await allowed('oneself from another db', ua.db('admin').command({ usersInfo: { user: 'uiadm', db: 'uiadmdb' } }))), ['uiadmdb.uiadm']);
  const rootInfo = await (await root()).db('uiadmdb').command({ usersInfo: { user: ROOT_USER, db: 'admin' } });
  assert.deepEqual(ids(rootInfo), [`admin.${ROOT_USER}`], 'root may');
});

/* =========================================================== built-in roles */

h.test('read: find, aggregate, count, distinct, listCollections, listIndexes, collStats, dbStats on its db; writes and other dbs 13; the connection stays', async () => {
  await seed('rdb');
  await seed('rdb_other');
  const r = await makeUser('reader', ['read'], { db: 'rdb' });
  const db = r.db('rdb');
  const c = db.collection('c');
  const uri1 = (await r.db('admin').command({ whatsmyuri: 1 })).you;
  assert.equal((await allowed('find', c.find().toArray())).length, 2);
  assert.equal((await allowed('aggregate', c.aggregate([{ $match: { a: 2 } }]).toArray())).length, 1);
  assert.equal(await allowed('count', c.countDocuments()), 2);
  assert.equal((await allowed('count command', db.command({ count: 'c' }))).n, 2);
  assert.deepEqual((await allowed('distinct', c.distinct('a'))).sort(), [1, 2]);
  assert.deepEqual((await allowed('listCollections', db.listCollections().toArray())).map((x) => x.name), ['c']);
  assert.ok((await allowed('listIndexes', c.indexes())).length >= 1);
  assert.equal((await allowed('collStats', db.command({ collStats: 'c' }))).count, 2);
  assert.equal((await allowed('dbStats', db.command({ dbStats: 1 }))).ok, 1);
  await denied('insert', c.insertOne({ _id: 3 }));
  await denied('update', c.updateOne({ _id: 1 }, { $set: { a: 9 } }));
  await denied('delete', c.deleteOne({ _id: 1 }));
  await denied('findAndModify', c.findOneAndUpdate({ _id: 1 }, { $set: { a: 9 } }));
  await denied('createIndexes', c.createIndex({ a: 1 }));
  await denied('drop', c.drop());
  await denied('find on another db', r.db('rdb_other').collection('c').find().toArray());
  await denied('serverStatus', r.db('admin').command({ serverStatus: 1 }));
  const uri2 = (await r.db('admin').command({ whatsmyuri: 1 })).you;
  assert.equal(uri2, uri1, 'the refused commands did not close the connection');
  assert.deepEqual(await (await root()).db('rdb').collection('c').find().sort({ _id: 1 }).toArray(),
    [{ _id: 1, a: 1 }, { _id: 2, a: 2 }], 'nothing refused changed the data');
});

h.test('readWrite: read plus insert/update/delete/findAndModify/create/drop/createIndexes/dropIndexes/renameCollection in its db; no dropDatabase, createUser or other db (13)', async () => {
  await seed('rwdb');
  await seed('rwdb_other');
  const rw = await makeUser('writer', [{ role: 'readWrite', db: 'rwdb' }]);
  const db = rw.db('rwdb');
  const c = db.collection('c');
  await allowed('insert', c.insertOne({ _id: 3, a: 3 }));
  await allowed('update', c.updateOne({ _id: 3 }, { $set: { a: 30 } }));
  await allowed('findAndModify', c.findOneAndUpdate({ _id: 3 }, { $inc: { a: 1 } }));
  await allowed('delete', c.deleteOne({ _id: 2 }));
  assert.deepEqual(await allowed('find', c.find().sort({ _id: 1 }).toArray()), [{ _id: 1, a: 1 }, { _id: 3, a: 31 }]);
  await allowed('create', db.createCollection('made'));
  await allowed('createIndexes', c.createIndex({ a: 1 }, { name: 'a_1' }));
  await allowed('dropIndexes', c.dropIndex('a_1'));
  await allowed('renameCollection within the db', rw.db('admin').command({ renameCollection: 'rwdb.made', to: 'rwdb.renamed' }));
  await allowed('drop', db.collection('renamed').drop());
  assert.deepEqual((await db.listCollections().toArray()).map((x) => x.name), ['c']);
  await denied('dropDatabase', db.dropDatabase());
  await denied('createUser', db.command({ createUser: 'x', pwd: 'x', roles: [] }));
  await denied('find on another db', rw.db('rwdb_other').collection('c').find().toArray());
  await denied('insert on another db', rw.db('rwdb_other').collection('c').insertOne({ _id: 9 }));
  await denied('renameCollection to another db', rw.db('admin').command({ renameCollection: 'rwdb.c', to: 'rwdb_other.moved' }));
  await denied('setParameter', rw.db('admin').command({ setParameter: 1, logLevel: 0 }));
  await denied('reIndex (dbAdmin\'s, as mongod)', db.command({ reIndex: 'c' }));
  assert.ok((await dbNames(await root())).includes('rwdb'), 'the refused dropDatabase dropped nothing');
});

h.test('dbAdmin: createIndexes, dropIndexes, collMod, validate, compact, reIndex, drop, listCollections, collStats, profile, dropDatabase; no find/insert (13)', async () => {
  await seed('dadb');
  await seed('dadb', 'gone');
  const da = await makeUser('dbadmin', [{ role: 'dbAdmin', db: 'dadb' }]);
  const db = da.db('dadb');
  await denied('find', db.collection('c').find().toArray());
  await denied('insert', db.collection('c').insertOne({ _id: 3 }));
  await denied('update', db.collection('c').updateOne({ _id: 1 }, { $set: { a: 0 } }));
  await allowed('createIndexes', db.command({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }] }));
  await allowed('collMod', db.command({ collMod: 'c' }));
  await allowed('validate', db.command({ validate: 'c' }));
  await allowed('compact', db.command({ compact: 'c' }));
  assert.equal((await allowed('reIndex', db.command({ reIndex: 'c' }))).nIndexes, 2);
  await allowed('dropIndexes', db.command({ dropIndexes: 'c', index: 'a_1' }));
  await allowed('listCollections', db.listCollections().toArray());
  assert.equal((await allowed('collStats', db.command({ collStats: 'c' }))).count, 2);
  await allowed('profile', db.command({ profile: -1 }));
  await allowed('drop', db.command({ drop: 'gone' }));
  await denied('find on another db', da.db('rwdb').collection('c').find().toArray());
  await denied('createUser', db.command({ createUser: 'x', pwd: 'x', roles: [] }));
  await allowed('dropDatabase', db.dropDatabase());
  assert.ok(!(await dbNames(await root())).includes('dadb'), 'dbAdmin dropped its database');
});

h.test('userAdmin: createUser, grantRolesToUser, usersInfo, dropUser on its db; no find (13); nothing on another db', async () => {
  await seed('uadb');
  const ua = await makeUser('useradmin', [{ role: 'userAdmin', db: 'uadb' }]);
  const db = ua.db('uadb');
  await allowed('createUser', db.command({ createUser: 'made', pwd: pwdOf('made'), roles: ['read'] }));
  await allowed('grantRolesToUser', db.command({ grantRolesToUser: 'made', roles: ['readWrite'] }));
  const u = (await allowed('usersInfo', db.command({ usersInfo: 'made' }))).users[0];
  assert.deepEqual(sortRoles(u.roles), [{ role: 'read', db: 'uadb' }, { role: 'readWrite', db: 'uadb' }]);
  const made = await login('made', pwdOf('made'), { source: 'uadb' });
  await allowed('the created user inserts with its granted readWrite', made.db('uadb').collection('c').insertOne({ _id: 'm' }));
  await allowed('revokeRolesFromUser', db.command({ revokeRolesFromUser: 'made', roles: ['readWrite'] }));
  await allowed('dropUser', db.command({ dropUser: 'made' }));
  await denied('find', db.collection('c').find().toArray());
  await denied('insert', db.collection('c').insertOne({ _id: 'x' }));
  await denied('createUser on another db', ua.db('rwdb').command({ createUser: 'y', pwd: 'y', roles: [] }));
});

h.test('dbOwner: readWrite, dbAdmin and userAdmin on its db; nothing on another db (13)', async () => {
  await seed('odb');
  await seed('odb_other');
  const o = await makeUser('owner', ['dbOwner'], { db: 'odb' });
  const db = o.db('odb');
  await allowed('insert', db.collection('c').insertOne({ _id: 3 }));
  assert.equal((await allowed('find', db.collection('c').find().toArray())).length, 3);
  await allowed('createIndexes', db.collection('c').createIndex({ a: 1 }));
  await allowed('collMod', db.command({ collMod: 'c' }));
  await allowed('createUser', db.command({ createUser: 'ownedUser', pwd: 'p', roles: ['read'] }));
  await allowed('dropUser', db.command({ dropUser: 'ownedUser' }));
  const other = o.db('odb_other');
  await denied('find on another db', other.collection('c').find().toArray());
  await denied('insert on another db', other.collection('c').insertOne({ _id: 4 }));
  await denied('createUser on another db', other.command({ createUser: 'z', pwd: 'z', roles: [] }));
  await denied('dropDatabase on another db', other.dropDatabase());
  await denied('serverStatus', o.db('admin').command({ serverStatus: 1 }));
  await denied('getDiagnosticData', o.db('admin').command({ getDiagnosticData: 1 }));
  await allowed('dropDatabase of its own db', db.dropDatabase());
});

h.test('clusterMonitor: serverStatus, getDiagnosticData, currentOp, getCmdLineOpts, getLog, listDatabases, hostInfo; insert, find and setParameter 13', async () => {
  await seed('cmdb');
  await seed('cmdb2');
  const m = await makeUser('monitor', ['clusterMonitor']);
  const admin = m.db('admin');
  for (const cmd of [{ serverStatus: 1 }, { getDiagnosticData: 1 }, { currentOp: 1 }, { getCmdLineOpts: 1 },
    { getLog: 'global' }, { hostInfo: 1 }]) {
    assert.equal((await allowed(Object.keys(cmd)[0], admin.command(cmd))).ok, 1);
  }
  const names = (await allowed('listDatabases', admin.command({ listDatabases: 1 }))).databases.map((d) => d.name);
  assert.ok(names.includes('cmdb') && names.includes('cmdb2'), `clusterMonitor lists every database: ${names}`);
  await denied('insert', m.db('cmdb').collection('c').insertOne({ _id: 3 }));
  await denied('find on an ordinary collection', m.db('cmdb').collection('c').find().toArray());
  await denied('setParameter', admin.command({ setParameter: 1, logLevel: 0 }));
});

h.test('readAnyDatabase: find on every database and listDatabases; insert 13', async () => {
  await seed('rad1');
  await seed('rad2');
  const r = await makeUser('anyreader', ['readAnyDatabase']);
  for (const d of ['rad1', 'rad2']) {
    assert.equal((await allowed(`find on ${d}`, r.db(d).collection('c').find().toArray())).length, 2);
    await allowed(`listCollections on ${d}`, r.db(d).listCollections().toArray());
  }
  const names = await allowed('listDatabases', dbNames(r));
  assert.ok(names.includes('rad1') && names.includes('rad2'), `lists every database: ${names}`);
  await denied('insert', r.db('rad1').collection('c').insertOne({ _id: 3 }));
  await denied('createUser', r.db('rad1').command({ createUser: 'x', pwd: 'x', roles: [] }));
});

h.test('readWriteAnyDatabase: insert and find on any database; createUser 13; admin.system.users is not writable (13)', async () => {
  await seed('rwa1');
  const rw = await makeUser('anywriter', ['readWriteAnyDatabase']);
  for (const d of ['rwa1', 'rwa2']) {
    await allowed(`insert on ${d}`, rw.db(d).collection('c').insertOne({ _id: 'rwa' }));
    assert.ok((await allowed(`find on ${d}`, rw.db(d).collection('c').findOne({ _id: 'rwa' }))), `found on ${d}`);
  }
  await denied('createUser', rw.db('rwa1').command({ createUser: 'x', pwd: 'x', roles: [] }));
  await denied('createUser on admin', rw.db('admin').command({ createUser: 'x', pwd: 'x', roles: ['root'] }));
  const sys = rw.db('admin').collection('system.users');
  await denied('insert into admin.system.users', sys.insertOne({ _id: 'admin.evil', user: 'evil', db: 'admin', roles: [{ role: 'root', db: 'admin' }] }));
  await denied('update of admin.system.users', sys.updateOne({ _id: 'admin.anywriter' }, { $set: { roles: [{ role: 'root', db: 'admin' }] } }));
  await denied('delete from admin.system.users', sys.deleteOne({ _id: 'admin.root' }));
  const all = await (await root()).db('admin').collection('system.users').find({}, { projection: { _id: 1 } }).toArray();
  const ids = all.map((d) => d._id);
  assert.ok(!ids.includes('admin.evil') && ids.includes('admin.root'), 'admin.system.users is unchanged');
  const me = (await (await root()).db('admin').command({ usersInfo: 'anywriter' })).users[0];
  assert.deepEqual(sortRoles(me.roles), [{ role: 'readWriteAnyDatabase', db: 'admin' }], 'no role was gained');
});

h.test('userAdminAnyDatabase: createUser in any database; find and insert on ordinary collections 13', async () => {
  await seed('uaa1');
  const ua = await makeUser('anyuseradmin', ['userAdminAnyDatabase']);
  for (const d of ['uaa1', 'uaa2']) {
    await allowed(`createUser on ${d}`, ua.db(d).command({ createUser: `made_${d}`, pwd: 'p', roles: ['read'] }));
    assert.equal((await allowed(`usersInfo on ${d}`, ua.db(d).command({ usersInfo: 1 }))).users.length, 1);
  }
  await denied('find on an ordinary collection', ua.db('uaa1').collection('c').find().toArray());
  await denied('insert on an ordinary collection', ua.db('uaa1').collection('c').insertOne({ _id: 3 }));
});

h.test('root: everything, including setParameter, dropDatabase, createUser anywhere, serverStatus, admin.system.users', async () => {
  await seed('rootdb');
  const c = await root();
  const cur = (await c.db('admin').command({ getParameter: 1, logLevel: 1 })).logLevel;
  assert.equal((await c.db('admin').command({ setParameter: 1, logLevel: cur })).ok, 1);
  assert.equal((await c.db('admin').command({ serverStatus: 1 })).ok, 1);
  assert.equal((await c.db('rootdb').command({ createUser: 'byroot', pwd: 'p', roles: ['dbOwner'] })).ok, 1);
  assert.ok(await c.db('admin').collection('system.users').findOne({ _id: 'rootdb.byroot' }));
  await c.db('rootdb').dropDatabase();
  assert.ok(!(await dbNames(c)).includes('rootdb'), 'root dropped the database');
});

h.test('listDatabases for a user without the cluster privilege answers only the databases it has roles on', async () => {
  await seed('ldx');
  await seed('ldy');
  await seed('ldz');
  const u = await makeUser('lister', [{ role: 'readWrite', db: 'ldx' }, { role: 'read', db: 'ldy' }]);
  const r = await allowed('listDatabases', u.db('admin').command({ listDatabases: 1 }));
  assert.deepEqual(r.databases.map((d) => d.name).sort(), ['ldx', 'ldy'], 'only the authorized databases');
  const n = await allowed('listDatabases nameOnly', u.db('admin').command({ listDatabases: 1, nameOnly: true }));
  assert.deepEqual(n.databases.map((d) => d.name).sort(), ['ldx', 'ldy']);
});

/* ============================================================== restarts */

h.test('users and credentials survive a clean SIGTERM restart and a kill -9', async () => {
  const c = await root();
  await c.db('rsdb').command({ createUser: 'survivor', pwd: pwdOf('survivor'), roles: ['readWrite'] });
  await c.db('rsdb').collection('c').insertOne({ _id: 1 });
  const info = await srv.server.restart();
  assert.equal(info.code, 0, 'clean shutdown');
  rootCache = null;
  for (const mech of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    const s = await login('survivor', pwdOf('survivor'), { source: 'rsdb', mech });
    assert.equal(await s.db('rsdb').collection('c').countDocuments(), 1, `survivor reads after SIGTERM restart (${mech})`);
  }
  await expectLoginFails('survivor', 'wrong', { source: 'rsdb' }, 'a wrong password after restart');

  // Created right before kill -9; a journaled write after it flushes the journal.
  const c2 = await root();
  await c2.db('rsdb').command({ createUser: 'crashsurvivor', pwd: pwdOf('crashsurvivor'), roles: ['read'] });
  await c2.db('rsdb').command({ updateUser: 'survivor', pwd: 'changed-before-crash' });
  await c2.db('rsdb').collection('j').insertOne({ _id: 'flush' }, { writeConcern: { w: 1, j: true } });
  const killed = await srv.server.restart({ kill9: true });
  assert.equal(killed.signal, 'SIGKILL');
  rootCache = null;
  await login('crashsurvivor', pwdOf('crashsurvivor'), { source: 'rsdb' });
  await login('survivor', 'changed-before-crash', { source: 'rsdb' });
  await expectLoginFails('survivor', pwdOf('survivor'), { source: 'rsdb' }, 'the password changed before kill -9');
  await login(ROOT_USER, ROOT_PWD);
  // The localhost exception stays closed after a restart: users exist.
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await rawCmd(conn, 'admin', { createUser: 'sneaky', pwd: 'x', roles: ['root'] });
    assert.equal(r.code, 13, `no localhost exception after restart: ${JSON.stringify(r)}`);
  } finally { conn.close(); }
});

/* ========================================================== startup state */

h.test('with --auth, the startup warning "Access control is not enabled" is gone', async () => {
  const r = await (await root()).db('admin').command({ getLog: 'startupWarnings' });
  for (const line of r.log) {
    assert.doesNotMatch(line, /Access control is not enabled/, 'no access-control warning when --auth is on');
  }
});

/* =============================================================== mongosh */

h.test('mongosh logs in from a credentialed URI and with db.auth(); show dbs works for root', { timeout: 120000 }, async () => {
  await seed('shdb', 'c', [{ _id: 1, who: 'shell' }]);
  await makeUser('shreader', [{ role: 'read', db: 'shdb' }], { login: false });
  const uri = authUri('shreader', pwdOf('shreader'), { db: 'shdb' });
  const out = await h.mongoshUri(uri, `
    print("users=" + JSON.stringify(db.runCommand({ connectionStatus: 1 }).authInfo.authenticatedUsers.map((u) => u.user)));
    print("docs=" + JSON.stringify(db.c.find().toArray()));
    try { db.c.insertOne({ _id: 2 }); print("insert=ok"); } catch (e) { print("insert=" + e.code); }
  `);
  assert.match(out, /users=\["shreader"\]/, `mongosh with ${uri}: ${out}`);
  assert.match(out, /docs=\[\{"_id":1,"who":"shell"\}\]/, out);
  assert.match(out, /insert=13/, `a read-only user's insert in mongosh: 13: ${out}`);

  const plain = `mongodb://127.0.0.1:${srv.port}/admin?directConnection=true&serverSelectionTimeoutMS=5000`;
  const out2 = await h.mongoshUri(plain, `
    try { db.getSiblingDB("shdb").c.findOne(); print("before=ok"); } catch (e) { print("before=" + e.code); }
    const r = db.auth(${JSON.stringify(ROOT_USER)}, ${JSON.stringify(ROOT_PWD)});
    print("auth=" + r.ok);
    print("after=" + JSON.stringify(db.getSiblingDB("shdb").c.findOne()));
  `);
  assert.match(out2, /before=13/, `unauthenticated mongosh find: 13: ${out2}`);
  assert.match(out2, /auth=1/, `db.auth() in mongosh: ${out2}`);
  assert.match(out2, /after=\{"_id":1,"who":"shell"\}/, out2);

  const out3 = await h.mongoshUri(authUri(ROOT_USER, ROOT_PWD, { db: 'admin' }), 'show dbs');
  assert.match(out3, /^shdb\s/m, `show dbs lists shdb: ${out3}`);
  assert.match(out3, /^admin\s/m, `show dbs lists admin: ${out3}`);
});

/* ======================================================= YAML config file */

h.test('a YAML --config with security.authorization: enabled turns access control on', { timeout: 60000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-authcfg-'));
  const file = path.join(dir, 'mayfly.yaml');
  fs.writeFileSync(file, [
    '# mongod-style YAML',
    'net:',
    '  bindIp: 127.0.0.1',
    'security:',
    '  authorization: enabled',
    '',
  ].join('\n'));
  const s = new h.MayflyServer({ args: ['--config', file] });
  let started = false;
  let ok = false;
  try {
    try {
      await s.start();
      started = true;
    } catch (e) {
      e.message = `mayflyd --config with security.authorization: enabled should start: ${e.message}`;
      throw e;
    }
    const conn = await h.rawConnect(s.port);
    try {
      const f = await rawCmd(conn, 'test', { find: 'c' });
      assert.equal(f.code, 13, `access control is on from the config file: find answers 13, got ${JSON.stringify(f).slice(0, 200)}`);
      const cu = await rawCmd(conn, 'admin', { createUser: 'cfgroot', pwd: 'cfg-pass', roles: ['root'] });
      assert.equal(cu.ok, 1, `the localhost exception on a fresh config-file server: ${JSON.stringify(cu)}`);
    } finally { conn.close(); }
    const c = new MongoClient(authUri('cfgroot', 'cfg-pass', { port: s.port }));
    try {
      await c.connect();
      const info = (await c.db('admin').command({ connectionStatus: 1 })).authInfo;
      assert.deepEqual(info.authenticatedUsers.map((u) => u.user), ['cfgroot']);
      await c.db('cfgdb').collection('c').insertOne({ _id: 1 });
    } finally { await c.close(true).catch(() => {}); }
    await expectLoginFails('cfgroot', 'wrong', { port: s.port }, 'a wrong password on the config-file server');
    ok = true;
  } catch (e) {
    if (started) e.message += `\n--- config-file server stderr tail ---\n${s.stderrTail(20)}`;
    throw e;
  } finally {
    const info = await s.stop();
    s.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
    if (ok) assert.equal(info && info.code, 0, `the config-file server shuts down cleanly: ${JSON.stringify(info)}`);
  }
});

/* ------------------------------------------- cursors and live privileges */

h.test('a cursor belongs to the user who opened it: getMore or killCursors by another user answers 13', async () => {
  await seed('curown', 'c', Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const a = await makeUser('curA', ['readAnyDatabase']);
  const b = await makeUser('curB', ['readAnyDatabase']);
  const first = await a.db('curown').command({ find: 'c', batchSize: 2 });
  const id = first.cursor.id;
  assert.ok(id && id.toString() !== '0', 'the find leaves a cursor open');
  await denied('getMore of another user\'s cursor', b.db('curown').command({ getMore: h.cursorId(id), collection: 'c', batchSize: 2 }));
  await denied('killCursors of another user\'s cursor', b.db('curown').command({ killCursors: 'c', cursors: [h.cursorId(id)] }));
  const more = await a.db('curown').command({ getMore: h.cursorId(id), collection: 'c', batchSize: 2 });
  assert.equal(more.cursor.nextBatch.length, 2, 'the owner carries on reading after the refusals');
  const k = await a.db('curown').command({ killCursors: 'c', cursors: [h.cursorId(id)] });
  assert.equal(k.cursorsKilled.length, 1, 'the owner may kill it');
});

h.test('granting and revoking roles changes what an already logged-in connection may do', async () => {
  await seed('liveprivs');
  const c = await makeUser('liveUser', [{ role: 'read', db: 'liveprivs' }]);
  const coll = c.db('liveprivs').collection('c');
  await denied('insert with read only', coll.insertOne({ _id: 'x' }));
  const r = await root();
  await r.db('admin').command({ grantRolesToUser: 'liveUser', roles: [{ role: 'readWrite', db: 'liveprivs' }] });
  await allowed('insert on the same connection after the grant', coll.insertOne({ _id: 'x' }));
  await r.db('admin').command({ revokeRolesFromUser: 'liveUser', roles: [{ role: 'readWrite', db: 'liveprivs' }] });
  await denied('insert on the same connection after the revoke', coll.insertOne({ _id: 'y' }));
  assert.equal(await coll.countDocuments(), 3, 'read is still granted');
  await r.db('admin').command({ dropUser: 'liveUser' });
  await denied('find on the same connection after dropUser', coll.findOne());
  const st = await connStatus(c);
  assert.deepEqual(st.authenticatedUserRoles, [], 'a dropped user keeps no roles');
});

h.test('capped conversions, dbHash, index filters, top: what each role may run (cmd_misc.c)', async () => {
  await seed('miscdb');
  const r = await makeUser('misc_reader', ['read'], { db: 'miscdb' });
  const rw = await makeUser('misc_writer', [{ role: 'readWrite', db: 'miscdb' }]);
  const dba = await makeUser('misc_dba', [{ role: 'dbAdmin', db: 'miscdb' }]);
  const mon = await makeUser('misc_monitor', ['clusterMonitor']);
  assert.equal((await allowed('dbHash (read)', r.db('miscdb').command({ dbHash: 1 }))).ok, 1);
  assert.equal((await allowed('dataSize (read)', r.db('miscdb').command({ dataSize: 'miscdb.c' }))).numObjects, 2);
  await denied('dataSize of another db (read)', r.db('miscdb').command({ dataSize: 'rdb.c' }));
  await denied('convertToCapped (read)', r.db('miscdb').command({ convertToCapped: 'c', size: 4096 }));
  await denied('planCacheSetFilter (read)', r.db('miscdb').command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [{ a: 1 }] }));
  await denied('top (read)', r.db('admin').command({ top: 1 }));
  await allowed('cloneCollectionAsCapped (readWrite)', rw.db('miscdb').command({ cloneCollectionAsCapped: 'c', toCollection: 'c2', size: 4096 }));
  await allowed('convertToCapped (readWrite)', rw.db('miscdb').command({ convertToCapped: 'c', size: 4096 }));
  await allowed('planCacheSetFilter (dbAdmin)', dba.db('miscdb').command({ planCacheSetFilter: 'c', query: { a: 1 }, indexes: [{ a: 1 }] }));
  assert.equal((await allowed('planCacheListFilters (dbAdmin)', dba.db('miscdb').command({ planCacheListFilters: 'c' }))).filters.length, 1);
  for (const cmd of [{ top: 1 }, { lockInfo: 1 }, { connPoolStats: 1 }]) {
    assert.equal((await allowed(Object.keys(cmd)[0], mon.db('admin').command(cmd))).ok, 1);
  }
});

h.test('listCommands says which commands need a login (requiresAuth)', async () => {
  const r = await srv.client.db('admin').command({ listCommands: 1 });
  for (const name of ['hello', 'ping', 'saslStart', 'saslContinue', 'logout', 'connectionStatus']) {
    assert.equal(r.commands[name].requiresAuth, false, `${name} runs without a login`);
  }
  for (const name of ['find', 'insert', 'createUser', 'serverStatus', 'listDatabases', 'aggregate']) {
    assert.equal(r.commands[name].requiresAuth, true, `${name} needs a login`);
  }
});

h.test('bulkWrite needs the write actions of its ops on every namespace of nsInfo', async () => {
  const c = await makeUser('bwuser', [{ role: 'readWrite', db: 'bwa' }, { role: 'read', db: 'bwb' }]);
  const admin = c.db('admin');
  const r = await allowed('bulkWrite into a readWrite database', admin.command({
    bulkWrite: 1, ops: [{ insert: 0, document: { _id: 1 } }, { update: 0, filter: { _id: 1 }, updateMods: { $set: { a: 1 } } }],
    nsInfo: [{ ns: 'bwa.c' }],
  }));
  assert.equal(r.nInserted, 1);
  await denied('bulkWrite touching a read-only database', admin.command({
    bulkWrite: 1, ops: [{ insert: 0, document: { _id: 2 } }, { delete: 1, filter: {} }],
    nsInfo: [{ ns: 'bwa.c' }, { ns: 'bwb.c' }],
  }));
  assert.equal(await c.db('bwa').collection('c').countDocuments({ _id: 2 }), 0, 'nothing written when refused');
});

h.test('filemd5 needs find on <root>.chunks (mongod CmdFileMD5 checkAuthForOperation)', async () => {
  const { Binary } = require('mongodb');
  const r0 = await root();
  const db0 = r0.db('md5db');
  await db0.collection('b.chunks').createIndex({ files_id: 1, n: 1 }, { unique: true });
  await db0.collection('b.chunks').insertOne({ files_id: 1, n: 0, data: new Binary(Buffer.from('abc')) });
  const rd = await makeUser('md5_reader', [{ role: 'read', db: 'md5db' }]);
  const none = await makeUser('md5_other', [{ role: 'read', db: 'otherdb' }]);
  const dba = await makeUser('md5_dbadmin', [{ role: 'dbAdmin', db: 'md5db' }]);
  const got = await allowed('filemd5 (read)', rd.db('md5db').command({ filemd5: 1, root: 'b' }));
  assert.equal(got.numChunks, 1);
  assert.equal(got.md5, '900150983cd24fb0d6963f7d28e17f72'); // md5("abc")
  await denied('filemd5 (read on another db)', none.db('md5db').command({ filemd5: 1, root: 'b' }));
  await denied('filemd5 (dbAdmin: no find on user collections)', dba.db('md5db').command({ filemd5: 1, root: 'b' }));
  // root that is not a string: 73 from the command's namespace parse, before the privilege check (as mongod).
  await h.expectCode(none.db('md5db').command({ filemd5: 1, root: 5 }), 73);
});
