"""Erasure: one user or agent at a time, every delete path, and the bytes of the file.

The canary test writes a unique word into every place a user's data lands
(message text and metadata, memory text and metadata and the memory history
(``oam_memory_versions``, of deleted memories too), an image's description
and the PNG's own text chunk, thread metadata, the user id itself), checks
that the word is in the SQLite file (database, WAL), erases the user, and
checks that no byte of it is left: not in the tables, not in free pages
(``secure_delete``), not in FTS5 segments (``secure-delete``), not in the WAL
(``storage_scrub``), not in the planner's statistics.
"""

import datetime as dt
import io
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from PIL import Image as PillowImage
from PIL import PngImagePlugin

from memory.client import AgentMemory
from memory.core.errors import OutOfScope
from memory.core.ids import public_id
from memory.models import (
    ErasureReceipt,
    ExtractionJob,
    Image,
    Memory,
    MemoryVersion,
    Message,
    Project,
    RecordLink,
    SearchChunk,
    Thread,
    ThreadSummary,
)
from memory.records.tenancy import Tenant
from memory.search.backends import KEYWORD_INDEX
from memory.services import erasure, scrub
from tests import image_samples as samples
from tests.ids import key


def png_with_text(text: str) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", text)
    buf = io.BytesIO()
    PillowImage.new("RGB", (24, 24), (10, 200, 90)).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


def file_bytes() -> bytes:
    """The database file, its WAL and shared-memory index, as they are on disk."""
    path = Path(connection.settings_dict["NAME"])
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def checkpoint() -> None:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def fill(client: AgentMemory, user: str, word: str) -> None:
    """A user's thread with the ``word`` in every field that takes text."""
    thread = client.create_thread(thread_id=f"t-{user}", user_id=user, agent_id="a1", metadata={"note": word})
    thread.add_messages([
        {"role": "user", "content": f"My secret word is {word} and I live in Lisbon", "metadata": {"w": word}},
        {"role": "assistant", "content": "Noted."},
    ])
    first = thread.add_memory(f"The user's secret word is {word}", memory_type="fact", metadata={"w": word})
    second = thread.add_memory(f"The user repeats {word} often")
    thread.link_records(second, "memory", first, "fact", "supports")
    thread.add_image(png_with_text(word), description=f"A note that reads {word}")


@pytest.mark.backend("sqlite")
@pytest.mark.django_db(transaction=True)
def test_an_erased_users_words_are_gone_from_the_file():
    client = AgentMemory(llm=None)
    canary = f"qzcanary{uuid.uuid4().hex[:16]}"
    keeper = f"qzkeeper{uuid.uuid4().hex[:16]}"
    user = f"user-{canary}"
    fill(client, user, canary)
    fill(client, "someone-else", keeper)
    busy = client.get_thread("t-someone-else")
    for i in range(12):  # more FTS5 segments, merged over the canary's: it sits in an older, larger one
        busy.add_messages([{"role": "user", "content": f"{keeper} small talk number {i}"}])
    # a memory of the user filed in another user's thread, and one in no thread
    client.get_thread("t-someone-else").add_memory(f"{canary} was mentioned here", user_id=user)
    client.get_thread("t-someone-else").add_memory(f"{canary} floats", user_id=user, thread_id=None)
    # memory history (memory.records.history): edited and deleted records keep versions holding the word until erasure
    mine = client.get_thread(f"t-{user}")
    edited = mine.add_memory(f"{canary} before the edit", memory_id="edited")
    mine.update_memory(edited, content=f"{canary} after the edit")
    mine.delete_memory(mine.add_memory(f"{canary} deleted before the erasure"))
    kept_history = MemoryVersion.objects.filter(user_id="someone-else").count()
    assert MemoryVersion.objects.filter(user_id=user).count() == 8  # six creates, one update, one delete
    assert any(canary in str(v.before) + str(v.after) for v in MemoryVersion.objects.filter(action="delete"))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # planner statistics may sample indexed values (the user id)
    checkpoint()
    tail = canary[4:].encode()  # FTS5 stores a term after the prefix it shares with the term before it
    before = file_bytes()
    assert tail in before and keeper[4:].encode() in before  # the check can see the words: it can fail

    receipt = client.erase_user(user)

    assert not MemoryVersion.objects.filter(user_id=user).exists()
    assert not any(canary in str(v.before) + str(v.after) + v.reason for v in MemoryVersion.objects.all())
    assert MemoryVersion.objects.filter(user_id="someone-else").count() == kept_history  # others' history stays
    assert receipt.found and receipt.counts["threads"] == 1 and receipt.counts["messages"] == 2
    assert receipt.counts["memories"] == 5 and receipt.counts["images"] == 1 and receipt.counts["relations"] == 1
    assert receipt.storage["secure_delete"] is True and receipt.storage["wal_truncated"] is True
    assert receipt.storage["vacuumed"] is True
    after = file_bytes()
    assert tail not in after and user[:-4].encode() not in after
    assert keeper[4:].encode() in after  # someone else's words stay
    with connection.cursor() as cursor:  # the keyword index holds no entry for it either
        cursor.execute("SELECT count(*) FROM oam_search_chunks_fts WHERE oam_search_chunks_fts MATCH %s", [canary])
        assert cursor.fetchone()[0] == 0
    stored = ErasureReceipt.objects.get(pk=receipt.receipt_id)
    assert stored.subject_digest == erasure.subject_digest(client.project.pk, "user", user)
    assert user not in str(stored.__dict__)  # the receipt names the user only by digest


