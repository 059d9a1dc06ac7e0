'use strict';
// Expression and stage-argument behaviours checked against mongod 8.0's
// sources and jstests:
//  - $dateToString's %Z is the UTC offset in minutes with no '+' sign, and a
//    date part outside 0-9999 fails with 18537 (TimeZone::insertPadded,
//    jstests/aggregation/expressions/date_to_string.js); $toString of such a
//    date fails the same way (ExpressionConvert's date->string formatDate),
//    and $convert's onError does not catch it (only ConversionFailure).
//  - $add of a date: the sum leaves int64 milliseconds -> 15 Overflow "date
//    overflow" (AddState::addToDateValue, add_with_date.js).
//  - $dateDiff/$dateTrunc: an unknown unit is 5439014 (parseTimeUnit); a
//    nullish argument answers null before any argument is validated
//    (date_diff.js / date_trunc.js "invalid other fields" cases).
//  - $skip/$limit: parseIntegerElementToNonNegativeLong's reason under
//    5107200 / 5107201 (document_source_skip.cpp / document_source_limit.cpp);
//    only $limit: 0 stays 15958.
const assert = require('node:assert/strict');
const { Long, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const EXEC_CONTEXT = 'PlanExecutor error during aggregation :: caused by :: ';

/*
 * expr's value over doc alone. An expression that fails on the document
 * fails while the pipeline runs, with the context mongod's aggregate adds
 * (taken off here: the cases' regexes read the operator's own message).
 */
async function project(coll, doc, expr) {
  await coll.deleteMany({});
  await coll.insertOne(doc);
  try {
    const r = await coll.aggregate([{ $project: { _id: 0, r: expr } }]).toArray();
    return r[0].r;
  } catch (e) {
    if (e.message.startsWith(EXEC_CONTEXT))
      throw Object.assign(new Error(e.message.slice(EXEC_CONTEXT.length)), { code: e.code, codeName: e.codeName });
    throw e;
  }
}

h.test('$dateToString %Z prints the offset in minutes without a plus sign', async () => {
  const coll = srv.freshDb('dts').collection('c');
  const d = new Date('2017-07-04T14:56:42.911Z');
  const fmt = '%Y-%m-%d %H:%M:%S %z (%Z minutes)';
  const cases = [
    ['UTC', '2017-07-04 14:56:42 +0000 (0 minutes)'],
    ['Europe/London', '2017-07-04 15:56:42 +0100 (60 minutes)'],
    ['America/New_York', '2017-07-04 10:56:42 -0400 (-240 minutes)'],
    ['Australia/Eucla', '2017-07-04 23:41:42 +0845 (525 minutes)'],
    ['Asia/Kathmandu', '2017-07-04 20:41:42 +0545 (345 minutes)'],
  ];
  for (const [tz, want] of cases) {
    assert.equal(await project(coll, { d, tz }, { $dateToString: { date: '$d', format: fmt, timezone: '$tz' } }), want, tz);
  }
  assert.equal(await project(coll, { d }, { $dateToString: { date: '$d', format: fmt } }),
    '2017-07-04 14:56:42 +0000 (0 minutes)');
});

h.test('$dateToString and $toString refuse a year outside 0-9999 with 18537', async () => {
  const coll = srv.freshDb('dtsrange').collection('c');
  const msg = (y) => new RegExp('^Could not convert date to string: date component was outside the supported ' +
    `range of 0-9999: ${y}$`);
  const big = new Date('+010000-01-01T00:00:00Z');
  const neg = new Date('-000001-06-01T00:00:00Z');
  await h.expectCode(project(coll, { d: big }, { $dateToString: { date: '$d', format: '%Y' } }), 18537, msg(10000));
  await h.expectCode(project(coll, { d: neg }, { $dateToString: { date: '$d', format: '%Y-%m-%d' } }), 18537, msg(-1));
  // The default format prints the year too.
  await h.expectCode(project(coll, { d: big }, { $dateToString: { date: '$d' } }), 18537, msg(10000));
  // A format without the year only pads the parts it names.
  assert.equal(await project(coll, { d: big }, { $dateToString: { date: '$d', format: '%m-%d' } }), '01-01');
  // Years 0 and 9999 are inside the range.
  assert.equal(await project(coll, { d: new Date('0000-01-01T00:00:00Z') }, { $dateToString: { date: '$d', format: '%Y' } }), '0000');
  assert.equal(await project(coll, { d: new Date('9999-12-31T23:59:59.999Z') }, { $toString: '$d' }),
    '9999-12-31T23:59:59.999Z');
  await h.expectCode(project(coll, { d: big }, { $toString: '$d' }), 18537, msg(10000));
  await h.expectCode(project(coll, { d: neg }, { $convert: { input: '$d', to: 'string', onError: 'caught' } }),
    18537, msg(-1));
  // A ConversionFailure is still answered by onError.
  assert.equal(await project(coll, { d: big }, { $convert: { input: 'x', to: 'int', onError: 'caught' } }), 'caught');
});

h.test('$add of a date fails with Overflow when the milliseconds leave int64', async () => {
  const db = srv.freshDb('adddate');
  const coll = db.collection('c');
  await coll.insertOne({
    _id: 0,
    decimalVal: Decimal128.fromString('819.5359123621083'),
    doubleVal: 819.536,
    int64Val: Long.fromNumber(820),
    int32Val: 820,
    dateVal: new Date('2019-01-30T07:30:10.137Z'),
    overflowDecimal: Decimal128.fromString('1e5000'),
    overflowDouble: Infinity,
    overflowInt64: Long.MAX_VALUE,
    nanDouble: NaN,
    nanDecimal: Decimal128.fromString('NaN'),
  });
  const run = async (expr) => (await coll.aggregate([{ $project: { _id: 0, r: expr } }]).toArray())[0].r;
  const at = (s) => new Date(`2019-01-30T07:30:${s}Z`).getTime();
  for (const expr of [['$decimalVal', '$dateVal'], ['$dateVal', '$decimalVal'], ['$dateVal', '$doubleVal'],
    ['$int64Val', '$dateVal'], ['$dateVal', '$int32Val']]) {
    assert.equal((await run({ $add: expr })).getTime(), at('10.957'), JSON.stringify(expr));
  }
  // Operands after the date are rounded one by one; the ones before it are summed first.
  assert.equal((await run({ $add: ['$dateVal', '$decimalVal', '$doubleVal', '$int64Val'] })).getTime(), at('12.597'));
  assert.equal((await run({ $add: ['$decimalVal', '$doubleVal', '$int64Val', '$dateVal'] })).getTime(), at('12.596'));
  // A decimal operand after the date rounds half to even (Decimal128::toLong); a tiny one is 0.
  for (const [dec, ms] of [['0.5', '10.137'], ['1.5', '10.139'], ['-2.5', '10.135'], ['1E-6000', '10.137'],
    ['0E+6000', '10.137']]) {
    assert.equal((await run({ $add: ['$dateVal', Decimal128.fromString(dec)] })).getTime(), at(ms), dec);
  }
  // Long precision is kept.
  assert.equal((await run({ $add: ['$dateVal', Long.fromString('2397083434877565865'), '$doubleVal',
    Long.fromString('-2397083434877565864')] })).getTime(), at('10.958'));
  const overflow = [
    ['$dateVal', '$overflowDouble'], ['$dateVal', '$overflowInt64'], ['$dateVal', '$int64Val', '$overflowDouble'],
    ['$int64Val', '$dateVal', '$overflowDouble'], ['$dateVal', '$overflowDecimal'],
    ['$int64Val', '$dateVal', '$overflowDecimal'], ['$dateVal', '$overflowDouble', '$overflowDecimal'],
    ['$dateVal', '$nanDouble'], ['$nanDouble', '$dateVal'], ['$dateVal', '$nanDecimal'], ['$nanDecimal', '$dateVal'],
    ['$dateVal', '$doubleVal', '$nanDouble'], ['$dateVal', '$nanDouble', '$nanDecimal'],
  ];
  for (const expr of overflow) {
    await h.expectCode(run({ $add: expr }), 15, /^PlanExecutor error during aggregation :: caused by :: date overflow$/);
  }
  await h.expectCode(run({ $add: ['$dateVal', 1, '$dateVal'] }), 16612,
    /^PlanExecutor error during aggregation :: caused by :: only one date allowed in an \$add expression$/);
  // A null operand before the overflowing one answers null; after it, the overflow is raised first.
  assert.equal(await run({ $add: ['$dateVal', null, '$overflowInt64'] }), null);
  await h.expectCode(run({ $add: ['$dateVal', '$overflowInt64', null] }), 15,
    /^PlanExecutor error during aggregation :: caused by :: date overflow$/);
});

h.test('$dateDiff and $dateTrunc: unknown unit is 5439014', async () => {
  const coll = srv.freshDb('units').collection('c');
  const d = new Date('2020-11-01T18:23:36Z');
  await h.expectCode(project(coll, { d, u: 'decade' },
    { $dateDiff: { startDate: '$d', endDate: '$d', unit: '$u', timezone: 'UTC' } }), 5439014,
  /^\$dateDiff parameter 'unit' value cannot be recognized as a time unit: decade$/);
  await h.expectCode(project(coll, { d, u: 'century' }, { $dateTrunc: { date: '$d', unit: '$u' } }), 5439014,
    /^\$dateTrunc parameter 'unit' value cannot be recognized as a time unit: century$/);
  await h.expectCode(project(coll, { d, u: 'decade' }, { $dateAdd: { startDate: '$d', unit: '$u', amount: 1 } }),
    5439014, /^\$dateAdd parameter 'unit' value cannot be recognized as a time unit: decade$/);
  await h.expectCode(project(coll, { d, u: 5 }, { $dateTrunc: { date: '$d', unit: '$u' } }), 5439013,
    /^\$dateTrunc requires 'unit' to be a string, but got int$/);
});

h.test('$dateDiff answers null for a nullish argument before validating the others', async () => {
  const coll = srv.freshDb('datediff').collection('c');
  const someDate = new Date('2020-11-01T18:23:36Z');
  const dd = { $dateDiff: { startDate: '$startDate', endDate: '$endDate', unit: '$unit', timezone: '$timeZone' } };
  const ddw = { $dateDiff: { startDate: '$startDate', endDate: '$endDate', unit: '$unit', timezone: '$timeZone',
    startOfWeek: '$startOfWeek' } };
  const nulls = [
    [dd, { endDate: 1, unit: 'century', timeZone: 'INVALID' }],
    [dd, { startDate: '', unit: 'epoch', timeZone: 'INVALID' }],
    [dd, { startDate: 1, endDate: 2, timeZone: 'INVALID' }],
    [dd, { startDate: 1, endDate: 2, unit: 'century' }],
    [dd, { startDate: someDate, endDate: someDate, unit: 'hour', timeZone: null }],
    [ddw, { startDate: 1, endDate: 2, unit: 'week', timeZone: 1 }],
  ];
  for (const [expr, doc] of nulls) assert.equal(await project(coll, doc, expr), null, JSON.stringify(doc));
  const errs = [
    [dd, { startDate: 'string', endDate: someDate, unit: 'hour', timeZone: 'UTC' }, 5166307,
      /^\$dateDiff requires 'startDate' to be a date, but got string$/],
    [dd, { startDate: someDate, endDate: 1, unit: 'hour', timeZone: 'UTC' }, 5166307,
      /^\$dateDiff requires 'endDate' to be a date, but got int$/],
    [dd, { startDate: someDate, endDate: someDate, unit: 5, timeZone: 'UTC' }, 5439013, null],
    [dd, { startDate: someDate, endDate: someDate, unit: 'hour', timeZone: 1 }, 40517,
      /^\$dateDiff parameter 'timezone' value parsing failed :: caused by :: timezone must evaluate to a string, found int$/],
    [dd, { startDate: someDate, endDate: someDate, unit: 'hour', timeZone: 'America/Invalid' }, 40485, null],
    // The timezone is resolved before the dates are checked.
    [dd, { startDate: 1, endDate: 2, unit: 'century', timeZone: 'America/Invalid' }, 40485, null],
    [ddw, { startDate: someDate, endDate: someDate, unit: 'week', timeZone: 'GMT', startOfWeek: 1 }, 5439015, null],
    [ddw, { startDate: someDate, endDate: someDate, unit: 'week', timeZone: 'GMT', startOfWeek: 'FRIDIE' }, 5439016, null],
  ];
  for (const [expr, doc, code, re] of errs) await h.expectCode(project(coll, doc, expr), code, re || undefined);
  // startOfWeek is ignored unless the unit is week.
  assert.equal(Number(await project(coll,
    { startDate: someDate, endDate: someDate, unit: 'hour', timeZone: 'GMT', startOfWeek: 1 }, ddw)), 0);
});

h.test('$dateTrunc answers null for a nullish argument before validating the others', async () => {
  const coll = srv.freshDb('datetrunc').collection('c');
  const someDate = new Date('2020-11-01T18:23:36Z');
  const dt = { $dateTrunc: { date: '$date', unit: '$unit', binSize: '$binSize', timezone: '$timeZone' } };
  const dtw = { $dateTrunc: { date: '$date', unit: '$unit', binSize: '$binSize', timezone: '$timeZone',
    startOfWeek: '$startOfWeek' } };
  const nulls = [
    [dt, { unit: 'H', binSize: 'string', timeZone: 1 }],
    [dt, { date: 'Invalid', binSize: 'Invalid', timeZone: 'Invalid' }],
    [dt, { date: 'Invalid', unit: 'invalid', timeZone: 'Invalid' }],
    [dt, { date: 1, unit: 'century', binSize: '1' }],
    [dt, { date: someDate, unit: 'hour', binSize: null, timeZone: 'UTC' }],
    [dtw, { date: 1, unit: 'week', binSize: '', timeZone: 1 }],
    [dtw, { date: someDate, unit: 'week', startOfWeek: null }],
  ];
  for (const [expr, doc] of nulls) assert.equal(await project(coll, doc, expr), null, JSON.stringify(doc));
  const errs = [
    [dt, { date: 'string', unit: 'hour', binSize: 1, timeZone: 'UTC' }, 5439012,
      /^\$dateTrunc requires 'date' to be a date, but got string$/],
    [dt, { date: someDate, unit: 1, binSize: 1, timeZone: 'UTC' }, 5439013, null],
    [dt, { date: someDate, unit: 'century', binSize: 1, timeZone: 'UTC' }, 5439014, null],
    [dt, { date: someDate, unit: 'hour', binSize: 'Number', timeZone: 'UTC' }, 5439017,
      /^\$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '"Number"' of type string$/],
    [dt, { date: someDate, unit: 'hour', binSize: 0, timeZone: 'UTC' }, 5439018, null],
    [dt, { date: someDate, unit: 'hour', binSize: 2.5, timeZone: 'UTC' }, 5439017, null],
    [dt, { date: someDate, unit: 'hour', binSize: 1, timeZone: 1 }, 40517, null],
    [dt, { date: someDate, unit: 'hour', binSize: 1, timeZone: 'America/Invalid' }, 40485, null],
    [dtw, { date: someDate, unit: 'week', binSize: 1, timeZone: 'GMT', startOfWeek: 1 }, 5439015, null],
    [dtw, { date: someDate, unit: 'week', binSize: 1, timeZone: 'GMT', startOfWeek: 'FRIDIE' }, 5439016, null],
  ];
  for (const [expr, doc, code, re] of errs) await h.expectCode(project(coll, doc, expr), code, re || undefined);
  assert.deepEqual(await project(coll,
    { date: new Date('2020-01-30T18:59:00.000Z'), binSize: 1, unit: 'year', timeZone: 'GMT', startOfWeek: 1 }, dtw),
  new Date('2020-01-01T00:00:00.000Z'));
  assert.deepEqual(await project(coll,
    { date: new Date('2000-01-30T18:00:00Z'), unit: 'week', binSize: 2, timeZone: 'America/New_York', startOfWeek: 'mon' },
    dtw), new Date('2000-01-17T05:00:00Z'));
});

h.test('$skip and $limit argument errors are 5107200 / 5107201', async () => {
  const coll = srv.freshDb('skiplimit').collection('c');
  await coll.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  const cases = [
    [{ $skip: 3.5 }, 5107200, 'invalid argument to $skip stage: Expected an integer: $skip: 3.5'],
    [{ $skip: 'x' }, 5107200, 'invalid argument to $skip stage: Expected a number in: $skip: "x"'],
    [{ $skip: -1 }, 5107200, 'invalid argument to $skip stage: Expected a non-negative number in: $skip: -1'],
    [{ $skip: Long.fromNumber(-2) }, 5107200, 'invalid argument to $skip stage: Expected a non-negative number in: $skip: -2'],
    [{ $limit: 2.5 }, 5107201, 'invalid argument to $limit stage: Expected an integer: $limit: 2.5'],
    [{ $limit: 'x' }, 5107201, 'invalid argument to $limit stage: Expected a number in: $limit: "x"'],
    [{ $limit: -1 }, 5107201, 'invalid argument to $limit stage: Expected a non-negative number in: $limit: -1'],
    [{ $limit: 0 }, 15958, 'the limit must be positive'],
  ];
  for (const [stage, code, msg] of cases) {
    const esc = msg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    await h.expectCode(coll.aggregate([stage]).toArray(), code, new RegExp(`^${esc}$`));
  }
  // Integral doubles and decimals are accepted.
  assert.equal((await coll.aggregate([{ $sort: { _id: 1 } }, { $skip: 1.0 }, { $limit: Decimal128.fromString('1') }])
    .toArray()).length, 1);
  assert.deepEqual(await coll.aggregate([{ $sort: { _id: 1 } }, { $skip: 0 }, { $limit: 2 }]).toArray(),
    [{ _id: 1 }, { _id: 2 }]);
});

// A query's $expr that cannot be evaluated fails the query, as mongod's
// ExprMatchExpression throws; it does not match nothing.
h.test('a query $expr that fails to evaluate fails find, count, aggregate $match, update and delete', async () => {
  const db = srv.freshDb('expr_fail');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, z: 1 }, { _id: 2, z: 0 }]);
  const E = { $expr: { $gt: [{ $divide: [1, '$z'] }, 0] } };
  const divide = (e) => e.code === 2 && /can't \$divide by zero/.test(e.message);
  await assert.rejects(c.find(E).toArray(), divide);
  await assert.rejects(c.find({ _id: 2, ...E }).toArray(), divide); // the _id fast path
  await assert.rejects(c.find({ _id: { $gte: 1 }, ...E }).toArray(), divide); // an index scan
  await assert.rejects(db.command({ count: 'c', query: E }), divide);
  await assert.rejects(c.aggregate([{ $match: E }]).toArray(), divide);
  await assert.rejects(c.aggregate([{ $project: { z: 1 } }, { $match: E }]).toArray(), divide);
  let r = await db.command({ update: 'c', updates: [{ q: E, u: { $set: { k: 1 } }, multi: true }] });
  assert.equal(r.writeErrors[0].code, 2);
  r = await db.command({ delete: 'c', deletes: [{ q: E, limit: 0 }] });
  assert.equal(r.writeErrors[0].code, 2);
  assert.deepEqual(await c.find().toArray(), [{ _id: 1, z: 1 }, { _id: 2, z: 0 }]);
  // Where the failing branch is not evaluated, the query runs.
  assert.equal((await c.find({ $or: [{ z: 0 }, E] }).toArray()).length, 2);
  assert.deepEqual(await c.find({ z: 1, ...E }).toArray(), [{ _id: 1, z: 1 }]);
});

