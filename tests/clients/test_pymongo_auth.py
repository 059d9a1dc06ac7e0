#!/usr/bin/python3
"""PyMongo (Debian's python3-pymongo 3.11) authentication tests for mayflyd --auth.

Starts its own mayflyd --auth (binary from $MAYFLYD, default
build-asan/mayflyd relative to the repository root) on a free port with a
temporary --dbpath. The tests run in order: the first ones use the localhost
exception to create the root user that the later ones log in as. Prints a
final line "N passed, M failed" and exits non-zero if anything failed. Run
with /usr/bin/python3.

Covers, with MongoDB 8.0 semantics: unauthenticated commands answer 13
Unauthorized; the localhost exception (first user on admin only);
MongoClient(username=, password=, authSource='admin',
authMechanism='SCRAM-SHA-256'/'SCRAM-SHA-1') and the default mechanism
(pymongo speculates in its isMaster handshake); wrong password / unknown user
OperationFailure 18; a read-only user's insert OperationFailure 13; a
SCRAM-SHA-1-only user; updateUser pwd; usersInfo; logout through
connectionStatus; SASLprep of SCRAM-SHA-256 passwords (the auth spec's prose
test step 4); credentials across a SIGTERM restart.
"""
import sys
import time
import traceback

from pymongo import MongoClient
from pymongo.errors import OperationFailure

from mayfly_server import Server


ROOT_USER = "root"
ROOT_PWD = "r00t-Secret!pw"


SERVER = None
CLIENTS = []
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: expected %r, got %r" % (what, b, a))


def pwd_of(name):
    return "pw-%s-Xq7!" % name


def client(**kw):
    """A MongoClient on the test server (unauthenticated unless username= is given)."""
    c = MongoClient("127.0.0.1", SERVER.port, serverSelectionTimeoutMS=5000, connect=False, **kw)
    CLIENTS.append(c)
    return c


def login(user, pwd, source="admin", mech=None, **extra):
    kw = dict(username=user, password=pwd, authSource=source, **extra)
    if mech:
        kw["authMechanism"] = mech
    c = client(**kw)
    try:
        status = c.admin.command("connectionStatus")
    except OperationFailure as e:
        raise AssertionError("logging in as %s (authSource=%s, %s) should succeed: code %s %s"
                             % (user, source, mech or "default mechanism", e.code, e))
    users = [(u["user"], u["db"]) for u in status["authInfo"]["authenticatedUsers"]]
    eq(users, [(user, source)], "connectionStatus after logging in as %s" % user)
    return c


def expect_code(code, fn, what):
    try:
        r = fn()
    except OperationFailure as e:
        if e.code != code:
            raise AssertionError("%s: expected OperationFailure code %d, got %r (%s)" % (what, code, e.code, e))
        return e
    raise AssertionError("%s: expected OperationFailure code %d, got success: %r" % (what, code, r))


def expect_login_fails(user, pwd, source="admin", mech=None, what=""):
    kw = dict(username=user, password=pwd, authSource=source)
    if mech:
        kw["authMechanism"] = mech
    c = MongoClient("127.0.0.1", SERVER.port, serverSelectionTimeoutMS=5000, connect=False, **kw)
    try:
        expect_code(18, lambda: c.admin.command("connectionStatus"),
                    what or "logging in as %s with %s" % (user, mech or "the default mechanism"))
    finally:
        c.close()


_root = [None]


def root():
    if _root[0] is None:
        try:
            _root[0] = login(ROOT_USER, ROOT_PWD)
        except AssertionError as e:
            raise AssertionError("cannot log in as the root user the localhost-exception test creates: %s" % e)
    return _root[0]


# ------------------------------------------------------------------ tests


@test
def unauthenticated_commands_answer_13_except_the_handshake_ones():
    c = client()
    eq(c.admin.command("ping")["ok"], 1.0, "ping needs no authentication")
    eq(c.admin.command("isMaster")["ok"], 1.0, "isMaster needs no authentication")
    eq(c.admin.command("buildInfo")["ok"], 1.0, "buildInfo needs no authentication")
    st = c.admin.command("connectionStatus")
    eq(st["authInfo"]["authenticatedUsers"], [], "no authenticated users")
    eq(st["authInfo"]["authenticatedUserRoles"], [], "no roles")
    e = expect_code(13, lambda: c.pyauth.c.find_one(), "an unauthenticated find")
    if "requires authentication" not in str(e):
        raise AssertionError("message names the reason: %s" % e)
    expect_code(13, lambda: c.pyauth.c.insert_one({"_id": 1}), "an unauthenticated insert")
    expect_code(13, lambda: c.list_database_names(), "an unauthenticated listDatabases")
    expect_code(13, lambda: c.admin.command("serverStatus"), "an unauthenticated serverStatus")
    eq(c.admin.command("ping")["ok"], 1.0, "the client keeps working after 13")