# --- what an erasure takes, and what it leaves ---------------------------------------------------


@pytest.fixture
def world(db):
    """Project default: users u1 (threads t1, t1b) and u2 (t2); u1 memories in t2 and in no thread; a
    relation in t2 from u2's memory to u1's; a project beta with its own u1."""
    client = AgentMemory(llm=None)
    t1 = client.create_thread(thread_id="t1", user_id="u1", agent_id="a1")
    client.create_thread(thread_id="t1b", user_id="u1", agent_id="a2").add_memory("u1 in t1b")
    t2 = client.create_thread(thread_id="t2", user_id="u2", agent_id="a1")
    t1.add_messages([{"role": "user", "content": "u1 speaks"}])
    t1.add_memory("u1 in t1")
    mine = t2.add_memory("u1 noted in t2", user_id="u1", memory_type="fact", memory_id="u1-in-t2")
    theirs = t2.add_memory("u2 own note", memory_id="u2-note")
    t2.link_records(mine, "fact", theirs, "memory", "supersedes")
    t2.add_memory("u1 floating", user_id="u1", thread_id=None, memory_id="u1-float")
    ThreadSummary.objects.create(thread_id=key("t1"), project=client.project, content="u1 summary")
    ExtractionJob.objects.create(thread_id=key("t1"), project=client.project, from_seq=1, to_seq=1, status="done")
    beta = AgentMemory(project=Project.objects.create(slug="beta"), llm=None)
    beta.create_thread(thread_id="t1", user_id="u1").add_memory("beta's u1")
    return client, beta


def test_erasing_a_user_takes_their_threads_and_every_record_scoped_to_them(world):
    client, beta = world
    assert Memory.objects.get(pk=key("u2-note")).status == "invalid"  # superseded by u1's memory
    receipt = client.erase_user("u1")
    assert receipt.counts == {"threads": 2, "messages": 1, "memories": 4, "images": 0, "relations": 1,
                              "chunks": receipt.counts["chunks"], "summaries": 1, "extraction_jobs": 1,
                              "admin_log_entries": 0, "api_keys": 0, "memory_versions": 4}
    assert receipt.counts["chunks"] == 5 and receipt.found and receipt.subject_id == "u1"
    assert set(Thread.objects.values_list("pk", flat=True)) == {key("t2"), key("t1", "beta")}
    assert not Memory.objects.filter(project=client.project, user_id="u1").exists()
    assert not SearchChunk.objects.filter(project=client.project, user_id="u1").exists()
    assert not RecordLink.objects.exists() and Memory.objects.get(pk=key("u2-note")).status == "valid"
    assert beta.get_thread("t1").list_memories()[0].content == "beta's u1"  # another project's u1 is another user
    again = client.erase_user("u1")
    assert not again.found and sum(again.counts.values()) == 0
    assert ErasureReceipt.objects.filter(project=client.project).count() == 2


