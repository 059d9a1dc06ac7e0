'use strict';
// $dateFromString / $toDate over the strings mongod 8.0 parses with timelib:
// the cases of MongoDB's jstests/aggregation/expressions/date_from_string.js
// (free-form "wacky" strings, zone abbreviations with their real offsets,
// military zone letters, a zone after a space for %z, ISO week formats) and
// the error messages that jstest checks (Data missing, Format literal not
// found, The parsed date was invalid, an incomplete date/time string, NULs).
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const D = (s) => new Date(s);

/* evs: the values of several expressions over one $documents document. */
async function evs(db, exprs) {
  const proj = { _id: 0 };
  exprs.forEach((e, i) => { proj['r' + i] = e; });
  const r = await db.aggregate([{ $documents: [{}] }, { $project: proj }]).toArray();
  return exprs.map((_, i) => r[0]['r' + i]);
}

/* fails: the expression fails with code, its message containing text. */
async function fails(db, expr, code, text) {
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { _id: 0, r: expr } }]).toArray(), (e) => {
    assert.equal(e.code, code, `${JSON.stringify(expr)}: got ${e.code} ${e.message}`);
    if (text !== undefined)
      assert.ok(e.message.includes(text), `${JSON.stringify(expr)}: "${e.message}" lacks "${text}"`);
    return true;
  });
}

const dfs = (dateString, format) => ({ $dateFromString: format === undefined ? { dateString } : { dateString, format } });

h.test('free-form strings of date_from_string.js ("wacky" formats)', async () => {
  const db = srv.freshDb('dp_wacky');
  const cases = [
    ['July 4th, 2017', '2017-07-04T00:00:00Z'],
    ['July 4th, 2017 12:39:30 BST', '2017-07-04T11:39:30Z'],
    ['July 4th, 2017 11am', '2017-07-04T11:00:00Z'],
    ['July 4th, 2017 12pm', '2017-07-04T12:00:00Z'],
    ['7/4/17', '2017-07-04T00:00:00Z'],
    ['04-07-2017', '2017-07-04T00:00:00Z'],
    ['2017-Jul-04 noon', '2017-07-04T12:00:00Z'],
    ['2017-07-04 12:48:07 GMT+0545', '2017-07-04T07:03:07Z'],
    ['2017-07-04 12:48:07 GMT-0200', '2017-07-04T14:48:07Z'],
    ['2017-07-04T11:56.02', '2017-07-04T11:56:02Z'],
    ['2017-07-04T11:56.02.813', '2017-07-04T11:56:02.813Z'],
    ['2017-07-04T11:56.02.81', '2017-07-04T11:56:02.810Z'],
    ['2017-07-04T11:56.02.8', '2017-07-04T11:56:02.800Z'],
    ['2017-07-06 11:36:54', '2017-07-06T11:36:54Z'],
    ['1960-07-10T12:10:37.448', '1960-07-10T12:10:37.448Z'],
  ];
  const got = await evs(db, cases.map(([s]) => dfs(s)));
  cases.forEach(([s, want], i) => assert.deepEqual(got[i], D(want), s));
  // $toDate goes through the same parser.
  const conv = await evs(db, cases.map(([s]) => ({ $toDate: s })));
  cases.forEach(([s, want], i) => assert.deepEqual(conv[i], D(want), `$toDate ${s}`));
});

h.test('zones after a timestamp: GMT offsets, abbreviations, military letters; free form and %z', async () => {
  const db = srv.freshDb('dp_zones');
  const cases = [
    ['2017-07-14T12:02:44.771 GMT', '2017-07-14T12:02:44.771Z'],
    ['2017-07-14T12:02:44.771 GMT+00', '2017-07-14T12:02:44.771Z'],
    ['2017-07-14T12:02:44.771 GMT+00:00', '2017-07-14T12:02:44.771Z'],
    ['2017-07-14T12:02:44.771 GMT+02', '2017-07-14T10:02:44.771Z'],
    ['2017-07-14T12:02:44.771 GMT+02:00', '2017-07-14T10:02:44.771Z'],
    ['2017-07-14T12:02:44.771+03', '2017-07-14T09:02:44.771Z'],
    ['2017-07-14T12:02:44.771+0330', '2017-07-14T08:32:44.771Z'],
    ['2017-07-14T12:02:44.771+03:30', '2017-07-14T08:32:44.771Z'],
    ['2017-07-14T12:02:44.771 UTC', '2017-07-14T12:02:44.771Z'],
    ['2017-07-14T12:02:44.771 CEST', '2017-07-14T10:02:44.771Z'],
    ['2017-07-14T12:02:44.771 EST', '2017-07-14T17:02:44.771Z'],
    ['2017-07-14T12:02:44.771 PDT', '2017-07-14T19:02:44.771Z'],
    ['2017-07-14T12:02:44.771 A', '2017-07-14T11:02:44.771Z'],
    ['2017-07-14T12:02:44.771 L', '2017-07-14T01:02:44.771Z'],
    ['2017-07-14T12:02:44.771 P', '2017-07-14T15:02:44.771Z'],
    ['2017-07-14T12:02:44.771 Z', '2017-07-14T12:02:44.771Z'],
  ];
  const free = await evs(db, cases.map(([s]) => dfs(s)));
  cases.forEach(([s, want], i) => assert.deepEqual(free[i], D(want), s));
  const fmt = await evs(db, cases.map(([s]) => dfs(s, '%Y-%m-%dT%H:%M:%S.%L%z')));
  cases.forEach(([s, want], i) => assert.deepEqual(fmt[i], D(want), `%z ${s}`));
});

