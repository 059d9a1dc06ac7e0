'use strict';
/*
 * mongod.conf (issue 11's "a real mongod.conf", first part): --config reads
 * mongod's YAML with libyaml: nested sections (net, storage, security,
 * replication, systemLog, setParameter as a mapping of parameters), unknown
 * keys stop start-up with a clear message, the older flat "name = value"
 * file still works, and systemLog.path sends the JSON log to a file that
 * SIGTERM-free rotation (mv + SIGUSR1) reopens. net.http.port moves the
 * HTTP port (0: none); a busy explicit one stops start-up, a busy default
 * one is logged and skipped. operationProfiling (mode, slowOpThresholdMs,
 * slowOpSampleRate) and the matching flags set the profiler at start-up.
 *
 * The harness gives --port and --dbpath on the command line; the files here
 * set everything else.
 */
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-config-'));
function conf(name, text) {
  const f = path.join(DIR, name);
  fs.writeFileSync(f, text);
  return f;
}

async function withServer(args, fn) {
  const s = new h.MayflyServer({ args });
  await s.start();
  try {
    await fn(s);
  } finally {
    const info = await s.stop();
    s.cleanup();
    assert.equal(info && info.code, 0, `clean shutdown: ${JSON.stringify(info)}`);
  }
}

h.test('a nested mongod.conf: net, security, setParameter and systemLog sections all take effect', { timeout: 60000 }, async () => {
  const log = path.join(DIR, 'mongod.log');
  const file = conf('mongod.conf', [
    '# a mongod.conf as mongod reads it',
    'net:',
    '  bindIp: 127.0.0.1',
    '  maxIncomingConnections: 500',
    'security:',
    '  authorization: enabled',
    'setParameter:',
    '  cursorTimeoutMillis: 123456',
    '  ttlMonitorSleepSecs: 7',
    'systemLog:',
    '  destination: file',
    `  path: ${log}`,
    '  logAppend: true',
    '',
  ].join('\n'));
  await withServer(['--config', file], async (s) => {
    const anon = new MongoClient(s.uri);
    try {
      await h.expectCode(anon.db('t').collection('c').findOne(), 13);
      await anon.db('admin').command({ createUser: 'cfg', pwd: 'cfg-pw', roles: ['root'] });
    } finally { await anon.close(true); }
    const c = new MongoClient(`mongodb://cfg:cfg-pw@127.0.0.1:${s.port}/?directConnection=true&authSource=admin`);
    try {
      const p = await c.db('admin').command({ getParameter: 1, cursorTimeoutMillis: 1, ttlMonitorSleepSecs: 1 });
      assert.equal(Number(p.cursorTimeoutMillis), 123456);
      assert.equal(Number(p.ttlMonitorSleepSecs), 7);
      const opts = await c.db('admin').command({ getCmdLineOpts: 1 });
      assert.equal(opts.parsed.security.authorization, 'enabled');
    } finally { await c.close(true); }
    assert.match(fs.readFileSync(log, 'utf8'), /"c":"ACCESS"/, 'the log went to systemLog.path');
    assert.equal(s.stderrTail(5).trim(), '', 'nothing on stderr once the log file is open');
    // Rotation: move the file away, SIGUSR1, and new lines land in a fresh file at the path.
    fs.renameSync(log, `${log}.1`);
    process.kill(s.pid, 'SIGUSR1');
    await h.sleep(200);
    const again = new MongoClient(`mongodb://cfg:cfg-pw@127.0.0.1:${s.port}/?directConnection=true&authSource=admin`);
    try { await again.db('admin').command({ ping: 1 }); } finally { await again.close(true); }
    assert.ok(fs.existsSync(log), 'SIGUSR1 reopened systemLog.path');
    assert.match(fs.readFileSync(log, 'utf8'), /connection accepted/, 'new lines go to the reopened file');
    // The logRotate command does the same (what logrotate configs run through mongosh); it needs a privilege.
    fs.renameSync(log, `${log}.2`);
    const rot = new MongoClient(`mongodb://cfg:cfg-pw@127.0.0.1:${s.port}/?directConnection=true&authSource=admin`);
    try {
      assert.equal((await rot.db('admin').command({ logRotate: 1 })).ok, 1);
      assert.ok(fs.existsSync(log), 'logRotate reopened systemLog.path');
      assert.match(fs.readFileSync(log, 'utf8'), /Log rotation initiated/);
      assert.equal((await rot.db('admin').command({ logRotate: 'server' })).ok, 1);
      await h.expectCode(rot.db('admin').command({ logRotate: 'audit' }), 2);
      await h.expectCode(rot.db('t').command({ logRotate: 1 }), 13);
    } finally { await rot.close(true); }
  });
});

