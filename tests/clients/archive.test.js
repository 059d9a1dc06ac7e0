'use strict';
/*
 * Archive-on-expire (SPEC I2): a TTL index with archive: true writes each
 * document it expires to <dbpath>/archive/ (zstd segment files, *.zst, one
 * directory per collection) exactly once before deleting it; the
 * aggregation stage $archived reads them back.
 *
 *   - the option: createIndexes {..., expireAfterSeconds, archive: true}, shown
 *     by listIndexes; collMod index.archive answers archive_old/archive_new;
 *     archive without expireAfterSeconds 67, not a boolean 14, collMod of
 *     archive on a non-TTL index 72;
 *   - $archived returns the documents byte for byte as they were stored, every
 *     BSON type (double incl. -0/NaN/±Inf, strings with NUL and unicode,
 *     Binary subtypes 0/4/5/0x80, ObjectId, bool, Date incl. negative, null,
 *     regex, Code, Code with scope, Int32, Timestamp, Long, Decimal128,
 *     MinKey/MaxKey, Symbol, nesting, unicode field names, _id of several
 *     types); $match/$sort/$project/$group/$count after it; not first 40602;
 *     a missing collection reads empty;
 *   - TTL indexes without archive (or with it turned off) archive nothing;
 *   - collStats archiveSize/archiveCount/archiveSegments; drop removes the
 *     archive (files and what $archived reads);
 *   - SIGTERM restart keeps it; kill -9 during a mass expiry (3 rounds, 20,000
 *     documents each): at the crash point the archived and remaining _ids are
 *     disjoint and make up the whole set, and after the expiry finishes every
 *     _id is archived exactly once;
 *   - archiveRetentionSeconds removes old segments.
 *
 * The TTL monitor runs in precise mode (expired documents go within
 * milliseconds); tests that need documents to stay turn it off with
 * setParameter ttlMonitorEnabled.
 */
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const {
  BSON, Binary, BSONRegExp, BSONSymbol, Code, Decimal128, Double, Int32, Long, MaxKey, MinKey, ObjectId,
  Timestamp, UUID,
} = require('mongodb');
const h = require('./harness');

const { EJSON } = BSON;

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

/* ------------------------------------------------------------------ helpers */

/* Deserialisation that keeps every BSON type as it is (no promotion to JS numbers, Buffers or RegExps). */
const KEEP = { promoteValues: false, promoteLongs: false, promoteBuffers: false, bsonRegExp: true };
const canon = (doc) => EJSON.stringify(doc, { relaxed: false });

const waitFor = (fn, msg, ms = 10000, iv) => h.waitFor(fn, msg, ms, iv);

const admin = () => srv.client.db('admin');
const setMonitor = (on) => admin().command({ setParameter: 1, ttlMonitorEnabled: on });

/* Creates coll's TTL index on t with archive (through the command: the driver's createIndex drops unknown options). */
async function archiveIndex(db, coll, { archive = true, expireAfterSeconds = 0, field = 't' } = {}) {
  const spec = { key: { [field]: 1 }, name: `${field}_1`, expireAfterSeconds };
  if (archive !== undefined) spec.archive = archive;
  return db.command({ createIndexes: coll, indexes: [spec] });
}

/* $archived (plus stages) on coll; documents with their BSON types kept. */
function archived(coll, stages = [], opts = {}) {
  return coll.aggregate([{ $archived: {} }, ...stages], { ...KEEP, ...opts }).toArray();
}

const past = () => new Date(Date.now() - 60000);

async function waitEmpty(coll, timeoutMs = 15000) {
  await waitFor(async () => (await coll.countDocuments()) === 0, `${coll.collectionName} emptied by the TTL monitor`, timeoutMs);
}

async function collStats(db, coll) {
  return db.command({ collStats: coll });
}

const archiveRoot = () => path.join(srv.server.dbpath, 'archive');

/* Every *.zst file under <dbpath>/archive, as paths relative to it. */
function zstFiles() {
  const out = [];
  const walk = (dir) => {
    let ents;
    try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch (_) { return; }
    for (const e of ents) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.zst')) out.push(path.relative(archiveRoot(), p));
    }
  };
  walk(archiveRoot());
  return out.sort();
}

