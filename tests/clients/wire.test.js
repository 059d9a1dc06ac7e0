'use strict';
// Raw-socket wire protocol tests: well-formed edge cases get answers,
// malformed/truncated/oversized messages and garbage close that connection,
// and in every case the server keeps serving other clients.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const os = require('node:os');
const { BSON } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

async function otherClientsOk() {
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1, 'driver client still served');
  const c = await h.rawConnect(srv.port);
  const r = await c.command('admin', { ping: 1 });
  c.close();
  assert.ok(r && r.ok === 1, 'a new raw connection is served');
}

function header(len, reqId, opCode) {
  const b = Buffer.alloc(16);
  b.writeInt32LE(len, 0); b.writeInt32LE(reqId, 4); b.writeInt32LE(0, 8); b.writeInt32LE(opCode, 12);
  return b;
}

/* Sends bytes on a fresh connection and expects the server to close it (an error reply first is allowed). */
async function expectClosed(bytes, { endAfter = false } = {}) {
  const conn = await h.rawConnect(srv.port);
  await conn.send(bytes);
  if (endAfter) conn.sock.end();
  const closed = await conn.waitClosed(5000);
  conn.close();
  assert.ok(closed, 'server closed the connection');
}

h.test('a well-formed OP_MSG ping gets an OP_MSG reply with responseTo set', async () => {
  const conn = await h.rawConnect(srv.port);
  await conn.send(h.buildOpMsg(4242, { ping: 1, $db: 'admin' }));
  // Read the raw header before decoding.
  while (conn.buf.length < 16 && !conn.closed) await conn.waitEvent(5000);
  const responseTo = conn.buf.readInt32LE(8);
  const opCode = conn.buf.readInt32LE(12);
  const r = await conn.readReply();
  conn.close();
  assert.equal(responseTo, 4242);
  assert.equal(opCode, 2013);
  assert.equal(r.ok, 1);
});

h.test('with TLS off, a first message whose length ends in byte 0x16 (a TLS handshake\'s first byte) is a message, not a handshake', async () => {
  /* pymongo's hello with a 20-character driver name was 278 bytes: the server took it for TLS and closed the connection. */
  /* 790 bytes with request id 256 also matches a TLS record's first six bytes (16 03 00 00 00 01). */
  for (const [want, reqId, bytewise] of [[278, 7, false], [534, 7, false], [790, 256, false], [278, 7, true]]) {
    const pad = want - h.buildOpMsg(reqId, { ping: 1, $db: 'admin', comment: '' }).length;
    const msg = h.buildOpMsg(reqId, { ping: 1, $db: 'admin', comment: 'x'.repeat(pad) });
    assert.equal(msg.length, want);
    assert.equal(msg[0], 0x16);
    const conn = await h.rawConnect(srv.port);
    if (bytewise) {
      for (let i = 0; i < 20; i++) { await conn.send(msg.subarray(i, i + 1)); await new Promise((r) => setTimeout(r, 5)); }
      await conn.send(msg.subarray(20));
    } else {
      await conn.send(msg);
    }
    const r = await conn.readReply(5000);
    conn.close();
    assert.equal(r.ok, 1, `a ${want}-byte first message (request id ${reqId}${bytewise ? ', a byte at a time' : ''}) answered`);
  }
});

h.test('legacy OP_QUERY isMaster on admin.$cmd gets an OP_REPLY', async () => {
  const conn = await h.rawConnect(srv.port);
  const q = Buffer.from(BSON.serialize({ isMaster: 1 }));
  const ns = Buffer.from('admin.$cmd\0');
  const i32 = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; };
  // flags, fullCollectionName, numberToSkip, numberToReturn, query.
  const body = Buffer.concat([i32(0), ns, i32(0), i32(-1), q]);
  await conn.send(Buffer.concat([header(16 + body.length, 7, 2004), body]));
  const r = await conn.readReply(5000);
  conn.close();
  assert.ok(r, 'got a reply');
  assert.equal(r.ismaster, true);
  assert.equal(r.maxWireVersion, 25);
});

h.test('OP_QUERY runs only the handshake and authentication commands; any other is 352 UnsupportedOpQueryCommand, as mongod 5.1+', async () => {
  const i32 = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; };
  const query = async (cmd, db = 'admin') => {
    const conn = await h.rawConnect(srv.port);
    const body = Buffer.concat([i32(0), Buffer.from(`${db}.$cmd\0`), i32(0), i32(-1), Buffer.from(BSON.serialize(cmd))]);
    await conn.send(Buffer.concat([header(16 + body.length, 9, 2004), body]));
    const r = await conn.readReply(5000);
    conn.close();
    return r;
  };
  assert.equal((await query({ hello: 1 })).ok, 1);
  assert.equal((await query({ buildInfo: 1 })).ok, 1);
  for (const cmd of [{ find: 'c' }, { insert: 'c', documents: [{ a: 1 }] }, { listDatabases: 1 }, { ping: 1 }]) {
    const r = await query(cmd, 'opq');
    assert.equal(r.ok, 0);
    assert.equal(r.code, 352);
    assert.equal(r.codeName, 'UnsupportedOpQueryCommand');
    assert.match(r.errmsg, new RegExp(`^Unsupported OP_QUERY command: ${Object.keys(cmd)[0]}. The client driver may require an upgrade.`));
  }
  assert.equal(await srv.client.db('opq').collection('c').countDocuments(), 0, 'the OP_QUERY insert wrote nothing');
});

/* mongod 8.0's answer to a removed legacy read (makeErrorResponseToUnsupportedOpQuery): exactly these fields. */
function legacyRefusal(op) {
  return {
    $err: `${op} is no longer supported. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal`,
    code: 5739101,
    ok: 0,
  };
}

const i32le = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; };
const i64le = (v) => { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(v)); return b; };