h.test('an unknown key stops start-up with its dotted name; a list where a value belongs too', () => {
  for (const [text, want] of [
    ['net:\n  bindIp: 127.0.0.1\n  colour: blue\n', /unrecognised option 'net\.colour'/],
    ['security:\n  authorization: sometimes\n', /authorization/],
    ['net:\n  bindIp: [127.0.0.1, localhost]\n', /lists are not supported/],
    ['net:\n  port: 1\n   bindIp: x\n  - oops\n', /YAML error at line/],
  ]) {
    const r = spawnSync(h.binaryPath(), ['--port', '1', '--dbpath', DIR, '--config', conf('bad.conf', text)],
      { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 2, `exit status 2 for ${JSON.stringify(text)}: ${r.stderr}`);
    assert.match(r.stderr, want);
  }
});

h.test('the flat "name = value" file of earlier versions still works', { timeout: 60000 }, async () => {
  const file = conf('flat.conf', 'auth = true\nsetParameter = cursorTimeoutMillis=54321\n');
  await withServer(['--config', file], async (s) => {
    const c = new MongoClient(s.uri);
    try {
      await h.expectCode(c.db('t').collection('c').findOne(), 13);
    } finally { await c.close(true); }
  });
});

async function httpGet(port, p) {
  const r = await fetch(`http://127.0.0.1:${port}${p}`);
  return { status: r.status, body: await r.text() };
}

h.test('net.http.port in mongod.conf moves the HTTP port; 0 turns it off', { timeout: 60000 }, async () => {
  const port = await h.freePort();
  const file = conf('http.conf', `net:\n  bindIp: 127.0.0.1\n  http:\n    port: ${port}\n`);
  await withServer(['--config', file], async () => {
    const r = await httpGet(port, '/api/ttl');
    assert.equal(r.status, 200);
    assert.ok(Array.isArray(JSON.parse(r.body).indexes));
  });
  const off = conf('http-off.conf', 'net:\n  http:\n    port: 0\n');
  await withServer(['--config', off], async (s) => {
    assert.equal(await h.tryConnect(s.port + 1000), false, 'no HTTP listener on the default port');
    assert.match(s.stderrTail(400), /"Waiting for connections/);
    assert.doesNotMatch(s.stderrTail(400), /HTTP console and metrics on/);
  });
});

h.test('a busy --httpPort stops start-up; a busy default HTTP port is logged and skipped', { timeout: 60000 }, async () => {
  const net = require('node:net');
  const blocker = net.createServer();
  const busy = await h.freePort();
  await new Promise((res) => blocker.listen(busy, '127.0.0.1', res));
  try {
    const r = spawnSync(h.binaryPath(), ['--port', String(await h.freePort()), '--dbpath', fs.mkdtempSync(path.join(DIR, 'd')),
      '--httpPort', String(busy)], { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0, 'start-up fails');
    assert.match(r.stderr, /cannot listen for HTTP on 127\.0\.0\.1:\d+/);
    // The default (port + 1000) busy: the server runs without the HTTP port and says why.
    const s = new h.MayflyServer({});
    s.port = busy - 1000;
    if (s.port > 1024 && await h.tryConnect(s.port) === false) {
      await s.start();
      try {
        const c = new MongoClient(s.uri);
        try { assert.equal((await c.db('admin').command({ ping: 1 })).ok, 1); } finally { await c.close(true); }
        assert.match(s.stderrTail(400), /HTTP port 127\.0\.0\.1:\d+ is not available/);
      } finally {
        await s.stop();
        s.cleanup();
      }
    }
  } finally {
    blocker.close();
  }
});

h.test('operationProfiling in mongod.conf (mode, slowOpThresholdMs, slowOpSampleRate) and --profile/--slowms/--slowOpSampleRate', { timeout: 90000 }, async () => {
  /* Common in real mongod.conf files: before, such a file stopped start-up as an unknown key. */
  const file = conf('prof.conf', 'operationProfiling:\n  mode: slowOp\n  slowOpThresholdMs: 0\n  slowOpSampleRate: 1.0\n');
  await withServer(['--config', file], async (s) => {
    const c = new MongoClient(s.uri);
    try {
      const db = c.db('profconf');
      const st = await db.command({ profile: -1 });
      assert.equal(st.was, 1, 'every database starts at level 1 (slowOp)');
      assert.equal(Number(st.slowms), 0);
      assert.equal(st.sampleRate, 1);
      await db.collection('c').insertOne({ _id: 1 });
      await db.collection('c').findOne({ _id: 1 });
      assert.ok(await db.collection('system.profile').countDocuments({ op: 'query' }) >= 1, 'slow (>= 0 ms) finds profiled');
      await db.command({ profile: 0 });
      assert.equal((await c.db('other').command({ profile: -1 })).was, 1, 'the others keep the default');
    } finally { await c.close(true); }
  });
  await withServer(['--profile', '0', '--slowms', '250', '--slowOpSampleRate', '0.25'], async (s) => {
    const c = new MongoClient(s.uri);
    try {
      const st = await c.db('x').command({ profile: -1 });
      assert.equal(st.was, 0);
      assert.equal(Number(st.slowms), 250);
      assert.equal(st.sampleRate, 0.25);
      const opts = await c.db('admin').command({ getCmdLineOpts: 1 });
      assert.deepEqual(opts.parsed.operationProfiling, { mode: 'off', slowOpThresholdMs: 250, slowOpSampleRate: 0.25 });
    } finally { await c.close(true); }
  });
  for (const [args, want] of [
    [['--profile', '3'], /bad --profile/],
    [['--profile', 'slowOp'], /bad --profile/], /* as mongod: the flag takes a number, the file a name */
    [['--config', conf('prof-num.conf', 'operationProfiling:\n  mode: 1\n')], /bad operationProfiling.mode 1/],
    [['--slowms', '-1'], /bad --slowms/],
    [['--slowOpSampleRate', '1.5'], /bad --slowOpSampleRate/],
    [['--config', conf('prof-bad.conf', 'operationProfiling:\n  mode: sometimes\n')], /bad operationProfiling.mode sometimes/],
  ]) {
    const r = spawnSync(h.binaryPath(), ['--port', '1', '--dbpath', DIR, ...args], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 2, `exit status 2 for ${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, want);
  }
});

/* Found in review: with a default level, any command created its database's system.profile, and undid dropDatabase. */
h.test('--profile 2 creates no database for a command sent to a new name, keeps a dropped one dropped, and stores whole UTF-8 namespaces', { timeout: 90000 }, async () => {
  await withServer(['--profile', '2', '--slowms', '0'], async (s) => {
    const c = new MongoClient(s.uri);
    try {
      const names = async () => (await c.db('admin').command({ listDatabases: 1, nameOnly: true })).databases.map((d) => d.name);
      for (let i = 0; i < 5; i++) await c.db(`noprof${i}`).command({ ping: 1 });
      assert.deepEqual((await names()).filter((n) => n.startsWith('noprof')), [], 'pings to new names create nothing');
      const db = c.db('profiled');
      await db.collection('c').insertOne({ _id: 1 });
      await db.collection('c').findOne({ _id: 1 });
      assert.ok(await db.collection('system.profile').countDocuments({ op: 'query' }) >= 1, 'an existing database is profiled');
      /* A namespace cut inside a two-byte character: the profile entry is still valid UTF-8 (the driver reads it). */
      await db.command({ ping: 'x' + 'é'.repeat(300) }); /* 'profiled.x' + 501 bytes: the cut falls inside a character */
      const entries = await db.collection('system.profile').find({}).toArray();
      assert.ok(entries.length >= 2);
      await db.dropDatabase();
      await db.command({ ping: 1 });
      assert.ok(!(await names()).includes('profiled'), 'a dropped database stays dropped');
    } finally { await c.close(true); }
  });
});

h.test('cleanup', () => fs.rmSync(DIR, { recursive: true, force: true }));
