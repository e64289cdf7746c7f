"""SQL++ through the official Python SDK: `cluster.query()`, `scope.query()`, parameters, prepared statements, scan
consistency, DML, the errors the SDK raises, and the query index manager, against a real `settee server`."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest

from couchbase.exceptions import (AuthenticationException, CouchbaseException, DocumentExistsException,
                                  KeyspaceNotFoundException, ParsingFailedException,
                                  QueryIndexAlreadyExistsException, QueryIndexNotFoundException,
                                  ScopeNotFoundException)
from couchbase.management.collections import CollectionSpec
from couchbase.management.options import (CreatePrimaryQueryIndexOptions, CreateQueryIndexOptions,
                                          DropPrimaryQueryIndexOptions, DropQueryIndexOptions,
                                          GetAllQueryIndexOptions, WatchQueryIndexOptions)
from couchbase.mutation_state import MutationState
from couchbase.n1ql import QueryProfile, QueryScanConsistency, QueryStatus
from couchbase.options import QueryOptions

import settee_server
from sdk_connect import connect

BUCKET = settee_server.BUCKET


@pytest.fixture(scope="module")
def indexed(cluster):
    """The suite bucket with a primary index (created through the query index manager, as applications do)."""
    mgr = cluster.query_indexes()
    mgr.create_primary_index(BUCKET, CreatePrimaryQueryIndexOptions(ignore_if_exists=True))
    mgr.watch_indexes(BUCKET, [], WatchQueryIndexOptions(watch_primary=True, timeout=timedelta(seconds=30)))
    return cluster


@pytest.fixture
def batch() -> str:
    """A value unique to the test, stored in each document it writes, so queries can select just those."""
    return f"b-{uuid.uuid4().hex[:10]}"


def load(collection, batch, n=5):
    """Upserts `n` documents of `batch` and returns their mutation state."""
    state = MutationState()
    for i in range(n):
        res = collection.upsert(f"{batch}-{i}", {"batch": batch, "num": i, "type": "q", "tags": [f"t{i % 2}"]})
        state.add_mutation_token(res.mutation_token())
    return state


def rows(result):
    return list(result.rows())


def test_select_with_named_and_positional_parameters(indexed, collection, batch):
    """Named ($batch) and positional ($1) parameters bind; request_plus sees the writes made just before."""
    load(collection, batch)
    q = f"SELECT num FROM `{BUCKET}` WHERE batch = $batch ORDER BY num"
    got = rows(indexed.query(q, QueryOptions(named_parameters={"batch": batch},
                                              scan_consistency=QueryScanConsistency.REQUEST_PLUS)))
    assert got == [{"num": i} for i in range(5)]
    q = f"SELECT RAW num FROM `{BUCKET}` WHERE batch = $1 AND num >= $2 ORDER BY num DESC LIMIT 2"
    got = rows(indexed.query(q, QueryOptions(positional_parameters=[batch, 1],
                                              scan_consistency=QueryScanConsistency.REQUEST_PLUS)))
    assert got == [4, 3]


def test_select_star_and_meta(indexed, collection, batch):
    """`SELECT *` nests each document under its alias; META().id gives the key."""
    load(collection, batch, 2)
    q = f"SELECT d.*, META(d).id AS id FROM `{BUCKET}` AS d WHERE d.batch = $b ORDER BY id"
    got = rows(indexed.query(q, QueryOptions(named_parameters={"b": batch},
                                              scan_consistency=QueryScanConsistency.REQUEST_PLUS)))
    assert [r["id"] for r in got] == [f"{batch}-0", f"{batch}-1"]
    assert got[0]["num"] == 0 and got[0]["tags"] == ["t0"]
    q = f"SELECT * FROM `{BUCKET}` USE KEYS $k"
    got = rows(indexed.query(q, QueryOptions(named_parameters={"k": f"{batch}-1"})))
    assert got == [{BUCKET: {"batch": batch, "num": 1, "type": "q", "tags": ["t1"]}}]


def test_consistent_with_mutation_tokens(indexed, collection, batch):
    """at_plus with the SDK's MutationState (consistent_with) sees the writes the tokens name."""
    state = load(collection, batch, 3)
    q = f"SELECT COUNT(*) AS n FROM `{BUCKET}` WHERE batch = $b"
    got = rows(indexed.query(q, QueryOptions(named_parameters={"b": batch}, consistent_with=state)))
    assert got == [{"n": 3}]


