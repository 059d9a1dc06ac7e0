'use strict';
/*
 * The TTL console (src/http/console/, served on --httpPort) in a real browser:
 * Debian's chromium driven by puppeteer-core (no browser is downloaded; set
 * CHROMIUM to use another binary). The server runs with the TTL monitor off
 * (--setParameter ttlMonitorEnabled=false) so that documents already due stay
 * in the backlog the page shows.
 *
 *   node --test tests/clients/console.test.js
 */
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const { before, after } = require('node:test');
const puppeteer = require('puppeteer-core');
const h = require('./harness');

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT_MS = 10000; /* the page polls every 1.5 s */
/* The create form: the one with a "field" input (each index row has a form of its own). */
const CREATE = 'form:has(input[name="field"])';

/*
 * node:test does not wait for one root before() hook before starting the next,
 * so the HTTP port is chosen now, synchronously (a child asks the kernel for a
 * free port; the server is never restarted, so unlike harness.freePort it
 * need not keep below the ephemeral range), and each hook stands alone.
 */
function freePortSync() {
  const script = "const s = require('net').createServer(); s.listen(0, '127.0.0.1', " +
    '() => { process.stdout.write(String(s.address().port)); s.close(); });';
  return Number(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
}
const httpPort = freePortSync();
const base = `http://127.0.0.1:${httpPort}/`;
let browser = null;
const pageErrors = [];

const srv = h.useServer({ args: ['--httpPort', String(httpPort), '--setParameter', 'ttlMonitorEnabled=false'] });

before(async () => {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`console tests need a Chromium at ${CHROMIUM} (Debian's chromium package, which ` +
      'scripts/deps.sh installs; or set CHROMIUM to another Chrome/Chromium binary)');
  }
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}, { timeout: 60000 });

after(async () => {
  if (browser) await browser.close();
});

/* ---------- helpers ---------- */