@test
def localhost_exception_creates_only_the_first_user_on_admin():
    c = client()
    expect_code(13, lambda: c.test.command("createUser", "early", pwd="x", roles=[]),
                "createUser on db test through the localhost exception")
    r = c.admin.command("createUser", ROOT_USER, pwd=ROOT_PWD, roles=["root"])
    eq(r["ok"], 1.0, "the first user on admin through the localhost exception")
    expect_code(13, lambda: c.admin.command("createUser", "second", pwd="x", roles=["root"]),
                "a second unauthenticated createUser (the exception is closed)")
    expect_code(13, lambda: c.admin.system.users.find_one(), "the exception does not log the client in")
    names = sorted(u["user"] for u in root().admin.command("usersInfo", 1)["users"])
    eq(names, [ROOT_USER], "only the first user exists")


@test
def root_logs_in_with_scram_sha_256_sha_1_and_the_default_mechanism():
    for mech in (None, "SCRAM-SHA-256", "SCRAM-SHA-1"):
        c = login(ROOT_USER, ROOT_PWD, mech=mech)
        roles = [(r["role"], r["db"]) for r in c.admin.command("connectionStatus")["authInfo"]["authenticatedUserRoles"]]
        eq(roles, [("root", "admin")], "authenticatedUserRoles (%s)" % mech)
        c.pyauth.c.insert_one({"mech": mech or "default"})
    eq(root().pyauth.c.count_documents({}), 3, "root wrote once per mechanism")


@test
def wrong_password_and_unknown_user_raise_operation_failure_18():
    for mech in (None, "SCRAM-SHA-256", "SCRAM-SHA-1"):
        expect_login_fails(ROOT_USER, "not-the-password", mech=mech,
                           what="root with a wrong password (%s)" % (mech or "default"))
        expect_login_fails("nosuchuser", "whatever", mech=mech,
                           what="an unknown user (%s)" % (mech or "default"))
    eq(root().admin.command("ping")["ok"], 1.0, "the server keeps serving")


@test
def read_only_user_insert_raises_operation_failure_13():
    r = root()
    r.pyro.c.insert_many([{"_id": 1}, {"_id": 2}])
    r.pyro.command("createUser", "ro", pwd=pwd_of("ro"), roles=["read"])
    c = login("ro", pwd_of("ro"), source="pyro", mech="SCRAM-SHA-256")
    eq(sorted(d["_id"] for d in c.pyro.c.find()), [1, 2], "read's find")
    eq(c.pyro.c.count_documents({}), 2, "read's count")
    expect_code(13, lambda: c.pyro.c.insert_one({"_id": 3}), "a read-only user's insert")
    expect_code(13, lambda: c.pyro.c.update_one({"_id": 1}, {"$set": {"x": 1}}), "a read-only user's update")
    expect_code(13, lambda: c.pyro.c.delete_one({"_id": 1}), "a read-only user's delete")
    expect_code(13, lambda: c.other.c.find_one(), "a read-only user's find on another db")
    eq(c.pyro.c.count_documents({}), 2, "the connection keeps working and nothing changed")
    expect_code(13, lambda: c.pyro.command("createUser", "x", pwd="x", roles=[]), "read's createUser")


@test
def sha1_only_user_logs_in_with_sha1_and_fails_with_sha256():
    root().pyauth.command("createUser", "old", pwd=pwd_of("old"), roles=["readWrite"], mechanisms=["SCRAM-SHA-1"])
    info = root().pyauth.command("usersInfo", "old")["users"][0]
    eq(info["mechanisms"], ["SCRAM-SHA-1"], "usersInfo mechanisms")
    c = login("old", pwd_of("old"), source="pyauth", mech="SCRAM-SHA-1")
    c.pyauth.c.insert_one({"by": "old"})
    expect_login_fails("old", pwd_of("old"), source="pyauth", mech="SCRAM-SHA-256",
                       what="a SCRAM-SHA-1-only user with authMechanism=SCRAM-SHA-256")
    login("old", pwd_of("old"), source="pyauth")  # default: negotiated through saslSupportedMechs


