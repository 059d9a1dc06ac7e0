'use strict';
/*
 * Replica sets (issue 9): discovery, the replSet* commands and their error
 * codes, reads and writes by member state, replication of every kind of
 * write, w: "majority", local.oplog.rs, replSetStepDown and replSetReconfig.
 * One 3-member set on loopback (rs_harness.js) plus a spare member started
 * with --replSet rs0 but left out of the config (bad-config cases, then added
 * with replSetReconfig). MongoDB 8.0 is the reference for every reply shape.
 */
const assert = require('node:assert/strict');
const { MongoClient, BSON, Long, UUID, Timestamp } = require('mongodb');
const h = require('./harness');
const R = require('./rs_harness');

const rs = R.useReplSet(3, { spares: 1 });
const SPARE = 3;
const MAJ = { writeConcern: { w: 'majority', wtimeout: 15000 } };

const isTs = (v) => Boolean(v) && v._bsontype === 'Timestamp';
const isOid = (v) => Boolean(v) && v._bsontype === 'ObjectId';
const isInt = (v) => typeof v === 'number' || (Boolean(v) && v._bsontype === 'Long');
const num = (v) => Number(v);
const isUuid = (v) => Boolean(v) && v._bsontype === 'Binary' && v.sub_type === 4;

/* A member of the set other than i (a secondary when i is the primary). */
function other(i, set = [0, 1, 2]) { return set.find((k) => k !== i); }

/* Raw reply's error code: a top-level error or the first write error. */
function rawCode(r) {
  if (!r) return undefined;
  if (r.ok === 0) return r.code;
  return r.writeErrors && r.writeErrors[0] ? r.writeErrors[0].code : undefined;
}

/* The parts of listIndexes that must match on every member. */
async function indexesOn(i, dbName, collName) {
  const ix = await rs.reader(i).db(dbName).collection(collName).listIndexes().toArray();
  return R.ejson(ix.map((x) => ({
    name: x.name, key: x.key, unique: x.unique, sparse: x.sparse,
    expireAfterSeconds: x.expireAfterSeconds, partialFilterExpression: x.partialFilterExpression,
  })).sort((a, b) => (a.name < b.name ? -1 : 1)));
}

async function collectionsOn(i, dbName, { uuids = false } = {}) {
  const cs = await rs.reader(i).db(dbName).listCollections().toArray();
  return R.ejson(cs.map((c) => (uuids ? { name: c.name, uuid: c.info && c.info.uuid } : { name: c.name, type: c.type, options: c.options }))
    .sort((a, b) => (a.name < b.name ? -1 : 1)));
}

/* Waits until f(i) gives the same value on every running member of the set; returns it. */
async function waitSameOnAll(f, what, timeoutMs = 20000) {
  let last = {};
  await rs.waitUntil(async () => {
    last = await rs.onEach(f);
    const vals = Object.values(last);
    return vals.length > 0 && vals.every((v) => v === vals[0]);
  }, { timeoutMs, what: `${what} to be the same on every member` })
    .catch((e) => { e.message += `\n${JSON.stringify(last, null, 1).slice(0, 3000)}`; throw e; });
  return Object.values(last)[0];
}

R.test('discovery: hello on every member names the set, its hosts, the primary and itself', async () => {
  const db = rs.freshDb('hello');
  await db.collection('c').insertOne({ _id: 1 }, MAJ);
  const p = await rs.waitForPrimary();
  const hosts = [...rs.hosts].sort();
  for (const i of [0, 1, 2]) {
    const r = await rs.direct(i).db('admin').command({ hello: 1 });
    const me = rs.members[i].host;
    assert.equal(r.setName, 'rs0', `member ${i} setName`);
    assert.deepEqual([...r.hosts].sort(), hosts, `member ${i} hosts`);
    assert.equal(r.me, me);
    assert.equal(r.primary, rs.members[p].host, `member ${i} names the primary`);
    assert.equal(r.isWritablePrimary, i === p, `member ${i} isWritablePrimary`);
    assert.equal(r.secondary, i !== p, `member ${i} secondary`);
    assert.ok(isInt(r.setVersion) && num(r.setVersion) >= 1, `setVersion ${r.setVersion}`);
    if (i === p) assert.ok(isOid(r.electionId), `the primary's electionId is an ObjectId: ${r.electionId}`);
    assert.ok(r.topologyVersion && isOid(r.topologyVersion.processId) && isInt(r.topologyVersion.counter),
      `topologyVersion ${JSON.stringify(r.topologyVersion)}`);
    assert.ok(r.lastWrite && r.lastWrite.opTime && isTs(r.lastWrite.opTime.ts) && isInt(r.lastWrite.opTime.t),
      `lastWrite.opTime ${JSON.stringify(r.lastWrite)}`);
    assert.ok(r.lastWrite.lastWriteDate instanceof Date);
    assert.ok(r.lastWrite.majorityOpTime && isTs(r.lastWrite.majorityOpTime.ts));
    assert.ok(r.lastWrite.majorityWriteDate instanceof Date);
  }
  // Once the write has reached every member, each one's lastWrite is recent.
  await rs.waitUntil(async () => {
    const hs = await rs.hellos([0, 1, 2]);
    return hs.every((r) => r && Math.abs(Date.now() - r.lastWrite.lastWriteDate.getTime()) < 120000);
  }, { what: 'every member\'s lastWrite.lastWriteDate to be recent' });
});

R.test('discovery: legacy isMaster carries ismaster, secondary and the set fields', async () => {
  const p = await rs.waitForPrimary();
  for (const i of [0, 1, 2]) {
    const r = await rs.raw(i, 'admin', { isMaster: 1 });
    assert.equal(r.ok, 1);
    assert.equal(r.ismaster, i === p, `member ${i} ismaster`);
    assert.equal(r.secondary, i !== p);
    assert.equal(r.isWritablePrimary, undefined, 'isMaster answers with the legacy field name only');
    assert.equal(r.setName, 'rs0');
    assert.equal(r.primary, rs.members[p].host);
    assert.equal(r.me, rs.members[i].host);
  }
});

R.test('discovery: a mongodb://h1,h2,h3/?replicaSet=rs0 client sees the topology, writes to the primary and reads back', async () => {
  const p = await rs.waitForPrimary();
  const client = new MongoClient(rs.uri);
  rs.clients.push(client);
  let desc = null;
  client.on('topologyDescriptionChanged', (ev) => { desc = ev.newDescription; });
  await client.connect();
  const coll = client.db(rs.freshDb('uri').databaseName).collection('c');
  const ins = await coll.insertOne({ _id: 'a', v: 1 });
  assert.equal(ins.acknowledged, true);
  assert.deepEqual(await coll.findOne({ _id: 'a' }), { _id: 'a', v: 1 });
  await rs.waitUntil(() => desc && desc.type === 'ReplicaSetWithPrimary' &&
    [...desc.servers.values()].filter((s) => s.type === 'RSSecondary').length === 2,
  { what: 'the driver to see a primary and two secondaries' });
  assert.equal(desc.setName, 'rs0');
  const prim = [...desc.servers.values()].find((s) => s.type === 'RSPrimary');
  assert.equal(prim.address, rs.members[p].host);
  const hello = await client.db('admin').command({ hello: 1 });
  assert.equal(hello.me, rs.members[p].host, 'primary read preference sends commands to the primary');
});

R.test('write concerns a set cannot give: w above its members answers writeConcernError 100, an unknown w mode 79, after the write, as mongod', async () => {
  const p = await rs.waitForPrimary();
  const dbName = rs.freshDb('wcunmet').databaseName;
  let r = await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: 1 }], writeConcern: { w: 4 } });
  assert.equal(r.ok, 1, JSON.stringify(r));
  assert.equal(r.n, 1);
  assert.deepEqual(r.writeConcernError, {
    code: 100, codeName: 'UnsatisfiableWriteConcern', errmsg: 'Not enough data-bearing nodes',
    errInfo: { writeConcern: { w: 4, wtimeout: 0, provenance: 'clientSupplied' } },
  });
  // The concern comes back as given, its wtimeout included (found by helper-105).
  r = await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: 1.5 }], writeConcern: { w: 4, wtimeout: 100 } });
  assert.deepEqual(r.writeConcernError.errInfo, { writeConcern: { w: 4, wtimeout: 100, provenance: 'clientSupplied' } });
  r = await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: 2 }], writeConcern: { w: 'nosuchtag' } });
  assert.equal(r.ok, 1, JSON.stringify(r));
  assert.equal(r.writeConcernError.code, 79);
  assert.equal(r.writeConcernError.codeName, 'UnknownReplWriteConcern');
  assert.equal(r.writeConcernError.errmsg, "No write concern mode named 'nosuchtag' found in replica set configuration");
  // w: 3 (every member) and "majority" are satisfiable: no error.
  r = await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: 3 }], writeConcern: { w: 3, wtimeout: 10000 } });
  assert.equal(r.ok, 1);
  assert.equal(r.writeConcernError, undefined, JSON.stringify(r));
  // Through the driver the write is done and the error is a MongoWriteConcernError.
  const e = await rs.client.db(dbName).collection('c').insertOne({ _id: 4 }, { writeConcern: { w: 5 } }).then(() => null, (x) => x);
  assert.equal(e && e.code, 100, String(e));
  assert.deepEqual((await rs.client.db(dbName).collection('c').find({}).toArray()).map((d) => d._id), [1, 1.5, 2, 3, 4]);
});

