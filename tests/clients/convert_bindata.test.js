'use strict';
// $convert between strings and binData, as MongoDB 8.0 answers it
// (src/mongo/db/exec/expression/evaluate_convert.cpp, parseBinDataFormat,
// parseStringToBinData, performConvertBinDataToString,
// performConvertBinDataToBinData, computeBinDataType; the cases of
// jstests/aggregation/expressions/convert_bindata.js): 'to' as a document
// {type, subtype}, 'format' base64 / base64url / hex / utf8 / uuid / auto,
// their failures (ConversionFailure 241, so onError applies) and the
// argument errors (not ConversionFailures, so onError does not).
const assert = require('node:assert/strict');
const { Binary } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const UUID_STR = '867dee52-c331-484e-92d1-c56479b8e67e';
const B64 = 'hn3uUsMxSE6S0cVkebjmfg==';
const B64URL = 'hn3uUsMxSE6S0cVkebjmfg';
const HEX = '867DEE52C331484E92D1C56479B8E67E';
const BYTES = Buffer.from(B64, 'base64');
const EMOJI = '🙂😎';

const bin = (b64, subtype = 0) => new Binary(Buffer.from(b64, 'base64'), subtype);

const DOC = {
  _id: 1,
  uuidStr: UUID_STR,
  b64: B64,
  u: new Binary(BYTES, 4),
  g: new Binary(BYTES, 0),
  user: new Binary(BYTES, 255),
  emo: bin('8J+ZgvCfmI4='),
  bad8: new Binary(Buffer.from([0xe2, 0x82]), 0),
  short4: new Binary(Buffer.from([1, 2, 3]), 4),
  empty: new Binary(Buffer.alloc(0), 0),
};

let coll = null;
const EXEC_CONTEXT = 'PlanExecutor error during aggregation :: caused by :: ';
/*
 * expr's value over DOC. A conversion that fails on the document fails while
 * the pipeline runs, with the context mongod's aggregate adds (checked here
 * and taken off, so the cases' regexes read the conversion's own message).
 */
async function evalExpr(expr) {
  if (!coll) {
    coll = srv.freshDb('convbin').collection('c');
    await coll.insertOne(DOC);
  }
  try {
    const [r] = await coll.aggregate([{ $project: { _id: 0, r: expr } }]).toArray();
    return r.r;
  } catch (e) {
    if (e.code === 241 && e.message.startsWith(EXEC_CONTEXT))
      throw Object.assign(new Error(e.message.slice(EXEC_CONTEXT.length)), { code: e.code, codeName: e.codeName });
    throw e;
  }
}

/* assertBin: v is a Binary of the subtype holding the bytes (a Buffer or base64 text). */
function assertBin(v, bytes, subtype) {
  assert.ok(v instanceof Binary, `expected a Binary, got ${JSON.stringify(v)}`);
  assert.equal(v.sub_type, subtype);
  const want = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes, 'base64');
  assert.equal(Buffer.from(v.buffer).toString('hex'), want.toString('hex'));
}

const toBin = (input, format, subtype) => ({
  $convert: { input, to: subtype === undefined ? 'binData' : { type: 'binData', subtype }, format },
});
const toStr = (input, format) => ({ $convert: { input, to: 'string', format } });

h.test('string -> binData in each format', async () => {
  assertBin(await evalExpr(toBin(UUID_STR, 'uuid', 4)), BYTES, 4);
  assertBin(await evalExpr(toBin('$uuidStr', 'uuid', 4)), BYTES, 4);
  assertBin(await evalExpr(toBin(UUID_STR.toUpperCase(), 'uuid', 4)), BYTES, 4);
  assertBin(await evalExpr(toBin(B64, 'base64', 0)), BYTES, 0);
  assertBin(await evalExpr(toBin('$b64', 'base64')), BYTES, 0); // subtype defaults to 0
  assertBin(await evalExpr(toBin(B64URL, 'base64url', 0)), BYTES, 0);
  assertBin(await evalExpr(toBin(B64, 'base64url', 0)), BYTES, 0); // padding is optional, not refused
  assertBin(await evalExpr(toBin('-_8', 'base64url', 0)), Buffer.from([0xfb, 0xff]), 0);
  assertBin(await evalExpr(toBin('+/8=', 'base64', 0)), Buffer.from([0xfb, 0xff]), 0);
  assertBin(await evalExpr(toBin(HEX, 'hex', 0)), BYTES, 0);
  assertBin(await evalExpr(toBin(HEX.toLowerCase(), 'hex', 0)), BYTES, 0);
  assertBin(await evalExpr(toBin(EMOJI, 'utf8', 0)), '8J+ZgvCfmI4=', 0);
  assertBin(await evalExpr(toBin('aGk=', 'base64', 128)), Buffer.from('hi'), 128);
  assertBin(await evalExpr(toBin('6869', 'hex', 5.0)), Buffer.from('hi'), 5);
  assertBin(await evalExpr(toBin('', 'base64', 0)), Buffer.alloc(0), 0);
  assertBin(await evalExpr(toBin('', 'hex', 0)), Buffer.alloc(0), 0);
  // 'to' as a document with a type number, and with only a type.
  assertBin(await evalExpr({ $convert: { input: B64, to: { type: 5, subtype: 0 }, format: 'base64' } }), BYTES, 0);
  assertBin(await evalExpr({ $convert: { input: B64, to: { type: 'binData' }, format: 'base64' } }), BYTES, 0);
});

