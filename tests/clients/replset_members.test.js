'use strict';
/*
 * Member options of a replica-set config (MongoDB's "Replica Set Member
 * Configuration"): priority, hidden, and the rules mongod's MemberConfig and
 * ReplSetConfig check, through the Node driver and raw commands.
 *
 * mayfly elects with raft, where every member is an equal voter. Priorities
 * act on top of it as in mongod: a priority-0 member (hidden ones included)
 * never takes writes (if raft elects it, it hands the role to an electable
 * member at once), a step-down hands the role to the electable member of
 * highest priority, and a primary hands it to a caught-up member of higher
 * priority (mongod's priority takeover).
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');
const R = require('./rs_harness');

const rs = R.useReplSet(3, { spares: 1 });
const SPARE = 3;
const MAJ = { writeConcern: { w: 'majority', wtimeout: 15000 } };
const num = (v) => Number(v);

/* Reconfigures the set from the primary with edit(members) applied to a copy of the current config. */
async function reconfig(edit) {
  const p = await rs.waitForPrimary();
  const { config } = await rs.adminCommand(p, { replSetGetConfig: 1 });
  const next = { ...config, version: num(config.version) + 1, members: edit(config.members.map((m) => ({ ...m }))) };
  delete next.term;
  const r = await rs.adminCommand(p, { replSetReconfig: next });
  assert.equal(r.ok, 1);
  await rs.waitUntil(async () => {
    const hs = await rs.hellos([0, 1, 2]);
    return hs.every((x) => x && num(x.setVersion) === num(next.version));
  }, { what: `every member at config version ${next.version}` });
  return next;
}

async function stepDown(i, secs) {
  try {
    await rs.adminCommand(i, { replSetStepDown: secs, secondaryCatchUpPeriodSecs: Math.min(secs, 10) });
  } catch (err) {
    if (!/closed|ECONNRESET|network/i.test(String(err.message))) throw err;
  }
}

R.test('replSetInitiate checks member options as mongod and answers 93 InvalidReplicaSetConfig with the reason: hidden, delayed, non-voting, non-indexing and arbiter members need priority 0; priority in 0..1000; votes 0 or 1; at least one member with priority > 0; the initiating member electable', async () => {
  const me = rs.members[SPARE].host;
  const nobody = `127.0.0.1:${await rs.freshPort()}`;
  const cases = [
    ['hidden with priority 1', [{ _id: 0, host: me }, { _id: 1, host: nobody, hidden: true }], /priority must be 0 when hidden=true/],
    ['delayed with priority', [{ _id: 0, host: me }, { _id: 1, host: nobody, secondaryDelaySecs: 60 }], /priority must be 0 when secondaryDelaySecs is used/],
    ['votes 0 with priority', [{ _id: 0, host: me }, { _id: 1, host: nobody, votes: 0 }], /priority must be 0 when non-voting \(votes:0\)/],
    ['buildIndexes false', [{ _id: 0, host: me }, { _id: 1, host: nobody, buildIndexes: false }], /priority must be 0 when buildIndexes=false/],
    ['arbiter with priority 1', [{ _id: 0, host: me }, { _id: 1, host: nobody, arbiterOnly: true, priority: 1 }], /priority must be 0 when arbiterOnly=true/],
    ['priority 1001', [{ _id: 0, host: me, priority: 1001 }], /'MemberConfig\.priority' value must be <= 1000, actual value '1001'/],
    ['priority -1', [{ _id: 0, host: me, priority: -1 }], /'MemberConfig\.priority' value must be >= 0, actual value '-1'/],
    ['priority a string', [{ _id: 0, host: me, priority: 'high' }], /MemberConfig\.priority/],
    ['votes 2', [{ _id: 0, host: me, votes: 2 }], /votes field value is 2\. If set, it must be 0 or 1/],
    ['no electable member', [{ _id: 0, host: me, priority: 0 }], /at least one non-arbiter member with priority > 0/],
    ['this member priority 0', [{ _id: 0, host: me, priority: 0 }, { _id: 1, host: nobody }], /is not electable under the new configuration/],
  ];
  for (const [what, members, msg] of cases) {
    const r = await rs.raw(SPARE, 'admin', { replSetInitiate: { _id: 'rs0', members } });
    assert.equal(r.ok, 0, what);
    assert.equal(r.code, 93, `${what}: ${JSON.stringify(r)}`);
    assert.equal(r.codeName, 'InvalidReplicaSetConfig', what);
    assert.match(r.errmsg, msg, what);
  }
  const r = await rs.hello(SPARE);
  assert.equal(r.isreplicaset, true, 'the spare is still without a config');
});

