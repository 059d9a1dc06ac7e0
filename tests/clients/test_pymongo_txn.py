#!/usr/bin/python3
"""PyMongo (Debian's python3-pymongo 3.11) multi-document transactions on a mayflyd replica set.

Starts a 3-member replica set of mayflyd (binary from $MAYFLYD, default
build-asan/mayflyd relative to the repository root), each member on a free
client port and a free raft port with its own temporary --dbpath
(--replSet pytxn --raftPort R, as tests/clients/rs_harness.js starts them),
initiates it with replSetInitiate on the first member, waits for a primary and
two secondaries, then runs the transaction cases through a replicaSet URI
client, the way applications use pymongo:

  - with client.start_session() as s: s.with_transaction(callback): a commit
    is visible to another client afterwards and not before, reads inside see
    the transaction's own writes (getMores included);
  - an exception in the callback aborts: nothing is visible;
  - s.start_transaction() as a context manager, and abort_transaction();
  - two transactions writing one document: the second gets WriteConflict
    (112) labelled TransientTransactionError (jstests/core/txns/
    transactions_write_conflicts.js); with_transaction retries it and both
    increments apply;
  - a duplicate key aborts the transaction: E11000, then commitTransaction
    answers NoSuchTransaction (251) (write_ops_exec.cpp handleError);
  - a w: "majority" commit is on every member.

Every member must exit 0 on SIGTERM. Prints a final line "N passed, M failed"
and exits non-zero if anything failed. Run with /usr/bin/python3.
"""
import signal
import sys
import threading
import time
import traceback

from pymongo import MongoClient, ReadPreference, WriteConcern
from pymongo.errors import DuplicateKeyError, OperationFailure

from mayfly_server import start_replica_set, wait_for

SET_NAME = "pytxn"
MEMBERS = []
CLIENT = None      # the application's client, on the replicaSet URI
OUTSIDE = None     # a second client: its reads are outside every transaction
TESTS = []
_counter = [0]
MAJORITY = WriteConcern(w="majority", wtimeout=20000)
TTE = "TransientTransactionError"


def test(fn):
    TESTS.append(fn)
    return fn


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: expected %r, got %r" % (what, b, a))


def fresh_db(tag, collections=(), seed=None):
    """A fresh database with its collections created (w: majority, outside any transaction) and seeded."""
    _counter[0] += 1
    db = CLIENT.get_database("pytxn_%d_%s" % (_counter[0], tag), write_concern=MAJORITY)
    for name in collections:
        db.create_collection(name)
    for name, docs in (seed or {}).items():
        db[name].insert_many(docs)
    return db


def outside(db):
    return OUTSIDE[db.name]


def ids(coll, flt=None):
    return [d["_id"] for d in coll.find(flt or {}).sort("_id", 1)]


@test
def test_with_transaction_commits_two_collections_atomically():
    db = fresh_db("commit", ["accounts", "audit"],
                  {"accounts": [{"_id": "a", "balance": 100}, {"_id": "b", "balance": 50}]})
    out = outside(db)
    calls = []

    def transfer(s):
        calls.append(1)
        db.accounts.update_one({"_id": "a"}, {"$inc": {"balance": -30}}, session=s)
        db.accounts.update_one({"_id": "b"}, {"$inc": {"balance": 30}}, session=s)
        db.audit.insert_one({"_id": 1, "amount": 30}, session=s)
        db.audit.insert_many([{"_id": i} for i in range(2, 8)], session=s)
        # Inside: the transaction's own writes, the audit read through getMores (batch_size 2).
        eq(list(db.accounts.find({}, session=s).sort("_id", 1)),
           [{"_id": "a", "balance": 70}, {"_id": "b", "balance": 80}], "accounts inside")
        eq([d["_id"] for d in db.audit.find({}, session=s, batch_size=2).sort("_id", 1)],
           list(range(1, 8)), "audit inside, in batches of 2")
        eq(db.audit.count_documents({}, session=s), 7, "count inside")
        # Outside, mid-transaction: nothing of it.
        eq(list(out.accounts.find().sort("_id", 1)),
           [{"_id": "a", "balance": 100}, {"_id": "b", "balance": 50}], "accounts outside, before the commit")
        eq(out.audit.count_documents({}), 0, "audit outside, before the commit")
        return "done"

    with CLIENT.start_session() as s:
        eq(s.with_transaction(transfer), "done", "with_transaction returns the callback's value")
    eq(len(calls), 1, "callback runs")
    eq(list(out.accounts.find().sort("_id", 1)),
       [{"_id": "a", "balance": 70}, {"_id": "b", "balance": 80}], "accounts after the commit")
    eq(ids(out.audit), list(range(1, 8)), "audit after the commit")