h.test('binData -> string in each format', async () => {
  assert.equal(await evalExpr(toStr('$u', 'uuid')), UUID_STR);
  assert.equal(await evalExpr(toStr('$u', 'auto')), UUID_STR);
  assert.equal(await evalExpr(toStr('$g', 'auto')), B64);
  assert.equal(await evalExpr(toStr('$short4', 'auto')), 'AQID'); // subtype 4 but not 16 bytes: base64
  assert.equal(await evalExpr(toStr('$u', 'base64')), B64);
  assert.equal(await evalExpr(toStr('$g', 'base64url')), B64URL);
  assert.equal(await evalExpr(toStr(new Binary(Buffer.from([0xfb, 0xff]), 0), 'base64url')), '-_8');
  assert.equal(await evalExpr(toStr(new Binary(Buffer.from([0xfb, 0xff]), 0), 'base64')), '+/8=');
  assert.equal(await evalExpr(toStr('$g', 'hex')), HEX);
  assert.equal(await evalExpr(toStr('$emo', 'utf8')), EMOJI);
  assert.equal(await evalExpr(toStr('$empty', 'base64')), '');
  assert.equal(await evalExpr(toStr('$empty', 'hex')), '');
  assert.equal(await evalExpr({ $convert: { input: '$g', to: { type: 'string' }, format: 'hex' } }), HEX);
});

h.test('round trips through each format', async () => {
  const trips = [['base64', 0], ['base64url', 0], ['hex', 0], ['uuid', 4], ['base64', 200]];
  for (const [format, subtype] of trips) {
    const src = format === 'uuid' ? '$u' : new Binary(BYTES, subtype);
    const r = await evalExpr(toBin(toStr(src, format), format, subtype));
    assertBin(r, BYTES, subtype);
  }
  assertBin(await evalExpr(toBin(toStr('$emo', 'utf8'), 'utf8', 0)), '8J+ZgvCfmI4=', 0);
  assert.equal(await evalExpr(toStr(toBin(HEX, 'hex', 0), 'hex')), HEX);
  assert.equal(await evalExpr(toStr(toBin(UUID_STR, 'uuid', 4), 'auto')), UUID_STR);
});

h.test('binData -> binData keeps a matching subtype, refuses another', async () => {
  assertBin(await evalExpr(toBin('$u', undefined, 4)), BYTES, 4);
  assertBin(await evalExpr(toBin('$g', undefined, 0)), BYTES, 0);
  assertBin(await evalExpr({ $convert: { input: '$g', to: 'binData' } }), BYTES, 0);
  assertBin(await evalExpr({ $convert: { input: '$user', to: { type: 'binData', subtype: 255 } } }), BYTES, 255);
  const msg = /^Conversions between different BinData subtypes are not supported$/;
  await h.expectCode(evalExpr({ $convert: { input: '$u', to: { type: 'binData', subtype: 0 } } }), 241, msg);
  await h.expectCode(evalExpr({ $convert: { input: '$g', to: { type: 'binData', subtype: 4 } } }), 241, msg);
  await h.expectCode(evalExpr({ $convert: { input: '$u', to: { type: 'binData', subtype: 255 } } }), 241, msg);
  await h.expectCode(evalExpr({ $convert: { input: '$user', to: 'binData' } }), 241, msg);
  assert.equal(await evalExpr({ $convert: { input: '$u', to: { type: 'binData', subtype: 0 }, onError: 'E' } }), 'E');
});

