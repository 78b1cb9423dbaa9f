#!/usr/bin/env bash
# kafka-e2e.sh (`make kafka-e2e`): Kafka clients nobody here wrote against
# `make run`'s processes (both clusters on loopback, no Docker):
#
#   1. kcat (librdkafka) lists A's brokers and the demo topic (Metadata).
#   2. kcat produces 50 lines to demo-1 on A (acks=all) and reads them
#      back from A, and from B's mirrored copy at the same offsets.
#   2b. kcat produces with each codec (gzip, snappy, lz4, zstd); the lines
#      read back, and every replica on A and B stores the batch with that
#      codec (twinctl dump-log).
#   3. confluent-kafka-python produces 2,000 keyed records (acks=all) over
#      every partition of demo on A; each is read from A and from B at the
#      offset its delivery report gave.
#   4. A produce to B's mirror topic is refused (INVALID_REQUEST).
#   5. confluent-kafka-python's AdminClient creates a topic with a config,
#      describes the config, produces to it and deletes it.
#   6. confluent-kafka-python idempotent producers on A, then on B after a
#      planned failover of the topic: B holds every record exactly once, and
#      the two clusters' producer ids are in their own id spaces.
#   7. Consumer groups: a confluent-kafka-python group member commits half a
#      topic and leaves, and a new member resumes at the committed offsets;
#      kcat -G reads a topic, a second run of the group reads nothing, a
#      third reads exactly the lines produced since.
#   8. Consumer groups through a planned failover: on A a
#      confluent-kafka-python group commits half of a mirrored topic and a
#      kcat -G group reads all of it; mirrors stop --wait-for-catch-up on B;
#      B's groups hold A's committed offsets: the Python group resumes there
#      (nothing read twice, nothing skipped) and the kcat group reads exactly
#      the lines produced on B since.
#
# kcat and python3-confluent-kafka are Debian packages; when missing, the
# script installs them with apt-get and fails (never skips) if it cannot.
# Exits 0 when every check passed. Needs bin/ (make bins) and jq.
set -uo pipefail
cd "$(dirname "$0")/.."

KAFKA_A=127.0.0.1:9291
KAFKA_B=127.0.0.1:9301
PY=/usr/bin/python3 # Debian's python3-confluent-kafka loads here
START=$(date +%s)
FAILED=()
PASSED=0
RUNLOCAL_PID=

log() { printf '[kafka-e2e %4ss] %s\n' "$(($(date +%s) - START))" "$*"; }
pass() { PASSED=$((PASSED + 1)); log "PASS $*"; }
fail() { FAILED+=("$*"); log "FAIL $*"; }

cleanup() {
  if [ -n "$RUNLOCAL_PID" ]; then
    kill -TERM "$RUNLOCAL_PID" 2>/dev/null
    wait "$RUNLOCAL_PID" 2>/dev/null
  fi
}
trap cleanup EXIT

have_clients() { command -v kcat >/dev/null && "$PY" -c 'import confluent_kafka' 2>/dev/null; }
if ! have_clients; then
  log "installing kcat and python3-confluent-kafka (apt-get)"
  SUDO=
  [ "$(id -u)" = 0 ] || SUDO=sudo
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq kcat python3-confluent-kafka; } >/dev/null 2>&1
  have_clients || { echo "kafka-e2e: kcat and python3-confluent-kafka are required and could not be installed"; exit 1; }
fi
log "clients: $(kcat -V 2>&1 | head -1); confluent-kafka $("$PY" -c 'import confluent_kafka as c; print(c.version()[0], "librdkafka", c.libversion()[0])')"

mkdir -p run
# Plaintext for now: kcat and confluent-kafka-python over TLS with SASL
# are issue 17's next step.
./bin/runlocal --insecure >run/kafka-e2e-runlocal.out 2>&1 &
RUNLOCAL_PID=$!
for _ in $(seq 1 120); do
  grep -q '^ready after' run/kafka-e2e-runlocal.out && break
  kill -0 "$RUNLOCAL_PID" 2>/dev/null || break
  sleep 1
done
if ! grep -q '^ready after' run/kafka-e2e-runlocal.out; then
  cat run/kafka-e2e-runlocal.out
  echo "kafka-e2e: make run did not become ready"
  exit 1
fi
log "both clusters ready (run/kafka-e2e-runlocal.out)"

# ---- 1. metadata ---------------------------------------------------------
meta=$(timeout 20 kcat -b $KAFKA_A -L 2>&1)
if grep -q '3 brokers:' <<<"$meta" && grep -q 'broker 1 at 127.0.0.1:9291' <<<"$meta" &&
  grep -q 'topic "demo" with 3 partitions' <<<"$meta"; then
  pass "1: kcat -L lists A's 3 brokers at their Kafka listeners and demo's 3 partitions"
else
  fail "1: kcat -L: $meta"
fi