/* Polls fn until it returns something truthy; fails naming what and the last value seen. */
async function until(what, fn, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}; last: ${JSON.stringify(last)}`);
    await h.sleep(100);
  }
}

/* Opens the console; requests (every URL the page asks for) are recorded on page.requestsSeen. */
async function openConsole({ width = 1200, height = 900 } = {}) {
  assert.ok(browser, 'the browser started');
  // The harness waits for the MongoDB port; the HTTP port listens on the same loop, soon after.
  await until(`the HTTP port ${httpPort} to accept connections`, () => h.tryConnect(httpPort));
  const page = await browser.newPage();
  page.requestsSeen = [];
  page.on('request', (req) => page.requestsSeen.push(req.url()));
  page.on('pageerror', (err) => pageErrors.push(String(err && err.message)));
  await page.setViewport({ width, height });
  const res = await page.goto(base, { waitUntil: 'load' });
  assert.equal(res.status(), 200, 'GET / answers 200');
  await page.waitForFunction(() => document.getElementById('status').dataset.state === 'ok', { timeout: WAIT_MS });
  // A marker that a reload would lose: "live" checks below look for it.
  await page.evaluate(() => { window.__noReload = true; });
  return page;
}

async function stillSamePage(page) {
  assert.equal(await page.evaluate(() => window.__noReload === true), true, 'the page was not reloaded');
}

/* The row of one index as text, or null when the table has none. */
function row(page, db, collection, name) {
  return page.evaluate((d, c, n) => {
    const tr = [...document.querySelectorAll('tr[data-db]')]
      .find((r) => r.dataset.db === d && r.dataset.collection === c && r.dataset.name === n);
    if (!tr) return null;
    const text = (cls) => tr.querySelector(`td.${cls}`).textContent.trim();
    const time = tr.querySelector('td.due time');
    return {
      db: text('db'), collection: text('collection'), name: text('name'), key: text('key'),
      expireAfterSeconds: tr.querySelector('input[name="expireAfterSeconds"]').value,
      archive: text('archive'),
      dueText: time.textContent.trim(), dueDatetime: time.getAttribute('datetime'), dueTitle: time.title,
      backlog: text('backlog'),
    };
  }, db, collection, name);
}

/* Puppeteer handles on a row's expireAfterSeconds input and its Apply button. */
async function rowControls(page, db, collection, name) {
  const tr = await page.evaluateHandle((d, c, n) => [...document.querySelectorAll('tr[data-db]')]
    .find((r) => r.dataset.db === d && r.dataset.collection === c && r.dataset.name === n), db, collection, name);
  const input = await tr.$('input[name="expireAfterSeconds"]');
  const button = await tr.$('button');
  assert.ok(input && button, `row ${db}.${collection} ${name} has an input and a button`);
  return { tr, input, button };
}

async function setValue(handle, value) {
  await handle.evaluate((el) => { el.value = ''; el.focus(); });
  await handle.type(String(value));
}

function alertText(page) {
  return page.evaluate(() => {
    const a = document.querySelector('[role="alert"]');
    if (!a || a.hidden) return null;
    const box = a.getBoundingClientRect();
    return box.width > 0 && box.height > 0 ? a.textContent : null;
  });
}

async function ttlIndex(coll, name) {
  const list = await coll.listIndexes().toArray();
  return list.find((ix) => ix.name === name) || null;
}

async function driverError(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the command to fail');
}

/* ---------- tests ---------- */

h.test('the page lists a TTL index created through the driver, live, and no other index', async () => {
  const page = await openConsole();
  try {
    const db = srv.freshDb('list');
    const coll = db.collection('sessions');
    assert.equal(await row(page, db.databaseName, 'sessions', 'createdAt_1'), null);
    await coll.createIndex({ createdAt: 1 }, { expireAfterSeconds: 3600 });
    await coll.createIndex({ user: 1 }); // not a TTL index: not listed
    const r = await until('the new index in the table', () => row(page, db.databaseName, 'sessions', 'createdAt_1'));
    assert.deepEqual(
      { db: r.db, collection: r.collection, name: r.name, key: r.key, expire: r.expireAfterSeconds, archive: r.archive },
      { db: db.databaseName, collection: 'sessions', name: 'createdAt_1', key: 'createdAt', expire: '3600', archive: 'no' });
    assert.equal(r.backlog, '0');
    assert.equal(await row(page, db.databaseName, 'sessions', 'user_1'), null, 'a non-TTL index is not listed');
    await stillSamePage(page);
  } finally {
    await page.close();
  }
});

h.test('backlog and next due follow inserted documents without a reload', async () => {
  const page = await openConsole();
  try {
    const db = srv.freshDb('backlog');
    const coll = db.collection('events');
    await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const dbName = db.databaseName;

    let r = await until('the empty index', () => row(page, dbName, 'events', 'at_1'));
    assert.equal(r.backlog, '0');
    assert.equal(r.dueDatetime, null, 'no next-due date while the collection is empty');
    assert.doesNotMatch(r.dueText, /\d{4}/);

    // A document not due for centuries: a next-due date, no backlog.
    await coll.insertOne({ at: new Date('2999-06-15T12:00:00Z') });
    r = await until('a next-due date in 2999', async () => {
      const x = await row(page, dbName, 'events', 'at_1');
      return x && /2999/.test(x.dueText) ? x : null;
    });
    assert.equal(new Date(r.dueDatetime).toISOString(), '2999-06-15T12:00:00.000Z');
    assert.equal(r.backlog, '0');

    // Five documents due since 2001 (the monitor is off, so they stay).
    const docs = [0, 1, 2, 3, 4].map((i) => ({ at: new Date(Date.UTC(2001, 5, 15, 12, i)) }));
    await coll.insertMany(docs);
    r = await until('backlog 5 and a next-due date in 2001', async () => {
      const x = await row(page, dbName, 'events', 'at_1');
      return x && x.backlog === '5' && /2001/.test(x.dueText) ? x : null;
    });
    assert.equal(r.backlog, '5', 'the backlog is a plain number');
    assert.match(r.dueText, /^2001-06-1[456] \d\d:\d\d:\d\d$/, 'an absolute (local) date with the year');
    assert.equal(new Date(r.dueDatetime).toISOString(), '2001-06-15T12:00:00.000Z');
    assert.match(r.dueTitle, /2001-06-15T12:00:00\.000Z/);
    assert.equal(await coll.countDocuments(), 6, 'nothing was deleted');
    await stillSamePage(page);
  } finally {
    await page.close();
  }
});

h.test('the create form makes a TTL index (listIndexes sees it)', async () => {
  const page = await openConsole();
  try {
    const db = srv.freshDb('form');
    await page.type(`${CREATE} input[name="db"]`, db.databaseName);
    await page.type(`${CREATE} input[name="collection"]`, 'logs');
    await page.type(`${CREATE} input[name="field"]`, 'ts');
    await page.type(`${CREATE} input[name="expireAfterSeconds"]`, '120');
    await page.click(`${CREATE} button[type="submit"]`);

    const ix = await until('ts_1 in listIndexes', () => ttlIndex(db.collection('logs'), 'ts_1').catch(() => null));
    assert.deepEqual(ix.key, { ts: 1 });
    assert.equal(ix.expireAfterSeconds, 120);
    const r = await until('the created index in the table', () => row(page, db.databaseName, 'logs', 'ts_1'));
    assert.equal(r.expireAfterSeconds, '120');
    assert.equal(await alertText(page), null, 'no error shown');
    await stillSamePage(page);
  } finally {
    await page.close();
  }
});

h.test("a row's input and button change expireAfterSeconds (collMod)", async () => {
  const db = srv.freshDb('patch');
  const coll = db.collection('sessions');
  await coll.createIndex({ createdAt: 1 }, { expireAfterSeconds: 3600 });
  const page = await openConsole();
  try {
    await until('the index row', () => row(page, db.databaseName, 'sessions', 'createdAt_1'));
    const { input, button } = await rowControls(page, db.databaseName, 'sessions', 'createdAt_1');
    await setValue(input, 60);
    await button.click();

    await until('expireAfterSeconds 60 in listIndexes', async () => {
      const ix = await ttlIndex(coll, 'createdAt_1');
      return ix && ix.expireAfterSeconds === 60;
    });
    const r = await until('60 in the row after a refresh', async () => {
      const x = await row(page, db.databaseName, 'sessions', 'createdAt_1');
      return x && x.expireAfterSeconds === '60' ? x : null;
    });
    assert.equal(r.name, 'createdAt_1');
    await until('the old and new values in the notice', () => page.$eval('#notice', (n) => /3600 → 60/.test(n.textContent)));
    assert.equal(await alertText(page), null, 'no error shown');
  } finally {
    await page.close();
  }
});

h.test("a negative expireAfterSeconds shows MongoDB's error message", async () => {
  const db = srv.freshDb('neg');
  const coll = db.collection('sessions');
  await coll.createIndex({ createdAt: 1 }, { expireAfterSeconds: 3600 });
  // What the server says to a driver for the same commands.
  const createErr = await driverError(db.collection('other').createIndex({ ts: 1 }, { expireAfterSeconds: -5 }));
  const modErr = await driverError(db.command({ collMod: 'sessions', index: { name: 'createdAt_1', expireAfterSeconds: -1 } }));
  assert.match(createErr.errmsg, /expireAfterSeconds/);
  assert.match(modErr.errmsg, /expireAfterSeconds/);

  const page = await openConsole();
  const answer = (method) => page.waitForResponse((res) => res.url() === `${base}api/ttl` &&
    res.request().method() === method, { timeout: WAIT_MS });
  try {
    // The create form.
    await page.type(`${CREATE} input[name="db"]`, db.databaseName);
    await page.type(`${CREATE} input[name="collection"]`, 'other');
    await page.type(`${CREATE} input[name="field"]`, 'ts');
    await page.type(`${CREATE} input[name="expireAfterSeconds"]`, '-5');
    let [res] = await Promise.all([answer('POST'), page.click(`${CREATE} button[type="submit"]`)]);
    let body = await res.json();
    assert.equal(res.status(), 400);
    assert.equal(body.code, 67);
    // The API passes MongoDB's reason on (createIndexes puts the index spec before it, as its context).
    assert.ok(createErr.errmsg.endsWith(`:: caused by :: ${body.error}`),
      `${JSON.stringify(body.error)} is MongoDB's ${JSON.stringify(createErr.errmsg)}`);
    let text = await until('an alert', () => alertText(page));
    assert.ok(text.includes(body.error), `alert ${JSON.stringify(text)} shows ${JSON.stringify(body.error)}`);
    assert.ok(text.includes(`code ${body.code}`), `alert ${JSON.stringify(text)} names code ${body.code}`);
    assert.equal(await ttlIndex(db.collection('other'), 'ts_1').catch(() => null), null, 'no index was made');

    // A row's input: the alert now shows collMod's message.
    await until('the index row', () => row(page, db.databaseName, 'sessions', 'createdAt_1'));
    const { input, button } = await rowControls(page, db.databaseName, 'sessions', 'createdAt_1');
    await setValue(input, -1);
    [res] = await Promise.all([answer('PATCH'), button.click()]);
    body = await res.json();
    assert.equal(res.status(), 400);
    assert.ok(modErr.errmsg.startsWith(body.error), `${JSON.stringify(body.error)} is MongoDB's ${JSON.stringify(modErr.errmsg)}`);
    text = await until("collMod's message in the alert", async () => {
      const t = await alertText(page);
      return t && t.includes(body.error) && t.includes('createdAt_1') ? t : null;
    });
    assert.equal((await ttlIndex(coll, 'createdAt_1')).expireAfterSeconds, 3600, 'unchanged');
    // The refresh keeps the user's value in the input rather than overwriting it.
    await h.sleep(2000);
    assert.equal((await row(page, db.databaseName, 'sessions', 'createdAt_1')).expireAfterSeconds, '-1');
  } finally {
    await page.close();
  }
});