h.test('OP_REPLY responseFlags as mongod: a command over OP_QUERY says AwaitCapable (8), ok or not; a query on a collection says QueryFailure (2)', async () => {
  const conn = await h.rawConnect(srv.port);
  const query = async (reqId, ns, doc) => {
    const body = Buffer.concat([i32le(0), Buffer.from(`${ns}\0`), i32le(0), i32le(-1), Buffer.from(BSON.serialize(doc))]);
    await conn.send(Buffer.concat([header(16 + body.length, reqId, 2004), body]));
    const r = await conn.readReply(5000);
    return { r, flags: conn.lastFlags, op: conn.lastOpCode, to: conn.lastResponseTo };
  };
  let a = await query(11, 'admin.$cmd', { hello: 1 });
  assert.equal(a.op, 1);
  assert.equal(a.to, 11);
  assert.equal(a.flags, 8, 'a command reply: AwaitCapable only');
  assert.equal(a.r.ok, 1);
  a = await query(12, 'opq.$cmd', { ping: 1 });
  assert.equal(a.flags, 8, 'a refused command (352) is still a command reply: no QueryFailure');
  assert.equal(a.r.code, 352);
  const db = srv.freshDb('opqc');
  await db.collection('legacy').insertOne({ _id: 1 });
  a = await query(13, `${db.databaseName}.legacy`, {});
  assert.equal(a.op, 1);
  assert.equal(a.to, 13);
  assert.equal(a.flags, 2, 'QueryFailure, so drivers raise the $err document instead of returning it');
  assert.deepEqual(a.r, legacyRefusal('OP_QUERY'));
  // The connection lives on.
  assert.equal((await conn.command('admin', { ping: 1 })).ok, 1);
  conn.close();
});

h.test('a legacy OP_GET_MORE gets mongod\'s QueryFailure OP_REPLY (5739101) and the connection lives on; the cursor is untouched', async () => {
  const db = srv.freshDb('opgm');
  const coll = db.collection('c');
  await coll.insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
  const conn = await h.rawConnect(srv.port);
  const f = await conn.command(db.databaseName, { find: 'c', batchSize: 2 });
  const id = f.cursor.id;
  assert.notEqual(BigInt(id), 0n);
  // OP_GET_MORE: ZERO int32, fullCollectionName, numberToReturn int32, cursorID int64.
  const body = Buffer.concat([i32le(0), Buffer.from(`${db.databaseName}.c\0`), i32le(2), i64le(id)]);
  await conn.send(Buffer.concat([header(16 + body.length, 21, 2005), body]));
  const r = await conn.readReply(5000);
  assert.ok(r, 'answered, not closed');
  assert.equal(conn.lastOpCode, 1, 'an OP_REPLY');
  assert.equal(conn.lastResponseTo, 21);
  assert.equal(conn.lastFlags, 2, 'QueryFailure');
  assert.deepEqual(r, legacyRefusal('OP_GET_MORE'));
  const more = await conn.command(db.databaseName, { getMore: id, collection: 'c' });
  assert.deepEqual(more.cursor.nextBatch.map((d) => d._id), [2, 3, 4], 'the refused OP_GET_MORE read nothing');
  conn.close();
  await otherClientsOk();
});

h.test('legacy OP_INSERT, OP_UPDATE, OP_DELETE and OP_KILL_CURSORS get no reply and close the connection, as mongod; nothing is written', async () => {
  const db = srv.freshDb('opw');
  const coll = db.collection('c');
  await coll.insertOne({ _id: 1, a: 1 });
  const doc = Buffer.from(BSON.serialize({ _id: 2, a: 2 }));
  const q = Buffer.from(BSON.serialize({ _id: 1 }));
  const u = Buffer.from(BSON.serialize({ $set: { a: 9 } }));
  const ns = Buffer.from(`${db.databaseName}.c\0`);
  const bodies = {
    2002: Buffer.concat([i32le(0), ns, doc]), // OP_INSERT: flags, ns, documents
    2001: Buffer.concat([i32le(0), ns, i32le(0), q, u]), // OP_UPDATE: ZERO, ns, flags, selector, update
    2006: Buffer.concat([i32le(0), ns, i32le(0), q]), // OP_DELETE: ZERO, ns, flags, selector
    2007: Buffer.concat([i32le(0), i32le(1), i64le(12345)]), // OP_KILL_CURSORS: ZERO, count, ids
  };
  for (const [op, body] of Object.entries(bodies)) {
    const conn = await h.rawConnect(srv.port);
    await conn.send(Buffer.concat([header(16 + body.length, 31, Number(op)), body]));
    assert.ok(await conn.waitClosed(5000), `opcode ${op}: the connection is closed`);
    assert.equal(conn.buf.length, 0, `opcode ${op}: no reply`);
    conn.close();
  }
  assert.deepEqual(await coll.find().toArray(), [{ _id: 1, a: 1 }], 'the legacy writes wrote nothing');
  // Logged as mongod logs the failed request, with its code.
  const deadline = Date.now() + 5000;
  while (!/Location5745703: OP_KILL_CURSORS/.test(srv.server.stderrTail(200)) && Date.now() < deadline) await h.sleep(50);
  for (const [code, op] of [[5745702, 'OP_INSERT'], [5745701, 'OP_UPDATE'], [5745700, 'OP_DELETE'], [5745703, 'OP_KILL_CURSORS']]) {
    assert.match(srv.server.stderrTail(200), new RegExp(`Failed to handle request: Location${code}: ${op} is no longer supported`));
  }
  await otherClientsOk();
});

h.test('two pipelined requests in one write get two replies in order', async () => {
  const conn = await h.rawConnect(srv.port);
  await conn.send(Buffer.concat([
    h.buildOpMsg(1, { ping: 1, $db: 'admin' }),
    h.buildOpMsg(2, { whatsmyuri: 1, $db: 'admin' }),
  ]));
  const a = await conn.readReply();
  const b = await conn.readReply();
  conn.close();
  assert.equal(a.ok, 1);
  assert.ok('you' in b);
});

h.test('a request delivered one byte at a time is processed', async () => {
  const conn = await h.rawConnect(srv.port);
  const msg = h.buildOpMsg(3, { ping: 1, $db: 'admin' });
  conn.sock.setNoDelay(true);
  for (let i = 0; i < msg.length; i++) {
    await conn.send(msg.subarray(i, i + 1));
    if (i % 8 === 0) await h.sleep(1);
  }
  const r = await conn.readReply();
  conn.close();
  assert.equal(r.ok, 1);
});

