'use strict';
// Handshake, diagnostic and administrative commands, checked against what a
// MongoDB 8.0 mongod answers (standalone).
const assert = require('node:assert/strict');
const { ObjectId, Long, Timestamp } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

function isNum(v) {
  return typeof v === 'number' || v instanceof Long || (v && v._bsontype === 'Double') ||
    (v && v._bsontype === 'Int32');
}
function num(v) { return typeof v === 'number' ? v : Number(v); }

h.test('hello returns the standalone handshake fields', async () => {
  const r = await srv.client.db('admin').command({ hello: 1, helloOk: true });
  assert.equal(r.ok, 1);
  assert.equal(r.isWritablePrimary, true);
  assert.equal(r.helloOk, true);
  // As mongod's: helloOk answers a request that names it (any value), and only that (mongosh's db.hello()).
  assert.equal((await srv.client.db('admin').command({ hello: 1 })).helloOk, undefined);
  assert.equal((await srv.client.db('admin').command({ hello: 1, helloOk: false })).helloOk, true);
  assert.equal((await srv.client.db('admin').command({ isMaster: 1 })).helloOk, undefined);
  assert.equal(r.minWireVersion, 0);
  assert.equal(r.maxWireVersion, 25);
  assert.equal(r.maxBsonObjectSize, 16777216);
  assert.equal(r.maxMessageSizeBytes, 48000000);
  assert.equal(r.maxWriteBatchSize, 100000);
  assert.ok(r.localTime instanceof Date, 'localTime is a Date');
  assert.ok(Math.abs(r.localTime.getTime() - Date.now()) < 60000, 'localTime is now');
  assert.ok(Number.isInteger(num(r.connectionId)) && num(r.connectionId) > 0, 'connectionId');
  // An int, as mongod's appendNumber writes it (a long would reach mongosh and promoteLongs: false clients as Long).
  const raw = await srv.client.db('admin').command({ hello: 1 }, { promoteLongs: false });
  assert.equal(typeof raw.connectionId, 'number', `connectionId is an int32: ${JSON.stringify(raw.connectionId)}`);
  const op = (await srv.client.db('admin').command({ currentOp: 1, $all: true }, { promoteLongs: false })).inprog
    .find((o) => o.connectionId !== undefined);
  assert.equal(typeof op.connectionId, 'number', 'currentOp\'s connectionId too');
  // An operation's entry as exporters read it (percona's currentop collector asserts opid is an int32).
  const active = (await srv.client.db('admin').command({ currentOp: 1 }, { promoteLongs: false })).inprog
    .find((o) => o.command && o.command.currentOp);
  assert.equal(typeof active.opid, 'number', `opid is an int32: ${JSON.stringify(active.opid)}`);
  assert.equal(typeof active.numYields, 'number');
  assert.equal(active.threaded, true);
  assert.deepEqual([active.locks, active.lockStats, active.flowControlStats], [{}, {}, {}]);
  assert.equal(active.waitingForFlowControl, false);
  assert.equal(num(r.logicalSessionTimeoutMinutes), 30);
  assert.equal(r.readOnly, false);
  assert.ok(r.topologyVersion, 'topologyVersion present');
  assert.ok(r.topologyVersion.processId instanceof ObjectId, 'topologyVersion.processId is ObjectId');
  assert.ok(isNum(r.topologyVersion.counter), 'topologyVersion.counter numeric');
});

h.test('legacy isMaster and ismaster return ismaster: true', async () => {
  for (const name of ['isMaster', 'ismaster']) {
    const r = await srv.client.db('admin').command({ [name]: 1 });
    assert.equal(r.ok, 1);
    assert.equal(r.ismaster, true, `${name}.ismaster`);
    assert.equal(r.maxWireVersion, 25);
  }
});

h.test('the driver handshake sees maxWireVersion 25 and distinct connection ids', async () => {
  const c2 = await srv.newClient();
  const a = await srv.client.db('admin').command({ hello: 1 });
  const b = await c2.db('admin').command({ hello: 1 });
  assert.notEqual(num(a.connectionId), num(b.connectionId));
  await c2.close();
});

h.test('ping answers ok: 1', async () => {
  assert.deepEqual(await srv.client.db('admin').command({ ping: 1 }), { ok: 1 });
  const r = await srv.client.db('anydb').command({ ping: 1 });
  assert.equal(r.ok, 1);
});

h.test('buildInfo reports version, versionArray, bits and maxBsonObjectSize', async () => {
  const r = await srv.client.db('admin').command({ buildInfo: 1 });
  assert.equal(r.ok, 1);
  assert.equal(typeof r.version, 'string');
  assert.match(r.version, /^\d+\.\d+\.\d+/);
  assert.ok(Array.isArray(r.versionArray) && r.versionArray.length === 4, 'versionArray has 4 ints');
  assert.equal(r.versionArray[0], Number(r.version.split('.')[0]));
  assert.equal(r.bits, 64);
  assert.equal(r.maxBsonObjectSize, 16777216);
  assert.equal(typeof r.gitVersion, 'string');
  // What tools read besides: the OpenSSL in use, where it runs (mongosh: target_arch, target_os), the allocator.
  assert.match(r.openssl.running, /^OpenSSL \d/);
  assert.match(r.openssl.compiled, /^OpenSSL \d/);
  assert.equal(r.buildEnvironment.target_os, 'linux');
  assert.equal(r.buildEnvironment.target_arch, require('node:os').machine());
  assert.ok(['jemalloc', 'system'].includes(r.allocator), r.allocator);
  // buildinfo (lowercase) is an alias.
  const r2 = await srv.client.db('admin').command({ buildinfo: 1 });
  assert.equal(r2.version, r.version);
});

h.test('serverStatus has uptime, connections, opcounters and mem', async () => {
  const r = await srv.client.db('admin').command({ serverStatus: 1 });
  assert.equal(r.ok, 1);
  assert.ok(isNum(r.uptime) && num(r.uptime) >= 0, 'uptime');
  assert.ok(isNum(r.uptimeMillis), 'uptimeMillis');
  assert.equal(typeof r.host, 'string');
  assert.equal(typeof r.version, 'string');
  assert.equal(typeof r.process, 'string'); // mongod says 'mongod'; the name is informational.
  assert.ok(isNum(r.pid), 'pid');
  assert.equal(num(r.pid), srv.server.pid);
  assert.ok(r.localTime instanceof Date);
  assert.ok(num(r.connections.current) >= 1, 'connections.current');
  assert.ok(isNum(r.connections.available), 'connections.available');
  assert.ok(num(r.connections.totalCreated) >= 1, 'connections.totalCreated');
  for (const k of ['insert', 'query', 'update', 'delete', 'getmore', 'command']) {
    assert.ok(isNum(r.opcounters[k]), `opcounters.${k}`);
  }
  assert.equal(num(r.mem.bits), 64);
  assert.ok(num(r.mem.resident) > 0, 'mem.resident (MiB)');
  assert.ok(num(r.mem.virtual) > 0, 'mem.virtual (MiB)');
  assert.equal(r.mem.supported, true);
});