h.test('formats: the jstest cases, ISO year/week/day, %Z minutes', async () => {
  const db = srv.freshDb('dp_formats');
  const cases = [
    ['2017-07-04T11:56:02Z', '%Y-%m-%dT%H:%M:%SZ', '2017-07-04T11:56:02Z'],
    ['2017-07-04T11:56:02.81Z', '%Y-%m-%dT%H:%M:%S.%LZ', '2017-07-04T11:56:02.810Z'],
    ['2017-07-04T11:56.02.8', '%Y-%m-%dT%H:%M.%S.%L', '2017-07-04T11:56:02.800Z'],
    ['05 12 1988', '%d %m %Y', '1988-12-05T00:00:00Z'],
    ['1992 % 04 % 26', '%Y %% %m %% %d', '1992-04-26T00:00:00Z'],
    ['Day: 05 Month: 12 Year: 1988', 'Day: %d Month: %m Year: %Y', '1988-12-05T00:00:00Z'],
    ['4/26/1992:+0445', '%m/%d/%Y:%z', '1992-04-25T19:15:00Z'],
    ['4/26/1992:+285', '%m/%d/%Y:%Z', '1992-04-25T19:15:00Z'],
    ['2017', '%G', '2017-01-02T00:00:00Z'],
    ['2017, Week 53', '%G, Week %V', '2018-01-01T00:00:00Z'],
    ['2017, Day 5', '%G, Day %u', '2017-01-06T00:00:00Z'],
    ['53.7.2017', '%V.%u.%G', '2018-01-07T00:00:00Z'],
    ['1.1.1', '%V.%u.%G', '0001-01-01T00:00:00Z'],
  ];
  const got = await evs(db, cases.map(([s, f]) => dfs(s, f)));
  cases.forEach(([s, f, want], i) => assert.deepEqual(got[i], D(want), `${s} / ${f}`));
});

h.test('error messages the jstest checks', async () => {
  const db = srv.freshDb('dp_errors');
  await fails(db, dfs('July 4th'), 241, 'an incomplete date/time string has been found');
  await fails(db, dfs('12:50:53'), 241, 'an incomplete date/time string has been found');
  await fails(db, dfs('2017, 12:50:53'), 241, 'Error parsing date string');
  await fails(db, dfs('60.Monday1770/06:59'), 241, 'Error parsing date string');
  await fails(db, dfs('2018-01', '%Y-%m-%d'), 241, 'Data missing');
  await fails(db, dfs('2018-01', '%Y'), 241, 'Trailing data');
  await fails(db, dfs('1992-26-04', 'Y-d-m'), 241, 'Format literal not found');
  await fails(db, dfs('1992', '%n'), 18536, 'Invalid format character');
  await fails(db, dfs('ISO Day 6', 'ISO Day %u'), 241, 'The parsed date was invalid');
  await fails(db, dfs('ISO Week 52', 'ISO Week %V'), 241, 'The parsed date was invalid');
  await fails(db, dfs('ISO Week 1, 2018', 'ISO Week %V, %Y'), 241, 'Mixing of ISO dates with natural dates is not allowed');
  await fails(db, dfs('12/31/2018', '%m/%d/%G'), 241, 'Mixing of ISO dates with natural dates is not allowed');
  await fails(db, { $dateFromString: { dateString: '4/26/1992:+0445', format: '%m/%d/%Y:%z', timezone: '+0500' } }, 241,
    'you cannot pass in a date/time string with GMT offset together with a timezone argument');
  await fails(db, { $dateFromString: { dateString: '2017-07-12T22:23:55 GMT+02:00', timezone: 'Europe/Amsterdam' } }, 241);
  await fails(db, { $dateFromString: { dateString: '2017-07-12T22:23:55Z', timezone: 'Europe/Amsterdam' } }, 241);
  await fails(db, dfs('2017-07-12T22:23:55 Europe/Amsterdam'), 241);
  // A NUL in the string ends timelib's reading of it with a format, but the
  // message quotes all of it (the NUL shown as "\0").
  await fails(db, dfs('12/31\u0000/2018', '%m/%d/%Y'), 241, 'Data missing');
  await fails(db, dfs('12/31\u0000/2018', '%m/%d/%Y'), 241, "'12/31\\0/2018'");
  await fails(db, dfs('12/31/2018', '%m/%d\u0000/%Y'), 241, 'Trailing data');
  await fails(db, dfs('2017-07-04 11:56:02 XYZQ'), 241, 'The timezone could not be found in the database');
  await fails(db, dfs('2017-07-04 2017-07-05'), 241, 'Double date specification');
});