h.test('moreToCome on a request suppresses the reply', async () => {
  const conn = await h.rawConnect(srv.port);
  const db = srv.freshDb('moretocome');
  const m = h.buildOpMsg(10, { insert: 'c', documents: [{ _id: 1 }], writeConcern: { w: 0 }, $db: db.databaseName });
  m.writeUInt32LE(2, 16); // flagBits: moreToCome
  await conn.send(m);
  await conn.send(h.buildOpMsg(11, { ping: 1, $db: 'admin' }));
  const r = await conn.readReply();
  conn.close();
  assert.equal(r.ok, 1, 'the first reply is the ping reply');
  assert.equal(await db.collection('c').countDocuments(), 1);
});

h.test('messageLength smaller than a header closes the connection', async () => {
  await expectClosed(header(4, 1, 2013));
  await otherClientsOk();
});

h.test('negative messageLength closes the connection', async () => {
  await expectClosed(header(-100, 1, 2013));
  await otherClientsOk();
});

h.test('messageLength above 48,000,000 closes the connection', async () => {
  await expectClosed(header(48000001, 1, 2013));
  await otherClientsOk();
});

h.test('a truncated message followed by a client close is handled', async () => {
  const full = h.buildOpMsg(1, { ping: 1, $db: 'admin' });
  await expectClosed(full.subarray(0, full.length - 5), { endAfter: true });
  await otherClientsOk();
});

h.test('a stalled partial message does not block other clients', async () => {
  const conn = await h.rawConnect(srv.port);
  const full = h.buildOpMsg(1, { ping: 1, $db: 'admin' });
  await conn.send(full.subarray(0, 20));
  await otherClientsOk();
  conn.close();
  await otherClientsOk();
});

h.test('HTTP on the wire port closes the connection', async () => {
  await expectClosed(Buffer.from('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'));
  await otherClientsOk();
});

h.test('random garbage closes the connection', async () => {
  for (let i = 0; i < 5; i++) {
    const junk = crypto.randomBytes(4096);
    // Force a plausible length so the server has to parse the body as a message.
    if (i % 2 === 0) junk.writeInt32LE(4096, 0);
    const conn = await h.rawConnect(srv.port);
    await conn.send(junk);
    // Either the connection is closed or an error reply is sent; never success.
    const r = await Promise.race([conn.readReply(3000).catch(() => null), conn.waitClosed(3000).then(() => null)]);
    if (r && typeof r.ok !== 'undefined') assert.notEqual(r.ok, 1);
    conn.close();
  }
  await otherClientsOk();
});

h.test('an unknown opCode closes the connection or returns an error', async () => {
  const conn = await h.rawConnect(srv.port);
  const body = Buffer.alloc(16, 0);
  await conn.send(Buffer.concat([header(32, 1, 9999), body]));
  const r = await conn.readReply(3000).catch(() => null);
  if (r && typeof r.ok !== 'undefined') assert.equal(r.ok, 0);
  conn.close();
  await otherClientsOk();
});

h.test('OP_MSG with unknown required flag bits is rejected', async () => {
  const conn = await h.rawConnect(srv.port);
  const m = h.buildOpMsg(1, { ping: 1, $db: 'admin' });
  m.writeUInt32LE(1 << 5, 16);
  await conn.send(m);
  const r = await conn.readReply(3000).catch(() => null);
  if (r) assert.equal(r.ok, 0, 'must not succeed');
  conn.close();
  await otherClientsOk();
});

/*
 * Sections that frame but do not make a request: mongod's OpMsg::parse
 * codes in an error reply, and the connection carries on (found by
 * helper-67: it was closed).
 */
async function expectParseError(bytes, code, msg) {
  const conn = await h.rawConnect(srv.port);
  try {
    await conn.send(bytes);
    const r = await conn.readReply(3000);
    assert.ok(r, 'an error reply, not a closed connection');
    assert.equal(r.ok, 0);
    assert.equal(r.code, code, JSON.stringify(r));
    assert.equal(r.codeName, `Location${code}`);
    assert.match(r.errmsg, msg);
    const p = await conn.command('admin', { ping: 1 });
    assert.equal(p.ok, 1, 'the connection lives on');
  } finally {
    conn.close();
  }
  await otherClientsOk();
}

h.test('OP_MSG without a body section is 40587', async () => {
  const seq = Buffer.concat([Buffer.from([1]), Buffer.from([6, 0, 0, 0]), Buffer.from('x\0')]);
  await expectParseError(Buffer.concat([header(20 + seq.length, 1, 2013), Buffer.alloc(4), seq]), 40587,
    /^OP_MSG messages must have a body$/);
});

h.test('OP_MSG with two body sections is 40430', async () => {
  const body = Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' }));
  const payload = Buffer.concat([Buffer.alloc(4), Buffer.from([0]), body, Buffer.from([0]), body]);
  await expectParseError(Buffer.concat([header(16 + payload.length, 1, 2013), payload]), 40430,
    /^Multiple body sections in message$/);
});

h.test('OP_MSG with an unknown section kind is 40432', async () => {
  const body = Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' }));
  const payload = Buffer.concat([Buffer.alloc(4), Buffer.from([0]), body, Buffer.from([7, 1, 2, 3, 4])]);
  await expectParseError(Buffer.concat([header(16 + payload.length, 1, 2013), payload]), 40432,
    /^Unknown section kind 7$/);
});

h.test('OP_MSG with a repeated document sequence is 40431, and one named in the body too is 40433 (nothing is written)', async () => {
  const docs = { documents: [{ _id: 1 }] };
  const m = h.buildOpMsg(1, { insert: 'c', $db: 'wire_dup' }, docs);
  const bodyLen = m.readInt32LE(21);
  const seq = m.subarray(20 + 1 + bodyLen);
  const twice = Buffer.concat([m, seq]);
  twice.writeInt32LE(twice.length, 0);
  await expectParseError(twice, 40431, /^Duplicate document sequence: documents$/);
  const both = h.buildOpMsg(2, { insert: 'c', $db: 'wire_dup', documents: [{ _id: 'body' }] }, { documents: [{ _id: 'seq' }] });
  await expectParseError(both, 40433, /^Duplicate field between body and document sequence documents$/);
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command('wire_dup', { count: 'c' });
    assert.equal(r.n, 0, 'neither insert wrote');
  } finally {
    conn.close();
  }
});