/* The top-level directories of <dbpath>/archive (one per collection). */
function archiveDirs() {
  try {
    return fs.readdirSync(archiveRoot(), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  } catch (_) { return []; }
}

function byId(docs) {
  const m = new Map();
  for (const d of docs) m.set(canon({ _id: d._id }), d);
  return m;
}

/* ----------------------------------------------------------- the option (4) */

h.test('createIndexes with archive: true is listed; collMod turns it off (archive_old/_new) and on again', async () => {
  const db = srv.freshDb('opt');
  const r = await archiveIndex(db, 'c');
  assert.equal(r.ok, 1);
  let ix = (await db.collection('c').listIndexes().toArray()).find((x) => x.name === 't_1');
  assert.equal(ix.archive, true, `listIndexes: ${JSON.stringify(ix)}`);
  assert.equal(ix.expireAfterSeconds, 0);

  const off = await db.command({ collMod: 'c', index: { name: 't_1', archive: false } });
  assert.equal(off.ok, 1);
  assert.equal(off.archive_old, true, `collMod reply: ${JSON.stringify(off)}`);
  assert.equal(off.archive_new, false, `collMod reply: ${JSON.stringify(off)}`);
  ix = (await db.collection('c').listIndexes().toArray()).find((x) => x.name === 't_1');
  assert.notEqual(ix.archive, true, `after archive: false: ${JSON.stringify(ix)}`);
  assert.equal(ix.expireAfterSeconds, 0, 'expireAfterSeconds unchanged');

  const on = await db.command({ collMod: 'c', index: { name: 't_1', archive: true } });
  assert.equal(on.archive_old, false, `collMod reply: ${JSON.stringify(on)}`);
  assert.equal(on.archive_new, true, `collMod reply: ${JSON.stringify(on)}`);
  ix = (await db.collection('c').listIndexes().toArray()).find((x) => x.name === 't_1');
  assert.equal(ix.archive, true);
});

h.test('archive without expireAfterSeconds is refused with 67 CannotCreateIndex; nothing created', async () => {
  const db = srv.freshDb('noexp');
  await db.createCollection('c');
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: { t: 1 }, name: 't_1', archive: true }] }), 67);
  assert.ok(!(await db.collection('c').listIndexes().toArray()).some((x) => x.name === 't_1'));
});

h.test('archive that is not a boolean is refused with 14 TypeMismatch (string, number)', async () => {
  const db = srv.freshDb('nonbool');
  await db.createCollection('c');
  for (const v of ['true', 1]) {
    await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: { t: 1 }, name: 't_1', expireAfterSeconds: 0, archive: v }] }),
      14, undefined).catch((e) => { throw new Error(`archive: ${JSON.stringify(v)}: ${e.message}`); });
  }
  assert.ok(!(await db.collection('c').listIndexes().toArray()).some((x) => x.name === 't_1'));
});

h.test('collMod archive on a non-TTL index is refused with 72 InvalidOptions', async () => {
  const db = srv.freshDb('nonttl');
  await db.collection('c').createIndex({ t: 1 });
  await h.expectCode(db.command({ collMod: 'c', index: { name: 't_1', archive: true } }), 72);
  const ix = (await db.collection('c').listIndexes().toArray()).find((x) => x.name === 't_1');
  assert.equal(ix.archive, undefined, JSON.stringify(ix));
});

/* ------------------------------------------------------- archiving itself */

