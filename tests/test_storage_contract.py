"""One contract for every storage backend: the local directory and a real S3 HTTP endpoint."""

from __future__ import annotations

import threading
import uuid
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest

from lakecleaner.config import LakeConfig, StorageSettings
from lakecleaner.errors import ConditionFailed, ObjectNotFound, StorageError
from lakecleaner.io import ObjectStore, open_store
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.s3 import S3Store
from lakecleaner.io.s3.replies import delete_errors
from tests.support.backends import ALL_BACKENDS
from tests.support.fsyncs import record_fsyncs
from tests.support.s3 import TEST_SECRET_KEY, S3Endpoint

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # and the real object store, SeaweedFS


def test_write_read_stat_list_delete(store: ObjectStore) -> None:
    store.write("a/b/one.bin", b"1")
    store.write("a/two.bin", b"22")
    store.write("c/three.bin", b"333")
    assert store.read("a/b/one.bin") == b"1"
    assert store.stat("a/two.bin").size == 2
    assert [o.key for o in store.list("a/")] == ["a/b/one.bin", "a/two.bin"]
    assert [o.key for o in store.list("")] == ["a/b/one.bin", "a/two.bin", "c/three.bin"]
    store.delete("a/two.bin")
    assert not store.exists("a/two.bin")
    store.delete("a/two.bin")  # idempotent
    assert [o.key for o in store.list("a/")] == ["a/b/one.bin"]


