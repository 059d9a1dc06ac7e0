'use strict';
/*
 * Access control as operators and tools use it, compared with mongod 8.0's
 * source (src/mongo/db/commands/user_management_commands.cpp and its
 * helpers), under --auth through the Node driver and mongosh:
 *   - usersInfo's pipeline without details: the filter matches the user's
 *     view (mechanisms included, credentials only with showCredentials),
 *     showCustomData: false leaves customData out, users come sorted by
 *     user then db and once each however often named; names parsed as
 *     mongod's AuthName (2 BadValue and its messages);
 *   - the backup and restore built-in roles (builtin_roles.yml), as
 *     mongodump and mongorestore use them: backup reads every database,
 *     users and roles included, and writes nothing; restore creates
 *     collections, indexes (TTL ones too), users and roles and bypasses
 *     validation, but reads no ordinary collection;
 *   - rolesInfo's names and the roles arrays of createUser, grantRolesToUser,
 *     createRole ... parsed as mongod's RoleName / RoleNameOrString (db
 *     required in a document; 2 and mongod's messages);
 *   - listDatabases' authorizedDatabases (list_databases_common.h): false
 *     without the listDatabases privilege is 13 "Insufficient permissions
 *     to list all databases"; true lists only the databases the caller
 *     holds privileges on, even with that privilege;
 *   - _mergeAuthzCollections, mongorestore's way of restoring users and
 *     roles from staging collections (admin only; drop replaces and
 *     removes); the restore role may run it;
 *   - invalidateUserCache (hostManager's, userAdminAnyDatabase's);
 *   - rolesInfo showPrivileges: "asUserFragment" (getRolesAsUserFragment);
 *   - connectionStatus' authenticatedUserRoles: every role held, inherited
 *     ones included (getIndirectRoles);
 *   - the localhost exception grants createUser and grantRole on admin
 *     only: the first user may not hold another database's roles (13).
 *   - grantRolesToUser / revokeRolesFromUser change only roles (mongod's
 *     $set): authenticationRestrictions and customData stay; an empty
 *     roles array is 2; updateUser's mechanisms without pwd must be a
 *     subset of the user's (trimCredentials), never leaving none;
 *
 * One server for the file; the first test creates root through the
 * localhost exception and the later ones log in as it.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--auth', '--setParameter', 'enableTestCommands=1'] });
const ROOT = ['root', 'r00t-Compat!pw'];

let rootC = null;
async function root() {
  if (!rootC) rootC = await srv.login(...ROOT);
  return rootC;
}
const pw = (n) => `pw-${n}-C7!`;
const names = (r) => r.users.map((u) => `${u.user}@${u.db}`);

h.test('setup: root through the localhost exception', async () => {
  const c = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
  srv.clients.push(c);
  await c.db('admin').command({ createUser: ROOT[0], pwd: ROOT[1], roles: ['root'] });
  await root();
});

h.test('usersInfo: filter matches the user view, showCustomData false drops customData, users sorted by user then db (mongod\'s pipeline)', async () => {
  const r = await root();
  const db = r.db('uinfo');
  /* Created out of order, one with SCRAM-SHA-1 only, one of the same name on another database. */
  await db.command({ createUser: 'zed', pwd: pw('zed'), roles: ['read'], customData: { team: 'ops' } });
  await db.command({ createUser: 'amy', pwd: pw('amy'), roles: ['readWrite'], customData: { team: 'dev' } });
  await db.command({ createUser: 'bob', pwd: pw('bob'), roles: [], mechanisms: ['SCRAM-SHA-1'] });
  await r.db('uinfo2').command({ createUser: 'amy', pwd: pw('amy'), roles: [] });

  assert.deepEqual(names(await db.command({ usersInfo: 1 })), ['amy@uinfo', 'bob@uinfo', 'zed@uinfo']);
  const all = names(await db.command({ usersInfo: { forAllDBs: true } }));
  assert.deepEqual(all, [...all].sort((a, b) => {
    const [ua, da] = a.split('@'); const [ub, dbb] = b.split('@');
    return ua < ub ? -1 : ua > ub ? 1 : da < dbb ? -1 : da > dbb ? 1 : 0;
  }), 'forAllDBs sorted by user, then db');
  assert.ok(all.indexOf('amy@uinfo') === all.indexOf('amy@uinfo2') - 1, `amy@uinfo then amy@uinfo2: ${all}`);

  assert.deepEqual(names(await db.command({ usersInfo: 1, filter: { user: 'zed' } })), ['zed@uinfo']);
  assert.deepEqual(names(await db.command({ usersInfo: 1, filter: { 'customData.team': 'dev' } })), ['amy@uinfo']);
  assert.deepEqual(names(await db.command({ usersInfo: 1, filter: { 'roles.role': 'read' } })), ['zed@uinfo']);
  /* mechanisms is part of the view the filter sees. */
  assert.deepEqual(names(await db.command({ usersInfo: { forAllDBs: true }, filter: { mechanisms: { $size: 1 } } })),
    ['bob@uinfo']);
  /* credentials only when shown. */
  assert.deepEqual(names(await db.command({ usersInfo: 1, filter: { credentials: { $exists: true } } })), []);
  assert.equal((await db.command({ usersInfo: 1, showCredentials: true,
    filter: { credentials: { $exists: true } } })).users.length, 3);

  const noCustom = await db.command({ usersInfo: 1, showCustomData: false });
  assert.equal(noCustom.users.length, 3);
  for (const u of noCustom.users) assert.equal(u.customData, undefined, `customData of ${u.user} left out`);
  assert.deepEqual((await db.command({ usersInfo: 'amy' })).users[0].customData, { team: 'dev' });
  const detail = await db.command({ usersInfo: 'amy', showPrivileges: true, showCustomData: false });
  assert.equal(detail.users[0].customData, undefined);
  assert.ok(Array.isArray(detail.users[0].inheritedPrivileges));

  /* Named users: each once, sorted, however they were listed. */
  assert.deepEqual(names(await db.command({ usersInfo: ['zed', 'amy', 'zed', { user: 'amy', db: 'uinfo2' }] })),
    ['amy@uinfo', 'amy@uinfo2', 'zed@uinfo']);

  await h.expectCode(db.command({ usersInfo: 1, filter: 'zed' }), 14, /usersInfo\.filter' is the wrong type 'string'/);
  await h.expectCode(db.command({ usersInfo: 1, filter: { $nope: 1 } }), 2);
  await h.expectCode(db.command({ usersInfo: 1, filter: {}, showPrivileges: true }), 20);
});