function typedDocs() {
  const t = past();
  return [
    { _id: 1, t, d: new Double(1.5), dneg0: new Double(-0), dint: new Double(2), dnan: new Double(NaN),
      dinf: new Double(Infinity), dninf: new Double(-Infinity), big: new Double(1.7976931348623157e308), tiny: new Double(5e-324) },
    { _id: 2, t, s: 'hello', empty: '', uni: 'héllo wörld ✓ 日本語 🚀', withNul: 'a\u0000b', long: 'x'.repeat(5000) },
    { _id: 3, t, obj: { a: new Int32(1), b: { c: [new Int32(1), { d: 'e' }] } }, arr: [new Int32(1), 'two', [new Int32(3), [new Int32(4)]], { five: new Int32(5) }],
      emptyObj: {}, emptyArr: [] },
    { _id: 4, t, b0: new Binary(Buffer.from([0, 1, 2, 255]), 0), b4: new UUID('0f8fad5b-d9cb-469f-a165-70867728950e').toBinary(),
      b5: new Binary(Buffer.alloc(16, 7), 5), b80: new Binary(Buffer.from('custom subtype'), 0x80), bEmpty: new Binary(Buffer.alloc(0), 0) },
    { _id: 5, t, oid: new ObjectId('64b7f0c2a1b2c3d4e5f60718'), yes: true, no: false, epoch: new Date(0),
      before1900: new Date(-2208988800001), far: new Date(253402300799999), nil: null },
    { _id: 6, t, re: new BSONRegExp('^a.*b$', 'imsx'), reEmpty: new BSONRegExp('', ''), code: new Code('function () { return 1; }'),
      cws: new Code('function () { return x; }', { x: new Int32(1), y: { z: 'w' } }) },
    { _id: 7, t, i32: new Int32(-2147483648), i32max: new Int32(2147483647), ts: new Timestamp({ t: 1700000000, i: 42 }),
      /* nested: a top-level Timestamp(0, 0) is filled with the server's time on insert, as mongod's */
      inner: { tsZero: new Timestamp({ t: 0, i: 0 }) }, lng: Long.fromString('-9223372036854775808'), lngMax: Long.MAX_VALUE,
      dec: Decimal128.fromString('1.234567890123456789012345678901234E+6144'), decNeg0: Decimal128.fromString('-0.00'),
      decNaN: Decimal128.fromString('NaN'), decInf: Decimal128.fromString('-Infinity') },
    { _id: 8, t, min: new MinKey(), max: new MaxKey(), sym: new BSONSymbol('symbol') },
    { _id: 9, t, 'ключ': 'значение', '日本': { '中文': ['😀'] }, 'é': new Int32(1), nested: [[[[{ deep: [[new Int32(1)]] }]]]] },
    { _id: 'string-id', t, v: new Int32(10) },
    { _id: new ObjectId('650000000000000000000001'), t, v: new Int32(11) },
    { _id: { compound: new Int32(1), k: 'x' }, t, v: new Int32(12) },
    { _id: new Double(13.5), t, v: new Int32(13) },
    { _id: Long.fromNumber(14), t: [past(), new Date(Date.now() + 3600e3)], v: new Int32(14) },
  ];
}

h.test('$archived returns every expired document of an archive: true index byte for byte (every BSON type)', async () => {
  const db = srv.freshDb('types');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const docs = typedDocs();
  await setMonitor(false);
  let stored;
  try {
    await coll.insertMany(docs, { checkKeys: false });
    stored = await coll.find({}, { raw: true }).toArray();
    assert.equal(stored.length, docs.length);
  } finally {
    await setMonitor(true);
  }
  await waitEmpty(coll);
  const raw = await coll.aggregate([{ $archived: {} }], { raw: true }).toArray();
  assert.equal(raw.length, docs.length, `$archived returned ${raw.length} documents, ${docs.length} archived`);
  const storedById = byId(stored.map((b) => BSON.deserialize(b, KEEP)));
  const rawStored = new Map(stored.map((b) => [canon({ _id: BSON.deserialize(b, KEEP)._id }), Buffer.from(b)]));
  const seen = new Set();
  for (const b of raw) {
    const d = BSON.deserialize(b, KEEP);
    const k = canon({ _id: d._id });
    assert.ok(storedById.has(k), `archived _id ${k} was never inserted`);
    assert.ok(!seen.has(k), `_id ${k} archived twice`);
    seen.add(k);
    assert.ok(Buffer.from(b).equals(rawStored.get(k)), `archived bytes of ${k} differ from the stored document:\n` +
      `  stored   ${canon(BSON.deserialize(rawStored.get(k), KEEP))}\n  archived ${canon(d)}`);
  }
  // And equal to what the client sent (canonical Extended JSON of the original, through BSON).
  const sent = byId(docs.map((d) => BSON.deserialize(BSON.serialize(d), KEEP)));
  for (const d of await archived(coll)) {
    const k = canon({ _id: d._id });
    assert.equal(canon(d), canon(sent.get(k)), `archived document ${k} differs from the inserted one`);
  }
});

