'use strict';
// mongosh against mayflyd: runs snippets with --eval and checks their output.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

function mongosh(dbName, script) {
  return h.mongosh(srv.port, dbName, script);
}

h.test('mongosh connects and runs insertOne, find and countDocuments', { timeout: 120000 }, async () => {
  const db = srv.freshDb('sh');
  const out = await mongosh(db.databaseName, `
    const r = db.c.insertOne({ _id: 1, name: "shell", n: 5 });
    db.c.insertMany([{ _id: 2, n: 6 }, { _id: 3, n: 7 }]);
    print("inserted=" + r.insertedId);
    print("found=" + JSON.stringify(db.c.find({ n: { $gte: 6 } }).sort({ _id: 1 }).toArray()));
    print("count=" + db.c.countDocuments());
    print("one=" + EJSON.stringify(db.c.findOne({ _id: 1 })));
  `);
  assert.match(out, /inserted=1/);
  assert.match(out, /found=\[\{"_id":2,"n":6\},\{"_id":3,"n":7\}\]/);
  assert.match(out, /count=3/);
  assert.match(out, /one=\{"_id":1,"name":"shell","n":5\}/);
  assert.equal(await db.collection('c').countDocuments(), 3);
});

h.test('mongosh db.stats() reports the collections and objects', { timeout: 120000 }, async () => {
  const db = srv.freshDb('shstats');
  await db.collection('a').insertMany([{ x: 1 }, { x: 2 }]);
  const out = await mongosh(db.databaseName, `
    const s = db.stats();
    print("db=" + s.db + " collections=" + s.collections + " objects=" + s.objects + " ok=" + s.ok);
  `);
  assert.match(out, new RegExp(`db=${db.databaseName} collections=1 objects=2 ok=1`));
});

h.test('mongosh db.c.stats(): sizes and counts are plain numbers (int, as mongod\'s appendNumber), so arithmetic on them works; storageStats.scale applies', { timeout: 120000 }, async () => {
  const db = srv.freshDb('shcollstats');
  await db.collection('c').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, pad: 'x'.repeat(100) })));
  const out = await mongosh(db.databaseName, `
    const s = db.c.stats();
    print("sizePlus1=" + (s.size + 1) + " count=" + (s.count + 0) + " idx=" + (s.totalIndexSize + 0 > 0) + " type=" + typeof s.size + " orphans=" + s.numOrphanDocs);
  `);
  assert.match(out, /sizePlus1=\d+ count=50 idx=true type=number orphans=0/, out);
  // Through the driver without promoting longs: int32 on the wire, as mongod's collStats and $collStats storageStats.
  const raw = await db.command({ collStats: 'c' }, { promoteLongs: false });
  for (const k of ['size', 'count', 'avgObjSize', 'storageSize', 'totalIndexSize', 'totalSize', 'scaleFactor']) {
    assert.equal(typeof raw[k], 'number', `${k}: ${raw[k]}`);
  }
  assert.equal(typeof raw.indexSizes._id_, 'number');
  const [agg] = await db.collection('c').aggregate([{ $collStats: { storageStats: { scale: 1024 } } }], { promoteLongs: false }).toArray();
  assert.equal(agg.storageStats.scaleFactor, 1024);
  assert.equal(agg.storageStats.size, Math.floor(raw.size / 1024));
  await h.expectCode(db.collection('c').aggregate([{ $collStats: { storageStats: { scale: 0 } } }]).toArray(), 51024);
});