h.test('serverStatus opcounters count inserted documents and queries', async () => {
  const db = srv.freshDb('opc');
  const before = (await srv.client.db('admin').command({ serverStatus: 1 })).opcounters;
  await db.collection('c').insertMany([{ a: 1 }, { a: 2 }, { a: 3 }]);
  await db.collection('c').find({}).toArray();
  await db.collection('c').updateOne({ a: 1 }, { $set: { b: 1 } });
  await db.collection('c').deleteOne({ a: 2 });
  const after = (await srv.client.db('admin').command({ serverStatus: 1 })).opcounters;
  assert.equal(num(after.insert) - num(before.insert), 3);
  assert.ok(num(after.query) - num(before.query) >= 1, 'query counter moved');
  assert.equal(num(after.update) - num(before.update), 1);
  assert.equal(num(after.delete) - num(before.delete), 1);
  assert.ok(num(after.command) > num(before.command), 'command counter moved');
});

h.test('hostInfo reports system and os sections', async () => {
  const r = await srv.client.db('admin').command({ hostInfo: 1 });
  assert.equal(r.ok, 1);
  assert.ok(r.system.currentTime instanceof Date);
  assert.equal(typeof r.system.hostname, 'string');
  assert.equal(num(r.system.cpuAddrSize), 64);
  assert.ok(num(r.system.memSizeMB) > 0);
  assert.ok(num(r.system.numCores) > 0);
  assert.equal(typeof r.os.type, 'string');
  assert.equal(r.os.type, 'Linux');
  // mongod's: the host with its port when not 27017, the distribution's name, "Kernel <release>".
  assert.equal(r.system.hostname, `${require('node:os').hostname()}:${srv.port}`);
  const pretty = /^PRETTY_NAME=("?)(.*)\1$/m.exec(require('node:fs').readFileSync('/etc/os-release', 'utf8'));
  if (pretty) assert.equal(r.os.name, pretty[2]);
  assert.equal(r.os.version, `Kernel ${require('node:os').release()}`);
  // extra, as mongod's on Linux: read back from the same sources.
  const fs = require('node:fs');
  const os = require('node:os');
  assert.equal(r.extra.versionString, fs.readFileSync('/proc/version', 'utf8').split('\n')[0]);
  assert.equal(r.extra.kernelVersion, os.release());
  assert.match(r.extra.libcVersion, /^\d+\.\d+/);
  const page = num(r.extra.pageSize);
  assert.ok(page >= 4096 && (page & (page - 1)) === 0, `pageSize ${page}`);
  assert.ok(Math.abs(num(r.extra.numPages) * num(r.extra.pageSize) / 1048576 - num(r.system.memSizeMB)) <= 1,
    `${r.extra.numPages} pages of ${r.extra.pageSize} against ${r.system.memSizeMB} MB`);
  assert.ok(num(r.extra.maxOpenFiles) >= 1024, `maxOpenFiles ${r.extra.maxOpenFiles}`);
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const flags = /^flags\s*:\s*(.*)$/m.exec(cpuinfo);
  if (flags) assert.equal(r.extra.cpuFeatures, flags[1]);
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo);
  if (model) assert.equal(r.extra.cpuString, model[1]);
  const coreIds = new Set([...cpuinfo.matchAll(/^physical id\s*:\s*(\d+)[\s\S]*?^core id\s*:\s*(\d+)/gm)].map((m) => `${m[1]}.${m[2]}`));
  if (coreIds.size) assert.equal(num(r.extra.physicalCores), coreIds.size);
  // The frequency may move between two reads: its form only.
  if (/^cpu MHz/m.test(cpuinfo)) assert.match(r.extra.cpuFrequencyMHz, /^\d+(\.\d+)?$/);
});

h.test('getParameter reads one parameter and "*" lists them', async () => {
  const admin = srv.client.db('admin');
  const r = await admin.command({ getParameter: 1, logLevel: 1 });
  assert.equal(r.ok, 1);
  assert.ok('logLevel' in r, 'logLevel returned');
  assert.equal(num(r.logLevel), 0);
  const all = await admin.command({ getParameter: '*' });
  assert.equal(all.ok, 1);
  assert.ok('logLevel' in all);
  assert.ok(Object.keys(all).length > 3, 'several parameters listed');
});

h.test('getParameter {allParameters, showDetails} as mongod 8.0: every parameter, each with settableAtRuntime/AtStartup', async () => {
  const admin = srv.client.db('admin');
  const all = await admin.command({ getParameter: { allParameters: true } });
  assert.equal(Number(all.ttlMonitorSleepSecs), 60);
  assert.ok(Object.keys(all).length > 10);
  const det = await admin.command({ getParameter: { allParameters: true, showDetails: true } });
  assert.deepEqual(Object.keys(det.ttlMonitorSleepSecs).sort(), ['settableAtRuntime', 'settableAtStartup', 'value']);
  assert.equal(det.ttlMonitorSleepSecs.settableAtRuntime, true);
  const one = await admin.command({ getParameter: { showDetails: true }, ttlMonitorEnabled: 1 });
  assert.equal(one.ttlMonitorEnabled.value, true);
  assert.equal(one.logLevel, undefined, 'only what was asked');
  await h.expectCode(admin.command({ getParameter: { bogus: true } }), 40415);
});

h.test('getParameter of an unknown parameter fails with InvalidOptions', async () => {
  await h.expectCode(srv.client.db('admin').command({ getParameter: 1, noSuchParameterXyz: 1 }), 72);
});

h.test('setParameter returns the previous value and getParameter sees the new one', async () => {
  const admin = srv.client.db('admin');
  const r = await admin.command({ setParameter: 1, logLevel: 1 });
  assert.equal(r.ok, 1);
  assert.equal(num(r.was), 0);
  assert.equal(num((await admin.command({ getParameter: 1, logLevel: 1 })).logLevel), 1);
  const r2 = await admin.command({ setParameter: 1, logLevel: 0 });
  assert.equal(num(r2.was), 1);
});