R.test('a hidden priority-0 member: left out of hello\'s hosts everywhere, its own hello says hidden and passive, replSetGetConfig keeps the options, and a driver never reads from it', async () => {
  const p = await rs.waitForPrimary();
  const hid = [0, 1, 2].find((i) => i !== p);
  const cfg = await reconfig((ms) => ms.map((m) => (m._id === hid ? { ...m, priority: 0, hidden: true } : m)));
  const visible = [0, 1, 2].filter((i) => i !== hid).map((i) => rs.members[i].host).sort();
  for (const i of [0, 1, 2]) {
    const r = await rs.hello(i);
    assert.deepEqual([...r.hosts].sort(), visible, `member ${i}'s hosts`);
    assert.equal(r.passives, undefined, `member ${i} lists no passives`);
    assert.equal(r.hidden, i === hid ? true : undefined, `member ${i}'s hidden`);
    assert.equal(r.passive, i === hid ? true : undefined, `member ${i}'s passive`);
  }
  const got = (await rs.adminCommand(p, { replSetGetConfig: 1 })).config.members.find((m) => m._id === hid);
  assert.equal(got.hidden, true);
  assert.equal(num(got.priority), 0);
  // replSetGetStatus still shows it.
  const st = await rs.adminCommand(p, { replSetGetStatus: 1 });
  assert.ok(st.members.some((m) => m.name === rs.members[hid].host));

  // A driver discovers the set from hosts: secondary reads go to the visible secondary only.
  const db = rs.freshDb('hidden');
  await db.collection('c').insertOne({ _id: 1 }, MAJ);
  await rs.waitForReplication(db.databaseName, 'c');
  const client = await rs.newClient(rs.uriFor('', 'readPreference=secondary'));
  const vis = [0, 1, 2].find((i) => i !== hid && i !== p);
  const queries = async (i) => num((await rs.serverStatus(i)).opcounters.query);
  const [hb, vb] = [await queries(hid), await queries(vis)];
  for (let k = 0; k < 20; k++) assert.equal((await client.db(db.databaseName).collection('c').findOne({ _id: 1 }))._id, 1);
  const [ha, va] = [await queries(hid), await queries(vis)];
  assert.equal(ha - hb, 0, 'no query reached the hidden member');
  assert.ok(va - vb >= 20, `the visible secondary served the reads (${va - vb} queries)`);
  assert.ok(cfg.version > 1);

  // The options persist with the config: after kill -9 and after a clean restart the member is still hidden.
  for (const kill9 of [true, false]) {
    await rs.kill(hid, { kill9 });
    await rs.restart(hid);
    await rs.waitForSecondary(hid, { timeoutMs: 60000 });
    const r = await rs.hello(hid);
    assert.equal(r.hidden, true, `hidden after a ${kill9 ? 'kill -9' : 'clean restart'}`);
    assert.equal(r.passive, true);
    assert.deepEqual([...r.hosts].sort(), visible);
    const own = (await rs.adminCommand(hid, { replSetGetConfig: 1 })).config.members.find((m) => m._id === hid);
    assert.equal(own.hidden, true);
    assert.equal(num(own.priority), 0);
  }
});