h.test('usersInfo parses names as mongod\'s AuthName: 2 BadValue for a missing db or user, a wrong type, an unknown field, a number other than 1', async () => {
  const db = (await root()).db('uinfo');
  await h.expectCode(db.command({ usersInfo: { user: 'amy' } }), 2, /^UserName must contain a field named: db$/);
  await h.expectCode(db.command({ usersInfo: { db: 'uinfo' } }), 2, /^UserName must contain a field named: user$/);
  await h.expectCode(db.command({ usersInfo: { user: 1, db: 'uinfo' } }), 2,
    /^UserName must contain a string field named: user\. But, has type int$/);
  await h.expectCode(db.command({ usersInfo: { forAllDBs: false } }), 2, /^UserName contains an unknown field named: 'forAllDBs$/);
  await h.expectCode(db.command({ usersInfo: 2 }), 2, /^UserName must be either a string or an object$/);
  await h.expectCode(db.command({ usersInfo: [true] }), 2, /^UserName must be either a string or an object$/);
  /* 1.5 is 1 after safeNumberLong's truncation: every user of the database. */
  assert.deepEqual(names(await db.command({ usersInfo: 1.5 })), ['amy@uinfo', 'bob@uinfo', 'zed@uinfo']);
  assert.deepEqual((await db.command({ usersInfo: [] })).users, []);
});

h.test('mongosh db.getUsers({filter}) and show users list the filtered users in mongod\'s order', { timeout: 120000 }, async () => {
  const out = await h.mongoshUri(`${srv.authUri(...ROOT)}`.replace('/?', '/uinfo?'),
    'print(JSON.stringify(db.getUsers({filter: {"customData.team": "ops"}}).users.map(u => u.user))); ' +
    'print(JSON.stringify(db.getUsers().users.map(u => u.user)))');
  const lines = out.split('\n');
  assert.deepEqual(JSON.parse(lines[0]), ['zed']);
  assert.deepEqual(JSON.parse(lines[1]), ['amy', 'bob', 'zed']);
});

h.test('backup (admin only): what mongodump runs succeeds (listDatabases, listCollections, listIndexes, find, collStats, admin.system.users/roles/version); writes and administration are 13', async () => {
  const r = await root();
  await r.db('bk').collection('orders').insertMany([{ _id: 1, at: new Date() }, { _id: 2, at: new Date() }]);
  await r.db('bk').collection('orders').createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  await r.db('bk').command({ createRole: 'clerk', privileges: [{ resource: { db: 'bk', collection: 'orders' }, actions: ['find'] }], roles: [] });
  await h.expectCode(r.db('bk').command({ createUser: 'bkx', pwd: pw('bkx'), roles: ['backup'] }), 31, /Could not find role: backup@bk/);
  await r.db('admin').command({ createUser: 'dumper', pwd: pw('dumper'), roles: ['backup'] });
  const b = await srv.login('dumper', pw('dumper'));

  const dbs = (await b.db('admin').command({ listDatabases: 1 })).databases.map((d) => d.name);
  assert.ok(dbs.includes('bk') && dbs.includes('admin'), `listDatabases lists every database: ${dbs}`);
  const colls = (await b.db('bk').command({ listCollections: 1 })).cursor.firstBatch.map((c) => c.name);
  assert.deepEqual(colls, ['orders']);
  const idx = (await b.db('bk').command({ listIndexes: 'orders' })).cursor.firstBatch;
  assert.equal(idx.find((i) => i.name === 'at_1').expireAfterSeconds, 3600);
  assert.equal((await b.db('bk').collection('orders').find().toArray()).length, 2);
  assert.equal((await b.db('bk').command({ collStats: 'orders' })).count, 2);
  const users = await b.db('admin').collection('system.users').find().toArray();
  assert.ok(users.some((u) => u._id === 'admin.dumper' && u.credentials['SCRAM-SHA-256']), 'backup reads admin.system.users');
  assert.ok((await b.db('admin').collection('system.roles').find().toArray()).some((x) => x._id === 'bk.clerk'));
  await b.db('admin').collection('system.version').find().toArray();
  assert.equal((await b.db('admin').command({ getParameter: 1, featureCompatibilityVersion: 1 })).ok, 1);

  await h.expectCode(b.db('bk').collection('orders').insertOne({ _id: 3 }), 13);
  await h.expectCode(b.db('bk').command({ collMod: 'orders', index: { name: 'at_1', expireAfterSeconds: 60 } }), 13);
  await h.expectCode(b.db('admin').collection('system.users').insertOne({ _id: 'admin.forged' }), 13);
  await h.expectCode(b.db('admin').command({ createUser: 'x', pwd: 'y', roles: ['root'] }), 13);
  await h.expectCode(b.db('admin').command({ setParameter: 1, logLevel: 0 }), 13);
  await h.expectCode(b.db('bk').command({ dropDatabase: 1 }), 13);

  const info = await r.db('admin').command({ rolesInfo: 1, showBuiltinRoles: true });
  const builtins = info.roles.filter((x) => x.isBuiltin).map((x) => x.role);
  assert.ok(builtins.includes('backup') && builtins.includes('restore'), `admin lists backup and restore: ${builtins}`);
  const onBk = (await r.db('bk').command({ rolesInfo: 1, showBuiltinRoles: true })).roles.map((x) => x.role);
  assert.ok(!onBk.includes('backup'), 'not on other databases');
});

h.test('restore (admin only): creates collections with validators, bypasses validation, builds TTL indexes, collMods expireAfterSeconds, creates users and roles; reads no ordinary collection (13)', async () => {
  const r = await root();
  await r.db('admin').command({ createUser: 'restorer', pwd: pw('restorer'), roles: ['restore'] });
  const s = await srv.login('restorer', pw('restorer'));
  const db = s.db('rst');
  await db.command({ create: 'events', validator: { n: { $type: 'int' } } });
  await db.command({ insert: 'events', documents: [{ _id: 1, n: 'not an int', at: new Date() }], bypassDocumentValidation: true });
  await db.command({ createIndexes: 'events', indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 3600 }] });
  const mod = await db.command({ collMod: 'events', index: { name: 'at_1', expireAfterSeconds: 60 } });
  assert.equal(mod.expireAfterSeconds_new, 60);
  await db.command({ createUser: 'app', pwd: pw('app'), roles: ['readWrite'] });
  await db.command({ createRole: 'auditor', privileges: [{ resource: { db: 'rst', collection: 'events' }, actions: ['find'] }], roles: [] });
  await s.db('admin').collection('tempusers').insertOne({ _id: 'rst.staged' });

  await h.expectCode(db.collection('events').findOne(), 13);
  await h.expectCode(s.db('admin').command({ setParameter: 1, logLevel: 0 }), 13);
  await h.expectCode(s.db('admin').command({ shutdown: 1 }), 13);

  const app = await srv.login('app', pw('app'), 'rst');
  const doc = await app.db('rst').collection('events').findOne({ _id: 1 });
  assert.equal(doc.n, 'not an int', 'the document restored past the validator');
  const spec = (await r.db('rst').command({ listIndexes: 'events' })).cursor.firstBatch.find((i) => i.name === 'at_1');
  assert.equal(spec.expireAfterSeconds, 60);
});