@test
def users_info_and_system_users_never_show_the_password():
    r = root()
    r.pyui.command("createUser", "carol", pwd="Canary-Pass-5521",
                   roles=["readWrite", {"role": "read", "db": "other"}], customData={"k": 1})
    u = r.pyui.command("usersInfo", {"user": "carol", "db": "pyui"})["users"][0]
    eq(u["_id"], "pyui.carol", "_id")
    eq((u["user"], u["db"]), ("carol", "pyui"), "user, db")
    eq(sorted((x["role"], x["db"]) for x in u["roles"]), [("read", "other"), ("readWrite", "pyui")], "roles")
    eq(sorted(u["mechanisms"]), ["SCRAM-SHA-1", "SCRAM-SHA-256"], "default mechanisms")
    eq(u.get("customData"), {"k": 1}, "customData")
    eq("credentials" in u, False, "no credentials without showCredentials")
    doc = r.admin.system.users.find_one({"_id": "pyui.carol"})
    if doc is None:
        raise AssertionError("root reads pyui.carol from admin.system.users")
    eq("pwd" in doc, False, "no pwd field in admin.system.users")
    if "Canary-Pass-5521" in repr(doc):
        raise AssertionError("the password is stored: %r" % doc)
    eq(sorted(doc["credentials"]), ["SCRAM-SHA-1", "SCRAM-SHA-256"], "credentials")
    for mech in ("SCRAM-SHA-1", "SCRAM-SHA-256"):
        eq(sorted(doc["credentials"][mech]), ["iterationCount", "salt", "serverKey", "storedKey"], mech)


@test
def update_user_password_old_fails_new_works():
    r = root()
    r.pyup.command("createUser", "dave", pwd="old-pass-1", roles=["read"])
    login("dave", "old-pass-1", source="pyup")
    r.pyup.command("updateUser", "dave", pwd="new-pass-2")
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
        expect_login_fails("dave", "old-pass-1", source="pyup", mech=mech,
                           what="the old password after updateUser (%s)" % mech)
        login("dave", "new-pass-2", source="pyup", mech=mech)
    r.pyup.command("dropUser", "dave")
    expect_login_fails("dave", "new-pass-2", source="pyup", what="a dropped user")
    expect_code(11, lambda: r.pyup.command("dropUser", "dave"), "dropUser of a missing user")


@test
def logout_leaves_the_connection_unauthenticated():
    # One pooled socket, so logout and the commands after it share the connection.
    c = login(ROOT_USER, ROOT_PWD, maxPoolSize=1)
    eq(c.admin.command("logout")["ok"], 1.0, "logout")
    st = c.admin.command("connectionStatus")["authInfo"]
    eq(st["authenticatedUsers"], [], "no user after logout")
    eq(st["authenticatedUserRoles"], [], "no roles after logout")
    expect_code(13, lambda: c.pyauth.c.find_one(), "find after logout")


@test
def saslprep_of_scram_sha_256_passwords():
    # MongoDB's auth spec, SCRAM-SHA-256 prose test step 4. pymongo 3.11 SASLpreps
    # SCRAM-SHA-256 passwords client-side (Python's stringprep module); the server
    # builds the credential from the SASLprep'd password, and keeps user names as given.
    r = root()
    r.pysp.command("createUser", "IX", pwd="IX", roles=["read"], mechanisms=["SCRAM-SHA-256"])
    r.pysp.command("createUser", u"\u2168", pwd=u"\u2163", roles=["read"], mechanisms=["SCRAM-SHA-256"])
    for user, pwd in (("IX", "IX"), ("IX", u"I\u00adX"), (u"\u2168", "IV"), (u"\u2168", u"I\u00adV"),
                      (u"\u2168", u"\u2163")):
        login(user, pwd, source="pysp", mech="SCRAM-SHA-256")
    e = expect_code(50692, lambda: r.pysp.command("createUser", "bad", pwd=u"bell\u0007", roles=[]),
                    "createUser with a password SASLprep prohibits")
    eq(e.details.get("errmsg"), "Error preflighting normalization: U_STRINGPREP_PROHIBITED_ERROR", "errmsg")


@test
def credentials_survive_a_restart():
    root().pyrs.command("createUser", "survivor", pwd=pwd_of("survivor"), roles=["readWrite"])
    root().pyrs.c.insert_one({"_id": 1})
    rc = SERVER.restart()
    eq(rc, 0, "clean shutdown")
    _root[0] = None
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
        c = login("survivor", pwd_of("survivor"), source="pyrs", mech=mech)
        eq(c.pyrs.c.count_documents({}), 1, "reads after the restart (%s)" % mech)
    expect_login_fails("survivor", "wrong", source="pyrs", what="a wrong password after the restart")
    expect_code(13, lambda: client().admin.command("createUser", "sneaky", pwd="x", roles=["root"]),
                "no localhost exception after the restart")


def main():
    global SERVER
    passed = failed = 0
    SERVER = Server(args=["--auth"])
    try:
        SERVER.start()
    except Exception as e:  # noqa: BLE001 - report any start-up failure
        print("FAIL start-up of mayflyd --auth: %s" % e)
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
    for c in CLIENTS:
        c.close()
    return SERVER.finish(passed, failed)


if __name__ == "__main__":
    sys.exit(main())
