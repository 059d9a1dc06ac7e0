#!/usr/bin/python3
"""Writes the seed corpora (fuzz/corpus/<name>/) and dictionaries (fuzz/<name>.dict).

    /usr/bin/python3 fuzz/gen_corpus.py        (needs python3-pymongo for bson)

The output is committed; run this again only to change the seeds. Files
named regress_* in the corpus directories are regression inputs from fuzzer
findings, added by hand beside their fix; this script leaves them alone. Seeds are
a handful of valid inputs per target, in the encodings fuzz_common.h reads:
raw BSON and wire frames for the wire / bson targets, JSON lines (one
Extended JSON document per line) for the others, plus a few raw BSON
sequences that JSON cannot express (embedded NULs, invalid UTF-8, odd types).
Dictionaries list the operator and option names the parsers compare against,
taken from the string literals of their sources, so the fuzzer can splice
them in instead of guessing them byte by byte.
"""
import datetime
import os
import re
import struct
import sys

import bson
from bson import SON
from bson.binary import Binary
from bson.code import Code
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

OP_QUERY, OP_MSG, OP_COMPRESSED = 2004, 2013, 2012


def enc(doc):
    return bson.BSON.encode(doc)


# ---- raw BSON for what pymongo will not write ----

def cstr(s):
    return s.encode() + b"\0"


def raw_doc(elements):
    """A document from raw elements: (type byte, key, value bytes)."""
    body = b"".join(bytes([t]) + cstr(k) + v for t, k, v in elements)
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def raw_str(b):
    return struct.pack("<i", len(b) + 1) + b + b"\0"


# ---- CRC-32C, as OP_MSG checksums use ----

def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def header(length, opcode, request_id=1, response_to=0):
    return struct.pack("<iiii", length, request_id, response_to, opcode)


def op_msg(body, seqs=(), flags=0, checksum=False):
    if checksum:
        flags |= 1
    payload = struct.pack("<I", flags) + b"\0" + enc(body)
    for ident, docs in seqs:
        inner = cstr(ident) + b"".join(enc(d) for d in docs)
        payload += b"\1" + struct.pack("<i", len(inner) + 4) + inner
    n = 16 + len(payload) + (4 if checksum else 0)
    msg = header(n, OP_MSG) + payload
    if checksum:
        msg += struct.pack("<I", crc32c(msg))
    return msg


def op_query(ns, query, fields=None, skip=0, nret=-1):
    payload = struct.pack("<i", 0) + cstr(ns) + struct.pack("<ii", skip, nret) + enc(query)
    if fields is not None:
        payload += enc(fields)
    return header(16 + len(payload), OP_QUERY) + payload


OID = ObjectId("5f1d7c2a9b1e8a0001a2b3c4")

# Documents of every type (pymongo writes these).
TYPED = SON([
    ("_id", OID), ("d", 1.5), ("s", "h\u00e9llo"), ("o", SON([("a", 1), ("b", [1, 2, {"c": None}])])),
    ("arr", [1, "two", 3.0, [4]]), ("bin", Binary(b"\x00\x01\x02", 0)), ("uuid", Binary(b"0123456789abcdef", 4)),
    ("old", Binary(b"xyz", 2)), ("t", True), ("date", datetime.datetime(2024, 1, 2, 3, 4, 5)), ("n", None),
    ("re", Regex("^a.*b$", "im")), ("code", Code("function() { return 1; }")),
    ("cws", Code("function() { return x; }", {"x": 1})), ("i", 42), ("ts", Timestamp(1700000000, 7)),
    ("l", Int64(1 << 40)), ("dec", Decimal128("1234.5678E-2")), ("min", MinKey()), ("max", MaxKey()),
])

# Elements pymongo cannot write: undefined, symbol, DBPointer, a string with a NUL, invalid UTF-8.
ODD = raw_doc([
    (0x06, "undef", b""),
    (0x0E, "sym", raw_str(b"symbol")),
    (0x0C, "ptr", raw_str(b"db.coll") + bytes(range(12))),
    (0x02, "nul", raw_str(b"a\x00b")),
    (0x02, "bad", raw_str(b"\xff\xfe\xc3")),
    (0x03, "$dollar", enc({"$x": 1})),
    (0x04, "oddarr", enc(SON([("b", 1), ("a", 2)]))),
])


def deep(levels):
    d = {"x": 1}
    for _ in range(levels - 1):
        d = {"a": d}
    return d