h.test('grantRolesToUser and revokeRolesFromUser keep authenticationRestrictions and customData ($set of roles only); an empty roles array is 2', async () => {
  const r = await root();
  const db = r.db('grant');
  const restr = [{ clientSource: ['10.1.2.3'] }];
  await db.command({ createUser: 'far', pwd: pw('far'), roles: [], customData: { k: 1 }, authenticationRestrictions: restr });
  await h.expectCode(srv.login('far', pw('far'), 'grant'), 18);
  const before = await r.db('admin').collection('system.users').findOne({ _id: 'grant.far' });
  await db.command({ grantRolesToUser: 'far', roles: ['read'] });
  let stored = await r.db('admin').collection('system.users').findOne({ _id: 'grant.far' });
  assert.deepEqual(stored.authenticationRestrictions, restr, 'grantRolesToUser kept the restrictions');
  assert.deepEqual(stored.customData, { k: 1 });
  assert.deepEqual(stored.roles, [{ role: 'read', db: 'grant' }]);
  assert.deepEqual(Object.keys(stored), Object.keys(before), 'fields kept in place');
  assert.deepEqual(stored.credentials, before.credentials);
  await h.expectCode(srv.login('far', pw('far'), 'grant'), 18, /Authentication failed/);
  await db.command({ revokeRolesFromUser: 'far', roles: ['read'] });
  stored = await r.db('admin').collection('system.users').findOne({ _id: 'grant.far' });
  assert.deepEqual(stored.authenticationRestrictions, restr, 'revokeRolesFromUser kept the restrictions');
  assert.deepEqual(stored.roles, []);
  await h.expectCode(srv.login('far', pw('far'), 'grant'), 18);

  await h.expectCode(db.command({ grantRolesToUser: 'far', roles: [] }), 2, /^grantRolesToUser command requires a non-empty "roles" array$/);
  await h.expectCode(db.command({ revokeRolesFromUser: 'far', roles: [] }), 2, /^revokeRolesFromUser command requires a non-empty "roles" array$/);
});

