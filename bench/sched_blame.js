'use strict';
/*
 * Who held the CPU while a paced client waited (issue 13, target (2p): a
 * paced client's p99 during a mass expiry within 2x of idle). Prints
 * figures only; no assertions.
 *
 *   node bench/sched_blame.js [--docs N] [--rate OPS] [--runs R] [--wait-ms W]
 *   (or bash bench/sched_blame.sh, which builds build/mayflyd and installs
 *   perf first)
 *
 * Each run starts a fresh mayflyd in a session of its own (as
 * bench/ttl_bench.js starts it, so it is a scheduling group of its own, as a
 * service is), loads N documents (default 1,000,000) due at one instant
 * into a collection with a TTL index, and sends fsync. A raw OP_MSG client
 * (bench/lib/rawmongo.js, on its own connection) sends an insert and a find
 * by _id into another collection, one pair every 2000 / --rate ms (default
 * 2,000 operations a second, ttl_bench's phase 2p), timed from the send: 4 s
 * idle, then from the instant until the collection is empty. `perf sched
 * record -a` runs over the expiry; `perf sched timehist` then gives, for
 * every time a thread ran, when it was woken and when it got a CPU. Each
 * wait longer than --wait-ms (default 0.5 ms) of a thread on the request's
 * path (the client's main thread, the server's I/O thread and workers) is
 * charged to whatever ran on that CPU meanwhile, by class:
 *   - server, WiredTiger and other threads (eviction, log, checkpoint: the
 *     threads mayflyd does not name), the TTL threads (mf-ttl, mf-ttl-del),
 *     the server's own request threads (I/O thread, workers);
 *   - client: this process's other threads (V8's and libuv's helpers) and
 *     its main thread;
 *   - kernel threads, other processes, and the CPU idle (a wake-up that
 *     waited for an idle CPU to come back).
 * Printed per run: the deletion rate, the client's p50/p99 idle and during
 * the expiry and their ratio, the number of such waits and their total, and
 * the charge of each class (ms and share). Without perf (or without the
 * right to trace every CPU: root, or kernel.perf_event_paranoid <= -1) the
 * latencies alone are printed.
 */
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { RawMongo } = require('./lib/rawmongo');
const { options, sleep, log, quantiles, fmtInt, loadavg, printTable, machine, sourceRev, mayflydPath,
  startMayflyd, stopServer, runMain } = require('./lib/common');

const { num: arg } = options('sched_blame');
const N = arg('docs', 1000000);
const RATE = arg('rate', 2000);
const RUNS = arg('runs', 1);
const WAIT_MS = arg('wait-ms', 0.5);

function perfUsable() {
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' });
  } catch (_) {
    return 'perf not found';
  }
  if (process.getuid && process.getuid() === 0) return null;
  try {
    const p = Number(fs.readFileSync('/proc/sys/kernel/perf_event_paranoid', 'utf8'));
    return p <= -1 ? null : `not root and kernel.perf_event_paranoid is ${p}`;
  } catch (_) {
    return 'cannot read kernel.perf_event_paranoid';
  }
}

/*
 * The run intervals of `perf sched timehist`: {t (end, s), cpu, comm, tid, pid, delay (s), run (s)}.
 * A line: time [cpu] task wait delay run (times in ms), the task comm[tid/pid],
 * comm[pid] or <idle> (tid 0); a comm may itself hold spaces or brackets, so
 * the task is everything up to the last [...] before the three numbers.
 */
function timehist(file) {
  const out = execFileSync('perf', ['sched', 'timehist', '-i', file], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] })
    .toString();
  const line = /^\s*([\d.]+)\s+(\[\d+\])\s+(?:<idle>|(.*)\[(\d+)(?:\/(\d+))?\])\s+[\d.]+\s+([\d.]+)\s+([\d.]+)(?:\s|$)/;
  const rows = [];
  for (const l of out.split('\n')) {
    const m = line.exec(l);
    if (!m) continue;
    const tid = m[4] === undefined ? 0 : Number(m[4]);
    rows.push({ t: Number(m[1]), cpu: m[2], comm: m[4] === undefined ? '<idle>' : m[3], tid,
      pid: m[5] === undefined ? tid : Number(m[5]), delay: Number(m[6]) / 1e3, run: Number(m[7]) / 1e3 });
  }
  return rows;
}