def test_the_sdk_methods_return_counts_and_cascade_false_erases_nothing(world):
    client, _ = world
    assert client.delete_user("u1", cascade=False) == 0
    assert Thread.objects.filter(pk=key("t1")).exists()
    assert client.delete_agent("a2") == 1  # t1b
    assert not Thread.objects.filter(pk=key("t1b")).exists() and Thread.objects.filter(pk=key("t1")).exists()
    assert client.delete_user("u1") == 1 and client.delete_user("u1") == 0
    with pytest.raises(ValueError, match="user_id"):
        client.delete_user("  ")
    with pytest.raises(TypeError, match="user_id"):
        client.delete_user(7)


def test_a_restricted_client_erases_only_itself(world):
    client, _ = world
    u1 = AgentMemory(tenant=Tenant(project=client.project, user_id="u1"), llm=None)
    with pytest.raises(OutOfScope, match="user_id"):
        u1.erase_user("u2")
    with pytest.raises(OutOfScope, match="agent_id"):
        u1.erase_agent("a1")  # would erase other users' threads
    assert u1.erase_user("u1").found and client.get_thread("t2")


def test_a_memory_in_no_thread_can_be_deleted_by_id(world):
    client, _ = world
    assert client.get_thread("t1").delete_memory("u1-float") == 0  # no thread reaches it
    assert client.delete_memory("u1-float") == 1 and client.delete_memory("u1-float") == 0
    assert not SearchChunk.objects.filter(record_id=key("u1-float")).exists()
    restricted = AgentMemory(tenant=Tenant(project=client.project, user_id="u2"), llm=None)
    assert restricted.delete_memory("u1-in-t2") == 0 and Memory.objects.filter(pk=key("u1-in-t2")).exists()


# --- expired records --------------------------------------------------------------------------------


def test_expired_records_are_purged_with_their_search_data(thread):
    ids = thread.add_messages([{"role": "user", "content": f"turn {i}", "id": f"m{i}"} for i in range(5)])
    old = thread.add_memory("short-lived fact", memory_id="old")
    keep = thread.add_memory("lasting fact", memory_id="keep")
    image = thread.add_image(samples.png(), description="a short-lived picture", image_id="pic")
    past = timezone.now() - dt.timedelta(seconds=1)
    for model, pks in ((Message, ["m1", "m2"]), (Memory, [old]), (Image, [image])):
        model.objects.filter(pk__in=[key(p) for p in pks]).update(expires_at=past)
    SearchChunk.objects.filter(record_id__in=[key(p) for p in ("m1", "m2", old, image)]).update(expires_at=past)
    out = io.StringIO()
    call_command("purge_expired", stdout=out)
    assert out.getvalue().strip() == "chunks: 4, images: 1, memories: 1, memory_versions: 1, messages: 2"
    assert sorted(Message.objects.values_list("pk", flat=True)) == [key(i) for i in ("m0", "m3", "m4")]
    assert list(Memory.objects.values_list("pk", flat=True)) == [key(keep)]
    assert not Image.objects.exists()
    assert not SearchChunk.objects.filter(record_id__in=[key(p) for p in ("m1", "m2", old, image)]).exists()
    context = SearchChunk.objects.get(record_id=key("m3")).context.split("\n")
    assert context == ["user: turn 0", "user: turn 3", "user: turn 4"]  # the gap closed in the neighbours
    assert erasure.expired_purge() == {} and ids


# --- every other delete path ------------------------------------------------------------------------


@pytest.fixture
def root(db):
    from django.contrib.auth import get_user_model
    from django.test import Client

    browser = Client()
    browser.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only"))
    return browser


def test_the_admins_bulk_delete_takes_search_data_and_relations_too(root, thread):
    messages = thread.add_messages([{"role": "user", "content": "hello there"},
                                    {"role": "user", "content": [{"type": "text", "text": "see"},
                                                                 {"type": "image", "bytes": samples.png(),
                                                                  "description": "attached"}]}])
    a = thread.add_memory("keeps bees", memory_id="a")
    b = thread.add_memory("keeps bees now in Porto", memory_id="b")
    thread.link_records(b, "memory", a, "memory", "supersedes")
    standalone = thread.add_image(samples.png(), description="a beehive", image_id="hive")
    changelist = "/admin/memory/{}/"
    for model, pks in (("message", [messages[0]]), ("memory", [b]), ("image", [standalone, "attached-missing"])):
        response = root.post(changelist.format(model), {"action": "delete_selected", "post": "yes",
                                                         "_selected_action": [key(p) for p in pks]})
        assert response.status_code == 302, model
    assert not Message.objects.filter(pk=key(messages[0])).exists()
    assert not Memory.objects.filter(pk=key(b)).exists() and not RecordLink.objects.exists()
    assert Memory.objects.get(pk=key(a)).status == "valid"  # the supersedes relation went: valid again
    assert not Image.objects.filter(pk=key(standalone)).exists()
    gone = [key(messages[0]), key(b), key(standalone)]
    assert not SearchChunk.objects.filter(record_id__in=gone).exists()
    assert Image.objects.filter(message_id=key(messages[1])).exists()  # an image part goes with its message


