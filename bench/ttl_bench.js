'use strict';
/*
 * Expiry benchmark (issues 4 and 13): mayfly's TTL monitor against Redis's key
 * expiry and against PostgreSQL with the delete job that the PostgreSQL-based
 * MongoDB-compatible stores (FerretDB, Microsoft's DocumentDB) run for TTL
 * indexes, side by side in one run. Prints figures only; no assertions.
 *
 *   node bench/ttl_bench.js [--docs N] [--sample N] [--poll MS] [--spread SECS]
 *                           [--systems mayfly,redis,postgres] [--pg-interval SECS] [--pg-batch ROWS]
 *                           [--kept-busy 0|1] [--fg-client raw|driver] [--fg-rate OPS]
 *   (MAYFLYD_ARGS="--setParameter name=value ..." passes extra flags to mayflyd)
 *   (or bash bench/ttl_bench.sh, which builds build/mayflyd and installs what is missing first)
 *
 * --systems picks the systems and their column order (default all three).
 * --kept-busy 0 skips mayfly's phase 1 kept busy (phase 1 again beside
 * idle-priority spinners, printed under (6); about 1.5 minutes).
 * --fg-client picks the client of mayfly's foreground loop (phases 3 and
 * 4): raw (the default), hand-built OP_MSG on a socket (RawMongo, bench/lib/rawmongo.js), the same
 * kind of minimal client as Redis's (Resp); or driver, the Node driver's
 * insertOne / findOne. Both servers share this 2-core machine with the bench,
 * and the driver spends 220-350 µs of its own CPU per operation, most of a
 * core in a closed loop: during a mass expiry it took the CPU the deleters
 * would have had (1,000,000 docs, one run after the other: 415,000
 * deletions/s with the raw client, 289,000 with the driver), which Redis's
 * own loop never did.
 *
 * --fg-rate sets phase 2p's paced client, in operations a second (default
 * 2,000; 0 skips phase 2p).
 *
 * Servers. mayflyd (binary from $MAYFLYD, default build/mayflyd, the release
 * build), redis-server (from $REDIS_SERVER, default `redis-server` on PATH)
 * and PostgreSQL (binaries from $PG_BIN, else the newest
 * /usr/lib/postgresql/<v>/bin, else PATH) are started by this script on free
 * loopback ports, each with a fresh temp directory (mayflyd and redis-server
 * by bench/lib/common.js, which also does the clean-up). Redis: --save ''
 * --appendonly no, default hz and expiry effort. PostgreSQL: `initdb -U
 * postgres -A trust -N` (-N only skips initdb's own fsyncs), then `postgres -D
 * dir -p PORT -k dir -c listen_addresses=127.0.0.1`; as root both run as the
 * `postgres` user (else nobody), since PostgreSQL refuses root. Every other
 * PostgreSQL setting is the default: fsync on, synchronous_commit on,
 * shared_buffers 128 MB, autovacuum on (naptime 1 min). So durability
 * differs, each at its default: a PostgreSQL commit waits for its WAL flush
 * (every foreground INSERT and every delete batch pays an fsync of the temp
 * dir's disk), mayfly's w:1 writes are synced by a background flusher within
 * ~100 ms, Redis here keeps nothing on disk. All are stopped and
 * the directories removed at the end, also on error or Ctrl-C (postgres gets
 * SIGINT, a fast shutdown; on an error SIGQUIT, the immediate one). The
 * phases run one system at a time, so they never share the CPU (the idle
 * servers stay up). Each server, and phase 4's busy neighbour, is started in
 * a session of its own, as a service manager (systemd: a cgroup per
 * service) or another terminal (an autogroup per session) would start it:
 * Linux then shares the CPU between programs as wholes, and a server's nice
 * values (mayfly's TTL threads run at nice 10) weigh its threads only
 * against each other. In one shared group a nice-10 thread would get a
 * tenth of a core beside any busy process, which is not how separate
 * programs run. This script and its clients stay in the caller's session.
 *
 * PostgreSQL's side. Client: the `pg` npm package (a devDependency), over
 * TCP like the others. Each collection is a table `(id bigint PRIMARY KEY,
 * doc jsonb NOT NULL)` and its TTL index is a btree on the expression
 * `((doc->>'at_ms')::bigint)`: the document is mayfly's {at, p} with the
 * expiry stored as epoch milliseconds in `at_ms` (what a BSON date holds),
 * because casting a string to timestamptz is not IMMUTABLE and cannot be
 * indexed. Loads: one INSERT ... SELECT FROM unnest($ids, $docs) of 1,000
 * rows per statement, 4 connections in flight. The delete job (DocumentDB's
 * TTL task, which FerretDB 2.x runs on; its default batch is 10,000) runs
 * on its own connection at wall-clock multiples of --pg-interval (default 60
 * s), as cron's `* * * * *` does, so its phase against the expiry times is
 * whatever the clock gives (printed; every run differs); a tick that falls
 * during a run fires when it ends. Each run does, per TTL table,
 *   DELETE FROM t WHERE ctid IN (SELECT ctid FROM t WHERE (doc->>'at_ms')::bigint
 *     <= (extract(epoch FROM now()) * 1000)::bigint LIMIT --pg-batch FOR UPDATE SKIP LOCKED)
 * (default 10,000 rows, 1,000..10,000; autocommit, so one commit per batch)
 * until a batch deletes fewer than --pg-batch rows. That is the statement
 * DocumentDB's job builds (pg_documentdb/src/ttl/ttl_index.c) with our
 * expression for its bson comparison. The form `WHERE id IN (SELECT id ...)`
 * is no good here: once ANALYZE has run on 1,000,000 rows its plan becomes a
 * hash semi join over a sequential scan of the whole table for every batch
 * (136 ms per 10,000 rows here, against 63 ms for the ctid form, whose plan is
 * the expression index, then a TID scan, with or without statistics). A
 * DELETE only marks rows dead; autovacuum reclaims heap and index space
 * later: after phase 2 the bench waits (up to 180 s) for that autovacuum and
 * prints when it ended and the server CPU it took.
 *
 * Phase 1, spread expiry. N small documents (keys, rows) whose expiry times
 * are spread evenly over 60 s, starting a little after the load is expected
 * to end (the load rate is calibrated first with a short load). mayfly: TTL
 * index {at: 1} with expireAfterSeconds 0, `at` = the expiry time, insertMany
 * of 1,000 documents, 4 in flight. Redis: SET key val PXAT <ms> (the absolute
 * form of PX, so the exact expiry instant is known), pipelined 1,000 commands
 * per write, 8 writes in flight. PostgreSQL: as above. Lateness = time from a
 * document's expiry to its physical removal:
 *   - mayfly and PostgreSQL: a random sample of --sample ids is polled every
 *     --poll ms (mayfly: find({_id: {$in: due}}); PostgreSQL: SELECT id FROM
 *     spread WHERE id = ANY($1)), where `due` holds only the sampled ids whose
 *     expiry has passed and that were still present last time (mayfly: a few
 *     dozen at a time, so polling costs little; PostgreSQL: most of the
 *     sample while rows wait for the job, see CPU). A document found absent was removed
 *     between the previous poll and this reply; the estimate is the midpoint
 *     of that interval (clipped at the expiry). All documents: mayfly's own
 *     serverStatus().metrics.ttl.lateness (log2 histogram); PostgreSQL: the
 *     job's DELETE in this phase has RETURNING of each row's at_ms, and a
 *     row's lateness is the arrival of its batch's reply minus its expiry.
 *   - Redis: polling with EXISTS would itself expire the key (lazy expiry),
 *     so it cannot see physical removal. Instead keyspace notifications
 *     (notify-keyspace-events Ex) are enabled and a subscriber records the
 *     arrival time of every `expired` event; nothing else touches the keys,
 *     so every event comes from Redis's active expiry cycle. The same sample
 *     of keys and all N keys are reported.
 *   Each system gets 30 s after the window's end (PostgreSQL: + one job
 *   interval, since its last rows wait for the next tick). With the 60 s job
 *   the PostgreSQL phase is about two minutes longer than the others: that
 *   is the result, not a flaw of the bench.
 *
 * Phase 2, mass expiry. N documents (keys, rows) that all expire at one
 * instant T, a few seconds after the load ends. mayfly:
 * estimatedDocumentCount() polled every 50 ms; Redis: DBSIZE of its own
 * logical database polled every 50 ms (DBSIZE counts expired keys until they
 * are reclaimed; DBSIZE itself does not expire anything, and nothing reads
 * the keys, so only active expiry removes them); PostgreSQL: N minus the rows
 * the job has deleted so far (it is the only deleter; its own count, read
 * every 50 ms like the others, because count(*) over 1,000,000 rows would
 * cost a scan each time and pg_stat's n_live_tup lags by up to seconds; a
 * count(*) at the end checks it is 0). Reported: time from T to the first
 * deletion and to zero, and the deletion rate N / (zero - first deletion)
 * (also N / (zero - T)). For PostgreSQL the first deletion seen is its first
 * batch's commit, already 10,000 rows, so the line under the table also gives
 * the job's exact times and its rate from sending its first DELETE to its
 * last commit. mayfly then runs phase 2 again with no foreground loop (a
 * collection of its own): its rate and server CPU per document from T to
 * zero, (6)'s burst.
 *
 * Phase 3, foreground latency. Before phase 2's load, one client on its own
 * connection (mayfly: --fg-client) alternates a single-document insert and a find by _id (Redis:
 * SET and GET, in another logical database; PostgreSQL: prepared INSERT and
 * SELECT by primary key into another table) for 5 s on the idle server; the
 * same loop runs again from T until the mass expiry is over. p50/p99 of each
 * operation, idle vs. during the expiry.
 *
 * The foreground loop is closed: each operation is sent when the last one
 * is answered, so it takes whatever CPU the server leaves, and on a 2-core
 * machine the client itself (in this process: printed as the bench's own
 * CPU during (2)) takes part of a core from the servers' expiry.
 *
 * Phase 2p, mass expiry beside a paced client (mayfly and Redis). An
 * application sends its requests at its own rate rather than in a closed
 * loop: phase 2 again (a collection, a Redis database, of its own) with the
 * foreground client sending one insert + find pair every 2000 / --fg-rate
 * ms (default 2,000 operations a second; a pair that falls behind starts at
 * once), idle (5 s) and during the expiry. Latency is timed from the send,
 * as in phase 3. Printed: the deletion rate, and the client's p50/p99 idle,
 * during, and their ratio, beside the closed loop's; (4)'s rate is given for
 * both clients under the issue's targets. For mayfly, phases 3 and 2p also
 * print the same operations' time inside the server (from the command's
 * registration, after its message was read and checked, to the end of its
 * handler; $collStats latencyStats, MongoDB's buckets, each quantile as
 * its bucket's upper edge), idle and from T to zero: what the client waits
 * for beyond it is reaching the server and back (the client's and the
 * server thread's wake-ups, a queued request's wait for a worker, the
 * loopback, the reply's encoding).
 *
 * Phase 4, mass expiry beside a busy neighbour (mayfly and Redis; not
 * PostgreSQL, whose job would add a minute). Phase 2 again, foreground loop
 * included, with another process spinning at the default priority (a node
 * busy loop) from the load's end until all are gone: the deletion rate, its
 * share of phase 2's, and the loop's p99.
 *
 * Phase 1, kept busy (mayfly only, right after phase 1; --kept-busy 0 skips
 * it). Phase 1 again, into another collection, while one idle-priority
 * spinner per CPU (withIdleSpinners) keeps every CPU from going idle
 * between the monitor's passes. The spinners give way to any other thread
 * at once and their CPU is not counted, so this is the same work on CPUs
 * that never halt: printed under (6), beside (6)'s own figure, to show how
 * much of the spread's CPU per document is the machine's idle periods
 * rather than the server's work. Its lateness, like phase 1's there, comes
 * from the server's histogram before and after (log2 buckets).
 *
 * Settling. After each load and before its expiry, mayfly is sent fsync (a
 * checkpoint) and PostgreSQL CHECKPOINT, so the documents just loaded are
 * written out in the load's CPU and not by a periodic checkpoint that falls
 * inside one expiry window and not the other (mayfly's comes every 60 s, as
 * long as phase 1's window).
 *
 * CPU and memory. Server CPU time is utime + stime from /proc/<pid>/stat of
 * the server process (all threads) plus, for PostgreSQL, its exited children
 * (the postmaster's cutime + cstime) and live children (backends, autovacuum,
 * WAL writer, checkpointer...). Reported:
 *   (1) the load, and from the load's end until all are gone (no foreground
 *       loop; it includes the sample polls, which cost little for mayfly,
 *       whose `due` list stays short; PostgreSQL's list grows to the whole
 *       sample while rows wait for the job, so its poller backend's CPU is
 *       left out, and printed under the table);
 *   (2) the load, and from T until all are gone, which includes phase 3's
 *       loop; then a deletion CPU estimate: mayfly and Redis, that window
 *       minus (ops of the loop in it x the server CPU per op of the idle
 *       loop), rough; PostgreSQL, whose loop runs until the job's tick, the
 *       CPU of the job's backend (its DELETEs) plus the server's CPU from
 *       all gone to the end of the autovacuum that reclaims the rows;
 *   the whole run, start-up to the end (PostgreSQL's includes the wait for
 *   that autovacuum).
 * Peak memory: /proc/<pid>/status VmHWM at the end for mayflyd and
 * redis-server; for PostgreSQL the peak of the sum of PSS (smaps_rollup) over
 * the postmaster and its children, sampled every 0.5 s (PSS counts the shared
 * buffers once, not once per backend).
 *
 * Targets for mayfly (2-core machine): phase-1 lateness p99 < 1 s (the
 * client-observed sample), phase-2 deletion rate >= 300,000 docs/s, phase-3
 * p99 during the expiry <= 3x idle (insert and find each). Issue 13's, in a
 * table of their own: (4) phase 2 at >= 500,000 docs/s beside Redis's, and
 * phase 4's rate at least half of phase 2's (a busy neighbour does not halve
 * it), (5)
 * phase 3's p99 <= 2x idle, (6) phase 1's server CPU per document (net of
 * the sample poller's finds and the drain's counts, at the idle loop's CPU
 * per operation) <= 1.5x the CPU per document of phase 2 run again with no
 * foreground loop (measured, like phase 1's; phase 2's own CPU net of its
 * loop's operations is printed in the table as an estimate), with the
 * server's lateness p99 < 10 ms. Both figures include the checkpoint that
 * writes the deletions out: phase 1's window, a minute and more, holds one
 * of WiredTiger's periodic checkpoints (every 60 s) and a burst's, a few
 * seconds, none, so every mayfly expiry window is followed by an fsync
 * whose CPU is added to both (measured: 0.03-0.05 µs per document each, so
 * the periodic checkpoint does not explain the difference either). Before
 * the servers start, sliceCost
 * measures what running in slices costs on this machine by itself: the same
 * memory-walking unit of work back to back and once every 5 ms, once every
 * 5 ms with the thread spinning on the clock in between (never leaving its
 * CPU; the unit's own CPU alone counted), and once every 5 ms again while
 * idle-priority (SCHED_IDLE) spinners keep every CPU from going idle in
 * between; the ratios are printed under (6). On this kind of virtual
 * machine the last is lower (node's own wake-up stays in both): part of
 * what sliced work costs is the CPUs' idle periods; and the spinning
 * thread's unit costs more than back to back too (session 25, a C probe
 * on the thread's CPU clock: 20,000 reads over 2 MB, 125 µs back to back,
 * 160-167 µs after 5 ms of spinning, 183-192 µs after a 5 ms sleep; pure
 * arithmetic 284 against 290 µs): in 5 ms the host's other work empties
 * the caches and TLBs of a thread that never stopped.
 *
 * What phase 1 pays more than the burst is per document, not per pass.
 * On a 2-core Firecracker VM (nested, kernel 6.18), 1,000,000 documents,
 * without the closing checkpoints (before they were counted):
 * with passes at most 5 ms apart (ttlMonitorCoalesceMS, the default; 86
 * documents a pass) the spread cost 5.30-5.75 µs of server CPU per
 * document; with 8 ms (136 a pass) 5.35 µs and with 10 ms (169 a pass)
 * 5.12 µs, against bursts of 2.75-3.25 µs in the same runs, while the
 * lateness p99 grew to 8 and 10 ms. Per thread (/proc schedstat), the
 * monitor alone spent 4.4-4.9 µs per document in a spread and the two
 * deleting threads 2.1 µs in a burst, and callgrind counts the same
 * instructions per document in both (bench/ttl_instr_bench.sh): the same
 * work runs at about half the speed in 5 ms slices on a mostly idle
 * machine. Under (6) the wake-ups are priced at sliceCost's empty
 * wake-up as an upper bound, not as the explanation.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { RawMongo } = require('./lib/rawmongo');
const { options, sleep, nowMs, log, rng, inBatches, quantiles, fmtInt, loadavg, printTable,
  procStatusKb, procChildren, procCpuSec, cpuSec, makeTempDir, spawnServer, waitUp, startMayflyd, startRedis,
  freePort, stopServer, stopAll, runMain, connectLoopback } = require('./lib/common');

/* ---------- arguments ---------- */

