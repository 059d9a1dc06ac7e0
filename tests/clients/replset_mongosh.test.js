'use strict';
/*
 * mongosh's replica-set helpers against a 3-member mayfly set (issue 9):
 * rs.status(), rs.conf(), rs.printReplicationInfo(), rs.add(), rs.stepDown(),
 * with mongosh connected through mongodb://h1,h2,h3/?replicaSet=rs0. A spare
 * member (started with --replSet rs0, not in the config) is what rs.add()
 * adds.
 */
const assert = require('node:assert/strict');
const R = require('./rs_harness');

const rs = R.useReplSet(3, { spares: 1 });
const SPARE = 3;
const MAJ = { writeConcern: { w: 'majority', wtimeout: 15000 } };

function sh(dbName, script) { return R.mongoshUri(rs.uriFor(dbName), script); }

R.test('mongosh rs.status() and rs.conf() describe the set', { timeout: 120000 }, async () => {
  const p = await rs.waitForPrimary();
  await rs.waitForSteadyState();
  const db = rs.freshDb('shstatus');
  const out = await sh(db.databaseName, `
    const s = rs.status();
    print("set=" + s.set + " ok=" + s.ok + " members=" + s.members.length + " myState=" + s.myState);
    print("states=" + s.members.map(m => m.stateStr).sort().join(","));
    print("primary=" + s.members.filter(m => m.stateStr === "PRIMARY").map(m => m.name).join(","));
    print("self=" + s.members.filter(m => m.self).map(m => m.name).join(","));
    const c = rs.conf();
    print("conf=" + c._id + " n=" + c.members.length + " hosts=" + c.members.map(m => m.host).sort().join(","));
    const hello = db.hello();
    print("hello=" + hello.setName + " writable=" + hello.isWritablePrimary + " me=" + hello.me);
  `);
  const ph = rs.members[p].host;
  assert.match(out, /set=rs0 ok=1 members=3 myState=1/);
  assert.match(out, /states=PRIMARY,SECONDARY,SECONDARY/);
  assert.match(out, new RegExp(`primary=${ph}\\b`));
  assert.match(out, new RegExp(`self=${ph}\\b`), 'mongosh on a replicaSet URI talks to the primary');
  assert.match(out, new RegExp(`conf=rs0 n=3 hosts=${[...rs.hosts].sort().join(',')}`));
  assert.match(out, new RegExp(`hello=rs0 writable=true me=${ph}`));
});

R.test('mongosh rs.printReplicationInfo() reports the oplog\'s size and time window', { timeout: 120000 }, async () => {
  const db = rs.freshDb('shrepl');
  await db.collection('c').insertMany(Array.from({ length: 100 }, (_, k) => ({ _id: k })), MAJ);
  const out = await sh(db.databaseName, `
    const i = db.getReplicationInfo();
    print("info logSizeMB=" + (i.logSizeMB > 0) + " usedMB=" + (i.usedMB >= 0) + " timeDiff=" + (i.timeDiff >= 0) +
      " tFirst=" + (typeof i.tFirst) + " tLast=" + (typeof i.tLast));
    rs.printReplicationInfo();
  `);
  assert.match(out, /info logSizeMB=true usedMB=true timeDiff=true tFirst=string tLast=string/);
  for (const key of ['actual oplog size', 'configured oplog size', 'log length start to end',
    'oplog first event time', 'oplog last event time']) {
    assert.ok(out.includes(key), `rs.printReplicationInfo() prints "${key}":\n${out}`);
  }
});

R.test('mongosh rs.add() adds a member, which becomes SECONDARY and holds the set\'s data', { timeout: 120000 }, async () => {
  const db = rs.freshDb('shadd');
  await db.collection('c').insertMany(Array.from({ length: 500 }, (_, k) => ({ _id: k, v: `v${k}` })), MAJ);
  const spare = rs.members[SPARE];
  const out = await sh(db.databaseName, `
    const r = rs.add("${spare.host}");
    print("add=" + r.ok);
    print("n=" + rs.conf().members.length);
  `);
  assert.match(out, /add=1/);
  assert.match(out, /n=4/);
  spare.inSet = true;
  await rs.waitForSecondary(SPARE, { timeoutMs: 60000 });
  const docs = await rs.waitForReplication(db.databaseName, 'c', { timeoutMs: 60000 });
  assert.equal(docs.length, 500);
  const st = await rs.waitUntil(async () => {
    const s = await R.mongoshUri(rs.uriFor(db.databaseName), `
      const s = rs.status();
      print("members=" + s.members.length + " new=" + s.members.filter(m => m.name === "${spare.host}").map(m => m.stateStr).join());
    `);
    return /members=4 new=SECONDARY/.test(s) ? s : null;
  }, { timeoutMs: 30000, pollMs: 1000, what: 'rs.status() to show the added member as SECONDARY' });
  assert.match(st, /members=4 new=SECONDARY/);
});

R.test('mongosh rs.stepDown() hands the primary role to another member', { timeout: 120000 }, async () => {
  const p = await rs.waitForPrimary();
  await rs.waitForSteadyState();
  const db = rs.freshDb('shstep');
  const out = await sh(db.databaseName, `
    try {
      const r = rs.stepDown(30);
      print("stepdown=" + r.ok);
    } catch (e) {
      print("stepdown-error=" + e.message);
    }
  `);
  assert.match(out, /stepdown=1/);
  const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
  await rs.waitForSteadyState();
  const after = await R.mongoshUri(rs.uriFor(db.databaseName), `
    db.c.insertOne({ _id: "after" });
    print("primary=" + rs.status().members.filter(m => m.stateStr === "PRIMARY").map(m => m.name).join(","));
    print("me=" + db.hello().me + " count=" + db.c.countDocuments());
  `);
  assert.match(after, new RegExp(`primary=${rs.members[np].host}\\b`));
  assert.match(after, new RegExp(`me=${rs.members[np].host} count=1`));
});
