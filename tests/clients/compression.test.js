'use strict';
// Wire-protocol compression (OP_COMPRESSED, src/net/wire_compress.c): hello's
// `compression` negotiation, compressed requests and replies through the Node
// driver (zlib: the driver's snappy and zstd need optional packages this
// repository does not install; test_pymongo_compression.py drives all three
// through pymongo), hand-made frames for zstd (the zstd CLI) and snappy, the
// envelopes mongod refuses (the connection closes, the server carries on),
// serverStatus network.compression, --networkMessageCompressors and
// net.compression.compressors.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const h = require('./harness');

const srv = h.useServer();

const OP_COMPRESSED = 2012;
const ID = { noop: 0, snappy: 1, zlib: 2, zstd: 3 };

function haveZstdCli() {
  try { execFileSync('zstd', ['--version'], { stdio: 'ignore' }); return true; } catch (_) { return false; }
}
const zstd = {
  compress: (b) => execFileSync('zstd', ['-q', '-c', '-3'], { input: b }),
  decompress: (b) => execFileSync('zstd', ['-q', '-d', '-c'], { input: b }),
};

/*
 * Snappy's raw format written by hand for the test's requests: the length as a
 * varint, then the data as literals (tag byte (len-1)<<2 for up to 60 bytes,
 * 60<<2 with a one-byte length up to 256). A valid stream any decoder reads;
 * no snappy codec is in this repository (the server uses libsnappy).
 */
function snappyLiteral(data) {
  const out = [];
  let n = data.length;
  do { let b = n & 0x7f; n >>>= 7; if (n) b |= 0x80; out.push(b); } while (n);
  const parts = [Buffer.from(out)];
  for (let off = 0; off < data.length; off += 256) {
    const chunk = data.subarray(off, off + 256);
    parts.push(chunk.length <= 60 ? Buffer.from([(chunk.length - 1) << 2]) : Buffer.from([60 << 2, chunk.length - 1]), chunk);
  }
  return Buffer.concat(parts);
}

/* Wraps the whole message msg in an OP_COMPRESSED envelope; body/usize/id override what goes in it. */
function envelope(msg, { id = ID.zlib, body, usize } = {}) {
  const inner = msg.subarray(16);
  let data = body;
  if (data === undefined) {
    if (id === ID.zlib) data = zlib.deflateSync(inner);
    else if (id === ID.zstd) data = zstd.compress(inner);
    else if (id === ID.snappy) data = snappyLiteral(inner);
    else data = inner;
  }
  const hdr = Buffer.alloc(25);
  hdr.writeInt32LE(25 + data.length, 0);
  hdr.writeInt32LE(msg.readInt32LE(4), 4);
  hdr.writeInt32LE(0, 8);
  hdr.writeInt32LE(OP_COMPRESSED, 12);
  hdr.writeInt32LE(msg.readInt32LE(12), 16);
  hdr.writeInt32LE(usize === undefined ? inner.length : usize, 20);
  hdr.writeUInt8(id, 24);
  return Buffer.concat([hdr, data]);
}

/* Reads the next whole message off a raw connection, undecoded (null: closed). */
async function readRaw(conn, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (conn.buf.length >= 4 && conn.buf.length >= conn.buf.readInt32LE(0)) {
      const len = conn.buf.readInt32LE(0);
      const m = conn.buf.subarray(0, len);
      conn.buf = conn.buf.subarray(len);
      return m;
    }
    if (conn.closed) return null;
    if (Date.now() > deadline) throw new Error('timed out waiting for a reply');
    await conn.waitEvent(deadline - Date.now());
  }
}

/* Unwraps a compressed reply (zlib or zstd) into the decoded OP_MSG body, checking its envelope. */
function openReply(raw, wantId) {
  assert.equal(raw.readInt32LE(12), OP_COMPRESSED, 'the reply is OP_COMPRESSED');
  assert.equal(raw.readInt32LE(16), 2013, 'it wraps an OP_MSG');
  assert.equal(raw[24], wantId, 'with the request\'s compressor');
  const data = raw.subarray(25);
  const inner = wantId === ID.zlib ? zlib.inflateSync(data) : zstd.decompress(data);
  assert.equal(inner.length, raw.readInt32LE(20), 'uncompressedSize is the body\'s size');
  const whole = Buffer.concat([Buffer.alloc(16), inner]);
  whole.writeInt32LE(whole.length, 0);
  whole.writeInt32LE(2013, 12);
  return h.decodeReply(whole);
}