h.test('updateUser with mechanisms and no pwd keeps a subset of the user\'s credentials; another mechanism is 2 and the user still logs in', async () => {
  const r = await root();
  const db = r.db('grant');
  await db.command({ createUser: 'only256', pwd: pw('only256'), roles: ['read'], mechanisms: ['SCRAM-SHA-256'] });
  await h.expectCode(db.command({ updateUser: 'only256', mechanisms: ['SCRAM-SHA-1'] }), 2,
    /^mechanisms field must be a subset of previously set mechanisms$/);
  await h.expectCode(db.command({ updateUser: 'only256', mechanisms: ['SCRAM-SHA-1', 'SCRAM-SHA-256'] }), 2);
  assert.deepEqual((await db.command({ usersInfo: 'only256' })).users[0].mechanisms, ['SCRAM-SHA-256']);
  await srv.login('only256', pw('only256'), 'grant');
  await db.command({ createUser: 'both', pwd: pw('both'), roles: [] });
  await db.command({ updateUser: 'both', mechanisms: ['SCRAM-SHA-256'] });
  assert.deepEqual((await db.command({ usersInfo: 'both' })).users[0].mechanisms, ['SCRAM-SHA-256']);
  await srv.login('both', pw('both'), 'grant');
});

h.test('role names as mongod\'s RoleName: rolesInfo 1 lists, other numbers are 2; a {role} document without db is 2 in rolesInfo, createUser, grantRolesToUser and createRole', async () => {
  const db = (await root()).db('rname');
  await db.command({ createRole: 'r1', privileges: [], roles: [] });
  const list = (r) => r.roles.map((x) => `${x.role}@${x.db}`);
  assert.deepEqual(list(await db.command({ rolesInfo: 1 })), ['r1@rname']);
  assert.deepEqual(list(await db.command({ rolesInfo: 1.0 })), ['r1@rname']);
  assert.deepEqual(list(await db.command({ rolesInfo: { role: 'r1', db: 'rname', other: 1 } })), ['r1@rname'], 'RoleName ignores other fields');
  assert.deepEqual(list(await db.command({ rolesInfo: ['r1', { role: 'read', db: 'rname' }] })), ['r1@rname', 'read@rname']);
  await h.expectCode(db.command({ rolesInfo: 2 }), 2, /^RoleName must be either a string or an object$/);
  await h.expectCode(db.command({ rolesInfo: true }), 2, /^RoleName must be either a string or an object$/);
  await h.expectCode(db.command({ rolesInfo: { role: 'r1' } }), 2, /^RoleName must contain a field named: db$/);
  await h.expectCode(db.command({ rolesInfo: { db: 'rname' } }), 2, /^RoleName must contain a field named: role$/);
  await h.expectCode(db.command({ rolesInfo: { role: 7, db: 'rname' } }), 2, /^RoleName must contain a string field named: role\. But, has type int$/);
  await h.expectCode(db.command({ rolesInfo: [1] }), 2, /^RoleName must be either a string or an object$/);

  await h.expectCode(db.command({ createUser: 'rn1', pwd: pw('rn1'), roles: [{ role: 'read' }] }), 2, /^RoleName must contain a field named: db$/);
  await h.expectCode(db.command({ createUser: 'rn1', pwd: pw('rn1'), roles: [5] }), 2, /^Role name must be either a document or string$/);
  await db.command({ createUser: 'rn1', pwd: pw('rn1'), roles: ['read'] });
  await h.expectCode(db.command({ grantRolesToUser: 'rn1', roles: [{ role: 'readWrite' }] }), 2, /^RoleName must contain a field named: db$/);
  /* Every name is parsed before any is looked up: the bad element wins over the missing role. */
  await h.expectCode(db.command({ grantRolesToUser: 'rn1', roles: [{ role: 'nosuch', db: 'rname' }, 5] }), 2);
  await h.expectCode(db.command({ grantRolesToUser: 'rn1', roles: [{ role: 'nosuch', db: 'rname' }] }), 31);
  await h.expectCode(db.command({ createRole: 'r2', privileges: [], roles: [{ role: 'read' }] }), 2, /^RoleName must contain a field named: db$/);
  assert.deepEqual((await db.command({ usersInfo: 'rn1' })).users[0].roles, [{ role: 'read', db: 'rname' }]);
});

