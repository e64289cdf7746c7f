"""The cluster's security settings on a real node (issue 17, items 1-2): client-certificate authentication
(`/settings/clientCertAuth`) through the official Python SDK's CertificateAuthenticator and curl, PLAIN refused on
the plain KV port (`allowPlainAuthWithoutTls`), SCRAM variants turned off, `tlsMinVersion`, and the password policy
(`/settings/passwordPolicy`). Client certificates
are made with the openssl command and signed by the node's own CA, as an operator would sign them.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import struct
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.auth import CertificateAuthenticator, PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import CouchbaseException
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

import kv_raw
from settee_server import BUCKET, PASSWORD, USERNAME, SetteeServer, new_tls_server

CERT_USER = "certuser"
STATUS_AUTH_ERROR = 0x20


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> SetteeServer:
    """A node with its TLS ports on and a user the certificates below map to."""
    srv = new_tls_server(Path(tmp_path_factory.mktemp("settee-client-cert")))
    srv.start()
    status, body = admin(srv, "PUT", f"/settings/rbac/users/local/{CERT_USER}",
                         {"password": "unused-password", "roles": f"bucket_full_access[{BUCKET}]"})
    assert status == 200, body
    yield srv
    admin(srv, "POST", "/settings/clientCertAuth", body=json.dumps({"state": "disable", "prefixes": []}))
    srv.stop()


@pytest.fixture(scope="module")
def certs(node, tmp_path_factory) -> dict[str, str]:
    """The node's CA, and client certificates signed by it: one whose subject CN is `app-certuser`, one whose only
    name is the email `certuser@example.com`, and one naming nobody."""
    out = Path(tmp_path_factory.mktemp("client-certs"))
    ca_dir = node.data_dir / "certs"
    paths = {"ca": str(ca_dir / "ca.pem")}
    for name, subject, san in [("cn", f"/CN=app-{CERT_USER}", None),
                               ("email", "/CN=ignored", f"email:{CERT_USER}@example.com"),
                               ("nobody", "/CN=app-stranger", None)]:
        key, csr, cert, ext = (out / f"{name}.{s}" for s in ("key", "csr", "pem", "ext"))
        ext.write_text("extendedKeyUsage=clientAuth\n" + (f"subjectAltName={san}\n" if san else ""))
        run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-subj", subject, "-out", str(csr)])
        run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_dir / "ca.pem"), "-CAkey",
             str(ca_dir / "ca-key.pem"), "-CAcreateserial", "-CAserial", str(out / "ca.srl"), "-days", "2",
             "-extfile", str(ext), "-out", str(cert)])
        paths[name], paths[f"{name}_key"] = str(cert), str(key)
    return paths


def run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (argv, done.stderr)


def admin(node: SetteeServer, method: str, path: str, form: dict | None = None, body: str | None = None):
    """One management call as the administrator on the plain port: (status, body text)."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    data = body.encode() if body is not None else (urllib.parse.urlencode(form).encode() if form else None)
    request = urllib.request.Request(node.mgmt_url + path, data=data, method=method,
                                     headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def client_cert_auth(node: SetteeServer, state: str, prefixes: list[dict]) -> int:
    status, body = admin(node, "POST", "/settings/clientCertAuth",
                         body=json.dumps({"state": state, "prefixes": prefixes}))
    assert status in (200, 202), body
    return status


CN_RULE = {"path": "subject.cn", "prefix": "app-", "delimiter": ""}
EMAIL_RULE = {"path": "san.email", "prefix": "", "delimiter": "@"}


def curl_whoami(node: SetteeServer, certs: dict, cert: str | None, basic: bool = False) -> tuple[int, str]:
    """GET /whoami on the management TLS port with client certificate `cert` (a key of `certs`), or none."""
    argv = ["curl", "-sS", "--cacert", certs["ca"], "-w", "\n%{http_code}"]
    if cert is not None:
        argv += ["--cert", certs[cert], "--key", certs[f"{cert}_key"]]
    if basic:
        argv += ["-u", f"{USERNAME}:{PASSWORD}"]
    done = subprocess.run(argv + [f"https://{node.host}:{node.mgmt_tls_port}/whoami"], capture_output=True,
                          text=True, timeout=30)
    if done.returncode != 0:
        return -done.returncode, done.stderr
    body, _, code = done.stdout.rpartition("\n")
    return int(code), body


def test_settings_endpoints_validate_and_round_trip(node):
    """Proves the two settings endpoints answer as ns_server's: the defaults, 400 with the reasons for a bad body,
    202 for a change and 200 for the same settings again, and node-to-node encryption refused honestly."""
    status, body = admin(node, "GET", "/settings/clientCertAuth")
    assert (status, json.loads(body)) == (200, {"state": "disable", "prefixes": []})
    status, body = admin(node, "POST", "/settings/clientCertAuth", body=json.dumps({"state": "enable", "prefixes": []}))
    assert status == 400 and "cannot be empty" in body
    assert client_cert_auth(node, "enable", [CN_RULE]) == 202
    assert client_cert_auth(node, "enable", [CN_RULE]) == 200
    status, body = admin(node, "GET", "/settings/clientCertAuth")
    assert json.loads(body) == {"state": "enable", "prefixes": [CN_RULE]}
    assert client_cert_auth(node, "disable", []) == 202

    status, body = admin(node, "GET", "/settings/security")
    settings = json.loads(body)
    # As ns_server, the level shows only once node encryption is on everywhere (test_node_encryption.py).
    assert settings["tlsMinVersion"] == "tlsv1.2" and "clusterEncryptionLevel" not in settings
    status, body = admin(node, "POST", "/settings/security", {"clusterEncryptionLevel": "all"})
    assert status == 400 and "cluster encryption is disabled" in json.loads(body)["errors"]["clusterEncryptionLevel"]
    status, body = admin(node, "POST", "/settings/security", {"tlsMinVersion": "tlsv1.1"})
    assert status == 400 and "tlsMinVersion" in json.loads(body)["errors"]


def test_the_sdk_authenticates_with_a_client_certificate(node, certs):
    """Proves the official SDK's CertificateAuthenticator works end to end: no password is sent, the certificate's
    CN (prefix removed) names the user, and KV over kvSSL and a query over n1qlSSL run as that user."""
    client_cert_auth(node, "enable", [CN_RULE])
    timeouts = ClusterTimeoutOptions(kv_timeout=timedelta(seconds=10), connect_timeout=timedelta(seconds=10),
                                     query_timeout=timedelta(seconds=20))
    authenticator = CertificateAuthenticator(cert_path=certs["cn"], key_path=certs["cn_key"],
                                             trust_store_path=certs["ca"])
    cluster = Cluster(f"couchbases://{node.host}:{node.kv_tls_port}",
                      ClusterOptions(authenticator, timeout_options=timeouts))
    try:
        cluster.wait_until_ready(timedelta(seconds=20))
        collection = cluster.bucket(BUCKET).default_collection()
        collection.upsert("by-cert", {"authenticated": "by certificate"})
        assert collection.get("by-cert").content_as[dict] == {"authenticated": "by certificate"}
        assert list(cluster.query("SELECT 1 AS one").rows()) == [{"one": 1}]
    finally:
        cluster.close()


def test_rest_maps_certificates_by_rule_and_refuses_unmapped_ones(node, certs):
    """Proves the management TLS port authenticates by certificate: each rule maps its field to the user, a
    certificate naming no user is refused even with good Basic credentials (ns_server's rule), no certificate
    falls back to Basic, and `disable` ignores certificates again."""
    client_cert_auth(node, "enable", [CN_RULE, EMAIL_RULE])
    for cert in ("cn", "email"):
        status, body = curl_whoami(node, certs, cert)
        assert status == 200, body
        assert json.loads(body)["id"] == CERT_USER
    assert curl_whoami(node, certs, "nobody", basic=True)[0] == 401
    status, body = curl_whoami(node, certs, None, basic=True)
    assert status == 200 and json.loads(body)["id"] == USERNAME
    client_cert_auth(node, "disable", [])
    assert curl_whoami(node, certs, "cn")[0] == 401, "a disabled setting reads no certificate"


def test_mandatory_refuses_tls_handshakes_without_a_certificate(node, certs):
    """Proves `mandatory`: a TLS connection without a certificate fails its handshake (curl and the KV TLS port),
    one with a certificate is served, and the plain ports keep working with passwords."""
    client_cert_auth(node, "mandatory", [CN_RULE])
    try:
        status, _ = curl_whoami(node, certs, None, basic=True)
        assert status < 0, "curl fails at the handshake"
        assert curl_whoami(node, certs, "cn")[0] == 200
        context = ssl.create_default_context(cafile=certs["ca"])
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with socket.create_connection((node.host, node.kv_tls_port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname=node.host) as tls:
                    # TLS 1.3 reports a refused certificate at the first read.
                    tls.sendall(struct.pack(">BBHBBHIIQ", 0x80, 0x20, 0, 0, 0, 0, 0, 0, 0))
                    if not tls.recv(24):
                        raise ConnectionError("closed")
        assert admin(node, "GET", "/whoami")[0] == 200
    finally:
        client_cert_auth(node, "disable", [])


def sasl_plain(sock) -> int:
    return kv_raw.call(sock, 0x21, b"PLAIN", f"\0{USERNAME}\0{PASSWORD}".encode())[0]


def test_plain_can_be_refused_without_tls_and_scram_variants_turned_off(node, certs):
    """Proves `allowPlainAuthWithoutTls=false`: the plain KV port stops listing and accepting PLAIN while the TLS
    port keeps both, and the SDK (SCRAM) still connects on the plain port; `scramSha1Enabled=false` removes
    SCRAM-SHA1 from the list."""
    status, body = admin(node, "POST", "/settings/security",
                         {"allowPlainAuthWithoutTls": "false", "scramSha1Enabled": "false"})
    assert status == 200, body
    try:
        with socket.create_connection((node.host, node.kv_port), timeout=5) as sock:
            assert kv_raw.call(sock, 0x20)[2] == b"SCRAM-SHA512 SCRAM-SHA256"
            assert sasl_plain(sock) == STATUS_AUTH_ERROR
        context = ssl.create_default_context(cafile=certs["ca"])
        with socket.create_connection((node.host, node.kv_tls_port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname=node.host) as tls:
                assert kv_raw.call(tls, 0x20)[2] == b"SCRAM-SHA512 SCRAM-SHA256 PLAIN"
                assert sasl_plain(tls) == 0
        cluster = Cluster(f"couchbase://{node.host}:{node.kv_port}",
                          ClusterOptions(PasswordAuthenticator(USERNAME, PASSWORD)))
        try:
            cluster.wait_until_ready(timedelta(seconds=20))
            cluster.bucket(BUCKET).default_collection().upsert("scram-only", {"ok": True})
        finally:
            cluster.close()
    finally:
        assert admin(node, "POST", "/settings/security",
                     {"allowPlainAuthWithoutTls": "true", "scramSha1Enabled": "true"})[0] == 200
    with socket.create_connection((node.host, node.kv_port), timeout=5) as sock:
        assert sasl_plain(sock) == 0


def test_tls_min_version_refuses_older_handshakes(node, certs):
    """Proves `tlsMinVersion=tlsv1.3`: a client limited to TLS 1.2 fails its handshake on the management TLS port,
    a TLS 1.3 client is served, and going back to tlsv1.2 admits the older client again."""

    def handshake(max_version: ssl.TLSVersion) -> bool:
        context = ssl.create_default_context(cafile=certs["ca"])
        context.maximum_version = max_version
        try:
            with socket.create_connection((node.host, node.mgmt_tls_port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname=node.host):
                    return True
        except ssl.SSLError:
            return False

    assert handshake(ssl.TLSVersion.TLSv1_2)
    assert admin(node, "POST", "/settings/security", {"tlsMinVersion": "tlsv1.3"})[0] == 200
    try:
        assert not handshake(ssl.TLSVersion.TLSv1_2)
        assert handshake(ssl.TLSVersion.TLSv1_3)
    finally:
        assert admin(node, "POST", "/settings/security", {"tlsMinVersion": "tlsv1.2"})[0] == 200
    assert handshake(ssl.TLSVersion.TLSv1_2)


def test_a_certificate_on_the_kv_port_that_maps_to_nobody_is_refused(node, certs):
    """Proves the KV TLS port closes a connection whose certificate names no user (kv_engine's rule), so the SDK
    cannot bootstrap with it."""
    client_cert_auth(node, "enable", [CN_RULE])
    try:
        authenticator = CertificateAuthenticator(cert_path=certs["nobody"], key_path=certs["nobody_key"],
                                                 trust_store_path=certs["ca"])
        timeouts = ClusterTimeoutOptions(kv_timeout=timedelta(seconds=3), connect_timeout=timedelta(seconds=3),
                                         bootstrap_timeout=timedelta(seconds=3))
        with pytest.raises(CouchbaseException):
            cluster = Cluster(f"couchbases://{node.host}:{node.kv_tls_port}",
                              ClusterOptions(authenticator, timeout_options=timeouts))
            try:
                cluster.bucket(BUCKET).default_collection().upsert("never", {"written": False})
            finally:
                cluster.close()
    finally:
        client_cert_auth(node, "disable", [])


def test_the_password_policy_applies_to_passwords_set_after_it(node):
    """Proves `/settings/passwordPolicy`: ns_server's defaults, a stricter policy refusing a user's weak password
    with ns_server's message while an existing password keeps working, and the defaults restored."""
    status, body = admin(node, "GET", "/settings/passwordPolicy")
    assert (status, json.loads(body)) == (200, {"minLength": 6, "enforceUppercase": False, "enforceLowercase": False,
                                                "enforceDigits": False, "enforceSpecialChars": False})
    strict = {"minLength": "10", "enforceUppercase": "true", "enforceDigits": "true", "enforceSpecialChars": "true"}
    assert admin(node, "POST", "/settings/passwordPolicy", strict)[0] == 200
    try:
        status, body = admin(node, "PUT", "/settings/rbac/users/local/weak", {"password": "password1", "roles": ""})
        assert status == 400 and "at least 10 characters" in json.loads(body)["errors"]["password"]
        status, body = admin(node, "PUT", "/settings/rbac/users/local/weak", {"password": "Password123", "roles": ""})
        assert status == 400 and "following characters" in json.loads(body)["errors"]["password"]
        status, body = admin(node, "PUT", "/settings/rbac/users/local/strong", {"password": "Pass-word123", "roles": ""})
        assert status == 200, body
        with socket.create_connection((node.host, node.kv_port), timeout=5) as sock:
            assert sasl_plain(sock) == 0, "a password set before the policy still authenticates"
        status, body = admin(node, "POST", "/settings/passwordPolicy", {"minLength": "101"})
        assert status == 400 and "minLength" in json.loads(body)["errors"]
    finally:
        admin(node, "DELETE", "/settings/rbac/users/local/strong")
        assert admin(node, "POST", "/settings/passwordPolicy", {"minLength": "6"})[0] == 200
