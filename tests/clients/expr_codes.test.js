'use strict';
// Aggregation expression operators' error codes and messages, operator by
// operator, as mongod 8.0 answers them (src/mongo/db/pipeline/expression.cpp):
// the code, the message, which argument is checked first and whether a
// nullish argument answers null before a later argument's type is checked.
// Each row runs {$project: {r: expr}} over a one-document collection.
const assert = require('node:assert/strict');
const { Long, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const DOC = {
  _id: 1, s: 'abc', n: 5, arr: [1, 2], o: { a: 1 }, d: new Date(0), t: true,
  l: Long.fromString('-9223372036854775808'), dec: Decimal128.fromString('0'),
};

/* [label, expression, code (or 'ok' / a value it must answer), message regex] */
const ARITH = [
  ['$add string', { $add: ['$s', 1] }, 14, /^\$add only supports numeric or date types, not string$/],
  ['$add null first wins', { $add: [null, '$s'] }, { v: null }],
  ['$add two dates', { $add: ['$d', '$d'] }, 16612, /only one date allowed in an \$add expression/],
  ['$multiply string', { $multiply: ['$s', 1] }, 14, /^\$multiply only supports numeric types, not string$/],
  ['$multiply null first wins', { $multiply: ['$missing', '$s'] }, { v: null }],
  ['$subtract string', { $subtract: ['$s', 1] }, 14, /^can't \$subtract int from string$/],
  ['$subtract from date', { $subtract: ['$d', '$s'] }, 14, /^can't \$subtract string from Date$/],
  ['$subtract number - date', { $subtract: [1, '$d'] }, 14, /^can't \$subtract date from int$/],
  ['$divide string', { $divide: ['$s', 1] }, 14, /^\$divide only supports numeric types, not string and int$/],
  ['$divide by zero', { $divide: ['$n', 0] }, 2, /^can't \$divide by zero$/],
  ['$mod string', { $mod: ['$s', 1] }, 16611, /^\$mod only supports numeric types, not string and int$/],
  ['$mod by zero', { $mod: ['$n', 0] }, 16610, /^can't \$mod by zero$/],
  ['$mod decimal by zero', { $mod: ['$n', '$dec'] }, 5733415, /^can't \$mod by zero$/],
  ['$abs string', { $abs: '$s' }, 28765, /^\$abs only supports numeric types, not string$/],
  ['$abs long min', { $abs: '$l' }, 28680, /^can't take \$abs of long long min$/],
  ['$ceil string', { $ceil: '$s' }, 28765, /^\$ceil only supports numeric types, not string$/],
  ['$floor bool', { $floor: '$t' }, 28765, /^\$floor only supports numeric types, not bool$/],
  ['$sqrt string', { $sqrt: '$s' }, 28765, /^\$sqrt only supports numeric types, not string$/],
  ['$sqrt negative', { $sqrt: -1 }, 28714, /^\$sqrt's argument must be greater than or equal to 0$/],
  ['$exp array', { $exp: ['$arr'] }, 28765, /^\$exp only supports numeric types, not array$/],
  ['$ln zero', { $ln: 0 }, 28766, /^\$ln's argument must be a positive number, but is 0$/],
  ['$log10 negative', { $log10: -1 }, 28761, /^\$log10's argument must be a positive number, but is -1$/],
  ['$pow base', { $pow: ['$s', 2] }, 28762, /^\$pow's base must be numeric, not string$/],
  ['$pow exponent', { $pow: [2, '$s'] }, 28763, /^\$pow's exponent must be numeric, not string$/],
  ['$pow 0^-1', { $pow: [0, -1] }, 28764, /^\$pow cannot take a base of 0 and a negative exponent$/],
  ['$log argument', { $log: ['$s', 2] }, 28756, /^\$log's argument must be numeric, not string$/],
  ['$log base', { $log: [2, '$s'] }, 28757, /^\$log's base must be numeric, not string$/],
  ['$log negative argument', { $log: [-1, 2] }, 28758, /^\$log's argument must be a positive number, but is -1$/],
  ['$log base 1', { $log: [8, 1] }, 28759, /^\$log's base must be a positive number not equal to 1, but is 1$/],
  ['$round string', { $round: ['$s', 2] }, 51081, /^\$round only supports numeric types, not string$/],
  ['$trunc string', { $trunc: '$s' }, 51081, /^\$trunc only supports numeric types, not string$/],
  ['$round place not integral', { $round: [1.5, 1.5] }, 51082, /^precision argument to {2}\$round must be a integral value$/],
  ['$round place range', { $round: [1.5, 101] }, 51083, /^cannot apply \$round with precision value 101 value must be in \[-20, 100\]$/],
  ['$round null place', { $round: ['$s', null] }, 51081],
  ['$round string place', { $round: ['$n', '$s'] }, 16004, /^can't convert from BSON type string to long$/],
  ['$trunc bool place', { $trunc: [1, true] }, 16004, /^can't convert from BSON type bool to long$/],
  ['$range end too big', { $range: [0, 2147483648] }, 34446, /found value: 2.14748e\+09$/],
];

const ARRAYS = [
  ['$arrayElemAt array', { $arrayElemAt: ['$n', 0] }, 28689, /^\$arrayElemAt's first argument must be an array, but is int$/],
  ['$arrayElemAt index', { $arrayElemAt: ['$arr', 'x'] }, 28690, /^\$arrayElemAt's second argument must be a numeric value, but is string$/],
  ['$arrayElemAt 1.5', { $arrayElemAt: ['$arr', 1.5] }, 28691, /^\$arrayElemAt's second argument must be representable as a 32-bit integer: 1.5$/],
  ['$first', { $first: '$n' }, 28689, /^\$first's argument must be an array, but is int$/],
  ['$last', { $last: '$s' }, 28689, /^\$last's argument must be an array, but is string$/],
  ['$size', { $size: '$n' }, 17124, /^The argument to \$size must be an array, but was of type: int$/],
  ['$size missing', { $size: '$missing' }, 17124, /but was of type: missing$/],
  ['$in', { $in: [1, '$n'] }, 40081, /^\$in requires an array as a second argument, found: int$/],
  ['$concatArrays', { $concatArrays: ['$arr', '$n'] }, 28664, /^\$concatArrays only supports arrays, not int$/],
  ['$concatArrays null first wins', { $concatArrays: [null, '$n'] }, { v: null }],
  ['$slice array', { $slice: ['$n', 1] }, 28724, /^First argument to \$slice must be an array, but is of type: int$/],
  ['$slice position type', { $slice: ['$arr', 'x'] }, 28725, /^Second argument to \$slice must be a numeric value, but is of type: string$/],
  ['$slice position integral', { $slice: ['$arr', 1.5] }, 28726, /^Second argument to \$slice can't be represented as a 32-bit integer: 1.5$/],
  ['$slice count type', { $slice: ['$arr', 0, 'x'] }, 28727, /^Third argument to \$slice must be numeric, but is of type: string$/],
  ['$slice count integral', { $slice: ['$arr', 0, 1.5] }, 28728, /^Third argument to \$slice can't be represented as a 32-bit integer: 1.5$/],
  ['$slice count positive', { $slice: ['$arr', 0, 0] }, 28729, /^Third argument to \$slice must be positive: 0$/],
  ['$slice null count after bad array', { $slice: ['$n', 0, null] }, 28724],
  ['$reverseArray', { $reverseArray: '$n' }, 34435, /^The argument to \$reverseArray must be an array, but was of type: int$/],
  ['$range start type', { $range: ['$s', 5] }, 34443, /^\$range requires a numeric starting value, found value of type: string$/],
  ['$range start integral', { $range: [1.5, 5] }, 34444, /^\$range requires a starting value that can be represented as a 32-bit integer, found value: 1.5$/],
  ['$range end type', { $range: [0, '$s'] }, 34445, /^\$range requires a numeric ending value, found value of type: string$/],
  ['$range end integral', { $range: [0, 2.5] }, 34446, /^\$range requires an ending value that can be represented as a 32-bit integer, found value: 2.5$/],
  ['$range step type', { $range: [0, 5, '$s'] }, 34447, /^\$range requires a numeric step value, found value of type:string$/],
  ['$range step integral', { $range: [0, 5, 0.5] }, 34448, /^\$range requires a step value that can be represented as a 32-bit integer, found value: 0.5$/],
  ['$range step zero', { $range: [0, 5, 0] }, 34449, /^\$range requires a non-zero step value$/],
  ['$setUnion', { $setUnion: ['$arr', '$n'] }, 17043, /^All operands of \$setUnion must be arrays. One argument is of type: int$/],
  ['$setUnion null first wins', { $setUnion: [null, '$n'] }, { v: null }],
  ['$setIntersection', { $setIntersection: ['$n'] }, 17047, /^All operands of \$setIntersection must be arrays. One argument is of type: int$/],
  ['$setDifference first', { $setDifference: ['$n', []] }, 17048, /^both operands of \$setDifference must be arrays. First argument is of type: int$/],
  ['$setDifference second', { $setDifference: ['$arr', '$s'] }, 17049, /^both operands of \$setDifference must be arrays. Second argument is of type: string$/],
  ['$setIsSubset constant rhs', { $setIsSubset: ['$n', []] }, 17310, /^both operands of \$setIsSubset must be arrays. First argument is of type: int$/],
  ['$setIsSubset first', { $setIsSubset: ['$n', '$arr'] }, 17046, /^both operands of \$setIsSubset must be arrays. First argument is of type: int$/],
  ['$setIsSubset second', { $setIsSubset: ['$arr', '$n'] }, 17042, /^both operands of \$setIsSubset must be arrays. Second argument is of type: int$/],
  ['$setIsSubset constant non-array rhs', { $setIsSubset: ['$n', 1] }, 17311, /Second argument is of type: int$/],
  ['$setIsSubset null', { $setIsSubset: [null, '$arr'] }, 17046, /First argument is of type: null$/],
  ['$setEquals', { $setEquals: ['$arr', '$n'] }, 17044, /^All operands of \$setEquals must be arrays. 2-th argument is of type: int$/],
  ['$setEquals constant', { $setEquals: ['$arr', 1] }, 5887502, /^All operands of \$setEquals must be arrays. 2-th argument is of type: int$/],
  ['$allElementsTrue', { $allElementsTrue: ['$n'] }, 17040, /^\$allElementsTrue's argument must be an array, but is int$/],
  ['$anyElementTrue', { $anyElementTrue: ['$n'] }, 17041, /^\$anyElementTrue's argument must be an array, but is int$/],
  ['$objectToArray', { $objectToArray: '$n' }, 40390, /^\$objectToArray requires a document input, found: int$/],
  ['$arrayToObject input', { $arrayToObject: '$n' }, 40386, /^\$arrayToObject requires an array input, found: int$/],
  ['$arrayToObject format', { $arrayToObject: [[1]] }, 40398, /^Unrecognised input type format for \$arrayToObject: int$/],
  ['$arrayToObject arrays then object', { $arrayToObject: { $literal: [['a', 1], { k: 'b', v: 2 }] } }, 40396, /Array was detected, now found: object$/],
  ['$arrayToObject pair size', { $arrayToObject: { $literal: [['a']] } }, 40397, /^\$arrayToObject requires an array of size 2 arrays,found array of size: 1$/],
  ['$arrayToObject pair key', { $arrayToObject: { $literal: [[1, 2]] } }, 40395, /Found key type: int$/],
  ['$arrayToObject objects then array', { $arrayToObject: { $literal: [{ k: 'a', v: 1 }, ['b', 2]] } }, 40391, /Object was detected, now found: array$/],
  ['$arrayToObject key count', { $arrayToObject: { $literal: [{ k: 'a' }] } }, 40392, /Found incorrect number of keys:1$/],
  ['$arrayToObject k and v', { $arrayToObject: { $literal: [{ k: 'a', x: 1 }] } }, 40393, /Missing either or both keys from: /],
  ['$arrayToObject k type', { $arrayToObject: { $literal: [{ k: 1, v: 1 }] } }, 40394, /where the value of 'k' must be of type string. Found type: int$/],
  ['$filter input', { $filter: { input: '$n', cond: true } }, 28651, /^input to \$filter must be an array not int$/],
  ['$map input', { $map: { input: '$n', in: 1 } }, 16883, /^input to \$map must be an array not int$/],
  ['$reduce input', { $reduce: { input: '$n', initialValue: 0, in: 1 } }, 40080, /^\$reduce requires that 'input' be an array, found: 5$/],
  ['$indexOfArray', { $indexOfArray: ['$n', 1] }, 40090, /^\$indexOfArray requires an array as a first argument, found: int$/],
  ['$indexOfArray start', { $indexOfArray: ['$arr', 1, 'x'] }, 40096, /^\$indexOfArrayrequires an integral starting index, found a value of type: string, with value: "x"$/],
  ['$indexOfArray negative end', { $indexOfArray: ['$arr', 1, 0, -1] }, 40097, /^\$indexOfArray requires a nonnegative ending index, found: -1$/],
];

const STRINGS = [
  ['$concat', { $concat: ['$n', 'x'] }, 16702, /^\$concat only supports strings, not int$/],
  ['$concat null first wins', { $concat: [null, '$n'] }, { v: null }],
  ['$toLower', { $toLower: ['$arr'] }, 16007, /^can't convert from BSON type array to String$/],
  ['$strcasecmp', { $strcasecmp: ['a', '$arr'] }, 16007, /array to String/],
  ['$strLenBytes', { $strLenBytes: '$n' }, 34473, /^\$strLenBytes requires a string argument, found: int$/],
  ['$strLenCP', { $strLenCP: '$missing' }, 34471, /^\$strLenCP requires a string argument, found: missing$/],
  ['$indexOfBytes first', { $indexOfBytes: ['$n', 'a'] }, 40091, /^\$indexOfBytes requires a string as the first argument, found: int$/],
  ['$indexOfBytes second', { $indexOfBytes: ['$s', 1] }, 40092, /^\$indexOfBytes requires a string as the second argument, found: int$/],
  ['$indexOfBytes start', { $indexOfBytes: ['$s', 'a', 1.5] }, 40096, /^\$indexOfBytesrequires an integral starting index, found a value of type: double, with value: 1.5$/],
  ['$indexOfBytes end', { $indexOfBytes: ['$s', 'a', 0, -2] }, 40097, /^\$indexOfBytes requires a nonnegative ending index, found: -2$/],
  ['$indexOfCP first', { $indexOfCP: ['$n', 'a'] }, 40093, /^\$indexOfCP requires a string as the first argument, found: int$/],
  ['$indexOfCP second', { $indexOfCP: ['$s', null] }, 40094, /^\$indexOfCP requires a string as the second argument, found: null$/],
  ['$indexOfCP null first', { $indexOfCP: [null, 1] }, { v: null }],
  ['$substrBytes start type', { $substrBytes: ['$s', 'a', 1] }, 16034, /^\$substrBytes: {2}starting index must be a numeric type \(is BSON type string\)$/],
  ['$substr start type', { $substr: ['$s', 'a', 1] }, 16034, /^\$substrBytes: {2}starting index/],
  ['$substrBytes length type', { $substrBytes: ['$s', 0, 'a'] }, 16035, /^\$substrBytes: {2}length must be a numeric type \(is BSON type string\)$/],
  ['$substrBytes negative start', { $substrBytes: ['$s', -1, 1] }, 50752, /^\$substrBytes: {2}starting index must be non-negative \(got: -1\)$/],
  ['$substrBytes continuation start', { $substrBytes: ['é', 1, 1] }, 28656, /starting index is a UTF-8 continuation byte\.$/],
  ['$substrBytes continuation end', { $substrBytes: ['é', 0, 1] }, 28657, /ending index is in the middle of a UTF-8 character\.$/],
  ['$substrBytes input', { $substrBytes: ['$arr', 0, 1] }, 16007, /array to String/],
  ['$substrCP start type', { $substrCP: ['$s', 'a', 1] }, 34450, /^\$substrCP: starting index must be a numeric type \(is BSON type string\)$/],
  ['$substrCP start integral', { $substrCP: ['$s', 0.5, 1] }, 34451, /^\$substrCP: starting index cannot be represented as a 32-bit integral value: 0.5$/],
  ['$substrCP length type', { $substrCP: ['$s', 0, 'a'] }, 34452, /^\$substrCP: length must be a numeric type \(is BSON type string\)$/],
  ['$substrCP length integral', { $substrCP: ['$s', 0, 1.5] }, 34453, /^\$substrCP: length cannot be represented as a 32-bit integral value: 1.5$/],
  ['$substrCP negative length first', { $substrCP: ['$s', -1, -1] }, 34454, /^\$substrCP: length must be a nonnegative integer\.$/],
  ['$substrCP negative start', { $substrCP: ['$s', -1, 1] }, 34455, /^\$substrCP: the starting index must be nonnegative integer\.$/],
  ['$split input', { $split: ['$n', 'a'] }, 40085, /^\$split requires an expression that evaluates to a string as a first argument, found: int$/],
  ['$split separator', { $split: ['$s', 1] }, 40086, /^\$split requires an expression that evaluates to a string as a second argument, found: int$/],
  ['$split empty separator', { $split: ['$s', ''] }, 40087, /^\$split requires a non-empty separator$/],
  ['$trim input', { $trim: { input: '$n' } }, 50699, /^\$trim requires its input to be a string, got 5 \(of type int\) instead\.$/],
  ['$ltrim chars', { $ltrim: { input: 'a', chars: 1 } }, 50700, /^\$ltrim requires 'chars' to be a string, got 1 \(of type int\) instead\.$/],
  ['$trim default set (no U+3000)', { $trim: { input: '\u3000 a\u2001' } }, { v: '\u3000 a' }],
  ['$rtrim null chars after bad input', { $rtrim: { input: 1, chars: null } }, 50699],
  ['$replaceOne input', { $replaceOne: { input: 1, find: 'a', replacement: 'b' } }, 51746, /^\$replaceOne requires that 'input' be a string, found: 1$/],
  ['$replaceAll find', { $replaceAll: { input: 'a', find: 1, replacement: 'b' } }, 51745, /requires that 'find' be a string, found: 1$/],
  ['$regexMatch input', { $regexMatch: { input: 1, regex: 'a' } }, 51104, /^\$regexMatch needs 'input' to be of type string$/],
  ['$regexFind regex', { $regexFind: { input: 'a', regex: 1 } }, 51105, /\$regexFind needs 'regex' to be of type string or regex$/],
];

const PARSE = [
  ['arity exact', { $cmp: [1] }, 16020, /Expression \$cmp takes exactly 2 arguments. 1 were passed in.$/],
  ['$cond unknown', { $cond: { if: true, then: 1, else: 2, x: 1 } }, 17083, /Unrecognized parameter to \$cond: x$/],
  ['$cond if', { $cond: { then: 1, else: 2 } }, 17080, /Missing 'if' parameter to \$cond$/],
  ['$cond then', { $cond: { if: true, else: 2 } }, 17081, /Missing 'then' parameter to \$cond$/],
  ['$cond else', { $cond: { if: true, then: 1 } }, 17082, /Missing 'else' parameter to \$cond$/],
  ['$switch not object', { $switch: 1 }, 40060, /\$switch requires an object as an argument, found: int$/],
  ['$switch branches', { $switch: { branches: 1 } }, 40061, /\$switch expected an array for 'branches', found: int$/],
  ['$switch branch', { $switch: { branches: [1] } }, 40062, /\$switch expected each branch to be an object, found: int$/],
  ['$switch branch key', { $switch: { branches: [{ case: true, then: 1, x: 1 }] } }, 40063, /\$switch found an unknown argument to a branch: x$/],
  ['$switch case', { $switch: { branches: [{ then: 1 }] } }, 40064, /\$switch requires each branch have a 'case' expression$/],
  ['$switch then', { $switch: { branches: [{ case: true }] } }, 40065, /\$switch requires each branch have a 'then' expression\.$/],
  ['$switch key', { $switch: { branches: [{ case: true, then: 1 }], x: 1 } }, 40067, /\$switch found an unknown argument: x$/],
  ['$switch no branch', { $switch: { default: 1 } }, 40068, /\$switch requires at least one branch\.$/],
  ['$switch no match', { $switch: { branches: [{ case: '$missing', then: 1 }] } }, 40066, /\$switch could not find a matching branch for an input, and no default was specified\.$/],
  ['$switch constant false cases', { $switch: { branches: [{ case: false, then: 1 }, { case: 0, then: 2 }] } }, 40069, /One cannot execute a switch statement where all the cases evaluate to false without a default\.$/],
  ['$map not object', { $map: 1 }, 16878, /\$map only supports an object as its argument$/],
  ['$map unknown', { $map: { input: [], in: 1, x: 1 } }, 16879, /Unrecognized parameter to \$map: x$/],
  ['$map input', { $map: { in: 1 } }, 16880, /Missing 'input' parameter to \$map$/],
  ['$map in', { $map: { input: [] } }, 16882, /Missing 'in' parameter to \$map$/],
  ['$map as', { $map: { input: [], as: 'X', in: 1 } }, 9, /'X' starts with an invalid character for a user variable name$/],
  ['$filter not object', { $filter: [] }, 28646, /\$filter only supports an object as its argument$/],
  ['$filter unknown', { $filter: { input: [], cond: 1, x: 1 } }, 28647, /Unrecognized parameter to \$filter: x$/],
  ['$filter input', { $filter: { cond: 1 } }, 28648, /Missing 'input' parameter to \$filter$/],
  ['$filter cond', { $filter: { input: [] } }, 28650, /Missing 'cond' parameter to \$filter$/],
  ['$filter limit', { $filter: { input: '$arr', cond: true, limit: 1.5 } }, 327391, /\$filter: limit must be represented as a 32-bit integral value: 1.5$/],
  ['$filter limit 0', { $filter: { input: '$arr', cond: true, limit: 0 } }, 327392, /\$filter: limit must be greater than 0: 0$/],
  ['$reduce not object', { $reduce: 1 }, 40075, /\$reduce requires an object as an argument, found: int$/],
  ['$reduce unknown', { $reduce: { input: [], initialValue: 0, in: 1, x: 1 } }, 40076, /\$reduce found an unknown argument: x$/],
  ['$reduce input', { $reduce: { initialValue: 0, in: 1 } }, 40077, /\$reduce requires 'input' to be specified$/],
  ['$reduce initialValue', { $reduce: { input: [], in: 1 } }, 40078, /\$reduce requires 'initialValue' to be specified$/],
  ['$reduce in', { $reduce: { input: [], initialValue: 0 } }, 40079, /\$reduce requires 'in' to be specified$/],
  ['$let not object', { $let: 1 }, 16874, /\$let only supports an object as its argument$/],
  ['$let unknown', { $let: { vars: {}, in: 1, x: 1 } }, 16875, /Unrecognized parameter to \$let: x$/],
  ['$let vars', { $let: { in: 1 } }, 16876, /Missing 'vars' parameter to \$let$/],
  ['$let in', { $let: { vars: {} } }, 16877, /Missing 'in' parameter to \$let$/],
  ['$let vars object', { $let: { vars: 1, in: 1 } }, 10065, /invalid parameter: expected an object \(vars\)$/],
  ['$let var name', { $let: { vars: { Ab: 1 }, in: 1 } }, 9, /'Ab' starts with an invalid character for a user variable name$/],
  ['$convert not object', { $convert: 1 }, 9, /\$convert expects an object of named arguments but found: int$/],
  ['$convert unknown', { $convert: { input: 1, to: 'int', x: 1 } }, 9, /\$convert found an unknown argument: x$/],
  ['$convert input', { $convert: { to: 'int' } }, 9, /Missing 'input' parameter to \$convert$/],
  ['$convert to', { $convert: { input: 1 } }, 9, /Missing 'to' parameter to \$convert$/],
  ['$trim not object', { $trim: 'a' }, 50696, /\$trim only supports an object as an argument, found string$/],
  ['$trim unknown', { $ltrim: { input: 'a', x: 1 } }, 50694, /\$ltrim found an unknown argument: x$/],
  ['$trim input', { $rtrim: { chars: 'a' } }, 50695, /\$rtrim requires an 'input' field$/],
];

const MISC = [
  ['$toInt arity', { $toInt: [1, 2] }, 50723, /\$toInt requires a single argument, got 2$/],
  ['$toObjectId arity', { $toObjectId: [] }, 50723, /\$toObjectId requires a single argument, got 0$/],
  ['$ifNull arity', { $ifNull: ['$s'] }, 1257300, /\$ifNull needs at least two arguments, had: 1$/],
  ['$setEquals arity', { $setEquals: [[1]] }, 17045, /\$setEquals needs at least two arguments had: 1$/],
  ['$convert to fraction', { $convert: { input: 1, to: 1.5 } }, 9, /^In \$convert, numeric 'to' argument is not an integer$/],
  ['$convert to code', { $convert: { input: 1, to: 100 } }, 9, /^In \$convert, numeric value for 'to' does not correspond to a BSON type: 100$/],
  ['$convert to type', { $convert: { input: 1, to: [] } }, 9, /^\$convert's 'to' argument must be a string or number, but is array$/],
  ['$convert to name', { $convert: { input: 1, to: 'nope' } }, 2, /^Unknown type name: nope$/],
  ['$convert null input beats null to', { $convert: { input: null, to: null, onNull: 'x' } }, { v: 'x' }],
  ['$convert unsupported', { $convert: { input: '$o', to: 'int' } }, 241, /^Unsupported conversion from object to int in \$convert with no onError value$/],
  ['$toInt bad string', { $toInt: '$s' }, 241, /^Failed to parse number 'abc' in \$convert with no onError value/],
  ['$toLong hexadecimal', { $toLong: '0x1F' }, 241, /^Illegal hexadecimal input in \$convert with no onError value: 0x1F$/],
  ['$convert to missing', { $convert: { input: 1, to: 'missing' } }, 241, /^Unsupported conversion from int to missing in \$convert with no onError value$/],
  ['$convert to missing onError', { $convert: { input: 1, to: 'missing', onError: 'e' } }, { v: 'e' }],
  ['$year', { $year: '$s' }, 16006, /^can't convert from BSON type string to Date$/],
  ['$dateTrunc date', { $dateTrunc: { date: '$s', unit: 'day' } }, 5439012, /^\$dateTrunc requires 'date' to be a date, but got string$/],
  ['$dateDiff startDate', { $dateDiff: { startDate: '$s', endDate: '$d', unit: 'day' } }, 5166307, /^\$dateDiff requires 'startDate' to be a date, but got string$/],
  ['$dateToString not object', { $dateToString: 1 }, 18629, /\$dateToString only supports an object as its argument$/],
  ['$dateToString date', { $dateToString: { format: '%Y' } }, 18628, /Missing 'date' parameter to \$dateToString$/],
  ['$dateFromParts year', { $dateFromParts: { month: 1 } }, 40516, /\$dateFromParts requires either 'year' or 'isoWeekYear' to be present$/],
  ['$mergeObjects', { $mergeObjects: ['$o', '$n'] }, 40400, /^\$mergeObjects requires object inputs, but input 5 is of type int$/],
  ['$mergeObjects array form', { $mergeObjects: [['$o', '$s']] }, 40400, /but input "abc" is of type string$/],
  ['$sortArray sortBy', { $sortArray: { input: '$arr', sortBy: 'x' } }, 2942507, /The \$sort is invalid: use 1\/-1 to sort the whole element, or \{field:1\/-1\} to sort embedded fields$/],
  ['$bsonSize', { $bsonSize: '$n' }, 31393, /^\$bsonSize requires a document input, found: int$/],
  ['$bsonSize value', { $bsonSize: '$o' }, { v: 12 }],
  ['$bsonSize null', { $bsonSize: '$missing' }, { v: null }],
  ['$binarySize', { $binarySize: '$n' }, 51276, /^\$binarySize requires a string or BinData argument, found: int$/],
  ['$binarySize string', { $binarySize: '$s' }, { v: 3 }],
  ['$objectToArray', { $objectToArray: '$arr' }, 40390, /found: array$/],
  ['$tsSecond', { $tsSecond: '$n' }, 5687301, /^ Argument to \$tsSecond must be a timestamp, but is int$/],
  ['$firstN', { $firstN: { n: 2, input: [1, null, 3] } }, { v: [1, null] }],
  ['$lastN', { $lastN: { n: 2, input: '$arr' } }, { v: [1, 2] }],
  ['$minN skips nulls', { $minN: { n: 2, input: [3, null, 1, 2] } }, { v: [1, 2] }],
  ['$maxN', { $maxN: { n: 2, input: [3, null, 1, 2] } }, { v: [3, 2] }],
  ['$firstN not object', { $firstN: 1 }, 5787801, /specification must be an object; found \$firstN: 1$/],
  ['$maxN not object', { $maxN: 1 }, 5787900, /specification must be an object/],
  ['$firstN unknown', { $firstN: { n: 1, input: [], x: 1 } }, 5787901, /Unknown argument for 'n' operator: x$/],
  ['$firstN n missing', { $firstN: { input: [] } }, 5787906],
  ['$firstN input missing', { $firstN: { n: 1 } }, 5787907],
  ['$firstN n type', { $firstN: { n: '$s', input: [] } }, 5787902, /^Value for 'n' must be of integral type, but found "abc"$/],
  ['$lastN n fraction', { $lastN: { n: 1.5, input: [] } }, 5787903, /^Value for 'n' must be of integral type, but found 1.5$/],
  ['$minN n zero', { $minN: { n: 0, input: [] } }, 5787908, /^'n' must be greater than 0, found 0$/],
  ['$maxN input', { $maxN: { n: 1, input: '$n' } }, 5788200, /^Input must be an array$/],
  ['$cmp arity', { $cmp: [1, 2, 3] }, 16020, /Expression \$cmp takes exactly 2 arguments. 3 were passed in.$/],
  ['$let undefined variable', { $let: { vars: { x: 1 }, in: '$$y' } }, 17276, /Use of undefined variable: y$/],
  ['$$ read, uppercase first', { $add: ['$$Ab', 1] }, 17276, /Use of undefined variable: Ab$/],
  ['$$ read, digit first', { $add: ['$$1a', 1] }, 9, /'1a' starts with an invalid character for a user variable name$/],
  ['$$ read, bad character', { $add: ['$$a-b', 1] }, 9, /'a-b' contains an invalid character for a variable name: '-'$/],
  ['$$ read, empty', { $add: ['$$', 1] }, 9, /empty variable names are not allowed$/],
  ['$let rebinds CURRENT', { $let: { vars: { CURRENT: '$o' }, in: { $add: ['$a', 1] } } }, { v: 2 }],
  ['$map as CURRENT', { $map: { input: [{ a: 1 }, { a: 2 }], as: 'CURRENT', in: '$a' } }, { v: [1, 2] }],
  ['$let ROOT stays', { $let: { vars: { CURRENT: '$o' }, in: '$$ROOT.s' } }, { v: 'abc' }],
  ['$let var bad character', { $let: { vars: { 'a-b': 1 }, in: 1 } }, 9, /'a-b' contains an invalid character for a variable name: '-'$/],
  ['$filter as not a string', { $filter: { input: [], as: 1, cond: true } }, 9, /empty variable names are not allowed$/],
  ['field path trailing dot', { $add: ['$a.', 1] }, 40353, /FieldPath must not end with a '\.'\.$/],
  ['variable path trailing dot', { $add: ['$$ROOT.', 1] }, 40353, /FieldPath must not end with a '\.'\.$/],
  ['field path empty component', { $add: ['$a..b', 1] }, 15998, /FieldPath field names may not be empty strings\.$/],
  // AddState::addToDateValue's message is "date overflow" (the "date overflow in $add" this used to expect is the
  // pre-6.0 wording); add_with_date.js checks the code.
  ['$add date overflow', { $add: ['$d', 1e300] }, 15, /^date overflow$/],
];

const TRIG = [
  ['$sin string', { $sin: '$s' }, 28765, /^\$sin only supports numeric types, not string$/],
  ['$sin null', { $sin: null }, { v: null }],
  ['$sin value', { $sin: 0 }, { v: 0 }],
  ['$tan infinity', { $tan: { $literal: Infinity } }, 50989, /^cannot apply \$tan to inf, value must in \(-inf,inf\)$/],
  ['$acos 2', { $acos: 2 }, 50989, /^cannot apply \$acos to 2, value must in \[-1,1\]$/],
  ['$asin -1.5', { $asin: -1.5 }, 50989, /^cannot apply \$asin to -1.5, value must in \[-1,1\]$/],
  ['$atanh 2', { $atanh: 2 }, 50989, /^cannot apply \$atanh to 2, value must in \[-1,1\]$/],
  ['$acosh 0', { $acosh: 0 }, 50989, /^cannot apply \$acosh to 0, value must in \[1,inf\]$/],
  ['$cosh bool', { $cosh: '$t' }, 28765, /^\$cosh only supports numeric types, not bool$/],
  ['$atan2 first', { $atan2: ['$s', 1] }, 51044, /^\$atan2 only supports numeric types, not string$/],
  ['$atan2 second', { $atan2: [1, '$s'] }, 51045, /^\$atan2 only supports numeric types, not string$/],
  ['$atan2 null first wins', { $atan2: [null, '$s'] }, { v: null }],
  ['$degreesToRadians string', { $degreesToRadians: '$s' }, 28765, /^\$degreesToRadians only supports numeric types, not string$/],
  ['$radiansToDegrees 0', { $radiansToDegrees: 0 }, { v: 0 }],
  ['$sin arity', { $sin: [1, 2] }, 16020, /Expression \$sin takes exactly 1 arguments. 2 were passed in.$/],
  ['$const', { $const: '$s' }, { v: '$s' }],
];

async function runTable(rows) {
  const db = srv.freshDb('codes');
  const coll = db.collection('c');
  await coll.insertOne(DOC);
  const bad = [];
  for (const [label, expr, want, re] of rows) {
    let got;
    let msg = '';
    let value;
    try {
      const r = await coll.aggregate([{ $project: { _id: 0, r: expr } }]).toArray();
      got = 'ok';
      value = r[0].r;
    } catch (e) {
      got = e.code;
      // An operator over constants fails when the pipeline is optimized, over a document's fields when it runs,
      // each with mongod's context; a malformed one when the stage is parsed. The regexes check the operator's
      // own message.
      msg = (e.errmsg || e.message).replace(/^(Invalid \$project|Failed to optimize pipeline|PlanExecutor error during aggregation) :: caused by :: /, '');
    }
    if (typeof want === 'object' && want !== null) {
      if (got !== 'ok' || JSON.stringify(value === undefined ? null : value) !== JSON.stringify(want.v))
        bad.push(`${label}: want value ${JSON.stringify(want.v)}, got ${got} ${got === 'ok' ? JSON.stringify(value) : msg}`);
    } else if (got !== want) {
      bad.push(`${label}: want ${want}, got ${got} ${msg}`);
    } else if (re && !re.test(msg)) {
      bad.push(`${label}: message ${JSON.stringify(msg)} does not match ${re}`);
    }
  }
  assert.deepEqual(bad, []);
}

h.test('arithmetic operators: codes, messages, null order', () => runTable(ARITH));
h.test('array and set operators: codes, messages, null order', () => runTable(ARRAYS));
h.test('string operators: codes, messages, null order', () => runTable(STRINGS));
h.test('parse-time errors of the named-argument operators', () => runTable(PARSE));
h.test('conversions, dates and the rest', () => runTable(MISC));
h.test('trigonometric operators', () => runTable(TRIG));

h.test('operators over constants fail before any document is read, as mongod optimizes', async () => {
  const db = srv.freshDb('fold');
  const empty = db.collection('empty');
  await db.createCollection('empty');
  await h.expectCode(empty.aggregate([{ $project: { r: { $divide: [1, 0] } } }]).toArray(), 2);
  await h.expectCode(empty.aggregate([{ $match: { $expr: { $add: ['a', { $multiply: [1, 1] }] } } }]).toArray(), 14);
  await h.expectCode(empty.aggregate([{ $project: { r: { $trim: { input: 1 } } } }]).toArray(), 50699);
  await h.expectCode(empty.aggregate([{ $project: { r: { $dateToString: { date: 'x' } } } }]).toArray(), 16006);
  assert.deepEqual(await empty.aggregate([{ $project: { r: { $convert: { input: 'x', to: 'int', onError: 0 } } } }]).toArray(), []);
  // A field path is not a constant: nothing to evaluate without documents.
  assert.deepEqual(await empty.aggregate([{ $project: { r: { $divide: ['$a', 0] } } }]).toArray(), []);
  const one = db.collection('one');
  await one.insertOne({ _id: 1, a: 1 });
  // The branch not taken is still folded.
  await h.expectCode(one.aggregate([{ $project: { r: { $cond: ['$a', 1, { $divide: [1, 0] }] } } }]).toArray(), 2);
  assert.deepEqual(await one.aggregate([{ $project: { r: { $cond: ['$a', 1, { $divide: ['$a', 0] }] } } }]).toArray(),
    [{ _id: 1, r: 1 }]);
});
