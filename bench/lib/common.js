'use strict';
/*
 * What every benchmark in bench/ needs before and after its measurements, in
 * one place: the command line, the mayflyd binary, starting servers (mayflyd,
 * redis-server) on free loopback ports with fresh temporary directories, the
 * machine's description, batched loads with several batches in flight,
 * percentiles, CPU time and memory of a process from /proc, a table printer,
 * and killing and removing everything at exit. bench/lib/common.sh is the
 * same for the .sh wrappers (build, npm ci, apt-get).
 *
 * Design. A benchmark calls runMain(main) once. It installs the clean-up on
 * 'exit', SIGINT, SIGTERM and SIGHUP (exit status 130), runs main, and on an
 * error prints it (with the last mayflyd stderr lines seen), cleans up and
 * exits 1. Everything that needs cleaning is registered here when it is made
 * and forgotten when a benchmark stops it itself:
 *   - servers of tests/clients/harness.js (MayflyServer), made by
 *     mayflyServer() and stopped by stopMayfly(): the single-server benches;
 *   - processes spawned by spawnServer() (startMayflyd(), startRedis(), or a
 *     benchmark's own, e.g. PostgreSQL), stopped by stopServer() or stopAll();
 *   - directories made by makeTempDir(), removed by removeTempDir().
 * cleanupSync() is synchronous so that it can run from 'exit': each live
 * process gets its kill signal (SIGKILL unless it asked for another, such as
 * PostgreSQL's SIGQUIT, which is then given up to 5 s before SIGKILL), then
 * every directory is removed. It can run any number of times.
 *
 * Two percentile definitions are kept because the benches' figures were
 * defined with them: percentile() takes element floor(q * n) of a sorted
 * array (foundations, stall, ts), quantiles() the nearest rank
 * ceil(q * n) - 1 (latency, ttl).
 */
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { MayflyServer, freePort, tryConnect } = require('../../tests/clients/harness');

const REPO = path.resolve(__dirname, '..', '..');
const START_DEADLINE_MS = 20000;

/* ---------- command line ---------- */

/*
 * Readers of `--name value` options. With prog, a bad number prints
 * "<prog>: --name needs a positive number" and exits 2; without, it throws
 * "bad value for --name" (which runMain reports, exit status 1).
 */
function options(prog = null) {
  const bad = (name) => {
    if (prog) {
      console.error(`${prog}: --${name} needs a positive number`);
      process.exit(2);
    }
    throw new Error(`bad value for --${name}`);
  };
  return {
    /* A positive number, or dflt when the option is absent. */
    num(name, dflt) {
      const i = process.argv.indexOf(`--${name}`);
      if (i < 0) return dflt;
      const v = Number(process.argv[i + 1]);
      if (!Number.isFinite(v) || v <= 0) bad(name);
      return v;
    },
    /* A string, or dflt when the option is absent. */
    str(name, dflt) {
      const i = process.argv.indexOf(`--${name}`);
      if (i < 0) return dflt;
      if (i + 1 >= process.argv.length) throw new Error(`--${name} needs a value`);
      return process.argv[i + 1];
    },
  };
}

/*
 * The mayflyd binary: $MAYFLYD (a relative path from the current directory,
 * else from the repository root), default build/mayflyd, the release build.
 */
function mayflydPath() {
  const p = process.env.MAYFLYD;
  if (!p) return path.join(REPO, 'build', 'mayflyd');
  if (path.isAbsolute(p)) return p;
  const here = path.resolve(p);
  return fs.existsSync(here) ? here : path.join(REPO, p);
}

/* Extra mayflyd flags from $MAYFLYD_ARGS ("--setParameter name=value ..."). */
function mayflydExtraArgs() {
  return (process.env.MAYFLYD_ARGS || '').split(/\s+/).filter(Boolean);
}