/* The class a run interval is charged to. */
function classOf(r, serverPid, clientPid) {
  if (r.comm === '<idle>' || r.tid === 0) return 'CPU idle (waking it)';
  if (r.pid === serverPid) {
    if (r.comm.startsWith('mf-ttl')) return 'server: TTL threads';
    if (r.comm.startsWith('mf-data') || r.comm.startsWith('mf-fast') || r.tid === serverPid) return 'server: I/O thread, workers';
    if (r.comm.startsWith('mf-')) return `server: ${r.comm}`;
    return 'server: WiredTiger and other unnamed threads';
  }
  if (r.pid === clientPid) return r.tid === clientPid ? 'client: its main thread' : 'client: its helper threads';
  if (r.pid === 2 || /^(kworker|ksoftirqd|rcu_|migration|kcompactd|kdamond|kswapd|jbd2)/.test(r.comm)) return 'kernel threads';
  return 'other processes';
}

function blame(rows, serverPid, clientPid, from, to) {
  const onPath = (r) => r.tid === clientPid || (r.pid === serverPid &&
    (r.tid === serverPid || r.comm.startsWith('mf-data') || r.comm.startsWith('mf-fast')));
  const byCpu = new Map();
  for (const r of rows) {
    if (!byCpu.has(r.cpu)) byCpu.set(r.cpu, []);
    byCpu.get(r.cpu).push(r);
  }
  const charge = new Map(); /* class -> [while the client's thread waited, while a server thread did] (s) */
  let waits = 0, waited = 0;
  for (const r of rows) {
    if (!onPath(r) || r.delay * 1e3 < WAIT_MS || r.t < from || r.t > to) continue;
    const start = r.t - r.run, woken = start - r.delay;
    const who = r.tid === clientPid ? 0 : 1;
    waits++;
    waited += r.delay;
    for (const o of byCpu.get(r.cpu)) {
      const a = Math.max(o.t - o.run, woken), b = Math.min(o.t, start);
      if (b <= a) continue;
      const k = classOf(o, serverPid, clientPid);
      if (!charge.has(k)) charge.set(k, [0, 0]);
      charge.get(k)[who] += b - a;
    }
  }
  return { waits, waited, charge };
}

async function oneRun(run, perfWhy) {
  const srv = await startMayflyd('schedblame', [], { session: true });
  const cl = await MongoClient.connect(srv.uri, { maxPoolSize: 4 });
  let perf = null;
  const perfFile = path.join(srv.dir, 'sched.data');
  try {
    const db = cl.db('blame');
    const coll = db.collection('c');
    await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    /* The instant: after the load (4 loaders), the fsync and 4 s of idle pairs. */
    const t0 = Date.now();
    const at = new Date(t0 + 10000 + Math.ceil(N / 100000) * 1000);
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let s = w * 1000; s < N; s += 4000) {
        const n = Math.min(1000, N - s);
        await coll.insertMany(Array.from({ length: n }, (_, i) => ({ _id: s + i, at, v: 'x'.repeat(32) })), { ordered: false });
      }
    }));
    await cl.db('admin').command({ fsync: 1 });
    if (at.getTime() - Date.now() < 5000) throw new Error('the load took too long: use fewer --docs');

    const rm = new RawMongo(srv.port, 'blame');
    await rm.connect();
    await rm.cmd({ insert: 'fg', documents: [{ _id: -1 }] });
    const idle = [], during = [];
    let phase = null, stop = false, k = 0;
    const everyMs = 2000 / RATE;
    const loop = (async () => {
      const start = performance.now();
      for (let i = 0; !stop; i++) {
        const wait = start + i * everyMs - performance.now();
        if (wait >= 1) await sleep(wait);
        let a = performance.now();
        await rm.cmd({ insert: 'fg', documents: [{ _id: k++ }] });
        if (phase) phase.push(performance.now() - a);
        a = performance.now();
        await rm.cmd({ find: 'fg', filter: { _id: Math.floor(Math.random() * k) }, limit: 1, singleBatch: true });
        if (phase) phase.push(performance.now() - a);
      }
    })();
    await sleep(300);
    phase = idle;
    await sleep(4000);
    phase = null;
    while (Date.now() < at.getTime() - 400) await sleep(5);
    if (!perfWhy) {
      perf = spawn('perf', ['sched', 'record', '-a', '-o', perfFile], { stdio: 'ignore' });
      await sleep(250);
    }
    while (Date.now() < at.getTime()) await sleep(1);
    phase = during;
    const tAt = Date.now();
    while ((await coll.estimatedDocumentCount()) > 0) await sleep(20);
    const secs = (Date.now() - tAt) / 1000;
    phase = null;
    stop = true;
    await loop;
    rm.close();
    if (perf) {
      const done = perf.exitCode !== null || perf.signalCode !== null; /* perf may have failed at start */
      const exited = done ? Promise.resolve() : new Promise((r) => perf.once('exit', r));
      perf.kill('SIGINT');
      await exited;
      perf = null;
    }
    const qi = quantiles(idle), qd = quantiles(during);
    const res = { run, rate: N / secs, secs, idle: qi, during: qd, ratio: qd.p99 / qi.p99, blame: null };
    if (!perfWhy && fs.existsSync(perfFile)) {
      const rows = timehist(perfFile);
      /* The expiry's window: the TTL deleters' first to last run (the monitor alone when it had no deleter). */
      const ttl = rows.filter((r) => r.pid === srv.proc.pid && r.comm.startsWith('mf-ttl'));
      const busy = ttl.filter((r) => r.run > 0.0002);
      if (busy.length) res.blame = blame(rows, srv.proc.pid, process.pid, busy[0].t - busy[0].run, busy[busy.length - 1].t);
    }
    return res;
  } finally {
    if (perf) perf.kill('SIGINT');
    await cl.close();
    await stopServer(srv);
  }
}

