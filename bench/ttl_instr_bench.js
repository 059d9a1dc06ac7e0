'use strict';
/*
 * Instructions per expired document, burst against spread (issue 13,
 * target (6): "precise and cheap"), counted by callgrind, which gives the
 * same count run after run on a machine whose CPU time varies by 20-30 %.
 * Prints figures only; no assertions.
 *
 *   node bench/ttl_instr_bench.js [--docs N] [--rates R1,R2,...] [--secs S] [--colls C] [--ttl-colls T]
 *                                 [--keep DIR]
 *   (or bash bench/ttl_instr_bench.sh, which builds build/mayflyd and
 *   installs valgrind first)
 *
 * --keep DIR copies each case's callgrind dump into DIR (burst.cg,
 * spread-R.cg), for callgrind_annotate.
 *
 * Cases, one after another, each on a fresh mayflyd run under valgrind
 * (--tool=callgrind --instr-atstart=no) in a fresh directory:
 *   burst:     N documents {_id: i, at: T0, p: <18 bytes>} in a collection
 *              with a TTL index on `at` (expireAfterSeconds 0), all due at
 *              the same instant T0;
 *   spread R:  min(N, R x S) documents due R per second from T0 on, evenly
 *              (document i at T0 + i / R s), for each rate R of --rates
 *              (default 1000 and 4000 per second, S default 20 s).
 * --colls C first creates C other collections (no TTL index) in another
 * database, as a server with many collections has: a pass's cost should not
 * grow with them. --ttl-colls T creates T others each with a TTL index (on
 * `at`, expireAfterSeconds 3600) and one document, due in an hour: a pass
 * should cost what the due index costs, not what every TTL index does.
 * Each case loads its documents in insertMany batches of 1,000, sends fsync
 * (a checkpoint, as ttl_bench does before an expiry), turns counting on
 * (callgrind_control -i on) one second before T0, waits for an empty
 * collection (estimatedDocumentCount every 500 ms), dumps the counts and
 * reads them. Reported per case: the passes the monitor made
 * (serverStatus metrics.ttl.passes), documents per pass, and instructions
 * per deleted document: the whole server's (every thread: the checkpoint,
 * eviction and log threads included) and the TTL threads' alone (inclusive
 * cost of the monitor's and the deleters' thread functions, monitor_main
 * and deleter_main), each also against the burst's.
 *
 * The fit. A spread pass costs a fixed amount (reading the TTL index's
 * due range, a transaction, the deadline of the next pass) plus the same
 * per document as the burst. With two or more rates the TTL threads'
 * counts are fitted to  instructions = a x documents + b x passes  (least
 * squares), and a + b / D is printed for D documents per pass: 83 is what
 * ttl_bench's spread (1,000,000 documents over 60 s, passes 5 ms apart,
 * ttlMonitorCoalesceMS) gives, so that line is target (6)'s ratio counted
 * in instructions; 1 is a monitor expiring one document at a time (a few
 * documents a second, the common case for sessions).
 *
 * What it shows (2-core VM, 20,000 documents): instructions per document
 * are close to the burst's once passes hold tens of documents; ttl_bench's
 * CPU-time ratio for the same work (2.0-2.5x, 1.4-1.8x with the CPUs kept
 * busy) is then the cost of CPUs that halt between passes (cold caches,
 * wake-ups), which callgrind does not see. With --colls 300 a pass cost
 * 201,000 instructions before the monitor kept its list of TTL indexes
 * between passes (it walked every collection twice a pass), 32,700 after,
 * as with none. With --ttl-colls 300 (--rates 4000, 20,000 documents), a
 * precise pass cost about 14.5 million instructions beyond its documents'
 * (the whole server's per document against the burst's, times documents
 * per pass) while every pass visited and read all 301 TTL indexes
 * (e9724a8: 9 passes, which under valgrind could not keep up and held
 * 2,222 documents each), and 140,000 once each index's deadline was kept
 * with it (773bdd1: 437 passes of 46; docs/ARCHITECTURE.md, "Per-index
 * deadlines"). Under valgrind the server runs
 * 20-50 times slower: a rate it cannot keep up with makes larger passes, so
 * keep R x 20,000 instructions under about 50 million a second.
 */
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { MongoClient } = require('mongodb');
const {
  options, sleep, log, fmtInt, printTable, stopServer, startMayflyd, stopAll, runMain, removeTempDir, machine, sourceRev,
} = require('./lib/common');