h.test('every command\'s $db is checked first: empty, with / \\ . space or ", or 64 bytes and more is 73; $external passes (helper-67: ping on \'\' was ok)', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    for (const db of ['', 'a.b', 'a b', 'a/b', 'a\\b', 'a"b', 'x'.repeat(64)]) {
      const r = await conn.command(db, { ping: 1 });
      assert.equal(r.code, 73, `$db ${JSON.stringify(db)}: ${JSON.stringify(r)}`);
      assert.equal(r.errmsg, `Invalid database name: '${db}'`);
    }
    const ins = await conn.command('a.b', { insert: 'c', documents: [{ _id: 1 }] });
    assert.equal(ins.code, 73);
    assert.equal((await conn.command('x'.repeat(63), { ping: 1 })).ok, 1);
    const ext = await conn.command('$external', { ping: 1 });
    assert.equal(ext.ok, 1, JSON.stringify(ext));
    // saslStart's IDL: a missing mechanism is 40414.
    const sasl = await conn.command('admin', { saslStart: 1, payload: Buffer.from('n,,n=u,r=abc') });
    assert.equal(sasl.code, 40414, JSON.stringify(sasl));
    assert.equal(sasl.errmsg, "BSON field 'saslStart.mechanism' is missing but a required field");
  } finally {
    conn.close();
  }
});

h.test('a document sequence whose size overruns the message is rejected', async () => {
  const conn = await h.rawConnect(srv.port);
  const m = h.buildOpMsg(1, { insert: 'c', $db: 'wire_seq' }, { documents: [{ _id: 1 }] });
  // Section kind 1 starts right after the body; its int32 size follows the kind byte.
  const bodyLen = m.readInt32LE(21);
  const seqSizeOff = 21 + bodyLen + 1;
  m.writeInt32LE(100000, seqSizeOff);
  await conn.send(m);
  const r = await conn.readReply(3000).catch(() => null);
  if (r) assert.equal(r.ok, 0);
  conn.close();
  await otherClientsOk();
});

h.test('many connections opened and dropped abruptly leave the server healthy', async () => {
  const conns = [];
  for (let i = 0; i < 50; i++) conns.push(await h.rawConnect(srv.port));
  await Promise.all(conns.slice(0, 25).map((c) => c.send(h.buildOpMsg(1, { ping: 1, $db: 'admin' }))));
  for (const c of conns) c.sock.resetAndDestroy ? c.sock.resetAndDestroy() : c.close();
  await h.sleep(200);
  await otherClientsOk();
  const st = await srv.client.db('admin').command({ serverStatus: 1 });
  assert.ok(Number(st.connections.current) < 20, `connections.current=${st.connections.current}`);
});

h.test('a client that disconnects while its reply is large is handled', async () => {
  const db = srv.freshDb('bigreply');
  await db.collection('c').insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: i, pad: 'p'.repeat(10000) })));
  for (let i = 0; i < 5; i++) {
    const conn = await h.rawConnect(srv.port);
    await conn.send(h.buildOpMsg(1, { find: 'c', batchSize: 200, $db: db.databaseName }));
    conn.close();
  }
  await h.sleep(100);
  await otherClientsOk();
});

h.test('300 simultaneous connections are all served', async () => {
  const conns = await Promise.all(Array.from({ length: 300 }, () => h.rawConnect(srv.port)));
  try {
    const replies = await Promise.all(conns.map((c, i) => c.command('admin', { ping: 1, comment: i })));
    assert.equal(replies.filter((r) => r && r.ok === 1).length, 300);
    const st = await srv.client.db('admin').command({ serverStatus: 1 });
    assert.ok(Number(st.connections.current) >= 300, `connections.current=${st.connections.current}`);
  } finally {
    for (const c of conns) c.close();
  }
  await h.sleep(200);
  await otherClientsOk();
});

// Held connections (net.c): after a data command the worker keeps the socket
// for the next request. These send the next ones the awkward ways: split with
// pauses longer than the hold, pipelined, w:0 (no reply), then a hang-up.
h.test('on a held connection: a split request, two pipelined requests, a w:0 write and a hang-up are all handled in order', async () => {
  const dbName = srv.freshDb('held').databaseName;
  const conn = await h.rawConnect(srv.port);
  conn.sock.setNoDelay(true);
  let r = await conn.command(dbName, { insert: 'c', documents: [{ _id: 1 }] });
  assert.equal(r.n, 1);
  // The next request in pieces, with pauses beyond netConnectionHoldMicros (5 ms).
  const split = h.buildOpMsg(21, { insert: 'c', documents: [{ _id: 2, pad: 'x'.repeat(200) }], $db: dbName });
  for (let i = 0; i < split.length; i += 37) {
    await conn.send(split.subarray(i, i + 37));
    await h.sleep(i % 111 === 0 ? 7 : 0);
  }
  r = await conn.readReply();
  assert.equal(r.n, 1);
  // Two requests in one write: two replies, in order.
  await conn.send(Buffer.concat([
    h.buildOpMsg(22, { find: 'c', filter: { _id: 1 }, $db: dbName }),
    h.buildOpMsg(23, { find: 'c', filter: { _id: 2 }, projection: { pad: 0 }, $db: dbName }),
  ]));
  const a = await conn.readReply();
  const b = await conn.readReply();
  assert.deepEqual(a.cursor.firstBatch, [{ _id: 1 }]);
  assert.deepEqual(b.cursor.firstBatch, [{ _id: 2 }]);
  // A w:0 write (moreToCome: no reply), then a read that sees it.
  const m = h.buildOpMsg(24, { insert: 'c', documents: [{ _id: 3 }], writeConcern: { w: 0 }, $db: dbName });
  m.writeUInt32LE(2, 16);
  await conn.send(m);
  r = await conn.command(dbName, { count: 'c' });
  assert.equal(r.n, 3);
  conn.close();
  // The server carries on.
  const other = await h.rawConnect(srv.port);
  r = await other.command(dbName, { find: 'c', filter: {}, sort: { _id: 1 }, projection: { pad: 0 } });
  other.close();
  assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
});