const { num: arg, str: strArg } = options();
const ALL_SYSTEMS = ['mayfly', 'redis', 'postgres'];
const SYSTEMS = (() => {
  const list = [];
  for (const s of strArg('systems', ALL_SYSTEMS.join(',')).split(',').map((x) => x.trim()).filter(Boolean)) {
    if (!ALL_SYSTEMS.includes(s)) throw new Error(`--systems: unknown system '${s}' (known: ${ALL_SYSTEMS.join(', ')})`);
    if (!list.includes(s)) list.push(s);
  }
  if (!list.length) throw new Error('--systems: no system given');
  return list;
})();
const N = Math.floor(arg('docs', 1000000));
const SAMPLE = Math.min(N, Math.floor(arg('sample', 2000)));
const POLL_MS = arg('poll', 25);
const SPREAD_MS = arg('spread', 60) * 1000;   /* phase-1 expiry window */
const KEPT_BUSY = strArg('kept-busy', '1') !== '0';   /* mayfly's phase 1 again beside idle-priority spinners */
/* phase 2p's paced foreground client, operations a second; 0 skips 2p (so not the positive-only num()) */
const FG_RATE = Math.floor(Number(strArg('fg-rate', '2000')));
if (!(FG_RATE >= 0)) throw new Error('--fg-rate must be a number of operations a second, 0 to skip phase 2p');
const FG_CLIENT = strArg('fg-client', 'raw');   /* mayfly's foreground loop: raw OP_MSG socket, or the Node driver */
if (!['raw', 'driver'].includes(FG_CLIENT)) throw new Error('--fg-client must be raw or driver');
const PG_INTERVAL_MS = arg('pg-interval', 60) * 1000;   /* PostgreSQL delete job period */
const PG_BATCH = Math.floor(arg('pg-batch', 10000));      /* rows per DELETE (one commit each) */
if (PG_BATCH < 1000 || PG_BATCH > 10000) throw new Error('--pg-batch must be 1000..10000');
const BATCH = 1000;
const MONGO_INFLIGHT = 4;
const REDIS_INFLIGHT = 8;
const PG_INFLIGHT = 4;
const PG_VACUUM_WAIT_MS = 180000;   /* longest wait for autovacuum after phase 2 */
const IDLE_MS = 5000;
const TAIL_CAP_MS = 30000;   /* longest wait after the last expiry */
const PAYLOAD = 'payload-0123456789';

/* PostgreSQL's binaries: $PG_BIN, else the newest /usr/lib/postgresql/<v>/bin (Debian), else PATH. */
const PG_BIN = (() => {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  try {
    const vs = fs.readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a);
    for (const v of vs) if (fs.existsSync(`/usr/lib/postgresql/${v}/bin/postgres`)) return `/usr/lib/postgresql/${v}/bin`;
  } catch (_) { /* not Debian's layout */ }
  return null;
})();
const pgExe = (name) => (PG_BIN ? path.join(PG_BIN, name) : name);

/* ---------- small helpers ---------- */

/* Sum of the proportional set size (kB) of a process and its children: shared
 * memory (postgres's shared_buffers) counted once, not once per backend. */