def test_an_erasure_over_http_answers_the_receipt(world):
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    admin_row, raw = api_key_create(name="ops", permission="admin")
    admin = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    writer = JsonClient(headers={"Authorization": f"Bearer {api_key_create(name='w')[1]}"})
    assert writer.delete("/api/users/u1").status_code == 403
    response = admin.delete("/api/users/u1")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["subject"], body["subject_id"], body["found"], body["counts"]["threads"]) == ("user", "u1", True, 2)
    assert body["requested_by"] == f"api-key:{admin_row.pk}"
    listed = admin.get("/api/erasures").json()["items"]
    assert [r["receipt_id"] for r in listed] == [body["receipt_id"]] and listed[0]["subject_id"] == ""
    assert admin.get(f"/api/erasures/{body['receipt_id']}").json()["counts"] == body["counts"]
    assert admin.get(f"/api/erasures/{uuid.uuid4()}").status_code == 404
    assert admin.get("/api/erasures/not-a-uuid").status_code == 422
    assert admin.delete("/api/agents/a1").json()["counts"]["threads"] == 1  # t2
    assert writer.delete("/api/memories/u1-float").status_code == 404  # erased with u1


# --- FTS5 segments with more than one leaf page ----------------------------------------------------


def fts_index_keys(word: str) -> int:
    """How many b-tree separator keys of the keyword index (``<fts>_idx``, one per leaf page) contain ``word``."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {KEYWORD_INDEX}_idx WHERE instr(term, CAST(%s AS BLOB)) > 0",
                       [word])
        return cursor.fetchone()[0]


def fts_segments() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(DISTINCT segid) FROM {KEYWORD_INDEX}_idx")
        return cursor.fetchone()[0]


@pytest.mark.backend("sqlite")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("segments, gone_by", [("merged", "erasure"), ("one", "expiry"), ("merged", "deletes")])
def test_no_page_boundary_key_of_erased_words_survives_in_the_keyword_index(segments, gone_by):
    """Found by a security review: secure-delete removes an erased term's postings from an FTS5 segment, but
    the segment's b-tree keeps the first term of each leaf page as a separator key (``<fts>_idx``). A user
    whose words spread over several leaf pages of a segment that also holds another user's words (merged by
    FTS5's automerge; or the single segment an earlier rewrite left, on which a plain ``optimize`` does
    nothing) left some there, after an erasure or after the expiry purge."""
    import random

    client = AgentMemory(llm=None)
    canary = "kanarifts"
    victim = client.create_thread(thread_id="t-u5", user_id="u5", agent_id="a1")
    victim.add_messages([{"role": "user", "content": " ".join(f"{canary}{3 * i + j:04d}{'abcdef'[(3 * i + j) % 6]}"
                                                              for j in range(3))} for i in range(100)])
    rng = random.Random(12)
    words = ["".join(rng.choice("bcdghlmnprstvwz") for _ in range(rng.randint(5, 10))) for _ in range(400)]
    other = client.create_thread(thread_id="t-u6", user_id="u6", agent_id="a1")
    other.add_messages([{"role": "user", "content": " ".join(rng.sample(words, 6))} for _ in range(100)])
    for _ in range(6):  # more segments: FTS5's automerge merges them, the victim's with the others'
        other.add_messages([{"role": "user", "content": " ".join(rng.sample(words, 6))} for _ in range(10)])
    if segments == "one":  # as an earlier erasure leaves the index
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {KEYWORD_INDEX}({KEYWORD_INDEX}) VALUES ('optimize')")
        assert fts_segments() == 1
    assert fts_index_keys(canary) > 0  # the precondition: a leaf page of the victim's words shared with u6's

    if gone_by == "erasure":
        storage = client.erase_user("u5").storage
    elif gone_by == "deletes":  # one at a time, as an application deletes (client, API, staff pages)
        scrub._remember_scrubbed_deletes(connection)  # the state the last scrub left
        assert scrub.chunk_deletes_since_scrub() is False
        for stored in list(Message.objects.filter(thread_id=key("t-u5")).values_list("id", flat=True)):
            assert victim.delete_message(public_id(stored)) == 1
        assert scrub.chunk_deletes_since_scrub() is True
        assert erasure.expired_purge() == Counter()  # nothing expired: the scrub runs for the deletes
        assert scrub.chunk_deletes_since_scrub() is False
        # In the whole suite another connection of this process can keep the purge's WAL checkpoint
        # from finishing (the scrub reports that as wal_truncated False); one more, once it is free.
        for _ in range(50):
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                if cursor.fetchone()[0] == 0:
                    break
            time.sleep(0.1)
        storage = {"keyword_index_optimized": True, "wal_truncated": True}  # not reported by the purge
    else:
        past = timezone.now() - dt.timedelta(seconds=1)
        Message.objects.filter(thread_id=key("t-u5")).update(expires_at=past)
        SearchChunk.objects.filter(thread_id=key("t-u5")).update(expires_at=past)
        assert erasure.expired_purge()["messages"] == 100
        storage = {"keyword_index_optimized": True, "wal_truncated": True}  # not reported by the purge

    assert fts_index_keys(canary) == 0
    assert canary.encode() not in file_bytes()
    assert storage["keyword_index_optimized"] is True and storage["wal_truncated"] is True
    assert not Message.objects.filter(thread_id=key("t-u5")).exists()
    with connection.cursor() as cursor:  # the other user's words are still found, the marker row is gone
        for word, found in ((words[0], True), (scrub.REWRITE_MARKER[1], False)):
            cursor.execute(f"SELECT count(*) FROM {KEYWORD_INDEX} WHERE {KEYWORD_INDEX} MATCH %s",
                           [word])
            assert (cursor.fetchone()[0] > 0) is found


# --- the admin's history ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_admins_history_keeps_no_content_and_goes_with_what_it_names():
    """Found by a security review: the admin writes ``str(record)`` into ``django_admin_log`` on every change
    and delete, and a memory's ``str`` began with its content; an erasure left those rows."""
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.admin.utils import quote
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType
    from django.test import Client

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    browser = Client()
    browser.force_login(root)
    client = AgentMemory(llm=None)
    canary = f"kanariadmin{uuid.uuid4().hex[:12]}"
    thread = client.create_thread(thread_id="t-u1", user_id="u1", agent_id="a1")
    [said] = thread.add_messages([{"role": "user", "content": f"my code is {canary}0", "id": "said"}])
    kept = thread.add_memory(f"u1 secret {canary}1 pizza", memory_id="kept")
    doomed = thread.add_memory(f"u1 secret {canary}2 pasta", memory_id="doomed")
    thread.link_records(kept, "memory", doomed, "memory", "supports", relation_id="rel")
    form = {"memory_type": "fact", "content": f"u1 secret {canary}3 pizza", "metadata": "{}", "status": "valid",
            "timestamp": "", "expires_at_0": "", "expires_at_1": ""}
    assert browser.post(f"/admin/memory/memory/{quote(key(kept))}/change/", form).status_code == 302
    assert browser.post(f"/admin/memory/message/{quote(key(said))}/change/", {
        "content": f"my code is {canary}4", "metadata": "{}", "status": "valid", "expires_at_0": "",
        "expires_at_1": ""}).status_code == 302
    assert browser.post(f"/admin/memory/recordlink/{quote(key('rel'))}/change/", {
        "relation_type": "refines", "opposite_relation_type": "is_refined_by", "metadata": "{}",
        "timestamp": ""}).status_code == 302
    assert sorted(LogEntry.objects.values_list("object_repr", flat=True)) == [
        "fact kept", "message said", "relation rel"]  # kinds and ids, no content
    # an entry the admin wrote before records stopped showing their content in str()
    LogEntry.objects.create(user=root, content_type=ContentType.objects.get_for_model(Memory),
                            object_id=key(kept), object_repr=f"[memory] u1 secret {canary}1 pizza",
                            action_flag=CHANGE, change_message="[]")
    LogEntry.objects.create(user=root, content_type=ContentType.objects.get_for_model(Memory),
                            object_id=key(doomed), object_repr=f"[memory] u1 secret {canary}2 pasta",
                            action_flag=CHANGE, change_message="[]")

    # the admin's own delete: the record's history goes with it, and its text leaves the file
    assert browser.post(f"/admin/memory/memory/{quote(key(doomed))}/delete/", {"post": "yes"}).status_code == 302
    assert not LogEntry.objects.filter(object_id__in=[key(doomed), key("rel")]).exists()
    # memory history (memory.records.history) keeps a deleted memory's versions until its user is erased: the text
    # is in oam_memory_versions only, and leaves the file with the erasure below
    [gone] = MemoryVersion.objects.filter(memory_id=key(doomed), action="delete")
    assert gone.actor_kind == "admin" and gone.actor_id == "root" and f"{canary}2" in gone.before["content"]
    assert not Memory.objects.filter(pk=key(doomed)).exists()
    assert not SearchChunk.objects.filter(text__contains=f"{canary}2").exists()
    assert LogEntry.objects.filter(object_id__in=[key(kept), key(said)]).count() == 3

    receipt = client.erase_user("u1")

    assert receipt.counts["admin_log_entries"] == 3
    assert not LogEntry.objects.exists() and not MemoryVersion.objects.exists()
    assert canary.encode() not in file_bytes()