R.test('getDefaultRWConcern: mongod 8.0\'s implicit defaults on a replica set, on every member (local reads, w: "majority" writes)', async () => {
  // rwc_defaults_commands.cpp; read_write_concern_defaults.cpp (implicit default write concern "majority").
  for (let i = 0; i < 3; i++) {
    const r = await rs.raw(i, 'admin', { getDefaultRWConcern: 1 });
    assert.equal(r.ok, 1, JSON.stringify(r));
    assert.deepEqual(r.defaultReadConcern, { level: 'local' });
    assert.deepEqual(r.defaultWriteConcern, { w: 'majority', wtimeout: 0 });
    assert.equal(r.defaultWriteConcernSource, 'implicit');
    assert.equal(r.defaultReadConcernSource, 'implicit');
    assert.ok(r.localUpdateWallClockTime instanceof Date);
  }
  const notAdmin = await rs.raw(await rs.waitForPrimary(), 'test', { getDefaultRWConcern: 1 });
  assert.equal(notAdmin.code, 13, 'admin only (Unauthorized, as mongod)');
});

R.test('setDefaultRWConcern: stored in config.settings, reported by getDefaultRWConcern on every member, kept across a clean stop and kill -9; mongod\'s checks (helper-67: it was 59)', async () => {
  const p = await rs.waitForPrimary();
  const bad = [
    [{}, 2, /^At least one of the "defaultReadConcern" or "defaultWriteConcern" fields must be present$/],
    [{ defaultWriteConcern: { w: 0 } }, 2, /^Unacknowledged write concern is not suitable for the default write concern$/],
    [{ defaultReadConcern: { level: 'snapshot' } }, 2, /^level: 'snapshot' is not suitable for the default read concern$/],
    [{ defaultReadConcern: { level: 'local', afterClusterTime: new Timestamp({ t: 1, i: 1 }) } }, 2, /'afterClusterTime' is not suitable/],
    [{ defaultReadConcern: 'x' }, 14, /wrong type/],
    [{ defaultWriteConcern: { w: 1 }, bogus: 1 }, 40415, /setDefaultRWConcern\.bogus/],
    // The shapes a command's readConcern and writeConcern have (mf_read_concern_shape, mf_write_concern_shape).
    [{ defaultReadConcern: { level: 'local', bogus: 1 } }, 40415, /^BSON field 'readConcern\.bogus' is an unknown field\.$/],
    [{ defaultReadConcern: { level: 'bogus' } }, 9, /^readConcern\.level must be either/],
    [{ defaultReadConcern: { level: 5 } }, 14, /"level" had the wrong type/],
    [{ defaultReadConcern: { provenance: 'global' } }, 2, /^'provenance' must be unset in default read concern$/],
    [{ defaultWriteConcern: { w: 1, bogus: 1 } }, 9, /^unrecognized write concern field: bogus$/],
    [{ defaultWriteConcern: { w: 51 } }, 9, /^w has to be a non-negative number and not greater than 50/],
    [{ defaultWriteConcern: { w: true } }, 9, /^w has to be a number, string, or object; found: bool$/],
    [{ defaultWriteConcern: { w: 1, j: true, fsync: true } }, 9, /^fsync and j options cannot be used together$/],
    [{ defaultWriteConcern: { w: 1, wtimeout: 'x' } }, 14, /writeConcern\.wtimeout' is the wrong type/],
    [{ defaultWriteConcern: { w: 1, provenance: 'global' } }, 2, /^'provenance' must be unset in default write concern$/],
  ];
  for (const [args, code, msg] of bad) {
    const r = await rs.raw(p, 'admin', { setDefaultRWConcern: 1, ...args });
    assert.equal(r.code, code, `${JSON.stringify(args)}: ${JSON.stringify(r)}`);
    assert.match(r.errmsg, msg);
  }
  assert.equal((await rs.raw(p, 'admin', { getDefaultRWConcern: 1 })).defaultWriteConcernSource, 'implicit', 'the refused ones stored nothing');
  const set = await rs.raw(p, 'admin', { setDefaultRWConcern: 1, defaultReadConcern: { level: 'majority' },
    defaultWriteConcern: { w: 2, wtimeout: 5000 } });
  assert.equal(set.ok, 1, JSON.stringify(set));
  assert.deepEqual(set.defaultReadConcern, { level: 'majority' });
  assert.deepEqual(set.defaultWriteConcern, { w: 2, wtimeout: 5000 });
  assert.equal(set.defaultWriteConcernSource, 'global');
  assert.equal(set.defaultReadConcernSource, 'global');
  assert.ok(isTs(set.updateOpTime) && set.updateWallClockTime instanceof Date, JSON.stringify(set));
  const same = (r) => r.ok === 1 && r.defaultWriteConcernSource === 'global' && r.defaultWriteConcern.w === 2 &&
    r.defaultReadConcern.level === 'majority';
  for (let i = 0; i < 3; i++) {
    await h.waitFor(async () => same(await rs.raw(i, 'admin', { getDefaultRWConcern: 1 })), `member ${i} reports the defaults`, 15000);
  }
  // Only the read default: the write default stays; it cannot be cleared once set (20), the read one can.
  const rc = await rs.raw(p, 'admin', { setDefaultRWConcern: 1, defaultReadConcern: { level: 'available' } });
  assert.deepEqual([rc.defaultReadConcern, rc.defaultWriteConcern], [{ level: 'available' }, { w: 2, wtimeout: 5000 }]);
  const unset = await rs.raw(p, 'admin', { setDefaultRWConcern: 1, defaultWriteConcern: {} });
  assert.equal(unset.code, 20, JSON.stringify(unset));
  assert.equal(unset.errmsg, 'The global default write concern cannot be unset once it is set.');
  const clear = await rs.raw(p, 'admin', { setDefaultRWConcern: 1, defaultReadConcern: {} });
  assert.deepEqual(clear.defaultReadConcern, { level: 'local' });
  assert.equal(clear.defaultReadConcernSource, 'implicit');
  // A secondary refuses it; on restart (clean, then kill -9) every member still reports the stored defaults.
  const sec = [0, 1, 2].find((i) => i !== p);
  const onSec = await rs.raw(sec, 'admin', { setDefaultRWConcern: 1, defaultWriteConcern: { w: 1 } });
  assert.equal(onSec.code, 10107, JSON.stringify(onSec));
  const stored = (r) => r.ok === 1 && r.defaultWriteConcern.w === 2 && r.defaultReadConcernSource === 'implicit';
  for (let i = 0; i < 3; i++) {
    await h.waitFor(async () => stored(await rs.raw(i, 'admin', { getDefaultRWConcern: 1 })), `member ${i} caught up`, 15000);
  }
  for (const kill9 of [false, true]) {
    await rs.kill(sec, { kill9 });
    await rs.restart(sec);
    await h.waitFor(async () => stored(await rs.raw(sec, 'admin', { getDefaultRWConcern: 1 }).catch(() => ({}))),
      `member ${sec} after ${kill9 ? 'kill -9' : 'a clean stop'}`, 30000);
  }
  await rs.waitForPrimary();
});

R.test('validate {repair: true} on a member is 72: it can only be performed in standalone mode, as mongod', async () => {
  const p = await rs.waitForPrimary();
  const dbName = rs.freshDb('validaterepair').databaseName;
  await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: 1 }] });
  const r = await rs.raw(p, dbName, { validate: 'c', repair: true });
  assert.equal(r.code, 72, JSON.stringify(r));
  assert.equal(r.errmsg, 'Running the validate command with { repair: true } can only be performed in standalone mode.');
});