function pssKb(pid) {
  let kb = 0;
  for (const p of [pid, ...procChildren(pid)]) {
    try {
      const m = fs.readFileSync(`/proc/${p}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+) kB/m);
      if (m) kb += Number(m[1]);
    } catch (_) { /* exited meanwhile */ }
  }
  return kb;
}

function sampleIndices(n, k, seed) {
  const r = rng(seed);
  const set = new Set();
  while (set.size < k) set.add(Math.floor(r() * n));
  return Array.from(set).sort((a, b) => a - b);
}

/* ---------- a minimal pipelined RESP client ---------- */

function encode(args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) {
    const v = String(a);
    s += `$${Buffer.byteLength(v)}\r\n${v}\r\n`;
  }
  return s;
}

class Resp {
  constructor(port) {
    this.port = port;
    this.buf = null;
    this.queue = [];      /* pending requests: {left, results, resolve, reject, error} */
    this.qhead = 0;
    this.onPush = null;   /* subscriber mode: called with (reply, arrivalMs) */
  }

  async connect() {
    this.sock = await connectLoopback(this.port, (d) => this.onData(d), () => this.failAll(new Error('redis connection closed')));
  }

  close() { this.sock.destroy(); }

  failAll(e) {
    for (let i = this.qhead; i < this.queue.length; i++) this.queue[i].reject(e);
    this.queue = [];
    this.qhead = 0;
  }

  /* Sends `cmds` (arrays of arguments) in one write; resolves with the replies
   * (or with the count only if keep is false). A Redis error reply rejects. */
  pipeline(cmds, keep = true) {
    let s = '';
    for (const c of cmds) s += encode(c);
    return new Promise((resolve, reject) => {
      this.queue.push({ left: cmds.length, results: keep ? [] : null, resolve, reject, error: null });
      this.sock.write(s);
    });
  }

  async cmd(...args) { return (await this.pipeline([args]))[0]; }

  onData(d) {
    const now = Date.now();
    let buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    let off = 0;
    for (;;) {
      const r = parseReply(buf, off);
      if (r === null) break;
      off = r.off;
      this.deliver(r.value, now);
    }
    this.buf = off < buf.length ? buf.subarray(off) : null;
  }

  deliver(v, now) {
    if (this.onPush && Array.isArray(v) && v[0] === 'message') { this.onPush(v, now); return; }
    const q = this.queue[this.qhead];
    if (!q) { if (this.onPush) this.onPush(v, now); return; }
    if (v instanceof Error && !q.error) q.error = v;
    if (q.results) q.results.push(v);
    if (--q.left === 0) {
      this.queue[this.qhead++] = undefined;
      if (this.qhead > 1024 && this.qhead * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.qhead);
        this.qhead = 0;
      }
      if (q.error) q.reject(q.error); else q.resolve(q.results || null);
    }
  }
}

/* Parses one reply at `off`; returns {value, off} or null if incomplete. */
function parseReply(buf, off) {
  if (off >= buf.length) return null;
  const nl = buf.indexOf(10, off);
  if (nl < 0) return null;
  const type = buf[off];
  const line = buf.toString('latin1', off + 1, nl - 1);
  const next = nl + 1;
  switch (type) {
    case 43: return { value: line, off: next };                 /* + */
    case 45: return { value: new Error(line), off: next };      /* - */
    case 58: return { value: Number(line), off: next };         /* : */
    case 36: {                                                  /* $ */
      const len = Number(line);
      if (len < 0) return { value: null, off: next };
      if (next + len + 2 > buf.length) return null;
      return { value: buf.toString('latin1', next, next + len), off: next + len + 2 };
    }
    case 42: {                                                  /* * */
      const n = Number(line);
      if (n < 0) return { value: null, off: next };
      const arr = [];
      let o = next;
      for (let i = 0; i < n; i++) {
        const r = parseReply(buf, o);
        if (r === null) return null;
        arr.push(r.value);
        o = r.off;
      }
      return { value: arr, off: o };
    }
    default: throw new Error(`bad RESP type byte ${type}`);
  }
}

/* ---------- loaders ---------- */

/* insertMany of BATCH docs, MONGO_INFLIGHT in flight; expiry(i) gives the `at` ms. */
async function loadMongo(coll, n, idBase, expiry) {
  const t0 = nowMs();
  await inBatches(n, BATCH, MONGO_INFLIGHT, async (start, end) => {
    const docs = new Array(end - start);
    for (let i = start; i < end; i++) docs[i - start] = { _id: idBase + i, at: new Date(expiry(i)), p: PAYLOAD };
    await coll.insertMany(docs, { ordered: false });
  });
  return nowMs() - t0;
}

/* SET prefix+i PAYLOAD PXAT expiry(i), BATCH per write, REDIS_INFLIGHT writes in flight. */
async function loadRedis(r, n, prefix, expiry) {
  const t0 = nowMs();
  await inBatches(n, BATCH, REDIS_INFLIGHT, async (start, end) => {
    const cmds = new Array(end - start);
    for (let i = start; i < end; i++) cmds[i - start] = ['SET', prefix + i, PAYLOAD, 'PXAT', Math.round(expiry(i))];
    await r.pipeline(cmds, false);
  });
  return nowMs() - t0;
}

/* The document of row i: mayfly's {at, p} with the expiry as epoch milliseconds
 * (a BSON date is an int64 of epoch ms; the index is on ((doc->>'at_ms')::bigint)). */
const pgDoc = (at) => `{"at_ms": ${Math.round(at)}, "p": "${PAYLOAD}"}`;

/* INSERT of BATCH rows (one statement, arrays unnested), PG_INFLIGHT connections in flight. */
async function loadPg(pool, table, n, idBase, expiry) {
  const t0 = nowMs();
  const text = `INSERT INTO ${table} (id, doc) SELECT * FROM unnest($1::bigint[], $2::jsonb[])`;
  await inBatches(n, BATCH, PG_INFLIGHT, async (start, end) => {
    const ids = new Array(end - start);
    const docs = new Array(end - start);
    for (let i = start; i < end; i++) { ids[i - start] = idBase + i; docs[i - start] = pgDoc(expiry(i)); }
    await pool.query({ name: `load_${table}`, text, values: [ids, docs] });
  });
  return nowMs() - t0;
}

/* ---------- phase 1: spread expiry ---------- */

/* Polls the sampled _ids that are due; returns the lateness (ms) of each.
 * present(ids) resolves with the Set of those ids still stored. */
async function pollSample(present, sample, expiryOf, deadlineMs) {
  const order = sample.slice().sort((a, b) => expiryOf(a) - expiryOf(b));
  let nextDue = 0;
  let active = [];                 /* due, still present at the last poll */
  const lastSeen = new Map();      /* _id -> wall-clock send time of the last poll that saw it */
  const lateness = [];
  let polls = 0;
  while ((nextDue < order.length || active.length) && Date.now() < deadlineMs) {
    const now = Date.now();
    while (nextDue < order.length && expiryOf(order[nextDue]) <= now) active.push(order[nextDue++]);
    if (active.length) {
      const t0 = Date.now();
      const there = await present(active);
      const t1 = Date.now();
      polls++;
      const still = [];
      for (const id of active) {
        if (there.has(id)) { still.push(id); lastSeen.set(id, t0); continue; }
        const exp = expiryOf(id);
        const lo = Math.max(exp, lastSeen.has(id) ? lastSeen.get(id) : exp);
        lateness.push((lo + t1) / 2 - exp);
      }
      active = still;
    }
    await sleep(POLL_MS);
  }
  return { lateness, missing: order.length - lateness.length, polls };
}

/*
 * settle: after a load, before its expiry window, the server writes the load
 * out (mayfly: fsync, a checkpoint; PostgreSQL: CHECKPOINT; Redis keeps
 * nothing on disk), so that the window's CPU is the expiry's own and not the
 * persisting of the documents just loaded, which a periodic checkpoint would
 * otherwise do inside one window and not the other. Counted in the load's CPU.
 */
async function settle(checkpoint) {
  const t0 = Date.now();
  await checkpoint();
  log(`  settled (checkpoint after the load) in ${Date.now() - t0} ms`);
}

/*
 * The lateness of one phase from two of mayfly's serverStatus lateness
 * histograms (cumulative since start; bucket "ltNms" counts latenesses under
 * N ms and at least the previous bucket's N): { count, p50Ms, p99Ms }, each
 * quantile as its bucket's upper bound (so "8" is 4-8 ms).
 */
function histDelta(before, after) {
  const edges = Object.keys(after || {}).map((k) => [Number(/^lt(\d+)ms$/.exec(k)[1]), k]).sort((a, b) => a[0] - b[0]);
  const counts = edges.map(([edge, k]) => [edge, Number(after[k]) - Number((before || {})[k] || 0)]);
  const count = counts.reduce((a, [, n]) => a + n, 0);
  const q = (f) => {
    let seen = 0;
    for (const [edge, n] of counts) { seen += n; if (seen >= Math.ceil(count * f)) return edge; }
    return null;
  };
  return { count, p50Ms: q(0.5), p99Ms: q(0.99) };
}

async function phase1Mayfly(db, calibRate, cpu, name = 'spread') {
  const coll = db.collection(name);
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const estLoad = (N / calibRate) * 1000;
  const loadStart = Date.now();
  const w0 = loadStart + estLoad * 1.3 + 2000;     /* expiry window [w0, w0 + 60 s) */
  const expiry = (i) => w0 + (SPREAD_MS * i) / N;
  log(`mayfly phase 1: loading ${N} docs, expiries spread over ${SPREAD_MS / 1000} s from +${((w0 - loadStart) / 1000).toFixed(1)} s`);
  const c0 = cpu();
  const loadMs = await loadMongo(coll, N, 0, expiry);
  const loadEnd = Date.now();
  await settle(() => db.admin().command({ fsync: 1 }));
  const ttl0 = (await db.admin().command({ serverStatus: 1 })).metrics.ttl || {};
  const passes0 = ttl0.passes;
  const c1 = cpu();
  log(`mayfly phase 1: loaded in ${(loadMs / 1000).toFixed(1)} s (${(N / loadMs * 1000).toFixed(0)} docs/s)` +
    (loadEnd > w0 ? `; WARNING: load overran the window start by ${loadEnd - w0} ms` : ''));
  const sample = sampleIndices(N, SAMPLE, 12345);
  const present = async (ids) => new Set((await coll.find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray())
    .map((d) => d._id));
  const res = await pollSample(present, sample, expiry, w0 + SPREAD_MS + TAIL_CAP_MS);
  /* Let the rest of the collection drain (bounded) before reading the server's histogram. */
  const drainDeadline = w0 + SPREAD_MS + TAIL_CAP_MS;
  let left = await coll.estimatedDocumentCount();
  let counts = 1;
  while (left > 0 && Date.now() < drainDeadline) { await sleep(100); left = await coll.estimatedDocumentCount(); counts++; }
  const c2 = cpu();
  /* The window's deletions written out: a checkpoint, its CPU kept apart (see (6)). */
  await db.admin().command({ fsync: 1 });
  const cpuCkpt = cpu() - c2;
  const ss = await db.admin().command({ serverStatus: 1 });
  const ttl = ss.metrics && ss.metrics.ttl ? ss.metrics.ttl : {};
  log(`mayfly phase 1: done; ${res.polls} sample polls, ${left} docs left, server ttl.lateness ${JSON.stringify(ttl.lateness && { count: ttl.lateness.count, p50Ms: ttl.lateness.p50Ms, p99Ms: ttl.lateness.p99Ms, maxMs: ttl.lateness.maxMs })}`);
  return { ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - w0), sample: quantiles(res.lateness),
    sampleMissing: res.missing, leftover: left, server: ttl.lateness || null, cpuLoad: c1 - c0, cpuExpiry: c2 - c1, cpuCkpt,
    serverPhase: ttl.lateness && ttl0.lateness ? histDelta(ttl0.lateness.histogram, ttl.lateness.histogram) : null,
    clientOps: res.polls + counts, passes: Number(ttl.passes) - Number(passes0) };
}

async function phase1Redis(port, r, calibRate, cpu) {
  const sub = new Resp(port);
  await sub.connect();
  const estLoad = (N / calibRate) * 1000;
  const loadStart = Date.now();
  const w0 = loadStart + estLoad * 1.3 + 2000;
  const expiry = (i) => w0 + (SPREAD_MS * i) / N;
  /* Lateness of every key, from the arrival of its `expired` event. */
  const all = new Float64Array(N);
  const perKey = new Float64Array(N).fill(NaN);
  let got = 0;
  let early = 0;
  sub.onPush = (m, now) => {
    const key = m[2];
    if (typeof key !== 'string' || !key.startsWith('s:')) return;
    const i = Number(key.slice(2));
    if (!(i >= 0 && i < N) || !Number.isNaN(perKey[i])) return;
    const late = now - Math.round(expiry(i));
    perKey[i] = late;
    if (late < 0) early++;
    all[got++] = late;
  };
  await sub.cmd('SUBSCRIBE', '__keyevent@0__:expired');
  log(`redis phase 1: loading ${N} keys, expiries spread over ${SPREAD_MS / 1000} s from +${((w0 - loadStart) / 1000).toFixed(1)} s`);
  const c0 = cpu();
  const loadMs = await loadRedis(r, N, 's:', expiry);
  const loadEnd = Date.now();
  const c1 = cpu();
  log(`redis phase 1: loaded in ${(loadMs / 1000).toFixed(1)} s (${(N / loadMs * 1000).toFixed(0)} keys/s)` +
    (loadEnd > w0 ? `; WARNING: load overran the window start by ${loadEnd - w0} ms` : ''));
  const deadline = w0 + SPREAD_MS + TAIL_CAP_MS;
  while (got < N && Date.now() < deadline) await sleep(100);
  const left = await r.cmd('DBSIZE');
  const c2 = cpu();
  sub.close();
  /* The same sample of indices as mayfly's, read from the per-key record. */
  const sl = [];
  for (const i of sampleIndices(N, SAMPLE, 12345)) if (!Number.isNaN(perKey[i])) sl.push(perKey[i]);
  log(`redis phase 1: done; ${got} expired events, ${left} keys left${early ? `, ${early} events before expiry (clock?)` : ''}`);
  return { ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - w0), all: quantiles(all.subarray(0, got)),
    allMissing: N - got, leftover: left, sample: quantiles(sl), sampleMissing: SAMPLE - sl.length,
    cpuLoad: c1 - c0, cpuExpiry: c2 - c1 };
}

/* ---------- phase 2 + 3: mass expiry and foreground latency ---------- */

/* One foreground loop: alternating write and read; returns per-op latencies (ms) and start times. */
function foreground(write, read, rate = 0) {
  const st = { stop: false, writes: [], reads: [], done: null, n: 0 };
  if (write === null) {   /* no loop (mayfly's quiet burst, (6)'s reference) */
    st.done = Promise.resolve();
    return st;
  }
  st.done = (async () => {
    const r = rng(777);
    /* Paced (rate > 0): pair k (a write, then a read) is due at start + k x 2000 / rate ms. */
    const start = nowMs();
    const pairMs = rate > 0 ? 2000 / rate : 0;
    while (!st.stop) {
      const i = st.n++;
      if (pairMs > 0) {
        const wait = start + i * pairMs - nowMs();
        if (wait >= 1) await sleep(wait);
        if (st.stop) break;
      }
      let t0 = nowMs();
      await write(i);
      let t1 = nowMs();
      st.writes.push(t0, t1 - t0);
      const j = Math.floor(r() * (i + 1));
      t0 = nowMs();
      await read(j);
      t1 = nowMs();
      st.reads.push(t0, t1 - t0);
    }
  })();
  return st;
}

function fgStats(list, from = -Infinity, to = Infinity) {
  const v = [];
  for (let k = 0; k < list.length; k += 2) if (list[k] >= from && list[k] < to) v.push(list[k + 1]);
  return quantiles(v);
}

/* Also the server's CPU seconds per foreground operation (insert or find) on the idle server. */
async function idleLatency(write, read, cpu, rate = 0) {
  const c0 = cpu();
  const fg = foreground(write, read, rate);
  await sleep(IDLE_MS);
  fg.stop = true;
  await fg.done;
  const c1 = cpu();
  const write_ = fgStats(fg.writes);
  const read_ = fgStats(fg.reads);
  return { write: write_, read: read_, ops: fg.n, cpuPerOp: (c1 - c0) / Math.max(1, write_.n + read_.n) };
}

/* Waits until count() is 0 while a foreground loop runs; T is the (wall-clock) expiry instant.
 * Gives up 120 s (+ extraMs) after T. cpu() is read at T and at zero. */
async function massExpiry(name, count, T, write, read, cpu, extraMs = 0, rate = 0, snap = null) {
  /* Wait until just before T. */
  while (Date.now() < T - 500) await sleep(50);
  const fg = foreground(write, read, rate);
  while (Date.now() < T) await sleep(5);
  const tHr = nowMs() - (Date.now() - T);
  const cT = cpu();
  const selfT = process.cpuUsage();   /* this process's CPU: mostly the foreground client's */
  const snapT = snap && write !== null ? await snap() : null;
  let first = null;
  let zero = null;
  let c = N;
  const deadline = T + 120000 + extraMs;
  let lastLog = Date.now();
  while (Date.now() < deadline) {
    c = await count();
    const now = Date.now();
    if (first === null && c < N) first = now;
    if (c === 0) { zero = now; break; }
    if (now - lastLog > 2000) { log(`${name} phase 2: ${c} left`); lastLog = now; }
    await sleep(50);
  }
  const zeroHr = nowMs();
  const cZ = cpu();
  const self = process.cpuUsage(selfT);
  const snapZ = snapT !== null ? await snap() : null;
  fg.stop = true;
  await fg.done;
  return {
    /* The foreground operations' time inside the server from T to zero (mayfly: latencyStats; see serverLatency). */
    serverLat: snapT !== null ? serverLatency(snapT, snapZ) : null,
    cpuExpiry: cZ - cT,
    /* The bench's own CPU from T to zero (its client loop, the count polls), in cores. */
    clientCores: zeroHr > tHr ? (self.user + self.system) / 1000 / (zeroHr - tHr) : null,
    firstAfterMs: first === null ? null : first - T,
    zeroAfterMs: zero === null ? null : zero - T,
    left: c,
    rateSustained: zero !== null && first !== null && zero > first ? N / ((zero - first) / 1000) : null,
    rateFromT: zero !== null ? N / ((zero - T) / 1000) : null,
    write: fgStats(fg.writes, tHr, zeroHr),
    read: fgStats(fg.reads, tHr, zeroHr),
  };
}

/* serverStatus metrics.ttl's scheduling-group counters (see docs/ARCHITECTURE.md, "The server's scheduling group can give way"). */
async function groupCounters(db) {
  const t = (await db.admin().command({ serverStatus: 1 })).metrics.ttl || {};
  const n = (k) => Number(t[k] || 0);
  return { groupLowerings: n('groupLowerings'), groupDeclined: n('groupDeclined'), groupStarved: n('groupStarved') };
}

/*
 * One mass expiry on mayfly (phase 2, and phase 4 beside a busy neighbour):
 * N docs in collection `coll` that all expire at T, then massExpiry() with
 * the foreground loop (fgOps: see mayflySystem) on collection `fg`; tag names the phase in the log.
 */
async function massMayfly(db, fgOps, ingestRate, cpu, tag, coll, fg, idBase, during = null, rate = 0) {
  const c = db.collection(coll);
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const loadStart = Date.now();
  const T = loadStart + (N / ingestRate) * 1000 * 2 + 3000;   /* same-key loads can be slower */
  log(`mayfly ${tag}: loading ${N} docs that all expire at +${((T - loadStart) / 1000).toFixed(1)} s`);
  const c0 = cpu();
  const loadMs = await loadMongo(c, N, 0, () => T);
  const loadEnd = Date.now();
  await settle(() => db.admin().command({ fsync: 1 }));
  const cpuLoad = cpu() - c0;
  log(`mayfly ${tag}: loaded in ${(loadMs / 1000).toFixed(1)} s; expiry in ${((T - loadEnd) / 1000).toFixed(1)} s`);
  const { write, read } = fgOps ? fgOps(fg, idBase) : { write: null, read: null };
  const snap = fg ? () => latencyStatsOf(db, fg) : null;
  const g0 = await groupCounters(db);
  const m = await withNeighbour(during, () => massExpiry('mayfly', () => c.estimatedDocumentCount(), T, write, read, cpu, 0, rate,
    snap));
  const g1 = await groupCounters(db);
  log(`mayfly ${tag}: all gone ${fmtMs(m.zeroAfterMs)} after expiry (first deletion after ${fmtMs(m.firstAfterMs)}); ` +
    `scheduling group (SPEC D9) lowered ${g1.groupLowerings - g0.groupLowerings}, declined ${g1.groupDeclined - g0.groupDeclined}, ` +
    `put back starved ${g1.groupStarved - g0.groupStarved}`);
  /* The deletions written out: a checkpoint, its CPU kept apart (see (6)). */
  const k0 = cpu();
  await db.admin().command({ fsync: 1 });
  const cpuCkpt = cpu() - k0;
  return { ...m, ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - T), cpuLoad, cpuCkpt };
}

/* One mass expiry on Redis (phase 2, and phase 4): N keys m<db>: in logical database db, as massMayfly. */
async function massRedis(port, ingestRate, cpu, tag, db, fgPrefix, during = null, rate = 0) {
  const fgc = new Resp(port);
  await fgc.connect();
  await fgc.cmd('SELECT', '1');
  const loader = new Resp(port);
  await loader.connect();
  await loader.cmd('SELECT', String(db));
  const loadStart = Date.now();
  const T = loadStart + (N / ingestRate) * 1000 * 2 + 3000;   /* same-key loads can be slower */
  log(`redis ${tag}: loading ${N} keys that all expire at +${((T - loadStart) / 1000).toFixed(1)} s`);
  const c0 = cpu();
  const loadMs = await loadRedis(loader, N, `m${db}:`, () => T);
  const loadEnd = Date.now();
  const cpuLoad = cpu() - c0;
  log(`redis ${tag}: loaded in ${(loadMs / 1000).toFixed(1)} s; expiry in ${((T - loadEnd) / 1000).toFixed(1)} s`);
  const write = (i) => fgc.cmd('SET', `${fgPrefix}:${i}`, PAYLOAD);
  const read = (j) => fgc.cmd('GET', `${fgPrefix}:${j}`);
  const m = await withNeighbour(during, () => massExpiry('redis', () => loader.cmd('DBSIZE'), T, write, read, cpu, 0, rate));
  log(`redis ${tag}: all gone ${fmtMs(m.zeroAfterMs)} after expiry (first deletion after ${fmtMs(m.firstAfterMs)})`);
  fgc.close();
  loader.close();
  return { ...m, ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - T), cpuLoad };
}

/*
 * Time inside the server. mayfly counts each command's time from its
 * registration (after its message was read and checked) to the end of its
 * handler, in MongoDB's latency buckets ($collStats latencyStats,
 * serverStatus opLatencies); the client's time is that plus reaching the
 * server and back: the wake-ups of the server's thread and of the
 * client's, a queued request's wait for a worker, and the loopback. latencyStatsOf reads a
 * collection's histograms; serverLatency gives p50 / p99 of the operations
 * counted between two of them (a: null, since the collection's start) for
 * writes and reads, each as its bucket's upper edge in µs.
 */
async function latencyStatsOf(db, coll) {
  const [d] = await db.collection(coll).aggregate([{ $collStats: { latencyStats: { histograms: true } } }]).toArray();
  return d.latencyStats;
}

const LAT_BOUNDS = (() => {   /* MongoDB's bucket lower bounds, µs */
  const b = [0];
  for (let k = 1; k <= 10; k++) b.push(2 ** k);
  for (let k = 11; k <= 20; k++) b.push(2 ** k, 3 * 2 ** (k - 1));
  for (let k = 21; k <= 40; k++) b.push(2 ** k);
  return b;
})();

function serverLatency(a, b) {
  const q = (kind) => {
    const before = new Map(((a && a[kind].histogram) || []).map((e) => [Number(e.micros), Number(e.count)]));
    const d = b[kind].histogram.map((e) => [Number(e.micros), Number(e.count) - (before.get(Number(e.micros)) || 0)])
      .filter(([, n]) => n > 0);
    const n = d.reduce((t, [, k]) => t + k, 0);
    const at = (f) => {
      let seen = 0;
      for (const [micros, k] of d) {
        seen += k;
        if (seen >= Math.ceil(n * f)) {
          const i = LAT_BOUNDS.indexOf(micros);
          return i >= 0 && i + 1 < LAT_BOUNDS.length ? LAT_BOUNDS[i + 1] : Infinity;
        }
      }
      return null;
    };
    return { n, p50: at(0.5), p99: at(0.99) };
  };
  return { write: q('writes'), read: q('reads') };
}

const fmtLat = (q) => (q && q.n ? `<${q.p50} / <${q.p99} µs` : 'n/a');

/* The log line before a foreground client's idle latency: phase 3's closed loop, or phase 2p's paced client. */
function idleNote(sysName, rate) {
  return rate > 0 ? `${sysName} phase 2p: idle latency of a client paced at ${rate} ops/s (5 s)`
    : `${sysName} phase 3: idle foreground latency (5 s)`;
}

/*
 * The foreground client's idle latency (5 s), then a mass expiry beside it:
 * phase 2 with the closed loop (rate 0), phase 2p with a client paced at
 * `rate` operations a second. The client works on collection (key prefix)
 * fg idle and fg + '2' during the expiry.
 */
async function idleThenMassMayfly(db, fgOps, ingestRate, cpu, tag, coll, fg, idBase, rate) {
  const { write, read } = fgOps(fg, 0);
  log(idleNote('mayfly', rate));
  const idle = await idleLatency(write, read, cpu, rate);
  idle.serverLat = serverLatency(null, await latencyStatsOf(db, fg));
  const m = await massMayfly(db, fgOps, ingestRate, cpu, tag, coll, `${fg}2`, idBase, null, rate);
  return { idle, ...m };
}

async function idleThenMassRedis(port, ingestRate, cpu, tag, db, fg, rate) {
  const fgc = new Resp(port);
  await fgc.connect();
  await fgc.cmd('SELECT', '1');
  const write = (i) => fgc.cmd('SET', `${fg}:${i}`, PAYLOAD);
  const read = (j) => fgc.cmd('GET', `${fg}:${j}`);
  log(idleNote('redis', rate));
  const idle = await idleLatency(write, read, cpu, rate);
  fgc.close();
  const m = await massRedis(port, ingestRate, cpu, tag, db, `${fg}2`, null, rate);
  return { idle, ...m };
}

async function phase23Mayfly(db, fgOps, ingestRate, cpu) {
  const m = await idleThenMassMayfly(db, fgOps, ingestRate, cpu, 'phase 2', 'mass', 'fg', 10000000, 0);
  const ss = await db.admin().command({ serverStatus: 1 });
  /* (6)'s burst: phase 2 again with no foreground loop, its CPU measured as phase 1's is (no estimate to net out). */
  const quiet = await massMayfly(db, null, ingestRate, cpu, 'phase 2 again, no foreground loop', 'mass_quiet', null, 0);
  return { ...m, quiet, paceDocsPerSec: ss.metrics && ss.metrics.ttl ? ss.metrics.ttl.paceDocsPerSec : null };
}

const phase23Redis = (port, ingestRate, cpu) => idleThenMassRedis(port, ingestRate, cpu, 'phase 2', 2, 'fg', 0);

/*
 * Phase 2p: phase 2 with a paced foreground client (--fg-rate operations a
 * second) instead of the closed loop: its idle latency (5 s), then a mass
 * expiry of N documents (keys) beside it.
 */
const phase2pMayfly = (db, fgOps, ingestRate, cpu) =>
  idleThenMassMayfly(db, fgOps, ingestRate, cpu, 'phase 2p (paced client)', 'massp', 'fgp', 30000000, FG_RATE);
const phase2pRedis = (port, ingestRate, cpu) =>
  idleThenMassRedis(port, ingestRate, cpu, 'phase 2p (paced client)', 5, 'fgp', FG_RATE);

/* ---------- phase 4: mass expiry beside a busy neighbour ---------- */

/*
 * Runs fn() with a busy neighbour when `during` is 'busy': another process
 * (node, at the default priority, nice 0, in a session of its own) spinning
 * in a loop from before fn starts until it ends, as another program on the
 * same small machine would. The bench's own foreground loop runs as in
 * phase 2.
 */
async function withNeighbour(during, fn) {
  if (during !== 'busy') return fn();
  const spin = spawnServer('neighbour', process.execPath, ['-e', 'for (;;) {}'], { session: true });
  try {
    return await fn();
  } finally {
    await stopServer(spin, 2000);
  }
}

/* ---------- PostgreSQL: server, schema, the delete job ---------- */

/* uid/gid to run initdb and postgres as: nothing when not root; else the
 * `postgres` user (Debian's package creates it), else nobody. */
function pgRunAs() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return {};
  for (const user of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim());
      if (Number.isInteger(uid) && uid > 0) return { uid, gid, user };
    } catch (_) { /* no such user */ }
  }
  throw new Error('running as root and found neither a postgres nor a nobody user to run PostgreSQL as');
}

/* initdb into a fresh temp dir, then postgres on a free loopback port (its
 * socket in the same dir). Everything else is PostgreSQL's default. */
async function startPostgres() {
  const pg = require('pg');
  pg.types.setTypeParser(20, (v) => Number(v));   /* bigint ids and counts as numbers (all < 2^53) */
  const runAs = pgRunAs();
  const dir = makeTempDir('ttlbench-pg-');
  const data = path.join(dir, 'data');
  if (runAs.uid !== undefined) fs.chownSync(dir, runAs.uid, runAs.gid);
  const ids = runAs.uid !== undefined ? { uid: runAs.uid, gid: runAs.gid } : {};
  try {
    execFileSync(pgExe('initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-N'],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], ...ids });
  } catch (e) {
    throw new Error(`initdb failed: ${e.message}\n${e.stderr || ''}`);
  }
  const port = await freePort();
  const entry = spawnServer('postgres', pgExe('postgres'),
    ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1'],
    { cwd: dir, ...ids, stopSignal: 'SIGINT', killSignal: 'SIGQUIT', session: true });   /* fast / immediate shutdown */
  await waitUp(entry, port);
  const conf = { host: '127.0.0.1', port, user: 'postgres', database: 'postgres' };
  const connect = async () => {
    const deadline = Date.now() + 20000;
    for (;;) {
      const c = new pg.Client(conf);
      try { await c.connect(); return c; } catch (e) {   /* "the database system is starting up" */
        await c.end().catch(() => {});
        if (entry.exited || Date.now() > deadline) throw e;
        await sleep(100);
      }
    }
  };
  const admin = await connect();
  const pool = new pg.Pool({ ...conf, max: PG_INFLIGHT });
  return { entry, port, runAs, admin, pool, connect };
}

const pgBackendPid = async (c) => (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p;

/* A document table with the index a TTL index becomes in FerretDB/DocumentDB. */
async function pgCreateTable(c, table) {
  await c.query(`CREATE TABLE ${table} (id bigint PRIMARY KEY, doc jsonb NOT NULL)`);
  await c.query(`CREATE INDEX ${table}_at_ms ON ${table} (((doc->>'at_ms')::bigint))`);
}

/*
 * The TTL job of FerretDB / DocumentDB: a cron job (`* * * * *` at the default
 * 60 s) that deletes the expired rows of every TTL table in batches of
 * PG_BATCH rows, one commit per batch (autocommit statements), until a batch
 * deletes fewer than PG_BATCH. It runs at wall-clock multiples of the interval
 * (as cron does), on its own connection; a tick that falls while a run is
 * still going starts as soon as that run ends. A table watched with
 * `returning` gets RETURNING of the deleted rows' expiry, so the lateness of
 * every row is known (phase 1); otherwise the DELETE is bare (phase 2).
 */
class PgTtlJob {
  constructor(client, intervalMs, batch) {
    this.c = client;
    this.interval = intervalMs;
    this.batch = batch;
    this.tables = new Map();
    this.timer = null;
    this.running = null;
    this.stopped = false;
    this.runs = 0;
    this.error = null;
    this.pid = null;   /* its backend's pid, for its CPU time */
  }

  async init() { this.pid = await pgBackendPid(this.c); }

  /* CPU seconds of the job's backend process: the deletion work itself (not WAL writer, checkpointer, autovacuum). */
  cpu() { return procCpuSec(this.pid); }

  watch(table, returning) {
    const t = { table, deleted: 0, firstSent: null, first: null, last: null, batches: 0, lateness: returning ? [] : null,
      text: `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} ` +
        `WHERE (doc->>'at_ms')::bigint <= (extract(epoch FROM now()) * 1000)::bigint LIMIT $1 FOR UPDATE SKIP LOCKED)` +
        (returning ? ` RETURNING (doc->>'at_ms')::bigint AS at` : '') };
    this.tables.set(table, t);
    return t;
  }

  nextTick(after) { return (Math.floor(after / this.interval) + 1) * this.interval; }

  start() { this.schedule(this.nextTick(Date.now())); }

  schedule(at) {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const began = Date.now();
      this.running = this.run().catch((e) => { this.error = this.error || e; }).finally(() => {
        this.running = null;
        const next = this.nextTick(began);
        this.schedule(next <= Date.now() ? Date.now() : next);   /* a tick missed during the run fires now */
      });
    }, Math.max(0, at - Date.now()));
  }

  async run() {
    this.runs++;
    for (const t of this.tables.values()) {
      for (;;) {
        const sent = Date.now();
        const res = await this.c.query({ name: `ttl_${t.table}`, text: t.text, values: [this.batch] });
        const now = Date.now();
        t.batches++;
        if (res.rowCount > 0) {
          if (t.first === null) { t.firstSent = sent; t.first = now; }
          t.last = now;
          t.deleted += res.rowCount;
          if (t.lateness) for (const row of res.rows) t.lateness.push(now - row.at);
        }
        if (res.rowCount < this.batch || this.stopped) break;
      }
    }
  }

  async stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.running) await this.running;
  }
}

async function phase1Pg(pgs, job, calibRate, cpu) {
  await pgCreateTable(pgs.admin, 'spread');
  const t = job.watch('spread', true);
  const estLoad = (N / calibRate) * 1000;
  const loadStart = Date.now();
  const w0 = loadStart + estLoad * 1.3 + 2000;
  const expiry = (i) => w0 + (SPREAD_MS * i) / N;
  log(`postgres phase 1: loading ${N} rows, expiries spread over ${SPREAD_MS / 1000} s from +${((w0 - loadStart) / 1000).toFixed(1)} s;` +
    ` the delete job (every ${PG_INTERVAL_MS / 1000} s) first ticks +${((job.nextTick(w0) - w0) / 1000).toFixed(1)} s after the window start`);
  const c0 = cpu();
  const j0 = job.cpu();
  const loadMs = await loadPg(pgs.pool, 'spread', N, 0, expiry);
  await settle(() => pgs.pool.query('CHECKPOINT'));
  const loadEnd = Date.now();
  const c1 = cpu();
  log(`postgres phase 1: loaded in ${(loadMs / 1000).toFixed(1)} s (${(N / loadMs * 1000).toFixed(0)} rows/s)` +
    (loadEnd > w0 ? `; WARNING: load overran the window start by ${loadEnd - w0} ms` : ''));
  const sample = sampleIndices(N, SAMPLE, 12345);
  const poller = await pgs.connect();
  const pollerPid = await pgBackendPid(poller);
  const present = async (ids) => new Set((await poller.query({ name: 'poll_spread',
    text: 'SELECT id FROM spread WHERE id = ANY($1)', values: [ids] })).rows.map((r) => r.id));
  /* The job may need a whole interval after the window's end. */
  const deadline = w0 + SPREAD_MS + PG_INTERVAL_MS + TAIL_CAP_MS;
  const res = await pollSample(present, sample, expiry, deadline);
  while (t.deleted < N && Date.now() < deadline && !job.error) await sleep(100);
  const c2 = cpu();
  const jobCpu = job.cpu() - j0;
  /* The sample poller's backend: with lateness of tens of seconds its `due` list
   * grows to the whole sample, so its polls cost seconds of CPU; not expiry's. */
  const pollerCpu = procCpuSec(pollerPid);
  if (job.error) throw job.error;
  const left = (await poller.query('SELECT count(*) AS n FROM spread')).rows[0].n;
  await poller.end();
  log(`postgres phase 1: done; ${res.polls} sample polls, ${left} rows left, job: ${t.deleted} rows deleted in ${t.batches} batches`);
  return { ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - w0), sample: quantiles(res.lateness),
    sampleMissing: res.missing, leftover: left, all: quantiles(t.lateness), allMissing: N - t.lateness.length,
    cpuLoad: c1 - c0, cpuExpiry: c2 - c1 - pollerCpu, pollerCpu, jobCpu };
}

/*
 * A DELETE only marks rows dead; autovacuum reclaims them (heap and both
 * indexes) later, by default once a minute at most per database. Waits
 * (bounded) for an autovacuum of `table` that starts after now to end; returns
 * when it started/ended (ms from now, the start only if seen in
 * pg_stat_progress_vacuum, polled every 100 ms) and the server's CPU seconds
 * from now to its end.
 */
async function waitAutovacuum(c, table, cpu) {
  const t0 = Date.now();
  const c0 = cpu();
  const q = async () => (await c.query(
    `SELECT s.autovacuum_count AS n, (SELECT count(*) FROM pg_stat_progress_vacuum p WHERE p.relid = s.relid) AS running
       FROM pg_stat_user_tables s WHERE s.relname = $1`, [table])).rows[0];
  let st = await q();
  let need = st.n + (st.running > 0 ? 2 : 1);   /* one already under way began before the deletion */
  let started = null;
  let seenRunning = st.running > 0;
  log(`postgres phase 2: waiting (up to ${PG_VACUUM_WAIT_MS / 1000} s) for autovacuum of ${table}`);
  while (Date.now() - t0 < PG_VACUUM_WAIT_MS) {
    await sleep(100);
    st = await q();
    if (st.running > 0 && !seenRunning && started === null) started = Date.now() - t0;
    seenRunning = st.running > 0;
    if (st.n >= need) {
      const ended = Date.now() - t0;
      log(`postgres phase 2: autovacuum of ${table} done +${(ended / 1000).toFixed(1)} s after the rows were gone`);
      return { startedMs: started, endedMs: ended, cpu: cpu() - c0 };
    }
  }
  log(`postgres phase 2: no autovacuum of ${table} within ${PG_VACUUM_WAIT_MS / 1000} s`);
  return { startedMs: started, endedMs: null, cpu: cpu() - c0 };
}

async function phase23Pg(pgs, job, ingestRate, cpu) {
  await pgCreateTable(pgs.admin, 'mass');
  for (const tb of ['fg', 'fg2']) await pgs.admin.query(`CREATE TABLE ${tb} (id bigint PRIMARY KEY, doc jsonb NOT NULL)`);
  const fgc = await pgs.connect();
  const fgDoc = JSON.stringify({ v: PAYLOAD });
  const write = (i) => fgc.query({ name: 'fg_ins', text: 'INSERT INTO fg (id, doc) VALUES ($1, $2)', values: [i, fgDoc] });
  const read = (j) => fgc.query({ name: 'fg_get', text: 'SELECT doc FROM fg WHERE id = $1', values: [j] });
  log('postgres phase 3: idle foreground latency (5 s)');
  const idle = await idleLatency(write, read, cpu);
  const base = 10000000;
  const t = job.watch('mass', false);
  const loadStart = Date.now();
  const T = loadStart + (N / ingestRate) * 1000 * 2 + 3000;
  log(`postgres phase 2: loading ${N} rows that all expire at +${((T - loadStart) / 1000).toFixed(1)} s;` +
    ` the delete job's first tick after that is at +${((job.nextTick(T) - T) / 1000).toFixed(1)} s`);
  const c0 = cpu();
  const loadMs = await loadPg(pgs.pool, 'mass', N, 0, () => T);
  await settle(() => pgs.pool.query('CHECKPOINT'));
  const loadEnd = Date.now();
  const cpuLoad = cpu() - c0;
  log(`postgres phase 2: loaded in ${(loadMs / 1000).toFixed(1)} s; expiry in ${((T - loadEnd) / 1000).toFixed(1)} s`);
  const write2 = (i) => fgc.query({ name: 'fg2_ins', text: 'INSERT INTO fg2 (id, doc) VALUES ($1, $2)', values: [base + i, fgDoc] });
  const read2 = (j) => fgc.query({ name: 'fg2_get', text: 'SELECT doc FROM fg2 WHERE id = $1', values: [base + j] });
  /* count: rows the job has deleted so far (it is the only deleter), read every 50 ms like the others' counts. */
  const j0 = job.cpu();
  const m = await massExpiry('postgres', async () => {
    if (job.error) throw job.error;
    return N - t.deleted;
  }, T, write2, read2, cpu, PG_INTERVAL_MS);
  log(`postgres phase 2: all gone ${fmtMs(m.zeroAfterMs)} after expiry (first deletion after ${fmtMs(m.firstAfterMs)}; ` +
    `${t.batches} batches)`);
  const jobCpu = job.cpu() - j0;
  const left = (await fgc.query('SELECT count(*) AS n FROM mass')).rows[0].n;
  const vac = await waitAutovacuum(fgc, 'mass', cpu);
  await fgc.end();
  return { idle, ...m, ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - T), cpuLoad,
    countAfter: left, vac, jobCpu, jobRate: t.last > t.firstSent ? t.deleted / ((t.last - t.firstSent) / 1000) : null,
    jobFirstSentMs: t.firstSent === null ? null : t.firstSent - T,
    jobFirstMs: t.first === null ? null : t.first - T, jobLastMs: t.last === null ? null : t.last - T };
}