h.test('mongosh db.setLogLevel / db.getLogComponents: logComponentVerbosity as mongod\'s (a component\'s level, the default level, -1 for "the default"); command at 1 logs every command', { timeout: 120000 }, async () => {
  const out = await mongosh('admin', `
    const before = db.getLogComponents();
    print("before=" + before.verbosity + "/" + before.command.verbosity + "/" + before.query.verbosity);
    db.setLogLevel(1, "command");
    db.setLogLevel(2, "query");
    const mid = db.getLogComponents();
    print("mid=" + mid.verbosity + "/" + mid.command.verbosity + "/" + mid.query.verbosity);
    db.runCommand({ ping: 1, comment: "logged-by-command-verbosity" });
    const logged = db.adminCommand({ getLog: "global" }).log.some((l) => l.includes("ping on admin ok"));
    print("logged=" + logged);
    db.setLogLevel(-1, "command");
    db.setLogLevel(-1, "query");
    try { db.setLogLevel(1, "nosuchcomponent"); print("bad=accepted"); } catch (e) { print("bad=" + e.codeName); }
    try { db.setLogLevel(9); print("high=accepted"); } catch (e) { print("high=" + e.codeName); }
    const after = db.getLogComponents();
    print("after=" + after.verbosity + "/" + after.command.verbosity + "/" + after.query.verbosity);
    // Sub-components, as mongod's (db.setLogLevel(level, "a.b") sends {a: {b: {verbosity: level}}}).
    db.setLogLevel(2, "replication.election");
    db.setLogLevel(3, "storage.wt.wtCheckpoint");
    const subs = db.getLogComponents();
    print("subs=" + subs.replication.verbosity + "/" + subs.replication.election.verbosity + "/" +
      subs.replication.heartbeats.verbosity + "/" + subs.storage.wt.verbosity + "/" + subs.storage.wt.wtCheckpoint.verbosity);
    try { db.setLogLevel(1, "replication.nosuch"); print("badsub=accepted"); } catch (e) { print("badsub=" + e.codeName); }
    try { db.setLogLevel(1, "command.election"); print("misplaced=accepted"); } catch (e) { print("misplaced=" + e.codeName); }
    db.setLogLevel(-1, "replication.election");
    db.setLogLevel(-1, "storage.wt.wtCheckpoint");
    print("reset=" + db.getLogComponents().replication.election.verbosity);
  `);
  assert.match(out, /subs=-1\/2\/-1\/-1\/3/, out);
  assert.match(out, /badsub=BadValue/, out);
  assert.match(out, /misplaced=BadValue/, out);
  assert.match(out, /reset=-1/, out);
  assert.match(out, /before=0\/-1\/-1/, out);
  assert.match(out, /mid=0\/1\/2/, out);
  assert.match(out, /logged=true/, out);
  assert.match(out, /bad=BadValue/, out);
  assert.match(out, /high=BadValue/, out);
  assert.match(out, /after=0\/-1\/-1/, out);
  const p = await srv.client.db('admin').command({ getParameter: 1, logComponentVerbosity: 1, logLevel: 1 });
  assert.equal(p.logLevel, 0);
  assert.equal(p.logComponentVerbosity.storage.verbosity, -1);
  // mongod's nesting and order: a component's verbosity, then its sub-components.
  assert.deepEqual(Object.keys(p.logComponentVerbosity.storage), ['verbosity', 'recovery', 'journal', 'wt']);
  assert.deepEqual(Object.keys(p.logComponentVerbosity.network), ['verbosity', 'asio', 'bridge', 'connectionPool']);
  assert.equal(Object.keys(p.logComponentVerbosity.storage.wt).length, 14);
  // A bad value anywhere changes nothing.
  await h.expectCode(srv.client.db('admin').command({ setParameter: 1, logComponentVerbosity: { command: 2, replication: { rollback: { verbosity: 9 } } } }), 2);
  const q = await srv.client.db('admin').command({ getParameter: 1, logComponentVerbosity: 1 });
  assert.equal(q.logComponentVerbosity.command.verbosity, -1);
  assert.equal(q.logComponentVerbosity.replication.rollback.verbosity, -1);
  const all = await srv.client.db('admin').command({ getParameter: '*' });
  assert.ok(all.logComponentVerbosity && all.logComponentVerbosity.replication.verbosity === -1);
});