R.test('causal consistency: replies carry operationTime and $clusterTime; a session reading from a secondary after its write sees it (afterClusterTime waits)', async () => {
  const p = await rs.waitForPrimary();
  const dbName = rs.freshDb('causal').databaseName;
  // Raw: every reply has operationTime and $clusterTime, the write's at least the previous reply's.
  const r1 = await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: 0 }] });
  assert.ok(isTs(r1.operationTime), JSON.stringify(r1));
  assert.ok(isTs(r1.$clusterTime.clusterTime));
  assert.equal(r1.$clusterTime.signature.keyId.toString(), '0');
  const r2 = await rs.raw(p, dbName, { insert: 'c', documents: [{ _id: -1 }] });
  assert.ok(r2.operationTime.greaterThan(r1.operationTime), 'each write gets a later time');
  const f = await rs.raw(p, dbName, { find: 'c', filter: {} });
  assert.ok(isTs(f.operationTime) && !f.operationTime.lessThan(r2.operationTime), 'a read after the write: no earlier time');
  const bad = await rs.raw(p, dbName, { find: 'c', readConcern: { afterClusterTime: 5 } });
  assert.equal(bad.code, 14, JSON.stringify(bad));
  assert.ok(isTs(bad.operationTime), 'error replies carry it too');
  const { Timestamp } = require('mongodb');
  const future = new Timestamp({ t: r2.operationTime.high + 3600, i: 1 });
  const fut = await rs.raw(p, dbName, { find: 'c', readConcern: { afterClusterTime: future } });
  assert.equal(fut.code, 72, `a time past the cluster's: ${JSON.stringify(fut)}`);
  assert.match(fut.errmsg, /^readConcern afterClusterTime value must not be greater than the current clusterTime\. /);
  // A snapshot read at a future atClusterTime names its own field.
  const futAt = await rs.raw(p, dbName, { find: 'c', readConcern: { level: 'snapshot', atClusterTime: future } });
  assert.equal(futAt.code, 72, JSON.stringify(futAt));
  assert.match(futAt.errmsg, /^readConcern atClusterTime value must not be greater than the current clusterTime\. /);

  // Through the driver: a causally consistent session writes on the primary, then reads on a secondary.
  const client = new MongoClient(rs.uri, { readPreference: 'secondary' });
  try {
    await client.connect();
    const coll = client.db(dbName).collection('c');
    let seen = 0;
    for (let i = 1; i <= 40; i++) {
      const session = client.startSession({ causalConsistency: true });
      try {
        await coll.insertOne({ _id: i, v: i }, { session, writeConcern: { w: 1 } });
        assert.ok(session.operationTime, 'the session learned the write\'s operationTime');
        const d = await coll.findOne({ _id: i }, { session });
        if (d !== null && d.v === i) seen++;
      } finally { await session.endSession(); }
    }
    assert.equal(seen, 40, 'every read on a secondary saw the session\'s own write');
  } finally { await client.close(); }
});

R.test('a member started with --replSet but not initiated: hello says it has no config, replSetGetStatus answers 94, writes 10107', async () => {
  const r = await rs.hello(SPARE);
  assert.equal(r.isWritablePrimary, false);
  assert.equal(r.secondary, false);
  assert.equal(r.isreplicaset, true);
  assert.match(String(r.info), /valid replica set config/);
  const st = await rs.raw(SPARE, 'admin', { replSetGetStatus: 1 });
  assert.equal(st.ok, 0);
  assert.equal(st.code, 94);
  assert.equal(st.codeName, 'NotYetInitialized');
  const w = await rs.raw(SPARE, 'test_spare', { insert: 'c', documents: [{ _id: 1 }] });
  assert.equal(rawCode(w), 10107, JSON.stringify(w));
});

R.test('renameCollection out of system.profile (kept by each member alone) is refused in a set, as mongod: 20 IllegalOperation', async () => {
  const db = rs.client.db('rs_profile_rename');
  await db.collection('c').insertOne({ _id: 1 }, MAJ);
  await db.command({ profile: 2 });
  await db.collection('c').find({}).toArray();
  await db.command({ profile: 0 });
  assert.ok((await db.collection('system.profile').countDocuments({})) > 0, 'the primary profiled the find');
  const e = await rs.client.db('admin').command({ renameCollection: 'rs_profile_rename.system.profile', to: 'rs_profile_rename.kept' })
    .then(() => null, (x) => x);
  assert.ok(e, 'refused');
  assert.equal(e.code, 20);
  assert.equal(e.codeName, 'IllegalOperation');
  assert.equal(e.message, 'Cannot rename collections between a replicated and an unreplicated database');
  assert.deepEqual((await db.listCollections({ name: 'kept' }).toArray()), [], 'nothing was renamed');
  await db.collection('c').rename('c2', MAJ); // an ordinary rename still goes through
  assert.equal(await db.collection('c2').countDocuments({}), 1);
});

R.test('replSetGetStatus: members with name, stateStr, health, optime, optimeDate, lastHeartbeat and self', async () => {
  const db = rs.freshDb('status');
  await db.collection('c').insertOne({ _id: 1 }, MAJ);
  const p = await rs.waitForPrimary();
  const hosts = [...rs.hosts].sort();
  for (const i of [0, 1, 2]) {
    // Heartbeats may take a moment to bring every member's view up to date.
    let seen = null;
    const st = await rs.waitUntil(async () => {
      seen = await rs.adminCommand(i, { replSetGetStatus: 1 });
      const ok = seen.members.every((m) => m.health === 1 && ['PRIMARY', 'SECONDARY'].includes(m.stateStr)) &&
        seen.members.filter((m) => m.stateStr === 'PRIMARY').map((m) => m.name).join() === rs.members[p].host;
      return ok ? seen : null;
    }, { what: `member ${i}'s replSetGetStatus to show every member healthy and ${rs.members[p].host} PRIMARY` })
      .catch((e) => { e.message += `\nlast: ${JSON.stringify(seen && seen.members)}`; throw e; });
    const where = `member ${i}'s replSetGetStatus ${JSON.stringify(st.members)}`;
    assert.equal(st.ok, 1);
    assert.equal(st.set, 'rs0');
    assert.ok(st.date instanceof Date);
    assert.equal(st.myState, i === p ? 1 : 2, `member ${i} myState`);
    assert.ok(isInt(st.term) && num(st.term) >= 1, `term ${st.term}`);
    assert.deepEqual(st.members.map((m) => m.name).sort(), hosts);
    assert.equal(st.members.filter((m) => m.stateStr === 'PRIMARY').length, 1, where);
    assert.equal(st.members.filter((m) => m.stateStr === 'SECONDARY').length, 2, where);
    const pm = st.members.find((m) => m.stateStr === 'PRIMARY');
    assert.equal(pm.name, rs.members[p].host, `member ${i} sees ${rs.members[p].host} as PRIMARY: ${where}`);
    const selfs = st.members.filter((m) => m.self === true);
    assert.equal(selfs.length, 1, `exactly one self entry: ${where}`);
    assert.equal(selfs[0].name, rs.members[i].host);
    // A secondary syncs from the primary (top level and in its entries); the primary's own entry says when it won.
    const primaryId = pm._id;
    assert.equal(st.syncSourceHost, i === p ? '' : rs.members[p].host, `syncSourceHost: ${JSON.stringify(st)}`);
    assert.equal(num(st.syncSourceId), i === p ? -1 : num(primaryId));
    for (const m of st.members) {
      assert.equal(m.syncSourceHost, m.stateStr === 'SECONDARY' ? rs.members[p].host : '', `${m.name}'s syncSourceHost`);
      assert.equal(num(m.syncSourceId), m.stateStr === 'SECONDARY' ? num(primaryId) : -1);
    }
    if (i === p) {
      assert.ok(pm.electionDate instanceof Date && Date.now() - pm.electionDate.getTime() < 600000, where);
      assert.ok(isTs(pm.electionTime) && pm.electionTime.high === Math.floor(pm.electionDate.getTime() / 1000));
    }
    for (const m of st.members) {
      assert.ok(isInt(m._id), `_id ${m._id}`);
      assert.equal(m.state, m.stateStr === 'PRIMARY' ? 1 : 2, `state matches stateStr: ${where}`);
      assert.ok(m.optime && isTs(m.optime.ts) && isInt(m.optime.t), `optime ${JSON.stringify(m.optime)}`);
      assert.ok(m.optimeDate instanceof Date, `optimeDate ${m.optimeDate}`);
      if (!m.self) {
        assert.ok(m.lastHeartbeat instanceof Date, `lastHeartbeat of ${m.name}: ${m.lastHeartbeat}`);
        assert.ok(Date.now() - m.lastHeartbeat.getTime() < 30000, 'the last heartbeat is recent');
      }
    }
  }
  // With no further writes the members' optimes meet the primary's.
  await rs.waitUntil(async () => {
    const st = await rs.adminCommand(p, { replSetGetStatus: 1 });
    const ts = st.members.map((m) => m.optime.ts);
    return ts.every((t) => R.tsCompare(t, ts[0]) === 0) && ts[0].high > 0;
  }, { what: 'every member\'s optime in replSetGetStatus to equal the primary\'s' });
});

R.test('replSetGetConfig: {config: {_id, version, members: [{_id, host}]}} on every member', async () => {
  for (const i of [0, 1, 2]) {
    const r = await rs.adminCommand(i, { replSetGetConfig: 1 });
    assert.equal(r.ok, 1);
    const c = r.config;
    assert.equal(c._id, 'rs0');
    assert.ok(isInt(c.version) && num(c.version) >= 1);
    assert.deepEqual(c.members.map((m) => ({ _id: num(m._id), host: m.host })).sort((a, b) => a._id - b._id),
      [0, 1, 2].map((k) => ({ _id: k, host: rs.members[k].host })));
  }
});

