#!/usr/bin/python3
"""PyMongo (Debian's python3-pymongo 3.11) client tests for mayflyd.

Starts its own mayflyd (binary from $MAYFLYD, default build-asan/mayflyd
relative to the repository root) on a free port with a temporary --dbpath,
runs basic CRUD through pymongo, prints a final line "N passed, M failed" and
exits non-zero if anything failed. Run with /usr/bin/python3.
"""
import sys
import time
import traceback

import pymongo
from bson import ObjectId
from pymongo import MongoClient
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

from mayfly_server import Server, start_replica_set, wait_for


SERVER = None
CLIENT = None
TESTS = []
_counter = [0]


def test(fn):
    TESTS.append(fn)
    return fn


def fresh_db():
    _counter[0] += 1
    return CLIENT["py_%d" % _counter[0]]


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: expected %r, got %r" % (what, b, a))


@test
def test_handshake_and_server_info():
    info = CLIENT.server_info()
    eq(info["ok"], 1.0, "buildInfo ok")
    hello = CLIENT.admin.command("ismaster")
    eq(hello["ismaster"], True, "ismaster")
    eq(hello["maxWireVersion"], 25, "maxWireVersion")
    eq(hello["maxBsonObjectSize"], 16777216, "maxBsonObjectSize")
    eq(CLIENT.admin.command("ping")["ok"], 1.0, "ping")


@test
def test_insert_and_find_one():
    c = fresh_db().c
    r = c.insert_one({"name": "py", "n": 1})
    assert isinstance(r.inserted_id, ObjectId)
    doc = c.find_one({"_id": r.inserted_id})
    eq(doc["name"], "py", "name")
    eq(doc["n"], 1, "n")


@test
def test_insert_many_and_find_with_filter_sort_limit():
    c = fresh_db().c
    c.insert_many([{"_id": i, "v": i * 10, "even": i % 2 == 0} for i in range(50)])
    got = [d["_id"] for d in c.find({"even": True, "v": {"$gte": 100}}).sort("v", pymongo.DESCENDING).limit(3)]
    eq(got, [48, 46, 44], "filtered sorted ids")
    eq(c.count_documents({}), 50, "count")
    eq(c.count_documents({"even": False}), 25, "odd count")
    eq(c.estimated_document_count(), 50, "estimated count")
    eq(sorted(c.distinct("even")), [False, True], "distinct")
    proj = c.find_one({"_id": 3}, {"v": 1, "_id": 0})
    eq(proj, {"v": 30}, "projection")


@test
def test_cursor_iterates_over_many_batches():
    c = fresh_db().c
    c.insert_many([{"_id": i} for i in range(3000)])
    ids = [d["_id"] for d in c.find({}, batch_size=100).sort("_id", 1)]
    eq(ids, list(range(3000)), "all ids in order")


@test
def test_update_one_many_and_replace():
    c = fresh_db().c
    c.insert_many([{"_id": 1, "t": "a", "n": 1}, {"_id": 2, "t": "a", "n": 2}, {"_id": 3, "t": "b", "n": 3}])
    r = c.update_one({"_id": 1}, {"$set": {"x": True}, "$inc": {"n": 5}})
    eq((r.matched_count, r.modified_count), (1, 1), "update_one counts")
    eq(c.find_one({"_id": 1}), {"_id": 1, "t": "a", "n": 6, "x": True}, "after update_one")
    r = c.update_many({"t": "a"}, {"$push": {"log": "m"}})
    eq(r.modified_count, 2, "update_many modified")
    r = c.replace_one({"_id": 3}, {"only": 1})
    eq(c.find_one({"_id": 3}), {"_id": 3, "only": 1}, "replaced")
    r = c.update_one({"_id": 9}, {"$set": {"u": 1}}, upsert=True)
    eq(r.upserted_id, 9, "upserted id")


@test
def test_delete_one_and_many():
    c = fresh_db().c
    c.insert_many([{"k": i % 3} for i in range(9)])
    eq(c.delete_one({"k": 0}).deleted_count, 1, "delete_one")
    eq(c.delete_many({"k": 1}).deleted_count, 3, "delete_many")
    eq(c.count_documents({}), 5, "remaining")


