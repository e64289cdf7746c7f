"""Bucket and user management through the SDK's managers (REST on the mgmt port), and role enforcement on KV."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from couchbase.exceptions import (AuthenticationException, BucketAlreadyExistsException, CouchbaseException,
                                  BucketDoesNotExistException, BucketNotFlushableException, DocumentNotFoundException,
                                  UserNotFoundException)
from couchbase.management.buckets import BucketSettings, BucketType, CreateBucketSettings
from couchbase.management.users import Group, Role, User
from couchbase.options import GetOptions, UpsertOptions

from conditions import wait_until
from settee_server import suite_bucket_type
from sdk_connect import connect

READY_SECONDS = 30.0
SHORT = timedelta(seconds=2)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def open_ready(cluster, name):
    """Open bucket `name` and wait until a KV write to it succeeds."""
    b = cluster.bucket(name)
    c = b.default_collection()

    def writable():
        c.upsert("__probe", {"ok": True}, UpsertOptions(timeout=SHORT))
        return True

    wait_until(writable, READY_SECONDS, f"bucket {name} to accept writes")
    return b


@pytest.fixture(scope="module")
def buckets(cluster):
    return cluster.buckets()


@pytest.fixture(scope="module")
def users(cluster):
    return cluster.users()


# --- bucket manager ---------------------------------------------------------------------------------------------


def test_get_default_bucket_settings(buckets):
    """get_bucket on the server's own bucket reports its name, type (ephemeral), RAM quota and replica count."""
    s = buckets.get_bucket("default")
    assert s.name == "default"
    expected = BucketType.EPHEMERAL if suite_bucket_type() == "ephemeral" else BucketType.COUCHBASE
    assert s.bucket_type == expected
    assert s.ram_quota_mb == 256
    assert s.num_replicas == 0


def test_bucket_lifecycle_create_get_update_flush_drop(cluster, buckets):
    """An ephemeral bucket created via the manager is listed, readable, updatable, flushable and droppable."""
    name = unique("eph")
    buckets.create_bucket(CreateBucketSettings(name=name, bucket_type=BucketType.EPHEMERAL, ram_quota_mb=100,
                                               num_replicas=0, flush_enabled=True))
    try:
        s = buckets.get_bucket(name)
        assert s.name == name
        assert s.bucket_type == BucketType.EPHEMERAL
        assert s.ram_quota_mb == 100
        assert s.flush_enabled is True

        assert {"default", name} <= {b.name for b in buckets.get_all_buckets()}

        buckets.update_bucket(BucketSettings(name=name, bucket_type=BucketType.EPHEMERAL, ram_quota_mb=128,
                                             num_replicas=0, flush_enabled=True))
        wait_until(lambda: buckets.get_bucket(name).ram_quota_mb == 128, READY_SECONDS, "the RAM quota update")

        c = open_ready(cluster, name).default_collection()
        for i in range(20):
            c.upsert(f"doc-{i}", {"i": i})
        assert c.get("doc-7").content_as[dict] == {"i": 7}

        buckets.flush_bucket(name)

        def flushed():
            try:
                c.get("doc-7", GetOptions(timeout=SHORT))
            except DocumentNotFoundException:
                return True
            return False

        wait_until(flushed, READY_SECONDS, "the flushed documents to disappear")
        for i in range(20):
            assert c.exists(f"doc-{i}").exists is False
    finally:
        buckets.drop_bucket(name)

    with pytest.raises(BucketDoesNotExistException):
        buckets.get_bucket(name)
    assert name not in {b.name for b in buckets.get_all_buckets()}


def test_create_existing_bucket_raises_already_exists(buckets):
    """Creating a bucket whose name is taken fails with BucketAlreadyExistsException."""
    with pytest.raises(BucketAlreadyExistsException):
        buckets.create_bucket(CreateBucketSettings(name="default", bucket_type=BucketType.EPHEMERAL,
                                                   ram_quota_mb=100))


def test_get_and_drop_missing_bucket_raise_does_not_exist(buckets):
    """get_bucket and drop_bucket of an unknown name fail with BucketDoesNotExistException."""
    missing = unique("missing")
    with pytest.raises(BucketDoesNotExistException):
        buckets.get_bucket(missing)
    with pytest.raises(BucketDoesNotExistException):
        buckets.drop_bucket(missing)


def test_flush_disabled_bucket_raises_not_flushable(buckets):
    """Flushing a bucket created without flush enabled fails with BucketNotFlushableException."""
    name = unique("noflush")
    buckets.create_bucket(CreateBucketSettings(name=name, bucket_type=BucketType.EPHEMERAL, ram_quota_mb=100,
                                               flush_enabled=False))
    try:
        with pytest.raises(BucketNotFlushableException):
            buckets.flush_bucket(name)
    finally:
        buckets.drop_bucket(name)