def test_aggregates_group_by_and_having(indexed, collection, batch):
    """GROUP BY with COUNT/SUM/ARRAY_AGG and HAVING over the batch's documents."""
    load(collection, batch, 6)
    # With an UNNEST every field must name its term (Couchbase's formalizer: the keyspace is no longer implied).
    q = (f"SELECT t, COUNT(*) AS n, SUM(d.num) AS s, ARRAY_AGG(d.num) AS nums FROM `{BUCKET}` AS d UNNEST d.tags AS t "
         f"WHERE d.batch = $b GROUP BY t HAVING COUNT(*) > 1 ORDER BY t")
    got = rows(indexed.query(q, QueryOptions(named_parameters={"b": batch},
                                              scan_consistency=QueryScanConsistency.REQUEST_PLUS)))
    assert got == [{"t": "t0", "n": 3, "s": 6, "nums": [0, 2, 4]}, {"t": "t1", "n": 3, "s": 9, "nums": [1, 3, 5]}]


def test_metadata_metrics_and_profile(indexed):
    """metrics when asked (counts exact, durations above zero), none by default; signature; profile when asked."""
    res = indexed.query("SELECT 1 AS one, 'x' AS two", QueryOptions(metrics=True))
    assert rows(res) == [{"one": 1, "two": "x"}]
    meta = res.metadata()
    assert meta.status() == QueryStatus.SUCCESS
    m = meta.metrics()
    assert m.result_count().value == 1 and m.result_size().value > 0 and m.elapsed_time() > timedelta(0)
    assert m.execution_time() > timedelta(0) and m.error_count().value == 0 and m.mutation_count().value == 0
    assert isinstance(meta.signature(), dict)
    assert meta.request_id() and meta.profile() is None
    res = indexed.query("SELECT 1")
    rows(res)
    assert res.metadata().metrics() is None
    res = indexed.query("SELECT 1", QueryOptions(profile=QueryProfile.PHASES))
    rows(res)
    assert res.metadata().profile() is not None


def test_prepared_statements_run_again_from_their_name(indexed, collection, batch):
    """adhoc=False prepares with auto_execute and later runs by name; results are the same each time."""
    load(collection, batch, 3)
    q = f"SELECT RAW num FROM `{BUCKET}` WHERE batch = $1 ORDER BY num"
    opts = QueryOptions(adhoc=False, positional_parameters=[batch], scan_consistency=QueryScanConsistency.REQUEST_PLUS)
    first = rows(indexed.query(q, opts))
    second = rows(indexed.query(q, opts))
    assert first == second == [0, 1, 2]
    got = rows(indexed.query("SELECT RAW COUNT(*) FROM system:prepareds WHERE statement LIKE $p",
                             QueryOptions(named_parameters={"p": "%WHERE batch = $1%"})))
    assert got and got[0] >= 1


def test_dml_insert_update_delete_with_returning(indexed, collection, batch):
    """INSERT, UPDATE and DELETE change documents through KV and RETURNING shows the result; a second INSERT of
    the same key raises DocumentExistsException (12009, reason 17012)."""
    key = f"{batch}-dml"
    got = rows(indexed.query(f"INSERT INTO `{BUCKET}` (KEY, VALUE) VALUES ($k, {{'batch': $b, 'n': 1}}) RETURNING n",
                             QueryOptions(named_parameters={"k": key, "b": batch}, metrics=True)))
    assert got == [{"n": 1}]
    assert collection.get(key).content_as[dict] == {"batch": batch, "n": 1}
    with pytest.raises(DocumentExistsException):
        rows(indexed.query(f"INSERT INTO `{BUCKET}` (KEY, VALUE) VALUES ($k, {{'n': 2}})",
                           QueryOptions(named_parameters={"k": key})))
    res = indexed.query(f"UPDATE `{BUCKET}` AS d USE KEYS $k SET d.n = d.n + 10, d.extra = 'y' RETURNING RAW d.n",
                        QueryOptions(named_parameters={"k": key}, metrics=True))
    assert rows(res) == [11]
    assert res.metadata().metrics().mutation_count().value == 1
    assert collection.get(key).content_as[dict] == {"batch": batch, "n": 11, "extra": "y"}
    rows(indexed.query(f"UPDATE `{BUCKET}` USE KEYS $k UNSET extra", QueryOptions(named_parameters={"k": key})))
    assert collection.get(key).content_as[dict] == {"batch": batch, "n": 11}
    rows(indexed.query(f"DELETE FROM `{BUCKET}` USE KEYS $k", QueryOptions(named_parameters={"k": key})))
    assert not collection.exists(key).exists