/* ---------- report ---------- */

const fmtMs = (x) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a'
  : x >= 100 ? `${Math.round(x)} ms` : x >= 1 ? `${x.toFixed(1)} ms` : `${x.toFixed(3)} ms`);
const fmtQ = (q) => `${fmtMs(q.p50)} / ${fmtMs(q.p99)} / ${fmtMs(q.max)}`;
const fmtQ2 = (q) => `${fmtMs(q.p50)} / ${fmtMs(q.p99)}`;
const fmtMiB = (kb) => (kb === null ? 'n/a' : `${(kb / 1024).toFixed(0)} MiB`);

/* ---------- the three systems ---------- */

/* Each system: start() (server and clients), calibrate() (load rate, docs/s),
 * phase1(rate), phase23(rate), cpu() (server CPU seconds), rssKb() (peak), close(). */
function mayflySystem() {
  let entry; let client; let fgClient; let fgRaw; let db;
  /* The foreground loop's insert and find by _id on collection coll (--fg-client). */
  const fgOps = (coll, idBase) => {
    if (FG_CLIENT === 'driver') {
      const c = fgClient.db('ttlbench').collection(coll);
      return { write: (i) => c.insertOne({ _id: idBase + i, v: PAYLOAD }), read: (j) => c.findOne({ _id: idBase + j }) };
    }
    return {
      write: (i) => fgRaw.cmd({ insert: coll, documents: [{ _id: idBase + i, v: PAYLOAD }] }),
      read: async (j) => {
        const r = await fgRaw.cmd({ find: coll, filter: { _id: idBase + j }, limit: 1, singleBatch: true });
        if (r.cursor.firstBatch.length !== 1) throw new Error(`mayfly: foreground find of _id ${idBase + j} found nothing`);
      },
    };
  };
  const sys = {
    name: 'mayfly',
    async start() {
      // MAYFLYD_ARGS: extra server flags, e.g. "--setParameter ttlMonitorYieldPercent=25".
      entry = await startMayflyd('ttlbench-mayfly-', [], { session: true });
      const { port } = entry;
      client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { maxPoolSize: 8 });
      fgClient = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { maxPoolSize: 1 });
      await client.connect();
      await fgClient.connect();
      fgRaw = new RawMongo(port, 'ttlbench');
      await fgRaw.connect();
      db = client.db('ttlbench');
      const bi = await client.db('admin').command({ buildInfo: 1 });
      /* What the server sized itself by: the CPUs and memory it was granted, and its WiredTiger cache. */
      const hi = (await client.db('admin').command({ hostInfo: 1 })).system;
      const ss = await client.db('admin').command({ serverStatus: 1 });
      const cacheMb = Math.round(Number(ss.wiredTiger.cache['maximum bytes configured']) / 1048576);
      return `mayflyd ${bi.version} pid ${entry.proc.pid} port ${port}; granted ${ss.network.workers ? ss.network.workers.cpus : '?'} CPU(s) ` +
        `and ${hi.memLimitMB} MB, WiredTiger cache ${cacheMb} MB`;
    },
    async calibrate(calibN) {
      const calib = db.collection('calib');
      await calib.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
      const far = Date.now() + 86400000;
      await loadMongo(calib, 2000, -2000, () => far);   /* warm-up: connection pool, first pages */
      const rate = calibN / (await loadMongo(calib, calibN, 0, () => far)) * 1000;
      await calib.drop();
      return rate;
    },
    phase1: (rate) => phase1Mayfly(db, rate, sys.cpu),
    /* Phase 1 again with the CPUs kept from idling (see (6) under the table). */
    phase1KeptBusy: (rate) => withIdleSpinners(() => phase1Mayfly(db, rate, sys.cpu, 'spread_kept_busy')),
    phase23: (rate) => phase23Mayfly(db, fgOps, rate, sys.cpu),
    phase2p: (rate) => phase2pMayfly(db, fgOps, rate, sys.cpu),
    phase4: (rate) => massMayfly(db, fgOps, rate, sys.cpu, 'phase 4 (busy neighbour)', 'mass4', 'fg4',
      20000000, 'busy'),
    cpu: () => cpuSec(entry.proc.pid),
    rssKb: () => procStatusKb(entry.proc.pid, 'VmHWM'),
    async close() {
      if (client) await client.close().catch(() => {});
      if (fgClient) await fgClient.close().catch(() => {});
      if (fgRaw) fgRaw.close();
    },
  };
  return sys;
}