const { num, str } = options('ttl_instr_bench');
const N = Math.floor(num('docs', 20000));
const SECS = num('secs', 20);
const RATES = str('rates', '1000,4000').split(',').map(Number);
const COLLS = Math.floor(Number(str('colls', '0')));
if (!Number.isFinite(COLLS) || COLLS < 0) {
  console.error('ttl_instr_bench: --colls needs a number, 0 or more');
  process.exit(2);
}
const TTL_COLLS = Math.floor(Number(str('ttl-colls', '0')));
if (!Number.isFinite(TTL_COLLS) || TTL_COLLS < 0) {
  console.error('ttl_instr_bench: --ttl-colls needs a number, 0 or more');
  process.exit(2);
}
const KEEP = str('keep', '');
const OTHERS = `${COLLS ? `, ${fmtInt(COLLS)} other collections` : ''}${TTL_COLLS ? `, ${fmtInt(TTL_COLLS)} other TTL collections` : ''}`;
if (RATES.some((r) => !Number.isFinite(r) || r <= 0)) {
  console.error('ttl_instr_bench: --rates needs positive numbers, comma-separated');
  process.exit(2);
}
const PAYLOAD = 'payload-0123456789';

/* Total Ir of a callgrind dump, and the inclusive Ir of the TTL threads' functions. */
function readDump(file) {
  const text = fs.readFileSync(file, 'utf8');
  const m = /^(?:totals|summary): (\d+)/m.exec(text);
  const total = m ? Number(m[1]) : NaN;
  const ann = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file],
    { encoding: 'utf8', maxBuffer: 64 << 20 });
  const incl = (fn) => {
    const re = new RegExp(`^\\s*([\\d,]+) \\([^)]*\\)\\s+\\S*?[:\\s]?${fn} \\[`, 'm');
    const r = re.exec(ann);
    return r ? Number(r[1].replace(/,/g, '')) : 0;
  };
  return { total, ttl: incl('monitor_main') + incl('deleter_main') };
}