h.test('large documents (8 MB, and one near the 16 MB limit) are archived and read back intact', async () => {
  const db = srv.freshDb('large');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const big = 'b'.repeat(8 * 1024 * 1024);
  const huge = Buffer.alloc(16 * 1024 * 1024 - 1024, 0x5a);
  await setMonitor(false);
  try {
    await coll.insertOne({ _id: 'big', t: past(), s: big });
    await coll.insertOne({ _id: 'huge', t: past(), b: new Binary(huge, 0) });
    await coll.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: `small${i}`, t: past(), i })));
  } finally {
    await setMonitor(true);
  }
  await waitEmpty(coll, 30000);
  const got = await coll.aggregate([{ $archived: {} }, { $sort: { _id: 1 } }]).toArray();
  assert.deepEqual(got.map((d) => d._id), ['big', 'huge', ...Array.from({ length: 10 }, (_, i) => `small${i}`)]);
  assert.equal(got[0].s.length, big.length);
  assert.ok(got[0].s === big, 'the 8 MB string is intact');
  assert.ok(Buffer.from(got[1].b.buffer).equals(huge), 'the ~16 MB binary is intact');
  const sizes = await coll.aggregate([{ $archived: {} }, { $project: { l: { $strLenBytes: { $ifNull: ['$s', ''] } } } }, { $match: { l: { $gt: 0 } } }]).toArray();
  assert.deepEqual(sizes, [{ _id: 'big', l: big.length }]);
});

h.test('concurrent updates while an archive: true index expires: every document archived at most once, never both archived and kept', async (t) => {
  const db = srv.freshDb('race');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const N = 4000;
  await setMonitor(false);
  await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, t: past(), n: 0 })), { ordered: false });
  let stop = false;
  let bumps = 0;
  const rescued = new Set();
  const byHand = new Set();
  const writers = [
    // Bumps a counter on everything still there.
    (async () => { while (!stop) { await coll.updateMany({}, { $inc: { n: 1 } }); bumps += 1; } })(),
    // Moves some documents' expiry to the future (they must stay, and not be archived).
    (async () => {
      for (let i = 0; i < N && !stop; i += 37) {
        const r = await coll.updateOne({ _id: i }, { $set: { t: new Date(Date.now() + 3600e3) } });
        if (r.modifiedCount === 1) rescued.add(i);
      }
    })(),
    // Deletes some by hand (not expired: not archived).
    (async () => {
      for (let i = 5; i < N && !stop; i += 53) {
        if ((await coll.deleteOne({ _id: i })).deletedCount === 1) byHand.add(i);
      }
    })(),
  ];
  await setMonitor(true);
  await waitFor(async () => (await coll.countDocuments({ t: { $lt: new Date() } })) === 0, 'every expired document deleted', 30000);
  stop = true;
  await Promise.all(writers);
  await waitFor(async () => (await coll.countDocuments({ t: { $lt: new Date() } })) === 0, 'every expired document deleted (after writers stopped)', 10000);
  const remaining = (await coll.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
  const arch = (await coll.aggregate([{ $archived: {} }, { $project: { _id: 1, t: 1 } }]).toArray());
  const ids = arch.map((d) => d._id);
  const set = new Set(ids);
  const bumped = arch.length ? (await coll.aggregate([{ $archived: {} }, { $match: { n: { $gt: 0 } } }, { $count: 'n' }]).toArray()) : [];
  t.diagnostic(`${bumps} updateMany passes, ${rescued.size} rescued, ${byHand.size} deleted by hand, ${remaining.length} remaining, ${ids.length} archived ` +
    `(${bumped.length ? bumped[0].n : 0} of them after at least one update)`);
  assert.equal(set.size, ids.length, `${ids.length - set.size} documents archived twice`);
  const both = remaining.filter((id) => set.has(id));
  assert.deepEqual(both, [], 'documents both archived and still in the collection');
  for (const id of rescued) {
    if (!byHand.has(id)) assert.ok(remaining.includes(id), `document ${id} moved to the future before expiring is still there`);
  }
  for (const id of byHand) assert.ok(!set.has(id), `document ${id} deleted by hand is not archived`);
  assert.ok(arch.every((d) => d.t < new Date()), 'only expired versions are archived');
  assert.ok(ids.length + remaining.length <= N);
  assert.ok(ids.length >= N - rescued.size - byHand.size, `archived ${ids.length}: every document not rescued nor deleted by hand`);
});

