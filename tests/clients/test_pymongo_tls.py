#!/usr/bin/python3
"""PyMongo (Debian's python3-pymongo 3.11) TLS tests for mayflyd.

Makes its certificates with the openssl command-line tool in a temporary
directory (a CA; a server certificate for CN=localhost with subjectAltName
DNS:localhost, IP:127.0.0.1; a client certificate CN=client from the CA; a
second, untrusted CA with its own client certificate CN=intruder), then starts
one mayflyd (binary from $MAYFLYD, default build-asan/mayflyd relative to the
repository root) per scenario on a free port with a temporary --dbpath:

  - --tlsMode requireTLS: MongoClient(tls=True, tlsCAFile=...) does CRUD and a
    5 MB document; a plain client and a client trusting another CA are refused
    (the latter "certificate verify failed"); tlsAllowInvalidCertificates=True
    connects;
  - --tlsCAFile (client certificates required): none refused, the CA's
    (tlsCertificateKeyFile) served and logged with its subject, another CA's
    refused;
  - --tlsAllowConnectionsWithoutCertificates: none served, another CA's still
    refused;
  - --auth over requireTLS: the first user through the localhost exception,
    then SCRAM (authSource=admin) over TLS; a wrong password 18.

Each server must exit 0 on SIGTERM. Prints a final line "N passed, M failed"
and exits non-zero if anything failed. Run with /usr/bin/python3.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from pymongo import MongoClient
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

from mayfly_server import Server

FAIL_FAST_MS = 1500  # serverSelectionTimeoutMS for clients that must be refused


# ------------------------------------------------------------ certificates

CERTS = {}


def _openssl(cwd, *args):
    try:
        subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise RuntimeError("the openssl command-line tool is not installed; these tests make their certificates "
                           "with it (bash scripts/deps.sh installs it, or apt-get install openssl)")
    except subprocess.CalledProcessError as e:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), e.stderr.decode("utf-8", "replace")))


def make_certs():
    d = tempfile.mkdtemp(prefix="mayfly-pytls-certs-")
    CERTS["dir"] = d  # removed at the end even if a step below fails
    for ca, cn in (("ca", "mayfly-test-ca"), ("otherca", "mayfly-untrusted-ca")):
        _openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca + ".key", "-out", ca + ".pem",
                 "-days", "2", "-subj", "/CN=" + cn)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, cn, ca, ext, out in (("srv", "localhost", "ca", "server.ext", "server.pem"),
                                   ("cli", "client", "ca", None, "client.pem"),
                                   ("intruder", "intruder", "otherca", None, "intruder.pem")):
        _openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
                 "-subj", "/CN=" + cn)
        _openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                 "-CAcreateserial", "-out", name + ".crt", "-days", "2", *(["-extfile", ext] if ext else []))
        with open(os.path.join(d, out), "w") as f:
            for part in (name + ".crt", name + ".key"):
                with open(os.path.join(d, part)) as p:
                    f.write(p.read())
    CERTS.update(dir=d, ca=os.path.join(d, "ca.pem"), other_ca=os.path.join(d, "otherca.pem"),
                 server=os.path.join(d, "server.pem"), client=os.path.join(d, "client.pem"),
                 intruder=os.path.join(d, "intruder.pem"))


# ------------------------------------------------------------ helpers

SERVER = None
CLIENTS = []
_counter = [0]


def fresh_name(tag):
    _counter[0] += 1
    return "pytls_%d_%s" % (_counter[0], tag)


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: expected %r, got %r" % (what, b, a))


def client(**kw):
    opts = dict(serverSelectionTimeoutMS=5000, directConnection=True)
    opts.update(kw)
    c = MongoClient("127.0.0.1", SERVER.port, **opts)
    CLIENTS.append(c)
    return c


def tls_client(**kw):
    return client(tls=True, tlsCAFile=CERTS["ca"], **kw)


def connects(what, c):
    try:
        eq(c.admin.command("ping")["ok"], 1.0, what + ": ping")
    except Exception as e:
        raise AssertionError("%s should connect: %s: %s" % (what, type(e).__name__, e))
    return c


def refused(what, msg_re=None, **kw):
    """A client with these options must fail server selection; returns the error text."""
    kw.setdefault("serverSelectionTimeoutMS", FAIL_FAST_MS)
    c = client(**kw)
    try:
        c.admin.command("ping")
    except ServerSelectionTimeoutError as e:
        if msg_re and not re.search(msg_re, str(e), re.I):
            raise AssertionError("%s: refused, but the reason %r does not match %r" % (what, str(e), msg_re))
        return str(e)
    finally:
        c.close()
    raise AssertionError("%s should be refused, but it connected and ran ping" % what)


def log_mark():
    return len(SERVER.stderr_lines)


def wait_log(pattern, since=0, timeout=5):
    deadline = time.time() + timeout
    rx = re.compile(pattern)
    while True:
        for line in SERVER.stderr_lines[since:]:
            if rx.search(line):
                return line
        if time.time() > deadline:
            raise AssertionError("no server log line matching %r within %s s" % (pattern, timeout))
        time.sleep(0.05)


def crud(c, tag):
    coll = c[fresh_name(tag)].c
    coll.insert_many([{"_id": i, "v": i * 2} for i in range(40)])
    eq(coll.find_one({"_id": 5}), {"_id": 5, "v": 10}, "find_one")
    eq([d["_id"] for d in coll.find({"v": {"$gte": 70}}).sort("_id", -1)], [39, 38, 37, 36, 35], "find sort")
    eq(coll.update_many({"v": {"$lt": 10}}, {"$inc": {"v": 1000}}).modified_count, 5, "update_many")
    eq(coll.delete_many({"v": {"$gte": 1000}}).deleted_count, 5, "delete_many")
    eq(coll.count_documents({}), 35, "count")
    return coll


# ------------------------------------------------------------ scenarios

REQUIRE = []
CLIENT_CERTS = []
NO_CERT_OK = []
AUTH = []


def scenario(lst):
    def deco(fn):
        lst.append(fn)
        return fn
    return deco


@scenario(REQUIRE)
def test_require_tls_crud_with_ca_file():
    mark = log_mark()
    c = connects("a TLS client trusting the CA", tls_client())
    crud(c, "req")
    wait_log(r"TLS connection from 127\.0\.0\.1:\d+ \(TLSv1\.[23] .*no client certificate\)", mark)


@scenario(REQUIRE)
def test_require_tls_uri_options():
    c = MongoClient("mongodb://127.0.0.1:%d/?tls=true&tlsCAFile=%s&serverSelectionTimeoutMS=5000&directConnection=true"
                    % (SERVER.port, CERTS["ca"]))
    CLIENTS.append(c)
    eq(c.admin.command("ismaster")["ismaster"], True, "ismaster over TLS")


@scenario(REQUIRE)
def test_require_tls_refuses_plain_client():
    mark = log_mark()
    refused("a plain client")
    wait_log(r"a connection without TLS, but --tlsMode is requireTLS", mark)


@scenario(REQUIRE)
def test_require_tls_refuses_client_trusting_another_ca():
    refused("a TLS client trusting another CA", r"certificate verify failed", tls=True, tlsCAFile=CERTS["other_ca"])


@scenario(REQUIRE)
def test_require_tls_allow_invalid_certificates_connects():
    c = connects("tlsAllowInvalidCertificates=True", client(tls=True, tlsAllowInvalidCertificates=True))
    coll = c[fresh_name("inv")].c
    coll.insert_one({"_id": 1})
    eq(coll.count_documents({}), 1, "count")


@scenario(REQUIRE)
def test_require_tls_five_megabyte_document():
    coll = tls_client()[fresh_name("big")].c
    blob = os.urandom(5 * 1024 * 1024)
    coll.insert_one({"_id": "big", "blob": blob})
    eq(coll.find_one({"_id": "big"})["blob"] == blob, True, "the 5 MB binary comes back byte for byte")
    coll.insert_many([{"_id": i, "s": "x" * 1000} for i in range(2000)])
    eq(len(list(coll.find({"s": {"$exists": True}}, batch_size=300))), 2000, "2000 documents over getMores")


@scenario(CLIENT_CERTS)
def test_client_cert_required_without_one_refused():
    mark = log_mark()
    refused("a TLS client without a certificate", tls=True, tlsCAFile=CERTS["ca"])
    wait_log(r"TLS handshake failed: .*peer did not return a certificate", mark)


@scenario(CLIENT_CERTS)
def test_client_cert_from_the_ca_served():
    mark = log_mark()
    c = connects("a client with client.pem", tls_client(tlsCertificateKeyFile=CERTS["client"]))
    crud(c, "cert")
    wait_log(r"TLS connection from 127\.0\.0\.1:\d+ \(TLSv1\.[23] [^,]*, /CN=client\)", mark)


@scenario(CLIENT_CERTS)
def test_client_cert_from_another_ca_refused():
    mark = log_mark()
    refused("a client with intruder.pem (another CA)", tls=True, tlsCAFile=CERTS["ca"],
            tlsCertificateKeyFile=CERTS["intruder"])
    wait_log(r"TLS handshake failed: .*certificate verify failed", mark)


@scenario(CLIENT_CERTS)
def test_client_cert_required_plain_refused():
    refused("a plain client")


@scenario(NO_CERT_OK)
def test_allow_without_certificates_serves_a_client_without_one():
    c = connects("a TLS client without a certificate", tls_client())
    crud(c, "nocert")
    c2 = connects("a client with client.pem", tls_client(tlsCertificateKeyFile=CERTS["client"]))
    crud(c2, "withcert")


@scenario(NO_CERT_OK)
def test_allow_without_certificates_still_refuses_another_ca():
    refused("a client with intruder.pem (another CA)", tls=True, tlsCAFile=CERTS["ca"],
            tlsCertificateKeyFile=CERTS["intruder"])


ROOT_USER = "pytlsroot"
ROOT_PWD = "py-Tls-r00t!"


@scenario(AUTH)
def test_auth_localhost_exception_over_tls():
    anon = tls_client()
    try:
        anon.x.c.find_one()
        raise AssertionError("an unauthenticated find was allowed")
    except OperationFailure as e:
        eq(e.code, 13, "unauthenticated find")
    anon.admin.command("createUser", ROOT_USER, pwd=ROOT_PWD, roles=["root"])


@scenario(AUTH)
def test_auth_scram_over_tls():
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1", None):
        kw = dict(username=ROOT_USER, password=ROOT_PWD, authSource="admin")
        if mech:
            kw["authMechanism"] = mech
        c = tls_client(**kw)
        st = c.admin.command("connectionStatus")
        eq(st["authInfo"]["authenticatedUsers"], [{"user": ROOT_USER, "db": "admin"}], "users (%s)" % mech)
        crud(c, "auth")
        c.close()


@scenario(AUTH)
def test_auth_wrong_password_over_tls():
    c = tls_client(username=ROOT_USER, password="wrong-password", authSource="admin")
    try:
        c.admin.command("ping")
        raise AssertionError("a wrong password logged in")
    except OperationFailure as e:
        eq(e.code, 18, "AuthenticationFailed")


SCENARIOS = [
    ("requireTLS", lambda: ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", CERTS["server"]], REQUIRE),
    ("--tlsCAFile (client certificates required)",
     lambda: ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", CERTS["server"], "--tlsCAFile", CERTS["ca"]],
     CLIENT_CERTS),
    ("--tlsCAFile --tlsAllowConnectionsWithoutCertificates",
     lambda: ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", CERTS["server"], "--tlsCAFile", CERTS["ca"],
              "--tlsAllowConnectionsWithoutCertificates"], NO_CERT_OK),
    ("--auth with requireTLS",
     lambda: ["--auth", "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", CERTS["server"]], AUTH),
]


def main():
    global SERVER
    passed = failed = 0
    try:
        make_certs()
    except Exception as e:  # noqa: BLE001 - report why nothing ran
        print("FAIL certificates: %s" % e)
        shutil.rmtree(CERTS.get("dir", "/nonexistent-mayfly"), ignore_errors=True)
        print("0 passed, %d failed" % sum(len(s[2]) for s in SCENARIOS))
        return 1
    try:
        for name, args, tests in SCENARIOS:
            print("== %s" % name)
            SERVER = Server(args=args())
            try:
                SERVER.start()
            except Exception as e:  # noqa: BLE001 - report any start-up failure
                print("FAIL start-up (%s): %s" % (name, e))
                failed += len(tests)
                SERVER.cleanup()
                continue
            for fn in tests:
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
            del CLIENTS[:]
            rc = SERVER.stop()
            if rc not in (0, -signal.SIGTERM):
                failed += 1
                print("FAIL server shutdown (%s): exit status %r\n%s" % (name, rc, SERVER.tail(40)))
            SERVER.cleanup()
    finally:
        shutil.rmtree(CERTS.get("dir", "/nonexistent-mayfly"), ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