h.test('setParameter of an unknown parameter fails', async () => {
  await h.expectCode(srv.client.db('admin').command({ setParameter: 1, noSuchParameterXyz: 5 }), [72, 2]);
  // A startup-only parameter: 20 with mongod's set_parameter.cpp message.
  await h.expectCode(srv.client.db('admin').command({ setParameter: 1, enableTestCommands: 1 }), 20,
    /^not allowed to change \[enableTestCommands\] at runtime$/);
});

h.test('getParameter/setParameter must run against admin', async () => {
  await h.expectCode(srv.client.db('notadmin').command({ getParameter: 1, logLevel: 1 }), 13);
});

h.test('getCmdLineOpts returns argv and parsed options', async () => {
  const r = await srv.client.db('admin').command({ getCmdLineOpts: 1 });
  assert.equal(r.ok, 1);
  assert.ok(Array.isArray(r.argv));
  assert.ok(r.argv.includes('--dbpath'));
  assert.ok(r.argv.includes(srv.server.dbpath));
  assert.equal(num(r.parsed.net.port), srv.port);
  assert.equal(r.parsed.net.bindIp, '127.0.0.1');
  assert.equal(r.parsed.storage.dbPath, srv.server.dbpath);
});

h.test('getLog lists log names and returns global log lines', async () => {
  const admin = srv.client.db('admin');
  const names = await admin.command({ getLog: '*' });
  assert.equal(names.ok, 1);
  assert.ok(names.names.includes('global'));
  assert.ok(names.names.includes('startupWarnings'));
  const g = await admin.command({ getLog: 'global' });
  assert.equal(g.ok, 1);
  assert.ok(Array.isArray(g.log));
  assert.ok(isNum(g.totalLinesWritten));
  for (const line of g.log) {
    assert.equal(typeof line, 'string');
    JSON.parse(line); // each line is a JSON log document
  }
});

h.test('getLog startupWarnings: whole log lines as mongod keeps them (t, s, c, id, ctx, msg, tags), so mongosh\'s banner prints each one\'s time and message', async () => {
  // The test server runs without --auth: mongod's "Access control is not enabled" warning (id 22120).
  const w = await srv.client.db('admin').command({ getLog: 'startupWarnings' });
  assert.ok(w.log.length >= 1, JSON.stringify(w));
  assert.equal(w.totalLinesWritten, w.log.length);
  const entries = w.log.map((line) => JSON.parse(line));
  for (const e of entries) {
    assert.deepEqual(Object.keys(e), ['t', 's', 'c', 'id', 'ctx', 'msg', 'tags']);
    assert.match(e.t.$date, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'mongosh prints t.$date');
    assert.ok(Math.abs(Date.parse(e.t.$date) - Date.now()) < 24 * 3600 * 1000);
    assert.equal(e.s, 'W');
    assert.deepEqual(e.tags, ['startupWarnings']);
  }
  const ac = entries.find((e) => /^Access control is not enabled for the database\./.test(e.msg));
  assert.ok(ac, JSON.stringify(entries));
  assert.equal(ac.id, 22120);
  assert.equal(ac.c, 'CONTROL');
});

h.test('whatsmyuri returns the client address', async () => {
  const r = await srv.client.db('admin').command({ whatsmyuri: 1 });
  assert.equal(r.ok, 1);
  assert.match(r.you, /^127\.0\.0\.1:\d+$/);
});

h.test('connectionStatus reports no authenticated users', async () => {
  const r = await srv.client.db('admin').command({ connectionStatus: 1 });
  assert.equal(r.ok, 1);
  assert.deepEqual(r.authInfo.authenticatedUsers, []);
  assert.deepEqual(r.authInfo.authenticatedUserRoles, []);
});

h.test('listDatabases lists created databases, with and without nameOnly', async () => {
  const db = srv.freshDb('listdb');
  await db.collection('c').insertOne({ x: 1 });
  const admin = srv.client.db('admin');
  const full = await admin.command({ listDatabases: 1 });
  assert.equal(full.ok, 1);
  const entry = full.databases.find((d) => d.name === db.databaseName);
  assert.ok(entry, 'database listed');
  assert.ok(isNum(entry.sizeOnDisk));
  assert.equal(entry.empty, false);
  assert.ok(isNum(full.totalSize));
  const names = await admin.command({ listDatabases: 1, nameOnly: true });
  const e2 = names.databases.find((d) => d.name === db.databaseName);
  assert.deepEqual(Object.keys(e2), ['name']);
  // The driver helper.
  const viaDriver = await admin.admin().listDatabases();
  assert.ok(viaDriver.databases.some((d) => d.name === db.databaseName));
});

h.test('listDatabases filter selects by name', async () => {
  const db = srv.freshDb('filt');
  await db.collection('c').insertOne({ x: 1 });
  const r = await srv.client.db('admin').command({ listDatabases: 1, nameOnly: true, filter: { name: db.databaseName } });
  assert.deepEqual(r.databases, [{ name: db.databaseName }]);
});

h.test('dropDatabase removes the database and its collections', async () => {
  const db = srv.freshDb('dropdb');
  await db.collection('a').insertOne({ x: 1 });
  await db.collection('b').insertOne({ x: 1 });
  const r = await db.command({ dropDatabase: 1 });
  assert.equal(r.ok, 1);
  const list = await srv.client.db('admin').command({ listDatabases: 1, nameOnly: true });
  assert.ok(!list.databases.some((d) => d.name === db.databaseName));
  assert.equal(await db.collection('a').countDocuments(), 0);
  assert.deepEqual(await db.listCollections().toArray(), []);
  // Dropping a database that does not exist succeeds.
  assert.equal((await srv.client.db('never_existed_db_x').command({ dropDatabase: 1 })).ok, 1);
});

h.test('create, listCollections and drop', async () => {
  const db = srv.freshDb('coll');
  await db.createCollection('alpha');
  await db.createCollection('beta');
  const r = await db.command({ listCollections: 1 });
  assert.equal(r.ok, 1);
  assert.equal(r.cursor.ns, `${db.databaseName}.$cmd.listCollections`);
  const names = r.cursor.firstBatch.map((c) => c.name).sort();
  assert.deepEqual(names, ['alpha', 'beta']);
  const alpha = r.cursor.firstBatch.find((c) => c.name === 'alpha');
  assert.equal(alpha.type, 'collection');
  assert.deepEqual(alpha.options, {});
  assert.equal(alpha.info.readOnly, false);
  assert.ok(alpha.info.uuid, 'info.uuid');
  assert.deepEqual(alpha.idIndex.key, { _id: 1 });
  assert.equal(alpha.idIndex.name, '_id_');
  assert.equal(await db.collection('alpha').drop(), true);
  const after = (await db.listCollections().toArray()).map((c) => c.name);
  assert.deepEqual(after, ['beta']);
});