h.test('$archived composes with $match, $sort, $project, $group and $count', async () => {
  const db = srv.freshDb('compose');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const N = 60;
  await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, t: past(), g: `g${i % 3}`, v: i, tags: [i % 2 ? 'odd' : 'even'] })));
  await waitEmpty(coll);
  const all = await archived(coll, [], { promoteValues: true });
  assert.equal(all.length, N);

  const m = await coll.aggregate([{ $archived: {} }, { $match: { v: { $gte: 50 } } }, { $sort: { v: -1 } }, { $project: { _id: 0, v: 1 } }]).toArray();
  assert.deepEqual(m, Array.from({ length: 10 }, (_, i) => ({ v: 59 - i })));

  const g = await coll.aggregate([{ $archived: {} }, { $group: { _id: '$g', n: { $sum: 1 }, total: { $sum: '$v' } } }, { $sort: { _id: 1 } }]).toArray();
  const want = ['g0', 'g1', 'g2'].map((k, r) => {
    const vs = Array.from({ length: N }, (_, i) => i).filter((i) => i % 3 === r);
    return { _id: k, n: vs.length, total: vs.reduce((a, b) => a + b, 0) };
  });
  assert.deepEqual(g, want);

  const c = await coll.aggregate([{ $archived: {} }, { $match: { tags: 'odd' } }, { $count: 'n' }]).toArray();
  assert.deepEqual(c, [{ n: N / 2 }]);

  const s = await coll.aggregate([{ $archived: {} }, { $sort: { _id: 1 } }, { $skip: 5 }, { $limit: 3 }, { $project: { _id: 1, g: 1 } }]).toArray();
  assert.deepEqual(s, [{ _id: 5, g: 'g2' }, { _id: 6, g: 'g0' }, { _id: 7, g: 'g1' }]);
});

h.test('$archived not first in the pipeline is refused with 40602; on a missing collection it returns nothing', async () => {
  const db = srv.freshDb('pos');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  await h.expectCode(coll.aggregate([{ $match: {} }, { $archived: {} }]).toArray(), 40602);
  await h.expectCode(coll.aggregate([{ $archived: {} }, { $archived: {} }]).toArray(), 40602);
  const missing = db.collection('does_not_exist');
  assert.deepEqual(await missing.aggregate([{ $archived: {} }]).toArray(), []);
  assert.deepEqual(await srv.freshDb('nodb').collection('x').aggregate([{ $archived: {} }]).toArray(), []);
});

h.test('documents expired by a TTL index without archive (or with archive turned off) are not archived', async () => {
  const db = srv.freshDb('noarch');
  const plain = db.collection('plain');
  await plain.createIndex({ t: 1 }, { expireAfterSeconds: 0 });
  await plain.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, t: past() })));
  await waitEmpty(plain);
  assert.deepEqual(await archived(plain), []);

  const tog = db.collection('tog');
  await archiveIndex(db, 'tog');
  await tog.insertMany([{ _id: 'a1', t: past() }, { _id: 'a2', t: past() }]);
  await waitEmpty(tog);
  await db.command({ collMod: 'tog', index: { name: 't_1', archive: false } });
  await tog.insertMany([{ _id: 'off1', t: past() }, { _id: 'off2', t: past() }]);
  await waitEmpty(tog);
  await db.command({ collMod: 'tog', index: { name: 't_1', archive: true } });
  await tog.insertMany([{ _id: 'b1', t: past() }]);
  await waitEmpty(tog);
  const ids = (await archived(tog, [], { promoteValues: true })).map((d) => d._id).sort();
  assert.deepEqual(ids, ['a1', 'a2', 'b1'], 'only documents expired while archive was true');

  // Deleted by hand (not expired): not archived either.
  const man = db.collection('manual');
  await archiveIndex(db, 'manual', { expireAfterSeconds: 3600 });
  await man.insertMany([{ _id: 1, t: new Date() }, { _id: 2, t: new Date() }]);
  await man.deleteMany({});
  assert.deepEqual(await archived(man), []);
});