/* A raw connection that negotiated list (the hello reply is returned too). */
async function negotiated(list, port = srv.port) {
  const conn = await h.rawConnect(port);
  const hello = await conn.command('admin', { hello: 1, compression: list });
  return { conn, hello };
}

async function compressedCommand(conn, id, cmd) {
  await conn.send(envelope(h.buildOpMsg(conn.reqId++, cmd), { id }));
  return readRaw(conn);
}

async function stats(client = srv.client) {
  return (await client.db('admin').command({ serverStatus: 1 })).network;
}

async function otherClientsOk() {
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1, 'driver client still served');
  const { conn } = await negotiated(['zlib']);
  const r = openReply(await compressedCommand(conn, ID.zlib, { ping: 1, $db: 'admin' }), ID.zlib);
  conn.close();
  assert.equal(r.ok, 1, 'a new compressed connection is served');
}

async function expectClosed(conn, bytes) {
  await conn.send(bytes);
  const closed = await conn.waitClosed(5000);
  conn.close();
  assert.ok(closed, 'server closed the connection');
}

h.test('hello answers the compressors offered by both sides, in the client\'s order; later hellos repeat or renegotiate', async () => {
  const { conn, hello } = await negotiated(['zstd', 'lz4', 'zlib', 'snappy', 'zlib']);
  assert.deepEqual(hello.compression, ['zstd', 'zlib', 'snappy']);
  const again = await conn.command('admin', { hello: 1 });
  assert.deepEqual(again.compression, ['zstd', 'zlib', 'snappy'], 'a hello without a list repeats the negotiation');
  const im = await conn.command('admin', { isMaster: 1, compression: ['zlib'] });
  assert.deepEqual(im.compression, ['zlib'], 'isMaster renegotiates');
  const none = await conn.command('admin', { hello: 1, compression: [] });
  assert.equal(none.compression, undefined, 'an empty list negotiates nothing');
  assert.equal((await conn.command('admin', { hello: 1 })).compression, undefined);
  const bad = await conn.command('admin', { hello: 1, compression: 'zlib' });
  assert.equal(bad.code, 14);
  assert.match(bad.errmsg, /BSON field 'hello.compression' is the wrong type 'string', expected type 'array'/);
  const bad2 = await conn.command('admin', { hello: 1, compression: ['zlib', 3] });
  assert.equal(bad2.code, 14);
  assert.match(bad2.errmsg, /'hello.compression.1' is the wrong type 'int', expected type 'string'/);
  const plain = await h.rawConnect(srv.port);
  assert.equal((await plain.command('admin', { hello: 1 })).compression, undefined, 'no list, nothing negotiated');
  plain.close();
  conn.close();
});

h.test('the Node driver with compressors [zlib]: negotiated, counted, large documents and cursors round-trip', async () => {
  const before = await stats();
  assert.deepEqual(Object.keys(before.compression), ['snappy', 'zstd', 'zlib'], 'the default list, in its order');
  const client = await srv.newClient({ compressors: ['zlib'] });
  const hello = await client.db('admin').command({ hello: 1 });
  assert.deepEqual(hello.compression, ['zlib'], 'the connection negotiated zlib');
  const coll = client.db('comp_zlib').collection('c');
  const big = (i) => ({ _id: i, text: `${i}:`.repeat(1 << 20), noise: crypto.randomBytes(200000).toString('base64') });
  await coll.insertMany([big(1), big(2), big(3)]); // ~6.5 MB, decompressed on a worker
  const small = [];
  for (let i = 10; i < 310; i++) small.push({ _id: i, v: 'x'.repeat(i) });
  await coll.insertMany(small);
  const got = await coll.find({ _id: { $lt: 10 } }).sort({ _id: 1 }).toArray();
  assert.equal(got.length, 3);
  for (const d of got) {
    const want = big(d._id);
    assert.equal(d.text, want.text, `document ${d._id}'s text came back whole`);
    assert.equal(d.noise.length, want.noise.length);
  }
  const seen = [];
  for await (const d of coll.find({ _id: { $gte: 10 } }).sort({ _id: 1 }).batchSize(7)) seen.push(d);
  assert.equal(seen.length, 300, 'a cursor of 43 getMores');
  assert.deepEqual(seen[299], { _id: 309, v: 'x'.repeat(309) });
  const after = await stats();
  const z0 = before.compression.zlib, z1 = after.compression.zlib;
  assert.ok(z1.decompressor.bytesOut - z0.decompressor.bytesOut > 6e6, 'requests decompressed');
  assert.ok(z1.decompressor.bytesIn - z0.decompressor.bytesIn < z1.decompressor.bytesOut - z0.decompressor.bytesOut);
  assert.ok(z1.compressor.bytesIn - z0.compressor.bytesIn > 6e6, 'replies compressed');
  assert.ok(z1.compressor.bytesOut - z0.compressor.bytesOut < z1.compressor.bytesIn - z0.compressor.bytesIn);
  assert.deepEqual(after.compression.zstd, before.compression.zstd, 'zstd untouched');
  assert.ok(after.bytesIn - before.bytesIn > after.physicalBytesIn - before.physicalBytesIn,
    'bytesIn counts messages uncompressed, physicalBytesIn as sent');
  await client.close();
});