def test_an_unsynced_write_reads_back_at_once_and_sync_makes_it_durable(
    backend: str, store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`write(synced=False)` (a run's staged files) is read back like any write; the local
    directory fsyncs it only in `sync`, once, which an object store (durable on each write) skips;
    syncing a missing object is not an error (the run's HEAD reports it missing)."""
    synced = record_fsyncs(monkeypatch)
    store.write("staged/one.bin", b"staged", synced=False)
    assert store.read("staged/one.bin") == b"staged" and synced == []
    store.sync("staged/one.bin")
    store.sync("staged/missing.bin")
    store.write("durable.bin", b"d")
    if backend == "local":
        assert [p.rsplit("/", 1)[-1] for p in synced[:1]] == ["one.bin"] and len(synced) == 2
    else:
        assert synced == []


@pytest.fixture(params=["s3", "seaweedfs"])
def s3_server(request: pytest.FixtureRequest) -> S3Endpoint:
    """Each S3 server of the tests: moto's and SeaweedFS."""
    endpoint: S3Endpoint = request.getfixturevalue(
        "seaweedfs_endpoint" if request.param == "seaweedfs" else "s3_endpoint"
    )
    return endpoint


def test_delete_many_deletes_every_key_given_and_nothing_else(store: ObjectStore) -> None:
    """Over a thousand keys (S3's DeleteObjects takes a thousand a request), keys with reserved
    characters, and a key never written; idempotent, as `delete` is."""
    keys = [f"many/{n:04d}" for n in range(1001)] + ["many/a b+c~d.json", "many/é,x;y@z&<>'.bin"]
    map_ordered(lambda key: store.write(key, b"x"), keys, 32)
    store.write("keep/one", b"k")
    store.delete_many([*keys, "many/never-written"])
    assert store.list("many/") == [] and store.exists("keep/one")
    store.delete_many(keys)
    assert [o.key for o in store.list("")] == ["keep/one"]


def test_delete_unchanged_keeps_an_object_written_again_after_it_was_listed(store: ObjectStore) -> None:
    """gc's delete of another system's objects (adopted originals): each object goes only if it is
    still the one a listing showed. On S3 the DELETE carries If-Match with the listed ETag (moto
    and SeaweedFS honour it, as AWS S3 does); a local folder compares a fresh stat. An object
    written again, or gone, is returned and not deleted."""
    for key, data in (("same/a", b"1"), ("same/b", b"2"), ("same/gone", b"3"), ("same/c d+é", b"4")):
        store.write(key, data)
    listed = {info.key: info.version_tag for info in store.list("same/")}
    store.write("same/b", b"22")  # the sink rewrote it after gc listed it
    store.delete("same/gone")
    kept = store.delete_unchanged(listed)
    assert sorted(kept) == ["same/b", "same/gone"]
    assert [(o.key, store.read(o.key)) for o in store.list("same/")] == [("same/b", b"22")]


def test_delete_many_is_one_request_a_thousand_keys_or_a_delete_each_where_the_store_does_not_implement_it(
    s3_server: S3Endpoint,
) -> None:
    """DeleteObjects takes a thousand keys a request. An outage that outlasts the retries raises and
    changes nothing about how the store is asked once it is back; a store that answers 501
    NotImplemented is not asked twice and gets a DELETE per key from then on."""
    from tests.support.flaky_proxy import FlakyProxy

    endpoint = s3_server
    multi_delete = lambda method, path: method == "POST" and path.endswith("?delete")  # noqa: E731
    with FlakyProxy(endpoint.url, fail_when=multi_delete) as proxy:
        settings = endpoint.settings(
            endpoint_url=proxy.url, max_attempts=2, backoff_base_ms=1, backoff_max_ms=5, conditional_writes="trust"
        )
        store = open_store(f"s3://{endpoint.bucket}/many-{uuid.uuid4().hex[:8]}", settings)
        keys = [f"k{n:04d}" for n in range(1004)]
        map_ordered(lambda key: store.write(key, b"x"), keys, 32)
        before = len(proxy.seen)
        store.delete_many(keys[:1001])
        assert [method for method, _ in proxy.seen[before:]] == ["POST", "POST"]
        assert [o.key for o in store.list("")] == keys[1001:]

        proxy.failures_left = 10**6  # an outage: 503 to every DeleteObjects
        before = len(proxy.seen)
        with pytest.raises(StorageError, match="still failing after 2 attempts") as outage:
            store.delete_many(keys[1001:])
        assert f"s3://{endpoint.bucket}/" in str(outage.value)
        assert [method for method, _ in proxy.seen[before:]] == ["POST", "POST"]  # no DELETE per key
        proxy.failures_left = 0  # back: one DeleteObjects again
        before = len(proxy.seen)
        store.delete_many([keys[1001]])
        assert [method for method, _ in proxy.seen[before:]] == ["POST"]
        assert [o.key for o in store.list("")] == keys[1002:]

        proxy.failure, proxy.failures_left = (501, "NotImplemented"), 10**6  # a store without DeleteObjects
        before = len(proxy.seen)
        store.delete_many(keys[1002:])
        assert [method for method, _ in proxy.seen[before:]] == ["POST", "DELETE", "DELETE"]  # 501 is not retried
        assert store.list("") == []
        store.write("again", b"x")
        before = len(proxy.seen)
        store.delete_many(["again"])  # the store is not asked again
        assert [method for method, _ in proxy.seen[before:]] == ["DELETE"] and not store.exists("again")


def test_a_key_the_store_answers_it_did_not_delete_is_an_error_naming_it(s3_server: S3Endpoint) -> None:
    """DeleteObjects answers 200 with the keys it could not delete: a refused key raises, naming
    it and the store's code, without a DELETE per key (the store takes DeleteObjects); a key it
    could not delete for now (a retryable code) is asked again, then raises, naming it."""
    from tests.support.flaky_proxy import FlakyProxy

    endpoint = s3_server
    prefix = f"refused-{uuid.uuid4().hex[:8]}"
    code = "AccessDenied"

    def refuse_b(method: str, path: str, body: bytes) -> bytes | None:
        if method != "POST" or not path.endswith("?delete"):
            return None
        error = f"<Error><Key>{prefix}/b</Key><Code>{code}</Code><Message>not you</Message></Error>"
        return f'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{error}</DeleteResult>'.encode()

    with FlakyProxy(endpoint.url, rewrite=refuse_b) as proxy:
        settings = endpoint.settings(
            endpoint_url=proxy.url, max_attempts=2, backoff_base_ms=1, backoff_max_ms=5, conditional_writes="trust"
        )
        store = open_store(f"s3://{endpoint.bucket}/{prefix}", settings)
        for key in ("a", "b"):
            store.write(key, b"x")
        before = len(proxy.seen)
        with pytest.raises(StorageError) as refused:
            store.delete_many(["a", "b"])
        assert f"s3://{endpoint.bucket}/{prefix}/b" in str(refused.value) and "AccessDenied: not you" in str(
            refused.value
        )
        assert [method for method, _ in proxy.seen[before:]] == ["POST"]

        code = "InternalError"
        for key in ("a", "b"):
            store.write(key, b"x")
        before = len(proxy.seen)
        with pytest.raises(StorageError, match="still failing after 2 attempts: InternalError") as later:
            store.delete_many(["a", "b"])
        assert f"s3://{endpoint.bucket}/{prefix}/b" in str(later.value)
        assert [method for method, _ in proxy.seen[before:]] == ["POST", "POST"]


def test_a_key_the_store_would_not_delete_is_named() -> None:
    """A DeleteObjects reply names the keys it could not delete: each is an error of its own (the
    reply's key, code and message); a reply that is not XML is an error without a key."""
    reply = (
        b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Error><Key>p/a</Key><Code>AccessDenied</Code><Message>no</Message></Error>"
        b"<Error><Key>p/b</Key><Code>InternalError</Code><Message>later</Message></Error></DeleteResult>"
    )
    assert delete_errors(reply) == [("p/a", "AccessDenied", "no"), ("p/b", "InternalError", "later")]
    assert delete_errors(b"<DeleteResult/>") == []
    assert delete_errors(b"not xml")[0][0] == ""


def test_a_rewrite_with_the_same_bytes_changes_the_version_tag(store: ObjectStore) -> None:
    """The commit tells a staged file the gate read from one written over it by its version tag
    (issue #14): writing the very same bytes again (a single-part upload: the same MD5 ETag on S3)
    gives another tag; reading or statting it again does not."""
    store.write("staged/seg.parquet", b"the same bytes")
    first = store.stat("staged/seg.parquet").version_tag
    assert store.stat("staged/seg.parquet").version_tag == first
    store.read("staged/seg.parquet")
    store.write("staged/seg.parquet", b"the same bytes")
    assert first and store.stat("staged/seg.parquet").version_tag != first


def test_list_folders_names_the_folders_under_a_prefix_and_list_takes_partial_names(store: ObjectStore) -> None:
    """One delimited listing names the folders directly under a prefix (not the objects in
    them); `list` with a prefix that ends inside a name finds the keys that start with it."""
    for key in ("t/a/topic.json", "t/a/p=0/m.json", "t/b/topic.json", "t/file.bin", "u/c/x.bin"):
        store.write(key, b"x")
    assert store.list_folders("t/") == ("a", "b")
    assert store.list_folders("t/a/") == ("p=0",)
    assert store.list_folders("nothing/") == ()
    assert [o.key for o in store.list("t/a/p=0/m")] == ["t/a/p=0/m.json"]
    assert [o.key for o in store.list("t/fi")] == ["t/file.bin"]


def test_missing_object_is_object_not_found_naming_the_key(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFound) as exc:
        store.read("nowhere/missing.json")
    assert "nowhere/missing.json" in str(exc.value)
    assert store.location("nowhere/missing.json") in str(exc.value)
    if isinstance(store, S3Store):  # which server said so
        assert f"(endpoint {store.endpoint})" in str(exc.value)


def test_keys_with_reserved_characters_round_trip(store: ObjectStore) -> None:
    """Reads sign and address the key exactly as writes do, whatever characters it holds."""
    keys = ["t/partition=0/a b+c~d.json", "t/100%/é,x;y@z.bin", "t/(q)&[r]!$'*.bin"]
    for n, key in enumerate(keys):
        etag = store.create(key, f"v{n}".encode())
        assert store.read_with_etag(key) == (f"v{n}".encode(), etag)
    assert [o.key for o in store.list("t/")] == sorted(keys)


def test_object_requests_take_the_lean_signed_path(backend: str, store: ObjectStore) -> None:
    """GET, HEAD and PUT go out signed on the boto3 client's own pool, not through boto3's call
    machinery (a third of the CPU). It reads botocore's client internals; should an upgrade rename
    them, every request would quietly take the slow path: this fails instead."""
    if not isinstance(store, S3Store):
        pytest.skip("an S3 concern")
    put = store._signed("write", "PUT", "lean/k", b"lean", {"If-None-Match": "*"})
    assert put is not None and put.status_code == 200
    got = store._signed("read", "GET", "lean/k")
    assert got is not None and got.content == b"lean" and got.headers["ETag"] == put.headers["ETag"]
    assert store.stat("lean/k").version_tag == put.headers["ETag"]
    with pytest.raises(ConditionFailed):
        store._signed("create", "PUT", "lean/k", b"again", {"If-None-Match": "*"})


def test_create_if_absent(store: ObjectStore) -> None:
    etag = store.create("m.json", b"v1")
    assert store.read_with_etag("m.json") == (b"v1", etag)
    with pytest.raises(ConditionFailed):
        store.create("m.json", b"v2")
    assert store.read("m.json") == b"v1"


def test_replace_if_etag_matches(store: ObjectStore) -> None:
    etag1 = store.create("m.json", b"v1")
    etag2 = store.replace("m.json", b"v2", etag1)
    assert store.read_with_etag("m.json") == (b"v2", etag2)
    with pytest.raises(ConditionFailed):
        store.replace("m.json", b"v3", etag1)
    assert store.read("m.json") == b"v2"


def test_conditional_write_race_loses_no_update(store: ObjectStore) -> None:
    """Eight threads increment one counter by read-modify-write with If-Match: every
    increment lands exactly once, and every lost race is reported as ConditionFailed."""
    store.create("counter.json", b"0")
    increments_per_thread, threads = 5, 8
    conflicts = []

    def worker() -> None:
        done = 0
        while done < increments_per_thread:
            data, etag = store.read_with_etag("counter.json")
            try:
                store.replace("counter.json", str(int(data) + 1).encode(), etag)
                done += 1
            except ConditionFailed:
                conflicts.append(1)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert int(store.read("counter.json")) == increments_per_thread * threads


def test_create_race_has_exactly_one_winner(store: ObjectStore) -> None:
    winners, losers = [], []

    def worker(i: int) -> None:
        try:
            store.create("once.json", str(i).encode())
            winners.append(i)
        except ConditionFailed:
            losers.append(i)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert len(winners) == 1 and len(losers) == 7
    assert store.read("once.json") == str(winners[0]).encode()


def test_arrow_filesystem_reaches_the_same_objects(store: ObjectStore) -> None:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"x": [1, 2, 3]}), sink)
    store.write("t/x.parquet", sink.getvalue().to_pybytes())
    table = pq.read_table(store.arrow_path("t/x.parquet"), filesystem=store.arrow_fs, columns=["x"])
    assert table.column("x").to_pylist() == [1, 2, 3]


