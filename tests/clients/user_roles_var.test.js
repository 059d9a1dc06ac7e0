'use strict';
/*
 * The $$USER_ROLES system variable, MongoDB 8.0 semantics, through the Node
 * driver. mongod's source: src/mongo/db/pipeline/variables.cpp (USER_ROLES
 * is a builtin in kBuiltinVarNameToId; defineUserRoles builds one
 * {_id: "<db>.<role>", role, db} per AuthorizationSession
 * getAuthenticatedRoleNames, which authorization_session_impl.cpp
 * _updateInternalAuthorizationState fills from the user's getIndirectRoles,
 * i.e. direct and inherited roles; no user: []); expression_context.cpp
 * initializeReferencedSystemVariables (bound wherever a query references it,
 * enableAccessToUserRoles defaults to true). The role order mongod gives is
 * that of a hash set, so the tests compare sorted lists.
 *
 * One --auth server (root made through the localhost exception) and one
 * server without access control.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const plain = h.useServer({ args: [] });
const srv = h.useServer({ args: ['--auth'] });
const ROOT = ['root', 'r00t-UserRoles!pw'];

let rootC = null;
async function root() {
  if (!rootC) rootC = await srv.login(...ROOT);
  return rootC;
}
const pw = (n) => `pw-${n}-U7!`;
async function userWith(name, roles, db = 'admin') {
  await (await root()).db(db).command({ createUser: name, pwd: pw(name), roles });
  return srv.login(name, pw(name), db);
}
const byId = (a) => [...a].sort((x, y) => (x._id < y._id ? -1 : x._id > y._id ? 1 : 0));
const rolesOf = async (c, db = 'budget') =>
  byId((await c.db(db).aggregate([{ $documents: [{}] }, { $project: { _id: 0, r: '$$USER_ROLES' } }]).toArray())[0].r);

/* The manual's "Role-Based Access Control for views" pattern. */
const ROLE_VIEW = [{
  $match: { $expr: { $not: [{ $eq: [{ $setIntersection: ['$allowedRoles', '$$USER_ROLES.role'] }, []] }] } },
}];
const BUDGET = [
  { _id: 0, allowedRoles: ['Sales'], comment: 'For sales team', yearlyBudget: 17000 },
  { _id: 1, allowedRoles: ['Finance', 'Sales'], comment: 'For sales and finance', yearlyBudget: 19000 },
  { _id: 2, allowedRoles: ['Operations'], comment: 'For operations team', yearlyBudget: 9000 },
];

h.test('setup: root, custom roles, the budget collection and the role-based view', async () => {
  const c = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
  srv.clients.push(c);
  await c.db('admin').command({ createUser: ROOT[0], pwd: ROOT[1], roles: ['root'] });
  const r = await root();
  const b = r.db('budget');
  for (const role of ['Sales', 'Finance', 'Operations']) {
    await b.command({ createRole: role, privileges: [{ resource: { db: 'budget', collection: '' }, actions: ['find', 'update', 'remove', 'insert'] }], roles: [] });
  }
  await b.command({ createRole: 'Manager', privileges: [], roles: ['Finance'] });
  await b.collection('budget').insertMany(BUDGET);
  await b.command({ create: 'budgetView', viewOn: 'budget', pipeline: ROLE_VIEW });
});

h.test('a view with $$USER_ROLES shows each user only the documents its roles allow', async () => {
  const sales = await userWith('jSmith', [{ role: 'Sales', db: 'budget' }], 'budget');
  const ops = await userWith('pJones', [{ role: 'Operations', db: 'budget' }], 'budget');
  const ids = async (c) => (await c.db('budget').collection('budgetView').find().sort({ _id: 1 }).toArray()).map((d) => d._id);
  assert.deepEqual(await ids(sales), [0, 1]);
  assert.deepEqual(await ids(ops), [2]);
  assert.equal(await sales.db('budget').collection('budgetView').countDocuments(), 2);
});

h.test('the value is [{_id: "db.role", role, db}] for direct and inherited roles', async () => {
  const sales = await srv.login('jSmith', pw('jSmith'), 'budget');
  assert.deepEqual(await rolesOf(sales), [{ _id: 'budget.Sales', role: 'Sales', db: 'budget' }]);
  const mgr = await userWith('boss', [{ role: 'Manager', db: 'budget' }, { role: 'read', db: 'other' }], 'admin');
  assert.deepEqual(await rolesOf(mgr), byId([
    { _id: 'budget.Manager', role: 'Manager', db: 'budget' },
    { _id: 'budget.Finance', role: 'Finance', db: 'budget' },
    { _id: 'other.read', role: 'read', db: 'other' },
  ]));
  /* An inherited role opens the view too. */
  const ids = (await mgr.db('budget').collection('budgetView').find().sort({ _id: 1 }).toArray()).map((d) => d._id);
  assert.deepEqual(ids, [1]);
  const r = await root();
  assert.deepEqual(await rolesOf(r, 'admin'), [{ _id: 'admin.root', role: 'root', db: 'admin' }]);
});