function redisSystem() {
  let entry; let port; let r;
  const sys = {
    name: 'redis',
    async start() {
      entry = await startRedis('ttlbench-redis-', ['--notify-keyspace-events', 'Ex'], { session: true });
      port = entry.port;
      r = new Resp(port);
      await r.connect();
      const rinfo = await r.cmd('INFO', 'server');
      return `redis ${(/redis_version:(\S+)/.exec(rinfo) || [])[1]} pid ${entry.proc.pid} port ${port}`;
    },
    async calibrate(calibN) {
      const far = Date.now() + 86400000;
      await r.cmd('SELECT', '3');
      const rate = calibN / (await loadRedis(r, calibN, 'c:', () => far)) * 1000;
      await r.cmd('FLUSHDB');
      await r.cmd('SELECT', '0');
      return rate;
    },
    async phase1(rate) {
      const res = await phase1Redis(port, r, rate, sys.cpu);
      await r.cmd('CONFIG', 'SET', 'notify-keyspace-events', '');
      return res;
    },
    phase23: (rate) => phase23Redis(port, rate, sys.cpu),
    phase2p: (rate) => phase2pRedis(port, rate, sys.cpu),
    phase4: (rate) => massRedis(port, rate, sys.cpu, 'phase 4 (busy neighbour)', 4, 'fg4', 'busy'),
    cpu: () => cpuSec(entry.proc.pid),
    rssKb: () => procStatusKb(entry.proc.pid, 'VmHWM'),
    async close() { if (r) { try { r.close(); } catch (_) { /* ignore */ } } },
  };
  return sys;
}

