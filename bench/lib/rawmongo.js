'use strict';
/*
 * A minimal OP_MSG client for benchmarks: one connection, one request at a
 * time, no driver. cmd(body) sends body (with $db) as an OP_MSG and resolves
 * with the reply's body, or rejects on an error reply (ok != 1 or
 * writeErrors) or a closed connection. Used by bench/ttl_bench.js's
 * foreground loop, bench/request_instr_bench.js and bench/sched_blame.js: the same kind of client
 * as the benches' RESP clients, so mayfly's and Redis's clients cost about
 * the same CPU per operation (the Node driver spends 220-350 µs of its own
 * CPU per operation on a 2-core machine).
 */
const { connectLoopback } = require('./common');
const { BSON } = require('mongodb');

class RawMongo {
  constructor(port, db) {
    this.port = port;
    this.db = db;
    this.buf = null;
    this.pending = null;
    this.reqId = 1;
  }

  async connect() {
    this.sock = await connectLoopback(this.port, (d) => this.onData(d), () => {
      const p = this.pending;
      this.pending = null;
      if (p) p.reject(new Error('mayfly connection closed'));
    });
  }

  close() { this.sock.destroy(); }

  onData(d) {
    const buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    if (buf.length < 4 || buf.length < buf.readInt32LE(0)) { this.buf = buf; return; }
    this.buf = null;
    const p = this.pending;
    this.pending = null;
    if (!p) return;
    try {
      if (buf.readInt32LE(12) !== 2013 || buf[20] !== 0) throw new Error('mayfly: not an OP_MSG reply');
      const body = BSON.deserialize(buf.subarray(21, 21 + buf.readInt32LE(21)));
      if (body.ok !== 1 || body.writeErrors) throw new Error(`mayfly: error reply ${JSON.stringify(body)}`);
      p.resolve(body);
    } catch (e) {
      p.reject(e);
    }
  }

  cmd(body) {
    const b = Buffer.from(BSON.serialize({ ...body, $db: this.db }));
    const h = Buffer.alloc(21);
    h.writeInt32LE(21 + b.length, 0);
    h.writeInt32LE(this.reqId++, 4);
    h.writeInt32LE(2013, 12);   /* OP_MSG; flags 0; then a kind-0 section */
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.sock.write(Buffer.concat([h, b]));
    });
  }
}

module.exports = { RawMongo };