R.test('replSetInitiate on a member of an initiated set answers 23 AlreadyInitialized', async () => {
  const config = { _id: 'rs0', members: [0, 1, 2].map((k) => ({ _id: k, host: rs.members[k].host })) };
  for (const i of [0, 1, 2]) {
    const e = await h.expectCode(rs.adminCommand(i, { replSetInitiate: config }), 23);
    assert.equal(e.codeName, 'AlreadyInitialized');
    await h.expectCode(rs.adminCommand(i, { replSetInitiate: {} }), 23);
  }
  await rs.waitForSteadyState();
});

R.test('replica-set commands on a standalone answer 76 NoReplicationEnabled', async () => {
  const solo = new h.MayflyServer();
  await solo.start();
  const c = new MongoClient(solo.uri);
  try {
    const admin = c.db('admin');
    const host = `127.0.0.1:${solo.port}`;
    const cfg = { _id: 'rs0', version: 2, members: [{ _id: 0, host }] };
    for (const cmd of [{ replSetInitiate: cfg }, { replSetInitiate: {} }, { replSetGetStatus: 1 },
      { replSetGetConfig: 1 }, { replSetReconfig: cfg }, { replSetStepDown: 10 }, { replSetFreeze: 10 }]) {
      const e = await h.expectCode(admin.command(cmd), 76);
      assert.equal(e.codeName, 'NoReplicationEnabled', JSON.stringify(cmd));
    }
    const hello = await admin.command({ hello: 1 });
    assert.equal(hello.isWritablePrimary, true);
    assert.equal(hello.setName, undefined, 'a standalone names no set');
  } finally {
    await c.close(true).catch(() => {});
    const info = await solo.stop();
    solo.cleanup();
    assert.ok(info && info.code === 0, `standalone exit ${JSON.stringify(info)}\n${solo.stderrTail(20)}`);
  }
});

R.test('replSetInitiate with an invalid config answers 93 InvalidReplicaSetConfig and leaves the member uninitiated', async () => {
  const me = rs.members[SPARE].host;
  const nobody = `127.0.0.1:${await rs.freshPort()}`;   // nothing listens there
  const cases = {
    'duplicate _id': { _id: 'rs0', members: [{ _id: 0, host: me }, { _id: 0, host: nobody }] },
    'duplicate host': { _id: 'rs0', members: [{ _id: 0, host: me }, { _id: 1, host: me }] },
    'another set\'s name': { _id: 'rs1', members: [{ _id: 0, host: me }] },
    'no member is this node': { _id: 'rs0', members: [{ _id: 0, host: nobody }] },
  };
  for (const [what, config] of Object.entries(cases)) {
    const e = await h.expectCode(rs.adminCommand(SPARE, { replSetInitiate: config }), 93)
      .catch((err) => { err.message = `${what}: ${err.message}`; throw err; });
    assert.equal(e.codeName, 'InvalidReplicaSetConfig', what);
  }
  const r = await rs.hello(SPARE);
  assert.equal(r.isreplicaset, true, 'still without a config');
  assert.equal(r.isWritablePrimary, false);
  const st = await rs.raw(SPARE, 'admin', { replSetGetStatus: 1 });
  assert.equal(st.code, 94);
});

R.test('writes on a secondary answer 10107 NotWritablePrimary and change nothing', async () => {
  const p = await rs.waitForPrimary();
  const s = other(p);
  const dbName = rs.freshDb('secw').databaseName;
  await rs.client.db(dbName).collection('c').insertOne({ _id: 'seed' }, MAJ);
  await rs.waitForReplication(dbName, 'c');
  // Driver, directConnection to the secondary. A fresh client per operation:
  // after a "not primary" error the driver marks the server Unknown and the
  // next operation would wait for the server's next hello.
  const directUri = `mongodb://${rs.members[s].host}/?directConnection=true&retryWrites=false&serverSelectionTimeoutMS=5000`;
  for (const [what, op] of [
    ['insertOne', (db) => db.collection('c').insertOne({ _id: 1 })],
    ['insertMany', (db) => db.collection('c').insertMany([{ _id: 2 }, { _id: 3 }])],
    ['updateOne upsert', (db) => db.collection('c').updateOne({ _id: 4 }, { $set: { a: 1 } }, { upsert: true })],
    ['deleteMany', (db) => db.collection('c').deleteMany({})],
    ['findOneAndUpdate', (db) => db.collection('c').findOneAndUpdate({ _id: 'seed' }, { $set: { a: 1 } })],
    ['createIndex', (db) => db.collection('c').createIndex({ a: 1 })],
    ['createCollection', (db) => db.createCollection('d')],
  ]) {
    const client = new MongoClient(directUri);
    try {
      await h.expectCode(op(client.db(dbName)), 10107).catch((err) => { err.message = `${what}: ${err.message}`; throw err; });
    } finally {
      await client.close(true).catch(() => {});
    }
  }
  // Raw OP_MSG: every kind of write.
  for (const cmd of [
    { insert: 'c', documents: [{ _id: 'raw' }] },
    { update: 'c', updates: [{ q: { _id: 'seed' }, u: { $set: { a: 1 } } }] },
    { delete: 'c', deletes: [{ q: {}, limit: 0 }] },
    { findAndModify: 'c', query: { _id: 'seed' }, remove: true },
    { createIndexes: 'c', indexes: [{ key: { b: 1 }, name: 'b_1' }] },
    { dropIndexes: 'c', index: '*' },
    { create: 'e' },
    { collMod: 'c', validator: { a: { $exists: true } } },
    { drop: 'c' },
    { dropDatabase: 1 },
  ]) {
    const r = await rs.raw(s, dbName, cmd);
    assert.equal(rawCode(r), 10107, `${JSON.stringify(cmd)}: ${JSON.stringify(r)}`);
    if (r.ok === 0) assert.equal(r.codeName, 'NotWritablePrimary');
  }
  // Nothing reached any member.
  const docs = await rs.waitForReplication(dbName, 'c');
  assert.deepEqual(docs, [{ _id: 'seed' }]);
  assert.deepEqual((await rs.client.db(dbName).listCollections().toArray()).map((x) => x.name), ['c']);
  assert.deepEqual((await rs.client.db(dbName).collection('c').listIndexes().toArray()).map((x) => x.name), ['_id_']);
});

R.test('not-primary errors (10107, 13435) carry the member\'s topologyVersion, as drivers expect', async () => {
  const p = await rs.waitForPrimary();
  const s = other(p);
  const dbName = rs.freshDb('tv').databaseName;
  await rs.client.db(dbName).collection('c').insertOne({ _id: 1 }, MAJ);
  const hello = await rs.hello(s);
  const w = await rs.raw(s, dbName, { insert: 'c', documents: [{ _id: 2 }] });
  const r = await rs.raw(s, dbName, { find: 'c' });
  assert.equal(r.code, 13435, JSON.stringify(r));
  for (const [what, reply] of [['10107', w], ['13435', r]]) {
    assert.ok(reply.topologyVersion, `${what} reply has a topologyVersion: ${JSON.stringify(reply)}`);
    assert.equal(R.ejson(reply.topologyVersion.processId), R.ejson(hello.topologyVersion.processId), what);
    assert.equal(num(reply.topologyVersion.counter), num(hello.topologyVersion.counter), what);
  }
});

R.test('reads on a secondary: 13435 NotPrimaryNoSecondaryOk without a read preference, the replicated data with readPreference secondary', async () => {
  const p = await rs.waitForPrimary();
  const s = other(p);
  const dbName = rs.freshDb('secr').databaseName;
  const docs = Array.from({ length: 20 }, (_, k) => ({ _id: k, v: `d${k}` }));
  await rs.client.db(dbName).collection('c').insertMany(docs, MAJ);
  await rs.waitForReplication(dbName, 'c');

  // No $readPreference (OP_MSG): secondaryOk is false.
  for (const cmd of [{ find: 'c' }, { count: 'c' }, { aggregate: 'c', pipeline: [], cursor: {} },
    { distinct: 'c', key: 'v' }, { listCollections: 1 }, { listIndexes: 'c' }]) {
    const r = await rs.raw(s, dbName, cmd);
    assert.equal(r.ok, 0, `${JSON.stringify(cmd)} without secondaryOk on a secondary: ${JSON.stringify(r)}`);
    assert.equal(r.code, 13435, JSON.stringify(cmd));
    assert.equal(r.codeName, 'NotPrimaryNoSecondaryOk');
  }
  // Commands that touch no data answer on a secondary without secondaryOk.
  for (const cmd of [{ ping: 1 }, { hello: 1 }, { serverStatus: 1 }, { replSetGetStatus: 1 }, { buildInfo: 1 }]) {
    const r = await rs.raw(s, 'admin', cmd);
    assert.equal(r.ok, 1, `${JSON.stringify(cmd)}: ${JSON.stringify(r).slice(0, 300)}`);
  }
  // The same reads with a read preference that allows secondaries.
  for (const mode of ['secondary', 'secondaryPreferred', 'primaryPreferred', 'nearest']) {
    const r = await rs.raw(s, dbName, { find: 'c', sort: { _id: 1 }, $readPreference: { mode } });
    assert.equal(r.ok, 1, `${mode}: ${JSON.stringify(r)}`);
    assert.deepEqual(r.cursor.firstBatch, docs, mode);
  }
  // The primary serves reads without any read preference.
  const rp = await rs.raw(p, dbName, { find: 'c', sort: { _id: 1 } });
  assert.equal(rp.ok, 1);
  assert.equal(rp.cursor.firstBatch.length, 20);

  // Driver: a direct client with readPreference=secondary.
  const dc = rs.direct(s, { readPreference: 'secondary' });
  assert.deepEqual(await dc.db(dbName).collection('c').find().sort({ _id: 1 }).toArray(), docs);
  assert.equal(await dc.db(dbName).collection('c').countDocuments({ _id: { $gte: 10 } }), 10);

  // Driver: the replica-set URI with readPreference=secondary reads from a secondary.
  const client = new MongoClient(rs.uri, { readPreference: 'secondary', monitorCommands: true });
  rs.clients.push(client);
  const addrs = [];
  client.on('commandStarted', (ev) => { if (ev.commandName === 'find') addrs.push(ev.address); });
  await client.connect();
  for (let k = 0; k < 5; k++) {
    assert.deepEqual(await client.db(dbName).collection('c').find().sort({ _id: 1 }).toArray(), docs);
  }
  assert.ok(addrs.length >= 5 && addrs.every((a) => a !== rs.members[p].host),
    `finds went to secondaries, not the primary ${rs.members[p].host}: ${addrs.join(' ')}`);
});