// Found by helper-74: breaking a date within 808 ms of the smallest one into
// parts overflowed (secs * 1000) and killed a sanitizer build.
h.test('dates at the ends of the 64-bit range break into parts', async () => {
  const db = srv.freshDb('expr_minmax_dates');
  const D = (ms) => ({ $toDate: ms });
  const [r] = await db.aggregate([{ $documents: [{}] }, {
    $project: {
      _id: 0,
      y: { $year: D(Long.MIN_VALUE) },
      ms: { $millisecond: D(Long.MIN_VALUE) },
      parts: { $dateToParts: { date: D(Long.MIN_VALUE.add(500)), timezone: 'America/New_York' } },
      ymax: { $year: D(Long.MAX_VALUE) },
      s: { $toString: D(Long.fromInt(-1)) },
    },
  }]).toArray();
  assert.equal(r.y, -292275055);
  assert.equal(r.ms, 192); // -9223372036854775808 ms is 808 ms before a whole second
  assert.equal(r.parts.year, -292275055);
  assert.equal(r.ymax, 292278994);
  assert.equal(r.s, '1969-12-31T23:59:59.999Z');
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { s: { $toString: D(Long.MIN_VALUE) } } }]).toArray(),
    (e) => e.code === 18537);
});

// Found by helper-74: a NUL in $dateToString's format cut the output short
// (mongod walks the whole StringData), and hour 24 parsed as the next day
// (timelib warns "The parsed time was invalid", which mongod raises).
h.test('$dateToString copies a NUL of its format; $dateFromString refuses hour 24', async () => {
  const db = srv.freshDb('expr_nul_fmt');
  const [r] = await db.aggregate([{ $documents: [{}] }, {
    $project: { _id: 0, s: { $dateToString: { date: { $toDate: 1500000000123 }, format: 'a\u0000b%Y' } } },
  }]).toArray();
  assert.equal(r.s, 'a\u0000b2017');
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { s: { $dateToString: { date: '$$NOW', format: '%\u0000' } } } }]).toArray(),
    (e) => e.code === 18536);
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { d: { $dateFromString: { dateString: '2017-07-04T24:00:00' } } } }]).toArray(),
    (err) => err.code === 241 && /The parsed time was invalid/.test(err.message));
  await assert.rejects(db.aggregate([{ $documents: [{}] }, { $project: { d: { $toDate: '2017-07-04T24:00:00' } } }]).toArray(),
    (err) => err.code === 241);
  const [ok] = await db.aggregate([{ $documents: [{}] }, { $project: { _id: 0, d: { $dateFromString: { dateString: '2017-07-04T23:59:59' } } } }]).toArray();
  assert.equal(ok.d.toISOString(), '2017-07-04T23:59:59.000Z');
});

