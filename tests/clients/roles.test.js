'use strict';
/*
 * User-defined roles, MongoDB 8.0 semantics, through the Node driver under
 * --auth: createRole, updateRole, grantPrivilegesToRole,
 * revokePrivilegesFromRole, grantRolesToRole, revokeRolesFromRole, dropRole,
 * dropAllRolesFromDatabase and rolesInfo; roles stored in admin.system.roles
 * in mongod's shape; a user holding a custom role gets exactly its
 * privileges (database, collection, any-database and cluster resources,
 * inherited roles), changed at once when the role changes; roles survive a
 * clean restart and a kill -9.
 *
 * One server for the file; the first test creates root through the
 * localhost exception and the later ones log in as it.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--auth', '--setParameter', 'enableTestCommands=1'] });
const ROOT = ['root', 'r00t-Roles!pw'];

const login = (...a) => srv.login(...a);
let rootC = null;
async function root() {
  if (!rootC) rootC = await login(...ROOT);
  return rootC;
}
const pw = (n) => `pw-${n}-R9!`;
async function userWith(name, roles, db = 'admin') {
  await (await root()).db(db).command({ createUser: name, pwd: pw(name), roles });
  return login(name, pw(name), db);
}
const denied = (p) => h.expectCode(p, 13);

h.test('setup: root through the localhost exception, and data to read', async () => {
  const c = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
  srv.clients.push(c);
  await c.db('admin').command({ createUser: ROOT[0], pwd: ROOT[1], roles: ['root'] });
  const r = await root();
  await r.db('shop').collection('orders').insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
  await r.db('shop').collection('secrets').insertOne({ _id: 1 });
  await r.db('other').collection('orders').insertOne({ _id: 1 });
});

h.test('createRole stores the role in admin.system.roles as mongod does; a user holding it gets exactly its collection privileges', async () => {
  const r = await root();
  const ok = await r.db('shop').command({
    createRole: 'orderReader',
    privileges: [{ resource: { db: 'shop', collection: 'orders' }, actions: ['find', 'collStats', 'find'] }],
    roles: [],
  });
  assert.equal(ok.ok, 1);
  const stored = await r.db('admin').collection('system.roles').findOne({ _id: 'shop.orderReader' });
  assert.deepEqual(stored, {
    _id: 'shop.orderReader', role: 'orderReader', db: 'shop',
    privileges: [{ resource: { db: 'shop', collection: 'orders' }, actions: ['collStats', 'find'] }],
    roles: [],
  });
  assert.deepEqual(Object.keys(stored), ['_id', 'role', 'db', 'privileges', 'roles'], 'mongod\'s field order; no empty authenticationRestrictions');
  const u = await userWith('reader1', [{ role: 'orderReader', db: 'shop' }], 'shop');
  assert.equal(await u.db('shop').collection('orders').countDocuments(), 2);
  await denied(u.db('shop').collection('secrets').findOne());
  await denied(u.db('other').collection('orders').findOne());
  await denied(u.db('shop').collection('orders').insertOne({ _id: 9 }));
});

h.test('the profiler names who ran an operation: user "name@db" and allUsers [{user, db}], as mongod', async () => {
  const r = await root();
  await r.db('shop').command({ profile: 2 });
  try {
    const u = await login('reader1', pw('reader1'), 'shop');
    await u.db('shop').collection('orders').find({ v: 2 }).toArray();
  } finally {
    await r.db('shop').command({ profile: 0 });
  }
  const e = await r.db('shop').collection('system.profile').findOne({ op: 'query', 'command.filter.v': 2 });
  assert.ok(e, 'the find was profiled');
  assert.equal(e.user, 'reader1@shop');
  assert.deepEqual(e.allUsers, [{ user: 'reader1', db: 'shop' }]);
  await r.db('shop').collection('system.profile').drop();
});

h.test('grantPrivilegesToRole and revokePrivilegesFromRole change a logged-in user\'s privileges at once; actions merge per resource', async () => {
  const r = await root();
  const u = await userWith('reader2', [{ role: 'orderReader', db: 'shop' }], 'shop');
  await denied(u.db('shop').collection('orders').insertOne({ _id: 10 }));
  await r.db('shop').command({ grantPrivilegesToRole: 'orderReader', privileges: [{ resource: { db: 'shop', collection: 'orders' }, actions: ['insert'] }] });
  await u.db('shop').collection('orders').insertOne({ _id: 10 });
  const info = await r.db('shop').command({ rolesInfo: 'orderReader', showPrivileges: true });
  assert.deepEqual(info.roles[0].privileges, [{ resource: { db: 'shop', collection: 'orders' }, actions: ['collStats', 'find', 'insert'] }]);
  await r.db('shop').command({ revokePrivilegesFromRole: 'orderReader', privileges: [{ resource: { db: 'shop', collection: 'orders' }, actions: ['insert'] }] });
  await denied(u.db('shop').collection('orders').insertOne({ _id: 11 }));
  assert.equal(await u.db('shop').collection('orders').countDocuments(), 3);
});

h.test('roles inherit roles (built-in and user-defined); rolesInfo shows roles, inheritedRoles, privileges and inheritedPrivileges; a cycle is refused with 49', async () => {
  const r = await root();
  const db = r.db('shop');
  await db.command({ createRole: 'clerk', privileges: [{ resource: { db: 'shop', collection: '' }, actions: ['insert'] }], roles: ['orderReader'] });
  await db.command({ createRole: 'manager', privileges: [], roles: [{ role: 'clerk', db: 'shop' }, 'read'] });
  const u = await userWith('mgr', ['manager'], 'shop');
  await u.db('shop').collection('secrets').insertOne({ _id: 5 }); // clerk's insert on the whole database
  assert.equal(await u.db('shop').collection('secrets').countDocuments(), 2); // read, built-in
  const info = await db.command({ rolesInfo: 'manager', showPrivileges: true });
  assert.equal(info.roles.length, 1);
  const m = info.roles[0];
  assert.equal(m.role, 'manager');
  assert.equal(m.db, 'shop');
  assert.equal(m.isBuiltin, false);
  assert.deepEqual(m.roles, [{ role: 'clerk', db: 'shop' }, { role: 'read', db: 'shop' }]);
  assert.deepEqual(m.inheritedRoles.map((x) => `${x.role}@${x.db}`).sort(), ['clerk@shop', 'orderReader@shop', 'read@shop']);
  assert.deepEqual(m.privileges, []);
  // Its own privileges (none), then what it inherits, level by level (clerk and read, then orderReader), merged per
  // resource, built-in read's included (mongod's resolveRoles).
  const READ = ['changeStream', 'collStats', 'dbHash', 'dbStats', 'find', 'killCursors', 'listCollections', 'listIndexes', 'listSearchIndexes', 'planCacheRead'];
  assert.deepEqual(m.inheritedPrivileges, [
    { resource: { db: 'shop', collection: '' }, actions: [...READ.slice(0, 5), 'insert', ...READ.slice(5)] },
    { resource: { db: 'shop', collection: 'system.js' }, actions: READ },
    { resource: { db: 'shop', collection: 'orders' }, actions: ['collStats', 'find'] },
  ]);
  assert.deepEqual(Object.keys(m), ['_id', 'role', 'db', 'privileges', 'roles', 'inheritedRoles', 'inheritedPrivileges', 'isBuiltin'],
    'by name: the stored fields, the inherited ones, isBuiltin last (mongod\'s order)');
  // A cycle: orderReader <- clerk <- manager; granting manager to orderReader closes it.
  await h.expectCode(db.command({ grantRolesToRole: 'orderReader', roles: ['manager'] }), 49,
    /^Granting roles to orderReader@shop would introduce a cycle in the role graph$/);
  await h.expectCode(db.command({ grantRolesToRole: 'orderReader', roles: ['orderReader'] }), 49, /^Cannot grant role orderReader@shop to itself\.$/);
  await h.expectCode(db.command({ grantRolesToRole: 'orderReader', roles: [] }), 2, /^grantRolesToRole command requires a non-empty "roles" array$/);
  await h.expectCode(db.command({ grantRolesToRole: 'orderReader', roles: [{ role: 'read', db: 'other' }] }), 49,
    /^Roles on the 'shop' database cannot be granted roles from other databases$/);
  await h.expectCode(db.command({ grantRolesToRole: 'read', roles: ['orderReader'] }), 2, /^read@shop is a built-in role and cannot be modified$/);
  await h.expectCode(db.command({ grantRolesToRole: 'nosuch', roles: ['read'] }), 31, /^Role nosuch@shop not found$/);
  // A role actions in mongod's order (action_type.idl's, not alphabetical): changePassword before changeOwnPassword.
  await db.command({ createRole: 'ordered', privileges: [{ resource: { db: 'shop', collection: '' }, actions: ['changeOwnPassword', 'update', 'changePassword', 'find'] }], roles: [] });
  assert.deepEqual((await r.db('admin').collection('system.roles').findOne({ _id: 'shop.ordered' })).privileges[0].actions,
    ['changePassword', 'changeOwnPassword', 'find', 'update']);
  await db.command({ dropRole: 'ordered' });
  // revokeRolesFromRole takes clerk away from manager: its insert goes.
  await db.command({ revokeRolesFromRole: 'manager', roles: ['clerk'] });
  await denied(u.db('shop').collection('secrets').insertOne({ _id: 6 }));
  await db.command({ grantRolesToRole: 'manager', roles: ['clerk'] });
  await u.db('shop').collection('secrets').insertOne({ _id: 6 });
});

h.test('rolesInfo: 1 lists the database\'s user-defined roles (built-ins too with showBuiltinRoles); a missing role is no error; other databases\' roles need viewRole', async () => {
  const r = await root();
  const all = await r.db('shop').command({ rolesInfo: 1 });
  assert.deepEqual(all.roles.map((x) => x.role).sort(), ['clerk', 'manager', 'orderReader']);
  assert.deepEqual(Object.keys(all.roles[0]), ['_id', 'role', 'db', 'roles', 'isBuiltin', 'inheritedRoles'], 'a listing puts isBuiltin before inheritedRoles');
  const withBuiltin = await r.db('shop').command({ rolesInfo: 1, showBuiltinRoles: true });
  assert.ok(withBuiltin.roles.some((x) => x.role === 'readWrite' && x.isBuiltin === true));
  assert.ok(withBuiltin.roles.some((x) => x.role === 'clerk' && x.isBuiltin === false));
  assert.equal(withBuiltin.roles[0].isBuiltin, true, 'the built-in roles come first');
  assert.deepEqual((await r.db('shop').command({ rolesInfo: 'read' })).roles, [{ db: 'shop', role: 'read', roles: [], inheritedRoles: [], isBuiltin: true }]);
  assert.deepEqual((await r.db('shop').command({ rolesInfo: 'nosuch' })).roles, []);
  assert.deepEqual((await r.db('admin').command({ rolesInfo: [{ role: 'clerk', db: 'shop' }, 'nosuch'] })).roles.map((x) => x.role), ['clerk']);
  // A user sees its own roles, not others' (without viewRole).
  const u = await login('mgr', pw('mgr'), 'shop');
  assert.equal((await u.db('shop').command({ rolesInfo: 'manager' })).roles.length, 1);
  await denied(u.db('shop').command({ rolesInfo: 'orderReader' }));
  await denied(u.db('shop').command({ rolesInfo: 1 }));
});

h.test('createRole errors as mongod: an existing role 51002, a built-in name 2, unknown actions 2, bad resources 2, another database\'s resource on a non-admin role 49, an unknown role 31, missing fields 40414', async () => {
  const db = (await root()).db('shop');
  await h.expectCode(db.command({ createRole: 'clerk', privileges: [], roles: [] }), 51002, /^Role "clerk@shop" already exists$/);
  await h.expectCode(db.command({ createRole: 'read', privileges: [], roles: [] }), 2, /^Cannot create roles with the same name as a built-in role$/);
  await h.expectCode(db.command({ createRole: '', privileges: [], roles: [] }), 2, /^Role name must be non-empty$/);
  await h.expectCode((await root()).db('local').command({ createRole: 'x', privileges: [], roles: [] }), 2, /^Cannot create roles in the local database$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { db: 'shop', collection: '' }, actions: ['fly'] }], roles: [] }), 2,
    /^Unknown action type in privilege set: 'fly'$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { db: 'shop', collection: '' }, actions: ['walk', 'find', 'fly', 'fly'] }], roles: [] }), 2,
    /^Unknown action types in privilege set: 'fly', 'walk'$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { db: 'shop', collection: '' }, actions: [] }], roles: [] }), 2,
    /^'actions' field of privilege resource must not be empty$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { db: 'shop' }, actions: ['find'] }], roles: [] }), 2,
    /^resource pattern must contain 'collection' or 'systemBuckets' specifier$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { collection: 'c' }, actions: ['find'] }], roles: [] }), 2,
    /^resource \{collection: 'c'\} must include 'db' field as well$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { cluster: false }, actions: ['find'] }], roles: [] }), 2,
    /^resource: \{cluster: false\} must be true$/);
  await h.expectCode((await root()).db('admin').command({ createRole: 'x', privileges: [{ resource: { cluster: true, db: 'a' }, actions: ['find'] }], roles: [] }), 2,
    /^resource: \{cluster: true\} conflicts with resource type 'db'$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [], roles: ['nosuch'] }), 31, /^Cannot grant roles to 'x@shop': Could not find role: nosuch@shop$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { db: 'other', collection: '' }, actions: ['find'] }], roles: [] }), 49,
    /^Roles on the 'shop' database cannot be granted privileges that target other databases or the cluster$/);
  await h.expectCode(db.command({ createRole: 'x', privileges: [{ resource: { cluster: true }, actions: ['serverStatus'] }], roles: [] }), 49);
  await h.expectCode(db.command({ createRole: 'x', privileges: [], roles: ['nosuch'] }), 31);
  await h.expectCode(db.command({ createRole: 'x', roles: [] }), 40414);
  await h.expectCode(db.command({ createRole: 'x', privileges: [] }), 40414);
  await h.expectCode(db.command({ updateRole: 'nosuch', roles: [] }), 31, /^Could not find role: nosuch@shop$/);
  await h.expectCode(db.command({ updateRole: 'clerk' }), 2, /^Must specify at least one field to update in updateRole$/);
  await h.expectCode(db.command({ dropRole: 'nosuch' }), 31, /^Could not find role: nosuch@shop$/);
  await h.expectCode(db.command({ dropRole: 'read' }), 2, /^read@shop is a built-in role and cannot be modified$/);
  await h.expectCode(db.command({ revokePrivilegesFromRole: 'clerk', privileges: [] }), 2,
    /^revokePrivilegesFromRole command requires a non-empty "privileges" array$/);
  // revokeRolesFromRole does not ask whether the roles it takes away exist.
  assert.equal((await db.command({ revokeRolesFromRole: 'clerk', roles: ['nosuch'] })).ok, 1);
  assert.equal(await (await root()).db('admin').collection('system.roles').countDocuments({ role: 'x' }), 0);
});

h.test('an admin role may hold cluster, any-database and other databases\' privileges', async () => {
  const r = await root();
  await r.db('admin').command({
    createRole: 'monitorAndReadOrders',
    privileges: [
      { resource: { cluster: true }, actions: ['serverStatus'] },
      { resource: { db: '', collection: 'orders' }, actions: ['find'] },
    ],
    roles: [],
  });
  const u = await userWith('mon', ['monitorAndReadOrders']);
  assert.equal((await u.db('admin').command({ serverStatus: 1 })).ok, 1);
  assert.equal(await u.db('shop').collection('orders').countDocuments(), 3);
  assert.equal(await u.db('other').collection('orders').countDocuments(), 1);
  await denied(u.db('shop').collection('secrets').findOne());
  await denied(u.db('admin').command({ setParameter: 1, logLevel: 0 }));
});

h.test('updateRole replaces privileges and roles; a user without userAdmin cannot manage roles', async () => {
  const r = await root();
  await r.db('shop').command({ updateRole: 'clerk', privileges: [{ resource: { db: 'shop', collection: 'secrets' }, actions: ['remove'] }] });
  const info = await r.db('shop').command({ rolesInfo: 'clerk', showPrivileges: true });
  assert.deepEqual(info.roles[0].privileges, [{ resource: { db: 'shop', collection: 'secrets' }, actions: ['remove'] }]);
  assert.deepEqual(info.roles[0].roles, [{ role: 'orderReader', db: 'shop' }], 'roles kept when not given');
  const u = await login('mgr', pw('mgr'), 'shop');
  await denied(u.db('shop').command({ createRole: 'mine', privileges: [], roles: [] }));
  await denied(u.db('shop').command({ grantPrivilegesToRole: 'clerk', privileges: [{ resource: { db: 'shop', collection: '' }, actions: ['dropDatabase'] }] }));
  await denied(u.db('shop').command({ dropRole: 'clerk' }));
});

h.test('roles survive a clean restart and a kill -9', async () => {
  const r = await root();
  await r.db('shop').command({ createRole: 'lastMinute', privileges: [{ resource: { db: 'shop', collection: 'orders' }, actions: ['update'] }], roles: [] });
  await r.db('shop').command({ createUser: 'late', pwd: pw('late'), roles: ['lastMinute'] });
  await srv.server.restart();
  rootC = null;
  let u = await login('reader1', pw('reader1'), 'shop');
  assert.equal(await u.db('shop').collection('orders').countDocuments(), 3);
  await (await root()).db('shop').collection('j').insertOne({ _id: 'flush' }, { writeConcern: { w: 1, j: true } });
  await srv.server.restart({ kill9: true });
  rootC = null;
  u = await login('late', pw('late'), 'shop');
  await u.db('shop').collection('orders').updateOne({ _id: 1 }, { $set: { v: 100 } });
  await denied(u.db('shop').collection('orders').findOne());
  const m = await login('mgr', pw('mgr'), 'shop');
  await m.db('shop').collection('secrets').deleteOne({ _id: 6 });
});

h.test('dropRole takes the role from every user and role holding it; dropAllRolesFromDatabase answers n', async () => {
  const r = await root();
  await r.db('shop').command({ dropRole: 'orderReader' });
  const reader = await login('reader1', pw('reader1'), 'shop');
  await denied(reader.db('shop').collection('orders').findOne());
  const users = await r.db('shop').command({ usersInfo: 'reader1' });
  assert.deepEqual(users.users[0].roles, []);
  const clerk = (await r.db('shop').command({ rolesInfo: 'clerk' })).roles[0];
  assert.deepEqual(clerk.roles, []);
  const res = await r.db('shop').command({ dropAllRolesFromDatabase: 1 });
  assert.equal(res.n, 3); // clerk, manager, lastMinute
  assert.deepEqual((await r.db('shop').command({ rolesInfo: 1 })).roles, []);
  assert.equal(await r.db('admin').collection('system.roles').countDocuments({ db: 'shop' }), 0);
  assert.deepEqual((await r.db('shop').command({ usersInfo: 'mgr' })).users[0].roles, []);
});

h.test('no escalation through custom roles: a single user-admin action grants no user administration; collection privileges never pass database commands; actions without an exact group grant nothing', async () => {
  const r = await root();
  await r.db('esc').collection('foo').insertOne({ _id: 1 });
  await r.db('esc').collection('secret').insertOne({ _id: 1 });
  await r.db('admin').command({ createRole: 'justDropUser', privileges: [{ resource: { db: 'admin', collection: '' }, actions: ['dropUser', 'changePassword'] }], roles: [] });
  const u = await userWith('esc1', ['justDropUser']);
  await denied(u.db('admin').command({ grantRolesToUser: 'esc1', roles: ['root'] }));
  await denied(u.db('admin').collection('system.users').findOne());
  await denied(u.db('admin').collection('system.roles').insertOne({ _id: 'x.y', role: 'y', db: 'x', privileges: [], roles: [] }));
  // Collection privileges on esc.foo: dbStats/dbHash/dropDatabase name the database, not foo.
  await r.db('esc').command({
    createRole: 'fooOnly',
    privileges: [{ resource: { db: 'esc', collection: 'foo' }, actions: ['collStats', 'dbStats', 'dropDatabase', 'find'] }],
    roles: [],
  });
  const f = await userWith('esc2', ['fooOnly'], 'esc');
  assert.equal(await f.db('esc').collection('foo').countDocuments(), 1);
  await denied(f.db('esc').command({ dbStats: 'foo' }));
  await denied(f.db('esc').command({ dropDatabase: 'foo' }));
  await denied(f.db('esc').collection('secret').findOne());
  assert.equal(await r.db('esc').collection('secret').countDocuments(), 1, 'the database is still there');
  // Actions that would grant more than they name grant nothing.
  await r.db('esc').command({ createRole: 'narrow', privileges: [{ resource: { db: 'esc', collection: '' }, actions: ['changeStream', 'planCacheWrite', 'dbHash'] }], roles: [] });
  await r.db('admin').command({ createRole: 'sessionKiller', privileges: [{ resource: { cluster: true }, actions: ['killAnySession', 'fsync'] }], roles: [] });
  const n = await userWith('esc3', [{ role: 'narrow', db: 'esc' }, { role: 'sessionKiller', db: 'admin' }]);
  await denied(n.db('esc').collection('foo').findOne());
  await denied(n.db('esc').command({ collMod: 'foo', validator: { a: 1 } }));
  await denied(n.db('admin').command({ setParameter: 1, logLevel: 0 }));
  await denied(n.db('admin').command({ shutdown: 1 }));
});

h.test('long names are kept whole: a privilege on a 200-character collection does not reach a shorter one sharing its start', async () => {
  const r = await root();
  const long = 'a'.repeat(200), shorter = 'a'.repeat(127);
  await r.db('lng').collection(long).insertOne({ _id: 1 });
  await r.db('lng').collection(shorter).insertOne({ _id: 1 });
  await r.db('lng').command({ createRole: 'longOne', privileges: [{ resource: { db: 'lng', collection: long }, actions: ['find'] }], roles: [] });
  const u = await userWith('lng1', ['longOne'], 'lng');
  assert.equal(await u.db('lng').collection(long).countDocuments(), 1);
  await denied(u.db('lng').collection(shorter).findOne());
  await h.expectCode(r.db('lng').command({ createRole: 'x'.repeat(300), privileges: [], roles: [] }), 2);
});

h.test('authenticationRestrictions are stored when given (enforced: auth_restrictions.test.js), not when empty; anyAction is stored alone', async () => {
  const r = await root();
  const restr = [{ clientSource: ['10.0.0.1'] }];
  await r.db('ar').command({ createRole: 'restricted', privileges: [], roles: [], authenticationRestrictions: restr });
  assert.deepEqual((await r.db('admin').collection('system.roles').findOne({ _id: 'ar.restricted' })).authenticationRestrictions, restr);
  assert.equal((await r.db('ar').command({ createRole: 'x', privileges: [], roles: [], authenticationRestrictions: [] })).ok, 1);
  assert.ok(!('authenticationRestrictions' in await r.db('admin').collection('system.roles').findOne({ _id: 'ar.x' })));
  await r.db('ar').command({ createRole: 'all', privileges: [{ resource: { db: 'ar', collection: '' }, actions: ['find', 'anyAction', 'insert'] }], roles: [] });
  assert.deepEqual((await r.db('admin').collection('system.roles').findOne({ _id: 'ar.all' })).privileges[0].actions, ['anyAction']);
});

h.test('dropRole is one transaction: concurrent changes to its holders are kept, and no holder keeps the dropped role', async () => {
  const r = await root();
  const db = r.db('dr');
  for (let round = 0; round < 8; round++) {
    await db.command({ createRole: 'gone', privileges: [{ resource: { db: 'dr', collection: '' }, actions: ['find'] }], roles: [] });
    const names = [0, 1, 2, 3].map((i) => `h${round}_${i}`);
    for (const name of names) await db.command({ createUser: name, pwd: pw(name), roles: ['gone', 'read'] });
    await Promise.all([
      db.command({ dropRole: 'gone' }),
      ...names.map((name, i) => db.command({ updateUser: name, customData: { round, i } })),
    ]);
    const users = (await db.command({ usersInfo: names.map((u) => ({ user: u, db: 'dr' })) })).users;
    assert.equal(users.length, 4);
    for (const u of users) {
      assert.deepEqual(u.roles, [{ role: 'read', db: 'dr' }], `${u.user} lost only the dropped role`);
      assert.equal(u.customData.round, round, `${u.user}'s concurrent update was kept`);
    }
  }
});

h.test('a pipeline needs privileges on every collection it reaches: $lookup, $unionWith, $graphLookup, $facet, and $out / $merge targets in any database; views need find on what they read', async () => {
  const r = await root();
  await r.db('pl').collection('foo').insertOne({ _id: 1, k: 1 });
  await r.db('pl').collection('secret').insertOne({ _id: 1, k: 1, pin: 1234 });
  await r.db('plo').collection('data').insertOne({ _id: 'keep' });
  await r.db('pl').command({
    createRole: 'fooRW',
    privileges: [{ resource: { db: 'pl', collection: 'foo' }, actions: ['find', 'insert', 'update', 'remove'] },
      { resource: { db: 'pl', collection: 'v' }, actions: ['createCollection', 'find', 'collMod'] }],
    roles: [],
  });
  const u = await userWith('pl1', ['fooRW'], 'pl');
  const foo = u.db('pl').collection('foo');
  assert.equal((await foo.aggregate([{ $match: {} }]).toArray()).length, 1);
  await denied(foo.aggregate([{ $unionWith: 'secret' }]).toArray());
  await denied(foo.aggregate([{ $lookup: { from: 'secret', localField: 'k', foreignField: 'k', as: 's' } }]).toArray());
  await denied(foo.aggregate([{ $graphLookup: { from: 'secret', startWith: '$k', connectFromField: 'k', connectToField: 'k', as: 's' } }]).toArray());
  await denied(foo.aggregate([{ $facet: { a: [{ $unionWith: { coll: 'secret', pipeline: [] } }] } }]).toArray());
  await denied(foo.aggregate([{ $lookup: { from: 'foo', as: 's', pipeline: [{ $unionWith: 'secret' }] } }]).toArray());
  await denied(foo.aggregate([{ $out: 'secret' }]).toArray());
  await denied(foo.aggregate([{ $out: { db: 'plo', coll: 'data' } }]).toArray());
  await denied(foo.aggregate([{ $merge: { into: { db: 'plo', coll: 'data' } } }]).toArray());
  await denied(u.db('pl').createCollection('v', { viewOn: 'secret', pipeline: [] }));
  await denied(u.db('pl').createCollection('v', { viewOn: 'foo', pipeline: [{ $unionWith: 'secret' }] }));
  await u.db('pl').createCollection('v', { viewOn: 'foo', pipeline: [] });
  await denied(u.db('pl').command({ collMod: 'v', viewOn: 'secret', pipeline: [] }));
  assert.equal(await r.db('pl').collection('secret').countDocuments({ pin: 1234 }), 1, 'untouched');
  assert.deepEqual(await r.db('plo').collection('data').find().toArray(), [{ _id: 'keep' }]);
  // Built-in readWrite on one database writes no other through $out / $merge.
  const rw = await userWith('pl2', ['readWrite'], 'pl');
  await denied(rw.db('pl').collection('foo').aggregate([{ $out: { db: 'plo', coll: 'data' } }]).toArray());
  await denied(rw.db('pl').collection('foo').aggregate([{ $merge: { into: { db: 'plo', coll: 'new' } } }]).toArray());
  await rw.db('pl').collection('foo').aggregate([{ $out: 'copy' }]).toArray();
  assert.equal(await r.db('pl').collection('copy').countDocuments(), 1);
});

h.test('a revoke reaches a user inside a transaction at once and after it; updateUser may grant user-defined roles; system.profile needs dbAdmin or a privilege naming it', async () => {
  const r = await root();
  await r.db('tx').collection('secret').insertOne({ _id: 1 });
  await r.db('tx').command({ createRole: 'txRead', privileges: [{ resource: { db: 'tx', collection: 'secret' }, actions: ['find'] }], roles: [] });
  await r.db('tx').command({ createUser: 'tu', pwd: pw('tu'), roles: [] });
  // updateUser with a user-defined role (its existence is read outside the rewrite's transaction).
  await r.db('tx').command({ updateUser: 'tu', roles: ['txRead', 'readWrite'] });
  assert.deepEqual((await r.db('tx').command({ usersInfo: 'tu' })).users[0].roles.map((x) => x.role).sort(), ['readWrite', 'txRead']);
  const u = await login('tu', pw('tu'), 'tx');
  assert.equal(await u.db('tx').collection('secret').countDocuments(), 1);
  // A dbStats-only custom role does not read system.profile; dbAdmin does.
  await r.db('tx').command({ profile: 2 });
  await r.db('tx').collection('secret').findOne();
  await r.db('tx').command({ profile: 0 });
  await r.db('tx').command({ createRole: 'statsOnly', privileges: [{ resource: { db: 'tx', collection: '' }, actions: ['dbStats', 'collStats'] }], roles: [] });
  const st = await userWith('tstats', ['statsOnly'], 'tx');
  await denied(st.db('tx').collection('system.profile').findOne());
  const dba = await userWith('tdba', ['dbAdmin'], 'tx');
  assert.ok(await dba.db('tx').collection('system.profile').findOne());
  await r.db('tx').collection('system.profile').drop();
});

h.test('role management runs one command at a time: a grant racing a dropRole leaves no reference to the dropped role, and two crossing grants cannot make a cycle', async () => {
  const r = await root();
  const db = r.db('mg');
  await db.command({ createUser: 'holder', pwd: pw('holder'), roles: [] });
  for (let round = 0; round < 20; round++) {
    await db.command({ createRole: 'tmp', privileges: [], roles: [] });
    const [drop, grant] = await Promise.allSettled([
      db.command({ dropRole: 'tmp' }),
      db.command({ grantRolesToUser: 'holder', roles: ['tmp'] }),
    ]);
    assert.equal(drop.status, 'fulfilled', String(drop.reason));
    const roles = (await db.command({ usersInfo: 'holder' })).users[0].roles;
    assert.deepEqual(roles, [], `round ${round}: the grant ${grant.status === 'fulfilled' ? 'ran first and was pulled' : `failed (${grant.reason && grant.reason.code})`}`);
  }
  for (let round = 0; round < 10; round++) {
    await db.command({ createRole: `a${round}`, privileges: [], roles: [] });
    await db.command({ createRole: `b${round}`, privileges: [], roles: [] });
    const res = await Promise.allSettled([
      db.command({ grantRolesToRole: `a${round}`, roles: [`b${round}`] }),
      db.command({ grantRolesToRole: `b${round}`, roles: [`a${round}`] }),
    ]);
    const ok = res.filter((x) => x.status === 'fulfilled').length;
    assert.equal(ok, 1, `round ${round}: exactly one of two crossing grants succeeds`);
    assert.equal(res.find((x) => x.status === 'rejected').reason.code, 49);
  }
});

h.test('a user management command waiting for the management lock shows waitingForLock and ends with maxTimeMS or killOp', async () => {
  const r = await root();
  const db = r.db('lk');
  const admin = r.db('admin');
  const { count } = await admin.command({ configureFailPoint: 'hangWhileHoldingUserManagementLock', mode: 'alwaysOn' });
  const [c1, c2, c3] = [await login(...ROOT), await login(...ROOT), await login(...ROOT)];
  const holder = c1.db('lk').command({ createRole: 'held', privileges: [], roles: [] });
  holder.catch(() => {}); // awaited below; a failure must not be an unhandled rejection meanwhile
  const findOp = async (pred, what) => {
    for (let i = 0; i < 200; i++) {
      const op = (await admin.command({ currentOp: 1 })).inprog.find(pred);
      if (op) return op;
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error(`${what} never showed in currentOp`);
  };
  try {
    // The holder is in the fail point (it holds the lock) once the point counts an entry.
    await admin.command({ waitForFailPoint: 'hangWhileHoldingUserManagementLock', timesEntered: count + 1, maxTimeMS: 10000 });
    const t0 = Date.now();
    await h.expectCode(c2.db('lk').command({ createRole: 'timed', privileges: [], roles: [], maxTimeMS: 300 }), 50);
    assert.ok(Date.now() - t0 < 5000, 'maxTimeMS ended the wait for the lock');
    // Its rejection is awaited at once (expectCode): killOp's reply may come after it.
    const waiter = h.expectCode(c3.db('lk').command({ createRole: 'killed', privileges: [], roles: [] }), 11601);
    const w = await findOp((o) => o.command && o.command.createRole === 'killed' && o.waitingForLock === true, 'the waiter, waiting for the lock');
    const h0 = await findOp((o) => o.command && o.command.createRole === 'held', 'the holder');
    assert.equal(h0.waitingForLock, false, 'the holder holds the lock');
    await admin.command({ killOp: 1, op: w.opid });
    await waiter;
  } finally {
    await admin.command({ configureFailPoint: 'hangWhileHoldingUserManagementLock', mode: 'off' });
  }
  assert.equal((await holder).ok, 1);
  const names = (await db.command({ rolesInfo: 1 })).roles.map((x) => x.role).sort();
  assert.deepEqual(names, ['held'], 'neither interrupted command wrote');
  await db.command({ createRole: 'after', privileges: [], roles: [] });
});

h.test('granting privileges needs user administration where they apply; updateRole, and updateUser with roles, need it on every database (mongod\'s revokeRole on anyNormalResource)', async () => {
  const r = await root();
  await r.db('p1').command({ createRole: 'p1r', privileges: [], roles: [] });
  await r.db('p1').command({ createUser: 'p1u', pwd: pw('p1u'), roles: [] });
  const ua1 = await userWith('ua1', [{ role: 'userAdmin', db: 'p1' }], 'p1');
  const p1 = ua1.db('p1');
  await h.expectCode(p1.command({ updateRole: 'p1r', privileges: [] }), 13, /^updateRole command required the ability to revoke any role in the system$/);
  await h.expectCode(p1.command({ updateUser: 'p1u', roles: [] }), 13, /must be authorized to revoke any role in the system/);
  assert.equal((await p1.command({ updateUser: 'p1u', customData: { team: 'a' } })).ok, 1, 'no roles field: the database is enough');
  assert.equal((await p1.command({ grantPrivilegesToRole: 'p1r', privileges: [{ resource: { db: 'p1', collection: 'c' }, actions: ['find'] }] })).ok, 1);

  const uaA = await userWith('uaA', [{ role: 'userAdmin', db: 'admin' }], 'admin');
  const a = uaA.db('admin');
  await h.expectCode(a.command({ createRole: 'toP2', privileges: [{ resource: { db: 'p2', collection: '' }, actions: ['find'] }], roles: [] }), 13,
    /^Not authorized to grant privileges on the p2 database$/);
  assert.equal((await a.command({ createRole: 'wide', privileges: [{ resource: { db: '', collection: '' }, actions: ['find'] }, { resource: { cluster: true }, actions: ['listDatabases'] }], roles: [] })).ok, 1,
    'every database and the cluster: user administration on admin is enough');
  await h.expectCode(a.command({ grantPrivilegesToRole: 'wide', privileges: [{ resource: { db: 'p2', collection: 'c' }, actions: ['find'] }] }), 13, /p2 database/);
  await r.db('admin').command({ grantPrivilegesToRole: 'wide', privileges: [{ resource: { db: 'p2', collection: 'c' }, actions: ['find'] }] });
  await h.expectCode(a.command({ revokePrivilegesFromRole: 'wide', privileges: [{ resource: { db: 'p2', collection: 'c' }, actions: ['find'] }] }), 13,
    /^Not authorized to revoke privileges on the p2 database$/);
  await h.expectCode(a.command({ updateRole: 'wide', privileges: [] }), 13, /revoke any role/);

  const ua1b = await userWith('ua1b', [{ role: 'userAdmin', db: 'p1' }], 'p1');
  await h.expectCode(ua1b.db('p1').command({ grantPrivilegesToRole: 'p1r', privileges: [{ resource: { db: 'p1', collection: '' }, actions: ['find'] }, { resource: { db: 'admin', collection: '' }, actions: ['find'] }] }), 13,
    /^Not authorized to grant privileges on the admin database$/);
  const any = await userWith('uaAny', [{ role: 'userAdminAnyDatabase', db: 'admin' }], 'admin');
  assert.equal((await any.db('p1').command({ updateRole: 'p1r', privileges: [], roles: [] })).ok, 1);
  assert.equal((await any.db('p1').command({ updateUser: 'p1u', roles: [{ role: 'p1r', db: 'p1' }] })).ok, 1);
  const both = await userWith('uaBoth', [{ role: 'userAdmin', db: 'admin' }, { role: 'userAdmin', db: 'p2' }], 'admin');
  assert.equal((await both.db('admin').command({ createRole: 'toP2', privileges: [{ resource: { db: 'p2', collection: '' }, actions: ['find'] }], roles: [] })).ok, 1);
});

h.test('rolesInfo describes a built-in role\'s privileges as mongod 8.0\'s builtin_roles.yml, and a role\'s inheritedPrivileges are its own, then its inherited roles\' (jstests/auth/builtin_roles.js)', async () => {
  const r = await root();
  const READ = ['changeStream', 'collStats', 'dbHash', 'dbStats', 'find', 'killCursors', 'listCollections', 'listIndexes', 'listSearchIndexes', 'planCacheRead'];
  const readPrivs = (db) => [
    { resource: { db, collection: '' }, actions: READ },
    { resource: { db, collection: 'system.js' }, actions: READ },
  ];
  const basic = (await r.db('admin').command({ rolesInfo: 'read' })).roles;
  assert.deepEqual(basic, [{ db: 'admin', role: 'read', roles: [], inheritedRoles: [], isBuiltin: true }], 'without showPrivileges: no privileges');
  const [adminRead] = (await r.db('admin').command({ rolesInfo: 'read', showPrivileges: true })).roles;
  assert.deepEqual(Object.keys(adminRead), ['db', 'role', 'roles', 'privileges', 'inheritedRoles', 'inheritedPrivileges', 'isBuiltin']);
  assert.deepEqual(adminRead.privileges, readPrivs('admin'));
  assert.deepEqual(adminRead.inheritedPrivileges, adminRead.privileges);
  const [testRead] = (await r.db('admin').command({ rolesInfo: { role: 'read', db: 'ri' }, showPrivileges: true })).roles;
  assert.deepEqual(testRead.privileges, readPrivs('ri'));

  const ri = r.db('ri');
  const own = [{ resource: { db: 'ri', collection: '' }, actions: ['insert'] }];
  await ri.command({ createRole: 'role1', roles: ['read'], privileges: own });
  const listed = (await ri.command({ rolesInfo: 1, showPrivileges: true, showBuiltinRoles: true })).roles;
  const role1 = listed.find((x) => x.role === 'role1');
  assert.deepEqual(role1.privileges, own);
  assert.deepEqual(role1.inheritedRoles, [{ role: 'read', db: 'ri' }]);
  assert.deepEqual(role1.inheritedPrivileges, own.concat(readPrivs('ri')), 'own privileges as stored, then the inherited ones: not merged together');
  const readListed = listed.find((x) => x.role === 'read');
  assert.deepEqual(Object.keys(readListed), ['role', 'db', 'isBuiltin', 'roles', 'inheritedRoles', 'privileges', 'inheritedPrivileges']);
  assert.deepEqual(readListed.privileges, readPrivs('ri'));
  // dbOwner is flattened: no roles, readWrite's, dbAdmin's and userAdmin's privileges merged per resource.
  const owner = listed.find((x) => x.role === 'dbOwner');
  assert.deepEqual(owner.roles, []);
  assert.deepEqual(owner.privileges.map((p) => p.resource), [
    { db: 'ri', collection: '' }, { db: 'ri', collection: 'system.js' }, { db: 'ri', collection: 'system.profile' },
  ]);
  for (const a of ['insert', 'dropDatabase', 'createUser', 'grantRole', 'configureQueryAnalyzer'])
    assert.ok(owner.privileges[0].actions.includes(a), a);
  // The cluster roles exist on admin only and name cluster resources.
  const [monitor] = (await r.db('admin').command({ rolesInfo: 'clusterMonitor', showPrivileges: true })).roles;
  const cluster = monitor.privileges.find((p) => p.resource.cluster === true);
  for (const a of ['serverStatus', 'inprog', 'getLog', 'replSetGetStatus', 'listDatabases'])
    assert.ok(cluster.actions.includes(a), a);
  assert.deepEqual(monitor.privileges[0].resource, { db: 'config', collection: '' }, 'its inherited read@config first');
  const [rootRole] = (await r.db('admin').command({ rolesInfo: 'root', showPrivileges: true })).roles;
  assert.ok(rootRole.privileges.some((p) => p.resource.anyResource === true && p.actions.includes('validate')));
  assert.ok(rootRole.privileges.some((p) => p.resource.db === '' && p.resource.collection === '' && p.actions.includes('insert')));
  assert.equal(rootRole.privileges.length, new Set(rootRole.privileges.map((p) => JSON.stringify(p.resource))).size, 'one entry per resource');
});

h.test('admin.system.roles can be renamed away and back (mongod\'s legal client system namespaces): the roles go and come back with it', async () => {
  const r = await root();
  await r.db('rn').command({ createRole: 'rnReader', privileges: [{ resource: { db: 'rn', collection: '' }, actions: ['find'] }], roles: [] });
  await r.db('rn').collection('c').insertOne({ _id: 1 });
  const u = await userWith('rnUser', [{ role: 'rnReader', db: 'rn' }], 'rn');
  assert.equal(await u.db('rn').collection('c').countDocuments(), 1);
  const admin = r.db('admin');
  await admin.command({ renameCollection: 'admin.system.roles', to: 'admin.rolesSaved' });
  await denied(u.db('rn').collection('c').findOne());
  assert.deepEqual((await r.db('rn').command({ rolesInfo: 'rnReader' })).roles, []);
  await admin.command({ renameCollection: 'admin.rolesSaved', to: 'admin.system.roles' });
  assert.equal(await u.db('rn').collection('c').countDocuments(), 1, 'the role grants again');
  assert.equal((await r.db('rn').command({ rolesInfo: 'rnReader' })).roles.length, 1);
  await h.expectCode(admin.command({ renameCollection: 'rn.c', to: 'rn.system.roles' }), 20, /Invalid system namespace/);
  // renameCollectionSameDB is no way into or out of them: a system collection is checked on itself.
  await admin.collection('forged').insertOne({ _id: 'admin.evil', user: 'evil', db: 'admin', roles: [{ role: 'root', db: 'admin' }] });
  const rw = await userWith('rnRw', [{ role: 'readWrite', db: 'admin' }, { role: 'dbAdmin', db: 'admin' }], 'admin');
  await denied(rw.db('admin').command({ renameCollection: 'admin.forged', to: 'admin.system.users' }));
  await denied(rw.db('admin').command({ renameCollection: 'admin.forged', to: 'admin.system.roles', dropTarget: true }));
  await denied(rw.db('admin').command({ renameCollection: 'admin.system.roles', to: 'admin.stolen' }));
  assert.equal((await r.db('rn').command({ rolesInfo: 'rnReader' })).roles.length, 1, 'nothing moved');
});

h.test('the localhost exception stays closed once a user or role was seen, even with admin.system.users renamed away (mongod\'s latched privilege documents); a role alone closes it', async () => {
  for (const first of ['user', 'role']) {
    const s = new h.MayflyServer({ args: ['--auth'] });
    await s.start();
    const anon = new MongoClient(s.uri);
    try {
      await anon.connect();
      const a = anon.db('admin');
      await a.command({ createUser: 'boss', pwd: 'boss-Pw-1!', roles: ['root'] });
      const boss = new MongoClient(`mongodb://boss:boss-Pw-1!@127.0.0.1:${s.port}/?directConnection=true&authSource=admin`);
      await boss.connect();
      try {
        if (first === 'role') {
          await boss.db('x').command({ createRole: 'r', privileges: [], roles: [] });
          await boss.db('admin').command({ dropUser: 'boss' });
        } else {
          await boss.db('admin').command({ renameCollection: 'admin.system.users', to: 'admin.usersAway' });
        }
      } finally {
        await boss.close();
      }
      const again = new MongoClient(s.uri);
      await again.connect();
      try {
        await h.expectCode(again.db('admin').command({ createUser: 'pwn', pwd: 'pwn-Pw-1!', roles: ['root'] }), 13);
      } finally {
        await again.close();
      }
    } finally {
      await anon.close();
      await s.stop();
      s.cleanup();
    }
  }
});

h.test('getMore on a listIndexes or listCollections cursor needs what opened it; built-in role names mayfly does not grant stay reserved; admin.system.backup_users is no rename target', async () => {
  const r = await root();
  const db = r.db('lg');
  await db.collection('x').createIndexes([{ key: { a: 1 } }, { key: { b: 1 } }]);
  await db.command({ createRole: 'idxOnly', privileges: [{ resource: { db: 'lg', collection: 'x' }, actions: ['listIndexes'] }], roles: [] });
  const u = await userWith('lgUser', [{ role: 'idxOnly', db: 'lg' }], 'lg');
  const first = await u.db('lg').command({ listIndexes: 'x', cursor: { batchSize: 1 } });
  const more = await u.db('lg').command({ getMore: h.cursorId(first.cursor.id), collection: 'x' });
  assert.equal(more.cursor.nextBatch.length, 2);
  await denied(u.db('lg').collection('x').findOne());
  // Killing one's own listIndexes cursor needs no privilege (mongod's checkAuthForKillCursors).
  const again = await u.db('lg').command({ listIndexes: 'x', cursor: { batchSize: 1 } });
  const k = await u.db('lg').command({ killCursors: 'x', cursors: [h.cursorId(again.cursor.id)] });
  assert.equal(k.cursorsKilled.length, 1);
  // A find cursor on x stays find's: listIndexes alone does not reach it.
  const f = await r.db('lg').command({ find: 'x', filter: {}, batchSize: 0 });
  await h.expectCode(u.db('lg').command({ getMore: h.cursorId(f.cursor.id), collection: 'x' }), 13);
  await h.expectCode(r.db('admin').command({ createRole: 'backup', privileges: [], roles: [] }), 2, /same name as a built-in role/);
  await h.expectCode(r.db('lg').command({ createRole: 'enableSharding', privileges: [], roles: [] }), 2, /same name as a built-in role/);
  assert.equal((await r.db('lg').command({ createRole: 'backup', privileges: [], roles: [] })).ok, 1, 'backup is an admin-only name');
  await r.db('admin').collection('bu').insertOne({ _id: 1 });
  await h.expectCode(r.db('admin').command({ renameCollection: 'admin.bu', to: 'admin.system.backup_users' }), 20);
});

h.test('listCollections {authorizedCollections: true, nameOnly: true} lists only the collections the caller holds a privilege on; without nameOnly it needs listCollections', async () => {
  const r = await root();
  await r.db('lc').collection('mine').insertOne({ _id: 1 });
  await r.db('lc').collection('theirs').insertOne({ _id: 1 });
  await r.db('lc').createCollection('pv', { viewOn: 'theirs', pipeline: [{ $match: { apiKey: 'sk-live-XYZ' } }] });
  await r.db('lc').command({ createRole: 'mineOnly', privileges: [{ resource: { db: 'lc', collection: 'mine' }, actions: ['find'] }], roles: [] });
  const u = await userWith('lc1', ['mineOnly'], 'lc');
  const names = (await u.db('lc').command({ listCollections: 1, authorizedCollections: true, nameOnly: true })).cursor.firstBatch.map((c) => c.name);
  assert.deepEqual(names, ['mine']);
  await denied(u.db('lc').command({ listCollections: 1, authorizedCollections: true }));
  await denied(u.db('lc').command({ listCollections: 1 }));
  // With listCollections (read), every collection.
  const rd = await userWith('lc2', ['read'], 'lc');
  const all = (await rd.db('lc').command({ listCollections: 1, authorizedCollections: true, nameOnly: true })).cursor.firstBatch.map((c) => c.name).sort();
  assert.deepEqual(all, ['mine', 'pv', 'theirs']);
});

h.test('revoking one action from anyAction leaves every other action, as mongod\'s ActionSet', async () => {
  const r = await root();
  await r.db('aa').collection('c').insertOne({ _id: 1 });
  await r.db('aa').command({ createRole: 'everything', privileges: [{ resource: { db: 'aa', collection: '' }, actions: ['anyAction'] }], roles: [] });
  const u = await userWith('aa1', ['everything'], 'aa');
  assert.equal(await u.db('aa').collection('c').countDocuments(), 1);
  await r.db('aa').command({ revokePrivilegesFromRole: 'everything', privileges: [{ resource: { db: 'aa', collection: '' }, actions: ['find'] }] });
  await denied(u.db('aa').collection('c').findOne());
  await u.db('aa').collection('c').insertOne({ _id: 2 });
  const acts = (await r.db('aa').command({ rolesInfo: 'everything', showPrivileges: true })).roles[0].privileges[0].actions;
  assert.ok(!acts.includes('find') && !acts.includes('anyAction') && acts.includes('insert') && acts.includes('update'), JSON.stringify(acts));
});

h.test('$currentOp only exempts a pipeline that starts with it; read does not read system.profile (dbAdmin does)', async () => {
  const r = await root();
  await r.db('dup').collection('foo').insertOne({ _id: 1 });
  await r.db('dup').command({ createRole: 'fooFind', privileges: [{ resource: { db: 'dup', collection: 'foo' }, actions: ['find'] }], roles: [] });
  const f = await userWith('dupf', ['fooFind'], 'dup');
  await denied(f.db('dup').command({ aggregate: 1, pipeline: [{ $documents: [{ a: 1 }] }, { $addFields: { z: { $literal: { $currentOp: 1 } } } }], cursor: {} }));
  await r.db('dup').command({ profile: 2 });
  await r.db('dup').collection('foo').findOne();
  await r.db('dup').command({ profile: 0 });
  const rd = await userWith('dupr', ['read'], 'dup');
  await denied(rd.db('dup').collection('system.profile').findOne());
  const dba = await userWith('dupa', ['dbAdmin'], 'dup');
  assert.ok(await dba.db('dup').collection('system.profile').findOne());
  await dba.db('dup').collection('system.profile').drop();
});