@test
def test_exception_in_callback_aborts_everything():
    db = fresh_db("abort", ["c"], {"c": [{"_id": 1, "v": 1}, {"_id": 2, "v": 2}]})

    def change_then_fail(s):
        db.c.insert_one({"_id": 3}, session=s)
        db.c.update_one({"_id": 1}, {"$set": {"v": 10}}, session=s)
        db.c.delete_one({"_id": 2}, session=s)
        eq([d["_id"] for d in db.c.find({}, session=s).sort("_id", 1)], [1, 3], "inside, before the exception")
        raise ValueError("changed my mind")

    with CLIENT.start_session() as s:
        try:
            s.with_transaction(change_then_fail)
            raise AssertionError("with_transaction should re-raise the callback's exception")
        except ValueError as e:
            eq(str(e), "changed my mind", "the callback's exception")
        eq(s.in_transaction, False, "the transaction is over")
    eq(list(outside(db).c.find().sort("_id", 1)), [{"_id": 1, "v": 1}, {"_id": 2, "v": 2}], "nothing changed")


@test
def test_start_transaction_context_manager_and_abort_transaction():
    db = fresh_db("ctx", ["c"])
    out = outside(db)
    with CLIENT.start_session() as s:
        with s.start_transaction():
            db.c.insert_one({"_id": "committed"}, session=s)
            eq(ids(out.c), [], "invisible before the block ends")
        eq(ids(out.c), ["committed"], "the block's end commits")

        try:
            with s.start_transaction():
                db.c.insert_one({"_id": "rolled-back"}, session=s)
                raise KeyError("boom")
        except KeyError:
            pass
        eq(ids(out.c), ["committed"], "an exception in the block aborts")

        s.start_transaction()
        db.c.insert_one({"_id": "aborted"}, session=s)
        eq([d["_id"] for d in db.c.find({}, session=s).sort("_id", 1)], ["aborted", "committed"], "inside")
        s.abort_transaction()
    eq(ids(out.c), ["committed"], "abort_transaction leaves nothing")


@test
def test_write_conflict_is_labelled_transient_and_the_loser_is_aborted():
    # jstests/core/txns/libs/write_conflicts.js T1StartsFirstAndWins (update-update).
    db = fresh_db("conflict", ["c"], {"c": [{"_id": 1}]})
    with CLIENT.start_session() as s1, CLIENT.start_session() as s2:
        s1.start_transaction()
        s2.start_transaction()
        db.c.update_one({"_id": 1}, {"$set": {"t1": 1}}, session=s1)
        try:
            db.c.update_one({"_id": 1}, {"$set": {"t2": 1}}, session=s2)
            raise AssertionError("the second writer should get a write conflict")
        except OperationFailure as e:
            eq(e.code, 112, "code")
            eq(e.details.get("codeName"), "WriteConflict", "codeName")
            eq(e.has_error_label(TTE), True, "TransientTransactionError label")
        s1.commit_transaction()
        try:
            s2.commit_transaction()
            raise AssertionError("the loser's commit should fail")
        except OperationFailure as e:
            eq(e.code, 251, "the loser's commit: NoSuchTransaction")
    eq(list(outside(db).c.find()), [{"_id": 1, "t1": 1}], "the winner's write only")


@test
def test_with_transaction_retries_a_write_conflict_and_both_increments_apply():
    db = fresh_db("retry", ["c"], {"c": [{"_id": "counter", "n": 0}]})
    conflicted = threading.Event()
    errors = []
    attempts = []
    outcome = {}

    def increment(s):
        attempts.append(1)
        try:
            db.c.update_one({"_id": "counter"}, {"$inc": {"n": 1}}, session=s)
        except OperationFailure as e:
            errors.append(e)
            conflicted.set()
            raise

    def retrier():
        try:
            with CLIENT.start_session() as s:
                s.with_transaction(increment)
            outcome["ok"] = True
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            outcome["error"] = e

    with CLIENT.start_session() as holder:
        holder.start_transaction()
        db.c.update_one({"_id": "counter"}, {"$inc": {"n": 1}}, session=holder)
        t = threading.Thread(target=retrier, daemon=True)
        t.start()
        if not conflicted.wait(30):
            raise AssertionError("the second transaction never met the first one's write")
        holder.commit_transaction()
        t.join(60)
        if t.is_alive():
            raise AssertionError("with_transaction did not finish after the first transaction committed")
    if "error" in outcome:
        raise AssertionError("with_transaction failed: %r" % outcome["error"])
    eq(errors[0].code, 112, "the first attempt's error")
    for e in errors:
        eq(e.has_error_label(TTE), True, "every failed attempt is transient (%s)" % e)
    if len(attempts) < 2:
        raise AssertionError("the callback was not retried (%d attempts)" % len(attempts))
    eq(outside(db).c.find_one({"_id": "counter"}), {"_id": "counter", "n": 2}, "both increments")