@pytest.mark.backend("sqlite")
@pytest.mark.django_db(transaction=True)
def test_the_scrub_vacuums_only_a_file_within_its_limit_and_after_the_callers_commit(settings):
    """``VACUUM`` rebuilds every page (a rebuilt b-tree page can keep a moved cell's old bytes in its gap);
    it holds the write lock for a time that grows with the file, so ``OAM_SCRUB_VACUUM_MAX_MB`` bounds it."""
    from django.db import transaction

    AgentMemory(llm=None).create_thread(thread_id="t-v", user_id="uv").add_messages(
        [{"role": "user", "content": "one"}])
    settings.OAM_SCRUB_VACUUM_MAX_MB = 0
    assert scrub.storage_scrub()["vacuumed"] is False
    settings.OAM_SCRUB_VACUUM_MAX_MB = 512
    done = scrub.storage_scrub()
    assert done["vacuumed"] is True and done["wal_truncated"] is True and "error" not in done
    with connection.cursor() as cursor:  # a vacuumed file has no free page left
        cursor.execute("PRAGMA freelist_count")
        assert cursor.fetchone()[0] == 0
    with transaction.atomic():
        done = scrub.storage_scrub()
        assert done["vacuumed"] == "at commit" and done["wal_truncated"] == "at commit"