h.test('listCollections with filter and nameOnly', async () => {
  const db = srv.freshDb('lcf');
  for (const n of ['one', 'two', 'three']) await db.createCollection(n);
  const f = await db.listCollections({ name: 'two' }).toArray();
  assert.equal(f.length, 1);
  assert.equal(f[0].name, 'two');
  const rx = await db.listCollections({ name: { $regex: '^t' } }).toArray();
  assert.deepEqual(rx.map((c) => c.name).sort(), ['three', 'two']);
  const r = await db.command({ listCollections: 1, nameOnly: true });
  for (const c of r.cursor.firstBatch) assert.deepEqual(Object.keys(c).sort(), ['name', 'type']);
  assert.equal(r.cursor.firstBatch.length, 3);
});

h.test('creating an existing collection fails with NamespaceExists (48) or succeeds idempotently', async () => {
  const db = srv.freshDb('dup');
  await db.createCollection('x');
  try {
    const r = await db.command({ create: 'x' });
    assert.equal(r.ok, 1);
  } catch (e) {
    assert.equal(e.code, 48);
  }
});

h.test('drop of a missing collection succeeds (MongoDB 7.0+)', async () => {
  const db = srv.freshDb('dropmissing');
  const r = await db.command({ drop: 'nothere' });
  assert.equal(r.ok, 1);
});