/* ---------- time and small helpers ---------- */

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/* Monotonic milliseconds. */
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
/* console.log with the time of day (UTC, ms). */
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 23)}]`, ...a);

/* Deterministic PRNG (xorshift32): the same sequence every run. Returns () => [0, 1). */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}

/*
 * Calls fn(start, end) for consecutive ranges [start, end) of [0, n), each at
 * most batch long, with up to inflight calls running at once (a loader:
 * insertMany of a batch, a pipelined write ...). Ranges are handed out in
 * order, so fn may draw from a shared PRNG before its first await.
 */
async function inBatches(n, batch, inflight, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: inflight }, async () => {
    while (next < n) {
      const start = next;
      const end = Math.min(n, start + batch);
      next = end;
      await fn(start, end);
    }
  }));
}

/* ---------- percentiles ---------- */

/* Element floor(q * n) of an ascending array (NaN if empty). */
function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/* An ascending copy of an array of numbers. */
const sortedCopy = (xs) => [...xs].sort((a, b) => a - b);

/* Nearest-rank p50, p90, p99 and max of numbers (an array or a typed array; a sorted copy is made). */
function quantiles(values) {
  const a = Float64Array.from(values).sort();
  const q = (p) => (a.length ? a[Math.min(a.length - 1, Math.max(0, Math.ceil(p * a.length) - 1))] : NaN);
  return { n: a.length, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: a.length ? a[a.length - 1] : NaN };
}

/* ---------- formatting ---------- */

const fmtInt = (x) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : Math.round(x).toLocaleString('en-US'));
/* The load average, "0.12 0.34 0.56". */
const loadavg = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

/*
 * Prints rows (arrays of cells) as a table framed with + - |; a row '-' is a
 * rule. Cells are left-aligned, or, with rightAlign, all but the first column
 * right-aligned.
 */
function printTable(rows, { rightAlign = false } = {}) {
  const cols = rows.find((r) => r !== '-').length;
  const w = new Array(cols).fill(0);
  for (const r of rows) if (r !== '-') for (let k = 0; k < cols; k++) w[k] = Math.max(w[k], String(r[k]).length);
  const line = `+${w.map((x) => '-'.repeat(x + 2)).join('+')}+`;
  const cell = (c, k) => (rightAlign && k > 0 ? String(c).padStart(w[k]) : String(c).padEnd(w[k]));
  console.log(line);
  for (const r of rows) {
    if (r === '-') { console.log(line); continue; }
    console.log(`| ${r.map(cell).join(' | ')} |`);
  }
  console.log(line);
}

/* ---------- the machine ---------- */

/* {nproc, model (CPU), kernel, load (loadavg array)}: the figures mean little without them. */
function machine() {
  let model = 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) model = m[1].trim();
  } catch (_) { /* not Linux */ }
  let nproc = os.cpus().length;
  try { nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim()) || nproc; } catch (_) { /* keep */ }
  return { nproc, model, kernel: `${os.type()} ${os.release()} ${os.arch()}`, load: os.loadavg() };
}

/* The checkout's commit, and whether src/ has uncommitted changes (the .sh wrappers build the binary from it). */
function sourceRev() {
  try {
    const rev = execFileSync('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['-C', REPO, 'status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).trim();
    return dirty ? `${rev} + uncommitted changes in src/` : rev;
  } catch (_) { return 'unknown'; }
}

/* ---------- /proc ---------- */

/* A "Key:   N kB" field of /proc/<pid>/status (VmRSS, VmHWM ...) in kB, or null. */
function procStatusKb(pid, key) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : null;
  } catch (_) { return null; }
}

let clkTck = null;
/* Clock ticks per second, the unit of /proc/<pid>/stat's CPU times. */
function clockTicks() {
  if (clkTck === null) {
    try { clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100; } catch (_) { clkTck = 100; }
  }
  return clkTck;
}

/* /proc/<pid>/stat fields after the command name: [state, ppid, ...] (f[11] utime, f[12] stime,
 * f[13] cutime, f[14] cstime); null if the process is gone. */
function procStat(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch (_) { return null; }
}

/* True once pid has exited (gone, or a zombie nobody has reaped yet). */
function procDead(pid) {
  const st = procStat(pid);
  return !st || st[0] === 'Z';
}

/* Direct children of pid (postgres: the backends and auxiliary processes of the postmaster). */
function procChildren(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch (_) { /* kernel without CONFIG_PROC_CHILDREN: scan */ }
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const st = procStat(d);
    if (st && Number(st[1]) === pid) out.push(Number(d));
  }
  return out;
}

/* CPU seconds (user + system) of one process, its own threads only; NaN if gone. */
function procCpuSec(pid) {
  const st = procStat(pid);
  return st ? (Number(st[11]) + Number(st[12])) / clockTicks() : NaN;
}

/* CPU seconds (user + system) of a server: the process (all its threads), its
 * reaped children (cutime + cstime: postgres backends that have exited) and its
 * live children. For mayflyd and redis-server only the first term is non-zero. */
function cpuSec(pid) {
  const ticks = (st) => (st ? Number(st[11]) + Number(st[12]) + Number(st[13]) + Number(st[14]) : 0);
  let t = ticks(procStat(pid));
  for (const c of procChildren(pid)) t += ticks(procStat(c));
  return t / clockTicks();
}

/* CPU used so far by process pid: {ticksMs: (utime+stime) in ms from
 * /proc/<pid>/stat (10 ms a tick), schedNs: sum of its threads' schedstat run times}. */
function cpuOf(pid) {
  let ticksMs = NaN;
  let schedNs = 0;
  const st = procStat(pid);
  if (st) ticksMs = ((Number(st[11]) + Number(st[12])) * 1000) / clockTicks();
  try {
    for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
      try { schedNs += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]); } catch (_) { /* thread exited */ }
    }
  } catch (_) { schedNs = NaN; }
  return { ticksMs, schedNs };
}

/* ---------- what is cleaned up at exit ---------- */

const servers = new Set();    /* MayflyServer instances */
const children = new Set();   /* spawnServer() entries */
const tempDirs = new Set();
let lastTail = '';            /* the last mayflyd stderr lines seen by stopMayfly(), printed on an error */

/* A fresh directory under the system temp dir, removed at exit. */
function makeTempDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(d);
  return d;
}

function removeTempDir(d) {
  try { fs.rmSync(d, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  tempDirs.delete(d);
}

/* A harness MayflyServer (opts as its constructor's: args, dbpath) for the release binary, not yet started. */
function mayflyServer(opts = {}) {
  const s = new MayflyServer({ binary: mayflydPath(), ...opts });
  servers.add(s);
  return s;
}

/*
 * Stops a mayflyServer() (SIGTERM; SIGKILL after the harness's deadline) and
 * removes its dbpath. An exit that was forced or not clean is printed with the
 * server's last stderr lines. Returns the exit {code, signal[, forced]}.
 */
async function stopMayfly(s) {
  if (!servers.has(s)) return null;
  lastTail = s.stderrTail(30);
  const exit = await s.stop();
  if (exit && (exit.forced || (exit.code !== 0 && exit.code !== null))) {
    console.log(`server exit: ${JSON.stringify(exit)}`);
    console.log(lastTail);
  }
  try { s.cleanup(); } catch (_) { /* best effort */ }
  servers.delete(s);
  return exit;
}

/*
 * Spawns a server process: stderr kept (the last chunks, in entry.tail) for
 * start-up errors, stdout dropped. opts: cwd; uid/gid to run as (postgres
 * refuses root); stopSignal for a graceful stop (default SIGTERM), killSignal
 * for the synchronous clean-up (default SIGKILL); session: start it in a
 * session of its own (setsid), as a service manager or another terminal
 * would, so that Linux's scheduler weighs it as a program of its own (its
 * autogroup) and not as a part of this one's. Returns the entry
 * {name, proc, tail, exited}; exited is set when it ends.
 */
function spawnServer(name, bin, args, opts = {}) {
  const ids = opts.uid !== undefined ? { uid: opts.uid, gid: opts.gid } : {};
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: opts.cwd, detached: !!opts.session, ...ids });
  const entry = { name, proc, tail: [], exited: null,
    stopSignal: opts.stopSignal || 'SIGTERM', killSignal: opts.killSignal || 'SIGKILL' };
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (c) => {
    entry.tail.push(c);
    if (entry.tail.length > 50) entry.tail.splice(0, entry.tail.length - 25);
  });
  proc.on('exit', (code, signal) => { entry.exited = { code, signal }; });
  proc.on('error', (e) => { entry.exited = { error: e.message }; });
  children.add(entry);
  return entry;
}

/* Waits until port accepts TCP connections (ms, default 20 s, at most); throws with the stderr tail if the process exits. */
async function waitUp(entry, port, ms = START_DEADLINE_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (entry.exited) {
      throw new Error(`${entry.name} exited during start-up ${JSON.stringify(entry.exited)}\n${entry.tail.join('')}`);
    }
    if (await tryConnect(port)) return;
    if (Date.now() > deadline) throw new Error(`${entry.name} did not start on port ${port}`);
    await sleep(50);
  }
}

/* Graceful stop of one spawnServer() entry: its stop signal, up to ms, then SIGKILL. */
async function stopServer(entry, ms = 10000) {
  if (!entry.exited) entry.proc.kill(entry.stopSignal);
  const deadline = Date.now() + ms;
  while (!entry.exited && Date.now() < deadline) await sleep(50);
  if (!entry.exited) { try { entry.proc.kill('SIGKILL'); } catch (_) { /* gone */ } }
  children.delete(entry);
}

/*
 * mayflyd (mayflydPath()) on a free loopback port with a fresh dbpath
 * (<tmp>/<prefix>XXXXXX, also its working directory), args and then
 * $MAYFLYD_ARGS after the port, address and dbpath; resolves once the port
 * accepts connections; opts.session as spawnServer's. opts.reuse, an entry
 * this returned and since stopped, restarts on its port and directory
 * instead (the data kept). opts.wrapper, a command line such as
 * ['valgrind', '--tool=callgrind'], runs mayflyd under that program (same
 * process id), with opts.startMs (default 20 s) to come up. Returns the
 * spawnServer() entry plus port, dir, uri.
 */
async function startMayflyd(prefix, args = [], opts = {}) {
  const bin = mayflydPath();
  if (!fs.existsSync(bin)) throw new Error(`mayflyd not found at ${bin} (run make -j2)`);
  const port = opts.reuse ? opts.reuse.port : await freePort();
  const dir = opts.reuse ? opts.reuse.dir : makeTempDir(prefix);
  const argv = ['--port', String(port), '--bind_ip', '127.0.0.1', '--dbpath', dir, ...args, ...mayflydExtraArgs()];
  const w = opts.wrapper || [];
  const entry = w.length ? spawnServer('mayflyd', w[0], [...w.slice(1), bin, ...argv], { cwd: dir, session: opts.session })
    : spawnServer('mayflyd', bin, argv, { cwd: dir, session: opts.session });
  Object.assign(entry, { port, dir, uri: `mongodb://127.0.0.1:${port}/?directConnection=true` });
  await waitUp(entry, port, opts.startMs);
  return entry;
}