R.test('inserts, updates and deletes on the primary reach every member', async () => {
  const db = rs.freshDb('crud');
  const c = db.collection('c');
  const W1 = { writeConcern: { w: 1 } };
  await c.insertMany(Array.from({ length: 300 }, (_, k) => ({ _id: k, n: k, tags: [k % 3, k % 5], sub: { x: k } })), W1);
  await c.insertOne({ _id: 'oid', at: new Date(1700000000000), d: 1.5, big: 2 ** 40 }, W1);
  await c.updateMany({ n: { $lt: 100 } }, { $inc: { n: 1000 }, $set: { 'sub.y': 'up' } }, W1);
  await c.updateOne({ _id: 150 }, { $push: { tags: 99 }, $unset: { sub: '' } }, W1);
  await c.updateOne({ _id: 'new' }, { $set: { upserted: true } }, { upsert: true, ...W1 });
  await c.replaceOne({ _id: 151 }, { replaced: 1 }, W1);
  await c.findOneAndUpdate({ _id: 152 }, { $set: { fam: 1 } }, W1);
  await c.findOneAndDelete({ _id: 153 }, W1);
  await c.deleteMany({ n: { $gte: 250, $lt: 1000 } }, W1);
  await c.deleteOne({ _id: 200 }, W1);
  await c.bulkWrite([
    { insertOne: { document: { _id: 'bw1' } } },
    { updateOne: { filter: { _id: 201 }, update: { $set: { bw: true } } } },
    { deleteOne: { filter: { _id: 202 } } },
  ], W1);
  const o = rs.freshDb('crud2').collection('o');
  await o.insertMany([{ _id: 1 }, { _id: 2 }], W1);
  await o.deleteOne({ _id: 1 }, W1);

  const docs = await rs.waitForReplication(db.databaseName, 'c');
  // 300 + 'oid' + 'new' - 153 - (250..299) - 200 + 'bw1' - 202
  assert.equal(docs.length, 300 + 1 + 1 - 1 - 50 - 1 + 1 - 1);
  const byId = new Map(docs.map((d) => [d._id, d]));
  assert.deepEqual(byId.get(5), { _id: 5, n: 1005, tags: [2, 0], sub: { x: 5, y: 'up' } });
  assert.deepEqual(byId.get(150), { _id: 150, n: 150, tags: [0, 0, 99] });
  assert.deepEqual(byId.get(151), { _id: 151, replaced: 1 });
  assert.deepEqual(byId.get('new'), { _id: 'new', upserted: true });
  assert.equal(byId.get(201).bw, true);
  assert.ok(!byId.has(153) && !byId.has(200) && !byId.has(202) && !byId.has(260));
  assert.deepEqual(await rs.waitForReplication(o.dbName, 'o'), [{ _id: 2 }]);
});

R.test('Timestamp(0, 0): the primary fills it on insert and replacement, keeps it under $set; every member stores what the primary stored (review helper-112: secondaries filled it again)', async () => {
  const { Timestamp } = require('mongodb');
  const zero = () => new Timestamp({ t: 0, i: 0 });
  const db = rs.freshDb('emptyts');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2, t: zero() }], MAJ);
  await c.updateOne({ _id: 1 }, { $set: { a: zero() } }, MAJ);
  await c.updateOne({ _id: 3 }, { $set: { a: zero() } }, { upsert: true, ...MAJ });
  await c.replaceOne({ _id: 4 }, { r: zero() }, { upsert: true, ...MAJ });
  // bypassEmptyTsReplacement (mongorestore's) keeps it on insert too.
  await db.command({ insert: 'c', documents: [{ _id: 5, k: zero() }], bypassEmptyTsReplacement: true, writeConcern: { w: 'majority' } });
  const docs = await rs.waitForReplication(db.databaseName, 'c');
  const byId = new Map(docs.map((d) => [d._id, d]));
  const isZero = (ts) => ts.high === 0 && ts.low === 0;
  assert.ok(isZero(byId.get(1).a) && isZero(byId.get(3).a), 'kept under $set, upsert included');
  assert.ok(!isZero(byId.get(2).t) && !isZero(byId.get(4).r), 'filled on insert and replacement');
  assert.ok(isZero(byId.get(5).k), 'kept with bypassEmptyTsReplacement');
});

R.test('createIndex, collMod, dropIndex, renameCollection, drop and dropDatabase reach every member', async () => {
  const db = rs.freshDb('ddl');
  const dbName = db.databaseName;
  await db.createCollection('v', { validator: { a: { $type: 'number' } } });
  await db.collection('c').insertMany([{ _id: 1, a: 1, at: new Date() }, { _id: 2, a: 2 }]);
  await db.collection('c').createIndex({ a: 1 }, { unique: true, name: 'a_1' });
  await db.collection('c').createIndex({ at: 1 }, { expireAfterSeconds: 3600, name: 'at_ttl' });
  await db.collection('c').createIndex({ b: 1, a: -1 }, { sparse: true, name: 'b_a' });
  await db.collection('c').createIndex({ p: 1 }, { partialFilterExpression: { a: { $gt: 1 } }, name: 'p_part' });
  let ix = await waitSameOnAll((i) => indexesOn(i, dbName, 'c'), 'the indexes of c');
  const parse = (x) => new Map(BSON.EJSON.parse(x, { relaxed: true }).map((d) => [d.name, d]));
  let ixs = parse(ix);
  assert.deepEqual([...ixs.keys()].sort(), ['_id_', 'a_1', 'at_ttl', 'b_a', 'p_part']);
  assert.equal(ixs.get('at_ttl').expireAfterSeconds, 3600);
  assert.equal(ixs.get('a_1').unique, true);
  assert.equal(ixs.get('b_a').sparse, true);
  assert.deepEqual(ixs.get('p_part').partialFilterExpression, { a: { $gt: 1 } });

  await db.command({ collMod: 'c', index: { name: 'at_ttl', expireAfterSeconds: 60 } });
  await db.command({ collMod: 'v', validator: { a: { $type: 'string' } } });
  ix = await waitSameOnAll((i) => indexesOn(i, dbName, 'c'), 'the indexes of c after collMod');
  ixs = parse(ix);
  assert.equal(ixs.get('at_ttl').expireAfterSeconds, 60);
  let cols = await waitSameOnAll((i) => collectionsOn(i, dbName), 'the collections (with their options)');
  assert.match(cols, /"\$type":"string"/, 'the new validator');

  await db.collection('c').dropIndex('b_a');
  ix = await waitSameOnAll((i) => indexesOn(i, dbName, 'c'), 'the indexes of c after dropIndex');
  assert.deepEqual([...parse(ix).keys()].sort(), ['_id_', 'a_1', 'at_ttl', 'p_part']);

  await rs.client.db('admin').command({ renameCollection: `${dbName}.v`, to: `${dbName}.v2` });
  await db.collection('gone').insertOne({ _id: 1 });
  await db.collection('gone').drop();
  cols = await waitSameOnAll((i) => collectionsOn(i, dbName), 'the collections after rename and drop');
  const names = JSON.parse(cols).map((x) => x.name).sort();
  assert.deepEqual(names, ['c', 'v2']);
  await rs.waitForReplication(dbName, 'c');

  await db.dropDatabase();
  await rs.waitUntil(async () => {
    const per = await rs.onEach(async (i) => (await rs.reader(i).db('admin').admin().listDatabases()).databases
      .some((d) => d.name === dbName));
    return Object.values(per).every((present) => !present);
  }, { what: `database ${dbName} to be gone from every member` });
});

