'use strict';
/*
 * Built-in roles held to mongod 8.0's builtin_roles.yml and resource
 * matching (src/mongo/db/auth/builtin_roles.yml,
 * resource_pattern_search_list.h), through the Node driver under --auth:
 * backup and restore hold only their few cluster actions (serverStatus,
 * getParameter), not the monitoring group; restore writes no
 * admin.system.roles document directly and cannot invalidateUserCache; a
 * database-wide or any-database privilege does not reach a time-series
 * collection's system.buckets.* (the *AnyDatabase roles name it), while the
 * time-series collection itself reads as usual.
 *
 * One server for the file; the first test creates root through the
 * localhost exception and the later ones log in as it.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--auth'] });
const ROOT = ['root', 'r00t-Tight!pw'];

let rootC = null;
async function root() {
  if (!rootC) rootC = await srv.login(...ROOT);
  return rootC;
}
const pw = (n) => `pw-${n}-T7!`;
async function userWith(name, roles, db = 'admin') {
  await (await root()).db(db).command({ createUser: name, pwd: pw(name), roles });
  return srv.login(name, pw(name), db);
}
const denied = (p) => h.expectCode(p, 13);

h.test('setup: root through the localhost exception, a time-series collection', async () => {
  const c = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
  srv.clients.push(c);
  await c.db('admin').command({ createUser: ROOT[0], pwd: ROOT[1], roles: ['root'] });
  const r = await root();
  await r.db('tsdb').createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' } });
  await r.db('tsdb').collection('ts').insertMany([
    { t: new Date('2024-01-01T00:00:00Z'), m: 'a', v: 1 },
    { t: new Date('2024-01-01T00:01:00Z'), m: 'a', v: 2 },
  ]);
});

h.test('backup holds serverStatus, getParameter and listDatabases, not currentOp, getLog, getCmdLineOpts, hostInfo, top, replSetGetConfig or other users\' sessions', async () => {
  const b = await userWith('bk', ['backup']);
  const a = b.db('admin');
  assert.equal((await a.command({ serverStatus: 1 })).ok, 1);
  assert.equal((await a.command({ getParameter: 1, authenticationMechanisms: 1 })).ok, 1);
  assert.equal((await a.command({ listDatabases: 1, nameOnly: true })).ok, 1);
  assert.equal((await a.command({ lockInfo: 1 })).ok, 1, 'lockInfo needs the serverStatus action');
  await denied(a.command({ currentOp: 1 }));
  await denied(a.aggregate([{ $currentOp: { allUsers: true } }]).toArray());
  await denied(a.command({ getLog: 'global' }));
  await denied(a.command({ getCmdLineOpts: 1 }));
  await denied(a.command({ hostInfo: 1 }));
  await denied(a.command({ top: 1 }));
  await denied(a.command({ replSetGetConfig: 1 }));
  await denied(b.db('config').collection('system.sessions').aggregate([{ $listSessions: { allUsers: true } }]).toArray());
  // Its own operations and sessions need no privilege.
  assert.equal((await a.command({ currentOp: 1, $ownOps: true })).ok, 1);
  assert.ok(Array.isArray(await b.db('config').collection('system.sessions').aggregate([{ $listSessions: {} }]).toArray()));
});

h.test('restore holds getParameter only among the monitoring actions', async () => {
  const rs = await userWith('rs', ['restore']);
  const a = rs.db('admin');
  assert.equal((await a.command({ getParameter: 1, authenticationMechanisms: 1 })).ok, 1);
  await denied(a.command({ serverStatus: 1 }));
  await denied(a.command({ currentOp: 1 }));
  await denied(a.command({ getLog: 'global' }));
  await denied(a.command({ getCmdLineOpts: 1 }));
  await denied(a.command({ hostInfo: 1 }));
  await denied(a.command({ top: 1 }));
  // The monitoring roles still hold all of them.
  const m = await userWith('mon', ['clusterMonitor']);
  for (const cmd of [{ serverStatus: 1 }, { currentOp: 1 }, { getLog: 'global' }, { getCmdLineOpts: 1 }, { hostInfo: 1 }, { top: 1 }, { getParameter: 1, authenticationMechanisms: 1 }])
    assert.equal((await m.db('admin').command(cmd)).ok, 1, JSON.stringify(cmd));
});

h.test('restore cannot write admin.system.roles directly nor invalidateUserCache; userAdminAnyDatabase may invalidate but not write credentials', async () => {
  const rs = await userWith('rs2', ['restore']);
  await denied(rs.db('admin').collection('system.roles').insertOne({ _id: 'x.evil', role: 'evil', db: 'x', privileges: [], roles: [] }));
  await denied(rs.db('admin').command({ invalidateUserCache: 1 }));
  assert.equal(await (await root()).db('admin').collection('system.roles').countDocuments({ _id: 'x.evil' }), 0);
  // What restore does hold: user administration through the commands, system.users writes.
  assert.equal((await rs.db('app').command({ createRole: 'appR', privileges: [], roles: [] })).ok, 1);
  assert.equal((await rs.db('app').command({ createUser: 'appU', pwd: 'appU-pw-1!', roles: ['read'] })).ok, 1);
  const ua = await userWith('uaa', ['userAdminAnyDatabase']);
  assert.equal((await ua.db('admin').command({ invalidateUserCache: 1 })).ok, 1);
  assert.ok((await ua.db('admin').collection('system.roles').find({}).toArray()).length >= 1);
  await denied(ua.db('admin').collection('system.roles').insertOne({ _id: 'x.evil2', role: 'evil2', db: 'x', privileges: [], roles: [] }));
  await denied(ua.db('admin').collection('system.users').deleteMany({ user: 'root' }));
});

h.test('a database-wide read role reads a time-series collection but not its system.buckets collection; readAnyDatabase reads both', async () => {
  const rd = await userWith('tsr', [{ role: 'read', db: 'tsdb' }], 'tsdb');
  const d = rd.db('tsdb');
  assert.deepEqual((await d.collection('ts').find({}, { projection: { _id: 0, v: 1 } }).sort({ v: 1 }).toArray()).map((x) => x.v), [1, 2]);
  assert.equal((await d.collection('ts').aggregate([{ $count: 'n' }]).toArray())[0].n, 2);
  assert.equal(await d.collection('ts').countDocuments({}), 2);
  await denied(d.collection('system.buckets.ts').find({}).toArray());
  await denied(d.collection('system.buckets.ts').aggregate([]).toArray());
  await denied(d.command({ collStats: 'system.buckets.ts' }));
  // authorizedCollections lists what the caller holds a privilege on: the time-series collection, not its buckets.
  const names = async (c) => (await c.db('tsdb').command({ listCollections: 1, nameOnly: true, authorizedCollections: true }))
    .cursor.firstBatch.map((x) => x.name).sort();
  assert.deepEqual(await names(rd), ['ts']);
  const rw = await userWith('tsrw', [{ role: 'readWrite', db: 'tsdb' }], 'tsdb');
  await denied(rw.db('tsdb').collection('system.buckets.ts').insertOne({ _id: 1 }));
  assert.equal((await rw.db('tsdb').collection('ts').insertOne({ t: new Date('2024-01-01T00:02:00Z'), m: 'a', v: 3 })).acknowledged, true);
  const any = await userWith('tsany', ['readAnyDatabase']);
  assert.equal((await any.db('tsdb').collection('system.buckets.ts').find({}).toArray()).length >= 1, true);
  assert.equal(await any.db('tsdb').collection('ts').countDocuments({}), 3);
  assert.deepEqual(await names(any), ['system.buckets.ts', 'ts']);
  const bk = await userWith('tsbk', ['backup']);
  assert.equal((await bk.db('tsdb').collection('system.buckets.ts').find({}).toArray()).length >= 1, true);
});

h.test('hostManager holds no monitoring action; clusterManager only the replication status ones; clusterMonitor reads config and local', async () => {
  const hm = await userWith('hm', ['hostManager']);
  const a = hm.db('admin');
  await denied(a.command({ serverStatus: 1 }));
  await denied(a.command({ currentOp: 1 }));
  await denied(a.command({ getCmdLineOpts: 1 }));
  await denied(a.command({ replSetGetStatus: 1 }));
  assert.equal((await a.command({ invalidateUserCache: 1 })).ok, 1);
  assert.equal((await a.command({ fsync: 1 })).ok, 1);
  const cm = await userWith('cm', ['clusterManager']);
  const c = cm.db('admin');
  // Authorized: the standalone's own errors, not 13.
  await h.expectCode(c.command({ getDefaultRWConcern: 1 }), 51300);
  await h.expectCode(c.command({ replSetGetStatus: 1 }), 76);
  await denied(c.command({ serverStatus: 1 }));
  await denied(c.command({ currentOp: 1 }));
  await denied(c.command({ getLog: 'global' }));
  await denied(c.command({ setParameter: 1, logLevel: 0 }));
  await denied(cm.db('tsdb').command({ collStats: 'ts' }));
  const r = await root();
  await r.db('config').collection('tight_probe').insertOne({ _id: 1 });
  assert.deepEqual(await cm.db('config').collection('tight_probe').find({}).toArray(), [{ _id: 1 }]);
  const mon = await userWith('mon2', ['clusterMonitor']);
  assert.deepEqual(await mon.db('config').collection('tight_probe').find({}).toArray(), [{ _id: 1 }]);
  await denied(mon.db('config').collection('tight_probe').insertOne({ _id: 2 }));
  await denied(mon.db('tsdb').collection('ts').find({}).toArray());
  const ca = await userWith('ca', ['clusterAdmin']);
  assert.deepEqual(await ca.db('config').collection('tight_probe').find({}).toArray(), [{ _id: 1 }]);
  assert.equal((await ca.db('admin').command({ serverStatus: 1 })).ok, 1);
  await denied(ca.db('tsdb').collection('ts').find({}).toArray());
  await h.expectCode(mon.db('admin').command({ replSetGetStatus: 1 }), 76);
});

h.test('database-wide and any-database privileges do not reach other system collections (system.views, admin.system.version, admin.system.backup_users); system.js stays read\'s and readWrite\'s', async () => {
  const r = await root();
  await r.db('sysdb').collection('c').insertOne({ _id: 1 });
  await r.db('sysdb').createCollection('v', { viewOn: 'c', pipeline: [] });
  const rw = await userWith('sysrw', ['readWrite', 'dbAdmin'], 'sysdb');
  const d = rw.db('sysdb');
  await denied(d.collection('system.views').find({}).toArray());
  await denied(d.collection('system.views').drop());
  assert.deepEqual(await d.collection('v').find({}).toArray(), [{ _id: 1 }], 'the view itself still reads');
  assert.equal((await d.collection('system.js').insertOne({ _id: 'f', value: 1 })).acknowledged, true);
  assert.deepEqual(await d.collection('system.js').find({}).toArray(), [{ _id: 'f', value: 1 }]);
  const names = (await d.command({ listCollections: 1, nameOnly: true, authorizedCollections: true })).cursor.firstBatch.map((x) => x.name).sort();
  assert.deepEqual(names, ['c', 'system.js', 'v']);
  const any = await userWith('sysany', ['readWriteAnyDatabase']);
  await denied(any.db('admin').collection('system.version').find({}).toArray());
  await denied(any.db('admin').collection('system.version').updateOne({ _id: 'featureCompatibilityVersion' }, { $set: { version: '7.0' } }));
  await denied(any.db('admin').collection('system.backup_users').insertOne({ _id: 1 }));
  await denied(any.db('sysdb').collection('system.views').find({}).toArray());
  assert.deepEqual(await any.db('sysdb').collection('system.js').find({}).toArray(), [{ _id: 'f', value: 1 }]);
  // backup names admin.system.version and every system.js.
  const bk = await userWith('sysbk', ['backup']);
  assert.ok(Array.isArray(await bk.db('admin').collection('system.version').find({}).toArray()));
  assert.deepEqual(await bk.db('sysdb').collection('system.js').find({}).toArray(), [{ _id: 'f', value: 1 }]);
});

h.test('$collStats and $indexStats need only collStats / indexStats, not find: dbAdmin\'s db.coll.stats(), clusterMonitor\'s exporters', async () => {
  // mongod 8.0's getPrivilegesForAggregate (authorization_checks.cpp): an initial source asks no find.
  const r = await root();
  await r.db('statsdb').collection('c').insertOne({ a: 1 });
  const dba = await userWith('statsDba', [{ role: 'dbAdmin', db: 'statsdb' }]);
  const mon = await userWith('statsMon', ['clusterMonitor']);
  for (const u of [dba, mon]) {
    const c = u.db('statsdb').collection('c');
    const [cs] = await c.aggregate([{ $collStats: { storageStats: {} } }]).toArray();
    assert.equal(cs.storageStats.count, 1);
    const is = await c.aggregate([{ $indexStats: {} }]).toArray();
    assert.deepEqual(is.map((x) => x.name), ['_id_']);
    // Still no documents: find, and a pipeline that does not start with the stats stage.
    await denied(c.find().toArray());
    await denied(c.aggregate([{ $match: {} }, { $collStats: {} }]).toArray());
  }
  // Without a stats privilege on the collection: refused.
  const ua = await userWith('statsUa', [{ role: 'userAdmin', db: 'statsdb' }]);
  await denied(ua.db('statsdb').collection('c').aggregate([{ $collStats: { storageStats: {} } }]).toArray());
  await denied(ua.db('statsdb').collection('c').aggregate([{ $indexStats: {} }]).toArray());
});
