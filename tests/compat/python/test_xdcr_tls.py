"""XDCR to a remote reference that demands encryption, between settee nodes with their TLS ports on: full
encryption trusting only the remote's CA, half encryption (SCRAM on the plain KV ports, documents in clear), and a
client certificate instead of a password. Each checks the transport on the target's per-port KV connection counts,
so a replication that used the other port fails."""

from __future__ import annotations

import subprocess
from datetime import timedelta

from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer, new_tls_server
from test_backup import snapshot
from test_cluster import rest, rest_json
from test_xdcr import caught_up, task


def kv_connections_accepted(node: SetteeServer) -> dict:
    """The node's `settee_kv_connections_accepted_total` by transport."""
    status, text = rest(node, "GET", "/metrics")
    assert status == 200
    found = {}
    for line in text.splitlines():
        if line.startswith("settee_kv_connections_accepted_total{"):
            found[line.split('transport="', 1)[1].split('"', 1)[0]] = float(line.rsplit(" ", 1)[1])
    assert set(found) == {"plain", "tls"}, found
    return found


def replicate_and_count(a: SetteeServer, b: SetteeServer, prefix: str) -> tuple[dict, dict]:
    """Replicates `a`'s default bucket to its remote `to-b` (node `b`), writes 20 documents `{prefix}-N` on `a`,
    waits until the replication wrote them without an error, checks that `b` holds the same versions, and returns
    `b`'s KV connection counts by transport from before the replication and from once it wrote them (read before
    this function's own SDK connects to `b`)."""
    before = kv_connections_accepted(b)
    status, body = rest(a, "POST", "/controller/createReplication",
                        {"fromBucket": "default", "toCluster": "to-b", "toBucket": "default",
                         "replicationType": "continuous"})
    assert status == 200, body
    rid = body["id"]
    ca = connect(a)
    try:
        ca.wait_until_ready(timedelta(seconds=20))
        ka = ca.bucket("default").default_collection()
        for i in range(20):
            ka.upsert(f"{prefix}-{i}", {"i": i})
        caught_up(a, rid, written_at_least=20)
        assert not task(a, rid)["errors"], task(a, rid)
        after = kv_connections_accepted(b)
        cb = connect(b)
        try:
            cb.wait_until_ready(timedelta(seconds=20))
            keys = [f"{prefix}-{i}" for i in range(20)]
            assert snapshot(ka, keys) == snapshot(cb.bucket("default").default_collection(), keys)
        finally:
            cb.close()
    finally:
        ca.close()
    return before, after


def test_full_encryption_to_the_remote_trusts_only_the_given_ca(tmp_path):
    """Issue 19: `demandEncryption=1` with the remote's CA as `certificate` (`encryptionType` full by default, as
    goxdcr): the reference is validated over the remote's TLS management port (found through its
    `/nodes/self/xdcrSSLPorts`), a CA that did not sign the remote's certificate is refused when the reference is
    made with goxdcr's "Invalid remote cluster", a missing certificate names its field, and the replication's
    bootstrap and writes go to the target's TLS KV port (`kvSSL`): the target counts them there, and none on its
    plain port."""
    a = new_tls_server(tmp_path / "a").start()
    b = new_tls_server(tmp_path / "b").start()
    try:
        status, ca_b = rest(b, "GET", "/pools/default/certificate")
        assert status == 200 and ca_b.startswith("-----BEGIN CERTIFICATE-----"), ca_b
        status, ca_a = rest(a, "GET", "/pools/default/certificate")
        assert status == 200 and ca_a != ca_b, "each node generated its own CA"
        form = {"name": "to-b", "hostname": b.mgmt_addr, "username": USERNAME, "password": PASSWORD,
                "demandEncryption": "1"}
        status, body = rest(a, "POST", "/pools/default/remoteClusters", form)
        assert status == 400 and "certificate must be given" in body["errors"]["certificate"], body
        status, body = rest(a, "POST", "/pools/default/remoteClusters", form | {"certificate": ca_a})
        assert status == 400 and body["errors"]["_"].startswith("Invalid remote cluster."), body
        status, body = rest(a, "POST", "/pools/default/remoteClusters", form | {"encryptionType": "quarter",
                                                                             "certificate": ca_b})
        assert status == 400 and "encryptionType" in body["errors"], body
        status, body = rest(a, "POST", "/pools/default/remoteClusters", form | {"certificate": ca_b})
        assert status == 200, body
        assert body["demandEncryption"] is True and body["secureType"] == "full", body
        status, remotes = rest(a, "GET", "/pools/default/remoteClusters")
        assert remotes[0]["encryptionType"] == "full" and remotes[0]["certificate"].strip() == ca_b.strip()

        before, after = replicate_and_count(a, b, "tls")
        # The target saw the replication's KV connections (bootstrap and writer) on its TLS port only: a
        # replication that fell back to the plain port would show there.
        assert after["plain"] == before["plain"] and after["tls"] >= before["tls"] + 2, (before, after)
    finally:
        a.stop()
        b.stop()