def write(name, files):
    out = os.path.join(HERE, "corpus", name)
    os.makedirs(out, exist_ok=True)
    for old in os.listdir(out):
        # regress_*: inputs that once crashed a target, added by hand with the fix; kept.
        if not old.startswith("regress_"):
            os.remove(os.path.join(out, old))
    for fname, data in files.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(out, fname), "wb") as f:
            f.write(data)


def jl(*lines):
    return "\n".join(lines) + "\n"


def main():
    # ---- wire: whole messages ----
    write("wire", {
        "hello.bin": op_msg({"hello": 1, "$db": "admin"}),
        "insert_seq.bin": op_msg(SON([("insert", "c"), ("ordered", True), ("$db", "test")]),
                                 seqs=[("documents", [{"_id": 1, "a": 1}, TYPED])]),
        "update_two_seqs.bin": op_msg(SON([("update", "c"), ("$db", "test")]),
                                      seqs=[("updates", [{"q": {"a": 1}, "u": {"$set": {"b": 2}}}]),
                                            ("extra", [{"z": 1}])]),
        "ping_checksum.bin": op_msg({"ping": 1, "$db": "admin"}, checksum=True),
        "exhaust_hello.bin": op_msg(SON([("hello", 1), ("topologyVersion", {"processId": OID, "counter": Int64(0)}),
                                         ("maxAwaitTimeMS", 10000), ("$db", "admin")]), flags=(1 << 16) | 2),
        "query_ismaster.bin": op_query("admin.$cmd", {"isMaster": 1}),
        "query_wrapped.bin": op_query("test.$cmd", SON([("$query", {"count": "c"}),
                                                        ("$readPreference", {"mode": "primary"})]),
                                      fields={"n": 1}),
        "query_collection.bin": op_query("test.c", {"a": 1}, skip=2, nret=10),
        "odd_body.bin": op_msg_raw(ODD),
        # OP_COMPRESSED (src/net/wire_compress.c): one envelope per compressor, and a noop one around OP_QUERY.
        "compressed_noop_query.bin": compressed(op_query("admin.$cmd", {"isMaster": 1}), 0),
        "compressed_snappy.bin": compressed(op_msg(SON([("find", "c"), ("filter", {"a": "x" * 40}), ("$db", "test")])), 1),
        "compressed_zlib.bin": compressed(op_msg(SON([("insert", "c"), ("$db", "test")]),
                                                 seqs=[("documents", [{"_id": 1, "a": "y" * 64}, TYPED])]), 2),
        "compressed_zstd.bin": compressed(op_msg({"ping": 1, "$db": "admin"}, checksum=True), 3),
    })

    # ---- bson: single documents ----
    write("bson", {
        "typed.bson": enc(TYPED),
        "odd_types.bson": ODD,
        "empty.bson": enc({}),
        "deep_120.bson": enc(deep(120)),
        "deep_185.bson": enc(deep(185)),
        "id_doc.bson": enc(SON([("_id", {"a": 1, "b": "x"}), ("v", [1, [2, [3]]])])),
        "id_array.bson": enc(SON([("_id", [1, 2]), ("v", 1)])),
        "id_dollar.bson": enc(SON([("_id", {"$x": 1}), ("v", 1)])),
        "no_id_cmd.bson": enc(SON([("insert", "c"), ("documents", [{"a": 1}]), ("$db", "test")])),
    })

    docs = [
        '{"_id": 1, "a": 1, "b": "x", "k": "p", "arr": [1, 2, 3], "o": {"c": 2, "d": [{"e": 5}, {"e": 7}]}}',
        '{"_id": 2, "a": 7.5, "b": "Alpha", "k": "q", "arr": [], "tags": ["x", "y", "z"], "n": 12}',
        '{"_id": 3, "a": {"$numberLong": "9007199254740993"}, "k": "p", "arr": [[1, 2], {"f": null}], "s": [4, 5]}',
        '{"_id": {"$oid": "5f1d7c2a9b1e8a0001a2b3c4"}, "a": null, "d": {"$date": "2024-03-01T12:00:00Z"}, '
        '"dec": {"$numberDecimal": "2.50"}, "re": {"$regularExpression": {"pattern": "^x", "options": "i"}}}',
        '{"_id": 5, "a": -3, "b": "beta", "flags": 5, "grades": [{"score": 90, "ok": false}, {"score": 70}]}',
    ]
    D = "\n".join(docs)

    # ---- match: a filter, then documents ----
    write("match", {
        "eq.json": jl('{"a": 1}', D),
        "range.json": jl('{"a": {"$gt": 0, "$lte": 10}, "b": {"$exists": true}}', D),
        "or_in.json": jl('{"$or": [{"a": 1}, {"b": {"$in": ["x", "beta", 2]}}, {"k": {"$nin": ["q"]}}]}', D),
        "elem_match.json": jl('{"o.d": {"$elemMatch": {"e": {"$gte": 6}}}, "arr.1": 2}', D),
        "regex.json": jl('{"b": {"$regex": "^al", "$options": "i"}, "k": {"$not": {"$regex": "z"}}}', D),
        "expr.json": jl('{"$expr": {"$gt": [{"$add": ["$a", {"$size": {"$ifNull": ["$arr", []]}}]}, 3]}}', D),
        "schema.json": jl('{"$jsonSchema": {"bsonType": "object", "required": ["a"], "properties": '
                          '{"a": {"bsonType": ["int", "double"], "minimum": 0}, "b": {"bsonType": "string", '
                          '"pattern": "^[a-z]+$"}}}}', D),
        "all_mod_size.json": jl('{"tags": {"$all": ["x", "y"]}, "n": {"$mod": [4, 0]}, "s": {"$size": 2}}', D),
        "type_nor.json": jl('{"a": {"$type": ["string", "number"]}, "$nor": [{"b": {"$eq": "x"}}], '
                            '"arr": {"$ne": null}, "$comment": "seed"}', D),
        "dotted_null.json": jl('{"o.d.e": {"$in": [5, null]}, "grades.score": {"$lt": 80}}', D),
        "binary.bson": enc({"nul": "a\x00b"}) + ODD + enc({"nul": {"$exists": True}}),
    })

    # ---- update: a statement {q, u, arrayFilters, upsert}, then documents ----
    write("update", {
        "set_inc.json": jl('{"q": {"a": 1}, "u": {"$set": {"b": 2, "o.c": 3}, "$inc": {"a": 1, "n": 2.5}}}', D),
        "push_each.json": jl('{"q": {}, "u": {"$push": {"arr": {"$each": [9, 0, 4], "$sort": -1, "$slice": 3, '
                             '"$position": 1}}}}', D),
        "positional.json": jl('{"q": {"arr": 2}, "u": {"$set": {"arr.$": 20}, "$unset": {"o.d.0.e": ""}}}', D),
        "array_filters.json": jl('{"q": {}, "u": {"$set": {"grades.$[g].ok": true}, "$inc": {"grades.$[].score": 1}}, '
                                 '"arrayFilters": [{"g.score": {"$gte": 80}}]}', D),
        "upsert.json": jl('{"q": {"_id": 7, "k": "v", "o.c": 1, "$and": [{"z": 2}]}, "u": {"$setOnInsert": '
                          '{"created": true}, "$currentDate": {"t": {"$type": "timestamp"}, "d": true}}, '
                          '"upsert": true}', D),
        "replace.json": jl('{"q": {"_id": 1}, "u": {"_id": 1, "x": [1, {"y": 2}]}}', D),
        "misc_ops.json": jl('{"q": {}, "u": {"$rename": {"b": "bb"}, "$min": {"m": 1}, "$max": {"a": 9}, '
                            '"$mul": {"n": 2}}}', D),
        "sets_pull.json": jl('{"q": {}, "u": {"$addToSet": {"tags": {"$each": ["x", "w"]}}, '
                             '"$pull": {"arr": {"$gte": 2}}, "$pullAll": {"s": [4]}, "$pop": {"grades": -1}}}', D),
        "pad.json": jl('{"q": {}, "u": {"$set": {"arr.6": 1, "new.3.x": 2}}}', D),
        "overflow.json": jl('{"q": {}, "u": {"$inc": {"a": {"$numberLong": "9223372036854775807"}}, '
                            '"$mul": {"n": {"$numberDecimal": "1E+6000"}}}}', D),
        "binary.bson": enc({"q": {}, "u": {"$set": {"x": "a\x00b"}}, "upsert": True}) + ODD,
    })

    # ---- agg: a pipeline, then documents ----
    write("agg", {
        "group_sort.json": jl('[{"$match": {"a": {"$gte": -5}}}, {"$group": {"_id": "$k", "n": {"$sum": 1}, '
                              '"avg": {"$avg": "$a"}, "all": {"$push": "$a"}, "set": {"$addToSet": "$b"}, '
                              '"f": {"$first": "$b"}, "sd": {"$stdDevPop": "$a"}}}, {"$sort": {"n": -1, "_id": 1}}]', D),
        "project_exprs.json": jl('[{"$project": {"x": {"$concat": ["$k", "-", {"$toString": "$a"}]}, '
                                 '"y": {"$cond": [{"$gt": ["$a", 1]}, "big", "small"]}, '
                                 '"z": {"$map": {"input": {"$ifNull": ["$arr", []]}, "as": "v", "in": {"$multiply": ["$$v", 2]}}}, '
                                 '"w": {"$switch": {"branches": [{"case": {"$isArray": "$arr"}, "then": 1}], "default": 0}}, '
                                 '"r": {"$reduce": {"input": [1, 2, 3], "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}}}, '
                                 '{"$skip": 1}, {"$limit": 3}]', D),
        "expr_ops.json": jl('''[{"$project": {"dp": {"$dateToParts": {"date": {"$ifNull": ["$d", "$$NOW"]}, "timezone": "America/New_York", "iso8601": true}}, "fp": {"$dateFromParts": {"year": 2024, "month": "$a", "day": 31, "timezone": "+05:30"}}, "fs": {"$dateFromString": {"dateString": "$b", "onError": null, "timezone": "Europe/Paris"}}, "wk": {"$isoWeek": {"date": {"$ifNull": ["$d", "$$NOW"]}, "timezone": "Asia/Tokyo"}}, "tr": {"$dateTrunc": {"date": {"$ifNull": ["$d", "$$NOW"]}, "unit": "week", "binSize": 2, "startOfWeek": "mon", "timezone": "Australia/Sydney"}}, "rf": {"$regexFindAll": {"input": {"$ifNull": ["$b", ""]}, "regex": "(a)?"}}, "ra": {"$replaceAll": {"input": {"$ifNull": ["$b", ""]}, "find": "", "replacement": "-"}}, "sa": {"$sortArray": {"input": {"$ifNull": ["$grades", []]}, "sortBy": {"score": -1}}}, "z": {"$zip": {"inputs": [{"$ifNull": ["$arr", []]}, {"$ifNull": ["$tags", []]}], "useLongestLength": true}}, "sf": {"$setField": {"field": "a.b", "input": "$$ROOT", "value": "$$REMOVE"}}, "bits": {"$bitXor": [{"$ifNull": ["$flags", 0]}, 3]}, "pc": {"$percentile": {"input": "$s", "p": [0.1, 0.9], "method": "approximate"}}, "sg": {"$sigmoid": {"$ifNull": ["$n", 0]}}}}]''', D),
        "unwind.json": jl('[{"$unwind": {"path": "$arr", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}, '
                          '{"$sortByCount": "$k"}]', D),
        "lookup.json": jl('[{"$lookup": {"from": "c", "localField": "k", "foreignField": "k", "as": "j"}}, '
                          '{"$addFields": {"nj": {"$size": "$j"}}}, {"$unset": ["j"]}]', D),
        "lookup_pipeline.json": jl('[{"$lookup": {"from": "c", "let": {"v": "$k"}, "pipeline": [{"$match": '
                                   '{"$expr": {"$eq": ["$k", "$$v"]}}}, {"$project": {"_id": 1}}], "as": "j"}}]', D),
        "facet_bucket.json": jl('[{"$facet": {"a": [{"$count": "n"}], "b": [{"$bucket": {"groupBy": "$n", '
                                '"boundaries": [0, 5, 10, 20], "default": "other", "output": {"c": {"$sum": 1}}}}]}}]', D),
        "documents.json": jl('[{"$documents": [{"x": 1}, {"x": 2, "s": "a,b"}]}, {"$set": {"y": {"$multiply": ["$x", 3]}, '
                             '"p": {"$split": [{"$ifNull": ["$s", ""]}, ","]}}}, {"$replaceWith": {"$mergeObjects": '
                             '[{"d": 1}, "$$ROOT"]}}]'),
        "out.json": jl('[{"$match": {"k": "p"}}, {"$out": "o"}]', D),
        "merge.json": jl('[{"$project": {"k": 1}}, {"$merge": {"into": "o", "on": "_id", "whenMatched": "merge", '
                         '"whenNotMatched": "insert"}}]', D),
        "current_op.json": jl('[{"$currentOp": {"allUsers": true}}, {"$project": {"op": 1, "ns": 1}}]'),
        "dates_strings.json": jl('[{"$project": {"ds": {"$dateToString": {"date": "$d", "format": "%Y-%m-%d"}}, '
                                 '"add": {"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 2}}, '
                                 '"m": {"$regexMatch": {"input": {"$ifNull": ["$b", ""]}, "regex": "^a"}}, '
                                 '"sub": {"$substrCP": [{"$ifNull": ["$b", ""]}, 1, 2]}, "rng": {"$range": [0, 5, 2]}, '
                                 '"rd": {"$round": [{"$toDouble": "$a"}, 1]}, "cv": {"$convert": {"input": "$b", '
                                 '"to": "int", "onError": -1}}}}, {"$sample": {"size": 2}}]', D),
        "binary.bson": enc(SON([("0", {"$match": {"nul": "a\x00b"}}), ("1", {"$project": {"nul": 1}})])) + ODD,
    })

    # ---- keystring: two keys ('-' names are descending) ----
    write("keystring", {
        "mixed.json": jl('{"a": 1, "-b": "x"}', '{"a": 1.0, "-b": "y"}'),
        "dates.json": jl('{"d": {"$date": "2024-01-01T00:00:00Z"}}',
                         '{"d": {"$date": {"$numberLong": "-62135596800000"}}}'),
        "big_ints.json": jl('{"n": {"$numberLong": "9007199254740993"}, "m": 3}',
                            '{"n": 9007199254740992.0, "m": {"$numberLong": "3"}}'),
        "decimals.json": jl('{"x": {"$numberDecimal": "1.5"}, "-y": {"$numberDecimal": "-0.001"}}',
                            '{"x": {"$numberDecimal": "1.50"}, "-y": {"$numberDouble": "-0.001"}}'),
        "nested.json": jl('{"o": {"a": [1, {"b": null}], "c": {"$minKey": 1}}}', '{"o": {"a": [1, {"b": false}]}}'),
        "types.json": jl('{"s": {"$symbol": "abc"}, "r": {"$regularExpression": {"pattern": "^a", "options": "i"}}, '
                         '"t": {"$timestamp": {"t": 1, "i": 2}}}',
                         '{"s": "abd", "r": {"$regularExpression": {"pattern": "^a", "options": ""}}, '
                         '"t": {"$timestamp": {"t": 1, "i": 3}}}'),
        "bin_oid.json": jl('{"bin": {"$binary": {"base64": "AAEC", "subType": "00"}}, '
                           '"oid": {"$oid": "5f1d7c2a9b1e8a0001a2b3c4"}, "u": {"$undefined": true}}',
                           '{"bin": {"$binary": {"base64": "AAE=", "subType": "80"}}, '
                           '"oid": {"$oid": "5f1d7c2a9b1e8a0001a2b3c5"}, "u": null}'),
        "specials.json": jl('{"nan": {"$numberDouble": "NaN"}, "-inf": {"$numberDouble": "-Infinity"}, '
                            '"z": {"$numberDouble": "-0.0"}}',
                            '{"nan": {"$numberDouble": "-Infinity"}, "-inf": {"$numberDouble": "Infinity"}, "z": 0}'),
        "code.json": jl('{"code": {"$code": "f()"}, "cws": {"$code": "g()", "$scope": {"x": 1}}, '
                        '"ptr": {"$dbPointer": {"$ref": "a.b", "$id": {"$oid": "5f1d7c2a9b1e8a0001a2b3c4"}}}}',
                        '{"code": {"$code": "f( )"}, "cws": {"$code": "g()", "$scope": {"x": 2}}, '
                        '"ptr": {"$dbPointer": {"$ref": "ab", "$id": {"$oid": "5f1d7c2a9b1e8a0001a2b3c4"}}}}'),
        "strings.bson": enc({"s": "a\x00b", "-t": "\u00e9"}) + enc({"s": "a", "-t": "e"}),
        "odd.bson": ODD + enc(TYPED),
    })

    # ---- scram: mode byte, client-first, newline, client-final (or, honest mode, its extension part) ----
    sn = "c2VydmVyLW5vbmNlLWZ1eno"  # fuzz_scram.c's SERVER_NONCE
    write("scram", {
        "sha256_raw.txt": b"\x00n,,n=user,r=rOprNGfwEbeRWgbNEkqO\nc=biws,r=rOprNGfwEbeRWgbNEkqO" + sn.encode() +
                          b",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "sha1_raw.txt": b"\x01n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL\nc=biws,r=fyko+d2lbbFgONRv9qkxdawL" + sn.encode() +
                        b",p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "sha256_honest.txt": b"\x02n,,n=user,r=rOprNGfwEbeRWgbNEkqO\n",
        "sha1_honest_ext.txt": b"\x03n,a=admin,n=us=2Cer=3D,r=abc\n,x=extension",
        "y_flag_honest.txt": b"\x02y,,n=bob,r=nonce123\n",
        "binding.txt": b"\x00p=tls-server-end-point,,n=u,r=x\nc=cD10bHMtc2VydmVyLWVuZC1wb2ludCws,r=x,p=AAAA",
        "first_only.txt": b"\x01n,,n=u,r=x",
    })

    # ---- dictionaries ----
    dicts = {
        "match": ["src/doc/match.c", "src/doc/expr.c", "src/doc/jsonschema.c", "src/doc/value.c"],
        "update": ["src/doc/update.c", "src/doc/match.c"],
        "agg": ["src/query/agg.c", "src/query/agg_densify.c", "src/doc/expr.c", "src/doc/match.c", "src/doc/project.c",
                "src/doc/bucket.c"],
        "keystring": [],
        "wire": ["src/net/wire.c"],
        "scram": [],
    }
    ext_json = ["$oid", "$date", "$numberLong", "$numberDecimal", "$numberDouble", "$numberInt", "$binary",
                "$regularExpression", "$timestamp", "$minKey", "$maxKey", "$undefined", "$symbol", "$code", "$scope",
                "$dbPointer", "$ref", "$id", "base64", "subType", "pattern", "options", "NaN", "Infinity",
                "-Infinity"]
    for name, srcs in dicts.items():
        words = set()
        for s in srcs:
            text = open(os.path.join(ROOT, s), encoding="utf-8", errors="replace").read()
            for w in re.findall(r'"(\$?\$?[A-Za-z_][A-Za-z0-9_.]{0,39})"', text):
                words.add(w)
        lines = []
        if name == "scram":
            lines += ['"n,,"', '"y,,"', '"p=tls-unique,,"', '"n="', '"r="', '"c="', '"p="', '"a="', '",r="', '",p="',
                      '"biws"', '"eSws"', '"=2C"', '"=3D"', '"\\x0a"', '"c2VydmVyLW5vbmNlLWZ1eno"', '"=="']
        elif name == "wire":
            lines += ['"%s"' % w for w in sorted(words) if not w.startswith("%")]
            lines += ['"\\xdc\\x07\\x00\\x00"']  # OP_COMPRESSED
            lines += ['"\\xdd\\x07\\x00\\x00"', '"\\xd4\\x07\\x00\\x00"', '"\\x01\\x00\\x00\\x00"',
                      '"$db"', '"documents"', '"updates"', '"deletes"', '"admin.$cmd"', '"$query"']
        else:
            for w in sorted(words | set(ext_json)):
                lines.append('"\\"%s\\""' % w)
            lines += ['"{"', '"}"', '"["', '"]"', '": "', '", "', '"null"', '"true"', '"false"', '"-1"', '"0.5"',
                      '"1e308"', '"\\"$"', '"\\"$$ROOT\\""', '"\\"$$CURRENT\\""', '"\\"$$REMOVE\\""', '"\\"$$NOW\\""']
        with open(os.path.join(HERE, name + ".dict"), "w") as f:
            f.write("# Generated by fuzz/gen_corpus.py from string literals of the parsers' sources.\n")
            f.write("\n".join(lines) + "\n")


def compressed(msg, compressor_id):
    """msg wrapped in OP_COMPRESSED with compressor 0 noop, 1 snappy, 2 zlib or 3 zstd (python3-snappy, python3-zstandard)."""
    body = msg[16:]
    if compressor_id == 1:
        import snappy
        data = snappy.compress(body)
    elif compressor_id == 2:
        import zlib
        data = zlib.compress(body)
    elif compressor_id == 3:
        import zstandard
        data = zstandard.ZstdCompressor().compress(body)
    else:
        data = body
    rest = struct.pack("<iiB", struct.unpack("<i", msg[12:16])[0], len(body), compressor_id) + data
    return struct.pack("<i", 16 + len(rest)) + msg[4:12] + struct.pack("<i", OP_COMPRESSED) + rest


def op_msg_raw(body_bytes):
    payload = struct.pack("<I", 0) + b"\0" + body_bytes
    return header(16 + len(payload), OP_MSG) + payload


if __name__ == "__main__":
    sys.exit(main())
