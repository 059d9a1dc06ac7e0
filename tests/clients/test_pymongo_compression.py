#!/usr/bin/python3
"""Wire compression through pymongo (Debian's python3-pymongo 3.11): snappy
(python3-snappy), zlib (always) and zstd (python3-zstandard), one client
each against one mayflyd with the default --networkMessageCompressors.

For each compressor: the connection negotiated it (a hello on it repeats
the negotiated list, as mongod's serverNegotiate), large documents and a
cursor of many getMores round-trip, and serverStatus network.compression
shows that compressor's compressor and decompressor counters grown and the
others' unchanged. Prints "N passed, M failed", exits non-zero on failure.
Run with /usr/bin/python3.
"""
import os
import sys
import time
import traceback

from pymongo import MongoClient

from mayfly_server import Server

SERVER = None


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: expected %r, got %r" % (what, b, a))


def compression_stats(client):
    return client.admin.command("serverStatus")["network"]["compression"]


def run_one(name):
    if name == "snappy":
        import snappy  # noqa: F401 - without it pymongo drops snappy silently
    if name == "zstd":
        import zstandard  # noqa: F401 - likewise
    admin = MongoClient(SERVER.uri)
    client = MongoClient(SERVER.uri, compressors=name)
    try:
        before = compression_stats(admin)
        eq(list(before.keys()), ["snappy", "zstd", "zlib"], "configured compressors in order")
        eq(client.admin.command("hello").get("compression"), [name], "negotiated")
        coll = client["pyc_" + name].c
        big = [{"_id": i, "text": ("%d:%s " % (i, name)) * 400000, "blob": os.urandom(100000)} for i in range(3)]
        coll.insert_many(big)
        coll.insert_many([{"_id": 100 + i, "v": "z" * i} for i in range(500)])
        got = list(coll.find({"_id": {"$lt": 100}}).sort("_id", 1))
        eq(len(got), 3, "large documents")
        for g, want in zip(got, big):
            eq(g["text"] == want["text"] and bytes(g["blob"]) == want["blob"], True, "document %d round-trips" % g["_id"])
        ids = [d["_id"] for d in coll.find({"_id": {"$gte": 100}}, batch_size=9).sort("_id", 1)]
        eq(ids, list(range(100, 600)), "a cursor over 56 batches")
        after = compression_stats(admin)
        for other in ("snappy", "zstd", "zlib"):
            b, a = before[other], after[other]
            if other == name:
                grew_in = a["decompressor"]["bytesOut"] - b["decompressor"]["bytesOut"]
                grew_out = a["compressor"]["bytesIn"] - b["compressor"]["bytesIn"]
                if grew_in < 3000000 or grew_out < 3000000:
                    raise AssertionError("%s counters barely moved: %r -> %r" % (name, b, a))
                if a["decompressor"]["bytesIn"] - b["decompressor"]["bytesIn"] >= grew_in:
                    raise AssertionError("%s requests were not smaller compressed: %r -> %r" % (name, b, a))
            else:
                eq(a, b, "%s counters while only %s was used" % (other, name))
    finally:
        client.close()
        admin.close()


def main():
    global SERVER
    passed = failed = 0
    SERVER = Server()
    try:
        SERVER.start()
    except Exception as e:  # noqa: BLE001 - report any start-up failure
        print("FAIL start-up: %s" % e)
        print("0 passed, 3 failed")
        SERVER.cleanup()
        return 1
    for name in ("snappy", "zlib", "zstd"):
        t0 = time.time()
        try:
            run_one(name)
            passed += 1
            print("ok   compression %s (%.2fs)" % (name, time.time() - t0))
        except Exception:  # noqa: BLE001 - a test runner reports every failure
            failed += 1
            print("FAIL compression %s" % name)
            traceback.print_exc(file=sys.stdout)
            print("--- mayflyd stderr tail ---\n%s" % SERVER.tail(15))
    return SERVER.finish(passed, failed)


if __name__ == "__main__":
    sys.exit(main())