h.test('a user whose roles match no document sees nothing; a user with no roles may not read the view', async () => {
  const r = await root();
  await r.db('budget').command({ createRole: 'Viewer', privileges: [{ resource: { db: 'budget', collection: '' }, actions: ['find'] }], roles: [] });
  const out = await userWith('outsider', [{ role: 'Viewer', db: 'budget' }], 'budget');
  assert.deepEqual(await rolesOf(out), [{ _id: 'budget.Viewer', role: 'Viewer', db: 'budget' }]);
  assert.deepEqual(await out.db('budget').collection('budgetView').find().toArray(), []);
  assert.equal((await out.db('budget').collection('budget').find().toArray()).length, 3);
  const none = await userWith('nobody', [], 'budget');
  /* Without privileges it may not read the view itself: 13 Unauthorized, as mongod. */
  await h.expectCode(none.db('budget').collection('budgetView').find().toArray(), 13);
});

h.test('a role granted or revoked mid-session shows on the next command', async () => {
  const ops = await srv.login('pJones', pw('pJones'), 'budget');
  const r = await root();
  await r.db('budget').command({ grantRolesToUser: 'pJones', roles: ['Sales'] });
  assert.deepEqual((await rolesOf(ops)).map((x) => x.role), ['Operations', 'Sales']);
  const ids = (await ops.db('budget').collection('budgetView').find().sort({ _id: 1 }).toArray()).map((d) => d._id);
  assert.deepEqual(ids, [0, 1, 2]);
  await r.db('budget').command({ revokeRolesFromUser: 'pJones', roles: ['Sales'] });
  assert.deepEqual((await rolesOf(ops)).map((x) => x.role), ['Operations']);
});

h.test('$$USER_ROLES in find $expr, $lookup sub-pipelines, updates, deletes and findAndModify', async () => {
  const sales = await srv.login('jSmith', pw('jSmith'), 'budget');
  const coll = sales.db('budget').collection('budget');
  const allowed = { $expr: { $gt: [{ $size: { $setIntersection: ['$allowedRoles', '$$USER_ROLES.role'] } }, 0] } };
  assert.deepEqual((await coll.find(allowed).sort({ _id: 1 }).toArray()).map((d) => d._id), [0, 1]);
  const look = await coll.aggregate([
    { $match: { _id: 2 } },
    { $lookup: { from: 'budgetView', pipeline: [{ $project: { _id: 1 } }], as: 'mine' } },
    { $lookup: { from: 'budget', pipeline: [{ $match: { $expr: { $in: ['Sales', '$$USER_ROLES.role'] } } }, { $count: 'n' }], as: 'cnt' } },
    { $addFields: { who: { $first: '$$USER_ROLES._id' } } },
    { $project: { _id: 0, mine: 1, cnt: 1, who: 1 } },
  ]).toArray();
  assert.deepEqual(look, [{ mine: [{ _id: 0 }, { _id: 1 }], cnt: [{ n: 3 }], who: 'budget.Sales' }]);
  const u = await coll.updateMany(allowed, [{ $set: { seenBy: '$$USER_ROLES.role' } }]);
  assert.equal(u.modifiedCount, 2);
  assert.deepEqual((await coll.findOne({ _id: 1 })).seenBy, ['Sales']);
  assert.equal((await coll.findOne({ _id: 2 })).seenBy, undefined);
  const fam = await coll.findOneAndUpdate({ _id: 0, ...allowed }, [{ $set: { n: { $size: '$$USER_ROLES' } } }], { returnDocument: 'after' });
  assert.equal(fam.n, 1);
  await coll.insertOne({ _id: 9, allowedRoles: ['Sales'] });
  await coll.insertOne({ _id: 10, allowedRoles: ['Operations'] });
  const d = await coll.deleteMany({ _id: { $gte: 9 }, ...allowed });
  assert.equal(d.deletedCount, 1);
  assert.deepEqual((await coll.find({ _id: { $gte: 9 } }).toArray()).map((x) => x._id), [10]);
});