def test_update_preserve_expiry_keeps_the_documents_expiry(indexed, collection, batch):
    """UPDATE with preserve_expiry leaves the document's expiry unchanged; without it the expiry is cleared."""
    key = f"{batch}-exp"
    collection.upsert(key, {"a": 1}, expiry=timedelta(hours=1))
    before = collection.get(key, with_expiry=True).expiry_time
    rows(indexed.query(f"UPDATE `{BUCKET}` AS content USE KEYS $k SET content.a = 'aaaa'",
                       QueryOptions(named_parameters={"k": key}, preserve_expiry=True)))
    got = collection.get(key, with_expiry=True)
    assert got.content_as[dict] == {"a": "aaaa"} and got.expiry_time == before
    rows(indexed.query(f"UPDATE `{BUCKET}` USE KEYS $k SET a = 'b'", QueryOptions(named_parameters={"k": key})))
    assert collection.get(key, with_expiry=True).expiry_time is None


def test_errors_raise_the_sdks_exceptions(indexed):
    """Syntax errors, missing keyspaces and scopes raise the exceptions the SDK maps from Couchbase's texts."""
    with pytest.raises(ParsingFailedException):
        rows(indexed.query("I'm not N1QL!"))
    with pytest.raises(KeyspaceNotFoundException):
        rows(indexed.query("SELECT * FROM `no-such-bucket`"))
    with pytest.raises(ScopeNotFoundException):
        rows(indexed.query("SELECT * FROM `x`", QueryOptions(query_context=f"default:`{BUCKET}`.`fake-scope`")))
    with pytest.raises(KeyspaceNotFoundException):
        rows(indexed.query("SELECT * FROM `x`", QueryOptions(query_context="default:`fake-bucket`.`s`")))


def test_readonly_refuses_writes(indexed, batch):
    """readonly=True refuses DML (error 1000) and still runs SELECT."""
    with pytest.raises(CouchbaseException):
        rows(indexed.query(f"UPSERT INTO `{BUCKET}` (KEY, VALUE) VALUES ('{batch}', {{}})", QueryOptions(read_only=True)))
    assert rows(indexed.query("SELECT RAW 1", QueryOptions(read_only=True))) == [1]


def test_user_without_query_roles_gets_13014(cluster, server):
    """A user whose roles grant KV reads but no query privilege cannot SELECT (13014, an authentication error to
    the SDK); with query_select on the bucket the same query runs."""
    from couchbase.management.users import Role, User
    name = f"q{uuid.uuid4().hex[:8]}"
    users = cluster.users()
    users.upsert_user(User(username=name, password="secret1", roles=[Role("data_reader", bucket=BUCKET)]))
    c = connect(server, username=name, password="secret1")
    try:
        with pytest.raises(AuthenticationException):
            rows(c.query(f"SELECT RAW 1 FROM `{BUCKET}` USE KEYS 'x'"))
    finally:
        c.close()
    users.upsert_user(User(username=name, password="secret1", roles=[Role("query_select", bucket=BUCKET)]))
    c = connect(server, username=name, password="secret1")
    try:
        assert rows(c.query(f"SELECT RAW 1 FROM `{BUCKET}` USE KEYS 'nope'")) == []
    finally:
        c.close()
        users.drop_user(name)


def test_explain_returns_one_plan(indexed):
    """EXPLAIN answers one row holding the plan, with Couchbase's operator names."""
    got = rows(indexed.query(f"EXPLAIN SELECT * FROM `{BUCKET}` WHERE num = 1"))
    assert len(got) == 1 and "plan" in got[0]
    text = str(got[0]["plan"])
    assert "PrimaryScan3" in text and "Filter" in text