@test
def test_find_one_and_modify_family():
    c = fresh_db().c
    c.insert_one({"_id": 1, "n": 1})
    before = c.find_one_and_update({"_id": 1}, {"$inc": {"n": 1}})
    eq(before, {"_id": 1, "n": 1}, "before")
    after = c.find_one_and_update({"_id": 1}, {"$inc": {"n": 1}},
                                  return_document=pymongo.ReturnDocument.AFTER)
    eq(after, {"_id": 1, "n": 3}, "after")
    eq(c.find_one_and_delete({"_id": 1}), {"_id": 1, "n": 3}, "deleted doc")
    eq(c.count_documents({}), 0, "empty")


@test
def test_duplicate_key_errors():
    db = fresh_db()
    c = db.c
    c.insert_one({"_id": 1})
    try:
        c.insert_one({"_id": 1})
        raise AssertionError("duplicate accepted")
    except DuplicateKeyError as e:
        eq(e.code, 11000, "code")
        eq(e.details["errmsg"],
           "E11000 duplicate key error collection: %s.c index: _id_ dup key: { _id: 1 }" % db.name, "errmsg")
    try:
        c.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}], ordered=False)
        raise AssertionError("duplicate accepted")
    except BulkWriteError as e:
        eq([w["index"] for w in e.details["writeErrors"]], [1], "error indexes")
        eq(e.details["nInserted"], 2, "nInserted")


@test
def test_aggregate():
    c = fresh_db().c
    c.insert_many([{"k": "a", "v": 1}, {"k": "a", "v": 2}, {"k": "b", "v": 5}])
    got = list(c.aggregate([{"$group": {"_id": "$k", "s": {"$sum": "$v"}}}, {"$sort": {"_id": 1}}]))
    eq(got, [{"_id": "a", "s": 3}, {"_id": "b", "s": 5}], "group")


@test
def test_indexes_and_collections():
    db = fresh_db()
    db.c.insert_one({"a": 1})
    name = db.c.create_index([("a", 1)], unique=True)
    eq(name, "a_1", "index name")
    eq(sorted(db.c.index_information().keys()), ["_id_", "a_1"], "indexes")
    try:
        db.c.insert_one({"a": 1})
        raise AssertionError("unique index not enforced")
    except DuplicateKeyError:
        pass
    eq(db.list_collection_names(), ["c"], "collections")
    db.c.drop()
    eq(db.list_collection_names(), [], "after drop")


@test
def test_errors_from_server():
    db = fresh_db()
    try:
        db.command("noSuchCommandHere")
        raise AssertionError("unknown command accepted")
    except OperationFailure as e:
        eq(e.code, 59, "CommandNotFound")
    try:
        list(db.c.find({"$foo": 1}))
        raise AssertionError("unknown operator accepted")
    except OperationFailure as e:
        eq(e.code, 2, "BadValue")
    eq(CLIENT.admin.command("ping")["ok"], 1.0, "still serving")


@test
def test_sort_with_a_repeated_key_fails_with_7472500():
    """A raw sort document naming one path twice (a dict cannot, raw BSON can) is mongod's 7472500."""
    from bson import SON
    from bson.raw_bson import RawBSONDocument
    db = fresh_db()
    db.c.insert_many([{"_id": 1, "a": 2, "b": 1}, {"_id": 2, "a": 1, "b": 1}])

    def el(k, v):
        return b"\x10" + k.encode() + b"\x00" + v.to_bytes(4, "little", signed=True)
    body = el("a", 1) + el("b", 1) + el("a", -1)
    raw = RawBSONDocument((len(body) + 5).to_bytes(4, "little") + body + b"\x00")
    for cmd in (SON([("find", "c"), ("sort", raw)]),
                SON([("aggregate", "c"), ("pipeline", [{"$sort": raw}]), ("cursor", {})])):
        try:
            db.command(cmd)
            raise AssertionError("a repeated sort key was accepted")
        except OperationFailure as e:
            eq(e.code, 7472500, "code")
            eq(e.details["errmsg"], "$sort key must not contain duplicate keys (duplicate: 'a')", "errmsg")
    eq([d["_id"] for d in db.c.find({}, sort=[("a", 1), ("b", 1)])], [2, 1], "distinct keys still sort")


