'use strict';
/*
 * What access control and TLS cost (issue 10): one mayflyd per
 * configuration (plain; --auth; --auth over requireTLS), each measured the
 * same way in this run:
 *   - connect + login: a new MongoClient connecting and running one ping,
 *     N_LOGIN times in a row (SCRAM-SHA-256 with the driver's speculative
 *     authentication; the PBKDF2 is the client's, the server only HMACs);
 *   - point reads and inserts: OPS findOne by _id and OPS insertOne on one
 *     connection, one at a time (latency-bound: the per-command check is
 *     what shows).
 * Prints one line per configuration; asserts nothing (figures, not tests).
 *   MAYFLYD=build/mayflyd node bench/auth_bench.js [ops]
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const h = require('../tests/clients/harness');

const OPS = Number(process.argv[2] || 20000);
const N_LOGIN = 200;

function certs(dir) {
  const ssl = (...a) => execFileSync('openssl', a, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=bench-ca');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 's.key', '-out', 's.csr', '-subj', '/CN=localhost');
  fs.writeFileSync(path.join(dir, 'ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  ssl('x509', '-req', '-in', 's.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 's.crt', '-days', '1', '-extfile', 'ext');
  fs.writeFileSync(path.join(dir, 'server.pem'), fs.readFileSync(path.join(dir, 's.crt')) + fs.readFileSync(path.join(dir, 's.key')));
  return { ca: path.join(dir, 'ca.pem'), pem: path.join(dir, 'server.pem') };
}

async function measure(name, args, uriFor, setup) {
  const s = new h.MayflyServer({ args });
  await s.start();
  try {
    if (setup) await setup(s);
    const uri = uriFor(s.port);
    let t = process.hrtime.bigint();
    for (let i = 0; i < N_LOGIN; i++) {
      const c = new MongoClient(uri, { maxPoolSize: 1, monitorCommands: false });
      await c.connect();
      await c.db('admin').command({ ping: 1 });
      await c.close();
    }
    const loginMs = Number(process.hrtime.bigint() - t) / 1e6 / N_LOGIN;
    const c = new MongoClient(uri, { maxPoolSize: 1 });
    await c.connect();
    const coll = c.db('bench').collection('c');
    t = process.hrtime.bigint();
    for (let i = 0; i < OPS; i++) await coll.insertOne({ _id: i, v: i });
    const insPerS = OPS / (Number(process.hrtime.bigint() - t) / 1e9);
    t = process.hrtime.bigint();
    for (let i = 0; i < OPS; i++) await coll.findOne({ _id: i });
    const findPerS = OPS / (Number(process.hrtime.bigint() - t) / 1e9);
    await c.close();
    console.log(`${name.padEnd(22)} connect+login ${loginMs.toFixed(2)} ms   insertOne ${Math.round(insPerS)}/s   findOne ${Math.round(findPerS)}/s`);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-auth-bench-'));
  const { ca, pem } = certs(dir);
  const makeRoot = async (s, tls) => {
    const c = new MongoClient(`mongodb://127.0.0.1:${s.port}/?directConnection=true${tls}`);
    await c.connect();
    await c.db('admin').command({ createUser: 'bench', pwd: 'bench-pw', roles: ['root'] });
    await c.close();
  };
  const tlsQ = `&tls=true&tlsCAFile=${encodeURIComponent(ca)}`;
  console.log(`auth_bench: ${OPS} ops per measurement, ${N_LOGIN} logins, binary ${h.binaryPath()}`);
  await measure('no access control', [], (p) => `mongodb://127.0.0.1:${p}/?directConnection=true`);
  await measure('--auth (SCRAM-SHA-256)', ['--auth'], (p) => `mongodb://bench:bench-pw@127.0.0.1:${p}/?directConnection=true&authSource=admin`,
    (s) => makeRoot(s, ''));
  await measure('--auth + requireTLS', ['--auth', '--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', pem],
    (p) => `mongodb://bench:bench-pw@localhost:${p}/?directConnection=true&authSource=admin${tlsQ}`, (s) => makeRoot(s, tlsQ));
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e) => { console.error(e); process.exit(1); });