h.test('more timelib forms: day names, keywords, 2-digit years, pointed dates, dates after times', async () => {
  const db = srv.freshDb('dp_more');
  const cases = [
    ['Tue, 04 Jul 2017 11:56:02 GMT', '2017-07-04T11:56:02Z'],
    ['Monday 2017-07-04', '2017-07-10T00:00:00Z'], // a day name moves forward to that weekday
    ['2017-07-04 tomorrow', '2017-07-05T00:00:00Z'],
    ['2017-07-04 midnight', '2017-07-04T00:00:00Z'],
    ['4.7.2017', '2017-07-04T00:00:00Z'],
    ['04.07.17', '2017-07-04T00:00:00Z'],
    ['17-07-04', '2017-07-04T00:00:00Z'],
    ['4 July 2017 10:00 pm', '2017-07-04T22:00:00Z'],
    ['July 2017', '2017-07-01T00:00:00Z'],
    ['2017 July', '2017-07-01T00:00:00Z'],
    ['Jul 4 12:30 2017', '2017-07-04T12:30:00Z'],
    ['20170704T115602', '2017-07-04T11:56:02Z'],
    ['2017-07-04 11:56:02 (CEST)', '2017-07-04T09:56:02Z'],
    ['2017-07-04 11:56:02 -5', '2017-07-04T16:56:02Z'],
  ];
  const got = await evs(db, cases.map(([s]) => dfs(s)));
  cases.forEach(([s, want], i) => assert.deepEqual(got[i], D(want), s));
});

// Not a date case: the $percentile expression's 'p' read as mongod's parseP
// (accumulator_percentile.cpp), kept here with the other parse-time checks
// of this change.
h.test('zone offsets are read as timelib_parse_tz_cor reads the whole run (helper-121); Mon-DD-YYYY', async () => {
  const db = srv.freshDb('dp_tzcor');
  const cases = [
    ['2017-01-01T00:00:00+05:30:00', '2016-12-31T18:30:00Z'],
    ['2017-01-01T00:00:00+053000', '2016-12-31T18:30:00Z'],
    ['2017-01-01T00:00:00+0530', '2016-12-31T18:30:00Z'],
    ['2017-01-01T00:00:00-5', '2017-01-01T05:00:00Z'],
    ['Jul-04-2017', '2017-07-04T00:00:00Z'],
    ['Jul-04-2017 10:00', '2017-07-04T10:00:00Z'],
  ];
  const got = await evs(db, cases.map(([s]) => dfs(s)));
  cases.forEach(([s, want], i) => assert.deepEqual(got[i], D(want), s));
  // A run of another length is no offset (it overflowed a long before: UBSan's abort).
  await fails(db, dfs('2017-01-01T00:00:00+12345'), 241, 'The timezone could not be found in the database');
  await fails(db, dfs('2017-01-01T00:00:00+99:991234567890123456789012345'), 241,
    'The timezone could not be found in the database');
});

h.test('$percentile expression: p must fold to a constant array of numbers in [0, 1]', async () => {
  const db = srv.freshDb('dp_pct');
  const pct = (p) => ({ $percentile: { input: [1, 2, 3], p, method: 'approximate' } });
  const [a, b, c] = await evs(db, [pct({ $literal: [0.5] }), pct([{ $add: [0.25, 0.25] }]), pct([0, 1])]);
  assert.deepEqual(a, [2]);
  assert.deepEqual(b, [2]);
  assert.deepEqual(c, [1, 3]);
  await fails(db, pct(['$q']), 7750300, "The $percentile 'p' field must be an array of constant values, but found value: ");
  await fails(db, pct('$q'), 7750300);
  await fails(db, pct([]), 7750301, 'but found: []');
  await fails(db, pct(5), 7750301, 'but found: 5');
  await fails(db, pct({ $literal: [] }), 7750301);
  await fails(db, pct(['a']), 7750302);
  await fails(db, pct([1.5]), 7750303);
  await fails(db, pct({ $literal: [-0.5] }), 7750303);
});
