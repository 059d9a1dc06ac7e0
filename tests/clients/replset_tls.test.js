'use strict';
/*
 * Replica-set members talk to each other over TLS (issue 10): with
 * --tlsMode preferTLS (and requireTLS) each member's connections to the
 * others (replSetInitiate's quorum check, heartbeats, initial sync) run TLS,
 * presenting the member's own certificate, which the others verify against
 * --tlsCAFile (client certificates required, mongod's default with a CA
 * file). preferTLS keeps plain clients working, so the harness's own
 * connections need no certificates; a TLS client with a certificate reaches
 * the set through the replica-set URI.
 *
 * Certificates are made at load time with the openssl CLI (scripts/deps.sh
 * installs it): a CA, a member certificate naming localhost and 127.0.0.1,
 * a client certificate.
 */
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const nodeTest = require('node:test');
const { execFileSync } = require('node:child_process');
const { MongoClient } = require('mongodb');
const R = require('./rs_harness');

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-rs-tls-'));
function ssl(...args) { execFileSync('openssl', args, { cwd: DIR, stdio: 'pipe' }); }
ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2',
  '-subj', '/CN=mayfly-rs-test-ca');
for (const [name, cn, ext] of [['member', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], ['client', 'client', '']]) {
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
  const extArgs = [];
  if (ext) {
    fs.writeFileSync(path.join(DIR, `${name}.ext`), `${ext}\n`);
    extArgs.push('-extfile', `${name}.ext`);
  }
  ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', `${name}.crt`, '-days', '2', ...extArgs);
  fs.writeFileSync(path.join(DIR, `${name}.pem`),
    fs.readFileSync(path.join(DIR, `${name}.crt`)) + fs.readFileSync(path.join(DIR, `${name}.key`)));
}
const CA = path.join(DIR, 'ca.pem');
const MEMBER = path.join(DIR, 'member.pem');
const CLIENT = path.join(DIR, 'client.pem');

const rs = R.useReplSet(3, { args: ['--tlsMode', 'preferTLS', '--tlsCertificateKeyFile', MEMBER, '--tlsCAFile', CA] });
nodeTest.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

R.test('the members formed the set over TLS: each one logged TLS connections from the others', async () => {
  await rs.waitForSteadyState();
  const st = await rs.adminCommand(0, { replSetGetStatus: 1 });
  assert.deepEqual(st.members.map((m) => m.health), [1, 1, 1], 'every member is healthy');
  for (let i = 0; i < 3; i++) {
    const log = rs.members[i].server.stderrTail(2000);
    assert.match(log, /TLS connection from 127\.0\.0\.1:\d+ \(TLS[^)]*CN ?= ?localhost/,
      `member ${i} saw a peer connect with TLS and present the member certificate`);
  }
});

R.test('a TLS client with a certificate writes and reads through the replica-set URI; the write reaches every member', async () => {
  const uri = rs.uriFor('rstls', `tls=true&tlsCAFile=${encodeURIComponent(CA)}&tlsCertificateKeyFile=${encodeURIComponent(CLIENT)}`);
  const c = new MongoClient(uri);
  try {
    await c.connect();
    await c.db('rstls').collection('c').insertOne({ _id: 1, over: 'tls' }, { writeConcern: { w: 3, wtimeoutMS: 10000 } });
    assert.deepEqual(await c.db('rstls').collection('c').findOne({ _id: 1 }), { _id: 1, over: 'tls' });
  } finally { await c.close(true).catch(() => {}); }
  for (let i = 0; i < 3; i++) {
    // Every member applies the write (w: 3 is acknowledged once a majority's raft logs hold it: polled here).
    let d = null;
    for (const until = Date.now() + 10000; d === null && Date.now() < until;) {
      d = await rs.direct(i, { readPreference: 'secondaryPreferred' }).db('rstls').collection('c').findOne({ _id: 1 });
      if (d === null) await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(d, { _id: 1, over: 'tls' }, `member ${i} has the write (replicated over TLS)`);
  }
});

R.test('a TLS client without a certificate is refused by every member (the CA file requires one)', async () => {
  const c = new MongoClient(`mongodb://127.0.0.1:${rs.members[0].port}/?directConnection=true&tls=true` +
    `&tlsCAFile=${encodeURIComponent(CA)}&serverSelectionTimeoutMS=1500`);
  await assert.rejects(async () => {
    await c.connect();
    await c.db('admin').command({ ping: 1 });
  }, 'no client certificate: the handshake fails');
  await c.close(true).catch(() => {});
});