h.test('serverStatus network counts bytes and requests; 8 connections each sending one request after another are served by workers holding them (heldRequests): no thread hand-off per request', async () => {
  // A hold long enough that this client's pace never ends one: every connection stays parked between its
  // requests (net.c, "Held connections"), whichever worker waits on the parked set reads its next one.
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'netConnectionHoldMicros=200000'] });
  await s2.start();
  const conns = [];
  let admin;
  try {
    for (let i = 0; i < 8; i++) conns.push(await h.rawConnect(s2.port));
    admin = await h.rawConnect(s2.port);
    assert.equal((await admin.command('t', { insert: 'c', documents: [{ _id: 1, v: 'x' }] })).n, 1);
    const network = async () => (await admin.command('admin', { serverStatus: 1 })).network;
    const r0 = admin.sock.bytesRead;
    const n0 = await network();
    const n0Reply = admin.sock.bytesRead - r0; // counted after n0 was taken
    for (const k of ['bytesIn', 'bytesOut', 'physicalBytesIn', 'physicalBytesOut', 'numRequests', 'heldRequests']) {
      assert.equal(typeof n0[k], 'number', k);
    }
    const PER = 200;
    await Promise.all(conns.map(async (c) => {
      for (let i = 0; i < PER; i++) {
        const r = await c.command('t', { find: 'c', filter: { _id: 1 } });
        assert.equal(r.ok, 1);
        assert.deepEqual(r.cursor.firstBatch, [{ _id: 1, v: 'x' }]);
      }
    }));
    const w1 = admin.sock.bytesWritten;
    const n1 = await network();
    const n1Request = admin.sock.bytesWritten - w1; // counted before n1 was taken
    const sent = conns.reduce((a, c) => a + c.sock.bytesWritten, 0);
    const got = conns.reduce((a, c) => a + c.sock.bytesRead, 0);
    assert.equal(n1.numRequests - n0.numRequests, 8 * PER + 1, 'the finds and one serverStatus');
    // Exactly the messages' bytes, as mongod counts them (and as the clients wrote and read them).
    assert.equal(n1.bytesIn - n0.bytesIn, sent + n1Request, 'bytesIn');
    assert.equal(n1.bytesOut - n0.bytesOut, got + n0Reply, 'bytesOut');
    assert.equal(n1.physicalBytesIn - n0.physicalBytesIn, n1.bytesIn - n0.bytesIn, 'no compression: physical = logical');
    // Each connection's first find comes through the loop; the connection is then parked and a waiting worker
    // reads the rest (a worker per connection used to wait, 4 per CPU at most: 6 of 8 went through the loop on 2
    // CPUs with 1 per CPU).
    const held = n1.heldRequests - n0.heldRequests;
    assert.ok(held >= 0.75 * 8 * PER && held <= 8 * (PER - 1), `${held} of ${8 * PER} finds held`);
  } finally {
    for (const c of conns) c.close();
    if (admin) admin.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('serverStatus network.numRequests counts the messages clients send: a streamed (exhaust) hello is one request however many replies it streams', async () => {
  const s2 = new h.MayflyServer({});
  await s2.start();
  const a = await h.rawConnect(s2.port);
  const b = await h.rawConnect(s2.port);
  try {
    const tv = (await a.command('admin', { hello: 1 })).topologyVersion;
    const { Long } = require('mongodb');
    const n0 = (await b.command('admin', { serverStatus: 1 })).network;
    const msg = h.buildOpMsg(77, { hello: 1, topologyVersion: { processId: tv.processId, counter: Long.fromValue(tv.counter) },
      maxAwaitTimeMS: Long.fromNumber(50), $db: 'admin' });
    msg.writeUInt32LE(1 << 16, 16); // exhaustAllowed
    await a.send(msg);
    for (let i = 0; i < 6; i++) {
      const r = await a.readReply(5000);
      assert.equal(r.ok, 1);
      assert.equal(a.lastFlags & 2, 2, 'moreToCome: the server streams the next reply itself');
    }
    const n1 = (await b.command('admin', { serverStatus: 1 })).network;
    // The streamed hello and the second serverStatus (6 replies streamed from one request; counted 7 before).
    assert.equal(n1.numRequests - n0.numRequests, 2);
    // b sent two serverStatus messages of one size; the second is counted.
    assert.equal(n1.bytesIn - n0.bytesIn, msg.length + b.sock.bytesWritten / 2);
  } finally {
    a.close();
    b.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('a client with a few milliseconds between its requests keeps its worker: requests 2 ms apart are held (netConnectionHoldMicros 5 ms; at 1 ms every one went through the I/O thread and a worker wake-up)', async () => {
  const dbName = srv.freshDb('paced').databaseName;
  const conn = await h.rawConnect(srv.port);
  const admin = await h.rawConnect(srv.port);
  try {
    conn.sock.setNoDelay(true);
    assert.equal((await conn.command(dbName, { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    const held0 = (await admin.command('admin', { serverStatus: 1 })).network.heldRequests;
    const N = 50;
    for (let i = 0; i < N; i++) {
      await h.sleep(2);
      const r = await conn.command(dbName, { find: 'c', filter: { _id: 1 } });
      assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }]);
    }
    const held = (await admin.command('admin', { serverStatus: 1 })).network.heldRequests - held0;
    // A timer can fire late on a busy machine; most of them still come within the hold.
    assert.ok(held >= N / 2, `${held} of ${N} paced finds held`);
  } finally {
    conn.close();
    admin.close();
  }
});

h.test('held connections never take the last worker: with --maxWorkers 2 and a long hold, a third connection is answered at once while two connections wait held', async () => {
  const s2 = new h.MayflyServer({ args: ['--workers', '1', '--maxWorkers', '2', '--setParameter', 'netConnectionHoldMicros=800000'] });
  await s2.start();
  const conns = [];
  try {
    for (let i = 0; i < 3; i++) conns.push(await h.rawConnect(s2.port));
    assert.equal((await conns[0].command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    // Two connections each run a find; their workers may then wait up to 800 ms for their next requests.
    for (const c of conns.slice(0, 2)) assert.equal((await c.command('t', { find: 'c', filter: { _id: 1 } })).ok, 1);
    const t0 = Date.now();
    const r = await conns[2].command('t', { find: 'c', filter: { _id: 1 } });
    const ms = Date.now() - t0;
    assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }]);
    assert.ok(ms < 400, `the third connection waited ${ms} ms for a worker`);
  } finally {
    for (const c of conns) c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('a request queued at the worker cap calls back a worker waiting on a held connection: with --maxWorkers 2, one worker holding an idle connection (hold 800 ms) and the other blocked 1.5 s, a third connection\'s find is answered at once, not after the hold', async () => {
  const s2 = new h.MayflyServer({ args: ['--workers', '1', '--maxWorkers', '2', '--setParameter', 'netConnectionHoldMicros=800000',
    '--setParameter', 'enableTestCommands=1'] });
  await s2.start();
  const [held, blocked, third] = [await h.rawConnect(s2.port), await h.rawConnect(s2.port), await h.rawConnect(s2.port)];
  try {
    assert.equal((await held.command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    assert.equal((await held.command('admin', {
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['count'], blockConnection: true, blockTimeMS: 1500 },
    })).ok, 1);
    // The one worker answers this find and then waits up to 800 ms for the connection's next request.
    assert.equal((await held.command('t', { find: 'c', filter: { _id: 1 } })).ok, 1);
    // The pool's second and last worker runs a count blocked for 1.5 s.
    const t0 = Date.now();
    await blocked.send(h.buildOpMsg(blocked.reqId++, { count: 'c', $db: 't' }));
    await h.sleep(100);
    // No worker is free and none can start: the holder gives its connection back and takes this one.
    const t1 = Date.now();
    const r = await third.command('t', { find: 'c', filter: { _id: 1 } });
    const ms = Date.now() - t1;
    assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }]);
    assert.ok(ms < 400, `the queued find waited ${ms} ms (the hold is 800 ms, the block 1500 ms)`);
    // The held connection goes on through the I/O thread, and the blocked count still ends after its block.
    assert.deepEqual((await held.command('t', { find: 'c', filter: { _id: 1 } })).cursor.firstBatch, [{ _id: 1 }]);
    const c = await blocked.readReply();
    assert.equal(c.n, 1);
    assert.ok(Date.now() - t0 >= 1400, `the count took ${Date.now() - t0} ms`);
  } finally {
    for (const c of [held, blocked, third]) c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('with --maxWorkers 1 nothing is held (no worker could wait on parked connections): requests go through the I/O thread, heldRequests stays 0, maxWaiters 0', async () => {
  const s2 = new h.MayflyServer({ args: ['--workers', '1', '--maxWorkers', '1'] });
  await s2.start();
  const c = await h.rawConnect(s2.port);
  try {
    assert.equal((await c.command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    const n0 = (await c.command('admin', { serverStatus: 1 })).network;
    assert.equal(n0.workers.held.maxWaiters, 0);
    for (let i = 0; i < 50; i++) assert.deepEqual((await c.command('t', { find: 'c', filter: { _id: 1 } })).cursor.firstBatch, [{ _id: 1 }]);
    const n1 = (await c.command('admin', { serverStatus: 1 })).network;
    assert.equal(n1.heldRequests - n0.heldRequests, 0);
    assert.equal(n1.workers.held.parked, 0);
    assert.equal(Number(n1.workers.held.rescued), 0, 'no request waited for the watchdog');
  } finally {
    c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('parked connections never wait behind slow requests: with every worker that waits on the parked set blocked 1.5 s in a count, a parked connection\'s next find is answered at once (the watchdog gives it back to the I/O thread)', async () => {
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'netConnectionHoldMicros=800000', '--setParameter', 'enableTestCommands=1'] });
  await s2.start();
  const conns = [];
  try {
    const admin = await h.rawConnect(s2.port);
    conns.push(admin);
    // One worker per CPU granted waits on the parked set: block as many counts as that.
    const k = (await admin.command('admin', { serverStatus: 1 })).network.workers.cpus;
    assert.ok(k >= 1, `${k} CPUs granted`);
    assert.equal((await admin.command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    const slow = [];
    for (let i = 0; i < k; i++) slow.push(await h.rawConnect(s2.port));
    const parked = await h.rawConnect(s2.port);
    conns.push(...slow, parked);
    assert.equal((await admin.command('admin', {
      configureFailPoint: 'failCommand',
      mode: { times: k },
      data: { failCommands: ['count'], blockConnection: true, blockTimeMS: 1500 },
    })).ok, 1);
    // Each connection runs a find, after which it is parked (the hold is 800 ms).
    // Three each: a connection whose last request ran long would call one more waiter (waitersCalled) to the set.
    for (let i = 0; i < 3; i++) {
      for (const c of [...slow, parked]) assert.deepEqual((await c.command('t', { find: 'c', filter: { _id: 1 } })).cursor.firstBatch, [{ _id: 1 }]);
    }
    // Parked, with waiters there look after look: the watchdog rests until the last waiter leaves with others parked.
    await h.sleep(100);
    const t0 = Date.now();
    for (const c of slow) await c.send(h.buildOpMsg(c.reqId++, { count: 'c', $db: 't' }));
    await h.sleep(100);
    const t1 = Date.now();
    const r = await parked.command('t', { find: 'c', filter: { _id: 1 } });
    const ms = Date.now() - t1;
    assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }]);
    assert.ok(ms < 400, `the parked connection's find waited ${ms} ms (the counts are blocked 1,500 ms)`);
    for (const c of slow) assert.equal((await c.readReply()).n, 1);
    assert.ok(Date.now() - t0 >= 1400, `the counts took ${Date.now() - t0} ms`);
    // Every connection carries on.
    for (const c of conns) assert.deepEqual((await c.command('t', { find: 'c', filter: { _id: 1 } })).cursor.firstBatch, [{ _id: 1 }]);
  } finally {
    for (const c of conns) c.close();
    await s2.stop();
    s2.cleanup();
  }
});

/* The voluntary context switches of process pid's thread named comm, from /proc; -1 when there is none. */
function threadSwitches(pid, comm) {
  const fs = require('node:fs');
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      if (fs.readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim() !== comm) continue;
      return Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8'))[1]);
    } catch (_) { /* the thread ended meanwhile */ }
  }
  return -1;
}

h.test('one client making request after request keeps its connection held, every request of it, and the watchdog of the parked set rests instead of waking every 2 ms (it wakes when the last waiter leaves others parked)', async () => {
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'netConnectionHoldMicros=200000'] });
  await s2.start();
  const c = await h.rawConnect(s2.port);
  try {
    assert.equal((await c.command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    const find = async () => assert.deepEqual((await c.command('t', { find: 'c', filter: { _id: 1 } })).cursor.firstBatch, [{ _id: 1 }]);
    const t0 = Date.now();
    while (Date.now() - t0 < 300) await find(); // the watchdog starts and sees a waiter look after look
    const before = threadSwitches(s2.pid, 'mf-holdwatch');
    assert.ok(before >= 0, 'the watchdog thread is there');
    const net0 = (await c.command('admin', { serverStatus: 1 })).network;
    let n = 0;
    const t1 = Date.now();
    while (Date.now() - t1 < 1000) { await find(); n++; }
    const ms = Date.now() - t1;
    const woke = threadSwitches(s2.pid, 'mf-holdwatch') - before;
    const net1 = (await c.command('admin', { serverStatus: 1 })).network;
    // Every find but the first after serverStatus (not a data command: it went through the I/O thread) was held:
    // none goes back to the loop every 256th, as when requests on a connection were counted across its parkings.
    assert.ok(net1.heldRequests - net0.heldRequests >= n - 2, `${net1.heldRequests - net0.heldRequests} of ${n} finds held`);
    // Ticking, it would have woken ms / 2 times (about 500); resting, a handful.
    assert.ok(woke < ms / 20, `the watchdog woke ${woke} times in ${ms} ms of ${n} finds`);
    assert.equal(net1.workers.held.rescued, 0, 'nothing needed giving back');
  } finally {
    c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('40 connections served from one parked set each get their own replies, in order, single or pipelined, and most requests are read by the worker that waits (heldRequests)', async () => {
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'netConnectionHoldMicros=200000'] });
  await s2.start();
  const conns = [];
  try {
    const admin = await h.rawConnect(s2.port);
    const N = 40;
    const docs = [];
    for (let i = 0; i < N; i++) docs.push({ _id: i, v: `conn ${i}` });
    assert.equal((await admin.command('t', { insert: 'c', documents: docs })).n, N);
    for (let i = 0; i < N; i++) conns.push(await h.rawConnect(s2.port));
    const held0 = (await admin.command('admin', { serverStatus: 1 })).network.heldRequests;
    const PER = 60;
    let sent = 0;
    await Promise.all(conns.map(async (c, i) => {
      for (let j = 0; j < PER; j++) {
        if (j % 10 === 9) {
          // Two requests in one write: both answered, in order.
          await c.send(Buffer.concat([
            h.buildOpMsg(c.reqId++, { find: 'c', filter: { _id: i }, $db: 't' }),
            h.buildOpMsg(c.reqId++, { count: 'c', query: { _id: { $lte: i } }, $db: 't' }),
          ]));
          assert.deepEqual((await c.readReply()).cursor.firstBatch, [{ _id: i, v: `conn ${i}` }]);
          assert.equal((await c.readReply()).n, i + 1);
          sent += 2;
        } else {
          const r = await c.command('t', { find: 'c', filter: { _id: i } });
          assert.deepEqual(r.cursor.firstBatch, [{ _id: i, v: `conn ${i}` }]);
          sent++;
        }
      }
    }));
    const net = (await admin.command('admin', { serverStatus: 1 })).network;
    const held = net.heldRequests - held0;
    assert.ok(held >= sent / 2 && held <= sent, `${held} of ${sent} requests held`);
    // The parked set as serverStatus shows it: the connections wait there (200 ms) after their last request,
    // one worker per CPU waits on it at most.
    const hs = net.workers.held;
    assert.equal(hs.maxWaiters, net.workers.cpus);
    assert.ok(hs.parked >= 1 && hs.parked <= N, `${hs.parked} parked`);
    assert.ok(hs.waiters >= 0 && hs.waiters <= hs.maxWaiters, `${hs.waiters} waiters`);
    for (const k of ['rescued', 'waitersCalled']) assert.ok(Number(hs[k]) >= 0, k);
    admin.close();
  } finally {
    for (const c of conns) c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('8 connections writing with j: true and 2 reading, all parked between requests: every write is acknowledged, counted and found (a slow connection\'s next request goes from the last waiter to the pool)', async () => {
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'netConnectionHoldMicros=200000'] });
  await s2.start();
  const conns = [];
  try {
    for (let i = 0; i < 10; i++) conns.push(await h.rawConnect(s2.port));
    const PER = 40;
    await Promise.all(conns.map(async (c, i) => {
      for (let j = 0; j < PER; j++) {
        if (i < 8) {
          const r = await c.command('t', { insert: 'j', documents: [{ _id: i * 1000 + j }], writeConcern: { j: true } });
          assert.equal(r.n, 1);
        } else {
          const r = await c.command('t', { count: 'j' });
          assert.equal(r.ok, 1);
        }
      }
    }));
    const r = await conns[0].command('t', { count: 'j' });
    assert.equal(r.n, 8 * PER);
    for (let i = 0; i < 8; i++) {
      const f = await conns[9].command('t', { find: 'j', filter: { _id: { $gte: i * 1000, $lt: i * 1000 + 1000 } } });
      assert.equal(f.cursor.firstBatch.length, PER, `connection ${i}'s writes`);
    }
  } finally {
    for (const c of conns) c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('past the data workers\' soft cap a quick command still never waits behind slow ones: with more commands blocked 2 s than the soft cap (8 workers per usable CPU, at least 16), another connection\'s find is answered at once', async () => {
  const s2 = new h.MayflyServer({ args: ['--setParameter', 'enableTestCommands=1', '--maxWorkers', '1024'] });
  await s2.start();
  const conns = [];
  try {
    // The soft cap follows the CPUs the server was granted (affinity, cgroup quota): read it from the server.
    const first = await h.rawConnect(s2.port);
    conns.push(first);
    const w0 = (await first.command('admin', { serverStatus: 1 })).network.workers;
    const cpus = w0.cpus;
    assert.ok(cpus >= 1 && cpus <= require('node:os').cpus().length, `${cpus} CPUs granted`);
    assert.equal(w0.data.softCap, Math.max(16, 8 * cpus));
    const N = w0.data.softCap + 4;
    for (let i = 1; i < N + 1; i++) conns.push(await h.rawConnect(s2.port));
    const quick = conns[N];
    assert.equal((await quick.command('t', { insert: 'c', documents: [{ _id: 1 }] })).n, 1);
    assert.equal((await quick.command('admin', {
      configureFailPoint: 'failCommand',
      mode: { times: N },
      data: { failCommands: ['count'], blockConnection: true, blockTimeMS: 2000 },
    })).ok, 1);
    const t0 = Date.now();
    for (let i = 0; i < N; i++) await conns[i].send(h.buildOpMsg(conns[i].reqId++, { count: 'c', $db: 't' }));
    await h.sleep(300);
    // Every worker the soft cap starts at once is blocked; the find waits only the pool's stall (2 ms) for another.
    const t1 = Date.now();
    const r = await quick.command('t', { find: 'c', filter: { _id: 1 } });
    const ms = Date.now() - t1;
    assert.deepEqual(r.cursor.firstBatch, [{ _id: 1 }]);
    assert.ok(ms < 1000, `the find waited ${ms} ms behind ${N} blocked counts`);
    // serverStatus (the fast lane, so it answers now) shows the data pool past its soft cap, grown for the stuck ones.
    const w = (await quick.command('admin', { serverStatus: 1 })).network.workers;
    assert.equal(w.cpus, cpus);
    assert.equal(w.data.softCap, w0.data.softCap);
    assert.equal(w.data.maxWorkers, 1024);
    assert.ok(w.data.threads > w.data.softCap, `${w.data.threads} data threads with ${N} counts blocked`);
    assert.ok(w.data.grown > 0 && w.data.peak >= w.data.threads, JSON.stringify(w.data));
    assert.equal(w.fast.softCap, w.fast.maxWorkers); // the fast lane: a thread per job up to its cap
    for (let i = 0; i < N; i++) assert.equal((await conns[i].readReply()).n, 1);
    assert.ok(Date.now() - t0 >= 1900, `the counts were blocked ${Date.now() - t0} ms`);
    // Once the counts are done, the threads started past the soft cap go (none was started for a second).
    let after = w.data;
    for (let i = 0; i < 30 && after.shrunk === 0; i++) {
      await h.sleep(100);
      after = (await quick.command('admin', { serverStatus: 1 })).network.workers.data;
    }
    assert.ok(after.shrunk > 0 && after.threads < w.data.threads, JSON.stringify(after));
  } finally {
    for (const c of conns) c.close();
    await s2.stop();
    s2.cleanup();
  }
});

h.test('client metadata is checked as mongod\'s ClientMetadata, and only the first hello of a connection may send it (186)', async () => {
  const good = { driver: { name: 'raw', version: '1.0' }, os: { type: 'Linux' }, application: { name: 'wire-test' } };
  const first = async (client) => {
    const c = await h.rawConnect(srv.port);
    const r = await c.command('admin', { hello: 1, client });
    return { c, r };
  };
  const cases = [
    [5, 14, 'TypeMismatch', /must be a document/],
    [{ os: { type: 'Linux' } }, 183, 'ClientMetadataMissingField', /Missing required sub-document 'driver'/],
    [{ driver: { name: 'raw', version: '1' } }, 183, 'ClientMetadataMissingField', /Missing required sub-document 'os'/],
    [{ driver: { name: 'raw' }, os: { type: 'x' } }, 183, 'ClientMetadataMissingField', /'driver.version'/],
    [{ driver: { name: 'raw', version: 1 }, os: { type: 'x' } }, 14, 'TypeMismatch', /'driver.version' field must be a string/],
    [{ driver: { name: 'raw', version: '1' }, os: { type: 'x' }, application: { name: 'a'.repeat(129) } }, 184,
      'ClientMetadataAppNameTooLarge', /128 bytes/],
    [{ ...good, padding: 'p'.repeat(1100) }, 185, 'ClientMetadataDocumentTooLarge', /1024 bytes/],
  ];
  for (const [client, code, codeName, msg] of cases) {
    const { c, r } = await first(client);
    assert.equal(r.ok, 0, JSON.stringify(client).slice(0, 80));
    assert.equal(r.code, code);
    assert.equal(r.codeName, codeName);
    assert.match(r.errmsg, msg);
    // A refused first hello does not finalize the handshake: a good one may follow.
    const again = await c.command('admin', { hello: 1, client: good });
    assert.equal(again.ok, 1);
    c.close();
  }
  const { c, r } = await first(good);
  assert.equal(r.ok, 1);
  const second = await c.command('admin', { hello: 1, client: good });
  assert.equal(second.code, 186);
  assert.equal(second.codeName, 'ClientMetadataCannotBeMutated');
  assert.equal(second.errmsg, 'The client metadata document may only be sent in the first hello');
  assert.equal((await c.command('admin', { hello: 1 })).ok, 1, 'a later hello without metadata is fine');
  const ops = await c.command('admin', { currentOp: 1, $ownOps: true });
  const self = ops.inprog.find((o) => o.command && o.command.currentOp);
  assert.equal(self.appName, 'wire-test', 'the first hello\'s application name stays');
  c.close();
  // A first hello without metadata finalizes too.
  const c2 = await h.rawConnect(srv.port);
  assert.equal((await c2.command('admin', { isMaster: 1 })).ok, 1);
  assert.equal((await c2.command('admin', { hello: 1, client: good })).code, 186);
  c2.close();
  await otherClientsOk();
});