h.test('hand-made zlib, zstd and snappy frames: each answered compressed the same way (snappy\'s reply by its envelope)', async () => {
  const { conn } = await negotiated(['zlib', 'zstd', 'snappy']);
  const zr = openReply(await compressedCommand(conn, ID.zlib, { ping: 1, $db: 'admin' }), ID.zlib);
  assert.equal(zr.ok, 1);
  const insert = { insert: 'c', documents: [{ _id: 1, s: 'y'.repeat(50000) }], $db: 'comp_frames' };
  const ir = openReply(await compressedCommand(conn, ID.zlib, insert), ID.zlib); // 50 KB: on a worker
  assert.equal(ir.n, 1);
  if (haveZstdCli()) {
    const fr = openReply(await compressedCommand(conn, ID.zstd, { find: 'c', filter: {}, $db: 'comp_frames' }), ID.zstd);
    assert.equal(fr.cursor.firstBatch[0].s.length, 50000);
  } else {
    process.stderr.write('compression.test.js: no zstd CLI, zstd frames left to test_pymongo_compression.py\n');
  }
  const sr = await compressedCommand(conn, ID.snappy, { count: 'c', $db: 'comp_frames' });
  assert.equal(sr.readInt32LE(12), OP_COMPRESSED);
  assert.equal(sr[24], ID.snappy, 'a snappy request gets a snappy reply');
  assert.ok(sr.readInt32LE(20) > 0);
  const plain = await conn.command('admin', { ping: 1 });
  assert.equal(plain.ok, 1, 'an uncompressed request on the same connection gets an uncompressed reply');
  assert.equal(conn.lastOpCode, 2013);
  conn.close();
});

h.test('envelopes mongod refuses close the connection without a reply; the server carries on', async () => {
  const ping = (id) => h.buildOpMsg(id, { ping: 1, $db: 'admin' });
  const cases = [
    ['a compressor not negotiated on this connection', ['zlib'], envelope(ping(1), { id: ID.snappy })],
    ['before any negotiation', null, envelope(ping(2), { id: ID.zlib })],
    ['noop, not configured', ['zlib'], envelope(ping(3), { id: ID.noop })],
    ['an unknown compressor id', ['zlib'], envelope(ping(4), { id: 9, body: Buffer.alloc(30) })],
    ['a negative uncompressedSize', ['zlib'], envelope(ping(5), { usize: -1 })],
    ['an uncompressedSize over maxMessageSizeBytes', ['zlib'], envelope(ping(6), { usize: 48000000 - 15 })],
    ['an uncompressedSize larger than the data', ['zlib'], envelope(ping(7), { usize: 200 })],
    ['an uncompressedSize smaller than the data', ['zlib'], envelope(ping(8), { usize: 10 })],
    ['zlib past deflate\'s largest ratio', ['zlib'], envelope(ping(9), { usize: 40000000 })],
    ['corrupt zlib data', ['zlib'], envelope(ping(10), { body: crypto.randomBytes(64) })],
    ['corrupt zlib data of a large message (on a worker)', ['zlib'], envelope(ping(11), { body: crypto.randomBytes(64), usize: 60000 })],
    ['a snappy length preamble that disagrees', ['snappy'], envelope(ping(12), { id: ID.snappy, usize: 30 })],
    ['corrupt snappy data', ['snappy'], envelope(ping(13), { id: ID.snappy, body: Buffer.from([0x20, 0xff, 0xff, 0xff]) })],
    ['an envelope too short for its header', ['zlib'], (() => { const b = Buffer.alloc(20); b.writeInt32LE(20, 0); b.writeInt32LE(OP_COMPRESSED, 12); return b; })()],
    ['an envelope inside an envelope', ['zlib'], envelope(envelope(ping(14)), {})],
  ];
  if (haveZstdCli()) cases.push(['corrupt zstd data', ['zstd'], envelope(ping(15), { id: ID.zstd, body: Buffer.concat([zstd.compress(Buffer.alloc(100)).subarray(0, 12), crypto.randomBytes(20)]), usize: 100 })]);
  for (const [what, list, bytes] of cases) {
    const conn = list ? (await negotiated(list)).conn : await h.rawConnect(srv.port);
    await conn.send(bytes);
    const reply = await readRaw(conn, 5000);
    conn.close();
    assert.equal(reply, null, `${what}: closed without a reply`);
  }
  assert.match(srv.server.stderrTail(400), /Error receiving request from client: BadValue: Compressor was not negotiated for this connection/);
  assert.match(srv.server.stderrTail(400), /InternalError: Compression algorithm specified in message is not available/);
  await otherClientsOk();
});