# --- found by a security review: history after erasure ----------------------------------------------------------------


def test_erasing_nobody_does_not_scrub_the_shared_file(world, monkeypatch):
    """Found by a security review: ``DELETE /api/users/nobody0`` answered found: false and still ran the scrub
    (keyword index rewrite, VACUUM, WAL truncate) over the file every project shares, a loop of them unbounded
    shared work. Nothing deleted: no scrub, and the receipt says so."""
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    scrubs = []
    real_scrub = erasure.storage_scrub
    monkeypatch.setattr(erasure, "storage_scrub", lambda *a, **k: scrubs.append(1) or real_scrub(*a, **k))
    client, _ = world
    admin = JsonClient(headers={"Authorization": f"Bearer {api_key_create(name='ops', permission='admin')[1]}"})
    for path in ("/api/users/nobody0", "/api/agents/nobody0"):
        body = admin.delete(path).json()
        assert body["found"] is False and sum(body["counts"].values()) == 0
        assert body["storage"] == {"scrubbed": False, "reason": "nothing was deleted"}
    assert client.delete_user("nobody1") == 0 and not client.erase_agent("nobody1").found
    assert scrubs == []
    assert ErasureReceipt.objects.count() == 4  # the receipts themselves are kept
    # a key fixed to a user with no data is still erased with the user, and that is a delete: the scrub runs
    api_key_create(name="ghost's widget", user_id="ghost")
    receipt = client.erase_user("ghost")
    assert receipt.counts["api_keys"] == 1 and receipt.storage["scrubbed"] is True and scrubs == [1]
    assert client.erase_user("u1").storage["scrubbed"] is True and scrubs == [1, 1]


