'use strict';
/*
 * Sizing from what the process is granted, as mongod 8.0 does it.
 *
 * The WiredTiger cache (serverStatus().wiredTiger.cache["maximum bytes
 * configured"]), as mongod's WiredTigerUtil::getMainCacheSizeMB sizes it
 * (jstests/noPassthrough/wt_cache_size.js covers the same cases):
 *   - by default max((memLimitMB - 1024) * 0.5, 256) MB, memLimitMB being
 *     hostInfo's system.memLimitMB (RAM, or a lower cgroup memory limit);
 *   - --wiredTigerCacheSizeGB / storage.wiredTiger.engineConfig.cacheSizeGB:
 *     GB * 1024 MB, 0.25 to 10000, the result capped at 10,000,000 MB
 *     (mongod's kMaxSizeCacheMB: 10000 GB gives 10,000,000 MB, not 10,240,000);
 *   - --wiredTigerCacheSizePct / storage.wiredTiger.engineConfig.cacheSizePct:
 *     a fraction of memLimitMB, above 0 and at most 0.8, never below 256 MB;
 *     not together with cacheSizeGB;
 *   - --inMemory with --inMemorySizeGB / storage.inMemory.engineConfig.inMemorySizeGB:
 *     the same as cacheSizeGB; without it, the default formula.
 * Every size is a whole number of MB (floor). A value out of range, not a
 * number, or both GB and Pct stop start-up with a non-zero exit status and
 * the option named on stderr. getCmdLineOpts().parsed shows the option where
 * mongod puts it.
 *
 * hostInfo: system.memLimitMB <= system.memSizeMB, and
 * system.numCoresAvailableToProcess, the CPUs in the affinity mask (1 under
 * `taskset -c N`); the TTL monitor's default number of deleting threads
 * (serverStatus().metrics.ttl.workers, ttlMonitorWorkers 0) follows the
 * CPUs the process may use, not the machine's.
 */
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const MB = 1048576;
const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-sizing-'));
function conf(name, text) {
  const f = path.join(DIR, name);
  fs.writeFileSync(f, text);
  return f;
}

/* ---- What this machine grants the process, read the way the kernel shows it ---- */

/* The CPUs in a process's affinity mask, from /proc/<pid>/status (Cpus_allowed_list, e.g. "0-3,6"). */
function affinityList(pid = 'self') {
  const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('Cpus_allowed_list:'));
  const cpus = [];
  for (const part of line.split(':')[1].trim().split(',')) {
    const [a, b] = part.split('-').map(Number);
    for (let c = a; c <= (b === undefined ? a : b); c++) cpus.push(c);
  }
  return cpus;
}

function readOr(file, dflt) {
  try { return fs.readFileSync(file, 'utf8').trim(); } catch (_) { return dflt; }
}

/* The directories of this process's cgroup for a v1 controller (or v2 when controller is ''), the mount root first. */
function cgroupDirs(controller) {
  const lines = readOr('/proc/self/cgroup', '').split('\n').filter(Boolean);
  const dirs = [];
  for (const l of lines) {
    const [, ctrls, rel] = l.split(':');
    const v2 = ctrls === '';
    if (controller === '' ? !v2 : !ctrls.split(',').includes(controller)) continue;
    const base = controller === '' ? '/sys/fs/cgroup' : `/sys/fs/cgroup/${controller}`;
    let p = base;
    dirs.push(p);
    for (const part of rel.split('/').filter(Boolean)) {
      p = path.join(p, part);
      dirs.push(p);
    }
  }
  return dirs;
}

/* The lowest cgroup memory limit (bytes) over the process's cgroup and those above it, or Infinity. */
function cgroupMemLimit() {
  let lim = Infinity;
  for (const d of cgroupDirs('')) {
    const v = readOr(path.join(d, 'memory.max'), 'max');
    if (v !== 'max' && Number.isFinite(Number(v))) lim = Math.min(lim, Number(v));
  }
  for (const d of cgroupDirs('memory')) {
    const v = Number(readOr(path.join(d, 'memory.limit_in_bytes'), 'NaN'));
    if (Number.isFinite(v)) lim = Math.min(lim, v);
  }
  return lim;
}