def test_scope_query_on_a_named_collection(cluster, bucket, batch):
    """scope.query() resolves bare names in the scope's query context; indexes on the collection work."""
    scope_name = f"s{uuid.uuid4().hex[:8]}"
    mgr = bucket.collections()
    mgr.create_scope(scope_name)
    mgr.create_collection(CollectionSpec("people", scope_name=scope_name))
    coll = bucket.scope(scope_name).collection("people")
    for i in range(3):
        for _ in range(50):
            try:
                coll.upsert(f"p{i}", {"name": f"n{i}", "age": 20 + i})
                break
            except CouchbaseException:
                time.sleep(0.1)
    qmgr = cluster.query_indexes()
    qmgr.create_primary_index(BUCKET, CreatePrimaryQueryIndexOptions(scope_name=scope_name, collection_name="people"))
    scope = bucket.scope(scope_name)
    got = rows(scope.query("SELECT RAW name FROM people WHERE age >= $1 ORDER BY name",
                           QueryOptions(positional_parameters=[21], scan_consistency=QueryScanConsistency.REQUEST_PLUS)))
    assert got == ["n1", "n2"]
    full = f"`{BUCKET}`.`{scope_name}`.`people`"
    got = rows(cluster.query(f"SELECT COUNT(*) AS n FROM {full}",
                             QueryOptions(scan_consistency=QueryScanConsistency.REQUEST_PLUS)))
    assert got == [{"n": 3}]
    idx = qmgr.get_all_indexes(BUCKET, GetAllQueryIndexOptions(scope_name=scope_name, collection_name="people"))
    assert [i.name for i in idx] == ["#primary"] and idx[0].is_primary
    mgr.drop_scope(scope_name)


def test_query_index_manager_lifecycle(indexed, bucket):
    """Create (deferred) secondary and named primary indexes, build and watch them, list, and drop; duplicates
    and missing indexes raise the SDK's exceptions."""
    mgr = indexed.query_indexes()
    name = f"ix{uuid.uuid4().hex[:8]}"
    mgr.create_index(BUCKET, name, ["num", "batch"], CreateQueryIndexOptions(deferred=True))
    with pytest.raises(QueryIndexAlreadyExistsException):
        mgr.create_index(BUCKET, name, ["num"])
    mgr.create_index(BUCKET, name, ["num"], CreateQueryIndexOptions(ignore_if_exists=True))
    listed = {i.name: i for i in mgr.get_all_indexes(BUCKET)}
    assert listed[name].state == "deferred" and list(listed[name].index_key) == ["`num`", "`batch`"]
    assert listed["#primary"].is_primary and listed["#primary"].state == "online"
    mgr.build_deferred_indexes(BUCKET)
    mgr.watch_indexes(BUCKET, [name], WatchQueryIndexOptions(timeout=timedelta(seconds=30)))
    listed = {i.name: i for i in mgr.get_all_indexes(BUCKET)}
    assert listed[name].state == "online"
    mgr.drop_index(BUCKET, name)
    with pytest.raises(QueryIndexNotFoundException):
        mgr.drop_index(BUCKET, name)
    mgr.drop_index(BUCKET, name, DropQueryIndexOptions(ignore_if_not_exists=True))
    prim = f"p{uuid.uuid4().hex[:8]}"
    mgr.create_primary_index(BUCKET, CreatePrimaryQueryIndexOptions(index_name=prim))
    mgr.drop_primary_index(BUCKET, DropPrimaryQueryIndexOptions(index_name=prim))
    assert prim not in {i.name for i in mgr.get_all_indexes(BUCKET)}


def test_no_primary_index_is_a_query_index_not_found(cluster, bucket):
    """A full scan of a collection without a primary index fails with 4000 "No index available" (the SDK's
    QueryIndexNotFoundException)."""
    scope_name = f"s{uuid.uuid4().hex[:8]}"
    mgr = bucket.collections()
    mgr.create_scope(scope_name)
    mgr.create_collection(CollectionSpec("c", scope_name=scope_name))
    try:
        with pytest.raises(QueryIndexNotFoundException):
            rows(cluster.query(f"SELECT * FROM `{BUCKET}`.`{scope_name}`.`c`"))
    finally:
        mgr.drop_scope(scope_name)