R.test('a priority-0 member is listed in passives, never becomes primary through step-downs or the primary\'s death, and a primary cannot reconfigure itself to priority 0 (103); a step-down with no electable member answers 262 and stays primary', async () => {
  let p = await rs.waitForPrimary();
  const pas = [0, 1, 2].find((i) => i !== p);
  await reconfig((ms) => ms.map((m) => (m._id === pas ? { _id: m._id, host: m.host, priority: 0 } : { ...m, hidden: false, priority: 1 })));
  const r = await rs.hello(p);
  assert.deepEqual(r.passives, [rs.members[pas].host]);
  assert.ok(!r.hosts.includes(rs.members[pas].host));
  assert.equal((await rs.hello(pas)).passive, true);
  assert.equal((await rs.hello(pas)).hidden, undefined);

  // The primary may not make itself unelectable.
  const { config } = await rs.adminCommand(p, { replSetGetConfig: 1 });
  const bad = { ...config, version: num(config.version) + 1, members: config.members.map((m) => (m._id === p ? { ...m, priority: 0 } : m)) };
  delete bad.term;
  const e = await rs.raw(p, 'admin', { replSetReconfig: bad });
  assert.equal(e.code, 103, JSON.stringify(e));
  assert.equal(e.codeName, 'NewReplicaSetConfigurationIncompatible');
  assert.match(e.errmsg, /is not electable under the new configuration/);

  // The periods, checked first as mongod's CmdReplSetStepDown (secondaryCatchUpPeriodSecs defaults to 10).
  for (const [cmd, msg] of [
    [{ replSetStepDown: 5 }, /stepdown period must be longer than secondaryCatchUpPeriodSecs/],
    [{ replSetStepDown: 20, secondaryCatchUpPeriodSecs: 30 }, /stepdown period must be longer than secondaryCatchUpPeriodSecs/],
    [{ replSetStepDown: 0 }, /stepdown period must be a positive integer/],
    [{ replSetStepDown: 20, secondaryCatchUpPeriodSecs: -1 }, /secondaryCatchUpPeriodSecs period must be a positive or absent/],
  ]) {
    const x = await rs.raw(p, 'admin', cmd);
    assert.equal(x.code, 2, `${JSON.stringify(cmd)}: ${JSON.stringify(x)}`);
    assert.match(x.errmsg, msg);
  }
  assert.equal((await rs.hello(p)).isWritablePrimary, true, 'a refused step-down leaves the primary as it was');

  // A step-down with no electable member caught up (the only other one is frozen): 262, still primary.
  const third = [0, 1, 2].find((i) => i !== p && i !== pas);
  assert.equal((await rs.adminCommand(third, { replSetFreeze: 30 })).ok, 1);
  const sd = await rs.raw(p, 'admin', { replSetStepDown: 10, secondaryCatchUpPeriodSecs: 5 }, 20000);
  assert.equal(sd.code, 262, JSON.stringify(sd));
  assert.match(sd.errmsg, /No electable secondaries caught up/);
  assert.equal((await rs.hello(p)).isWritablePrimary, true, 'it stays primary');
  await rs.client.db('admin').command({ ping: 1 });
  assert.equal((await rs.adminCommand(third, { replSetFreeze: 0 })).ok, 1);

  // Watch the passive member through two step-downs and a kill -9 of the primary.
  let sawPrimary = false;
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      const x = await rs.hello(pas, 1000).catch(() => null);
      if (x && x.isWritablePrimary) sawPrimary = true;
      await h.sleep(20);
    }
  })();
  try {
    for (let k = 0; k < 2; k++) {
      p = await rs.waitForPrimary();
      await stepDown(p, 1);
      const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
      assert.notEqual(np, pas, 'a step-down handed the role to the priority-0 member');
      await rs.waitForSteadyState();
      await h.sleep(1200); // the stepped-down member thaws
    }
    p = await rs.waitForPrimary();
    await rs.kill(p);
    // Two members are left: the passive one and the electable one, which must end up primary.
    const electable = [0, 1, 2].find((i) => i !== p && i !== pas);
    await rs.waitUntil(async () => {
      const x = await rs.hello(electable);
      return x && x.isWritablePrimary;
    }, { timeoutMs: 30000, what: `the electable member ${electable} to become primary` });
    await h.sleep(2000);
    assert.equal((await rs.hello(electable)).isWritablePrimary, true, 'it keeps the role');
    await rs.restart(p);
    await rs.waitForSecondary(p, { timeoutMs: 60000 });
  } finally {
    watching = false;
    await watcher;
  }
  assert.equal(sawPrimary, false, 'the priority-0 member never reported isWritablePrimary');
});