h.test('USER_ROLES is a builtin (no 17276; a misspelt name still is), readable in let, not settable by let', async () => {
  const sales = await srv.login('jSmith', pw('jSmith'), 'budget');
  const r = await sales.db('budget').command({ find: 'budget', filter: { _id: 0 }, projection: { _id: 0, r: '$$USER_ROLES.db' } });
  assert.deepEqual(r.cursor.firstBatch, [{ r: ['budget'] }]);
  await h.expectCode(sales.db('budget').collection('budget').aggregate([{ $project: { x: '$$USER_ROLEZ' } }]).toArray(), 17276);
  /* A let value may read it; a let may not set it (variables.cpp validateVariable: 4738901 for an internal constant). */
  const viaLet = await sales.db('budget').collection('budget')
    .find({ $expr: { $in: ['$$mine', '$allowedRoles'] } }, { let: { mine: { $first: '$$USER_ROLES.role' } } }).sort({ _id: 1 }).toArray();
  assert.deepEqual(viaLet.map((d) => d._id), [0, 1]);
  await h.expectCode(sales.db('budget').command({ find: 'budget', filter: {}, let: { USER_ROLES: [] } }), 4738901,
    /^Attempt to set internal constant: USER_ROLES$/);
  await h.expectCode(sales.db('budget').command({ find: 'budget', filter: {}, let: { NOW: new Date() } }), 4738901);
});

h.test('without access control (or not logged in) $$USER_ROLES is [] and the view shows nothing', async () => {
  const db = plain.client.db('budget');
  await db.collection('budget').insertMany(BUDGET);
  await db.command({ create: 'budgetView', viewOn: 'budget', pipeline: ROLE_VIEW });
  assert.deepEqual(await db.collection('budgetView').find().toArray(), []);
  assert.deepEqual(await rolesOf(plain.client), []);
  assert.deepEqual(await db.collection('budget').find({ $expr: { $eq: ['$$USER_ROLES', []] } }).count(), 3);
  /* On the --auth server, a connection that has not logged in: [] too (it may run $documents in no database it needs). */
  const anon = new MongoClient(`mongodb://127.0.0.1:${srv.port}/?directConnection=true`);
  srv.clients.push(anon);
  await h.expectCode(anon.db('budget').collection('budgetView').find().toArray(), 13);
});

h.test("enableAccessToUserRoles: true by default; off, $$USER_ROLES is 51144 (as in mongod's own jstest for it)", async () => {
  const r = await root();
  const admin = r.db('admin');
  assert.equal((await admin.command({ getParameter: 1, enableAccessToUserRoles: 1 })).enableAccessToUserRoles, true);
  const sales = await srv.login('jSmith', pw('jSmith'), 'budget');
  await admin.command({ setParameter: 1, enableAccessToUserRoles: false });
  try {
    await h.expectCode(sales.db('budget').collection('budgetView').find().toArray(), 51144,
      /^Builtin variable '\$\$USER_ROLES' is not available$/);
    /* Other commands are unaffected. */
    assert.equal(await sales.db('budget').collection('budget').countDocuments({ _id: { $lt: 3 } }), 3);
  } finally {
    await admin.command({ setParameter: 1, enableAccessToUserRoles: true });
  }
  assert.deepEqual((await sales.db('budget').collection('budgetView').find().sort({ _id: 1 }).toArray()).map((d) => d._id), [0, 1]);
});

/*
 * Variables::seedVariablesWithLetParameters (variables.cpp): each let value
 * is parsed with the earlier ones defined, and runs before any document is
 * read: a field path, $$ROOT / $$CURRENT or $meta in it is 4890500 (its
 * message is mongod's, "because" and "Command" run together).
 */
h.test('command let: a value may read the let variables before it, never a field of a document (4890500)', async () => {
  const c = plain.freshDb('letseq').collection('c');
  await c.insertMany([{ _id: 1, x: 5 }, { _id: 2, x: 6 }]);
  const found = await c.find({ $expr: { $eq: ['$x', '$$b'] } }, { let: { a: 5, b: { $add: ['$$a', 0] } } }).toArray();
  assert.deepEqual(found, [{ _id: 1, x: 5 }]);
  await h.expectCode(c.find({ $expr: true }, { let: { b: '$$a', a: 1 } }).toArray(), 17276, /undefined variable: a/);
  const msg = /^Command let Expression tried to access a field, but this is not allowed becauseCommand let Expressions run before the query examines any documents\.$/;
  for (const v of ['$x', '$$ROOT', '$$CURRENT.x', { $add: ['$x', 1] }, { $getField: 'x' }]) {
    await h.expectCode(c.find({ $expr: true }, { let: { a: v } }).toArray(), 4890500, msg);
  }
  // Variables a value binds itself ($map's $$this, $let's vars) are no document's fields.
  const m = await c.find({ $expr: { $eq: [{ $size: '$$a' }, 2] } }, { let: { a: { $map: { input: [1, 2], in: { $add: ['$$this', 1] } } } } }).toArray();
  assert.equal(m.length, 2);
});
