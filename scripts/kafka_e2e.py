#!/usr/bin/python3
"""Kafka clients against `make run` (scripts/kafka-e2e.sh): Debian's
confluent-kafka-python (librdkafka), a client nobody here wrote.

  kafka_e2e.py produce-consume A_BOOTSTRAP B_BOOTSTRAP TOPIC N
      produces N keyed records (acks=all, not idempotent) to TOPIC on A,
      checks every delivery report, reads every partition of A from the
      start and checks each record is at the offset it was acknowledged
      with, then reads B's mirrored copy until it holds the same records at
      the same offsets.
  kafka_e2e.py produce-refused BOOTSTRAP TOPIC
      produces one record to a mirror topic: refused (INVALID_REQUEST).
  kafka_e2e.py admin BOOTSTRAP TOPIC
      creates TOPIC (3 partitions, 3 replicas, min.insync.replicas 2) with
      the AdminClient, reads its config back, produces to every partition,
      deletes it.
  kafka_e2e.py produce-idempotent BOOTSTRAP TOPIC FIRST N
      produces values idem-FIRST .. idem-(FIRST+N-1) with an idempotent
      producer (enable.idempotence, acks=all, up to 5 requests in flight)
      and checks every delivery report and that each partition's
      acknowledged offsets are dense.
  kafka_e2e.py exactly-once BOOTSTRAP TOPIC N
      reads every partition of TOPIC from the start: values idem-0 ..
      idem-(N-1), each exactly once, nothing else.
  kafka_e2e.py group-resume BOOTSTRAP TOPIC N
      creates TOPIC (3 partitions), produces g-0 .. g-(N-1); a consumer of
      group TOPIC-grp (subscribe, manual commit) reads at least half,
      commits its positions and leaves; the committed offsets are its
      positions; a second consumer of the group reads the rest: every
      record is read exactly once across the two.
  kafka_e2e.py group-commit-half BOOTSTRAP TOPIC N GROUP
      produces fo-0 .. fo-(N-1) to the existing TOPIC; a consumer of GROUP
      reads exactly N/2, commits and leaves; prints the committed offsets as
      JSON on its last line.
  kafka_e2e.py group-resume-at BOOTSTRAP TOPIC N GROUP COMMITTED_JSON
      the committed offsets of GROUP here are COMMITTED_JSON (synced from
      the other cluster); a consumer of GROUP reads every partition to its
      end: each starts at its committed offset and the records read are the
      N minus the committed ones, none twice.

  kafka_e2e.py produce-read-back BOOTSTRAP TOPIC N
      produces N records (USER-py-0 ..) with an idempotent producer, then
      reads each back at the offset it was acknowledged with (a consumer
      that assigns the partitions; GROUP_AUTHORIZATION_FAILED from its
      group coordinator lookup is counted, not fatal: check 11's user has
      no group ACL).

Every client connects to make run's secure listeners with mutual TLS
(security.protocol ssl) as User:admin, a super user; KAFKA_E2E_USER=alice
presents alice's certificate instead (run/tls/<user>.crt, .key; the
directory is KAFKA_E2E_TLS, default run/tls next to this script). With
KAFKA_E2E_SASL_MECHANISM (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) clients use
SASL_SSL instead, with only the CA, as KAFKA_E2E_SASL_USER with the password
on the first line of KAFKA_E2E_SASL_PASSWORD_FILE. SECURITY, built in one
place (_security), holds these settings.

Prints one line per check; exits 0 when all passed.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


_TLS_DIR = os.environ.get("KAFKA_E2E_TLS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "run", "tls")
_USER = os.environ.get("KAFKA_E2E_USER") or "admin"
_SASL_MECHANISM = os.environ.get("KAFKA_E2E_SASL_MECHANISM")


def _security():
    """The security settings merged into every client's configuration
    (librdkafka's names): mutual TLS as _USER, or with
    KAFKA_E2E_SASL_MECHANISM SASL_SSL as KAFKA_E2E_SASL_USER, the password
    the first line of KAFKA_E2E_SASL_PASSWORD_FILE, and only the CA (no
    client certificate)."""
    ca = os.path.join(_TLS_DIR, "ca.crt")
    if not _SASL_MECHANISM:
        return {
            "security.protocol": "ssl",
            "ssl.ca.location": ca,
            "ssl.certificate.location": os.path.join(_TLS_DIR, _USER + ".crt"),
            "ssl.key.location": os.path.join(_TLS_DIR, _USER + ".key"),
        }
    with open(os.environ["KAFKA_E2E_SASL_PASSWORD_FILE"]) as f:
        password = f.readline().rstrip("\r\n")
    return {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": ca,
        "sasl.mechanisms": _SASL_MECHANISM,
        "sasl.username": os.environ["KAFKA_E2E_SASL_USER"],
        "sasl.password": password,
    }


SECURITY = _security()


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def consume_all(bootstrap, topic, partitions, want, timeout, tolerated=None):
    """Reads partitions from offset 0 until every value in want is seen at
    its (partition, offset), or timeout; returns {value: (p, offset)}.
    Errors with a code in tolerated are counted there ({code: n}), any
    other fails."""
    c = Consumer({**SECURITY, "bootstrap.servers": bootstrap, "group.id": "kafka-e2e",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = {}
    seen = 0  # values of want read (the topic holds other records too)
    deadline = time.time() + timeout
    while seen < len(want) and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if tolerated is not None and m.error().code() in tolerated:
                tolerated[m.error().code()] += 1
                continue
            fail("%s: consume error %s" % (bootstrap, m.error()))
        v = m.value().decode()
        if v in got:
            fail("%s: %s read twice" % (bootstrap, v))
        got[v] = (m.partition(), m.offset())
        seen += v in want
    c.close()
    return got


def produce_consume(a, b, topic, n):
    p = Producer({**SECURITY, "bootstrap.servers": a, "acks": "all", "enable.idempotence": False,
                  "linger.ms": 5})
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    for i in range(n):
        p.produce(topic, key=b"key-%d" % (i % 13), value=b"e2e-%d" % i, on_delivery=report)
        p.poll(0)
    left = p.flush(30)
    if left or errors or len(acked) != n:
        fail("produce: %d acknowledged of %d, %d unflushed, errors %s" % (len(acked), n, left, errors[:3]))
    parts = sorted({pt for pt, _ in acked.values()})
    print("ok   produced %d records to %s on A over partitions %s (acks=all)" % (n, topic, parts))
    meta = p.list_topics(topic, timeout=10).topics[topic]
    for src, name in ((a, "A"), (b, "B (mirrored)")):
        got = consume_all(src, topic, sorted(meta.partitions), acked, 60)
        missing = [v for v in acked if v not in got]
        wrong = [(v, got[v], acked[v]) for v in acked if v in got and got[v] != acked[v]]
        if missing or wrong:
            fail("%s: %d of %d records missing (%s), %d at another offset (%s)" % (
                name, len(missing), n, missing[:3], len(wrong), wrong[:3]))
        print("ok   %s: all %d records read at their acknowledged offsets" % (name, n))


def produce_refused(bootstrap, topic):
    p = Producer({**SECURITY, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                  "message.timeout.ms": 10000})
    res = []
    p.produce(topic, value=b"not-on-a-mirror", on_delivery=lambda err, msg: res.append(err))
    p.flush(15)
    if len(res) != 1 or res[0] is None or res[0].code() != KafkaError.INVALID_REQUEST:
        fail("produce to mirror topic %s: %s, want INVALID_REQUEST" % (topic, res))
    print("ok   produce to B's mirror topic %s refused: %s" % (topic, res[0].str()))


def admin(bootstrap, topic):
    a = AdminClient({**SECURITY, "bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                   config={"min.insync.replicas": "2"})], operation_timeout=10)
    fs[topic].result(timeout=15)
    print("ok   AdminClient created %s" % topic)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = a.describe_configs([res])[res].result(timeout=15)
    if cfg["min.insync.replicas"].value != "2":
        fail("describe_configs: min.insync.replicas = %s" % cfg["min.insync.replicas"].value)
    print("ok   describe_configs: min.insync.replicas 2")
    p = Producer({**SECURITY, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
    acked = []
    deadline = time.time() + 30
    while len(acked) < 3 and time.time() < deadline:  # leaders may still be taking over
        acked.clear()
        for part in range(3):
            p.produce(topic, value=b"x", partition=part, on_delivery=lambda err, msg: acked.append(msg.partition()) if err is None else None)
        p.flush(10)
        if len(acked) < 3:
            time.sleep(0.5)
    if sorted(acked) != [0, 1, 2]:
        fail("produce to the new topic: acknowledged on partitions %s" % acked)
    print("ok   produced to all 3 partitions")
    a.delete_topics([topic], operation_timeout=10)[topic].result(timeout=15)
    # As with Kafka, DeleteTopics answers once the controller has deleted the
    # topic; each broker drops it when it applies that metadata change, so a
    # Metadata request sent at once to another broker may still list it
    # (Kafka's AdminClient documents the same). Ask until none does.
    deleted, deadline = time.time(), time.time() + 10
    while True:
        md = a.list_topics(timeout=10)
        if topic not in md.topics or md.topics[topic].error is not None:
            break
        if time.time() > deadline:
            fail("%s still listed 10 s after delete_topics" % topic)
        time.sleep(0.05)
    print("ok   delete_topics removed %s (unlisted %d ms after the answer)" % (topic, (time.time() - deleted) * 1000))


def idempotent_produce(bootstrap, topic, values):
    """Produces values (keyed) with an idempotent producer (acks=all, up to
    5 requests in flight); fails unless every one is acknowledged and each
    partition's acknowledged offsets are dense. Returns {value: (p, offset)}."""
    p = Producer({**SECURITY, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "max.in.flight.requests.per.connection": 5, "linger.ms": 5,
                  "batch.num.messages": 50, "message.timeout.ms": 60000})
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append("%s: %s" % (msg.value(), err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, key=b"k%d" % (i % 13), value=v.encode(), on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        fail("idempotent produce to %s: %d undelivered, errors %s" % (bootstrap, left, errors[:3]))
    per_partition = {}
    for part, off in acked.values():
        per_partition.setdefault(part, []).append(off)
    for part, offs in sorted(per_partition.items()):
        offs.sort()
        if offs != list(range(offs[0], offs[0] + len(offs))):
            fail("partition %d: acknowledged offsets are not dense: %s..." % (part, offs[:10]))
    if len(acked) != len(values):
        fail("%d of %d acknowledged" % (len(acked), len(values)))
    return acked


def produce_idempotent(bootstrap, topic, first, n):
    acked = idempotent_produce(bootstrap, topic, ["idem-%d" % i for i in range(first, first + n)])
    parts = {part for part, _ in acked.values()}
    print("ok   idempotent producer on %s: %d records acknowledged, dense offsets on %d partitions" % (bootstrap, n, len(parts)))


def produce_read_back(bootstrap, topic, n):
    """As the SASL user: n records with an idempotent producer, then each
    read back at its acknowledged offset (assign, no group: the user has
    Write and Read on the topic only, so the consumer's group coordinator
    lookup is refused GROUP_AUTHORIZATION_FAILED, which is counted)."""
    who = SECURITY.get("sasl.username", _USER)
    values = ["%s-py-%d" % (who, i) for i in range(n)]
    acked = idempotent_produce(bootstrap, topic, values)
    parts = sorted({part for part, _ in acked.values()})
    tolerated = {KafkaError.GROUP_AUTHORIZATION_FAILED: 0}
    got = consume_all(bootstrap, topic, parts, set(values), 60, tolerated)
    missing = [v for v in values if v not in got]
    wrong = [(v, got[v], acked[v]) for v in values if v in got and got[v] != acked[v]]
    if missing or wrong:
        fail("%d of %d records missing (%s), %d at another offset (%s)" % (
            len(missing), n, missing[:3], len(wrong), wrong[:3]))
    print("ok   %s as %s (%s): idempotent producer, %d records acknowledged on partitions %s and read back at their offsets%s" % (
        SECURITY["security.protocol"].upper(), who, SECURITY.get("sasl.mechanisms", "certificate"), n, parts,
        " (group coordinator refused: GROUP_AUTHORIZATION_FAILED x%d)" % tolerated[KafkaError.GROUP_AUTHORIZATION_FAILED]
        if tolerated[KafkaError.GROUP_AUTHORIZATION_FAILED] else ""))


def exactly_once(bootstrap, topic, n):
    c = Consumer({**SECURITY, "bootstrap.servers": bootstrap, "group.id": "kafka-e2e-unused", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    md = c.list_topics(topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, part, 0) for part in parts])
    seen = {}
    eof = set()
    deadline = time.time() + 60
    while len(eof) < len(parts) and time.time() < deadline:
        for m in c.consume(500, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                fail("consume: %s" % m.error())
            v = m.value().decode()
            if v in seen:
                fail("%s twice: %s and %d/%d" % (v, seen[v], m.partition(), m.offset()))
            seen[v] = "%d/%d" % (m.partition(), m.offset())
    c.close()
    want = set("idem-%d" % i for i in range(n))
    if set(seen) != want:
        fail("read %d values; missing %d, unexpected %d" % (len(seen), len(want - set(seen)), len(set(seen) - want)))
    print("ok   %s on %s holds idem-0..idem-%d exactly once" % (topic, bootstrap, n - 1))



def group_resume(bootstrap, topic, n):
    admin = AdminClient({**SECURITY, "bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    p = Producer({**SECURITY, "bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 7), value=b"g-%d" % i)
    if p.flush(30) != 0:
        fail("produce: records left unsent")
    group = topic + "-grp"
    conf = {**SECURITY, "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000}

    def read(c, until, first):
        got = {}
        deadline = time.time() + 60
        while len(got) + len(first) < until and time.time() < deadline:
            for m in c.consume(50, 0.5):
                if m.error():
                    fail("consume: %s" % m.error())
                v = m.value().decode()
                if v in got or v in first:
                    fail("%s read twice" % v)
                got[v] = (m.partition(), m.offset())
        return got

    c1 = Consumer(conf)
    c1.subscribe([topic])
    first = read(c1, n // 2, {})
    if len(first) < n // 2:
        fail("first consumer read %d of %d" % (len(first), n // 2))
    c1.commit(asynchronous=False)
    positions = {tp.partition: tp.offset for tp in c1.position(c1.assignment())}
    c1.close()  # LeaveGroup
    probe = Consumer(conf)
    committed = {tp.partition: tp.offset for tp in probe.committed([TopicPartition(topic, q) for q in range(3)], timeout=30)}
    probe.close()
    for q, o in positions.items():
        if o >= 0 and committed.get(q) != o:
            fail("partition %d: committed %s, the consumer's position was %d" % (q, committed.get(q), o))
    c2 = Consumer(conf)
    c2.subscribe([topic])
    rest = read(c2, n, first)
    c2.close()
    if len(first) + len(rest) != n:
        fail("read %d + %d of %d records" % (len(first), len(rest), n))
    for v, (q, o) in rest.items():
        if o < committed.get(q, 0):
            fail("second consumer read %s at %d/%d, below the committed %d" % (v, q, o, committed[q]))
    print("ok   group %s: %d read and committed at %s, %d read after it by a new member, none twice"
          % (group, len(first), sorted((q, o) for q, o in committed.items() if o >= 0), len(rest)))



def group_commit_half(bootstrap, topic, n, group):
    p = Producer({**SECURITY, "bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 11), value=b"fo-%d" % i)
    if p.flush(30) != 0:
        fail("produce: records left unsent")
    c = Consumer({**SECURITY, "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    read = 0
    deadline = time.time() + 60
    while read < n // 2 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            fail("consume: %s" % m.error())
        read += 1
        c.commit(message=m, asynchronous=False)  # exactly the records read
    c.close()
    if read < n // 2:
        fail("read %d of %d" % (read, n // 2))
    probe = Consumer({**SECURITY, "bootstrap.servers": bootstrap, "group.id": group})
    parts = sorted(probe.list_topics(topic, timeout=10).topics[topic].partitions)
    committed = {tp.partition: tp.offset for tp in probe.committed([TopicPartition(topic, q) for q in parts], timeout=30)
                 if tp.offset >= 0}
    probe.close()
    if sum(committed.values()) != n // 2:
        fail("committed %s, %d records in all, read %d" % (committed, sum(committed.values()), n // 2))
    print("ok   group %s read and committed %d of %d on %s" % (group, n // 2, n, bootstrap))
    print(json.dumps(committed))


def group_resume_at(bootstrap, topic, n, group, committed_json):
    want = {int(q): o for q, o in json.loads(committed_json).items()}
    conf = {**SECURITY, "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": True}
    probe = Consumer(conf)
    parts = sorted(probe.list_topics(topic, timeout=10).topics[topic].partitions)
    got = {tp.partition: tp.offset for tp in probe.committed([TopicPartition(topic, q) for q in parts], timeout=30)
           if tp.offset >= 0}
    probe.close()
    if got != want:
        fail("group %s on %s has committed %s, the other cluster %s" % (group, bootstrap, got, want))
    c = Consumer(conf)
    c.subscribe([topic])
    first, seen, eof = {}, set(), set()
    deadline = time.time() + 60
    while len(eof) < len(parts) and time.time() < deadline:
        for m in c.consume(100, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                fail("consume: %s" % m.error())
            first.setdefault(m.partition(), m.offset())
            v = m.value().decode()
            if v in seen:
                fail("%s read twice" % v)
            seen.add(v)
    c.close()
    for q, o in first.items():
        if o != want.get(q, 0):
            fail("partition %d: resumed at %d, committed %d" % (q, o, want.get(q, 0)))
    if len(seen) != n - sum(want.values()):
        fail("read %d records after the committed offsets, want %d" % (len(seen), n - sum(want.values())))
    print("ok   group %s resumed on %s at %s and read the other %d records" % (group, bootstrap, sorted(want.items()), len(seen)))


if __name__ == "__main__":
    if sys.argv[1] == "produce-consume":
        produce_consume(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1] == "produce-refused":
        produce_refused(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "admin":
        admin(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "produce-idempotent":
        produce_idempotent(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "group-commit-half":
        group_commit_half(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "group-resume-at":
        group_resume_at(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    elif sys.argv[1] == "group-resume":
        group_resume(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "produce-read-back":
        produce_read_back(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "exactly-once":
        exactly_once(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        fail("unknown command " + sys.argv[1])