R.test('a collection has the same UUID (listCollections info.uuid, the oplog\'s ui) on every member', async () => {
  const db = rs.freshDb('uuid');
  await db.createCollection('explicit');
  await db.collection('implicit').insertOne({ _id: 1 }, MAJ);
  await db.collection('indexed').createIndex({ a: 1 }, MAJ);
  const cols = await waitSameOnAll((i) => collectionsOn(i, db.databaseName, { uuids: true }), 'the collection UUIDs', 10000);
  const parsed = BSON.EJSON.parse(cols, { relaxed: false });
  assert.deepEqual(parsed.map((c) => c.name), ['explicit', 'implicit', 'indexed']);
  assert.ok(parsed.every((c) => isUuid(c.uuid)), cols);
  const p = await rs.waitForPrimary();
  const ins = await rs.direct(p).db('local').collection('oplog.rs').findOne({ ns: `${db.databaseName}.implicit`, op: 'i' });
  assert.equal(R.ejson(ins.ui), R.ejson(parsed[1].uuid), 'the oplog entry names the collection by its UUID');
});

R.test('convertToCapped and cloneCollectionAsCapped replicate: dbHash is the same on every member', async () => {
  const db = rs.freshDb('capped_conv');
  await db.collection('c').insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: i, p: 'x'.repeat(50) })), MAJ);
  await db.collection('c').createIndex({ p: 1 }, MAJ);
  await db.command({ convertToCapped: 'c', size: 8192, ...MAJ });
  await db.command({ cloneCollectionAsCapped: 'c', toCollection: 'd', size: 4096, ...MAJ });
  await db.collection('c').insertOne({ _id: 'last' }, MAJ);
  const all = await waitSameOnAll(async (i) => JSON.stringify((await rs.reader(i).db(db.databaseName).command({ dbHash: 1 })).collections),
    'the dbHash of every collection');
  assert.deepEqual(Object.keys(JSON.parse(all)), ['c', 'd']);
  const cols = BSON.EJSON.parse(await waitSameOnAll((i) => collectionsOn(i, db.databaseName), 'the collections'), { relaxed: false });
  assert.ok(cols.every((c) => c.options.capped === true), JSON.stringify(cols));
  const n = await db.collection('c').countDocuments();
  assert.ok(n > 0 && n < 301, `the capped copy kept ${n} documents`);
});

R.test('w: "majority" writes are acknowledged, readable with readConcern majority, and on every member', async () => {
  const db = rs.freshDb('maj');
  const c = db.collection('c');
  const r1 = await c.insertOne({ _id: 1, v: 'one' }, MAJ);
  assert.equal(r1.acknowledged, true);
  const r2 = await c.insertMany(Array.from({ length: 50 }, (_, k) => ({ _id: 100 + k })), MAJ);
  assert.equal(r2.insertedCount, 50);
  const r3 = await c.updateOne({ _id: 1 }, { $set: { v: 'uno' } }, MAJ);
  assert.equal(r3.modifiedCount, 1);
  const r4 = await c.deleteMany({ _id: { $gte: 140 } }, MAJ);
  assert.equal(r4.deletedCount, 10);
  const raw = await rs.raw(await rs.waitForPrimary(), db.databaseName,
    { insert: 'c', documents: [{ _id: 2 }], writeConcern: { w: 'majority', wtimeout: 15000 } });
  assert.equal(raw.ok, 1);
  assert.equal(raw.n, 1);
  assert.equal(raw.writeConcernError, undefined, JSON.stringify(raw));
  const majority = await c.find({}, { readConcern: { level: 'majority' } }).sort({ _id: 1 }).toArray();
  assert.equal(majority.length, 1 + 1 + 40);
  assert.deepEqual(majority[0], { _id: 1, v: 'uno' });
  const docs = await rs.waitForReplication(db.databaseName, 'c');
  assert.deepEqual(docs, majority);
});

R.test('the raft port: another protocol, a 1 TB address, an address without its NUL and id 0 are closed at once; the set carries on', async () => {
  const p = await rs.waitForPrimary();
  const term0 = num((await rs.raw(p, 'admin', { replSetGetStatus: 1 })).term);
  const probes = {
    'another protocol': R.raftHandshake(7, '127.0.0.1:1', { protocol: 7 }),
    'a 1 TB address': R.raftHandshake(7, '127.0.0.1:1', { claimedLen: 2 ** 40 }).subarray(0, 24),
    'an address without its NUL': R.raftHandshake(7, '127.0.0.1:123456', { nul: false }),
    'server id 0': R.raftHandshake(0, '127.0.0.1:1'),
  };
  for (const i of [0, 1, 2]) {
    for (const [what, bytes] of Object.entries(probes)) {
      const r = await R.raftProbe(rs.members[i].raftPort, bytes);
      assert.equal(r.closed, true, `member ${i}: ${what} is closed`);
      // At once, not at the 10 s handshake limit (generous for a loaded machine).
      assert.ok(r.ms < 5000, `member ${i}: ${what} closed after ${r.ms} ms`);
    }
  }
  await rs.waitUntil(() => rs.members[p].server.stderrLines.some((l) => /raft port: incoming connection from .* closed/.test(l)),
    { timeoutMs: 5000, what: 'the primary to log a closed raft connection' });
  const db = rs.freshDb('raftport');
  assert.equal((await db.collection('c').insertOne({ _id: 1 }, MAJ)).acknowledged, true);
  const st = await rs.raw(await rs.waitForPrimary(), 'admin', { replSetGetStatus: 1 });
  assert.ok(st.members.every((m) => m.health === 1), JSON.stringify(st.members));
  assert.equal(num(st.term), term0, 'no election: the probes never reached raft');
  await rs.waitForReplication(db.databaseName, 'c');
});

R.test('$out into a time-series collection (existing, or made by its timeseries option) reaches every member (helper-126: the buckets\' rename was refused by the secondaries\' applier)', async () => {
  const db = rs.freshDb('tsout');
  const t0 = new Date('2026-01-01T00:00:00Z');
  await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' }, ...MAJ });
  await db.collection('ts').insertMany([{ t: t0, m: 1, v: 1 }, { t: t0, m: 2, v: 2 }], MAJ);
  await db.collection('src').insertMany([0, 1, 2].map((i) => ({ t: new Date(t0.getTime() + i * 1000), m: 3, v: 10 + i })), MAJ);
  await db.collection('src').aggregate([{ $project: { _id: 0 } }, { $out: 'ts' }], MAJ).toArray();
  await db.collection('src').aggregate([{ $project: { _id: 0 } },
    { $out: { db: db.databaseName, coll: 'made', timeseries: { timeField: 't', metaField: 'm' } } }], MAJ).toArray();
  await db.collection('marker').insertOne({ _id: 1 }, { writeConcern: { w: 3, wtimeout: 20000 } });
  for (const coll of ['ts', 'made', 'system.buckets.ts', 'system.buckets.made']) {
    const docs = await rs.waitForReplication(db.databaseName, coll, { timeoutMs: 20000 });
    assert.ok(docs.length > 0, `${coll} is not empty`);
    if (!coll.startsWith('system.')) assert.deepEqual(docs.map((d) => d.v).sort(), [10, 11, 12], coll);
  }
});