@test
def test_duplicate_key_aborts_the_transaction():
    # jstests/core/txns/multi_statement_transaction_write_error.js; write_ops_exec.cpp handleError.
    db = fresh_db("dupkey", ["c"], {"c": [{"_id": "taken"}]})
    calls = []

    def insert_dup(s):
        calls.append(1)
        db.c.insert_one({"_id": "fresh"}, session=s)
        db.c.insert_one({"_id": "taken"}, session=s)

    with CLIENT.start_session() as s:
        try:
            s.with_transaction(insert_dup)
            raise AssertionError("a duplicate key should fail the transaction")
        except DuplicateKeyError as e:
            eq(e.code, 11000, "code")
            eq(e.has_error_label(TTE), False, "a duplicate key is not transient")
        eq(len(calls), 1, "not retried")

        s.start_transaction()
        db.c.insert_one({"_id": "fresh2"}, session=s)
        try:
            db.c.insert_one({"_id": "taken"}, session=s)
            raise AssertionError("expected E11000")
        except DuplicateKeyError:
            pass
        try:
            s.commit_transaction()
            raise AssertionError("the transaction was aborted by the duplicate key; commit should fail")
        except OperationFailure as e:
            eq(e.code, 251, "commit after the duplicate key: NoSuchTransaction")
    eq(ids(outside(db).c), ["taken"], "nothing of either transaction")


@test
def test_majority_commit_is_on_every_member():
    db = fresh_db("repl", ["c"])

    def write(s):
        db.c.insert_many([{"_id": i} for i in range(10)], session=s)
        db.c.update_one({"_id": 0}, {"$set": {"first": True}}, session=s)

    with CLIENT.start_session() as s:
        s.with_transaction(write, write_concern=WriteConcern(w="majority"))
    want = [{"_id": 0, "first": True}] + [{"_id": i} for i in range(1, 10)]
    for m in MEMBERS:
        direct = MongoClient("127.0.0.1", m.port, directConnection=True,
                             read_preference=ReadPreference.SECONDARY_PREFERRED)
        try:
            wait_for(lambda: list(direct[db.name].c.find().sort("_id", 1)) == want,
                     "member on port %d to hold the transaction's documents" % m.port)
        finally:
            direct.close()


def quiet_tail(m, n=6):
    """The last n lines of a member's stderr, without the connection accepted/ended lines."""
    lines = [l for l in m.stderr_lines[-200:] if not ('"c":"NETWORK"' in l and "connection " in l)]
    return "\n".join(lines[-n:])


def start_set():
    start_replica_set(SET_NAME, MEMBERS)
    hosts = ["127.0.0.1:%d" % m.port for m in MEMBERS]
    uri = "mongodb://%s/?replicaSet=%s&serverSelectionTimeoutMS=20000" % (",".join(hosts), SET_NAME)
    return MongoClient(uri), MongoClient(uri)


def stop_set():
    """Stops every member with SIGTERM; returns the number of members that did not exit cleanly."""
    bad = 0
    for m in MEMBERS:
        rc = m.stop()
        if rc not in (0, -signal.SIGTERM):
            bad += 1
            print("FAIL member on port %d shutdown: exit status %r\n%s" % (m.port, rc, m.tail(40)))
        m.cleanup()
    return bad


def main():
    global CLIENT, OUTSIDE
    passed = failed = 0
    try:
        CLIENT, OUTSIDE = start_set()
    except Exception as e:  # noqa: BLE001 - report any start-up failure
        print("FAIL start-up: %s" % e)
        for m in MEMBERS:
            print("--- member on port %s stderr tail ---\n%s" % (m.port, m.tail(20)))
        stop_set()
        print("0 passed, %d failed" % len(TESTS))
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
            for m in MEMBERS:
                state = "exited (%s)" % m.proc.returncode if m.proc.poll() is not None else "running"
                print("--- member on port %d, %s; stderr tail ---\n%s" % (m.port, state, quiet_tail(m)))
    CLIENT.close()
    OUTSIDE.close()
    failed += stop_set()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