h.test('archive files: zstd segments (*.zst) in a per-collection directory under <dbpath>/archive; collStats archiveSize/Count/Segments', async () => {
  const db = srv.freshDb('files');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const dirsBefore = archiveDirs();
  const N = 500;
  await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, t: past(), s: `document number ${i} `.repeat(5) })));
  await waitEmpty(coll);
  const newDirs = archiveDirs().filter((d) => !dirsBefore.includes(d));
  assert.equal(newDirs.length, 1, `one new collection directory under ${archiveRoot()}: ${JSON.stringify(archiveDirs())}`);
  const files = zstFiles().filter((f) => f.startsWith(newDirs[0] + path.sep));
  assert.ok(files.length >= 1, `*.zst files in ${newDirs[0]}: ${JSON.stringify(zstFiles())}`);
  for (const f of files) {
    const head = Buffer.alloc(4);
    const fd = fs.openSync(path.join(archiveRoot(), f), 'r');
    try { fs.readSync(fd, head, 0, 4, 0); } finally { fs.closeSync(fd); }
    assert.equal(head.readUInt32LE(0), 0xFD2FB528, `${f} starts with the zstd frame magic (got ${head.toString('hex')})`);
  }
  const st = await collStats(db, 'c');
  assert.ok(Number(st.archiveSize) > 0, `archiveSize > 0: ${JSON.stringify({ archiveSize: st.archiveSize, archiveCount: st.archiveCount, archiveSegments: st.archiveSegments })}`);
  assert.equal(Number(st.archiveCount), N, `archiveCount: ${st.archiveCount}`);
  assert.ok(Number(st.archiveSegments) >= 1, `archiveSegments: ${st.archiveSegments}`);
  assert.equal(Number(st.archiveSegments), files.length, `archiveSegments = *.zst files (${files.length})`);
  const bytes = files.reduce((a, f) => a + fs.statSync(path.join(archiveRoot(), f)).size, 0);
  assert.ok(Number(st.archiveSize) <= bytes, `archiveSize ${st.archiveSize} <= the files' ${bytes} bytes`);
  // Compression: 500 documents of ~120 repetitive bytes take far less than their BSON size.
  const rawSize = (await archived(coll)).reduce((a, d) => a + BSON.calculateObjectSize(d), 0);
  assert.ok(Number(st.archiveSize) < rawSize, `archiveSize ${st.archiveSize} < raw BSON ${rawSize}`);
});

h.test('drop() removes the archive: a re-created collection of the same name reads empty, its directory is gone', async () => {
  const db = srv.freshDb('drop');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const dirsBefore = archiveDirs();
  await coll.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, t: past() })));
  await waitEmpty(coll);
  assert.equal((await archived(coll)).length, 50);
  const dir = archiveDirs().filter((d) => !dirsBefore.includes(d));
  assert.equal(dir.length, 1, `one new archive directory: ${JSON.stringify(archiveDirs())}`);
  assert.equal(await coll.drop(), true);
  assert.deepEqual(await archived(coll), [], '$archived after drop');
  await waitFor(() => !fs.existsSync(path.join(archiveRoot(), dir[0])), `archive directory ${dir[0]} removed by drop`, 5000);
  await archiveIndex(db, 'c');
  await coll.insertOne({ _id: 'new', t: new Date(Date.now() + 3600e3) });
  assert.deepEqual(await archived(coll), [], '$archived of the re-created collection');
  // dropDatabase too.
  const db2 = srv.freshDb('dropdb');
  await archiveIndex(db2, 'c');
  const before2 = archiveDirs();
  await db2.collection('c').insertMany([{ _id: 1, t: past() }, { _id: 2, t: past() }]);
  await waitEmpty(db2.collection('c'));
  const dir2 = archiveDirs().filter((d) => !before2.includes(d));
  assert.equal(dir2.length, 1);
  await db2.dropDatabase();
  await waitFor(() => !fs.existsSync(path.join(archiveRoot(), dir2[0])), `archive directory ${dir2[0]} removed by dropDatabase`, 5000);
  assert.deepEqual(await archived(db2.collection('c')), []);
});

