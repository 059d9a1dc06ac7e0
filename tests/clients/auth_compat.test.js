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