h.test('mongosh updates, aggregates and shows errors', { timeout: 120000 }, async () => {
  const db = srv.freshDb('shmisc');
  const out = await mongosh(db.databaseName, `
    db.c.insertMany([{ k: "a", v: 1 }, { k: "a", v: 2 }, { k: "b", v: 3 }]);
    db.c.updateMany({ k: "a" }, { $inc: { v: 10 } });
    print("agg=" + JSON.stringify(db.c.aggregate([{ $group: { _id: "$k", s: { $sum: "$v" } } }, { $sort: { _id: 1 } }]).toArray()));
    try { db.c.insertOne({ _id: 1 }); db.c.insertOne({ _id: 1 }); } catch (e) { print("err=" + e.code); }
    print("cols=" + db.getCollectionNames().join(","));
    print("ver=" + (typeof db.version()));
  `);
  assert.match(out, /agg=\[\{"_id":"a","s":23\},\{"_id":"b","s":3\}\]/);
  assert.match(out, /err=11000/);
  assert.match(out, /cols=c/);
  assert.match(out, /ver=string/);
});

h.test('mongosh show dbs / show collections / indexes / serverStatus helpers', { timeout: 120000 }, async () => {
  const db = srv.freshDb('shshow');
  await db.collection('things').insertOne({ a: 1 });
  const out = await mongosh(db.databaseName, `
    db.things.createIndex({ a: 1 }, { unique: true });
    print("idx=" + db.things.getIndexes().map(i => i.name).join(","));
    print("colls=" + db.getCollectionNames().join(","));
    print("dbs=" + (db.adminCommand({ listDatabases: 1 }).databases.some(d => d.name === db.getName())));
    const ss = db.serverStatus();
    print("ss=" + ss.ok + " uptime=" + (typeof ss.uptime));
    print("dropped=" + db.things.drop());
    print("hello=" + db.hello().isWritablePrimary);
  `);
  assert.match(out, /idx=_id_,a_1/);
  assert.match(out, /colls=things/);
  assert.match(out, /dbs=true/);
  assert.match(out, /ss=1 uptime=number/);
  assert.match(out, /dropped=true/);
  assert.match(out, /hello=true/);
});

h.test('mongosh role helpers: db.createRole, getRole(s), grant/revoke privileges and roles, updateRole, dropRole, dropAllRoles', { timeout: 120000 }, async () => {
  const db = srv.freshDb('shroles');
  const out = await mongosh(db.databaseName, `
    db.createRole({ role: "r1", privileges: [{ resource: { db: db.getName(), collection: "a" }, actions: ["insert", "find"] }], roles: ["read"] });
    db.grantPrivilegesToRole("r1", [{ resource: { db: db.getName(), collection: "b" }, actions: ["update"] }]);
    db.revokeRolesFromRole("r1", ["read"]);
    print("privs=" + JSON.stringify(db.getRole("r1", { showPrivileges: true }).privileges));
    db.updateRole("r1", { roles: [{ role: "readWrite", db: db.getName() }] });
    db.grantRolesToRole("r1", ["dbAdmin"]);
    print("roles=" + JSON.stringify(db.getRole("r1").roles.map((r) => r.role)));
    db.revokePrivilegesFromRole("r1", [{ resource: { db: db.getName(), collection: "a" }, actions: ["find"] }]);
    print("after=" + JSON.stringify(db.getRole("r1", { showPrivileges: true }).privileges.map((p) => p.actions)));
    print("list=" + JSON.stringify(db.getRoles().roles.map((r) => r.role)));
    db.dropRole("r1");
    db.createRole({ role: "r2", privileges: [], roles: [] });
    print("dropAll=" + JSON.stringify(db.dropAllRoles()));
    print("left=" + db.getRoles().roles.length);
  `);
  assert.match(out, /privs=\[\{"resource":\{"db":"[^"]+","collection":"a"\},"actions":\["find","insert"\]\},\{"resource":\{"db":"[^"]+","collection":"b"\},"actions":\["update"\]\}\]/);
  assert.match(out, /roles=\["readWrite","dbAdmin"\]/);
  assert.match(out, /after=\[\["insert"\],\["update"\]\]/);
  assert.match(out, /list=\["r1"\]/);
  assert.match(out, /dropAll=\{"n":1,"ok":1\}/);
  assert.match(out, /left=0/);
});