h.test('listDatabases authorizedDatabases: false without the listDatabases privilege is 13; true filters even a user who has it', async () => {
  const r = await root();
  await r.db('ldA').collection('c').insertOne({ _id: 1 });
  await r.db('ldB').collection('c').insertOne({ _id: 1 });
  await r.db('ldA').command({ createUser: 'ldr', pwd: pw('ldr'), roles: ['read'] });
  await r.db('admin').command({ createRole: 'lister', privileges: [{ resource: { cluster: true }, actions: ['listDatabases'] }], roles: [] });
  await r.db('admin').command({ createUser: 'ldl', pwd: pw('ldl'), roles: ['lister', { role: 'read', db: 'ldB' }] });
  const names = (res) => res.databases.map((d) => d.name).filter((n) => n.startsWith('ld'));

  const reader = await srv.login('ldr', pw('ldr'), 'ldA');
  assert.deepEqual(names(await reader.db('admin').command({ listDatabases: 1 })), ['ldA']);
  assert.deepEqual(names(await reader.db('admin').command({ listDatabases: 1, authorizedDatabases: true })), ['ldA']);
  await h.expectCode(reader.db('admin').command({ listDatabases: 1, authorizedDatabases: false }), 13,
    /^Insufficient permissions to list all databases$/);

  const lister = await srv.login('ldl', pw('ldl'));
  assert.deepEqual(names(await lister.db('admin').command({ listDatabases: 1 })), ['ldA', 'ldB']);
  assert.deepEqual(names(await lister.db('admin').command({ listDatabases: 1, authorizedDatabases: false })), ['ldA', 'ldB']);
  assert.deepEqual(names(await lister.db('admin').command({ listDatabases: 1, authorizedDatabases: true })), ['ldB'],
    'authorizedDatabases: true lists only the databases with privileges');
  assert.deepEqual(names(await r.db('admin').command({ listDatabases: 1, authorizedDatabases: true })), ['ldA', 'ldB']);
});