# --- user manager and role enforcement --------------------------------------------------------------------------


@pytest.fixture
def seeded(collection, key):
    collection.upsert(key, {"seeded": True})
    return key


def test_upsert_user_then_get_user(users):
    """A local user created with a bucket-scoped role is returned by get_user and get_all_users with that role."""
    name = unique("u")
    users.upsert_user(User(username=name, password="secret-pw", roles={Role(name="data_reader", bucket="default")}))
    try:
        meta = users.get_user(name)
        assert meta.user.username == name
        assert {(r.name, r.bucket) for r in meta.user.roles} == {("data_reader", "default")}
        assert name in {u.user.username for u in users.get_all_users()}
    finally:
        users.drop_user(name)
    with pytest.raises(UserNotFoundException):
        users.get_user(name)


# The C++ core's errc::management::user_not_found.
USER_NOT_FOUND_EC = 603


def test_drop_missing_user_raises_user_not_found(users):
    """Dropping a missing user gets 404 "User was not found." (ns_server's text), which the C++ core reports as
    user_not_found (ec 603); Python 4.6.3 only maps GET's "Unknown user." body to UserNotFoundException, so here it
    raises a plain CouchbaseException carrying that code."""
    with pytest.raises(CouchbaseException) as info:
        users.drop_user(unique("ghost"))
    assert info.value.error_code == USER_NOT_FOUND_EC, repr(info.value)


def test_get_missing_user_raises_user_not_found(users):
    """get_user of a missing user gets 404 "Unknown user." → UserNotFoundException."""
    with pytest.raises(UserNotFoundException):
        users.get_user(unique("ghost"))


def connect_as(server, name: str, password: str):
    """A cluster connection as `name`, once the new user's credentials work."""
    holder = []
    wait_until(lambda: holder.append(connect(server, username=name, password=password)) or True, READY_SECONDS,
               "the new user to be able to connect")
    return holder[0]


def test_data_reader_can_read_but_not_write(server, users, seeded):
    """A data_reader[default] user authenticates over KV, reads documents, and is refused writes (EACCESS →
    AuthenticationException)."""
    name = unique("reader")
    users.upsert_user(User(username=name, password="reader-pw", roles={Role(name="data_reader", bucket="default")}))
    c = None
    try:
        c = connect_as(server, name, "reader-pw")
        coll = c.bucket("default").default_collection()
        assert coll.get(seeded, GetOptions(timeout=timedelta(seconds=5))).content_as[dict] == {"seeded": True}
        with pytest.raises(AuthenticationException):
            coll.upsert(seeded, {"seeded": False}, UpsertOptions(timeout=timedelta(seconds=5)))
    finally:
        if c is not None:
            c.close()
        users.drop_user(name)


def test_data_writer_can_write_but_not_read(server, users, collection, key):
    """A data_writer[default] user may upsert but not read (Couchbase's data_writer has no read privilege)."""
    name = unique("writer")
    users.upsert_user(User(username=name, password="writer-pw", roles={Role(name="data_writer", bucket="default")}))
    c = None
    try:
        c = connect_as(server, name, "writer-pw")
        coll = c.bucket("default").default_collection()
        coll.upsert(key, {"by": "writer"}, UpsertOptions(timeout=timedelta(seconds=5)))
        assert collection.get(key).content_as[dict] == {"by": "writer"}
        with pytest.raises(AuthenticationException):
            coll.get(key, GetOptions(timeout=timedelta(seconds=5)))
    finally:
        if c is not None:
            c.close()
        users.drop_user(name)