h.test('a graceful restart (SIGTERM) keeps the archive readable and its collStats', async () => {
  const db0 = srv.freshDb('restart');
  const name = db0.databaseName;
  await archiveIndex(db0, 'c');
  await db0.collection('c').insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: i, t: past(), x: { y: [i, `s${i}`] } })));
  await waitEmpty(db0.collection('c'));
  const before = (await archived(db0.collection('c'))).map(canon).sort();
  const st0 = await collStats(db0, 'c');
  await srv.server.restart();
  await srv.reconnect();
  const db = srv.client.db(name);
  const after = (await archived(db.collection('c'))).map(canon).sort();
  assert.equal(after.length, 200);
  assert.deepEqual(after, before);
  const st = await collStats(db, 'c');
  assert.equal(Number(st.archiveCount), Number(st0.archiveCount));
  assert.equal(Number(st.archiveSize), Number(st0.archiveSize));
  const ix = (await db.collection('c').listIndexes().toArray()).find((x) => x.name === 't_1');
  assert.equal(ix.archive, true, 'archive: true survives the restart');
});

h.test('kill -9 during a mass expiry, 3 rounds: archived and remaining _ids are disjoint and complete; then every _id archived once', { timeout: 150000 }, async (t) => {
  const N = 20000;
  const ROUNDS = 3;
  const name = srv.freshDb('kill9').databaseName;
  const extra = srv.server.extraArgs;
  let midway = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const cname = `k${round}`;
    let db = srv.client.db(name);
    await archiveIndex(db, cname);
    await setMonitor(false);
    const docs = Array.from({ length: N }, (_, i) => ({ _id: i, t: new Date(Date.now() - 1000 - i), r: round, pad: 'p'.repeat(40) }));
    await db.collection(cname).insertMany(docs, { ordered: false });
    await setMonitor(true);
    // Kill once part of the collection is gone: a different share each round (TTL deletes reach the
    // journal within ~100 ms, like MongoDB's journalCommitInterval, so killing at the very first
    // deletion would mostly test a crash that lost them all).
    const target = Math.floor(N * [0.7, 0.5, 0.25][round % 3]);
    let seen = N;
    const tOn = Date.now();
    const deadline = tOn + 30000;
    while (Date.now() < deadline) {
      seen = await db.collection(cname).estimatedDocumentCount();
      if (seen <= target) break;
    }
    const killAfter = Date.now() - tOn;
    // Restart with the monitor held, to look at the crash point itself.
    extra.push('--setParameter', 'ttlMonitorEnabled=false');
    try {
      await srv.server.restart({ kill9: true });
    } finally {
      extra.splice(extra.length - 2, 2);
    }
    await srv.reconnect();
    db = srv.client.db(name);
    const coll = db.collection(cname);
    const remaining = (await coll.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
    const arch = (await coll.aggregate([{ $archived: {} }, { $project: { _id: 1 } }]).toArray()).map((d) => d._id);
    t.diagnostic(`round ${round}: count ${seen} seen ${killAfter} ms after the monitor was enabled, then kill -9; after restart ${remaining.length} remaining, ${arch.length} archived`);
    if (remaining.length > 0 && remaining.length < N) midway += 1;
    const archSet = new Set(arch);
    assert.equal(archSet.size, arch.length, `round ${round}: duplicate _ids in the archive after kill -9 (${arch.length - archSet.size})`);
    const both = remaining.filter((id) => archSet.has(id));
    assert.deepEqual(both.slice(0, 10), [], `round ${round}: ${both.length} documents both archived and still in the collection after kill -9`);
    assert.equal(remaining.length + arch.length, N,
      `round ${round}: remaining ${remaining.length} + archived ${arch.length} != ${N} (documents lost or duplicated at the crash)`);

    await setMonitor(true);
    await waitEmpty(coll, 60000);
    const all = (await coll.aggregate([{ $archived: {} }, { $project: { _id: 1, r: 1 } }]).toArray());
    const ids = all.map((d) => d._id);
    const set = new Set(ids);
    assert.equal(set.size, ids.length, `round ${round}: ${ids.length - set.size} duplicate _ids in the archive`);
    const missing = [];
    for (let i = 0; i < N; i++) if (!set.has(i)) missing.push(i);
    assert.deepEqual(missing.slice(0, 10), [], `round ${round}: ${missing.length} _ids never archived`);
    assert.equal(ids.length, N);
    assert.ok(all.every((d) => d.r === round), 'archived content intact');
    assert.equal(await coll.countDocuments(), 0, 'the collection is empty');
    const st = await collStats(db, cname);
    assert.equal(Number(st.archiveCount), N, `round ${round}: collStats archiveCount ${st.archiveCount}`);
  }
  t.diagnostic(`${midway} of ${ROUNDS} rounds were killed midway through the expiry`);
  assert.ok(midway >= 1, 'at least one round killed the server midway through the expiry (else the check proves little)');
});