# ---- 2. kcat produce and consume ------------------------------------------
before=$(timeout 20 kcat -b $KAFKA_A -C -t demo -p 1 -o beginning -e -q 2>/dev/null | wc -l)
seq -f 'kcat-%g' 1 50 | timeout 30 kcat -b $KAFKA_A -P -t demo -p 1 -X acks=all 2>&1 | head -5
want=$(seq -f 'kcat-%g' 1 50)
got_a=$(timeout 20 kcat -b $KAFKA_A -C -t demo -p 1 -o "$before" -e -q 2>/dev/null)
if [ "$got_a" = "$want" ]; then
  pass "2: kcat produced 50 lines to demo-1 on A and read them back from offset $before"
else
  fail "2: kcat read from A: $(head -3 <<<"$got_a") ... ($(wc -l <<<"$got_a") lines)"
fi
got_b=
for _ in $(seq 1 100); do
  got_b=$(timeout 20 kcat -b $KAFKA_B -C -t demo -p 1 -o "$before" -e -q 2>/dev/null)
  [ "$got_b" = "$want" ] && break
  sleep 0.2
done
if [ "$got_b" = "$want" ]; then
  pass "2: B's mirrored demo-1 holds the same 50 lines at the same offsets"
else
  fail "2: kcat read from B: $(wc -l <<<"$got_b") lines"
fi

# ---- 2b. compression codecs -------------------------------------------------
# Each codec's batch is stored and mirrored as the producer compressed it:
# dump-log of every replica of demo-2 (A's and B's) shows the codec.
for codec in gzip snappy lz4 zstd; do
  lines=$(seq -f "$codec-%g repeated enough to be worth compressing" 1 40)
  printf '%s\n' "$lines" | timeout 30 kcat -b $KAFKA_A -P -t demo -p 2 -z "$codec" -X acks=all -X linger.ms=50 2>&1 | head -5
  got=$(timeout 20 kcat -b $KAFKA_A -C -t demo -p 2 -o beginning -e -q 2>/dev/null | grep "^$codec-")
  if [ "$got" != "$lines" ]; then
    fail "2b: $codec: read back $(wc -l <<<"$got") of 40 lines"
    continue
  fi
  codecs_ok() {
    local d n=0
    for d in run/cluster-a/broker-*/demo-2 run/cluster-b/broker-*/demo-2; do
      # (jq -s and a count: jq 1.6's -e misreports select's last output)
      [ "$(bin/twinctl dump-log "$d" --json 2>/dev/null | jq -s --arg c "$codec" '[.[] | select(.compression == $c)] | length')" -ge 1 ] &&
        n=$((n + 1))
    done
    [ "$n" = 6 ]
  }
  ok=
  for _ in $(seq 1 50); do codecs_ok && ok=1 && break; sleep 0.2; done
  if [ -n "$ok" ]; then
    pass "2b: kcat -z $codec: 40 lines read back; stored $codec on A's 3 replicas and B's 3 mirrored replicas"
  else
    fail "2b: $codec: not every replica of demo-2 on A and B holds a $codec batch"
  fi
done

# ---- 3. confluent-kafka-python --------------------------------------------
if out=$("$PY" scripts/kafka_e2e.py produce-consume $KAFKA_A $KAFKA_B demo 2000 2>&1); then
  pass "3: confluent-kafka-python: $(tr '\n' ';' <<<"$out")"
else
  fail "3: confluent-kafka-python: $out"
fi

# ---- 4. mirror topics are read-only ----------------------------------------
if out=$("$PY" scripts/kafka_e2e.py produce-refused $KAFKA_B demo 2>&1); then
  pass "4: $out"
else
  fail "4: $out"
fi

# ---- 5. admin ---------------------------------------------------------------
if out=$("$PY" scripts/kafka_e2e.py admin $KAFKA_A e2e-admin 2>&1); then
  pass "5: confluent-kafka-python AdminClient: $(tr '\n' ';' <<<"$out")"
else
  fail "5: AdminClient: $out"
fi

# ---- 6. idempotent producers through a planned failover -------------------
# idem on A, mirrored to B; 1,000 records from an idempotent producer on A;
# planned failover of idem (stop --wait-for-catch-up on B); 1,000 more from
# an idempotent producer on B. B holds the 2,000 exactly once, and the
# producer ids in the batches are A's id space (1) then B's (2): the
# clusters never hand out the same id.
CTL_A=127.0.0.1:9090
CTL_B=127.0.0.1:9100
pid_spaces() { # the producer id spaces (id >> 48) of the batches in dir $1
  bin/twinctl dump-log "$1" --json 2>/dev/null | jq -s -r '[.[] | select(.producer_id >= 0) | (.producer_id / 281474976710656 | floor)] | unique | map(tostring) | join(",")'
}
if ! bin/twinctl --bootstrap $CTL_A topics create idem --partitions 3 --replication-factor 3 --config min.insync.replicas=2 >/dev/null ||
  ! bin/twinctl --bootstrap $CTL_B mirrors start a-to-b idem >/dev/null; then
  fail "6: could not create idem on A and mirror it to B"
elif ! out=$("$PY" scripts/kafka_e2e.py produce-idempotent $KAFKA_A idem 0 1000 2>&1); then
  fail "6: $out"