/*
 * redis-server ($REDIS_SERVER, default redis-server on PATH) on a free
 * loopback port with a fresh directory, at its defaults except: nothing saved
 * (--save '' --appendonly no), no protected mode; then args; opts.session as
 * spawnServer's. Returns the spawnServer() entry plus port and dir.
 */
async function startRedis(prefix, args = [], opts = {}) {
  const port = await freePort();
  const dir = makeTempDir(prefix);
  const entry = spawnServer('redis-server', process.env.REDIS_SERVER || 'redis-server', ['--port', String(port),
    '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no',
    ...args], { cwd: dir, session: opts.session });
  Object.assign(entry, { port, dir });
  await waitUp(entry, port);
  return entry;
}

/* Synchronous, so that it can run from 'exit': kills what is left, removes the directories. */
function cleanupSync() {
  for (const s of servers) {
    if (s.proc && !s.exitInfo) { try { s.proc.kill('SIGKILL'); } catch (_) { /* already gone */ } }
    try { s.cleanup(); } catch (_) { /* best effort */ }
  }
  servers.clear();
  const live = [...children].filter((c) => !c.exited && c.proc.pid);
  for (const c of live) { try { c.proc.kill(c.killSignal); } catch (_) { /* gone */ } }
  /* A kill signal other than SIGKILL (postgres: SIGQUIT ends its backends too) gets 5 s. */
  const deadline = Date.now() + 5000;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  while (live.some((c) => c.killSignal !== 'SIGKILL' && !procDead(c.proc.pid)) && Date.now() < deadline) {
    Atomics.wait(nap, 0, 0, 20);
  }
  for (const c of live) { if (!procDead(c.proc.pid)) { try { c.proc.kill('SIGKILL'); } catch (_) { /* gone */ } } }
  children.clear();
  for (const d of tempDirs) {
    try { fs.rmSync(d, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  }
  tempDirs.clear();
}

/* Graceful stop of everything: the harness servers, then each spawned server's stop signal, up to ms; then clean-up. */
async function stopAll(ms = 10000) {
  for (const s of [...servers]) await stopMayfly(s);
  const list = [...children];
  for (const c of list) if (!c.exited) c.proc.kill(c.stopSignal);
  const deadline = Date.now() + ms;
  while (list.some((c) => !c.exited) && Date.now() < deadline) await sleep(50);
  cleanupSync();
}

/*
 * Runs main() with the clean-up installed: on success everything left is
 * stopped gracefully and the process exits 0; on an error it is printed (and
 * the last mayflyd stderr lines), everything is killed and the exit status is 1.
 */
function runMain(main) {
  process.on('exit', cleanupSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => { cleanupSync(); process.exit(130); });
  }
  main().then(async () => { await stopAll(); process.exit(0); }, (e) => {
    console.error(e);
    if (lastTail) console.error(`--- mayflyd stderr tail ---\n${lastTail}`);
    cleanupSync();
    process.exit(1);
  });
}

/*
 * The benches' socket clients (RawMongo, Resp, RespPipe, latency_bench's
 * Conn) connect the same way: TCP to 127.0.0.1:port with Nagle off, onData
 * gets every chunk, onClose runs when the socket closes (the client fails
 * what it has in flight there). Resolves with the socket once connected,
 * rejects with a connect error.
 */
function connectLoopback(port, onData, onClose) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ port, host: '127.0.0.1' }, () => resolve(sock));
    sock.setNoDelay(true);
    sock.once('error', reject);
    sock.on('data', onData);
    sock.on('close', onClose);
  });
}

module.exports = {
  REPO, options, mayflydPath, mayflydExtraArgs,
  sleep, nowMs, log, rng, inBatches,
  percentile, sortedCopy, quantiles,
  fmtInt, loadavg, printTable,
  machine, sourceRev,
  procStatusKb, procStat, procChildren, procCpuSec, cpuSec, cpuOf,
  makeTempDir, removeTempDir, mayflyServer, stopMayfly,
  spawnServer, waitUp, stopServer, startMayflyd, startRedis, stopAll, cleanupSync, runMain,
  freePort, connectLoopback,
};