h.test('--networkMessageCompressors disabled negotiates nothing and refuses compressed requests', async () => {
  const s = new h.MayflyServer({ args: ['--networkMessageCompressors', 'disabled'] });
  await s.start();
  try {
    const { conn, hello } = await negotiated(['zstd', 'zlib', 'snappy'], s.port);
    assert.equal(hello.compression, undefined);
    const st = await conn.command('admin', { serverStatus: 1 });
    assert.equal(st.network.compression, undefined, 'no network.compression section');
    const opts = await conn.command('admin', { getCmdLineOpts: 1 });
    assert.equal(opts.parsed.net.compression.compressors, 'disabled');
    await conn.send(envelope(h.buildOpMsg(9, { ping: 1, $db: 'admin' }), { id: ID.zlib }));
    assert.equal(await readRaw(conn, 5000), null, 'closed');
    conn.close();
    const { conn: c2 } = await negotiated([], s.port);
    assert.equal((await c2.command('admin', { ping: 1 })).ok, 1, 'the server carries on');
    c2.close();
  } finally {
    await s.stop();
    s.cleanup();
  }
});

h.test('net.compression.compressors in mongod.conf and a bad list', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-comp-'));
  const conf = path.join(dir, 'mongod.conf');
  fs.writeFileSync(conf, 'net:\n  compression:\n    compressors: zlib, noop\n');
  const s = new h.MayflyServer({ args: ['--config', conf] });
  await s.start();
  try {
    const { conn, hello } = await negotiated(['snappy', 'noop', 'zstd', 'zlib'], s.port);
    assert.deepEqual(hello.compression, ['noop', 'zlib'], 'only the configured ones, in the client\'s order');
    const st = await conn.command('admin', { serverStatus: 1 });
    assert.deepEqual(Object.keys(st.network.compression), ['zlib', 'noop'], 'serverStatus lists them in the configured order');
    await conn.send(envelope(h.buildOpMsg(conn.reqId++, { ping: 1, $db: 'admin' }), { id: ID.noop }));
    const raw = await readRaw(conn);
    assert.equal(raw.readInt32LE(12), OP_COMPRESSED);
    assert.equal(raw[24], ID.noop);
    const unwrapped = Buffer.concat([Buffer.from(raw.subarray(0, 16)), raw.subarray(25)]);
    unwrapped.writeInt32LE(raw.readInt32LE(16), 12);
    assert.equal(h.decodeReply(unwrapped).ok, 1, 'a noop envelope carries the reply as it is');
    conn.close();
  } finally {
    await s.stop();
    s.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const out = (() => {
    try {
      execFileSync(h.binaryPath(), ['--networkMessageCompressors', 'zlib,lz4', '--port', '29799'], { stdio: 'pipe', timeout: 20000 });
      return '';
    } catch (e) { return `${e.status} ${e.stderr}`; }
  })();
  assert.match(out, /^2 .*Invalid network message compressor specified in configuration: lz4/s, 'an unknown name stops start-up');
});