R.test('local.oplog.rs is readable: c, i, u, d and n entries with ts, t, op, ns, o, o2, ui, wall, the same on every member', async () => {
  const db = rs.freshDb('oplog');
  const ns = `${db.databaseName}.c`;
  const c = db.collection('c');
  const docs = [{ _id: 1, a: 'x' }, { _id: 2, a: 'y' }, { _id: 3, a: 'z' }];
  for (const d of docs) await c.insertOne(d, MAJ);
  await c.updateOne({ _id: 2 }, { $set: { a: 'Y' } }, MAJ);
  await c.deleteOne({ _id: 3 }, MAJ);
  await c.createIndex({ a: 1 }, { name: 'a_1', ...MAJ });
  const p = await rs.waitForPrimary();
  const oplog = rs.direct(p).db('local').collection('oplog.rs');

  const entries = await oplog.find({ ns }).sort({ $natural: 1 }).toArray();
  const ins = entries.filter((e) => e.op === 'i');
  assert.deepEqual(ins.map((e) => e.o), docs, 'one i entry per inserted document, in order');
  for (const e of entries) {
    assert.ok(isTs(e.ts), `ts is a Timestamp: ${JSON.stringify(e)}`);
    assert.ok(isInt(e.t) && num(e.t) >= 1, `t ${e.t}`);
    assert.ok(e.wall instanceof Date && Math.abs(Date.now() - e.wall.getTime()) < 300000, `wall ${e.wall}`);
    assert.ok(isUuid(e.ui), `ui is a UUID: ${JSON.stringify(e.ui)}`);
    assert.equal(e.ns, ns);
  }
  for (let k = 1; k < entries.length; k++) {
    assert.ok(R.tsCompare(entries[k - 1].ts, entries[k].ts) < 0, 'ts strictly increases in $natural order');
  }
  const u = entries.filter((e) => e.op === 'u');
  assert.equal(u.length, 1);
  assert.deepEqual(u[0].o2, { _id: 2 });
  assert.equal(typeof u[0].o, 'object');
  const d = entries.filter((e) => e.op === 'd');
  assert.deepEqual(d.map((e) => e.o), [{ _id: 3 }]);
  assert.ok(R.tsCompare(ins[2].ts, u[0].ts) < 0 && R.tsCompare(u[0].ts, d[0].ts) < 0, 'entries follow the write order');

  // DDL: the implicit create and the createIndexes are c entries on <db>.$cmd.
  const cmds = await oplog.find({ op: 'c', ns: `${db.databaseName}.$cmd` }).sort({ $natural: 1 }).toArray();
  const create = cmds.find((e) => e.o && e.o.create === 'c');
  assert.ok(create, `a c entry {create: "c"}: ${JSON.stringify(cmds)}`);
  assert.ok(R.tsCompare(create.ts, ins[0].ts) < 0, 'the create precedes the first insert');
  assert.ok(cmds.some((e) => e.o && e.o.createIndexes === 'c'), `a c entry {createIndexes: "c"}: ${JSON.stringify(cmds)}`);
  assert.ok(isUuid(create.ui) && isUuid(ins[0].ui) && R.ejson(create.ui) === R.ejson(ins[0].ui),
    'the collection\'s UUID is the same in its create and insert entries');
  assert.ok(await oplog.findOne({ op: 'n' }), 'an n (no-op) entry, e.g. the new primary\'s');

  // The newest entry comes first in reverse $natural order (rs.printReplicationInfo's query).
  const newest = await oplog.find().sort({ $natural: -1 }).limit(1).toArray();
  const oldest = await oplog.find().sort({ $natural: 1 }).limit(1).toArray();
  assert.equal(newest.length, 1);
  assert.ok(R.tsCompare(newest[0].ts, entries[entries.length - 1].ts) >= 0);
  assert.ok(R.tsCompare(oldest[0].ts, newest[0].ts) <= 0);

  // Every member's oplog holds the same entries for the namespace (same ts, op, o, o2).
  const key = (es) => R.ejson(es.map((e) => ({ ts: e.ts, t: e.t, op: e.op, o: e.o, o2: e.o2, ui: e.ui })));
  const want = key(entries);
  await rs.waitUntil(async () => {
    const per = await rs.onEach(async (i) => key(await rs.reader(i).db('local').collection('oplog.rs')
      .find({ ns }).sort({ $natural: 1 }).toArray()));
    return Object.values(per).every((v) => v === want);
  }, { what: `every member's local.oplog.rs entries for ${ns} to equal the primary's` });
});

/*
 * serverStatus on members: repl (hello's set fields), opcountersRepl (the
 * operations a secondary applied), transactions (retried retryable writes
 * and session-row writes), and getDiagnosticData's serverStatus and
 * replSetGetStatus, as monitoring agents read them.
 */
R.test('serverStatus on members: repl, a secondary\'s opcountersRepl, transactions\' retried writes; getDiagnosticData', async () => {
  const dbName = rs.freshDb('sstatus').databaseName;
  const p = await rs.waitForPrimary();
  const s = other(p);
  const ps = await rs.adminCommand(p, { serverStatus: 1 });
  assert.equal(ps.repl.setName, 'rs0');
  assert.equal(ps.repl.isWritablePrimary, true);
  assert.equal(ps.repl.secondary, false);
  assert.equal(ps.repl.me, rs.members[p].host);
  assert.equal(ps.repl.primary, rs.members[p].host);
  assert.equal(ps.repl.hosts.length, 3);
  assert.ok(isOid(ps.repl.electionId), 'the primary has an electionId');
  assert.ok(isOid(ps.repl.topologyVersion.processId), 'repl.topologyVersion');
  assert.ok(ps.repl.lastWrite && isTs(ps.repl.lastWrite.opTime.ts), 'repl.lastWrite.opTime');
  assert.equal((await rs.adminCommand(p, { serverStatus: 1, repl: 0 })).repl, undefined, '{repl: 0} leaves it out');

  const before = await rs.adminCommand(s, { serverStatus: 1 });
  assert.equal(before.repl.secondary, true);
  assert.equal(before.repl.isWritablePrimary, false);
  assert.equal(before.repl.primary, rs.members[p].host);
  for (const k of ['insert', 'query', 'update', 'delete', 'getmore', 'command']) {
    assert.ok(isInt(before.opcountersRepl[k]), `opcountersRepl.${k}`);
  }
  const coll = rs.client.db(dbName).collection('c');
  await coll.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }, { _id: 4 }, { _id: 5 }], MAJ);
  await coll.updateOne({ _id: 1 }, { $set: { x: 1 } }, MAJ);
  await coll.deleteOne({ _id: 2 }, MAJ);
  await rs.waitForReplication(dbName, 'c');
  let after;
  await rs.waitUntil(async () => {
    after = (await rs.adminCommand(s, { serverStatus: 1 })).opcountersRepl;
    return num(after.insert) >= num(before.opcountersRepl.insert) + 5 &&
      num(after.update) >= num(before.opcountersRepl.update) + 1 &&
      num(after.delete) >= num(before.opcountersRepl.delete) + 1;
  }, { what: 'the secondary\'s opcountersRepl to count the applied insert, update and delete' });
  assert.ok(num(after.command) >= num(before.opcountersRepl.command) + 1, 'the implicit create was a command');
  const pAfter = (await rs.adminCommand(p, { serverStatus: 1 })).opcountersRepl;
  assert.equal(num(pAfter.insert), num(ps.opcountersRepl.insert), 'a primary applies none of its own writes');

  // A retryable write sent twice: the retry is answered from its session row and counted.
  const t0 = ps.transactions;
  const lsid = { id: new UUID() };
  const ins = { insert: 'c', documents: [{ _id: 10 }, { _id: 11 }], lsid, txnNumber: Long.fromNumber(1) };
  assert.equal((await rs.raw(p, dbName, ins)).n, 2);
  assert.equal((await rs.raw(p, dbName, ins)).n, 2);
  const t1 = (await rs.adminCommand(p, { serverStatus: 1 })).transactions;
  assert.equal(num(t1.retriedCommandsCount), num(t0.retriedCommandsCount) + 1, JSON.stringify(t1));
  assert.equal(num(t1.retriedStatementsCount), num(t0.retriedStatementsCount) + 2);
  assert.ok(num(t1.transactionsCollectionWriteCount) >= num(t0.transactionsCollectionWriteCount) + 1,
    'the first attempt wrote its session row');
  assert.equal(num(t1.totalStarted), 0);

  const diag = await rs.adminCommand(s, { getDiagnosticData: 1 });
  assert.ok(diag.data.start instanceof Date && diag.data.end instanceof Date);
  assert.equal(diag.data.serverStatus.repl.secondary, true);
  assert.ok(diag.data.serverStatus.opcountersRepl, 'the sample\'s serverStatus has opcountersRepl');
  assert.equal(diag.data.replSetGetStatus.set, 'rs0');
  assert.equal(diag.data.replSetGetStatus.ok, 1);
  assert.equal(diag.data.replSetGetStatus.members.length, 3);
  assert.ok(diag.data.replSetGetStatus.start instanceof Date && diag.data.replSetGetStatus.end instanceof Date);
});