h.test('archiveRetentionSeconds: 1 removes old segments within seconds; 0 (the default) keeps them', async () => {
  const got = await admin().command({ getParameter: 1, archiveRetentionSeconds: 1 });
  assert.equal(Number(got.archiveRetentionSeconds), 0, 'default 0 (keep forever)');
  const db = srv.freshDb('retention');
  const coll = db.collection('c');
  await archiveIndex(db, 'c');
  const N = 300;
  await coll.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, t: past() })));
  await waitEmpty(coll);
  assert.equal((await archived(coll)).length, N);
  await h.sleep(1500);
  assert.equal((await archived(coll)).length, N, 'kept while archiveRetentionSeconds is 0');
  await admin().command({ setParameter: 1, archiveRetentionSeconds: 1 });
  try {
    const st = await waitFor(async () => {
      const s = await collStats(db, 'c');
      return Number(s.archiveCount) < N ? s : null;
    }, 'collStats archiveCount drops after archiveRetentionSeconds: 1', 20000, 200);
    assert.ok(Number(st.archiveCount) < N);
    const left = (await archived(coll)).length;
    assert.ok(left < N, `$archived returns fewer: ${left}`);
  } finally {
    await admin().command({ setParameter: 1, archiveRetentionSeconds: 0 });
  }
});

/*
 * --inMemory without --dbpath: the server's home is a scratch directory
 * under /tmp (getCmdLineOpts parsed.storage.dbPath), where the archive's
 * segments go too. A clean stop removes it with everything in it.
 */
class ScratchServer extends h.MayflyServer {
  args() {
    const a = super.args();
    const i = a.indexOf('--dbpath');
    a.splice(i, 2);
    return a;
  }
}

h.test('--inMemory without --dbpath: the scratch home, archive segments and all, is gone after a clean stop', async () => {
  const own = new ScratchServer({ args: ['--inMemory'] });
  await own.start();
  const { MongoClient } = require('mongodb');
  const cl = new MongoClient(own.uri);
  let home;
  try {
    await cl.connect();
    const opts = await cl.db('admin').command({ getCmdLineOpts: 1 });
    home = opts.parsed.storage.dbPath;
    assert.match(home, /^\/tmp\/mayfly-mem-/);
    assert.notEqual(home, own.dbpath, 'not the harness directory');
    const db = cl.db('scratch');
    await archiveIndex(db, 'c');
    await db.collection('c').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, t: past() })));
    await waitEmpty(db.collection('c'));
    assert.equal((await archived(db.collection('c'))).length, 50);
    const segs = fs.readdirSync(path.join(home, 'archive'), { recursive: true }).filter((f) => f.endsWith('.zst'));
    assert.ok(segs.length >= 1, `segments under ${home}/archive: ${segs}`);
  } finally {
    await cl.close(true).catch(() => {});
    const info = await own.stop();
    own.cleanup();
    assert.ok(!info || info.code === 0 || info.code === null, `clean shutdown: ${JSON.stringify(info)}`);
  }
  assert.equal(fs.existsSync(home), false, `${home} removed at shutdown`);
});