def test_system_keyspaces_list_buckets_and_indexes(indexed):
    """system:keyspaces lists the bucket; system:indexes has its primary index in Couchbase's row shape."""
    got = rows(indexed.query("SELECT RAW name FROM system:keyspaces WHERE name = $b", QueryOptions(
        named_parameters={"b": BUCKET})))
    assert BUCKET in got
    got = rows(indexed.query("SELECT idx.* FROM system:indexes AS idx WHERE keyspace_id = $b AND is_primary",
                             QueryOptions(named_parameters={"b": BUCKET})))
    assert any(r["name"] == "#primary" and r["using"] == "gsi" and r["index_key"] == [] for r in got)


def test_secondary_index_serves_equality_and_range_queries(indexed, collection, batch):
    """A secondary index created through the index manager answers equality and range predicates (EXPLAIN shows
    IndexScan3 with its name) with the same rows as a full scan, request_plus seeing writes made just before."""
    mgr = indexed.query_indexes()
    name = f"ixs{uuid.uuid4().hex[:8]}"
    mgr.create_index(BUCKET, name, ["batch", "num"])
    try:
        load(collection, batch, 8)
        q = f"SELECT RAW num FROM `{BUCKET}` WHERE batch = $b AND num >= 5 ORDER BY num"
        opts = QueryOptions(named_parameters={"b": batch}, scan_consistency=QueryScanConsistency.REQUEST_PLUS)
        assert rows(indexed.query(q, opts)) == [5, 6, 7]
        plan = str(rows(indexed.query("EXPLAIN " + q, QueryOptions(named_parameters={"b": batch})))[0]["plan"])
        assert "IndexScan3" in plan and name in plan
        collection.upsert(f"{batch}-new", {"batch": batch, "num": 9})
        assert rows(indexed.query(q, opts)) == [5, 6, 7, 9]
        collection.remove(f"{batch}-7")
        assert rows(indexed.query(q, opts)) == [5, 6, 9]
    finally:
        mgr.drop_index(BUCKET, name)


def test_covering_count_limit_and_union_scans_answer_like_full_scans(indexed, collection, batch):
    """Index scans with the planner's pushdowns give the rows a fetch would: a covering scan (EXPLAIN `covers`, no
    Fetch), LIMIT and OFFSET in the scan, COUNT counted by the index (IndexCountScan2), and an OR over two indexes
    read as a UnionScan; a write made just before shows in each with request_plus."""
    mgr = indexed.query_indexes()
    by_num, by_code = f"ixn{uuid.uuid4().hex[:8]}", f"ixc{uuid.uuid4().hex[:8]}"
    mgr.create_index(BUCKET, by_num, ["batch", "num"])
    mgr.create_index(BUCKET, by_code, ["code"])
    opts = QueryOptions(named_parameters={"b": batch, "c": f"{batch}-code"},
                        scan_consistency=QueryScanConsistency.REQUEST_PLUS)

    def plan(q):
        return str(rows(indexed.query("EXPLAIN " + q, QueryOptions(named_parameters={"b": batch, "c": "x"})))[0])

    try:
        load(collection, batch, 8)
        covered = f"SELECT num, META().id AS k FROM `{BUCKET}` WHERE batch = $b AND num >= 2 ORDER BY num LIMIT 3 OFFSET 1"
        assert rows(indexed.query(covered, opts)) == [{"num": n, "k": f"{batch}-{n}"} for n in (3, 4, 5)]
        p = plan(covered)
        assert "covers" in p and "Fetch" not in p and "'limit': '3'" in p and "'offset': '1'" in p, p
        count = f"SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE batch = $b AND num < 6"
        assert rows(indexed.query(count, opts)) == [6]
        assert "IndexCountScan2" in plan(count)
        union = f"SELECT RAW META().id FROM `{BUCKET}` WHERE (batch = $b AND num = 7) OR code = $c ORDER BY META().id"
        collection.upsert(f"{batch}-coded", {"code": f"{batch}-code"})
        assert rows(indexed.query(union, opts)) == [f"{batch}-7", f"{batch}-coded"]
        p = plan(union)
        assert "UnionScan" in p and by_num in p and by_code in p, p
        collection.remove(f"{batch}-4")
        assert rows(indexed.query(covered, opts)) == [{"num": n, "k": f"{batch}-{n}"} for n in (3, 5, 6)]
        assert rows(indexed.query(count, opts)) == [5]
    finally:
        mgr.drop_index(BUCKET, by_num)
        mgr.drop_index(BUCKET, by_code)