R.test('replSetStepDown: another member becomes primary, the old one a secondary, and the replicaSet URI client follows', async () => {
  const p = await rs.waitForPrimary();
  await rs.waitForSteadyState();
  const db = rs.freshDb('stepdown');
  const c = db.collection('c');
  await c.insertOne({ _id: 'before' }, MAJ);

  // On a secondary: 10107.
  const s = other(p);
  const e = await h.expectCode(rs.adminCommand(s, { replSetStepDown: 30 }), 10107);
  assert.equal(e.codeName, 'NotWritablePrimary');

  const before = await rs.hello(p);
  // An awaitable hello (topologyVersion + maxAwaitTimeMS, what drivers
  // stream) held on every member; a member whose role changes must answer it
  // at once, not after maxAwaitTimeMS.
  const held = {};
  for (const i of [0, 1, 2]) {
    const tv = (await rs.hello(i)).topologyVersion;
    const conn = await h.rawConnect(rs.members[i].port);
    await conn.send(h.buildOpMsg(conn.reqId++, {
      hello: 1, topologyVersion: { processId: tv.processId, counter: Long.fromNumber(num(tv.counter)) },
      maxAwaitTimeMS: 20000, $db: 'admin',
    }));
    held[i] = conn;
  }
  await h.sleep(300);
  for (const i of [0, 1, 2]) assert.equal(held[i].buf.length, 0, `member ${i} holds the awaitable hello while nothing changes`);
  const t0 = R.hr();
  try {
    const r = await rs.adminCommand(p, { replSetStepDown: 30, secondaryCatchUpPeriodSecs: 10 });
    assert.equal(r.ok, 1);
  } catch (err) {
    // Older servers closed every connection on step-down; MongoDB 4.2+ answers ok.
    if (!/closed|ECONNRESET|network/i.test(String(err.message))) throw err;
  }
  const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
  console.log(`# replSetStepDown: new primary member ${np} after ${(R.hr() - t0).toFixed(0)} ms`);
  assert.notEqual(np, p);
  try {
    // Follow each stream as a driver does (re-send with the topologyVersion
    // of each answer) until the member reports its new role; every answer
    // must come long before maxAwaitTimeMS.
    for (const [i, role] of [[p, false], [np, true]]) {
      const seen = [];
      for (;;) {
        const left = 10000 - (R.hr() - t0);
        const r = left > 0 ? await held[i].readReply(left).catch(() => null) : null;
        assert.ok(r, `member ${i}'s awaitable hello answered within 10 s of the step-down (a role change must ` +
          `answer waiting hellos, not wait for maxAwaitTimeMS); answers so far: ${JSON.stringify(seen)}`);
        assert.equal(r.ok, 1);
        seen.push({ isWritablePrimary: r.isWritablePrimary, secondary: r.secondary, counter: r.topologyVersion.counter });
        if (r.isWritablePrimary === role && r.secondary === !role) break;
        await held[i].send(h.buildOpMsg(held[i].reqId++, {
          hello: 1, maxAwaitTimeMS: 20000, $db: 'admin',
          topologyVersion: { processId: r.topologyVersion.processId, counter: Long.fromNumber(num(r.topologyVersion.counter)) },
        }));
      }
    }
  } finally {
    for (const conn of Object.values(held)) conn.close();
  }

  const after = await rs.waitUntil(async () => {
    const r = await rs.hello(p);
    return r && r.secondary === true && r.primary === rs.members[np].host ? r : null;
  }, { what: 'the old primary to report secondary and name the new primary' });
  assert.equal(after.isWritablePrimary, false);
  assert.equal(R.ejson(after.topologyVersion.processId), R.ejson(before.topologyVersion.processId));
  assert.ok(num(after.topologyVersion.counter) > num(before.topologyVersion.counter),
    `topologyVersion.counter moved on the step-down: ${before.topologyVersion.counter} -> ${after.topologyVersion.counter}`);

  // The URI client finds the new primary by itself.
  const ins = await c.insertOne({ _id: 'after' }, MAJ);
  assert.equal(ins.acknowledged, true);
  // Commands with the primary read preference reach the new primary (at
  // once per SDAM's electionId rule; polled so a monitor's timing cannot fail it).
  let hello = null;
  await rs.waitUntil(async () => {
    hello = await rs.client.db('admin').command({ hello: 1 });
    return hello.me === rs.members[np].host && hello.isWritablePrimary === true;
  }, { timeoutMs: 10000, what: 'the URI client\'s primary commands to reach the new primary' })
    .catch((err) => { err.message += ` (last hello: me ${hello && hello.me})`; throw err; });
  const docs = await rs.waitForReplication(db.databaseName, 'c');
  assert.deepEqual(docs.map((d) => d._id).sort(), ['after', 'before']);
  const st = await rs.adminCommand(np, { replSetGetStatus: 1 });
  assert.equal(st.myState, 1);
  // Its view of the others follows by heartbeat: soon only itself is PRIMARY.
  await rs.waitUntil(async () => {
    const s2 = await rs.adminCommand(np, { replSetGetStatus: 1 });
    return s2.members.filter((m) => m.stateStr === 'PRIMARY').map((m) => m.name).join() === rs.members[np].host;
  }, { what: 'the new primary\'s replSetGetStatus to show itself as the only PRIMARY' });
});

R.test('consecutive replSetStepDowns: each hands the role to a member that is not frozen, and the new primary keeps it (no hand-back to a member stepped down moments ago)', async () => {
  // mongod: a member stepped down with replSetStepDown(n) is not electable for n seconds, so a
  // second step-down picks the third member. A hand-over to the frozen one made it give the role
  // back a heartbeat later, to and fro every second until both thawed (drivers met 10107s).
  await rs.waitForSteadyState();
  for (const i of [0, 1, 2]) await rs.adminCommand(i, { replSetFreeze: 0 }).catch(() => {});
  const stepDown = async (i) => {
    try {
      await rs.adminCommand(i, { replSetStepDown: 60, secondaryCatchUpPeriodSecs: 10 });
    } catch (err) {
      if (!/closed|ECONNRESET|network/i.test(String(err.message))) throw err;
    }
  };
  const a = await rs.waitForPrimary();
  await stepDown(a);
  const b = await rs.waitForPrimary({ exclude: [a], timeoutMs: 15000 });
  await rs.waitForSteadyState();
  await stepDown(b);
  const c = await rs.waitForPrimary({ exclude: [b], timeoutMs: 15000 });
  assert.notEqual(c, a, 'the second step-down handed the role to the member frozen by the first');
  const eid = (await rs.hello(c)).electionId.toHexString();
  // Three seconds: three heartbeat rounds, in which a frozen primary would hand over.
  const t0 = R.hr();
  while (R.hr() - t0 < 3000) {
    const hs = await rs.hellos([0, 1, 2]);
    const prim = hs.map((x, k) => (x && x.isWritablePrimary ? k : -1)).filter((k) => k >= 0);
    assert.deepEqual(prim, [c], `only member ${c} is primary ${(R.hr() - t0).toFixed(0)} ms after taking over`);
    assert.equal(hs[c].electionId.toHexString(), eid, 'no election since');
    await h.sleep(50);
  }
  for (const i of [a, b]) assert.equal((await rs.adminCommand(i, { replSetFreeze: 0 })).ok, 1);
});

R.test('replSetReconfig adds a fourth member, which catches up with the data already in the set; removing it again leaves three', async () => {
  const spare = rs.members[SPARE];
  const db = rs.freshDb('reconfig');
  const dbName = db.databaseName;
  await db.collection('c').createIndex({ k: 1 }, { name: 'k_1' });
  await db.collection('c').insertMany(Array.from({ length: 2000 }, (_, k) => ({ _id: k, k: k % 17, pad: 'x'.repeat(64) })), MAJ);

  let p = await rs.waitForPrimary();
  const { config } = await rs.adminCommand(p, { replSetGetConfig: 1 });
  const v0 = num(config.version);
  const added = { ...config, version: v0 + 1, members: [...config.members, { _id: SPARE, host: spare.host }] };
  delete added.term;
  const r = await rs.adminCommand(p, { replSetReconfig: added });
  assert.equal(r.ok, 1);
  spare.inSet = true;

  await rs.waitForSecondary(SPARE, { timeoutMs: 60000 });
  const hs = await rs.hello(SPARE);
  assert.equal(hs.setName, 'rs0');
  assert.equal(hs.me, spare.host);
  assert.equal(num(hs.setVersion), v0 + 1);
  p = await rs.waitForPrimary();
  assert.equal(hs.primary, rs.members[p].host);
  await rs.waitUntil(async () => {
    const h4 = await rs.hellos([0, 1, 2, 3]);
    return h4.every((x) => x && x.hosts && x.hosts.length === 4 && num(x.setVersion) === v0 + 1);
  }, { what: 'every member to list 4 hosts at the new setVersion' });

  // The data written before the member joined, and a write after.
  await db.collection('c').insertOne({ _id: 'late', k: 99 }, MAJ);
  const docs = await rs.waitForReplication(dbName, 'c', { timeoutMs: 60000 });
  assert.equal(docs.length, 2001);
  assert.equal(await indexesOn(SPARE, dbName, 'c'), await indexesOn(p, dbName, 'c'));
  const st = await rs.adminCommand(p, { replSetGetStatus: 1 });
  assert.equal(st.members.length, 4);
  await rs.waitUntil(async () => {
    const s2 = await rs.adminCommand(p, { replSetGetStatus: 1 });
    const m = s2.members.find((x) => x.name === spare.host);
    return m && m.stateStr === 'SECONDARY' && m.health === 1;
  }, { what: 'the primary to see the new member as a healthy SECONDARY' });
  const cfg = await rs.adminCommand(SPARE, { replSetGetConfig: 1 });
  assert.equal(cfg.config.members.length, 4);

  // Remove it again: the set carries on with three.
  p = await rs.waitForPrimary();
  const { config: c4 } = await rs.adminCommand(p, { replSetGetConfig: 1 });
  const removed = { ...c4, version: num(c4.version) + 1, members: c4.members.filter((m) => m.host !== spare.host) };
  delete removed.term;
  assert.equal((await rs.adminCommand(p, { replSetReconfig: removed })).ok, 1);
  spare.inSet = false;
  await rs.waitUntil(async () => {
    const h3 = await rs.hellos([0, 1, 2]);
    return h3.every((x) => x && x.hosts.length === 3 && !x.hosts.includes(spare.host));
  }, { what: 'the three members to list 3 hosts' });
  await rs.waitUntil(async () => {
    const x = await rs.hello(SPARE);
    return x && x.isWritablePrimary === false && x.secondary === false;
  }, { what: 'the removed member to report neither primary nor secondary' });
  const ok = await db.collection('c').insertOne({ _id: 'after-remove' }, MAJ);
  assert.equal(ok.acknowledged, true);
  await rs.waitForReplication(dbName, 'c');
});