h.test('_mergeAuthzCollections (mongorestore): staged users and roles go into admin.system.users/roles; drop replaces and removes the database\'s others; admin only; 13 without user administration', async () => {
  const r = await root();
  const app = r.db('mergeapp');
  await app.command({ createRole: 'appRole', privileges: [{ resource: { db: 'mergeapp', collection: 'x' }, actions: ['find'] }], roles: [] });
  await app.command({ createUser: 'alice', pwd: pw('alice'), roles: ['appRole', 'readWrite'] });
  await app.command({ createUser: 'bob', pwd: pw('bob'), roles: ['read'] });
  /* What mongodump wrote: the documents as stored. */
  const users = await r.db('admin').collection('system.users').find({ db: 'mergeapp' }).toArray();
  const roles = await r.db('admin').collection('system.roles').find({ db: 'mergeapp' }).toArray();
  await app.command({ dropAllUsersFromDatabase: 1 });
  await app.command({ dropAllRolesFromDatabase: 1 });
  await app.command({ createUser: 'carol', pwd: pw('carol'), roles: [] });
  await h.expectCode(srv.login('alice', pw('alice'), 'mergeapp'), 18);

  await r.db('admin').command({ createUser: 'merger', pwd: pw('merger'), roles: ['restore'] });
  const m = await srv.login('merger', pw('merger'));
  await r.db('admin').collection('tempusers').deleteMany({}); /* the restore test staged a document there */
  await m.db('admin').collection('tempusers').insertMany(users);
  await m.db('admin').collection('temproles').insertMany(roles);
  await h.expectCode(m.db('mergeapp').command({ _mergeAuthzCollections: 1, tempUsersCollection: 'admin.tempusers', db: '' }), 13,
    /^_mergeAuthzCollections may only be run against the admin database\.$/);
  await h.expectCode(m.db('admin').command({ _mergeAuthzCollections: 1, db: '' }), 2);
  await m.db('admin').command({
    _mergeAuthzCollections: 1, tempUsersCollection: 'admin.tempusers', tempRolesCollection: 'admin.temproles',
    db: 'mergeapp', drop: true, writeConcern: { w: 'majority' },
  });
  const after = (await app.command({ usersInfo: 1 })).users.map((u) => u.user);
  assert.deepEqual(after, ['alice', 'bob'], 'restored, and carol (not in the dump) removed by drop');
  assert.deepEqual((await app.command({ rolesInfo: 1 })).roles.map((x) => x.role), ['appRole']);
  const alice = await srv.login('alice', pw('alice'), 'mergeapp');
  const st = await alice.db('mergeapp').command({ connectionStatus: 1 });
  assert.deepEqual(st.authInfo.authenticatedUserRoles.map((x) => x.role).sort(), ['appRole', 'readWrite']);
  const stored = await r.db('admin').collection('system.users').findOne({ _id: 'mergeapp.alice' });
  assert.deepEqual(stored.credentials, users.find((u) => u.user === 'alice').credentials);

  /* Without drop, existing users stay and staged ones that exist are left as they are. */
  await app.command({ updateUser: 'bob', customData: { kept: true } });
  await app.command({ createUser: 'dave', pwd: pw('dave'), roles: [] });
  await m.db('admin').command({ _mergeAuthzCollections: 1, tempUsersCollection: 'admin.tempusers', db: '' });
  assert.deepEqual((await app.command({ usersInfo: 1 })).users.map((u) => u.user), ['alice', 'bob', 'dave']);
  assert.deepEqual((await app.command({ usersInfo: 'bob' })).users[0].customData, { kept: true });

  /* A staged document without a user name: mongod's _extractUserNameFromBSON, 4 NoSuchKey. */
  await r.db('admin').collection('tempusers').insertOne({ _id: 'nameless', db: 'mergeapp' });
  await h.expectCode(m.db('admin').command({ _mergeAuthzCollections: 1, tempUsersCollection: 'admin.tempusers', db: '' }), 4,
    /^Missing expected field "user"$/);

  await r.db('mergeapp').command({ createUser: 'plainrw', pwd: pw('plainrw'), roles: ['readWrite'] });
  const rw = await srv.login('plainrw', pw('plainrw'), 'mergeapp');
  await h.expectCode(rw.db('admin').command({ _mergeAuthzCollections: 1, tempUsersCollection: 'admin.tempusers', db: '' }), 13);
});