R.test('priority takeover: a caught-up member of higher priority takes the role over from the primary, and again after its own step-down\'s freeze ends', async () => {
  await rs.waitForSteadyState();
  let p = await rs.waitForPrimary();
  const hi = [0, 1, 2].find((i) => i !== p);
  await reconfig((ms) => ms.map((m) => ({ _id: m._id, host: m.host, priority: m._id === hi ? 5 : 1 })));
  await rs.waitUntil(async () => (await rs.primaryIndex()) === hi,
    { timeoutMs: 20000, what: `member ${hi} (priority 5) to take the primary role over` });
  // Writes carry on through the driver.
  const db = rs.freshDb('takeover');
  await db.collection('c').insertOne({ _id: 'after-takeover' }, MAJ);

  // Stepped down for 3 s, it hands over; when it thaws it takes the role back.
  const t0 = R.hr();
  await stepDown(hi, 3);
  const np = await rs.waitForPrimary({ exclude: [hi], timeoutMs: 15000 });
  assert.notEqual(np, hi);
  await rs.waitUntil(async () => (await rs.primaryIndex()) === hi,
    { timeoutMs: 20000, what: `member ${hi} to take the role back after its freeze` });
  assert.ok(R.hr() - t0 >= 2900, `not before its 3 s freeze ended (${(R.hr() - t0).toFixed(0)} ms)`);
  await db.collection('c').insertOne({ _id: 'after-thaw' }, MAJ);
  const docs = await rs.waitForReplication(db.databaseName, 'c');
  assert.deepEqual(docs.map((d) => d._id).sort(), ['after-takeover', 'after-thaw']);

  // Back to equal priorities: nobody takes over any more.
  await reconfig((ms) => ms.map((m) => ({ _id: m._id, host: m.host })));
  p = await rs.waitForPrimary();
  await h.sleep(2500);
  assert.equal(await rs.primaryIndex(), p);
});

R.test('an arbiterOnly member (added by replSetReconfig) is listed in hello\'s arbiters, says arbiterOnly itself, and never becomes primary', async () => {
  const spare = rs.members[SPARE];
  let p = await rs.waitForPrimary();
  const { config } = await rs.adminCommand(p, { replSetGetConfig: 1 });
  const added = { ...config, version: num(config.version) + 1, members: [...config.members, { _id: SPARE, host: spare.host, arbiterOnly: true }] };
  delete added.term;
  assert.equal((await rs.adminCommand(p, { replSetReconfig: added })).ok, 1);
  spare.inSet = true;
  await rs.waitForSecondary(SPARE, { timeoutMs: 60000 });
  await rs.waitUntil(async () => {
    const x = await rs.hello(p);
    return x && Array.isArray(x.arbiters) && x.arbiters.includes(spare.host) && !x.hosts.includes(spare.host);
  }, { what: 'the primary to list the arbiter in arbiters, not hosts' });
  const own = await rs.hello(SPARE);
  assert.equal(own.arbiterOnly, true);
  const got = (await rs.adminCommand(p, { replSetGetConfig: 1 })).config.members.find((m) => m._id === SPARE);
  assert.equal(got.arbiterOnly, true);
  assert.equal(num(got.priority), 0, 'an arbiter\'s priority defaults to 0');
  // Step the primary down: the role goes to the other electable member, never the arbiter.
  await stepDown(p, 5);
  const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
  assert.notEqual(np, SPARE);
  // Remove it again.
  p = await rs.waitForPrimary();
  const { config: c4 } = await rs.adminCommand(p, { replSetGetConfig: 1 });
  const removed = { ...c4, version: num(c4.version) + 1, members: c4.members.filter((m) => m._id !== SPARE) };
  delete removed.term;
  assert.equal((await rs.adminCommand(p, { replSetReconfig: removed })).ok, 1);
  spare.inSet = false;
  for (const i of [0, 1, 2]) await rs.adminCommand(i, { replSetFreeze: 0 }).catch(() => {});
});
