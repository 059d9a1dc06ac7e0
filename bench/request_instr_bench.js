'use strict';
/*
 * Instructions per request (issue 13, "request latency near the floor"),
 * counted by callgrind, which gives the same count run after run on a
 * machine whose CPU time varies by 20-30 %. Prints figures only; no
 * assertions.
 *
 *   node bench/request_instr_bench.js [--reqs N]
 *   (or bash bench/request_instr_bench.sh, which builds build/mayflyd and
 *   installs valgrind first)
 *
 Each case on a fresh mayflyd under valgrind (--tool=callgrind
 * --instr-atstart=no) in a fresh directory; one connection with the same raw
 * OP_MSG client as bench/ttl_bench.js's foreground loop (no driver: a
 * socket, one request at a time). Collection `c` gets 1,000 documents
 * {_id: i, v: <18 bytes>} and one request of each kind warms up; then
 * counting is turned on (callgrind_control -i on), N requests run (default
 * 5,000) and the counts are dumped. The cases:
 *   ping:    {ping: 1};
 *   find:    {find: 'c', filter: {_id: k}, limit: 1, singleBatch: true},
 *            k cycling over the documents;
 *   insert:  {insert: 'c', documents: [{_id: new, v: <18 bytes>}]} (w: 1);
 *   the pair: insert then find, alternating, as ttl_bench's foreground loop.
 * Reported: the whole server's instructions per request (every thread: the
 * I/O thread, the worker, the log flusher), and the ten functions with the
 * most inclusive instructions per request in the pair case (callgrind_annotate),
 * to show where a request's cost goes.
 */
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { RawMongo } = require('./lib/rawmongo');
const {
  options, log, fmtInt, printTable, stopServer, startMayflyd, stopAll, runMain, removeTempDir, machine, sourceRev,
} = require('./lib/common');

const { num } = options('request_instr_bench');
const REQS = Math.max(100, Math.floor(num('reqs', 5000)));
const DOCS = 1000;
const PAYLOAD = 'payload-0123456789';

/* Total Ir of a callgrind dump, and its top inclusive functions (name, Ir). */
function readDump(file, top) {
  const text = fs.readFileSync(file, 'utf8');
  const m = /^(?:totals|summary): (\d+)/m.exec(text);
  const total = m ? Number(m[1]) : NaN;
  const fns = [];
  if (top > 0) {
    const ann = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=99', file],
      { encoding: 'utf8', maxBuffer: 64 << 20 });
    for (const line of ann.split('\n')) {
      const r = /^\s*([\d,]+) \([^)]*\)\s+(\S+)/.exec(line);
      if (!r || /PROGRAM TOTALS/.test(line)) continue;
      const name = r[2].replace(/^.*\//, '');
      /* Thread entry points and the request's envelope (every request is inside them), unnamed code. */
      if (/_main$|:(work_hold_cb|work_cb|start_thread|clone|uv_run|epoll_wait)$|pthread_|^\?\?\?:0x/.test(name)) continue;
      if (fns.some(([f]) => f === name)) continue;   /* the same function under two file names (inlined headers) */
      fns.push([name, Number(r[1].replace(/,/g, ''))]);
      if (fns.length === top) break;
    }
  }
  return { total, fns };
}

/* One case on a fresh server: fns (one request each, in turn) run REQS times; returns the dump's counts. */
async function runCase(make, top) {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'reqinstr-cg-'));
  const entry = await startMayflyd('reqinstr-', [], {
    session: true,
    startMs: 120000,
    wrapper: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}/cg.out`],
  });
  const pid = String(entry.proc.pid);
  const r = new RawMongo(entry.port, 'instr');
  try {
    await r.connect();
    for (let i = 0; i < DOCS; i += 100) {
      const docs = [];
      for (let j = i; j < i + 100; j++) docs.push({ _id: j, v: PAYLOAD });
      await r.cmd({ insert: 'c', documents: docs });
    }
    let next = DOCS;
    let k = 0;
    const ops = {
      ping: () => r.cmd({ ping: 1 }),
      find: async () => {
        const id = k++ % DOCS;
        const b = await r.cmd({ find: 'c', filter: { _id: id }, limit: 1, singleBatch: true });
        if (b.cursor.firstBatch.length !== 1) throw new Error(`find of _id ${id} found nothing`);
      },
      insert: () => r.cmd({ insert: 'c', documents: [{ _id: next++, v: PAYLOAD }] }),
    };
    for (const f of Object.values(ops)) await f();   /* warm up */
    const fns = make(ops);
    execFileSync('callgrind_control', ['-i', 'on', pid], { stdio: 'ignore' });
    for (let i = 0; i < REQS; i++) await fns[i % fns.length]();
    execFileSync('callgrind_control', ['-d', pid], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['-i', 'off', pid], { stdio: 'ignore' });
    const dumps = fs.readdirSync(out).filter((f) => /^cg\.out\.\d+$/.test(f)).sort();
    if (dumps.length === 0) throw new Error('callgrind wrote no dump');
    return readDump(path.join(out, dumps[dumps.length - 1]), top);
  } finally {
    r.close();
    await stopServer(entry, 120000);
    removeTempDir(entry.dir);
    fs.rmSync(out, { recursive: true, force: true });
  }
}

runMain(async () => {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch (_) {
    console.error('request_instr_bench: valgrind not found (bash bench/request_instr_bench.sh installs it)');
    process.exit(2);
  }
  log(`request_instr_bench: ${fmtInt(REQS)} requests per case, one connection, raw OP_MSG`);
  const cases = [
    ['ping', (o) => [o.ping]],
    ['find by _id', (o) => [o.find]],
    ['insert (w: 1)', (o) => [o.insert]],
    ['insert + find (pair)', (o) => [o.insert, o.find]],
  ];
  const rows = [['case', 'requests', 'instructions/request'], '-'];
  let pairTop = [];
  for (const [name, make] of cases) {
    const pair = make({}).length > 1;
    const d = await runCase(make, pair ? 12 : 0);
    rows.push([name, fmtInt(REQS), fmtInt(d.total / REQS)]);
    log(`${name}: ${fmtInt(d.total / REQS)} instructions per request`);
    if (pair) pairTop = d.fns;
  }
  console.log('');
  const mc = machine();
  console.log(`Instructions per request (callgrind, whole server); ${mc.nproc} CPUs, ${mc.model}, ${mc.kernel}; mayfly ${sourceRev()}`);
  printTable(rows);
  console.log('Insert + find pair, inclusive instructions per request of the costliest functions:');
  printTable([['function', 'instructions/request'], '-', ...pairTop.map(([f, ir]) => [f, fmtInt(ir / REQS)])]);
  await stopAll();
});
