'use strict';
const { RawMongo } = require('./lib/rawmongo');
const { execFileSync } = require('node:child_process');
(async () => {
  const c = new RawMongo(Number(process.argv[2]), 'p');
  await c.connect();
  for (let i = 0; i < 100; i++) await c.cmd({ ping: 1 });
  execFileSync('callgrind_control', ['-i', 'on', process.argv[3]], { stdio: 'ignore' });
  for (let i = 0; i < 5000; i++) await c.cmd({ ping: 1 });
  execFileSync('callgrind_control', ['-d', process.argv[3]], { stdio: 'ignore' });
  c.close();
})();
