'use strict';
/*
 * authenticationRestrictions (MongoDB 8.0 semantics) through the Node driver
 * and mongosh under --auth: users and roles restricted by clientSource and
 * serverAddress, enforced when a client authenticates (18 "Authentication
 * failed." to the client, the reason in the server's log), a role's list
 * inherited by its holders, updateUser/updateRole replacing the list, the
 * validation errors of createUser/createRole with mongod's codes, usersInfo
 * and rolesInfo with showAuthenticationRestrictions, restrictions kept
 * across a restart (clean and kill -9), and a role graph deeper than 64.
 *
 * The server listens on 127.0.0.1 and every client connects from
 * 127.0.0.1, so "127.0.0.1" (or 127.0.0.0/8) is met and 10.0.0.0/8 or
 * 192.0.2.1 is not.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer({ args: ['--auth'] });
const ROOT = ['root', 'r00t-Restr!pw'];

const uri = (...a) => srv.authUri(...a);
const login = (...a) => srv.login(...a);
let rootC = null;
async function root() {
  if (!rootC) rootC = await login(...ROOT);
  return rootC;
}
const pw = (n) => `pw-${n}-A7!`;
async function mkUser(name, extra = {}) {
  await (await root()).db('admin').command({ createUser: name, pwd: pw(name), roles: [], ...extra });
}
const canLogin = (name) => login(name, pw(name));
const refused = (name) => h.expectCode(canLogin(name), 18, /Authentication failed/);

h.test('setup: root through the localhost exception', async () => {
  const c = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
  srv.clients.push(c);
  await c.db('admin').command({ createUser: ROOT[0], pwd: ROOT[1], roles: ['root'] });
  await root();
});

h.test('clientSource: 127.0.0.1 authenticates, 10.0.0.0/8 and 192.0.2.1 are refused with 18 and the reason is logged', async () => {
  await mkUser('local', { authenticationRestrictions: [{ clientSource: ['127.0.0.1'] }] });
  await mkUser('net8', { authenticationRestrictions: [{ clientSource: ['10.0.0.0/8'] }] });
  await mkUser('one', { authenticationRestrictions: [{ clientSource: ['192.0.2.1', '::1'] }] });
  await mkUser('wide', { authenticationRestrictions: [{ clientSource: ['127.0.0.0/8'] }] });
  const c = await canLogin('local');
  const st = await c.db('admin').command({ connectionStatus: 1 });
  assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: 'local', db: 'admin' }]);
  await canLogin('wide');
  await refused('net8');
  await refused('one');
  await h.waitFor(() => /authentication failed for net8@admin .*127\.0\.0\.1 does not fall within: \{\\?"clientSource\\?": \[\\?"10\.0\.0\.0\/8\\?"\]\}/.test(srv.server.stderrTail(200)),
    'the unmet restriction in the log');
  // The wrong password is still 18 for a user whose restrictions are met.
  await h.expectCode(login('local', 'wrong'), 18);
});

h.test('serverAddress: the server\'s own address (127.0.0.1) is met, another is not; a document needs all its fields', async () => {
  await mkUser('srvok', { authenticationRestrictions: [{ serverAddress: ['127.0.0.1/32'] }] });
  await mkUser('srvbad', { authenticationRestrictions: [{ serverAddress: ['192.0.2.1'] }] });
  await mkUser('both', { authenticationRestrictions: [{ clientSource: ['127.0.0.1'], serverAddress: ['127.0.0.0/8'] }] });
  await mkUser('half', { authenticationRestrictions: [{ clientSource: ['127.0.0.1'], serverAddress: ['10.1.2.3'] }] });
  await canLogin('srvok');
  await canLogin('both');
  await refused('srvbad');
  await refused('half');
});

h.test('any one of the documents of a list suffices', async () => {
  await mkUser('anyof', {
    authenticationRestrictions: [{ clientSource: ['10.0.0.0/8'] }, { serverAddress: ['192.0.2.0/24'] }, { clientSource: ['127.0.0.1'] }],
  });
  await mkUser('noneof', { authenticationRestrictions: [{ clientSource: ['10.0.0.0/8'] }, { serverAddress: ['192.0.2.0/24'] }] });
  await canLogin('anyof');
  await refused('noneof');
});

h.test('a role\'s restrictions, direct or inherited, apply to its holders; updateRole and updateUser replace the list', async () => {
  const r = await root();
  await r.db('admin').command({ createRole: 'far', privileges: [], roles: [], authenticationRestrictions: [{ clientSource: ['10.0.0.0/8'] }] });
  await r.db('admin').command({ createRole: 'near', privileges: [], roles: [], authenticationRestrictions: [{ clientSource: ['127.0.0.1'] }] });
  await r.db('admin').command({ createRole: 'viaFar', privileges: [], roles: ['far', 'readAnyDatabase'] });
  await mkUser('holder', { roles: ['viaFar'] });
  await mkUser('nearHolder', { roles: ['near', 'read'] });
  await refused('holder');
  await canLogin('nearHolder');
  // The role loses its restriction: the holder gets in.
  await r.db('admin').command({ updateRole: 'far', authenticationRestrictions: [] });
  const stored = await r.db('admin').collection('system.roles').findOne({ _id: 'admin.far' });
  assert.ok(!('authenticationRestrictions' in stored), 'an empty list removes the field');
  await canLogin('holder');
  // A user restricted itself: updateUser removing the list lets it in; setting one back shuts it out.
  await mkUser('movable', { authenticationRestrictions: [{ clientSource: ['10.0.0.0/8'] }] });
  await refused('movable');
  await r.db('admin').command({ updateUser: 'movable', authenticationRestrictions: [] });
  assert.ok(!('authenticationRestrictions' in await r.db('admin').collection('system.users').findOne({ _id: 'admin.movable' })));
  await canLogin('movable');
  await r.db('admin').command({ updateUser: 'movable', authenticationRestrictions: [{ serverAddress: ['192.0.2.1'] }] });
  await refused('movable');
  await r.db('admin').command({ updateUser: 'movable', authenticationRestrictions: [{ serverAddress: ['127.0.0.1'] }] });
  await canLogin('movable');
});

h.test('a logged-in user whose role gains an unmet restriction loses its privileges at its next command, as mongod', async () => {
  const r = await root();
  await r.db('rz').collection('c').insertOne({ _id: 1 });
  await r.db('admin').command({ createRole: 'rzReader', privileges: [{ resource: { db: 'rz', collection: 'c' }, actions: ['find'] }], roles: [] });
  await mkUser('rzUser', { roles: ['rzReader'] });
  const c = await canLogin('rzUser');
  assert.equal((await c.db('rz').collection('c').find().toArray()).length, 1);
  await r.db('admin').command({ updateRole: 'rzReader', authenticationRestrictions: [{ clientSource: ['192.168.2.0'] }] });
  await h.expectCode(c.db('rz').collection('c').find().toArray(), 13);
});

h.test('validation: mongod\'s codes and messages; nothing is stored', async () => {
  const r = await root();
  const a = r.db('admin');
  const create = (ar) => a.command({ createUser: 'bad', pwd: 'x', roles: [], authenticationRestrictions: ar });
  await h.expectCode(create([5]), 12, /'authenticationRestrictions' array sub-documents must be address restriction objects/);
  await h.expectCode(create([{ clientSource: ['127.0.0.1'], bogus: 1 }]), 2, /^BSON field 'address restriction\.bogus' is an unknown field\.$/);
  await h.expectCode(create([{ clientSource: '127.0.0.1' }]), 2, /BSON field 'address restriction\.clientSource' is the wrong type 'string', expected type 'array'/);
  await h.expectCode(create([{ serverAddress: [7] }]), 2, /BSON field 'address restriction\.serverAddress\.0' is the wrong type 'int', expected type 'string'/);
  await h.expectCode(create([{ clientSource: ['NOT_AN_IP'] }]), 2, /^Invalid IP address in CIDR string$/);
  await h.expectCode(create([{ clientSource: ['10.0.0.0/33'] }]), 2, /^Invalid length in CIDR string$/);
  await h.expectCode(create([{ clientSource: ['10.0.0.0/x'] }]), 2, /^Non-numeric length in CIDR string$/);
  await h.expectCode(create([{ clientSource: ['::1/129'] }]), 2, /Invalid length/);
  await h.expectCode(create([{}]), 162, /^At least one of 'clientSource' and\/or 'serverAddress' must be set$/);
  await h.expectCode(create({ clientSource: ['127.0.0.1'] }), 14, /BSON field 'createUser\.authenticationRestrictions' is the wrong type 'object', expected type 'array'/);
  assert.equal(await a.collection('system.users').findOne({ _id: 'admin.bad' }), null);
  await h.expectCode(a.command({ createRole: 'badRole', privileges: [], roles: [], authenticationRestrictions: [{ clientSource: ['1.2.3.4.5'] }] }), 2);
  await a.command({ createRole: 'goodRole', privileges: [], roles: [] });
  await h.expectCode(a.command({ updateRole: 'goodRole', authenticationRestrictions: [{ clientSource: ['nope'] }] }), 2);
  await h.expectCode(a.command({ updateUser: 'local', authenticationRestrictions: [{ serverAddress: ['nope'] }] }), 2);
  assert.ok(!('authenticationRestrictions' in await a.collection('system.roles').findOne({ _id: 'admin.goodRole' })));
  // IPv6 ranges are accepted; the stored list keeps the strings as given, clientSource before serverAddress.
  await a.command({ createUser: 'v6', pwd: 'x', roles: [], authenticationRestrictions: [{ serverAddress: ['::1'], clientSource: ['fe80::/10', '127.0.0.1'] }] });
  const doc = await a.collection('system.users').findOne({ _id: 'admin.v6' });
  assert.deepEqual(doc.authenticationRestrictions, [{ clientSource: ['fe80::/10', '127.0.0.1'], serverAddress: ['::1'] }]);
});

h.test('usersInfo and rolesInfo with showAuthenticationRestrictions, in mongod\'s shapes', async () => {
  const r = await root();
  const a = r.db('admin');
  await a.command({ createRole: 'rR', privileges: [], roles: [], authenticationRestrictions: [{ clientSource: ['127.0.0.2'] }] });
  await a.command({ createRole: 'rRR', privileges: [], roles: ['rR'], authenticationRestrictions: [{ clientSource: ['127.0.0.3'] }] });
  await a.command({ createRole: 'plain', privileges: [], roles: [] });
  await mkUser('uPlain');
  await mkUser('uR', { authenticationRestrictions: [{ clientSource: ['127.0.0.1'] }], roles: ['rRR'] });

  // Not shown unless asked.
  for (const cmd of [{ usersInfo: 'uR' }, { usersInfo: 1 }, { usersInfo: 'uR', showAuthenticationRestrictions: false }]) {
    for (const u of (await a.command(cmd)).users) {
      assert.ok(!('authenticationRestrictions' in u) && !('inheritedAuthenticationRestrictions' in u), JSON.stringify(u));
    }
  }
  await h.expectCode(a.command({ usersInfo: 1, showAuthenticationRestrictions: true }), 20, /exact-match usersInfo/);
  await h.expectCode(a.command({ usersInfo: { forAllDBs: true }, showAuthenticationRestrictions: true }), 20);

  const [plain] = (await a.command({ usersInfo: 'uPlain', showAuthenticationRestrictions: true })).users;
  assert.deepEqual(plain.authenticationRestrictions, []);
  assert.deepEqual(plain.inheritedAuthenticationRestrictions, []);
  const [ur] = (await a.command({ usersInfo: 'uR', showAuthenticationRestrictions: true })).users;
  assert.deepEqual(ur.authenticationRestrictions, [{ clientSource: ['127.0.0.1'] }], 'its own list as stored');
  assert.deepEqual(ur.inheritedAuthenticationRestrictions,
    [[{ clientSource: ['127.0.0.3/32'] }], [{ clientSource: ['127.0.0.2/32'] }]], 'each role\'s list, resolved');
  assert.deepEqual(ur.inheritedRoles.map((x) => x.role).sort(), ['rR', 'rRR']);
  assert.ok(Array.isArray(ur.inheritedPrivileges));
  assert.ok(!('credentials' in ur) && Array.isArray(ur.mechanisms));

  const roleInfo = async (role, show = true) => (await a.command({ rolesInfo: role, showAuthenticationRestrictions: show })).roles[0];
  for (const role of ['plain', 'rR', 'rRR']) {
    const x = await roleInfo(role, false);
    assert.ok(!('authenticationRestrictions' in x) && !('inheritedAuthenticationRestrictions' in x));
  }
  const p = await roleInfo('plain');
  assert.deepEqual([p.authenticationRestrictions, p.inheritedAuthenticationRestrictions], [[], []]);
  const rr = await roleInfo('rR');
  assert.deepEqual(rr.authenticationRestrictions, [[{ clientSource: ['127.0.0.2'] }]]);
  assert.deepEqual(rr.inheritedAuthenticationRestrictions, [[{ clientSource: ['127.0.0.2'] }]]);
  const rrr = await roleInfo('rRR');
  assert.deepEqual(Object.keys(rrr), ['_id', 'role', 'db', 'roles', 'authenticationRestrictions', 'inheritedRoles', 'inheritedAuthenticationRestrictions', 'isBuiltin']);
  assert.deepEqual(rrr.authenticationRestrictions, [[{ clientSource: ['127.0.0.3'] }]]);
  assert.deepEqual(rrr.inheritedAuthenticationRestrictions, [[{ clientSource: ['127.0.0.3'] }], [{ clientSource: ['127.0.0.2/32'] }]]);
  const builtin = await roleInfo('read');
  assert.deepEqual(Object.keys(builtin), ['db', 'role', 'roles', 'authenticationRestrictions', 'inheritedRoles', 'inheritedAuthenticationRestrictions', 'isBuiltin']);
  const listing = (await a.command({ rolesInfo: 1, showAuthenticationRestrictions: true })).roles;
  assert.deepEqual(listing.find((x) => x.role === 'rR').inheritedAuthenticationRestrictions, [[{ clientSource: ['127.0.0.2'] }]]);
});

h.test('restrictions survive a restart, clean and with kill -9 right after they were changed', async () => {
  await srv.server.restart();
  rootC = null;
  await refused('net8');
  await canLogin('local');
  const [u] = (await (await root()).db('admin').command({ usersInfo: 'net8', showAuthenticationRestrictions: true })).users;
  assert.deepEqual(u.authenticationRestrictions, [{ clientSource: ['10.0.0.0/8'] }]);
  // Changed (one lifted, one imposed), then killed: both changes are kept, as acknowledged.
  const a = (await root()).db('admin');
  await a.command({ updateUser: 'net8', authenticationRestrictions: [{ clientSource: ['127.0.0.1'] }] });
  await a.command({ updateUser: 'local', authenticationRestrictions: [{ clientSource: ['198.51.100.0/24'] }] });
  await srv.server.restart({ kill9: true });
  rootC = null;
  await canLogin('net8');
  await refused('local');
});

h.test('a restriction on a role reached past the 64th user-defined role is still checked (the walk is not cut short)', async () => {
  const a = (await root()).db('admin');
  // A chain of 80 roles: many0 inherits many1, ..., many79, which alone is restricted.
  await a.command({ createRole: 'many79', privileges: [], roles: [], authenticationRestrictions: [{ clientSource: ['10.0.0.0/8'] }] });
  for (let i = 78; i >= 0; i--) await a.command({ createRole: `many${i}`, privileges: [], roles: [`many${i + 1}`] });
  await mkUser('manyRoles', { roles: ['many0'] });
  await refused('manyRoles');
  await a.command({ updateRole: 'many79', authenticationRestrictions: [] });
  await canLogin('manyRoles');
});

h.test('mongosh: db.createUser with authenticationRestrictions, then logging in', async () => {
  const rootUri = uri(...ROOT).replace('/?', '/admin?');
  const out = await h.mongoshUri(rootUri, `
    db.getSiblingDB("shell").createUser({user: "shOk", pwd: "shOkPw1", roles: [{role: "read", db: "shell"}],
      authenticationRestrictions: [{clientSource: ["127.0.0.1"], serverAddress: ["127.0.0.1"]}]});
    db.getSiblingDB("shell").createUser({user: "shNo", pwd: "shNoPw1", roles: [],
      authenticationRestrictions: [{clientSource: ["203.0.113.0/24"]}]});
    const u = db.getSiblingDB("shell").getUser("shOk", {showAuthenticationRestrictions: true});
    print("restr=" + JSON.stringify(u.authenticationRestrictions));
    print("okAuth=" + db.getSiblingDB("shell").auth("shOk", "shOkPw1").ok);
    let no;
    try { no = db.getSiblingDB("shell").auth("shNo", "shNoPw1").ok; } catch (e) { no = "code" + e.code; }
    print("noAuth=" + no);`);
  assert.match(out, /restr=\[\{"clientSource":\["127\.0\.0\.1"\],"serverAddress":\["127\.0\.0\.1"\]\}\]/);
  assert.match(out, /okAuth=1/);
  assert.match(out, /noAuth=code18/);
  const shOk = `mongodb://shOk:shOkPw1@127.0.0.1:${srv.port}/shell?directConnection=true&authSource=shell`;
  assert.equal(await h.mongoshUri(shOk, 'print(db.runCommand({connectionStatus: 1}).authInfo.authenticatedUsers[0].user)'), 'shOk');
  const shNo = `mongodb://shNo:shNoPw1@127.0.0.1:${srv.port}/shell?directConnection=true&authSource=shell&serverSelectionTimeoutMS=3000`;
  await assert.rejects(h.mongoshUri(shNo, 'print(1)'), /Authentication failed/);
});