def test_roles_narrowed_to_a_collection_or_scope_reach_only_it(server, users, bucket):
    """Regression (issue 17): data_reader[default:s:c1] read every collection of the bucket. Proves a reader of one
    collection reads it and is refused the scope's other collection and the default collection, and a writer of a
    scope writes any collection of it and nothing outside."""
    scope, c1, c2 = unique("rbac"), "c1", "c2"
    manager = bucket.collections()
    manager.create_scope(scope)
    for c in (c1, c2):
        manager.create_collection(scope, c)
    admin_scope = bucket.scope(scope)
    for c in (c1, c2):
        wait_until(lambda c=c: admin_scope.collection(c).upsert("doc", {"in": c}) is not None, READY_SECONDS,
                   f"collection {c} to accept writes")
    bucket.default_collection().upsert("rbac-default-doc", {"in": "_default"})
    name = unique("narrow")
    roles = {Role(name="data_reader", bucket="default", scope=scope, collection=c1),
             Role(name="data_writer", bucket="default", scope=scope)}
    users.upsert_user(User(username=name, password="narrow-pw", roles=roles))
    c = None
    try:
        c = connect_as(server, name, "narrow-pw")
        b = c.bucket("default")
        short = GetOptions(timeout=timedelta(seconds=5))
        assert b.scope(scope).collection(c1).get("doc", short).content_as[dict] == {"in": c1}
        with pytest.raises(AuthenticationException):
            b.scope(scope).collection(c2).get("doc", short)
        with pytest.raises(AuthenticationException):
            b.default_collection().get("rbac-default-doc", short)
        b.scope(scope).collection(c2).upsert("written", {"by": name}, UpsertOptions(timeout=timedelta(seconds=5)))
        assert admin_scope.collection(c2).get("written").content_as[dict] == {"by": name}
        with pytest.raises(AuthenticationException):
            b.default_collection().upsert("rbac-default-doc", {"by": name}, UpsertOptions(timeout=timedelta(seconds=5)))
    finally:
        if c is not None:
            c.close()
        users.drop_user(name)
        manager.drop_scope(scope)


def test_bucket_admin_manages_the_bucket_but_cannot_read_its_data(server, users, seeded):
    """bucket_admin has no data access, as Couchbase's since 5.0: it may open the bucket, but reading or writing a
    document is refused."""
    name = unique("badmin")
    users.upsert_user(User(username=name, password="badmin-pw", roles={Role(name="bucket_admin", bucket="default")}))
    c = None
    try:
        c = connect_as(server, name, "badmin-pw")
        coll = c.bucket("default").default_collection()
        with pytest.raises(AuthenticationException):
            coll.get(seeded, GetOptions(timeout=timedelta(seconds=5)))
        with pytest.raises(AuthenticationException):
            coll.upsert(seeded, {"seeded": False}, UpsertOptions(timeout=timedelta(seconds=5)))
    finally:
        if c is not None:
            c.close()
        users.drop_user(name)


def test_a_group_gives_its_roles_to_its_members(server, users, seeded):
    """Groups through the SDK's user manager: a group is created, listed and read back; a member with no role of
    its own reads documents through the group's data_reader role (shown with the group as its origin); changing
    the group reaches the member's open connection; dropping the group takes its roles away."""
    group, name = unique("readers"), unique("member")
    users.upsert_group(Group(name=group, description="reads default", roles={Role(name="data_reader", bucket="default")}))
    c = None
    try:
        fetched = users.get_group(group)
        assert (fetched.name, fetched.description) == (group, "reads default")
        assert {(r.name, r.bucket) for r in fetched.roles} == {("data_reader", "default")}
        assert group in {g.name for g in users.get_all_groups()}
        users.upsert_user(User(username=name, password="member-pw", groups={group}))
        meta = users.get_user(name)
        assert meta.user.groups == {group}
        origins = [(o.type, o.name) for r in meta.effective_roles for o in r.origins]
        assert origins == [("group", group)], origins
        c = connect_as(server, name, "member-pw")
        coll = c.bucket("default").default_collection()
        short = GetOptions(timeout=timedelta(seconds=5))
        assert coll.get(seeded, short).content_as[dict] == {"seeded": True}
        users.upsert_group(Group(name=group, roles={Role(name="data_writer", bucket="default")}))
        wait_until(lambda: _refused(lambda: coll.get(seeded, short)), READY_SECONDS, "the group's change to apply")
        coll.upsert(seeded, {"seeded": True}, UpsertOptions(timeout=timedelta(seconds=5)))
        users.drop_group(group)
        wait_until(lambda: _refused(lambda: coll.upsert(seeded, {"seeded": True}, UpsertOptions(timeout=timedelta(seconds=5)))),
                   READY_SECONDS, "the dropped group's roles to go")
        assert not users.get_user(name).user.groups, "the membership goes with the group"
    finally:
        if c is not None:
            c.close()
        users.drop_user(name)
        if group in {g.name for g in users.get_all_groups()}:
            users.drop_group(group)


def _refused(operation) -> bool:
    try:
        operation()
        return False
    except AuthenticationException:
        return True


def test_dropped_user_can_no_longer_connect(server, users):
    """After drop_user the credentials stop working: connecting raises AuthenticationException."""
    name = unique("gone")
    users.upsert_user(User(username=name, password="gone-pw", roles={Role(name="data_reader", bucket="default")}))
    users.drop_user(name)
    with pytest.raises(AuthenticationException):
        c = connect(server, username=name, password="gone-pw")
        try:
            c.bucket("default").default_collection().get("x", GetOptions(timeout=timedelta(seconds=5)))
        finally:
            c.close()