@pytest.fixture
def shared(db):
    """Thread c5 of user u1, holding u1's memories and two memories of user u2 (linked), made with an
    unrestricted client; the client, and one restricted to u1."""
    client = AgentMemory(llm=None)
    c5 = client.create_thread(thread_id="c5", user_id="u1", agent_id="a1")
    c5.add_messages([{"role": "user", "content": "u1 talks about zebras"}])
    c5.add_memory("u1 likes zebras", memory_id="u1-zebra")
    c5.add_memory("u2 keeps a llama named Pedro", user_id="u2", memory_id="u2-llama", memory_type="fact")
    c5.add_memory("u2 keeps an alpaca", user_id="u2", memory_id="u2-alpaca", memory_type="fact")
    c5.update_memory("u2-alpaca", content="u2 keeps an alpaca named Rosa")
    c5.link_records("u2-alpaca", "fact", "u2-llama", "fact", "supports", relation_id="u2-rel")
    return client, AgentMemory(tenant=Tenant(project=client.project, user_id="u1"), llm=None)


def assert_detached(client, ids=("u2-llama", "u2-alpaca")):
    """u2's memories survived, stored in no thread, with their chunks, history and relation."""
    rows = Memory.objects.filter(pk__in=[key(i) for i in ids])
    assert sorted(rows.values_list("pk", "thread_id")) == sorted((key(i), None) for i in ids)
    assert set(SearchChunk.objects.filter(record_id__in=[key(i) for i in ids]).values_list("thread_id", flat=True)) \
        == {None}
    versions = MemoryVersion.objects.filter(memory_id__in=[key(i) for i in ids])
    assert versions.count() == 3 and set(versions.values_list("thread_id", flat=True)) == {None}
    assert RecordLink.objects.filter(pk=key("u2-rel")).exists()
    found = {r.record_id for r in client.search("llama Pedro alpaca Rosa", user_id="u2")}
    assert {"u2-llama", "u2-alpaca"} <= found
    # a thread created again under the same id sees none of it
    again = client.create_thread(thread_id="c5", user_id="u3")
    assert again.list_memories() == [] and list(again.record_links()) == []
    with pytest.raises(KeyError):
        again.get_memory_history("u2-llama")


def test_a_user_restricted_thread_delete_leaves_another_users_records(shared):
    """Found by a security review: a write key fixed to u1 deleted thread c5 (204) and u2's memory filed in it
    was gone. docs/erasure.md's rule: a user-restricted key never changes another user's records."""
    client, u1 = shared
    assert u1.delete_thread("c5") == 1
    assert not Thread.objects.filter(pk=key("c5")).exists() and not Memory.objects.filter(pk=key("u1-zebra")).exists()
    assert not MemoryVersion.objects.filter(memory_id=key("u1-zebra")).exists()
    assert not SearchChunk.objects.filter(record_id=key("u1-zebra")).exists()
    assert_detached(client)
    assert u1.delete_memory("u2-llama") == 0 and client.delete_memory("u2-llama") == 1  # still u2's, reachable


def test_a_user_restricted_thread_delete_over_http(shared):
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    u1 = JsonClient(headers={"Authorization": f"Bearer {api_key_create(name='w', user_id='u1')[1]}"})
    assert u1.delete("/api/threads/c5").status_code == 204
    assert Memory.objects.filter(pk=key("u2-llama"), thread_id=None).exists()
    assert not Memory.objects.filter(pk=key("u1-zebra")).exists()


def test_an_unrestricted_thread_delete_takes_everything_as_the_spec_says(shared):
    client, _ = shared
    assert client.delete_thread("c5") == 1
    assert not Memory.objects.filter(pk__in=[key("u1-zebra"), key("u2-llama"), key("u2-alpaca")]).exists()
    assert not MemoryVersion.objects.exists() and not RecordLink.objects.exists()
    assert not SearchChunk.objects.exists()


def test_erasing_a_user_leaves_another_users_records_filed_in_their_threads(shared):
    client, u1 = shared
    receipt = u1.erase_user("u1")
    assert receipt.counts["threads"] == 1 and receipt.counts["memories"] == 1 and receipt.counts["relations"] == 0
    assert receipt.counts["memory_versions"] == 1  # u1-zebra's create
    assert not Memory.objects.filter(user_id="u1").exists() and not Message.objects.exists()
    assert not SearchChunk.objects.filter(user_id="u1").exists()
    assert_detached(client)