h.test('invalid input for the format is a ConversionFailure', async () => {
  const cases = [
    [toBin('867dee--52-c331-484e-', 'uuid', 4), /^Failed to parse BinData '867dee--52-c331-484e-' in \$convert with no onError value: Invalid UUID string: 867dee--52-c331-484e-$/],
    [toBin('867dee--52-c331-484e-', 'base64', 0), /^Failed to parse BinData '867dee--52-c331-484e-' in \$convert with no onError value: /],
    [toBin('867dee--52-c331-484e-', 'base64url', 0), /^Failed to parse BinData .* in \$convert with no onError value: /],
    [toBin('867dee--52-c331-484e-zx', 'hex', 0), /^Failed to parse BinData .* in \$convert with no onError value: /],
    [toBin('abc', 'hex', 0), /no onError value: .*odd/],
    [toBin('abc', 'base64', 0), /no onError value: invalid base64$/],
    [toBin('ab=c', 'base64', 0), /no onError value: Invalid base64 character$/],
    [toBin('a===', 'base64', 0), /no onError value: Invalid base64 character$/],
    [toBin('ab+/', 'base64url', 0), /no onError value: Invalid base64 character$/],
    [toBin('ab-_', 'base64', 0), /no onError value: Invalid base64 character$/],
    [toBin('abcde', 'base64url', 0), /no onError value: invalid base64$/],
    [toBin(' aGk=', 'base64', 0), /Invalid base64 character|invalid base64/],
    // The uuid format goes with subtype 4 and no other; auto is not a format for string -> binData.
    [toBin(UUID_STR, 'uuid', 0), /no onError value: Only the 'uuid' format is allowed with the UUID subtype$/],
    [toBin(B64, 'base64', 4), /no onError value: Only the 'uuid' format is allowed with the UUID subtype$/],
    [toBin(B64, 'auto', 4), /no onError value: Only the 'uuid' format is allowed with the UUID subtype$/],
    [toBin(UUID_STR, 'auto', 0), /no onError value: Invalid format 'auto'$/],
    [toStr('$bad8', 'utf8'), /^Failed to convert 'BinData\(0, E282\)' to string in \$convert with no onError value: BinData does not represent a valid UTF-8 string$/],
    [toStr('$g', 'uuid'), /no onError value: BinData does not represent a valid UUID$/],
    [toStr('$short4', 'uuid'), /no onError value: BinData does not represent a valid UUID$/],
  ];
  for (const [expr, re] of cases) {
    await h.expectCode(evalExpr(expr), 241, re);
    const withOnError = { $convert: { ...expr.$convert, onError: 'fallback' } };
    assert.equal(await evalExpr(withOnError), 'fallback', JSON.stringify(expr));
  }
});

h.test('unsupported pairs stay ConversionFailures', async () => {
  await h.expectCode(evalExpr(toBin({ $toObjectId: '0123456789abcdef01234567' }, 'base64', 0)), 241,
    /^Unsupported conversion from objectId to binData in \$convert with no onError value$/);
  await h.expectCode(evalExpr(toBin(5, 'hex', 0)), 241, /^Unsupported conversion from int to binData/);
  await h.expectCode(evalExpr({ $convert: { input: '$g', to: 'int' } }), 241, /^Unsupported conversion from binData to int/);
  assert.equal(await evalExpr({ $convert: { input: '$g', to: 'bool' } }), true);
  assert.equal(await evalExpr({ $convert: { input: 5, to: 'binData', onError: 'E' } }), 'E');
  // A format is read but ignored by other conversions.
  assert.equal(await evalExpr({ $convert: { input: 5, to: 'string', format: 'hex' } }), '5');
});

h.test('onNull and a nullish to', async () => {
  assert.equal(await evalExpr({ $convert: { input: null, to: 'binData', format: 'base64', onNull: 'N' } }), 'N');
  assert.equal(await evalExpr({ $convert: { input: '$nope', to: 'string', format: 'hex', onNull: 'N' } }), 'N');
  assert.equal(await evalExpr({ $convert: { input: '$nope', to: { type: 'binData', subtype: 4 }, format: 'uuid' } }), null);
  // A nullish input answers onNull before the format is read.
  assert.equal(await evalExpr({ $convert: { input: null, to: 'string', format: 1, onNull: 'N' } }), 'N');
  assert.equal(await evalExpr({ $convert: { input: null, to: 'string', format: 'bogus' } }), null);
  // ... and before a bad subtype is read; a nullish 'to' answers null.
  assert.equal(await evalExpr({ $convert: { input: null, to: { type: 'binData', subtype: 'x' }, onNull: 'N' } }), 'N');
  assert.equal(await evalExpr({ $convert: { input: '$g', to: null, format: 'hex' } }), null);
  assert.equal(await evalExpr({ $convert: { input: '$g', to: '$nope', format: 'hex' } }), null);
  // A null format is no format.
  await h.expectCode(evalExpr({ $convert: { input: '$g', to: 'string', format: null } }), 4341115);
});