@test
def test_bulk_write():
    c = fresh_db().c
    r = c.bulk_write([
        pymongo.InsertOne({"_id": 1}),
        pymongo.UpdateOne({"_id": 1}, {"$set": {"x": 1}}),
        pymongo.UpdateOne({"_id": 2}, {"$set": {"x": 2}}, upsert=True),
        pymongo.DeleteOne({"_id": 1}),
    ])
    eq((r.inserted_count, r.modified_count, r.upserted_count, r.deleted_count), (1, 1, 1, 1), "bulk counts")
    eq(list(c.find()), [{"_id": 2, "x": 2}], "final contents")


@test
def test_bulk_write_bypass_document_validation():
    """pymongo 3.11 puts bypassDocumentValidation on every batch's command, the delete included:
    mongod 8.0's write_ops.idl has it in WriteCommandRequestBase, shared by insert, update and delete."""
    db = fresh_db()
    db.create_collection("v", validator={"x": {"$type": "int"}})
    r = db.v.bulk_write([
        pymongo.InsertOne({"_id": 1, "x": "not an int"}),
        pymongo.UpdateOne({"_id": 1}, {"$set": {"y": "s"}}),
        pymongo.InsertOne({"_id": 2, "x": "s"}),
        pymongo.DeleteOne({"_id": 2}),
    ], bypass_document_validation=True)
    eq((r.inserted_count, r.modified_count, r.deleted_count), (2, 1, 1), "bulk counts")
    eq(list(db.v.find()), [{"_id": 1, "x": "not an int", "y": "s"}], "final contents")


@test
def test_fail_point_retried_read_and_closed_connection():
    """configureFailPoint/failCommand through pymongo: a retryable error and a dropped connection are retried."""
    coll = fresh_db().fp
    coll.insert_many([{"_id": 1}, {"_id": 2}])
    admin = CLIENT.admin
    before = admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                           data={"failCommands": ["find"], "errorCode": 89})["count"]
    eq(sorted(d["_id"] for d in coll.find()), [1, 2], "find retried after 89 NetworkTimeout")
    admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                  data={"failCommands": ["find"], "closeConnection": True})
    eq(coll.find_one({"_id": 2}), {"_id": 2}, "find retried after the connection closed")
    after = admin.command("configureFailPoint", "failCommand", mode="off")["count"]
    eq(after - before, 2, "both activations counted")
    admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                  data={"failCommands": ["insert"], "errorCode": 2})
    try:
        coll.insert_one({"_id": 3})
        raise AssertionError("the insert should have failed")
    except OperationFailure as e:
        eq(e.code, 2, "errorCode")
    eq(coll.count_documents({"_id": 3}), 0, "nothing inserted")
    try:
        admin.command("configureFailPoint", "nope", mode="alwaysOn")
        raise AssertionError("an unknown fail point should be refused")
    except OperationFailure as e:
        eq(e.code, 266, "FailPointSetFailed")


@test
def test_logical_sessions():
    """An explicit pymongo session is in $listLocalSessions with mongod's shape; endSessions removes it."""
    import hashlib
    import uuid

    def raw(v):  # pymongo 3.11 decodes subtype 4 as uuid.UUID, sends the session id as Binary
        return v.bytes if isinstance(v, uuid.UUID) else bytes(v)
    db = fresh_db()
    admin = CLIENT.admin
    with CLIENT.start_session() as s:
        db.c.insert_one({"a": 1}, session=s)
        sid = raw(s.session_id["id"])
        rows = list(admin.aggregate([{"$listLocalSessions": {}}]))
        row = [r for r in rows if raw(r["_id"]["id"]) == sid]
        eq(len(row), 1, "the session is listed")
        eq(sorted(row[0].keys()), ["_id", "lastUse"], "row fields")
        eq(bytes(row[0]["_id"]["uid"]), hashlib.sha256(b"").digest(), "uid without access control")
        admin.command("endSessions", [s.session_id])
        rows = list(admin.aggregate([{"$listLocalSessions": {"allUsers": True}}]))
        eq([r for r in rows if raw(r["_id"]["id"]) == sid], [], "endSessions removed it")
    try:
        list(db.c.aggregate([{"$listLocalSessions": {}}]))
        raise AssertionError("$listLocalSessions on a collection should fail")
    except OperationFailure as e:
        eq(e.code, 73, "on a collection")