def test_half_encryption_protects_the_password_and_sends_the_documents_in_clear(tmp_path):
    """Issue 19: goxdcr's half encryption (`encryptionType=half`, or `secureType=half`): the management calls go
    over HTTPS trusting the given CA (goxdcr's fallback when the remote's REST does not take SCRAM-SHA, as
    settee's does not; without a CA it fails with goxdcr's words), and the KV connections go to the target's plain
    port with SCRAM-SHA512, so they work on a target that refuses PLAIN without TLS
    (`allowPlainAuthWithoutTls=false`): the target counts them on its plain port, none on its TLS one."""
    a = new_tls_server(tmp_path / "a").start()
    b = new_tls_server(tmp_path / "b").start()
    try:
        status, ca_b = rest(b, "GET", "/pools/default/certificate")
        assert status == 200, ca_b
        status, body = rest(b, "POST", "/settings/security", {"allowPlainAuthWithoutTls": "false"})
        assert status == 200, body
        form = {"name": "to-b", "hostname": b.mgmt_addr, "username": USERNAME, "password": PASSWORD,
                "demandEncryption": "1", "encryptionType": "half"}
        status, body = rest(a, "POST", "/pools/default/remoteClusters", form)
        assert status == 400 and 'using "half" secure mode' in body["errors"]["_"], body
        status, body = rest(a, "POST", "/pools/default/remoteClusters", form | {"certificate": ca_b})
        assert status == 200, body
        assert body["secureType"] == "half" and body["encryptionType"] == "half" and body["demandEncryption"], body
        before, after = replicate_and_count(a, b, "half")
        assert after["tls"] == before["tls"] and after["plain"] >= before["plain"] + 2, (before, after)
    finally:
        a.stop()
        b.stop()


def client_certificate(node: SetteeServer, out, cn: str) -> tuple[str, str]:
    """A client certificate for `cn` signed by `node`'s CA (as an operator signs one with openssl): (cert, key)
    PEM."""
    ca_dir = node.data_dir / "certs"
    key, csr, cert, ext = (out / f"client.{s}" for s in ("key", "csr", "pem", "ext"))
    ext.write_text("extendedKeyUsage=clientAuth\n")
    for argv in (["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", str(key), "-subj", f"/CN={cn}", "-out", str(csr)],
                 ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_dir / "ca.pem"), "-CAkey",
                  str(ca_dir / "ca-key.pem"), "-CAcreateserial", "-CAserial", str(out / "ca.srl"), "-days", "2",
                  "-extfile", str(ext), "-out", str(cert)]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (argv, done.stderr)
    return cert.read_text(), key.read_text()


def test_full_encryption_with_a_client_certificate_instead_of_a_password(tmp_path):
    """Issue 19: a reference with `clientCertificate` and `clientKey` instead of a username and password (full
    encryption only, as goxdcr): the source presents the certificate on its HTTPS management calls and its TLS KV
    connections, and the target maps it to a user (`/settings/clientCertAuth`) who has no password the source
    knows; goxdcr's rules on the credentials are checked with its words."""
    a = new_tls_server(tmp_path / "a").start()
    b = new_tls_server(tmp_path / "b").start()
    try:
        status, ca_b = rest(b, "GET", "/pools/default/certificate")
        assert status == 200, ca_b
        status, body = rest(b, "PUT", "/settings/rbac/users/local/xdcr-cert",
                            {"password": "never-given-to-a", "roles": "replication_target[default]"})
        assert status == 200, body
        rule = {"path": "subject.cn", "prefix": "app-", "delimiter": ""}
        status, body = rest_json(b, "/settings/clientCertAuth", {"state": "enable", "prefixes": [rule]})
        assert status in (200, 202), body
        cert, key = client_certificate(b, tmp_path, "app-xdcr-cert")
        base = {"name": "to-b", "hostname": b.mgmt_addr, "demandEncryption": "1", "certificate": ca_b}
        for extra, field, words in (
                ({}, "_", "either username or client certificate"),
                ({"clientCertificate": cert, "clientKey": key, "username": USERNAME, "password": PASSWORD}, "_",
                 "cannot both be given"),
                ({"clientCertificate": cert}, "clientKey", "client key must be given"),
                ({"clientCertificate": cert, "clientKey": key, "password": "x"}, "password", "cannot be given"),
                ({"clientCertificate": cert, "clientKey": key, "encryptionType": "half", "username": USERNAME,
                  "password": PASSWORD}, "clientCertificate", "not full"),
                ({"clientCertificate": cert, "clientKey": ca_b}, "InvalidClientCertKeyPair", "failed to parse")):
            status, body = rest(a, "POST", "/pools/default/remoteClusters", base | extra)
            assert status == 400 and words in body["errors"].get(field, ""), (extra.keys(), body)
        status, body = rest(a, "POST", "/pools/default/remoteClusters",
                            base | {"clientCertificate": cert, "clientKey": key})
        assert status == 200, body
        assert body["username"] == "" and body["clientCertificate"].strip() == cert.strip(), body
        assert "clientKey" not in body, "the key is never shown"

        before, after = replicate_and_count(a, b, "cert")
        assert after["plain"] == before["plain"] and after["tls"] >= before["tls"] + 2, (before, after)
    finally:
        a.stop()
        b.stop()