h.test('invalidateUserCache answers ok for root, hostManager and userAdminAnyDatabase, 13 for readWrite; privileges are still current afterwards', async () => {
  const r = await root();
  assert.equal((await r.db('admin').command({ invalidateUserCache: 1 })).ok, 1);
  await r.db('admin').command({ createUser: 'uaad', pwd: pw('uaad'), roles: ['userAdminAnyDatabase'] });
  await r.db('admin').command({ createUser: 'hman', pwd: pw('hman'), roles: ['hostManager'] });
  await r.db('inv').command({ createUser: 'invrw', pwd: pw('invrw'), roles: ['readWrite'] });
  assert.equal((await (await srv.login('uaad', pw('uaad'))).db('admin').command({ invalidateUserCache: 1 })).ok, 1);
  assert.equal((await (await srv.login('hman', pw('hman'))).db('admin').command({ invalidateUserCache: 1 })).ok, 1);
  const rw = await srv.login('invrw', pw('invrw'), 'inv');
  await h.expectCode(rw.db('admin').command({ invalidateUserCache: 1 }), 13);
  await rw.db('inv').collection('c').insertOne({ _id: 1 });
  await r.db('inv').command({ revokeRolesFromUser: 'invrw', roles: ['readWrite'] });
  await r.db('admin').command({ invalidateUserCache: 1 });
  await h.expectCode(rw.db('inv').collection('c').findOne(), 13);
});