function postgresSystem() {
  let pgs; let job; let jobClient; let pssTimer = null; let pssPeak = 0;
  const sys = {
    name: 'postgres',
    async start() {
      pgs = await startPostgres();
      const v = (await pgs.admin.query('SHOW server_version')).rows[0].server_version;
      const pid = pgs.entry.proc.pid;
      /* Peak memory: the sum of PSS over the postmaster and its children, sampled every 0.5 s. */
      const samplePss = () => { pssPeak = Math.max(pssPeak, pssKb(pid)); };
      samplePss();
      pssTimer = setInterval(samplePss, 500);
      return `postgres ${v} pid ${pid} port ${pgs.port}` + (pgs.runAs.user ? ` (as ${pgs.runAs.user})` : '');
    },
    async calibrate(calibN) {
      await pgCreateTable(pgs.admin, 'calib');
      const far = Date.now() + 86400000;
      await loadPg(pgs.pool, 'calib', 2000, -2000, () => far);   /* warm-up: pool connections, statements */
      const rate = calibN / (await loadPg(pgs.pool, 'calib', calibN, 0, () => far)) * 1000;
      await pgs.admin.query('DROP TABLE calib');
      return rate;
    },
    async phase1(rate) {
      jobClient = await pgs.connect();
      job = new PgTtlJob(jobClient, PG_INTERVAL_MS, PG_BATCH);
      await job.init();
      job.start();
      return phase1Pg(pgs, job, rate, sys.cpu);
    },
    async phase23(rate) {
      const res = await phase23Pg(pgs, job, rate, sys.cpu);
      res.jobRuns = job.runs;
      return res;
    },
    cpu: () => cpuSec(pgs.entry.proc.pid),
    rssKb: () => { if (pgs) pssPeak = Math.max(pssPeak, pssKb(pgs.entry.proc.pid)); return pssPeak || null; },
    async close() {
      if (pssTimer) clearInterval(pssTimer);
      if (job) await job.stop().catch(() => {});
      if (jobClient) await jobClient.end().catch(() => {});
      if (pgs) {
        await pgs.pool.end().catch(() => {});
        await pgs.admin.end().catch(() => {});
      }
    },
  };
  return sys;
}

/* ---------- main ---------- */

/*
 * Runs fn() while one idle-priority spinner per CPU keeps every CPU from
 * going idle; they give way to any other thread at once and their CPU is
 * nobody's we measure. Returns fn's result, or null (fn not run) when the
 * spinners cannot start. Each spinner is SCHED_IDLE (chrt -i 0) in a
 * session of its own whose autogroup is set to nice 19: with autogroups,
 * Linux first shares a CPU between sessions by the autogroup's weight, and
 * SCHED_IDLE only ranks a thread within its own session, so a spinner in a
 * nice-0 session of its own would take half a CPU from the server's session
 * (measured: its spread cost 21 µs of server CPU per document against 6
 * without spinners), and one in the bench's session would weigh as much as
 * the bench against the server.
 */