// Zone names are those of mongod's TimeZoneDatabase: timelib's built-in
// database (every Zone and Link of the IANA tz source) plus the fixed offsets
// of parseUtcOffset; anything else is 40485 'unrecognized time zone
// identifier' (date_time_support.cpp, TimeZoneDatabase::getTimeZone). Files of
// /usr/share/zoneinfo that are not zone names ("localtime", "posixrules", the
// "posix/" and "right/" copies) used to be accepted.
h.test('time zone names outside MongoDB\'s database are 40485', async () => {
  const coll = srv.freshDb('tznames').collection('c');
  const d = new Date('2020-07-01T12:00:00Z');
  for (const tz of ['localtime', 'posixrules', 'posix/Europe/Paris', 'right/UTC', 'zone.tab', 'Europe/Nowhere']) {
    const why = `unrecognized time zone identifier: "${tz.replace(/[.+/]/g, '\\$&')}"$`;
    // From a field (opened at evaluation) and as a constant (opened when the
    // pipeline is optimized, so under that context, as mongod's).
    await h.expectCode(project(coll, { d, tz }, { $hour: { date: '$d', timezone: '$tz' } }), 40485,
      new RegExp(`^${why}`));
    await h.expectCode(project(coll, { d }, { $hour: { date: '$d', timezone: tz } }), 40485,
      new RegExp(`^Failed to optimize pipeline :: caused by :: ${why}`));
  }
  const cases = [
    ['America/New_York', 8], ['US/Eastern', 8], ['UTC', 12], ['Etc/GMT+5', 7], ['GMT', 12],
    ['Europe/Kiev', 15], ['+04:00', 16], ['-0130', 10], ['+03', 15],
  ];
  for (const [tz, want] of cases) {
    assert.equal(await project(coll, { d, tz }, { $hour: { date: '$d', timezone: '$tz' } }), want, tz);
    assert.equal(await project(coll, { d }, { $hour: { date: '$d', timezone: tz } }), want, tz);
  }
});