@test
def test_collation():
    """Collation through pymongo: distinct, find, sort and a unique index with strength 2."""
    from pymongo.collation import Collation
    coll = fresh_db().coll
    coll.insert_many([{"w": "ping"}, {"w": "PING"}, {"w": "pong"}])
    ci = Collation(locale="en_US", strength=2)
    eq(len(coll.distinct("w", {"w": {"$in": ["ping", "pong"]}}, collation=ci)), 2, "distinct")
    eq(coll.count_documents({"w": "Ping"}, collation=ci), 2, "count")
    eq([d["w"] for d in coll.find({}, {"_id": 0}).sort("w", 1).collation(Collation(locale="en"))],
       ["ping", "PING", "pong"], "sort")
    other = fresh_db().u
    other.create_index("name", unique=True, collation=ci)
    other.insert_one({"name": "Alice"})
    try:
        other.insert_one({"name": "ALICE"})
        raise AssertionError("a case-insensitive unique index should refuse ALICE")
    except DuplicateKeyError:
        pass
def test_bit_query_operators():
    # The manual's $bitsAllSet / $bitsAnyClear examples, with BinData and a bad mask.
    from bson.binary import Binary
    c = fresh_db().collection
    c.insert_many([
        {"_id": 1, "a": 54}, {"_id": 2, "a": 20}, {"_id": 3, "a": 20.0},
        {"_id": 4, "a": Binary(b"\x66", 0)},
    ])
    ids = lambda f: [d["_id"] for d in c.find(f).sort("_id", 1)]
    eq(ids({"a": {"$bitsAllSet": [1, 5]}}), [1, 4], "$bitsAllSet positions")
    eq(ids({"a": {"$bitsAllSet": 50}}), [1], "$bitsAllSet mask")
    eq(ids({"a": {"$bitsAnyClear": Binary(b"\x30", 0)}}), [2, 3, 4], "$bitsAnyClear BinData")
    eq(c.count_documents({"a": {"$bitsAnySet": 35}}), 2, "count with $bitsAnySet")
    try:
        list(c.find({"a": {"$bitsAllClear": -1}}))
        raise AssertionError("negative bitmask accepted")
    except OperationFailure as e:
        eq(e.code, 9, "FailedToParse")


@test
def test_bit_update_operator():
    from bson.int64 import Int64
    c = fresh_db().switches
    c.insert_many([{"_id": 1, "expdata": 13}, {"_id": 2, "expdata": 3}, {"_id": 3, "expdata": 1}])
    c.update_one({"_id": 1}, {"$bit": {"expdata": {"and": 10}}})
    c.update_one({"_id": 2}, {"$bit": {"expdata": {"or": 5}}})
    c.update_one({"_id": 3}, {"$bit": {"expdata": {"xor": Int64(5)}}})
    eq(list(c.find().sort("_id", 1)), [{"_id": 1, "expdata": 8}, {"_id": 2, "expdata": 7},
                                       {"_id": 3, "expdata": 4}], "$bit results")
    eq(type(c.find_one({"_id": 3})["expdata"]), Int64, "int xor long is a long")
    try:
        c.update_one({"_id": 1}, {"$bit": {"expdata": {"and": 1.0}}})
        raise AssertionError("double $bit operand accepted")
    except OperationFailure as e:
        eq(e.code, 2, "BadValue")