async function withIdleSpinners(fn) {
  const spinners = [];
  try {
    for (let k = 0; k < os.cpus().length; k++) {
      const e = spawnServer('idle-spinner', 'chrt', ['-i', '0', process.execPath, '-e', 'for (;;) {}'], { session: true });
      spinners.push(e);
      try {
        fs.writeFileSync(`/proc/${e.proc.pid}/autogroup`, '19');
      } catch (_) { /* no autogroups (or not allowed): SCHED_IDLE alone then ranks it */ }
    }
    await sleep(300);
    return spinners.every((e) => !e.exited) ? await fn() : null;
  } finally {
    for (const e of spinners) await stopServer(e, 2000);
  }
}

/*
 * The machine's own price for work done in small slices: the CPU one unit
 * of memory-walking work costs back to back, and when one unit runs every
 * 5 ms (the spread's rhythm: a precise pass every ttlMonitorCoalesceMS), net
 * of the CPU an empty 5 ms wake-up costs. On a virtual machine an idle CPU
 * wakes slowly and cold, so the same instructions cost more CPU time when
 * they come in slices; (6) compares a slice-by-slice workload with a burst,
 * and this says how much of its ratio the machine alone accounts for.
 * Measured in this (client) process, before the servers are loaded.
 */
async function sliceCost() {
  const buf = new Float64Array(1 << 19);
  for (let i = 0; i < buf.length; i++) buf[i] = i;
  let sink = 0;
  const unit = () => { let t = 0; for (let r = 0; r < 2; r++) for (let i = 0; i < buf.length; i += 8) t += buf[i]; sink += t; };
  const cpuUs = (c) => c.user + c.system;
  const n = 1000;
  for (let i = 0; i < 100; i++) unit();
  let c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) unit();
  const busy = cpuUs(process.cpuUsage(c0)) / n;
  c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) { unit(); await sleep(5); }
  const sliced = cpuUs(process.cpuUsage(c0)) / n;
  c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await sleep(5);
  const wake = cpuUs(process.cpuUsage(c0)) / n;
  /*
   * The unit every 5 ms again, this thread spinning on the clock in between
   * instead of sleeping (it never leaves its CPU: no idle period, no
   * context switch), only the unit's own CPU counted: what 5 ms of the
   * host's other work does to this thread's caches and TLBs by itself.
   */
  let spun = 0;
  for (let i = 0; i < n; i++) {
    const until = performance.now() + 5;
    while (performance.now() < until);
    const c = process.cpuUsage();
    unit();
    spun += cpuUs(process.cpuUsage(c));
  }
  spun /= n;
  /*
   * The sliced loop again while one idle-priority (SCHED_IDLE) spinner per
   * CPU keeps every CPU from going idle between the slices; the spinners
   * yield to any other thread at once and their CPU is not ours. If the
   * ratio falls here, the extra cost of slices is the CPUs' idle periods
   * (on a virtual machine: the host's), not the slicing itself.
   */
  const keptBusy = await withIdleSpinners(async () => {
    c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) { unit(); await sleep(5); }
    return cpuUs(process.cpuUsage(c0)) / n;
  });
  if (sink <= 0) throw new Error('slice calibration: nothing summed');
  return { busyUs: busy, slicedUs: sliced, wakeUs: wake, ratio: sliced / busy, workRatio: (sliced - wake) / busy,
    spunUs: spun, spunRatio: spun / busy, keptBusyUs: keptBusy, keptBusyRatio: keptBusy === null ? null : keptBusy / busy };
}