/* One case: docs documents due from T0 on, rate per second (0: all at T0). */
async function runCase(docs, rate) {
  const out = fs.mkdtempSync(path.join(require('os').tmpdir(), 'ttlinstr-cg-'));
  const entry = await startMayflyd('ttlinstr-', [], {
    session: true,
    startMs: 120000,
    wrapper: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}/cg.out`],
  });
  const client = new MongoClient(entry.uri);
  try {
    await client.connect();
    const db = client.db('instr');
    const other = client.db('instr_other');
    for (let i = 0; i < COLLS; i++) await other.createCollection(`c${i}`);
    for (let i = 0; i < TTL_COLLS; i++) {
      const t = other.collection(`t${i}`);
      await t.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
      await t.insertOne({ at: new Date() });
    }
    const coll = db.collection('c');
    await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const lead = 15000 + docs / 2; /* valgrind loads a few thousand documents a second or more */
    const T0 = Date.now() + lead;
    for (let i = 0; i < docs; i += 1000) {
      const batch = [];
      for (let j = i; j < Math.min(docs, i + 1000); j++) {
        batch.push({ _id: j, at: new Date(T0 + (rate > 0 ? Math.floor((j * 1000) / rate) : 0)), p: PAYLOAD });
      }
      await coll.insertMany(batch);
    }
    await db.admin().command({ fsync: 1 });
    if (Date.now() > T0 - 2000) throw new Error(`loading ${docs} documents under valgrind took too long`);
    const ttl0 = (await db.admin().command({ serverStatus: 1 })).metrics.ttl;
    while (Date.now() < T0 - 1000) await sleep(20);
    execFileSync('callgrind_control', ['-i', 'on', String(entry.proc.pid)], { stdio: 'ignore' });
    const deadline = T0 + (rate > 0 ? (docs * 1000) / rate : 0) + 300000;
    while (await coll.estimatedDocumentCount() > 0) {
      if (Date.now() > deadline) throw new Error('expiry not done 300 s after the last deadline');
      await sleep(500);
    }
    const ttl1 = (await db.admin().command({ serverStatus: 1 })).metrics.ttl;
    execFileSync('callgrind_control', ['-d', String(entry.proc.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['-i', 'off', String(entry.proc.pid)], { stdio: 'ignore' });
    const dumps = fs.readdirSync(out).filter((f) => /^cg\.out\.\d+$/.test(f)).sort();
    if (dumps.length === 0) throw new Error('callgrind wrote no dump');
    const d = readDump(path.join(out, dumps[dumps.length - 1]));
    if (KEEP) {
      fs.mkdirSync(KEEP, { recursive: true });
      fs.copyFileSync(path.join(out, dumps[dumps.length - 1]), path.join(KEEP, rate > 0 ? `spread-${rate}.cg` : 'burst.cg'));
    }
    const deleted = ttl1.deletedDocuments - ttl0.deletedDocuments;
    return { docs, rate, deleted, passes: ttl1.passes - ttl0.passes, ...d };
  } finally {
    await client.close().catch(() => {});
    await stopServer(entry, 120000);
    removeTempDir(entry.dir);
    fs.rmSync(out, { recursive: true, force: true });
  }
}

/* Least squares for y = a x + b z over the cases (x: documents, z: passes); null if singular. */
function fit(cases) {
  let sxx = 0, sxz = 0, szz = 0, sxy = 0, szy = 0;
  for (const c of cases) {
    sxx += c.deleted * c.deleted; sxz += c.deleted * c.passes; szz += c.passes * c.passes;
    sxy += c.deleted * c.ttl; szy += c.passes * c.ttl;
  }
  const det = sxx * szz - sxz * sxz;
  if (Math.abs(det) < 1e-9 * sxx * szz) return null;
  return { a: (sxy * szz - szy * sxz) / det, b: (sxx * szy - sxz * sxy) / det };
}

runMain(async () => {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch (_) {
    console.error('ttl_instr_bench: valgrind not found (bash bench/ttl_instr_bench.sh installs it)');
    process.exit(2);
  }
  log(`ttl_instr_bench: ${fmtInt(N)} docs, spread rates ${RATES.join(', ')}/s (at most ${SECS} s each)` +
    OTHERS);
  const burst = await runCase(N, 0);
  log(`burst: ${fmtInt(burst.deleted)} deleted in ${burst.passes} passes, ${fmtInt(burst.total / burst.deleted)} instructions/doc`);
  const spread = [];
  for (const r of RATES) {
    const x = await runCase(Math.min(N, Math.round(r * SECS)), r);
    spread.push(x);
    log(`spread ${r}/s: ${fmtInt(x.deleted)} deleted in ${x.passes} passes, ${fmtInt(x.total / x.deleted)} instructions/doc`);
  }
  const per = (x, k) => x[k] / Math.max(1, x.deleted);
  const rows = [['case', 'docs', 'passes', 'docs/pass', 'server Ir/doc', 'x burst', 'TTL threads Ir/doc', 'x burst'], '-'];
  for (const x of [burst, ...spread]) {
    rows.push([x.rate ? `spread ${fmtInt(x.rate)}/s` : 'burst', fmtInt(x.deleted), fmtInt(x.passes),
      (x.deleted / Math.max(1, x.passes)).toFixed(1),
      fmtInt(per(x, 'total')), (per(x, 'total') / per(burst, 'total')).toFixed(2),
      fmtInt(per(x, 'ttl')), (per(x, 'ttl') / per(burst, 'ttl')).toFixed(2)]);
  }
  console.log('');
  const mc = machine();
  console.log(`Instructions per expired document (callgrind)${OTHERS}; ${mc.nproc} CPUs, ${mc.model}, ${mc.kernel}; mayfly ${sourceRev()}`);
  printTable(rows);
  const f = fit(spread);
  if (f) {
    console.log(`TTL threads, spread cases fitted: ${fmtInt(f.a)} instructions per document + ${fmtInt(f.b)} per pass`);
    for (const dpp of [83, 10, 1]) {
      const v = f.a + f.b / dpp;
      console.log(`  at ${dpp} document${dpp > 1 ? 's' : ''} per pass: ${fmtInt(v)} per document, ${(v / per(burst, 'ttl')).toFixed(2)}x the burst` +
        (dpp === 83 ? ' (ttl_bench phase 1: 1,000,000 over 60 s, passes 5 ms apart)' : ''));
    }
  } else {
    console.log('(one spread rate, or passes proportional to documents: no fit; give --rates two different rates)');
  }
  await stopAll();
});