h.test('the page loads nothing from outside the server', async () => {
  const db = srv.freshDb('local');
  await db.collection('c').createIndex({ t: 1 }, { expireAfterSeconds: 10 });
  await db.collection('c').insertOne({ t: new Date('2001-01-01T00:00:00Z') });
  const page = await openConsole();
  try {
    const responses = new Map();
    page.on('response', (res) => responses.set(new URL(res.url()).pathname, res.headers()['content-type']));
    await page.reload({ waitUntil: 'load' });
    await until('the index row', () => row(page, db.databaseName, 'c', 't_1'));
    await h.sleep(3500); // a couple of polls
    const seen = page.requestsSeen;
    const foreign = seen.filter((u) => !u.startsWith(base) && !u.startsWith('data:'));
    assert.deepEqual(foreign, [], 'every request goes to the server itself');
    const paths = new Set(seen.filter((u) => u.startsWith(base)).map((u) => new URL(u).pathname));
    for (const p of ['/', '/console.js', '/console.css', '/api/ttl']) assert.ok(paths.has(p), `${p} was requested`);
    assert.ok(seen.filter((u) => u === `${base}api/ttl`).length >= 3, 'the page polls /api/ttl');
    assert.match(responses.get('/'), /^text\/html/);
    assert.match(responses.get('/console.js'), /^(application|text)\/javascript/);
    assert.match(responses.get('/console.css'), /^text\/css/);
    // No markup that points elsewhere either (a lazy image, a font in the stylesheet ...).
    const external = await page.evaluate(() => {
      const urls = [...document.querySelectorAll('[src],[href]')].map((e) => e.src || e.href);
      for (const sheet of document.styleSheets) {
        for (const rule of sheet.cssRules) if (/url\(|@import/.test(rule.cssText)) urls.push(rule.cssText);
      }
      return urls.filter((u) => !u.startsWith(location.origin + '/') && !u.startsWith('data:'));
    });
    assert.deepEqual(external, []);
    assert.deepEqual(pageErrors, [], 'no uncaught error in the page');
  } finally {
    await page.close();
  }
});

h.test('at 380 px wide the rows fit the viewport and nothing widens the page', async () => {
  const db = srv.freshDb('narrow');
  const longName = 'a_rather_long_collection_name_that_a_phone_cannot_show_on_one_line';
  await db.collection(longName).createIndex({ lastSeenAtTimestampField: 1 }, { expireAfterSeconds: 2592000 });
  await db.collection(longName).insertOne({ lastSeenAtTimestampField: new Date('2001-06-15T12:00:00Z') });
  const page = await openConsole({ width: 380, height: 800 });
  try {
    await until('the index row', () => row(page, db.databaseName, longName, 'lastSeenAtTimestampField_1'));
    const layout = await page.evaluate((d, c) => {
      const tr = [...document.querySelectorAll('tr[data-db]')]
        .find((r) => r.dataset.db === d && r.dataset.collection === c);
      const box = (e) => { const b = e.getBoundingClientRect(); return { left: b.left, right: b.right, width: b.width, height: b.height }; };
      /* Elements sticking out to the right, other than inside a horizontal scroll container. */
      const inScroller = (e) => {
        for (let p = e.parentElement; p; p = p.parentElement) {
          const o = getComputedStyle(p).overflowX;
          if ((o === 'auto' || o === 'scroll') && p.scrollWidth > p.clientWidth) return true;
        }
        return false;
      };
      const sticking = [...document.body.querySelectorAll('*')]
        .filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5 && !inScroller(e))
        .map((e) => `${e.tagName.toLowerCase()}.${e.className}`);
      return {
        viewport: innerWidth,
        scrollWidth: document.documentElement.scrollWidth,
        row: box(tr),
        input: box(tr.querySelector('input[name="expireAfterSeconds"]')),
        button: box(tr.querySelector('button')),
        backlog: box(tr.querySelector('td.backlog')),
        sticking,
      };
    }, db.databaseName, longName);
    assert.equal(layout.viewport, 380);
    assert.ok(layout.scrollWidth <= layout.viewport, `document is ${layout.scrollWidth} px wide in a 380 px viewport`);
    assert.deepEqual(layout.sticking, [], 'no element extends past the right edge');
    for (const k of ['row', 'input', 'button', 'backlog']) {
      const b = layout[k];
      assert.ok(b.width > 0 && b.height > 0, `${k} is visible`);
      assert.ok(b.left >= 0 && b.right <= layout.viewport + 0.5, `${k} lies within the viewport: ${JSON.stringify(b)}`);
    }
    const r = await row(page, db.databaseName, longName, 'lastSeenAtTimestampField_1');
    assert.equal(r.backlog, '1');
    // The form is usable too.
    const formBox = await page.$eval(`${CREATE} button[type="submit"]`, (b) => { const x = b.getBoundingClientRect(); return x.right; });
    assert.ok(formBox <= 380.5, 'the create button fits');
  } finally {
    await page.close();
  }
});