h.test('renameCollection moves documents and indexes', async () => {
  const db = srv.freshDb('ren');
  await db.collection('src').insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  await db.collection('src').createIndex({ a: 1 });
  const r = await srv.client.db('admin').command({
    renameCollection: `${db.databaseName}.src`, to: `${db.databaseName}.dst`,
  });
  assert.equal(r.ok, 1);
  const names = (await db.listCollections().toArray()).map((c) => c.name);
  assert.deepEqual(names, ['dst']);
  assert.deepEqual(await db.collection('dst').find().sort({ _id: 1 }).toArray(), [{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  const idx = (await db.collection('dst').indexes()).map((i) => i.name).sort();
  assert.deepEqual(idx, ['_id_', 'a_1']);
});

h.test('renameCollection errors: missing source 26, existing target 48, dropTarget works', async () => {
  const db = srv.freshDb('ren2');
  const admin = srv.client.db('admin');
  const ns = (c) => `${db.databaseName}.${c}`;
  await h.expectCode(admin.command({ renameCollection: ns('nope'), to: ns('x') }), 26);
  await db.collection('a').insertOne({ _id: 'a' });
  await db.collection('b').insertOne({ _id: 'b' });
  await h.expectCode(admin.command({ renameCollection: ns('a'), to: ns('b') }), 48);
  await admin.command({ renameCollection: ns('a'), to: ns('b'), dropTarget: true });
  assert.deepEqual(await db.collection('b').find().toArray(), [{ _id: 'a' }]);
  // Must be run against admin.
  await h.expectCode(db.command({ renameCollection: ns('b'), to: ns('c') }), 13);
});

h.test('dbStats reports collections, objects and sizes', async () => {
  const db = srv.freshDb('dbstats');
  await db.collection('a').insertMany([{ x: 1 }, { x: 2 }]);
  await db.collection('b').insertOne({ x: 3 });
  const r = await db.command({ dbStats: 1 });
  assert.equal(r.ok, 1);
  assert.equal(r.db, db.databaseName);
  assert.equal(num(r.collections), 2);
  assert.equal(num(r.objects), 3);
  assert.ok(num(r.dataSize) > 0);
  assert.ok(isNum(r.storageSize));
  assert.ok(num(r.indexes) >= 2);
  assert.ok(isNum(r.indexSize));
  assert.ok(isNum(r.avgObjSize));
  assert.equal(num(r.scaleFactor), 1);
  const viaHelper = await db.stats();
  assert.equal(num(viaHelper.objects), 3);
  // Scaled sizes keep their fraction (mongod divides by a double scale): dataSize / 1024 exactly.
  const k = await db.command({ dbStats: 1, scale: 1024 });
  assert.equal(num(k.scaleFactor), 1024);
  assert.equal(k.dataSize, num(r.dataSize) / 1024);
  assert.ok(!Number.isInteger(k.dataSize), `${k.dataSize}: a fraction of a KiB`);
  assert.equal(num(r.views), 0);
  // Views are counted apart, a time-series collection among them (a view on its buckets, as mongod 8.0);
  // found by helper-66: views was always 0 and each view counted as a collection.
  await db.createCollection('v1', { viewOn: 'a', pipeline: [] });
  await db.createCollection('v2', { viewOn: 'b', pipeline: [] });
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  const v = await db.command({ dbStats: 1 });
  assert.equal(num(v.views), 3, JSON.stringify(v));
  assert.equal(num(v.collections), 4, 'a, b, system.buckets.ts and system.views (the views\' definitions)');
});

h.test('collStats reports ns, count, size and indexes', async () => {
  const db = srv.freshDb('collstats');
  const c = db.collection('c');
  await c.insertMany([{ x: 1 }, { x: 2 }, { x: 3 }]);
  await c.createIndex({ x: 1 });
  const r = await db.command({ collStats: 'c' });
  assert.equal(r.ok, 1);
  assert.equal(r.ns, `${db.databaseName}.c`);
  assert.equal(num(r.count), 3);
  assert.ok(num(r.size) > 0);
  assert.ok(num(r.avgObjSize) > 0);
  assert.ok(isNum(r.storageSize));
  assert.equal(num(r.nindexes), 2);
  assert.ok(isNum(r.totalIndexSize));
  assert.deepEqual(Object.keys(r.indexSizes).sort(), ['_id_', 'x_1']);
});

h.test('getDefaultRWConcern on a standalone: 51300, as mongod', async () => {
  const err = await srv.client.db('admin').command({ getDefaultRWConcern: 1 }).then(() => null, (e) => e);
  assert.equal(err.code, 51300);
  assert.equal(err.message, "'getDefaultRWConcern' is not supported on standalone nodes.");
});

h.test('$collStats anywhere but first is 40602, as mongod (found by helper-66: it was 40324, an unknown stage)', async () => {
  const db = srv.freshDb('collstatspos');
  await db.collection('c').insertOne({ a: 1 });
  await h.expectCode(db.collection('c').aggregate([{ $match: {} }, { $collStats: {} }]).toArray(), 40602,
    /^\$collStats is only valid as the first stage in a pipeline$/);
  const first = await db.collection('c').aggregate([{ $collStats: { count: {} } }]).toArray();
  assert.equal(first[0].count, 1);
});

h.test('$collStats takes what its IDL struct takes: 40415 for another field, 14 for a wrong type, 31170 for a count that is not {}, 5447000 for a spec that is not an object', async () => {
  const c = srv.freshDb('collstatsspec').collection('c');
  await c.insertOne({ a: 1 });
  const bad = [
    [{ foo: 1 }, 40415, /^BSON field '\$collStats\.foo' is an unknown field\.$/],
    [{ latencyStats: { histograms: true, foo: 1 } }, 40415, /^BSON field '\$collStats\.latencyStats\.foo' is an unknown field\.$/],
    [{ latencyStats: 1 }, 14, /^BSON field '\$collStats\.latencyStats' is the wrong type 'int', expected type 'object'$/],
    [{ latencyStats: { histograms: 'x' } }, 14, /latencyStats\.histograms' is the wrong type 'string'/],
    [{ storageStats: true }, 14, /storageStats' is the wrong type 'bool'/],
    [{ count: { a: 1 } }, 31170, /^expected an empty object, but got \{ "?a"?: 1 \}$/],
    [{ queryExecStats: { a: 1 } }, 31170, /^expected an empty object/],
    [{ storageStats: { scale: -5 } }, 51024, /^BSON field 'scale' value must be >= 1, actual value '-5'$/],
    [{ storageStats: { scale: 0 } }, 51024, /^BSON field 'scale' value must be >= 1, actual value '0'$/],
    [{ storageStats: { scale: NaN } }, 51024, /^BSON field 'scale' value must be >= 1, actual value '0'$/],
  ];
  for (const [spec, code, msg] of bad)
    await h.expectCode(c.aggregate([{ $collStats: spec }]).toArray(), code, msg);
  await h.expectCode(c.aggregate([{ $collStats: null }]).toArray(), 5447000,
    /^\$collStats must take a nested object but found: \$collStats: null$/);
  const ok = await c.aggregate([{ $collStats: { latencyStats: { histograms: true }, count: {}, queryExecStats: {} } }]).toArray();
  assert.equal(ok[0].count, 1);
  assert.ok(ok[0].latencyStats.reads.histogram, 'histograms given');
});

// mongod's CmdCollStats ignores the NamespaceNotFound of appendCollectionStorageStats, which
// has filled in zeros by then (the $collStats stage does fail with 26).
h.test('collStats of a missing collection answers zeros, as mongod (and under its lowercase alias)', async () => {
  const db = srv.freshDb('collstats2');
  await db.collection('other').insertOne({});
  const want = { ns: `${db.databaseName}.missing`, size: 0, count: 0, numOrphanDocs: 0, storageSize: 0, totalSize: 0,
    nindexes: 0, totalIndexSize: 0, indexDetails: {}, indexSizes: {}, scaleFactor: 1, ok: 1 };
  assert.deepEqual(await db.command({ collStats: 'missing' }), want);
  assert.deepEqual(await db.command({ collstats: 'missing', scale: 1024 }), { ...want, scaleFactor: 1024 });
  const nodb = srv.freshDb('collstats_nodb');
  assert.deepEqual(await nodb.command({ collStats: 'x' }), { ...want, ns: `${nodb.databaseName}.x` });
  await h.expectCode(db.collection('missing').aggregate([{ $collStats: { storageStats: {} } }]).toArray(), 26);
  // The alias answers what collStats does for a collection that exists.
  const a = await db.command({ collStats: 'other' });
  const b = await db.command({ collstats: 'other' });
  assert.deepEqual(Object.keys(b), Object.keys(a));
  assert.equal(b.count, 1);
  // dbStats of a database that does not exist: zeros, the filesystem's sizes too (mongod's CmdDbStats).
  const none = await srv.freshDb('dbstats_nodb').command({ dbStats: 1 });
  assert.equal(none.collections, 0);
  assert.equal(none.fsUsedSize, 0);
  assert.equal(none.fsTotalSize, 0);
  assert.ok((await db.command({ dbStats: 1 })).fsTotalSize > 0);
});

h.test('validate refuses mongod\'s conflicting options with 72 InvalidOptions (found by helper-66: they were run)', async () => {
  const db = srv.freshDb('validateopts');
  await db.collection('c').insertOne({ a: 1 });
  for (const [opts, msg] of [
    [{ background: true, full: true }, /both \{ background: true \} and \{ full: true \} is not supported\.$/],
    [{ background: true, enforceFastCount: true }, /both \{ background: true \} and \{ enforceFastCount: true \}/],
    [{ background: true, repair: true }, /both \{ background: true \} and \{ repair: true \}/],
    [{ metadata: true, full: true }, /\{ metadata: true \} is not supported with any other options$/],
  ]) {
    await h.expectCode(db.command({ validate: 'c', ...opts }), 72, msg);
  }
  for (const opts of [{ full: true }, { background: true }, { metadata: true }, { full: true, enforceFastCount: true }]) {
    assert.equal((await db.command({ validate: 'c', ...opts })).valid, true, JSON.stringify(opts));
  }
});

h.test('validate reports a valid collection', async () => {
  const db = srv.freshDb('validate');
  await db.collection('c').insertMany(Array.from({ length: 50 }, (_, i) => ({ i })));
  await db.collection('c').createIndex({ i: 1 });
  const r = await db.command({ validate: 'c' });
  assert.equal(r.ok, 1);
  assert.equal(r.valid, true);
  assert.equal(r.ns, `${db.databaseName}.c`);
  assert.equal(num(r.nrecords), 50);
  assert.equal(num(r.nIndexes), 2);
  assert.deepEqual(r.errors, []);
  assert.equal(num(r.keysPerIndex._id_), 50);
  assert.equal(num(r.keysPerIndex.i_1), 50);
  // Counts as mongod's appendNumber writes them: ints while they fit, so a shell script can add to them.
  const raw = await db.command({ validate: 'c' }, { promoteLongs: false });
  for (const v of [raw.nrecords, raw.nInvalidDocuments, raw.nNonCompliantDocuments, raw.keysPerIndex._id_, raw.keysPerIndex.i_1]) {
    assert.equal(typeof v, 'number', `a count is ${v && v._bsontype}, not an int`);
  }
  // mongod's fields: the collection's uuid (as listCollections shows it) and the entry arrays.
  const info = (await db.listCollections({ name: 'c' }).toArray())[0].info;
  assert.equal(r.uuid.toString('hex'), info.uuid.toString('hex'));
  assert.deepEqual(r.extraIndexEntries, []);
  assert.deepEqual(r.missingIndexEntries, []);
  assert.deepEqual(r.corruptRecords, []);
  assert.deepEqual(Object.keys(r).slice(0, 3), ['ns', 'uuid', 'nInvalidDocuments']);
  await h.expectCode(db.command({ validate: 'missing' }), 26);
});

h.test('an unknown command fails with CommandNotFound (59)', async () => {
  const e = await h.expectCode(srv.client.db('admin').command({ noSuchCommandAtAll: 1 }), 59);
  assert.equal(e.codeName, 'CommandNotFound');
  assert.match(e.errmsg, /no such command: 'noSuchCommandAtAll'/);
  // The connection keeps working.
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
});

h.test('listIndexes, createIndexes and dropIndexes', async () => {
  const db = srv.freshDb('idx');
  const c = db.collection('c');
  await c.insertOne({ a: 1, b: 2 });
  const name = await c.createIndex({ a: 1, b: -1 });
  assert.equal(name, 'a_1_b_-1');
  await c.createIndex({ b: 1 }, { unique: true, name: 'ub' });
  const idx = await c.indexes();
  assert.deepEqual(idx.map((i) => i.name).sort(), ['_id_', 'a_1_b_-1', 'ub']);
  const ub = idx.find((i) => i.name === 'ub');
  assert.equal(ub.unique, true);
  assert.equal(ub.v, 2);
  await h.expectCode(c.insertOne({ b: 2 }), 11000);
  await c.dropIndex('ub');
  await c.insertOne({ b: 2 });
  await h.expectCode(c.dropIndex('nope'), 27);
  await h.expectCode(c.dropIndex('_id_'), 72);
});

h.test('explain of a find returns a queryPlanner section', async () => {
  const db = srv.freshDb('explain');
  await db.collection('c').insertOne({ a: 1 });
  const r = await db.command({ explain: { find: 'c', filter: { a: 1 } } });
  assert.equal(r.ok, 1);
  assert.ok(r.queryPlanner, 'queryPlanner');
});

h.test('endSessions, killAllSessions-free lsid commands and hello with lsid are accepted', async () => {
  const session = srv.client.startSession();
  const db = srv.freshDb('sess');
  await db.collection('c').insertOne({ a: 1 }, { session });
  assert.equal(await db.collection('c').countDocuments({}, { session }), 1);
  await session.endSession();
});

h.test('Timestamp and ObjectId values round-trip', async () => {
  const db = srv.freshDb('types');
  const ts = new Timestamp({ t: 100, i: 5 });
  const oid = new ObjectId();
  await db.collection('c').insertOne({ _id: 1, ts, oid });
  const d = await db.collection('c').findOne({ _id: 1 });
  assert.ok(d.ts.equals(ts));
  assert.ok(d.oid.equals(oid));
});

h.test('--setParameter on the command line sets the startup value', async () => {
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'logLevel=2'] });
  const { MongoClient } = require('mongodb');
  await s2.start();
  let cl;
  try {
    cl = await MongoClient.connect(s2.uri);
    const r = await cl.db('admin').command({ getParameter: 1, logLevel: 1 });
    assert.equal(num(r.logLevel), 2);
    const opts = await cl.db('admin').command({ getCmdLineOpts: 1 });
    assert.ok(opts.argv.includes('--setParameter'));
  } finally {
    if (cl) await cl.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('an unknown --setParameter name makes the server refuse to start', async () => {
  const s3 = new h.MayflyServer({ args: ['--setParameter', 'noSuchParameterXyz=1'] });
  let started = false;
  try {
    await s3.start();
    started = true;
  } catch (e) {
    assert.match(e.message, /exited during start-up/);
  } finally {
    await s3.stop();
    s3.cleanup();
  }
  assert.equal(started, false, 'server started with an unknown parameter');
});

h.test('awaitable hello with exhaustAllowed streams replies with moreToCome', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    const first = await conn.command('admin', { hello: 1 });
    const tv = first.topologyVersion;
    assert.ok(tv, 'topologyVersion present');
    const { Long: L } = require('mongodb');
    const body = { hello: 1, topologyVersion: { processId: tv.processId, counter: L.fromValue(tv.counter) },
      maxAwaitTimeMS: L.fromNumber(500), $db: 'admin' };
    const msg = h.buildOpMsg(77, body);
    msg.writeUInt32LE(1 << 16, 16); // exhaustAllowed
    const t0 = Date.now();
    await conn.send(msg);
    const r1 = await conn.readReply(5000);
    const waited = Date.now() - t0;
    assert.equal(r1.ok, 1);
    assert.ok(waited >= 400, `awaitable hello waits for maxAwaitTimeMS (replied after ${waited} ms)`);
    assert.equal(conn.lastFlags & 2, 2, 'reply has moreToCome set');
    const r2 = await conn.readReply(5000);
    assert.equal(r2.ok, 1, 'a second streamed reply follows without a new request');
  } finally { conn.close(); }
});

h.test('the driver monitor stays healthy: no pool clears or heartbeat failures over 4 s', async () => {
  const { MongoClient } = require('mongodb');
  const cl = new MongoClient(srv.uri, { heartbeatFrequencyMS: 500 });
  const events = [];
  cl.on('connectionPoolCleared', () => events.push('connectionPoolCleared'));
  cl.on('serverHeartbeatFailed', (e) => events.push(`serverHeartbeatFailed: ${e.failure && e.failure.message}`));
  await cl.connect();
  try {
    const t0 = Date.now();
    while (Date.now() - t0 < 4000) {
      await cl.db('admin').command({ ping: 1 });
      await h.sleep(100);
    }
  } finally { await cl.close(); }
  assert.deepEqual(events, []);
});

/* Found in review: writes the server makes on its own (the profiler) are not client operations. */
h.test('serverStatus opcounters do not count the profiler\'s own writes', async () => {
  const db = srv.freshDb('opcprof');
  await db.collection('c').insertOne({ a: 1 });
  await db.command({ profile: 2 });
  try {
    const before = (await srv.client.db('admin').command({ serverStatus: 1 })).opcounters;
    await db.collection('c').find({}).toArray();
    await db.collection('c').find({ a: 1 }).toArray();
    const after = (await srv.client.db('admin').command({ serverStatus: 1 })).opcounters;
    assert.equal(num(after.insert) - num(before.insert), 0, 'profile entries are not inserts');
    assert.equal(num(after.delete) - num(before.delete), 0);
    assert.ok(await db.collection('system.profile').countDocuments() >= 2, 'the finds were profiled');
  } finally {
    await db.command({ profile: 0 });
  }
});

/* Found in review: the profiler's ns came from the first field alone, so a getMore was db.$cmd. */
h.test('the profiler records a getMore under its collection\'s namespace and a database command under db.$cmd', async () => {
  const db = srv.freshDb('profns');
  await db.collection('c').insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
  await db.command({ profile: 2 });
  try {
    const docs = await db.collection('c').find({}, { batchSize: 2 }).toArray();
    assert.equal(docs.length, 5);
    await db.command({ dbStats: 1 });
  } finally {
    await db.command({ profile: 0 });
  }
  const entries = await db.collection('system.profile').find({}).toArray();
  const byOp = (op) => entries.filter((e) => e.op === op);
  assert.ok(byOp('getmore').length >= 1, `getMore profiled: ${JSON.stringify(entries.map((e) => e.op))}`);
  for (const e of byOp('getmore')) assert.equal(e.ns, `${db.databaseName}.c`);
  for (const e of byOp('query')) assert.equal(e.ns, `${db.databaseName}.c`);
  // Each getmore names the find that opened its cursor (originatingCommand) and its cursor, the last
  // one (which exhausts it) too, as mongod's profiler (found by helper-105).
  const find = byOp('query')[0];
  assert.equal(byOp('getmore').length, 2, 'batches of 2, 2 and 1');
  for (const e of byOp('getmore')) {
    assert.deepEqual(e.originatingCommand.find, 'c');
    assert.deepEqual(e.originatingCommand.batchSize, 2);
    assert.equal(String(e.cursorid), String(find.cursorid), 'the getMore\'s cursor');
    const keys = Object.keys(e);
    assert.deepEqual(keys.slice(keys.indexOf('command'), keys.indexOf('command') + 3), ['command', 'originatingCommand', 'cursorid']);
  }
  assert.equal(byOp('getmore').filter((e) => e.cursorExhausted).length, 1, 'the last getMore exhausts the cursor');
  assert.ok(!('originatingCommand' in find), 'the find itself has none');
  // Counts as mongod's appendNumber writes them: ints (mongosh shows 0, not Long('0')).
  for (const e of await db.collection('system.profile').find({}, { promoteLongs: false }).toArray()) {
    for (const k of ['keysExamined', 'docsExamined', 'nreturned', 'millis', 'numYield', 'responseLength']) {
      if (k in e) assert.equal(typeof e[k], 'number', `${e.op} ${k} is ${e[k] && e[k]._bsontype}`);
    }
  }
  const stats = entries.find((e) => e.command && e.command.dbStats !== undefined);
  assert.ok(stats, 'dbStats profiled');
  assert.equal(stats.ns, `${db.databaseName}.$cmd`);
  // As mongod's entries: the protocol, the client's address without its port, and who ran it (nobody here).
  for (const e of entries) {
    assert.equal(e.protocol, 'op_msg');
    assert.equal(e.client, '127.0.0.1');
    assert.deepEqual(e.allUsers, []);
    assert.equal(e.user, '');
  }
  const keys = Object.keys(stats);
  assert.deepEqual(keys.slice(keys.indexOf('responseLength'), keys.indexOf('responseLength') + 3), ['responseLength', 'protocol', 'millis']);
  assert.deepEqual(keys.slice(-2), ['allUsers', 'user']);
});

h.test('replica-set commands on a standalone answer 76 NoReplicationEnabled', async () => {
  const admin = srv.client.db('admin');
  const cmds = [
    { replSetGetStatus: 1 },
    { replSetInitiate: { _id: 'rs0', members: [{ _id: 0, host: '127.0.0.1:1' }] } },
    { replSetGetConfig: 1 },
    { replSetReconfig: { _id: 'rs0', version: 2, members: [] } },
    { replSetStepDown: 60 },
    { replSetFreeze: 10 },
  ];
  for (const cmd of cmds) {
    await assert.rejects(admin.command(cmd), (e) => e.code === 76 && e.codeName === 'NoReplicationEnabled', JSON.stringify(cmd));
  }
  await assert.rejects(admin.command({ replSetInitiate: {} }), (e) => /not started with replication enabled/.test(e.message));
});

/* mongod's serverStatus().wiredTiger names for the cache figures that tell whether writes are helping eviction. */
h.test('serverStatus wiredTiger shows the cache, its dirty bytes and application-thread eviction', async () => {
  const db = srv.freshDb('wtstats');
  await db.collection('c').insertMany(Array.from({ length: 2000 }, (_, i) => ({ _id: i, p: 'x'.repeat(200) })));
  const wt = (await srv.client.db('admin').command({ serverStatus: 1 })).wiredTiger;
  const c = wt.cache;
  assert.ok(num(c['maximum bytes configured']) > 0);
  assert.ok(num(c['bytes currently in the cache']) > 400000, 'the 2,000 documents are in the cache');
  assert.ok(num(c['tracked dirty bytes in the cache']) >= 0);
  assert.ok(num(c['tracked dirty bytes in the cache']) <= num(c['bytes currently in the cache']));
  assert.ok(isNum(c['pages evicted by application threads']));
  assert.ok(isNum(wt['thread-yield']['application thread time evicting (usecs)']));
  assert.ok(isNum(wt['thread-yield']['application thread time waiting for cache (usecs)']));
  // The whole connection's statistics, as mongod's section: the fields exporters read (Datadog, percona).
  assert.equal(wt.uri, 'statistics:');
  for (const [group, name] of [['cache', 'pages read into cache'], ['cache', 'pages written from cache'],
    ['cache', 'modified pages evicted'], ['cache', 'unmodified pages evicted'], ['cache', 'bytes read into cache'],
    ['cache', 'bytes written from cache'], ['session', 'open session count'], ['cursor', 'open cursor count'],
    ['block-manager', 'bytes read'], ['transaction', 'transactions committed'], ['connection', 'total read I/Os']]) {
    assert.ok(isNum(wt[group] && wt[group][name]), `wiredTiger.${group}["${name}"]`);
  }
  // Groups in byte order, as mongod appends them.
  const groups = Object.keys(wt).filter((k) => k !== 'uri');
  assert.deepEqual(groups, [...groups].sort());
});

/*
 * Worker threads keep a finished command's cursors in WiredTiger's cursor
 * cache for their next command (storage_wt.c). A cached cursor must not hold
 * its table: a collection that many connections (so several worker threads)
 * read and wrote, then went quiet, loses its files soon after a drop, and a
 * collection of the same name made afterwards starts empty.
 */
h.test('drop after many connections used a collection: its files go within seconds, a new one starts empty', async () => {
  const fs = require('node:fs');
  const tables = () => new Set(fs.readdirSync(srv.server.dbpath).filter((f) => /^(coll|index)-.*\.wt$/.test(f)));
  const db = srv.freshDb('dropcached');
  const before = tables();
  await db.collection('c').createIndex({ k: 1 });
  const mine = [...tables()].filter((f) => !before.has(f));
  assert.equal(mine.length, 3, `the new collection's record, _id and k tables: ${mine}`);
  const clients = await Promise.all(Array.from({ length: 8 }, () => srv.newClient({ maxPoolSize: 2 })));
  try {
    await Promise.all(clients.map(async (cl, i) => {
      const c = cl.db(db.databaseName).collection('c');
      for (let j = 0; j < 50; j++) {
        await c.insertOne({ _id: i * 1000 + j, k: j });
        assert.equal((await c.findOne({ _id: i * 1000 + j })).k, j);
        assert.equal(await c.countDocuments({ k: j }) >= 1, true);
      }
    }));
    assert.equal(await db.collection('c').countDocuments(), 400);
    /* The connections stay open and idle: their threads' cursors stay cached. */
    assert.equal(await db.collection('c').drop(), true);
    const t0 = Date.now();
    while (mine.some((f) => tables().has(f))) {
      assert.ok(Date.now() - t0 < 5000, `the dropped collection's files ${mine.filter((f) => tables().has(f))} still there after 5 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(await clients[3].db(db.databaseName).collection('c').countDocuments(), 0);
    await clients[5].db(db.databaseName).collection('c').insertOne({ _id: 1, k: 1 });
    assert.equal(await clients[6].db(db.databaseName).collection('c').countDocuments(), 1);
    assert.deepEqual(await clients[7].db(db.databaseName).collection('c').findOne({ k: 1 }), { _id: 1, k: 1 });
  } finally {
    await Promise.all(clients.map((cl) => cl.close()));
    await db.dropDatabase();
  }
});

h.test('setFeatureCompatibilityVersion "8.0" with confirm: true succeeds and changes nothing; without confirm 7369100; a downgrade is refused; other values 2, as mongod 8.0', async () => {
  const admin = srv.client.db('admin');
  assert.equal((await admin.command({ setFeatureCompatibilityVersion: '8.0', confirm: true })).ok, 1);
  await h.expectCode(admin.command({ setFeatureCompatibilityVersion: '8.0' }), 7369100, /re-run this command with 'confirm: true'/);
  await h.expectCode(admin.command({ setFeatureCompatibilityVersion: '7.0', confirm: true }), 20, /cannot downgrade/);
  await h.expectCode(admin.command({ setFeatureCompatibilityVersion: '9.9', confirm: true }), 2, /^Invalid feature compatibility version value '9.9'/);
  await h.expectCode(admin.command({ setFeatureCompatibilityVersion: 8, confirm: true }), 14);
  await h.expectCode(srv.client.db('test').command({ setFeatureCompatibilityVersion: '8.0', confirm: true }), 13);
  const p = await admin.command({ getParameter: 1, featureCompatibilityVersion: 1 });
  assert.deepEqual(p.featureCompatibilityVersion, { version: '8.0' });
  // A list parameter is an array, as mongod's std::vector<std::string> ones.
  const am = await admin.command({ getParameter: 1, authenticationMechanisms: 1 });
  assert.deepEqual(am.authenticationMechanisms, ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
});

h.test('a collectionless aggregate runs under db.$cmd.aggregate, as mongod: $currentOp shows itself so', async () => {
  const admin = srv.client.db('admin');
  const mine = await admin.aggregate([{ $currentOp: {} }, { $match: { 'command.aggregate': 1, 'command.comment': 'self-ns' } }], { comment: 'self-ns' }).toArray();
  assert.equal(mine.length, 1);
  assert.equal(mine[0].ns, 'admin.$cmd.aggregate');
});

// mongod's checkCollectionOptions: creating a collection that exists with other options
// names the options it has, its UUID first (found by helper-102: mayfly said
// "Collection <ns> already exists.").
h.test('create of an existing collection with other options: 48 naming its options', async () => {
  const db = srv.freshDb('createdup');
  await db.createCollection('cap', { capped: true, size: 4096 });
  await db.createCollection('plain');
  await h.expectCode(db.createCollection('cap'), 48,
    new RegExp(`^namespace ${db.databaseName}\\.cap already exists, but with different options: ` +
      '\\{ uuid: UUID\\("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"\\), capped: true, size: 4096 \\}$'));
  await h.expectCode(db.createCollection('plain', { capped: true, size: 1000 }), 48,
    /already exists, but with different options: \{ uuid: UUID\("[0-9a-f-]{36}"\) \}$/);
  assert.equal((await db.command({ create: 'cap', capped: true, size: 4096 })).ok, 1);
});

// serverStatus' catalogStats (mongod 8.0) and storageEngine's fields (found by helper-102:
// monitoring tools read them).
h.test('serverStatus: catalogStats counts collections by kind; storageEngine has mongod 8.0 fields', async () => {
  const before = (await srv.client.db('admin').command({ serverStatus: 1 })).catalogStats;
  const db = srv.freshDb('catstats');
  await db.createCollection('plain');
  await db.createCollection('cap', { capped: true, size: 4096 });
  await db.createCollection('v', { viewOn: 'plain', pipeline: [] });
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  const s = await srv.client.db('admin').command({ serverStatus: 1 });
  const c = s.catalogStats;
  assert.equal(c.collections - before.collections, 2);
  assert.equal(c.capped - before.capped, 1);
  assert.equal(c.views - before.views, 1);
  assert.equal(c.timeseries - before.timeseries, 1);
  assert.equal(c.internalCollections - before.internalCollections, 2); /* system.buckets.ts, system.views */
  assert.deepEqual(Object.keys(s.storageEngine), ['name', 'supportsCommittedReads', 'oldestRequiredTimestampForCrashRecovery',
    'supportsPendingDrops', 'dropPendingIdents', 'supportsSnapshotReadConcern', 'readOnly', 'persistent', 'backupCursorOpen']);
  const off = await srv.client.db('admin').command({ serverStatus: 1, catalogStats: 0 });
  assert.equal(off.catalogStats, undefined);
});