@pytest.mark.backend("sqlite")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["thread delete", "expiry"])
def test_the_history_of_removed_memories_leaves_the_file(how):
    """Found by a security review: ``oam_memory_versions`` kept the text of memories purged by their expiry and
    of memories deleted with their thread, which nothing could read any more. The scrub that follows (the
    purge's own, or the next periodic purge's after a thread delete) leaves none of it in the file."""
    client = AgentMemory(llm=None)
    canary = f"qzhistory{uuid.uuid4().hex[:16]}"
    keeper = f"qzkeeper{uuid.uuid4().hex[:16]}"
    doomed = client.create_thread(thread_id="t-doomed", user_id="u1")
    mid = doomed.add_memory(f"{canary}a first words", memory_id="hist", ttl_days=1)
    doomed.update_memory(mid, content=f"{canary}b second words")
    doomed.delete_memory(doomed.add_memory(f"{canary}c deleted alone"))  # kept for undo until the thread goes
    client.create_thread(thread_id="t-kept", user_id="u1").add_memory(f"{keeper} stays")
    checkpoint()
    assert canary.encode() in file_bytes() and keeper.encode() in file_bytes()
    if how == "thread delete":
        assert client.delete_thread("t-doomed") == 1
        counts = erasure.expired_purge()  # nothing expired: it scrubs because chunks were deleted
        assert not counts.get("memories")
    else:
        counts = erasure.expired_purge(now=timezone.now() + dt.timedelta(days=2))
        assert counts["memories"] == 1 and counts["memory_versions"] == 2
        # the single delete's history is kept (its undo still works): its text stays, on purpose (undo)
        assert any(f"{canary}c" in str(v.before) for v in MemoryVersion.objects.filter(action="delete"))
    assert not MemoryVersion.objects.filter(memory_id=key("hist")).exists()
    after = file_bytes()
    assert f"{canary}a".encode() not in after and f"{canary}b".encode() not in after
    assert (f"{canary}c".encode() in after) is (how == "expiry")
    assert keeper.encode() in after


def test_an_erasure_over_http_leaves_another_users_records_filed_in_the_erased_users_threads(shared):
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    admin = JsonClient(headers={"Authorization": f"Bearer {api_key_create(name='ops', permission='admin')[1]}"})
    body = admin.delete("/api/users/u1").json()
    assert body["found"] is True and body["counts"]["memories"] == 1 and body["storage"]["scrubbed"] is True
    client, _ = shared
    assert_detached(client)
    assert admin.delete("/api/users/u2").json()["counts"]["memories"] == 2  # now u2's erasure takes them
    assert not Memory.objects.exists() and not MemoryVersion.objects.exists() and not RecordLink.objects.exists()


@pytest.mark.backend("postgresql")
@pytest.mark.django_db(transaction=True)
def test_an_erasure_on_postgresql_vacuums_every_table_that_held_the_users_text():
    """PostgreSQL keeps a deleted row as a dead tuple until VACUUM; the scrub vacuums each table that holds text
    (``memory.services.scrub.VACUUMED_TABLES``), after the erasure's commit. What it cannot do (zero the freed
    space inside a page, WAL, backups) is stated in docs/databases.md and docs/erasure.md."""
    client = AgentMemory(llm=None)
    canary = f"qzcanary{uuid.uuid4().hex[:16]}"
    fill(client, "pg-user", canary)

    def vacuums() -> dict[str, int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                           [list(scrub.VACUUMED_TABLES)])
            return dict(cursor.fetchall())

    before = vacuums()
    receipt = client.erase_user("pg-user")
    assert receipt.storage["vendor"] == "postgresql" and receipt.storage["vacuumed"] is True
    assert "error" not in receipt.storage
    after = vacuums()
    assert set(after) == set(scrub.VACUUMED_TABLES)
    assert all(after[table] == before.get(table, 0) + 1 for table in scrub.VACUUMED_TABLES), (before, after)
    assert not SearchChunk.objects.filter(text__contains=canary).exists()
    assert not Message.objects.filter(content__contains=canary).exists()