def test_local_keys_cannot_escape_the_root(backend: str, store: ObjectStore) -> None:
    if backend != "local":
        pytest.skip("path escapes are a local-directory concern")
    with pytest.raises(StorageError, match="relative"):
        store.write("../outside.bin", b"x")


def test_unreachable_endpoint_retries_then_fails_clearly_without_credentials() -> None:
    settings = StorageSettings(
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="AKIAEXAMPLEKEY",
        secret_access_key=TEST_SECRET_KEY,
        max_attempts=3,
        backoff_base_ms=1,
        backoff_max_ms=5,
    )
    store = open_store("s3://bucket/prefix", settings)
    with pytest.raises(StorageError) as exc:
        store.read("topics/t/partition=0/manifest.json")
    message = str(exc.value)
    assert "s3://bucket/prefix/topics/t/partition=0/manifest.json" in message
    assert "3 attempts" in message and "(endpoint http://127.0.0.1:9)" in message
    assert TEST_SECRET_KEY not in message and "AKIAEXAMPLEKEY" not in message
    assert TEST_SECRET_KEY not in repr(settings)


def test_wrong_credentials_are_a_permanent_error_without_the_secret(s3_endpoint, backend: str) -> None:  # type: ignore[no-untyped-def]
    if backend != "s3":
        pytest.skip("credentials are an S3 concern")
    settings = StorageSettings(
        endpoint_url=s3_endpoint.url,
        region="us-east-1",
        access_key_id="x",
        secret_access_key=TEST_SECRET_KEY,
        max_attempts=2,
        backoff_base_ms=1,
    )
    store = open_store("s3://no-such-bucket-for-lakecleaner/p", settings)
    assert isinstance(store, S3Store)
    with pytest.raises(StorageError) as exc:
        store.write("k", b"v")
    assert "no-such-bucket-for-lakecleaner" in str(exc.value)
    assert TEST_SECRET_KEY not in str(exc.value)
    # The write's own cause, not the failed clean-up of the probe that ran before it.
    assert not str(exc.value).startswith("delete") and f"(endpoint {s3_endpoint.url})" in str(exc.value)
    with pytest.raises(StorageError) as exc:
        store.read("k")
    assert not isinstance(exc.value, ObjectNotFound), "a missing bucket or refused key is not a missing object"
    assert "no-such-bucket-for-lakecleaner" in str(exc.value) and TEST_SECRET_KEY not in str(exc.value)