h.test('rolesInfo showPrivileges: "asUserFragment" answers {userFragment: {roles, inheritedRoles, inheritedPrivileges}}; 20 for rolesInfo: 1, 31 for a missing role', async () => {
  const db = (await root()).db('frag');
  await db.command({ createRole: 'base', privileges: [{ resource: { db: 'frag', collection: 'x' }, actions: ['find'] }], roles: [] });
  await db.command({ createRole: 'top', privileges: [{ resource: { db: 'frag', collection: 'y' }, actions: ['insert'] }], roles: ['base', 'read'] });
  const res = await db.command({ rolesInfo: ['top'], showPrivileges: 'asUserFragment' });
  assert.equal(res.roles, undefined, 'no roles array');
  const f = res.userFragment;
  assert.deepEqual(f.roles, [{ role: 'top', db: 'frag' }]);
  assert.deepEqual(f.inheritedRoles.map((x) => x.role).sort(), ['base', 'read', 'top']);
  const on = (coll) => f.inheritedPrivileges.find((p) => p.resource.db === 'frag' && p.resource.collection === coll);
  assert.deepEqual(on('y').actions, ['insert']);
  assert.deepEqual(on('x').actions, ['find']);
  assert.ok(on('').actions.includes('find'), 'read\'s privileges on the database');
  assert.equal(f.inheritedAuthenticationRestrictions, undefined);
  assert.deepEqual((await db.command({ rolesInfo: 'top', showPrivileges: 'asUserFragment', showAuthenticationRestrictions: true }))
    .userFragment.inheritedAuthenticationRestrictions, []);
  await h.expectCode(db.command({ rolesInfo: 1, showPrivileges: 'asUserFragment' }), 20, /^Cannot get user fragment for all roles in a database$/);
  await h.expectCode(db.command({ rolesInfo: ['top', 'nosuch'], showPrivileges: 'asUserFragment' }), 31, /^Could not find role: nosuch@frag$/);
});

h.test('localhost exception: the first user may hold admin\'s roles only (grantRole on admin); another database\'s role is 13 and leaves the exception open', { timeout: 60000 }, async () => {
  const other = new h.MayflyServer({ args: ['--auth'] });
  await other.start();
  const c = new MongoClient(other.uri, { maxPoolSize: 1 });
  try {
    await c.connect();
    const admin = c.db('admin');
    await h.expectCode(admin.command({ createUser: 'first', pwd: pw('first'), roles: [{ role: 'readWrite', db: 'app' }] }), 13,
      /^not authorized on admin to execute command/);
    await h.expectCode(admin.command({ createUser: 'first', pwd: pw('first'), roles: ['root', { role: 'read', db: 'app' }] }), 13);
    assert.equal((await admin.command({ createUser: 'first', pwd: pw('first'), roles: ['root', { role: 'userAdminAnyDatabase', db: 'admin' }] })).ok, 1);
    await h.expectCode(admin.command({ createUser: 'second', pwd: pw('second'), roles: ['root'] }), 13, /requires authentication/);
  } finally {
    await c.close(true).catch(() => {});
    await other.stop();
    other.cleanup();
  }
});

h.test('connectionStatus authenticatedUserRoles lists the roles inherited through user-defined roles too (mongod\'s getIndirectRoles)', async () => {
  const r = await root();
  const db = r.db('indir');
  await db.command({ createRole: 'base', privileges: [{ resource: { db: 'indir', collection: 'x' }, actions: ['find'] }], roles: [] });
  await db.command({ createRole: 'top', privileges: [], roles: ['base', 'read'] });
  await db.command({ createUser: 'holder', pwd: pw('holder'), roles: ['top', 'readWrite'] });
  const c = await srv.login('holder', pw('holder'), 'indir');
  const st = await c.db('indir').command({ connectionStatus: 1 });
  const got = st.authInfo.authenticatedUserRoles.map((x) => `${x.role}@${x.db}`);
  assert.deepEqual([...got].sort(), ['base@indir', 'read@indir', 'readWrite@indir', 'top@indir']);
  assert.deepEqual(got.slice(0, 2), ['top@indir', 'readWrite@indir'], 'its own roles first');
  assert.deepEqual((await r.db('admin').command({ connectionStatus: 1 })).authInfo.authenticatedUserRoles, [{ role: 'root', db: 'admin' }]);
  /* Changed at once with the role graph. */
  await db.command({ revokeRolesFromRole: 'top', roles: ['base'] });
  const after = (await c.db('indir').command({ connectionStatus: 1 })).authInfo.authenticatedUserRoles.map((x) => x.role).sort();
  assert.deepEqual(after, ['read', 'readWrite', 'top']);
});