async function main() {
  const m = machine();
  const perfWhy = perfUsable();
  console.log(`machine: nproc ${m.nproc}, ${m.model}, ${m.kernel}, load average at start ${loadavg()}`);
  console.log(`mayflyd ${mayflydPath()} (source ${sourceRev()}); docs ${fmtInt(N)}, client ${fmtInt(RATE)} operations/s, ` +
    `waits over ${WAIT_MS} ms charged; ${perfWhy ? `no scheduler trace (${perfWhy})` : 'perf sched over each expiry'}`);
  const results = [];
  for (let run = 1; run <= RUNS; run++) {
    const r = await oneRun(run, perfWhy);
    log(`run ${run}: ${fmtInt(r.rate)} deletions/s; client p99 idle ${r.idle.p99.toFixed(3)} ms, during ${r.during.p99.toFixed(3)} ms ` +
      `(${r.ratio.toFixed(2)}x)`);
    results.push(r);
  }
  console.log('');
  console.log('paced client during a mass expiry, one row per run');
  printTable([['run', 'deletions/s', 'idle p50 / p99 (ms)', 'during p50 / p99 (ms)', 'p99 during/idle',
    `waits > ${WAIT_MS} ms (total)`], '-', ...results.map((r) => [String(r.run), fmtInt(r.rate),
    `${r.idle.p50.toFixed(3)} / ${r.idle.p99.toFixed(3)}`, `${r.during.p50.toFixed(3)} / ${r.during.p99.toFixed(3)}`,
    `${r.ratio.toFixed(2)}x`, r.blame ? `${r.blame.waits} (${(r.blame.waited * 1e3).toFixed(1)} ms)` : 'n/a'])], { rightAlign: true });
  const classes = new Map();
  for (const r of results) {
    if (!r.blame) continue;
    for (const [k, v] of r.blame.charge) {
      if (!classes.has(k)) classes.set(k, [0, 0]);
      classes.get(k)[0] += v[0];
      classes.get(k)[1] += v[1];
    }
  }
  if (classes.size) {
    const total = [...classes.values()].reduce((a, v) => a + v[0] + v[1], 0);
    const ms = (x) => (x * 1e3).toFixed(1);
    console.log('');
    console.log('what ran on the CPU while a thread on the request\'s path waited more than ' +
      `${WAIT_MS} ms for it, all runs (ms)`);
    printTable([['ran meanwhile', 'client main thread waited', 'server I/O thread or worker waited', 'share'], '-',
      ...[...classes.entries()].sort((a, b) => b[1][0] + b[1][1] - a[1][0] - a[1][1])
        .map(([k, v]) => [k, ms(v[0]), ms(v[1]), `${(((v[0] + v[1]) / total) * 100).toFixed(0)} %`])], { rightAlign: true });
  }
  console.log(`load average at end ${loadavg()}`);
}

runMain(main);