def test_versioning_detection(backend: str, store: ObjectStore, s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    assert store.versioning_enabled() is False
    if backend == "s3":
        client = s3_endpoint.client()
        bucket = f"versioned-{id(store) % 100000}"
        client.create_bucket(Bucket=bucket)
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        versioned = open_store(f"s3://{bucket}/x", s3_endpoint.settings())
        assert versioned.versioning_enabled() is True
        versioned.write("k", b"1")
        versioned.write("k", b"2")
        versioned.delete("k")  # a delete marker over both versions
        assert len(client.list_object_versions(Bucket=bucket, Prefix="x/k").get("Versions", [])) == 2
        versioned.write("k", b"3")
        every_version = open_store(f"s3://{bucket}/x", s3_endpoint.settings(delete_all_versions=True))
        every_version.delete("k")  # lake.storage.delete_all_versions: every version and marker goes
        listed = client.list_object_versions(Bucket=bucket, Prefix="x/k")
        assert listed.get("Versions", []) == [] and listed.get("DeleteMarkers", []) == []


def test_every_version_goes_with_a_listing_a_folder_and_a_delete_a_thousand_versions(s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    """lake.storage.delete_all_versions: every version and delete marker of each key deleted goes,
    found by one ListObjectVersions of each folder that holds several of the keys (a page a
    thousand versions; a folder inside another is listed with it, once) and deleted a thousand
    versions to a DeleteObjects request, not a listing and a DELETE per version; a key alone in
    its folder is listed by itself, not its folder; the versions of other keys stay."""
    from tests.support.flaky_proxy import FlakyProxy

    client = s3_endpoint.client()
    bucket = f"versions-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    with FlakyProxy(s3_endpoint.url) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, conditional_writes="trust", delete_all_versions=True)
        store = open_store(f"s3://{bucket}/x", settings)
        keys = [f"p/segments/{n:04d}" for n in range(550)] + ["p/_staging/a", "p/top", "p/top2"]
        for data in (b"1", b"2"):
            map_ordered(lambda key, data=data: store.write(key, data), [*keys, "p/segments/keep"], 32)
        client.delete_object(Bucket=bucket, Key="x/p/segments/0000")  # a delete marker over two versions
        before = len(proxy.seen)
        store.delete_many(keys)
        requests = [method for method, _ in proxy.seen[before:]]
        left = client.list_object_versions(Bucket=bucket, Prefix="x/")
        before = len(proxy.seen)
        store.delete("p/segments/keep")
        alone = [(method, unquote(path)) for method, path in proxy.seen[before:]]
    assert sorted(requests) == ["GET", "GET", "POST", "POST"]  # 1,109 versions under p/: two pages, 1,107 wanted
    assert [v["Key"] for v in left.get("DeleteMarkers", [])] == []
    assert sorted(v["Key"] for v in left.get("Versions", [])) == ["x/p/segments/keep"] * 2
    assert [m for m, _ in alone] == ["GET", "POST"]  # its own listing, both versions in one request
    assert "prefix=x/p/segments/keep" in alone[0][1]  # the key, not its folder of 551 keys
    assert client.list_object_versions(Bucket=bucket, Prefix="x/").get("Versions", []) == []


def test_transient_s3_errors_are_retried_with_backoff(s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    from tests.support.flaky_proxy import FlakyProxy

    with FlakyProxy(s3_endpoint.url, failures=2) as proxy:
        settings = s3_endpoint.settings(
            endpoint_url=proxy.url, max_attempts=4, backoff_base_ms=1, backoff_max_ms=5, conditional_writes="trust"
        )  # counts requests: no probe of conditional writes
        store = open_store(f"s3://{s3_endpoint.bucket}/flaky", settings)
        store.write("k", b"survived")
        assert proxy.requests == 3  # two 503s, then the write went through
        proxy.failures_left = 2
        assert store.read("k") == b"survived"
        assert proxy.requests == 6  # and the same for a read


def test_persistent_s3_outage_fails_after_the_configured_attempts(s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    from tests.support.flaky_proxy import FlakyProxy

    with FlakyProxy(s3_endpoint.url, failures=100) as proxy:
        settings = s3_endpoint.settings(
            endpoint_url=proxy.url, max_attempts=3, backoff_base_ms=1, backoff_max_ms=5, conditional_writes="trust"
        )  # counts requests: no probe of conditional writes
        store = open_store(f"s3://{s3_endpoint.bucket}/flaky", settings)
        with pytest.raises(StorageError, match="still failing after 3 attempts") as exc:
            store.write("k", b"lost?")
        assert proxy.requests == 3
        assert s3_endpoint.secret_key not in str(exc.value)


def test_a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written(s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    """Issue #15: against a store that ignores If-None-Match and If-Match, concurrent appends lost
    acknowledged records and `topics create` replaced an existing topic. The probe refuses it."""
    from lakecleaner.errors import UnsafeStore
    from lakecleaner.lake import Lake
    from tests.support.flaky_proxy import FlakyProxy

    prefix = f"unsafe-{uuid.uuid4().hex[:8]}"
    with FlakyProxy(s3_endpoint.url, strip_conditions=True) as proxy:
        uri = f"s3://{s3_endpoint.bucket}/{prefix}"
        lake = Lake.open(LakeConfig(uri, s3_endpoint.settings(endpoint_url=proxy.url)))
        with pytest.raises(UnsafeStore, match=f"the object store at {proxy.url} ignores If-None-Match") as exc:
            lake.create_topic("cdc")
        assert "lake.storage.conditional_writes: trust" in str(exc.value)
        assert s3_endpoint.secret_key not in str(exc.value)
        listed = s3_endpoint.client().list_objects_v2(Bucket=s3_endpoint.bucket, Prefix=prefix)
        assert listed.get("KeyCount", 0) == 0  # nothing written, the probe's scratch key removed
        trusting = s3_endpoint.settings(endpoint_url=proxy.url, conditional_writes="trust")
        Lake.open(LakeConfig(uri, trusting)).create_topic("cdc")  # at the user's risk


def test_a_store_that_does_not_implement_conditional_writes_is_refused_without_retrying(s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    """A store that answers 501 NotImplemented to a conditional PUT is refused as one without
    conditional writes, at the first answer: a 501 is not an outage to retry."""
    from lakecleaner.errors import UnsafeStore
    from lakecleaner.lake import Lake
    from tests.support.flaky_proxy import FlakyProxy

    probe = lambda method, path: method == "PUT" and "/_lakecleaner/probe/" in path  # noqa: E731
    with FlakyProxy(s3_endpoint.url, 10**6, fail_when=probe, failure=(501, "NotImplemented")) as proxy:
        uri = f"s3://{s3_endpoint.bucket}/unimplemented-{uuid.uuid4().hex[:8]}"
        lake = Lake.open(LakeConfig(uri, s3_endpoint.settings(endpoint_url=proxy.url, max_attempts=3)))
        with pytest.raises(UnsafeStore, match="does not implement conditional writes"):
            lake.create_topic("cdc")
        assert [method for method, path in proxy.seen if "/_lakecleaner/probe/" in path] == ["PUT", "DELETE"]


def test_a_store_that_ignores_if_match_on_delete_is_used_with_the_listing_as_the_check(s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    """Conditional deletes are probed, not required: against a store that drops If-Match (here on
    every request, with conditional writes trusted) `delete_unchanged` deletes what the caller's
    listing showed, as gc did before stores had conditional deletes, and the probe's scratch
    object is removed."""
    from tests.support.flaky_proxy import FlakyProxy

    prefix = f"no-conditional-delete-{uuid.uuid4().hex[:8]}"
    with FlakyProxy(s3_endpoint.url, strip_conditions=True) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, conditional_writes="trust")
        store = open_store(f"s3://{s3_endpoint.bucket}/{prefix}", settings)
        store.write("o/a", b"1")
        listed = {info.key: info.version_tag for info in store.list("o/")}
        assert store.delete_unchanged(listed) == ()
        probes = [method for method, path in proxy.seen if "/_lakecleaner/probe/" in path]
        assert probes[0] == "PUT" and probes.count("DELETE") >= 2  # a stale If-Match deleted it: not honoured
    listed_now = s3_endpoint.client().list_objects_v2(Bucket=s3_endpoint.bucket, Prefix=prefix)
    assert listed_now.get("KeyCount", 0) == 0