def test_capped_conversion_and_tailable_cursors():
    db = fresh_db()
    db.c.insert_many([{"_id": i} for i in range(5)])
    db.command("convertToCapped", "c", size=4096)
    eq(db.c.options().get("capped"), True, "capped after convertToCapped")
    eq([d["_id"] for d in db.c.find()], list(range(5)), "documents kept")
    try:
        db.command("cloneCollectionAsCapped", "c", toCollection="c", size=4096)
        raise AssertionError("clone onto an existing collection accepted")
    except OperationFailure as e:
        eq(e.code, 48, "NamespaceExists")
    # an awaitData cursor on an empty capped collection is dead at once
    db.create_collection("empty", capped=True, size=4096)
    cur = db.empty.find(cursor_type=pymongo.CursorType.TAILABLE_AWAIT)
    eq(list(cur), [], "nothing to tail")
    eq(cur.alive, False, "cursor dead")
    # a tailable cursor whose last document is deleted loses its position
    cur = db.c.find(cursor_type=pymongo.CursorType.TAILABLE)
    eq(len([d for d in cur]), 5, "first pass")
    raw = db.command("find", "c", tailable=True)["cursor"]["id"]
    db.c.delete_one({"_id": 4})
    # pymongo treats 136 CappedPositionLost on a tailable cursor as its end
    eq(next(cur, "end"), "end", "tailable cursor ended")
    eq(cur.alive, False, "cursor dead after losing its position")
    try:
        db.command("getMore", raw, collection="c")
        raise AssertionError("getMore after the position was deleted succeeded")
    except OperationFailure as e:
        eq(e.code, 136, "CappedPositionLost")


@test
def test_db_hash_and_data_size():
    import hashlib
    import bson
    db = fresh_db()
    docs = [{"_id": 2, "v": "b"}, {"_id": 1, "v": "a"}]
    db.a.insert_many(docs)
    r = db.command("dbHash")
    want = hashlib.md5(b"".join(bson.BSON.encode(d) for d in sorted(docs, key=lambda d: d["_id"]))).hexdigest()
    eq(r["collections"], {"a": want}, "per-collection md5")
    eq(r["md5"], hashlib.md5(want.encode()).hexdigest(), "md5 of all")
    s = db.command("dataSize", db.name + ".a")
    eq((s["size"], s["numObjects"]), (sum(len(bson.BSON.encode(d)) for d in docs), 2), "dataSize")
    try:
        db.command("find", "a", readConcern={"level": "snapshot"})
        raise AssertionError("snapshot read concern accepted on a standalone")
    except OperationFailure as e:
        eq(e.code, 123, "NotAReplicaSet")


@test
def test_text_search():
    c = fresh_db().articles
    eq(c.create_index([("subject", pymongo.TEXT)]), "subject_text", "text index name")
    c.insert_many([{"_id": 1, "subject": "coffee"}, {"_id": 2, "subject": "Coffee Shopping"},
                   {"_id": 3, "subject": "Baking a cake"}, {"_id": 7, "subject": "coffee and cream"}])
    docs = list(c.find({"$text": {"$search": "coffees -shop"}}, {"score": {"$meta": "textScore"}})
                .sort([("score", {"$meta": "textScore"})]))
    eq([(d["_id"], d["score"]) for d in docs], [(1, 1.0), (7, 0.75)], "stemmed, negated, scored")
    eq([d["_id"] for d in c.find({"$text": {"$search": "\"coffee shop\""}})], [2], "phrase")
    info = c.index_information()["subject_text"]
    eq((info["key"], info["weights"], info["textIndexVersion"]), ([("_fts", "text"), ("_ftsx", 1)], {"subject": 1}, 3),
       "normalised spec")
    try:
        c.database.other.insert_one({"a": 1})
        list(c.database.other.find({"$text": {"$search": "x"}}))
        raise AssertionError("$text without a text index accepted")
    except OperationFailure as e:
        eq(e.code, 27, "IndexNotFound")