async function main() {
  const tStart = Date.now();
  const make = { mayfly: mayflySystem, redis: redisSystem, postgres: postgresSystem };
  const systems = SYSTEMS.map((s) => make[s]());
  try {
    for (const sys of systems) log(await sys.start());
    log(`docs=${N} sample=${SAMPLE} poll=${POLL_MS}ms` +
      (SYSTEMS.includes('mayfly') ? ` fg-client=${FG_CLIENT}` : '') +
      (SYSTEMS.includes('postgres') ? ` pg-interval=${PG_INTERVAL_MS / 1000}s pg-batch=${PG_BATCH}` : '') +
      ` cores=${os.cpus().length} loadavg=${loadavg()} (other work on the machine skews the figures)`);
    const slices = await sliceCost();
    log(`slice cost: a unit of work ${slices.busyUs.toFixed(0)} µs CPU back to back, ${slices.slicedUs.toFixed(0)} µs ` +
      `when run every 5 ms (${slices.ratio.toFixed(2)}x; an empty wake-up ${slices.wakeUs.toFixed(0)} µs), ` +
      `${slices.spunUs.toFixed(0)} µs every 5 ms with the thread spinning in between (${slices.spunRatio.toFixed(2)}x); ` +
      (slices.keptBusyUs === null ? 'no idle-priority spinners (chrt missing?)'
        : `every 5 ms with the CPUs kept from idling by idle-priority spinners ${slices.keptBusyUs.toFixed(0)} µs ` +
          `(${slices.keptBusyRatio.toFixed(2)}x)`));
    const cpu0 = {};
    for (const sys of systems) cpu0[sys.name] = sys.cpu();

    /* Calibration: a short load into scratch space, to place the expiry windows after the loads. */
    const calibN = Math.min(N, 20000);
    const cal = {};
    for (const sys of systems) cal[sys.name] = await sys.calibrate(calibN);
    log(`calibration: ${systems.map((sys) => `${sys.name} ${cal[sys.name].toFixed(0)} docs/s`).join(', ')}`);

    const R = {};
    for (const sys of systems) R[sys.name] = { p1: await sys.phase1(cal[sys.name]) };
    for (const sys of systems) {
      if (KEPT_BUSY && sys.phase1KeptBusy) {
        log(`${sys.name}: phase 1 again, every CPU kept from idling by idle-priority spinners`);
        R[sys.name].p1b = await sys.phase1KeptBusy(cal[sys.name]);
      }
    }
    for (const sys of systems) R[sys.name].p23 = await sys.phase23(R[sys.name].p1.ingest);
    for (const sys of systems) R[sys.name].p2p = sys.phase2p && FG_RATE > 0 ? await sys.phase2p(R[sys.name].p1.ingest) : null;
    for (const sys of systems) R[sys.name].p4 = sys.phase4 ? await sys.phase4(R[sys.name].p1.ingest) : null;
    for (const sys of systems) {
      R[sys.name].rss = sys.rssKb();
      R[sys.name].cpuTotal = sys.cpu() - cpu0[sys.name];
    }

    const cols = systems.map((sys) => sys.name);
    const row = (label, f) => [label, ...cols.map((n) => f(R[n], n))];
    const fmtS = (x) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : `${x.toFixed(2)} s`);
    const ratio = (a, b) => `${(a.p99 / b.p99).toFixed(2)}x`;
    const rows = [
      ['metric', ...cols], '-',
      row('(1) ingest, spread-expiry load (docs/s)', (x) => fmtInt(x.p1.ingest)),
      row('(1) lateness p50/p99/max, sample of ' + SAMPLE, (x) => fmtQ(x.p1.sample)),
      row('(1) lateness p50/p99/max, all docs', (x, n) => (n === 'mayfly'
        ? (x.p1.server ? `${fmtMs(x.p1.server.p50Ms)} / ${fmtMs(x.p1.server.p99Ms)} / ${fmtMs(x.p1.server.maxMs)} (server)` : 'n/a')
        : `${fmtQ(x.p1.all)} (${n === 'redis' ? 'events' : 'job'})`)),
      row('(1) not removed 30 s after the window (pg: +interval)', (x, n) => (n === 'mayfly'
        ? `${x.p1.sampleMissing} of sample, ${x.p1.leftover} docs`
        : `${x.p1.sampleMissing} of sample, ${x.p1.allMissing} ${n === 'redis' ? 'keys' : 'rows'}`)),
      row('(1) server CPU, load | expiry window', (x, n) => `${fmtS(x.p1.cpuLoad)} | ${fmtS(x.p1.cpuExpiry)}` +
        (n === 'postgres' ? ' (w/o poller)' : '')),
      row('(2) ingest, same-instant load (docs/s)', (x) => fmtInt(x.p23.ingest)),
      row('(2) first deletion after expiry', (x) => fmtMs(x.p23.firstAfterMs)),
      row('(2) all gone after expiry', (x) => fmtMs(x.p23.zeroAfterMs)),
      row('(2) deletion rate, first..last (docs/s)', (x) => fmtInt(x.p23.rateSustained)),
      row('(2) deletion rate, expiry..last (docs/s)', (x) => fmtInt(x.p23.rateFromT)),
      row('(2) server CPU, load | expiry..all gone', (x) => `${fmtS(x.p23.cpuLoad)} | ${fmtS(x.p23.cpuExpiry)}`),
      row('(2) deletion CPU (est.; see below)', (x, n) => (n === 'postgres'
        ? `${fmtS(x.p23.jobCpu + x.p23.vac.cpu)} (job + to autovac end)`
        : `${fmtS(x.p23.cpuExpiry - (x.p23.write.n + x.p23.read.n) * x.p23.idle.cpuPerOp)} (net of (3))`)),
      row('(2) again, no foreground loop: rate | CPU/doc', (x) => (x.p23.quiet
        ? `${fmtInt(x.p23.quiet.rateSustained)} | ${((x.p23.quiet.cpuExpiry * 1e6) / N).toFixed(2)} µs` : 'not run')),
      row('(3) idle insert/SET p50/p99', (x) => fmtQ2(x.p23.idle.write)),
      row('(3) idle find/GET p50/p99', (x) => fmtQ2(x.p23.idle.read)),
      row('(3) during (2) insert/SET p50/p99', (x) => fmtQ2(x.p23.write)),
      row('(3) during (2) find/GET p50/p99', (x) => fmtQ2(x.p23.read)),
      row('(3) during (2) ops measured (insert+find)', (x) => fmtInt(x.p23.write.n + x.p23.read.n)),
      row('(3) during (2) the bench\'s own CPU (its client), cores', (x) => (x.p23.clientCores === null ? 'n/a'
        : x.p23.clientCores.toFixed(2))),
      row('(3) p99 ratio during/idle, insert | find', (x) => `${ratio(x.p23.write, x.p23.idle.write)} | ${ratio(x.p23.read, x.p23.idle.read)}`),
      row('(3) in the server: insert | find p50/p99, idle', (x) => (x.p23.idle.serverLat
        ? `${fmtLat(x.p23.idle.serverLat.write)} | ${fmtLat(x.p23.idle.serverLat.read)}` : 'n/a')),
      row('(3) in the server: insert | find p50/p99, during', (x) => (x.p23.serverLat
        ? `${fmtLat(x.p23.serverLat.write)} | ${fmtLat(x.p23.serverLat.read)}` : 'n/a')),
      row(`(2p) paced client (${FG_RATE} ops/s): deletion rate (docs/s)`, (x) => (x.p2p ? fmtInt(x.p2p.rateSustained) : 'not run')),
      row('(2p) ... idle insert | find p50/p99', (x) => (x.p2p ? `${fmtQ2(x.p2p.idle.write)} | ${fmtQ2(x.p2p.idle.read)}` : 'n/a')),
      row('(2p) ... during insert | find p50/p99', (x) => (x.p2p ? `${fmtQ2(x.p2p.write)} | ${fmtQ2(x.p2p.read)}` : 'n/a')),
      row('(2p) ... p99 ratio during/idle, insert | find', (x) => (x.p2p
        ? `${ratio(x.p2p.write, x.p2p.idle.write)} | ${ratio(x.p2p.read, x.p2p.idle.read)}` : 'n/a')),
      row('(2p) ... in the server: insert | find p50/p99, idle', (x) => (x.p2p && x.p2p.idle.serverLat
        ? `${fmtLat(x.p2p.idle.serverLat.write)} | ${fmtLat(x.p2p.idle.serverLat.read)}` : 'n/a')),
      row('(2p) ... in the server: insert | find p50/p99, during', (x) => (x.p2p && x.p2p.serverLat
        ? `${fmtLat(x.p2p.serverLat.write)} | ${fmtLat(x.p2p.serverLat.read)}` : 'n/a')),
      row('(4) beside a busy neighbour: deletion rate (docs/s)', (x) => (x.p4 ? fmtInt(x.p4.rateSustained) : 'not run')),
      row('(4) ... as a share of (2)\'s rate', (x) => (x.p4 && x.p4.rateSustained && x.p23.rateSustained
        ? `${(x.p4.rateSustained / x.p23.rateSustained).toFixed(2)}x` : 'n/a')),
      row('(4) ... foreground insert/SET | find/GET p99', (x) => (x.p4 ? `${fmtMs(x.p4.write.p99)} | ${fmtMs(x.p4.read.p99)}` : 'n/a')),
      row('server CPU, whole run', (x) => fmtS(x.cpuTotal)),
      row('peak memory (VmHWM; postgres: PSS sum)', (x) => fmtMiB(x.rss)),
    ];
    console.log('');
    console.log(`TTL / expiry benchmark, ${N.toLocaleString('en-US')} docs per phase, ${os.cpus().length} cores` +
      ` (lateness sample polled every ${POLL_MS} ms; Redis lateness from keyspace events` +
      (R.postgres ? `; PostgreSQL: delete job every ${PG_INTERVAL_MS / 1000} s, ${PG_BATCH.toLocaleString('en-US')} rows per batch` : '') + ')');
    printTable(rows);
    const over = cols.filter((n) => R[n].p1.loadOverrunMs || R[n].p23.loadOverrunMs);
    if (over.length) {
      console.log(`note: a load overran its expiry start (ms, phase 1/2): ` +
        over.map((n) => `${n} ${Math.round(R[n].p1.loadOverrunMs)}/${Math.round(R[n].p23.loadOverrunMs)}`).join(', ') +
        '; expiry was then running during the load');
    }
    if (R.postgres) {
      const p = R.postgres.p23;
      console.log(`postgres (2): the job's first DELETE sent +${fmtMs(p.jobFirstSentMs)}, first commit +${fmtMs(p.jobFirstMs)}, ` +
        `last commit +${fmtMs(p.jobLastMs)} after expiry: ${fmtInt(p.jobRate)} rows/s over the job's run; ` +
        `SELECT count(*) after: ${p.countAfter}`);
      console.log(`postgres (2): autovacuum of the deleted rows ` + (p.vac.endedMs === null
        ? `did not finish within ${PG_VACUUM_WAIT_MS / 1000} s` : `${p.vac.startedMs === null ? '' : `started +${fmtMs(p.vac.startedMs)}, `}`
          + `finished +${fmtMs(p.vac.endedMs)} after all gone`) + `; server CPU from all gone to then: ${fmtS(p.vac.cpu)}`);
      console.log(`postgres: CPU of the job's backend alone (the DELETEs): (1) ${fmtS(R.postgres.p1.jobCpu)}, (2) ${fmtS(p.jobCpu)}; ` +
        `of (1)'s sample poller's backend (left out of (1)'s expiry window): ${fmtS(R.postgres.p1.pollerCpu)}; ` +
        `job runs in the whole run: ${p.jobRuns}`);
    }

    if (R.mayfly) {
      const m1 = R.mayfly.p1;
      const m23 = R.mayfly.p23;
      const ok = (b) => (b ? 'MET' : 'NOT MET');
      const t1 = m1.sample.p99 < 1000 && m1.sampleMissing === 0;
      const t2 = m23.rateSustained !== null && m23.rateSustained >= 300000;
      const t3 = m23.write.p99 <= 3 * m23.idle.write.p99 && m23.read.p99 <= 3 * m23.idle.read.p99;
      console.log('');
      console.log('mayfly targets (2-core machine):');
      printTable([
        ['target', 'mayfly', 'result'], '-',
        ['(1) lateness p99 < 1 s', fmtMs(m1.sample.p99) + (m1.server ? ` (server: ${fmtMs(m1.server.p99Ms)})` : ''), ok(t1)],
        ['(2) >= 300,000 deletions/s', fmtInt(m23.rateSustained) + ` (from expiry: ${fmtInt(m23.rateFromT)})`, ok(t2)],
        ['(3) foreground p99 during (2) <= 3x idle',
          `insert ${fmtMs(m23.write.p99)} vs ${fmtMs(m23.idle.write.p99)}, find ${fmtMs(m23.read.p99)} vs ${fmtMs(m23.idle.read.p99)}`, ok(t3)],
      ]);
      /* Issue 13's targets: a faster mass expiry that still paces, and precise expiry at the burst's cost. */
      /*
       * The burst: phase 2 again with no foreground loop (quiet), measured
       * as phase 1's spread is; phase 2's own CPU net of its loop's
       * operations (at the idle loop's CPU per operation) is an estimate,
       * rough once the loop does thousands of operations a second.
       */
      /*
       * Both with the checkpoint that writes their deletions out: phase 1's
       * window (60 s and more) holds one of WiredTiger's periodic
       * checkpoints, which writes part of its deletions, and a burst's (a
       * few seconds) none; each window is followed by an fsync whose CPU
       * (cpuCkpt) is added, so both count their deletions written out once.
       */
      const burstCpu = (m23.quiet ? m23.quiet.cpuExpiry + m23.quiet.cpuCkpt
        : m23.cpuExpiry - (m23.write.n + m23.read.n) * m23.idle.cpuPerOp);
      /* The window's CPU, net of the sample poller's finds and the drain's counts, as (2)'s is net of (3)'s operations. */
      const spreadCpu = m1.cpuExpiry + m1.cpuCkpt - m1.clientOps * m23.idle.cpuPerOp;
      const spreadUs = (spreadCpu * 1e6) / N;
      const burstUs = (burstCpu * 1e6) / N;
      const rd = R.redis ? R.redis.p23.rateSustained : null;
      const t4 = m23.rateSustained !== null && m23.rateSustained >= 500000;
      const t5 = m23.write.p99 <= 2 * m23.idle.write.p99 && m23.read.p99 <= 2 * m23.idle.read.p99;
      const t6 = burstUs > 0 && spreadUs <= 1.5 * burstUs && m1.server !== null && m1.server.p99Ms < 10;
      const m4 = R.mayfly.p4;
      const share4 = m4 && m4.rateSustained && m23.rateSustained ? m4.rateSustained / m23.rateSustained : null;
      const rd4 = R.redis && R.redis.p4 ? R.redis.p4.rateSustained : null;
      const m2p = R.mayfly.p2p;
      const rd2p = R.redis && R.redis.p2p ? R.redis.p2p.rateSustained : null;
      const t4p = m2p && m2p.rateSustained !== null && m2p.rateSustained >= 500000 &&
        m2p.write.p99 <= 2 * m2p.idle.write.p99 && m2p.read.p99 <= 2 * m2p.idle.read.p99;
      printTable([
        ['target (issue 13)', 'mayfly', 'result'], '-',
        ['(4) mass expiry >= 500,000 deletions/s', fmtInt(m23.rateSustained) +
          (rd ? ` (redis ${fmtInt(rd)}: ${(m23.rateSustained / rd).toFixed(2)}x)` : ''), ok(t4)],
        ['(4) with a paced client instead (2p): >= 500,000/s, its p99 <= 2x idle', !m2p ? 'not run'
          : `${fmtInt(m2p.rateSustained)}` + (rd2p ? ` (redis ${fmtInt(rd2p)}: ${(m2p.rateSustained / rd2p).toFixed(2)}x)` : '') +
            `; p99 insert ${(m2p.write.p99 / m2p.idle.write.p99).toFixed(2)}x, find ${(m2p.read.p99 / m2p.idle.read.p99).toFixed(2)}x`,
        !m2p ? 'n/a' : ok(t4p)],
        ['(4) beside a busy neighbour: not halved (>= 0.5x (2)\'s rate)', share4 === null ? 'n/a'
          : `${fmtInt(m4.rateSustained)} (${share4.toFixed(2)}x)` + (rd4 ? ` (redis ${fmtInt(rd4)}: ${(m4.rateSustained / rd4).toFixed(2)}x)` : ''),
        ok(share4 !== null && share4 >= 0.5)],
        ['(5) foreground p99 during (2) <= 2x idle',
          `insert ${(m23.write.p99 / m23.idle.write.p99).toFixed(2)}x, find ${(m23.read.p99 / m23.idle.read.p99).toFixed(2)}x`, ok(t5)],
        ['(6) spread CPU/doc <= 1.5x burst, lateness p99 < 10 ms',
          `${spreadUs.toFixed(2)} vs ${burstUs.toFixed(2)} µs/doc (${(spreadUs / burstUs).toFixed(2)}x; burst ` +
          `${m23.quiet ? 'with no foreground loop' : 'net of (3)'}; both with the checkpoint after them, ` +
          `${((m1.cpuCkpt * 1e6) / N).toFixed(2)} and ${m23.quiet ? ((m23.quiet.cpuCkpt * 1e6) / N).toFixed(2) : 'n/a'} µs/doc; spread net of ` +
          `${fmtInt(m1.clientOps)} poller finds / counts at ${(m23.idle.cpuPerOp * 1e6).toFixed(0)} µs each), ` +
          `p99 ${m1.server ? fmtMs(m1.server.p99Ms) : 'n/a'}`, ok(t6)],
      ]);
      if (m23.paceDocsPerSec !== null) console.log(`mayfly serverStatus ttl.paceDocsPerSec after (2): ${fmtInt(m23.paceDocsPerSec)}`);
      console.log(`(6) context: on this machine the same unit of work costs ${slices.ratio.toFixed(2)}x the CPU when run every ` +
        `5 ms instead of back to back, and an empty 5 ms wake-up alone costs ${slices.wakeUs.toFixed(0)} µs (sliceCost); ` +
        `run every 5 ms by a thread that spins in between and never leaves its CPU, the unit still costs ` +
        `${slices.spunRatio.toFixed(2)}x (the host's other work empties caches and TLBs meanwhile); ` +
        (slices.keptBusyRatio === null ? '' : `with every CPU kept from idling (idle-priority spinners) the sliced unit costs ` +
          `${slices.keptBusyRatio.toFixed(2)}x, so ${slices.keptBusyRatio < slices.ratio ? 'part of the difference is the CPUs\' idle periods' : 'idling is not the cause'}; `) +
        `phase 1 woke the monitor for ${fmtInt(m1.passes)} passes, about ${fmtS((m1.passes * slices.wakeUs) / 1e6)} ` +
        `of its ${fmtS(spreadCpu)} at that price (an upper bound: with passes 8 or 10 ms apart instead of 5 the spread's ` +
        `CPU per document did not fall; see the header comment).`);
      const m1b = R.mayfly.p1b;
      if (m1b) {
        const keptUs = ((m1b.cpuExpiry + m1b.cpuCkpt - m1b.clientOps * m23.idle.cpuPerOp) * 1e6) / N;
        const lat = (x) => (x.serverPhase ? `p99 under ${fmtMs(x.serverPhase.p99Ms)}` : 'n/a');
        console.log(`(6) phase 1 again with every CPU kept from idling (one idle-priority spinner per CPU; their CPU not ` +
          `counted): ${keptUs.toFixed(2)} µs/doc, ${(keptUs / burstUs).toFixed(2)}x the burst, lateness ${lat(m1b)} ` +
          `(phase 1: ${lat(m1)}; log2 buckets of the server's histogram); the same work as (6), on CPUs that never ` +
          `halt in between.`);
      }
      if (m1.passes > 0) {
        console.log(`(6) counted in instructions instead of CPU time: phase 1 deleted ${(N / m1.passes).toFixed(0)} documents per ` +
          `pass; bash bench/ttl_instr_bench.sh prints the instructions per document at that density against the burst's ` +
          `(callgrind; the same count every run).`);
      }
    }
    console.log(`total run time ${((Date.now() - tStart) / 1000).toFixed(0)} s; ` +
      `loadavg at end ${loadavg()}`);
  } finally {
    for (const sys of systems) await sys.close().catch(() => {});
    await stopAll();
  }
}

runMain(main);