h.test('argument errors are not ConversionFailures', async () => {
  // With constant arguments the expression is folded when the pipeline is optimized,
  // so the message then starts "Failed to optimize pipeline :: caused by :: ".
  const E = { onError: 'E' };
  await h.expectCode(evalExpr({ $convert: { input: B64, to: 'binData', ...E } }), 4341115,
    /Format must be speficied when converting from 'string' to 'binData'$/);
  await h.expectCode(evalExpr({ $convert: { input: '$g', to: 'string', ...E } }), 4341115,
    /Format must be speficied when converting from 'binData' to 'string'$/);
  await h.expectCode(evalExpr({ $convert: { input: B64, to: 'binData', format: 'base32', ...E } }), 4341125,
    /Invalid 'format' argument for \$convert: base32$/);
  await h.expectCode(evalExpr({ $convert: { input: 5, to: 'string', format: 'base32' } }), 4341125);
  await h.expectCode(evalExpr({ $convert: { input: B64, to: 'binData', format: 1, ...E } }), 4341114,
    /\$convert requires that 'format' be a string, found: int with value 1$/);
  await h.expectCode(evalExpr({ $convert: { input: UUID_STR, to: { type: 'binData', subtype: 'newUUID' }, format: 'uuid', ...E } }),
    4341108, /For BinData, \$convert's 'subtype' argument must be a number, but is string$/);
  await h.expectCode(evalExpr({ $convert: { input: '$g', to: { type: 'binData', subtype: null }, ...E } }),
    4341108, /but is null$/);
  await h.expectCode(evalExpr({ $convert: { input: B64, to: { type: 'binData', subtype: 1.5 }, format: 'base64', ...E } }),
    4341106, /In \$convert, numeric 'subtype' argument is not an integer$/);
  for (const st of [-1, 9, 127, 256, 1000]) {
    await h.expectCode(evalExpr({ $convert: { input: B64, to: { type: 'binData', subtype: st }, format: 'base64', ...E } }),
      4341107, new RegExp(`In \\$convert, numeric value for 'subtype' does not correspond to a BinData type: ${st}$`));
  }
  await h.expectCode(evalExpr({ $convert: { input: '$g', to: { type: 'binData', subtype: 300 }, ...E } }), 4341107);
  // The 'to' document's type follows the rules of a plain 'to'.
  await h.expectCode(evalExpr({ $convert: { input: 123, to: { type: -2 }, ...E } }), 9,
    /does not correspond to a BSON type: -2$/);
  await h.expectCode(evalExpr({ $convert: { input: 123, to: { type: 'dinosaur' }, ...E } }), 2, /Unknown type name: dinosaur$/);
  await h.expectCode(evalExpr({ $convert: { input: 123, to: { dinosaur: 'Tyrannosaurus rex' }, ...E } }), 9,
    /\$convert's 'to' argument must be a string or number, but is missing$/);
  await h.expectCode(evalExpr({ $convert: { input: 123, to: [1], ...E } }), 9,
    /\$convert's 'to' argument must be a string or number, but is array$/);
  // Parse-time: an unknown argument is still refused.
  await h.expectCode(evalExpr({ $convert: { input: B64, to: 'binData', base: 16 } }), 9,
    /\$convert found an unknown argument: base$/);
});

h.test('computed arguments and many documents', async () => {
  const db = srv.freshDb('convbin_many');
  const c = db.collection('c');
  const docs = [];
  for (let i = 0; i < 50; i++) {
    const b = Buffer.from(Array.from({ length: i }, (_, k) => (k * 37 + i) & 255));
    docs.push({ _id: i, b: new Binary(b, 0), fmt: ['base64', 'base64url', 'hex'][i % 3] });
  }
  await c.insertMany(docs);
  const out = await c.aggregate([
    { $project: { s: { $convert: { input: '$b', to: 'string', format: '$fmt' } }, b: 1, fmt: 1 } },
    { $project: { b: 1, back: { $convert: { input: '$s', to: { type: 'binData', subtype: 0 }, format: '$fmt' } } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.equal(out.length, 50);
  for (const d of out) assertBin(d.back, Buffer.from(d.b.buffer), 0);
});

h.test('$toUUID still parses UUID strings', async () => {
  assertBin(await evalExpr({ $toUUID: UUID_STR }), BYTES, 4);
  await h.expectCode(evalExpr({ $toUUID: 'xyz' }), 241);
});
