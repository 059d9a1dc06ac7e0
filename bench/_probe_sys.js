'use strict';
const { RawMongo } = require('./lib/rawmongo');
(async () => {
  const port = Number(process.argv[2]);
  const c = new RawMongo(port, 'p');
  await c.connect();
  await c.cmd({ insert: 'c', documents: [{ _id: 1, a: 1 }] }).catch(() => {});
  const op = process.argv[3];
  for (let i = 0; i < 2000; i++) {
    if (op === 'ping') await c.cmd({ ping: 1 });
    else if (op === 'find') await c.cmd({ find: 'c', filter: { _id: 1 }, limit: 1, singleBatch: true });
    else await c.cmd({ insert: 'c', documents: [{ a: i }] });
  }
  c.close();
})();