/* The lowest cgroup CPU quota in CPUs (quota / period), or Infinity when none. */
function cgroupCpuQuota() {
  let q = Infinity;
  for (const d of cgroupDirs('')) {
    const [quota, period] = readOr(path.join(d, 'cpu.max'), 'max').split(/\s+/);
    if (quota !== 'max' && Number(period) > 0) q = Math.min(q, Number(quota) / Number(period));
  }
  for (const d of cgroupDirs('cpu')) {
    const quota = Number(readOr(path.join(d, 'cpu.cfs_quota_us'), '-1'));
    const period = Number(readOr(path.join(d, 'cpu.cfs_period_us'), '0'));
    if (quota > 0 && period > 0) q = Math.min(q, quota / period);
  }
  return q;
}

const MEM_TOTAL_MB = Math.floor(Number(/MemTotal:\s+(\d+) kB/.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024);
const MEM_LIMIT_MB = Math.min(MEM_TOTAL_MB, Math.floor(cgroupMemLimit() / MB));
const AFFINITY = affinityList();
const TTL_MAX_WORKERS = 16; /* ttlMonitorWorkers' maximum */
/* The TTL deleters a default monitor uses: the CPUs the process may use (affinity, lowered to a CPU quota), at most 16. */
function ttlWorkersFor(cpus) {
  return Math.max(1, Math.min(TTL_MAX_WORKERS, cpus, Math.ceil(cgroupCpuQuota())));
}

/* mongod's default: max((memLimitMB - 1024) * 0.5, 256) MB, floored. */
const defaultCacheMB = (memLimitMB) => Math.floor(Math.max((memLimitMB - 1024) * 0.5, 256));

/* ---- Servers ---- */

async function withServer(opts, fn) {
  const s = new h.MayflyServer(Array.isArray(opts) ? { args: opts } : opts);
  await s.start();
  try {
    const c = new MongoClient(s.uri);
    try {
      await fn(c.db('admin'), s);
    } finally { await c.close(true); }
  } finally {
    const info = await s.stop();
    s.cleanup();
    assert.equal(info && info.code, 0, `clean shutdown: ${JSON.stringify(info)}`);
  }
}

/* Starts a server with args, returns what it reports: cache bytes, hostInfo.system, parsed options, storage engine, metrics.ttl. */
async function sizing(args, opts = {}) {
  let out;
  await withServer({ ...opts, args }, async (admin, s) => {
    const st = await admin.command({ serverStatus: 1 });
    const hi = await admin.command({ hostInfo: 1 });
    const cl = await admin.command({ getCmdLineOpts: 1 });
    out = {
      cacheBytes: Number(st.wiredTiger.cache['maximum bytes configured']),
      engine: st.storageEngine.name,
      ttl: st.metrics.ttl,
      system: hi.system,
      parsed: cl.parsed,
      pid: s.pid,
      serverAffinity: affinityList(s.pid),
    };
  });
  return out;
}

/* Runs the server expecting it to refuse to start: a non-zero exit status of its own, stderr matching want. */
async function refuses(args, want) {
  const dbpath = fs.mkdtempSync(path.join(DIR, 'refused-'));
  const port = await h.freePort();
  const r = spawnSync(h.binaryPath(), ['--port', String(port), '--bind_ip', '127.0.0.1', '--dbpath', dbpath, ...args],
    { encoding: 'utf8', timeout: 8000 });
  const what = `${args.join(' ')}: status ${r.status} signal ${r.signal}\nstderr: ${r.stderr}`;
  assert.equal(typeof r.status, 'number', `the server exited by itself (not still running) for ${what}`);
  assert.notEqual(r.status, 0, `non-zero exit status for ${what}`);
  assert.match(r.stderr, want, `stderr names the option for ${what}`);
  /* Refused for its value, not as an option the server does not know. */
  assert.doesNotMatch(r.stderr, /unrecogni[sz]ed option|unknown option/i, `the option is known: ${what}`);
}

/* ---- The default ---- */

h.test('hostInfo: memSizeMB is RAM, memLimitMB the lower of it and any cgroup limit, numCoresAvailableToProcess the affinity mask; the default cache is max((memLimitMB - 1024) / 2, 256) MB; TTL workers follow the usable CPUs', { timeout: 60000 }, async () => {
  const r = await sizing([]);
  const sys = r.system;
  const memSize = Number(sys.memSizeMB);
  const memLimit = Number(sys.memLimitMB);
  assert.ok(Number.isInteger(memSize) && memSize > 0, `memSizeMB ${sys.memSizeMB}`);
  assert.ok(Number.isInteger(memLimit) && memLimit > 0, `memLimitMB ${sys.memLimitMB}`);
  assert.ok(memLimit <= memSize, `memLimitMB ${memLimit} <= memSizeMB ${memSize}`);
  assert.equal(memSize, MEM_TOTAL_MB, 'memSizeMB is /proc/meminfo MemTotal in MB');
  assert.equal(memLimit, MEM_LIMIT_MB, `memLimitMB is min(MemTotal, the cgroup memory limit) in MB (cgroup limit ${cgroupMemLimit()} bytes)`);
  assert.ok('numCoresAvailableToProcess' in sys, `hostInfo.system has numCoresAvailableToProcess: ${JSON.stringify(sys)}`);
  assert.deepEqual(r.serverAffinity, AFFINITY, 'the server inherited the test\'s affinity mask');
  assert.equal(Number(sys.numCoresAvailableToProcess), AFFINITY.length, 'numCoresAvailableToProcess: the CPUs in the affinity mask');

  assert.equal(r.cacheBytes, defaultCacheMB(memLimit) * MB,
    `default cache: max(floor((${memLimit} - 1024) / 2), 256) = ${defaultCacheMB(memLimit)} MB, got ${r.cacheBytes / MB} MB`);
  assert.equal(r.engine, 'wiredTiger');
  assert.equal(r.parsed.storage.wiredTiger, undefined, 'nothing given, nothing under parsed.storage.wiredTiger');

  assert.equal(r.ttl.workers, ttlWorkersFor(AFFINITY.length),
    `metrics.ttl.workers: the monitor deletes with one thread per usable CPU (${AFFINITY.length} in the affinity mask)`);
});

h.test('under taskset -c <one CPU>: numCoresAvailableToProcess 1 and the TTL monitor deletes with 1 thread', { timeout: 60000 }, async (t) => {
  const ts = ['/usr/bin/taskset', '/bin/taskset'].find((p) => fs.existsSync(p));
  if (!ts) { t.skip('taskset (util-linux) is not installed'); return; }
  const cpu = AFFINITY[0];
  const r = await sizing([], { wrapper: [ts, '-c', String(cpu)] });
  assert.deepEqual(r.serverAffinity, [cpu], 'the server runs on one CPU');
  assert.equal(Number(r.system.numCoresAvailableToProcess), 1);
  assert.equal(r.ttl.workers, 1, 'metrics.ttl.workers: one deleting thread on one CPU');
  /* Memory is not CPU: the default cache is the same formula. */
  assert.equal(r.cacheBytes, defaultCacheMB(Number(r.system.memLimitMB)) * MB);
});

/*
 * A cgroup of its own with a CPU quota of half a CPU and a 768 MB memory
 * limit (created here when this runs as root on a writable cgroup tree, v1
 * or v2; skipped otherwise): the server sizes itself from what it is
 * granted, not from the machine. One CPU (0.5 rounded up): one TTL thread,
 * the data pool's soft cap at its floor of 16; 768 MB: memLimitMB 768 and
 * the cache at mongod's floor, 256 MB (768 - 1024 is below it).
 */
function makeCgroup() {
  const name = `mf-sizing-${process.pid}`;
  const made = [];
  const tryWrite = (f, v) => { fs.writeFileSync(f, v); };
  try {
    if (fs.existsSync('/sys/fs/cgroup/cgroup.controllers')) {
      const ctl = fs.readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8');
      if (!/\bcpu\b/.test(ctl) || !/\bmemory\b/.test(ctl)) return null;
      tryWrite('/sys/fs/cgroup/cgroup.subtree_control', '+cpu +memory');
      const dir = `/sys/fs/cgroup/${name}`;
      fs.mkdirSync(dir);
      made.push(dir);
      tryWrite(`${dir}/cpu.max`, '50000 100000');
      tryWrite(`${dir}/memory.max`, String(768 * MB));
      return { procs: [`${dir}/cgroup.procs`], dirs: made };
    }
    const cpuRoot = ['/sys/fs/cgroup/cpu,cpuacct', '/sys/fs/cgroup/cpu'].find((d) => fs.existsSync(`${d}/cpu.cfs_quota_us`));
    const memRoot = '/sys/fs/cgroup/memory';
    if (!cpuRoot || !fs.existsSync(`${memRoot}/memory.limit_in_bytes`)) return null;
    for (const root of [cpuRoot, memRoot]) {
      fs.mkdirSync(`${root}/${name}`);
      made.push(`${root}/${name}`);
    }
    tryWrite(`${cpuRoot}/${name}/cpu.cfs_period_us`, '100000');
    tryWrite(`${cpuRoot}/${name}/cpu.cfs_quota_us`, '50000');
    tryWrite(`${memRoot}/${name}/memory.limit_in_bytes`, String(768 * MB));
    return { procs: made.map((d) => `${d}/cgroup.procs`), dirs: made };
  } catch (_) {
    for (const d of made.reverse()) { try { fs.rmdirSync(d); } catch (_) { /* best effort */ } }
    return null;
  }
}

h.test('in a cgroup with half a CPU and 768 MB: one CPU granted (one TTL thread, soft cap 16), memLimitMB 768, cache 256 MB', { timeout: 60000 }, async (t) => {
  const cg = makeCgroup();
  if (cg === null) { t.skip('no writable cgroup tree with cpu and memory controllers (not root, or a read-only one)'); return; }
  try {
    /* The wrapper joins the cgroups, then execs the server (its pid stays the server's). */
    const join = cg.procs.map((f) => `echo $$ > ${f}`).join(' && ');
    const wrapper = ['/bin/sh', '-c', `${join} && exec "$0" "$@"`];
    let w;
    const r = await sizing([], { wrapper });
    await withServer({ wrapper, args: [] }, async (admin) => {
      w = (await admin.command({ serverStatus: 1 })).network.workers;
    });
    assert.equal(Number(r.system.memLimitMB), 768, 'memLimitMB: the cgroup memory limit');
    assert.equal(r.cacheBytes, 256 * MB, `cache at mongod's floor: got ${r.cacheBytes / MB} MB`);
    assert.equal(r.ttl.workers, 1, 'one TTL thread for half a CPU');
    assert.equal(w.cpus, 1, 'network.workers.cpus: half a CPU rounds up to one');
    assert.equal(w.data.softCap, 16, 'the soft cap at its floor');
    assert.equal(Number(r.system.numCoresAvailableToProcess), AFFINITY.length, 'hostInfo keeps the affinity count, as mongod');
  } finally {
    for (const d of cg.dirs.reverse()) { try { fs.rmdirSync(d); } catch (_) { /* best effort */ } }
  }
});

/* ---- cacheSizeGB ---- */

h.test('--wiredTigerCacheSizeGB 0.3: floor(0.3 * 1024) = 307 MB; parsed.storage.wiredTiger.engineConfig.cacheSizeGB 0.3', { timeout: 60000 }, async () => {
  const r = await sizing(['--wiredTigerCacheSizeGB', '0.3']);
  assert.equal(r.cacheBytes, 307 * MB, `got ${r.cacheBytes / MB} MB`);
  assert.deepEqual(r.parsed.storage.wiredTiger, { engineConfig: { cacheSizeGB: 0.3 } });
  assert.equal(r.engine, 'wiredTiger');
});

h.test('--wiredTigerCacheSizeGB at its bounds: 0.25 gives 256 MB; 10000 gives mongod\'s maximum, 10,000,000 MB', { timeout: 60000 }, async () => {
  const lo = await sizing(['--wiredTigerCacheSizeGB', '0.25']);
  assert.equal(lo.cacheBytes, 256 * MB, `got ${lo.cacheBytes / MB} MB`);
  const hi = await sizing(['--wiredTigerCacheSizeGB', '10000']);
  /* getMainCacheSizeMB caps at kMaxSizeCacheMB = 10 * 1000 * 1000 (wt_cache_size.js: "Test upper limit"). */
  assert.equal(hi.cacheBytes, 10 * 1000 * 1000 * MB, `got ${hi.cacheBytes / MB} MB`);
  assert.deepEqual(hi.parsed.storage.wiredTiger, { engineConfig: { cacheSizeGB: 10000 } });
});

h.test('storage.wiredTiger.engineConfig.cacheSizeGB in mongod.conf: 0.4 gives floor(409.6) = 409 MB, shown in parsed', { timeout: 60000 }, async () => {
  const file = conf('gb.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.4\n');
  const r = await sizing(['--config', file]);
  assert.equal(r.cacheBytes, 409 * MB, `got ${r.cacheBytes / MB} MB`);
  assert.deepEqual(r.parsed.storage.wiredTiger, { engineConfig: { cacheSizeGB: 0.4 } });
});

/* ---- cacheSizePct ---- */

h.test('--wiredTigerCacheSizePct 0.03: floor(0.03 * memLimitMB) MB; parsed.storage.wiredTiger.engineConfig.cacheSizePct 0.03', { timeout: 60000 }, async () => {
  const r = await sizing(['--wiredTigerCacheSizePct', '0.03']);
  const memLimit = Number(r.system.memLimitMB);
  const want = Math.floor(Math.max(0.03 * memLimit, 256));
  assert.equal(r.cacheBytes, want * MB, `0.03 of ${memLimit} MB = ${want} MB, got ${r.cacheBytes / MB} MB`);
  assert.deepEqual(r.parsed.storage.wiredTiger, { engineConfig: { cacheSizePct: 0.03 } });
});

h.test('--wiredTigerCacheSizePct at its bounds: 0.00000001 gives the 256 MB floor; 0.8 gives floor(0.8 * memLimitMB) MB', { timeout: 60000 }, async () => {
  const lo = await sizing(['--wiredTigerCacheSizePct', '0.00000001']);
  assert.equal(lo.cacheBytes, 256 * MB, `got ${lo.cacheBytes / MB} MB`);
  const hi = await sizing(['--wiredTigerCacheSizePct', '0.8']);
  const memLimit = Number(hi.system.memLimitMB);
  const want = Math.floor(Math.max(0.8 * memLimit, 256));
  assert.equal(hi.cacheBytes, want * MB, `0.8 of ${memLimit} MB = ${want} MB, got ${hi.cacheBytes / MB} MB`);
});

h.test('storage.wiredTiger.engineConfig.cacheSizePct in mongod.conf: 0.05 gives floor(0.05 * memLimitMB) MB, shown in parsed', { timeout: 60000 }, async () => {
  const file = conf('pct.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizePct: 0.05\n');
  const r = await sizing(['--config', file]);
  const memLimit = Number(r.system.memLimitMB);
  const want = Math.floor(Math.max(0.05 * memLimit, 256));
  assert.equal(r.cacheBytes, want * MB, `0.05 of ${memLimit} MB = ${want} MB, got ${r.cacheBytes / MB} MB`);
  assert.deepEqual(r.parsed.storage.wiredTiger, { engineConfig: { cacheSizePct: 0.05 } });
});

/* ---- inMemory ---- */

h.test('--inMemory --inMemorySizeGB 0.3: the in-memory engine\'s cache is 307 MB; parsed.storage.inMemory.engineConfig.inMemorySizeGB 0.3', { timeout: 60000 }, async () => {
  const r = await sizing(['--inMemory', '--inMemorySizeGB', '0.3']);
  assert.equal(r.engine, 'inMemory');
  assert.equal(r.cacheBytes, 307 * MB, `got ${r.cacheBytes / MB} MB`);
  assert.deepEqual(r.parsed.storage.inMemory, { engineConfig: { inMemorySizeGB: 0.3 } });
});

h.test('--inMemory alone: the default formula, max((memLimitMB - 1024) / 2, 256) MB', { timeout: 60000 }, async () => {
  const r = await sizing(['--inMemory']);
  assert.equal(r.engine, 'inMemory');
  const memLimit = Number(r.system.memLimitMB);
  assert.equal(r.cacheBytes, defaultCacheMB(memLimit) * MB,
    `default in-memory cache ${defaultCacheMB(memLimit)} MB, got ${r.cacheBytes / MB} MB`);
});

h.test('storage.engine inMemory with storage.inMemory.engineConfig.inMemorySizeGB in mongod.conf: 0.5 gives 512 MB, shown in parsed', { timeout: 60000 }, async () => {
  const file = conf('inmem.conf', 'storage:\n  engine: inMemory\n  inMemory:\n    engineConfig:\n      inMemorySizeGB: 0.5\n');
  const r = await sizing(['--config', file]);
  assert.equal(r.engine, 'inMemory');
  assert.equal(r.parsed.storage.engine, 'inMemory');
  assert.equal(r.cacheBytes, 512 * MB, `got ${r.cacheBytes / MB} MB`);
  assert.deepEqual(r.parsed.storage.inMemory, { engineConfig: { inMemorySizeGB: 0.5 } });
});

/* ---- Refused at start-up ---- */

h.test('cacheSizeGB outside 0.25..10000 or not a number stops start-up, naming the option (flag and mongod.conf)', { timeout: 180000 }, async () => {
  for (const v of ['0.1', '0.24', '20000', '10000.5', 'abc', '0', '-1']) await refuses(['--wiredTigerCacheSizeGB', v], /cacheSizeGB/i);
  await refuses(['--config', conf('gb-bad.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.1\n')], /cacheSizeGB/i);
  await refuses(['--config', conf('gb-bad2.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 20000\n')], /cacheSizeGB/i);
});

h.test('cacheSizePct outside (0, 0.8] or not a number stops start-up, naming the option (flag and mongod.conf)', { timeout: 180000 }, async () => {
  for (const v of ['0.9', '0', '-1', '1', 'abc']) await refuses(['--wiredTigerCacheSizePct', v], /cacheSizePct/i);
  await refuses(['--config', conf('pct-bad.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizePct: 0.9\n')], /cacheSizePct/i);
});

h.test('cacheSizeGB and cacheSizePct together stop start-up (flags, mongod.conf, one of each)', { timeout: 180000 }, async () => {
  const both = /cacheSizeGB[\s\S]*cacheSizePct|cacheSizePct[\s\S]*cacheSizeGB/i;
  await refuses(['--wiredTigerCacheSizeGB', '1', '--wiredTigerCacheSizePct', '0.1'], both);
  await refuses(['--config', conf('both.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 1\n      cacheSizePct: 0.1\n')], both);
  await refuses(['--config', conf('gb-only.conf', 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 1\n'),
    '--wiredTigerCacheSizePct', '0.1'], both);
});

h.test('inMemorySizeGB outside 0.25..10000 or not a number stops start-up, naming the option', { timeout: 180000 }, async () => {
  for (const v of ['0.1', '20000', 'abc']) await refuses(['--inMemory', '--inMemorySizeGB', v], /inMemorySizeGB/i);
  await refuses(['--config', conf('inmem-bad.conf', 'storage:\n  engine: inMemory\n  inMemory:\n    engineConfig:\n      inMemorySizeGB: 0.1\n')],
    /inMemorySizeGB/i);
});

h.test('a size that is not a plain number (NaN, infinity, trailing characters) is refused too', { timeout: 180000 }, async () => {
  for (const v of ['nan', 'inf', '0.5GB', '1e']) await refuses(['--wiredTigerCacheSizeGB', v], /cacheSizeGB/i);
  for (const v of ['nan', '0.1x']) await refuses(['--wiredTigerCacheSizePct', v], /cacheSizePct/i);
  await refuses(['--inMemory', '--inMemorySizeGB', 'nan'], /inMemorySizeGB/i);
});

h.test('cleanup', () => fs.rmSync(DIR, { recursive: true, force: true }));