def test_geospatial():
    """2dsphere through pymongo: GEOSPHERE index, $near with $maxDistance, $geoWithin, $geoNear, 16755 and 291."""
    import pymongo
    from pymongo.errors import OperationFailure, WriteError
    c = fresh_db().places
    c.insert_many([
        {"_id": 1, "name": "Central Park", "loc": {"type": "Point", "coordinates": [-73.97, 40.77]}},
        {"_id": 2, "name": "Sara D. Roosevelt Park", "loc": {"type": "Point", "coordinates": [-73.9928, 40.7193]}},
        {"_id": 3, "name": "Polo Grounds", "loc": {"type": "Point", "coordinates": [-73.9375, 40.8303]}},
    ])
    try:
        list(c.find({"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [-73.9667, 40.78]}}}}))
        raise AssertionError("$near without a geo index should fail")
    except OperationFailure as e:
        eq(e.code, 291, "no index")
    eq(c.create_index([("loc", pymongo.GEOSPHERE)]), "loc_2dsphere", "index name")
    centre = {"type": "Point", "coordinates": [-73.9667, 40.78]}
    eq([d["name"] for d in c.find({"loc": {"$near": {"$geometry": centre, "$minDistance": 1000, "$maxDistance": 5000}}})],
       ["Central Park"], "$near min/max")
    box = {"type": "Polygon", "coordinates": [[[-74, 40.7], [-73.9, 40.7], [-73.9, 40.8], [-74, 40.8], [-74, 40.7]]]}
    eq(sorted(d["_id"] for d in c.find({"loc": {"$geoWithin": {"$geometry": box}}})), [1, 2], "$geoWithin")
    r = list(c.aggregate([{"$geoNear": {"near": {"type": "Point", "coordinates": [-73.98142, 40.71782]},
                                        "distanceField": "d", "maxDistance": 6000}}]))
    eq([d["name"] for d in r], ["Sara D. Roosevelt Park", "Central Park"], "$geoNear order")
    if abs(r[0]["d"] - 974.175764916902) > 1e-6:
        raise AssertionError("$geoNear distance %r" % r[0]["d"])
    try:
        c.insert_one({"loc": {"type": "Point", "coordinates": [181, 0]}})
        raise AssertionError("an out-of-range point should be refused")
    except WriteError as e:
        eq(e.code, 16755, "bad point")
    flat = fresh_db().flat
    flat.create_index([("p", pymongo.GEO2D)])
    flat.insert_many([{"_id": 1, "p": [0, 0]}, {"_id": 2, "p": [3, 4]}, {"_id": 3, "p": [1, 1]}])
    eq([d["_id"] for d in flat.find({"p": {"$near": [0, 0], "$maxDistance": 5}})], [1, 3, 2], "2d $near")
    eq(sorted(d["_id"] for d in flat.find({"p": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}})), [1, 3], "$box")


@test
def test_legacy_exhaust_find_raises_like_mongod():
    # pymongo 3.11 sends an exhaust find as a legacy OP_QUERY on the collection.
    # MongoDB 8.0 answers {$err, code: 5739101} with the QueryFailure flag, so
    # pymongo raises it instead of returning the error as a document.
    c = fresh_db().c
    c.insert_many([{"i": i} for i in range(5)])
    try:
        got = list(c.find({}, cursor_type=pymongo.CursorType.EXHAUST))
        raise AssertionError("an exhaust OP_QUERY should fail, got %r" % got)
    except OperationFailure as e:
        eq(e.code, 5739101, "code")
        eq(e.details, {"$err": "OP_QUERY is no longer supported. The client driver may require an upgrade. "
                               "For more details see https://dochub.mongodb.org/core/legacy-opcode-removal",
                       "code": 5739101, "ok": 0.0}, "the $err document")
    eq(sorted(d["i"] for d in c.find({})), [0, 1, 2, 3, 4], "the client carries on")


@test
def test_aggregation_output_over_16mb_fails_10334():
    # A $group result of 20 MB, and of 60 MB (which, sent, made a reply larger
    # than maxMessageSizeBytes and pymongo dropped the connection), fail as
    # mongod 8.0 fails them: 10334 when the document is serialised, with the
    # context its aggregate adds to what its plan executor throws.
    c = fresh_db().c
    mb4 = "x" * (4 * 1024 * 1024)
    for n in (5, 15):
        c.delete_many({})
        c.insert_many([{"_id": i, "b": mb4} for i in range(n)])
        try:
            list(c.aggregate([{"$group": {"_id": None, "all": {"$push": "$b"}}}]))
            raise AssertionError("a %d MB $group result should fail" % (4 * n))
        except OperationFailure as e:
            eq(e.code, 10334, "code")
            msg = str(e.details.get("errmsg"))
            if not msg.startswith("PlanExecutor error during aggregation :: caused by :: BSONObj size: ") or \
                    "is invalid. Size must be between 0 and 16793600(16MB) First element: _id: null" not in msg:
                raise AssertionError("unexpected errmsg %r" % msg)
    # Within the limit the same pipeline answers, on the same connections.
    eq(list(c.aggregate([{"$match": {"_id": {"$lt": 3}}},
                         {"$group": {"_id": None, "n": {"$sum": {"$strLenBytes": "$b"}}}}])),
       [{"_id": None, "n": 3 * len(mb4)}], "a small result")


@test
def test_replica_set_discovery_writes_reads_and_failover():
    """Issue 9 through pymongo: a 3-member set found from a replicaSet URI, writes on the primary read back
    from a secondary, and after kill -9 of the primary pymongo follows the new one with nothing acknowledged lost."""
    from pymongo import ReadPreference
    from pymongo.errors import AutoReconnect  # NotMasterError (3.x) and NotPrimaryError (4.x) derive from it
    members = []
    try:
        start_replica_set("pyrs", members)
        hosts = ["127.0.0.1:%d" % m.port for m in members]
        client = MongoClient("mongodb://%s/?replicaSet=pyrs&serverSelectionTimeoutMS=15000" % ",".join(hosts))
        try:
            coll = client.pydb.get_collection("c", write_concern=pymongo.WriteConcern(w="majority"))
            for i in range(50):
                coll.insert_one({"_id": i})
            primary = client.primary
            eq(primary is not None, True, "a primary is found")
            sec = client.pydb.get_collection("c", read_preference=ReadPreference.SECONDARY)
            wait_for(lambda: sec.count_documents({}) == 50, "the secondaries to hold the 50 documents")
            # kill -9 the primary; pymongo must find the new one and acknowledged writes must all be there.
            victim = [m for m in members if m.port == primary[1]][0]
            victim.proc.kill()
            victim.proc.wait(5)

            def write_more():
                try:
                    coll.insert_one({"_id": 50})
                    return True
                except AutoReconnect:
                    return False
                except DuplicateKeyError:
                    return True  # a retried insert that had gone through
            wait_for(write_more, "a write on the new primary")
            eq(client.primary != primary, True, "another member is primary")
            eq(sorted(d["_id"] for d in coll.find()), list(range(51)), "every acknowledged write survives the failover")
        finally:
            client.close()
    finally:
        for m in members:
            m.stop()
            m.cleanup()


def main():
    global SERVER, CLIENT
    passed = failed = 0
    SERVER = Server(["--setParameter", "enableTestCommands=1"])
    try:
        SERVER.start()
        CLIENT = MongoClient(SERVER.uri)
    except Exception as e:  # noqa: BLE001 - report any start-up failure
        print("FAIL start-up: %s" % e)
        print("0 passed, %d failed" % len(TESTS))
        SERVER.cleanup()
        return 1
    for fn in TESTS:
        t0 = time.time()
        try:
            fn()
            passed += 1
            print("ok   %s (%.2fs)" % (fn.__name__, time.time() - t0))
        except Exception:  # noqa: BLE001 - a test runner reports every failure
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
            if SERVER.proc.poll() is not None:
                print("--- mayflyd exited (%s); stderr tail ---\n%s" % (SERVER.proc.returncode, SERVER.tail()))
            else:
                print("--- mayflyd stderr tail ---\n%s" % SERVER.tail(10))
    CLIENT.close()
    return SERVER.finish(passed, failed)


if __name__ == "__main__":
    sys.exit(main())