elif ! stop=$(bin/twinctl --bootstrap $CTL_B mirrors stop a-to-b idem --wait-for-catch-up 2>&1); then
  fail "6: planned failover of idem: $stop"
elif ! out2=$("$PY" scripts/kafka_e2e.py produce-idempotent $KAFKA_B idem 1000 1000 2>&1); then
  fail "6: after the failover: $out2"
elif ! out3=$("$PY" scripts/kafka_e2e.py exactly-once $KAFKA_B idem 2000 2>&1); then
  fail "6: $out3"
else
  spaces_a=$(for d in run/cluster-a/broker-*/idem-*; do pid_spaces "$d"; done | tr ',' '\n' | grep -v '^$' | sort -u | paste -sd,)
  spaces_b=$(for d in run/cluster-b/broker-*/idem-*; do pid_spaces "$d"; done | tr ',' '\n' | grep -v '^$' | sort -u | paste -sd,)
  if [ "$spaces_a" = 1 ] && [ "$spaces_b" = 1,2 ]; then
    pass "6: $(printf '%s;%s;%s' "$out" "$out2" "$out3") producer id spaces: A's log $spaces_a, B's log $spaces_b"
  else
    fail "6: producer id spaces in A's idem logs '$spaces_a' (want 1), B's '$spaces_b' (want 1,2)"
  fi
fi

# ---- 7. consumer groups -----------------------------------------------------
if out=$("$PY" scripts/kafka_e2e.py group-resume $KAFKA_A e2e-group 600 2>&1); then
  pass "7: confluent-kafka-python: $out"
else
  fail "7: confluent-kafka-python group: $out"
fi
# kcat -G: the balanced consumer of librdkafka, auto-commit on close.
kcat_group() { timeout 60 kcat -b $KAFKA_A -G kcat-grp e2e-kcat -e -q -X auto.offset.reset=earliest 2>/dev/null; }
if ! bin/twinctl --bootstrap $CTL_A topics create e2e-kcat --partitions 3 --replication-factor 3 >/dev/null; then
  fail "7: could not create e2e-kcat"
else
  seq -f 'kcat-%g' 1 100 | timeout 30 kcat -b $KAFKA_A -P -t e2e-kcat -X acks=all
  run1=$(kcat_group | sort -V)
  run2=$(kcat_group)
  seq -f 'kcat-%g' 101 120 | timeout 30 kcat -b $KAFKA_A -P -t e2e-kcat -X acks=all
  run3=$(kcat_group | sort -V)
  if [ "$run1" = "$(seq -f 'kcat-%g' 1 100)" ] && [ -z "$run2" ] && [ "$run3" = "$(seq -f 'kcat-%g' 101 120)" ]; then
    pass "7: kcat -G kcat-grp: 100 lines, then none, then exactly the 20 produced since"
  else
    fail "7: kcat -G: runs read $(grep -c . <<<"$run1"), $(grep -c . <<<"$run2"), $(grep -c . <<<"$run3") lines (want 100, 0, 20)"
  fi
fi

# ---- 8. consumer groups through a planned failover ---------------------------
kcat_fo() { timeout 60 kcat -b "$1" -G kcat-fo e2e-fo -e -q -X auto.offset.reset=earliest 2>/dev/null; }
if ! bin/twinctl --bootstrap $CTL_A topics create e2e-fo --partitions 3 --replication-factor 3 --config min.insync.replicas=2 >/dev/null ||
  ! bin/twinctl --bootstrap $CTL_B mirrors start a-to-b e2e-fo >/dev/null; then
  fail "8: could not create e2e-fo on A and mirror it to B"
elif ! out=$("$PY" scripts/kafka_e2e.py group-commit-half $KAFKA_A e2e-fo 600 py-fo 2>&1); then
  fail "8: $out"
elif [ "$(kcat_fo $KAFKA_A | grep -c '^fo-')" != 600 ]; then
  fail "8: kcat -G kcat-fo on A did not read the 600 records"
elif ! stop=$(bin/twinctl --bootstrap $CTL_B mirrors stop a-to-b e2e-fo --wait-for-catch-up 2>&1); then
  fail "8: planned failover of e2e-fo: $stop"
elif ! out2=$("$PY" scripts/kafka_e2e.py group-resume-at $KAFKA_B e2e-fo 600 py-fo "$(tail -1 <<<"$out")" 2>&1); then
  fail "8: $out2"
else
  seq -f 'after-%g' 1 20 | timeout 30 kcat -b $KAFKA_B -P -t e2e-fo -X acks=all
  got=$(kcat_fo $KAFKA_B | sort -V)
  if [ "$got" = "$(seq -f 'after-%g' 1 20)" ]; then
    pass "8: $(head -1 <<<"$out"); $out2; kcat -G kcat-fo read its 600 on A and, after the failover, exactly the 20 produced on B"
  else
    fail "8: kcat -G kcat-fo on B read $(grep -c . <<<"$got") lines, want the 20 produced on B since the failover"
  fi
fi

log "$PASSED passed, ${#FAILED[@]} failed"
for f in "${FAILED[@]}"; do log "FAILED: $f"; done
[ ${#FAILED[@]} -eq 0 ]
