#!/usr/bin/env bash
# kafka-e2e.sh (`make kafka-e2e`): Kafka clients nobody here wrote against
# `make run`'s processes (both clusters on loopback, no Docker), secure as
# make run starts them: mutual TLS on every listener and ACLs. kcat and
# confluent-kafka-python connect with security.protocol=ssl and the
# operator's certificate (run/tls/admin.crt, User:admin, a super user);
# twinctl uses the same one (TWINLOG_TLS_*).
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
#   9. Unauthenticated clients get nothing: kcat in plaintext, and kcat over
#      TLS without a client certificate, cannot list A's metadata (an error
#      and a non-zero exit within the metadata timeout, no brokers, no
#      topics). With SASL on, the listener asks for a certificate without
#      requiring one, so the certificate-less TLS handshake succeeds and
#      its Metadata request closes the connection (the broker logs "request
#      before SASL authentication"); plaintext fails before ApiVersions.
#  10. A principal without ACLs (alice, a certificate of make run's CA):
#      kcat's produce to a topic fails with TOPIC_AUTHORIZATION_FAILED and
#      stores nothing, its metadata listing shows no topics; after twinctl
#      acls add (Write, Read on that topic for User:alice) its produce and
#      consume of the topic succeed, its listing shows that topic only, a
#      produce to another topic is still refused, and confluent-kafka-python
#      as alice produces to the topic with an idempotent producer
#      (InitProducerId allowed by Write on a topic, KIP-679).
#  11. SASL on the Kafka listener (make run's brokers enable SCRAM-SHA-512,
#      SCRAM-SHA-256 and PLAIN): twinctl users set-password creates bob
#      (SCRAM-SHA-512, password from a file) and acls add grants User:bob
#      Write and Read on e2e-sasl; kcat with security.protocol=sasl_ssl,
#      bob's name and password and only the CA (no certificate) lists just
#      that topic, produces to it and reads it back with SCRAM-SHA-512, then
#      with SCRAM-SHA-256 (after set-password --mechanism SCRAM-SHA-256,
#      password on stdin), then with PLAIN; confluent-kafka-python as bob
#      (SASL_SSL, SCRAM-SHA-512) produces 500 records with an idempotent
#      producer and reads each back at its acknowledged offset; a wrong
#      password gets kcat a SASL authentication error, and kcat over TLS
#      with neither a certificate nor SASL gets an error and no metadata.
#
# kcat and python3-confluent-kafka are Debian packages; when missing, the
# script installs them with apt-get and fails (never skips) if it cannot.
# Exits 0 when every check passed. Needs bin/ (make bins) and jq.
set -uo pipefail
cd "$(dirname "$0")/.."

KAFKA_A=127.0.0.1:9291
KAFKA_B=127.0.0.1:9301
# make run's certificates: the one place the clients' TLS settings are.
# KCAT is kcat as User:admin, KCAT_ALICE as User:alice (no ACLs until 10),
# KCAT_NOCERT TLS without a client certificate; KCAT_SASL is SASL_SSL as
# SASL_USER with only the CA (kcat_sasl adds the mechanism and password,
# check 11). kafka_e2e.py has its own settings dict, SECURITY
# (KAFKA_E2E_USER picks the certificate, KAFKA_E2E_SASL_* SASL instead).
TLS_DIR=run/tls
KCAT_NOCERT=(kcat -X security.protocol=ssl -X ssl.ca.location=$TLS_DIR/ca.crt)
KCAT=("${KCAT_NOCERT[@]}" -X ssl.certificate.location=$TLS_DIR/admin.crt -X ssl.key.location=$TLS_DIR/admin.key)
KCAT_ALICE=("${KCAT_NOCERT[@]}" -X ssl.certificate.location=$TLS_DIR/alice.crt -X ssl.key.location=$TLS_DIR/alice.key)
SASL_USER=bob
SASL_PW_FILE=run/kafka-e2e-$SASL_USER.pw # written by check 11, a new password each run
KCAT_SASL=(kcat -X security.protocol=sasl_ssl -X ssl.ca.location=$TLS_DIR/ca.crt -X sasl.username=$SASL_USER)
kcat_sasl() { # kcat_sasl SECONDS MECHANISM PASSWORD KCAT-ARGS...: kcat as SASL_USER, under timeout
  local secs=$1 mech=$2 pw=$3
  shift 3
  timeout "$secs" "${KCAT_SASL[@]}" -X sasl.mechanisms="$mech" -X sasl.password="$pw" "$@"
}
export TWINLOG_TLS_CA=$TLS_DIR/ca.crt TWINLOG_TLS_CERT=$TLS_DIR/admin.crt TWINLOG_TLS_KEY=$TLS_DIR/admin.key
export KAFKA_E2E_TLS=$TLS_DIR
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
# Secure (mutual TLS, ACLs), as `make run`; it writes run/tls first.
./bin/runlocal >run/kafka-e2e-runlocal.out 2>&1 &
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
meta=$(timeout 20 "${KCAT[@]}" -b $KAFKA_A -L 2>&1)
if grep -q '3 brokers:' <<<"$meta" && grep -q 'broker 1 at 127.0.0.1:9291' <<<"$meta" &&
  grep -q 'topic "demo" with 3 partitions' <<<"$meta"; then
  pass "1: kcat -L lists A's 3 brokers at their Kafka listeners and demo's 3 partitions"
else
  fail "1: kcat -L: $meta"
fi

# ---- 2. kcat produce and consume ------------------------------------------
before=$(timeout 20 "${KCAT[@]}" -b $KAFKA_A -C -t demo -p 1 -o beginning -e -q 2>/dev/null | wc -l)
seq -f 'kcat-%g' 1 50 | timeout 30 "${KCAT[@]}" -b $KAFKA_A -P -t demo -p 1 -X acks=all 2>&1 | head -5
want=$(seq -f 'kcat-%g' 1 50)
got_a=$(timeout 20 "${KCAT[@]}" -b $KAFKA_A -C -t demo -p 1 -o "$before" -e -q 2>/dev/null)
if [ "$got_a" = "$want" ]; then
  pass "2: kcat produced 50 lines to demo-1 on A and read them back from offset $before"
else
  fail "2: kcat read from A: $(head -3 <<<"$got_a") ... ($(wc -l <<<"$got_a") lines)"
fi
got_b=
for _ in $(seq 1 100); do
  got_b=$(timeout 20 "${KCAT[@]}" -b $KAFKA_B -C -t demo -p 1 -o "$before" -e -q 2>/dev/null)
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
  printf '%s\n' "$lines" | timeout 30 "${KCAT[@]}" -b $KAFKA_A -P -t demo -p 2 -z "$codec" -X acks=all -X linger.ms=50 2>&1 | head -5
  got=$(timeout 20 "${KCAT[@]}" -b $KAFKA_A -C -t demo -p 2 -o beginning -e -q 2>/dev/null | grep "^$codec-")
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
kcat_group() { timeout 60 "${KCAT[@]}" -b $KAFKA_A -G kcat-grp e2e-kcat -e -q -X auto.offset.reset=earliest 2>/dev/null; }
if ! bin/twinctl --bootstrap $CTL_A topics create e2e-kcat --partitions 3 --replication-factor 3 >/dev/null; then
  fail "7: could not create e2e-kcat"
else
  seq -f 'kcat-%g' 1 100 | timeout 30 "${KCAT[@]}" -b $KAFKA_A -P -t e2e-kcat -X acks=all
  run1=$(kcat_group | sort -V)
  run2=$(kcat_group)
  seq -f 'kcat-%g' 101 120 | timeout 30 "${KCAT[@]}" -b $KAFKA_A -P -t e2e-kcat -X acks=all
  run3=$(kcat_group | sort -V)
  if [ "$run1" = "$(seq -f 'kcat-%g' 1 100)" ] && [ -z "$run2" ] && [ "$run3" = "$(seq -f 'kcat-%g' 101 120)" ]; then
    pass "7: kcat -G kcat-grp: 100 lines, then none, then exactly the 20 produced since"
  else
    fail "7: kcat -G: runs read $(grep -c . <<<"$run1"), $(grep -c . <<<"$run2"), $(grep -c . <<<"$run3") lines (want 100, 0, 20)"
  fi
fi

# ---- 8. consumer groups through a planned failover ---------------------------
kcat_fo() { timeout 60 "${KCAT[@]}" -b "$1" -G kcat-fo e2e-fo -e -q -X auto.offset.reset=earliest 2>/dev/null; }
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
  seq -f 'after-%g' 1 20 | timeout 30 "${KCAT[@]}" -b $KAFKA_B -P -t e2e-fo -X acks=all
  got=$(kcat_fo $KAFKA_B | sort -V)
  if [ "$got" = "$(seq -f 'after-%g' 1 20)" ]; then
    pass "8: $(head -1 <<<"$out"); $out2; kcat -G kcat-fo read its 600 on A and, after the failover, exactly the 20 produced on B"
  else
    fail "8: kcat -G kcat-fo on B read $(grep -c . <<<"$got") lines, want the 20 produced on B since the failover"
  fi
fi

# ---- 9. unauthenticated clients ----------------------------------------------
# -m 3: kcat gives up on metadata after 3 s; timeout is the backstop (124
# would mean it hung, which is a failure too). Each mode fails its own way:
# plaintext bytes are no TLS handshake (the connection closes before
# ApiVersions is answered); TLS without a certificate completes the
# handshake (SASL on: a certificate is asked for, not required), ApiVersions
# is answered, and the Metadata request closes the connection, which
# librdkafka reports as "broker might require SASL authentication" and
# broker 1 logs as a request before SASL authentication.
no_sasl_closes() { grep -c 'request before SASL authentication' run/logs/a-broker-1.log; }
kcat_unauthenticated() { # kcat_unauthenticated MODE KCAT-ARGS...: out, rc
  if [ "$1" = plaintext ]; then
    out=$(timeout 20 kcat -b $KAFKA_A "${@:2}" -m 3 2>&1)
  else
    out=$(timeout 20 "${KCAT_NOCERT[@]}" -b $KAFKA_A "${@:2}" -m 3 2>&1)
  fi
  rc=$?
}
for mode in plaintext no-cert; do
  closes0=$(no_sasl_closes)
  kcat_unauthenticated $mode -L
  closes=$(($(no_sasl_closes) - closes0))
  # why: what librdkafka says; need: the connections broker 1 must have
  # closed for a request before SASL authentication
  case $mode in
  plaintext) why='Disconnected while requesting ApiVersion' need=0 ;;
  no-cert) why='broker might require SASL authentication' need=1 ;;
  esac
  if [ $rc != 0 ] && [ $rc != 124 ] && grep -q 'Failed to acquire metadata' <<<"$out" &&
    ! grep -q -e 'brokers:' -e 'topic "' <<<"$out" && grep -q "$why" <<<"$out" && [ "$closes" -ge $need ]; then
    pass "9: kcat -L ($mode) refused: exit $rc, $(grep -m1 -o 'Failed to acquire metadata: [^(]*[^ (]' <<<"$out") ($why$([ $need = 0 ] || echo "; broker 1 closed $closes connection(s): request before SASL authentication"))"
  else
    fail "9: kcat -L ($mode): exit $rc (want an error with '$why', not 0 or a timeout; broker 1 closes: $closes, want >= $need): $(tail -3 <<<"$out")"
  fi
done

# ---- 10. a principal without ACLs -------------------------------------------
# alice (run/tls/alice.crt) may do nothing until admin grants her Write and
# Read on e2e-alice; the ACLs reach the brokers through the metadata, so the
# checks after the grant retry for up to ~10 s.
retry() { # retry CMD...: runs CMD until it succeeds, 50 tries 0.2 s apart
  local i
  for i in $(seq 1 50); do "$@" && return 0; sleep 0.2; done
  return 1
}
alice_lists() { # alice's kcat -L on A lists exactly the topics "$@" (none: 0)
  local want=$# t
  meta=$(timeout 20 "${KCAT_ALICE[@]}" -b $KAFKA_A -L -m 10 2>&1) || return 1
  grep -q "^ $want topics:" <<<"$meta" || return 1
  for t in "$@"; do grep -q "topic \"$t\" with 1 partitions" <<<"$meta" || return 1; done
}
alice_produce() { # alice_produce TOPIC VALUE: kcat -P as alice, output in $prod
  prod=$(echo "$2" | timeout 30 "${KCAT_ALICE[@]}" -b $KAFKA_A -P -t "$1" -p 0 -X acks=all 2>&1)
}
alice_reads() { # alice reads exactly VALUE from e2e-alice-0
  got=$(timeout 20 "${KCAT_ALICE[@]}" -b $KAFKA_A -C -t e2e-alice -p 0 -o beginning -e -q 2>&1) && [ "$got" = "$1" ]
}
if ! bin/twinctl --bootstrap $CTL_A topics create e2e-alice --partitions 1 --replication-factor 3 --config min.insync.replicas=2 >/dev/null; then
  fail "10: could not create e2e-alice"
else
  if alice_produce e2e-alice denied; then
    fail "10: alice's produce to e2e-alice without ACLs succeeded: $prod"
  elif ! grep -q 'Topic authorization failed' <<<"$prod"; then
    fail "10: alice's produce without ACLs failed, but not with TOPIC_AUTHORIZATION_FAILED: $prod"
  else
    pass "10: alice's kcat produce to e2e-alice without ACLs refused: $(grep -m1 -o 'Delivery failed.*' <<<"$prod")"
  fi
  if alice_lists; then
    pass "10: alice's kcat -L on A lists 0 topics"
  else
    fail "10: alice's kcat -L without ACLs: $meta"
  fi
  if ! grant=$(bin/twinctl --bootstrap $CTL_A acls add --allow-principal User:alice --operation Write --operation Read --topic e2e-alice 2>&1); then
    fail "10: twinctl acls add for User:alice: $grant"
  else
    t0=$(date +%s%N)
    if ! retry alice_produce e2e-alice alice-1; then
      fail "10: alice's produce to e2e-alice still fails 10 s after the grant: $prod"
    else
      took=$((($(date +%s%N) - t0) / 1000000))
      if retry alice_reads alice-1; then
        pass "10: after acls add (Write, Read on e2e-alice), alice's kcat produce succeeded (${took} ms after the grant) and her consume reads exactly it (the refused record was not stored)"
      else
        fail "10: alice's consume of e2e-alice: $got (want alice-1 only)"
      fi
    fi
    if retry alice_lists e2e-alice; then
      pass "10: alice's kcat -L on A lists e2e-alice only"
    else
      fail "10: alice's kcat -L after the grant: $meta"
    fi
    if alice_produce demo denied; then
      fail "10: alice's produce to demo (no ACL) succeeded"
    elif grep -q 'Topic authorization failed' <<<"$prod"; then
      pass "10: alice's produce to demo (not granted) is still refused"
    else
      fail "10: alice's produce to demo failed, but not with TOPIC_AUTHORIZATION_FAILED: $prod"
    fi
    if ! out=$(KAFKA_E2E_USER=alice "$PY" scripts/kafka_e2e.py produce-idempotent $KAFKA_A e2e-alice 0 200 2>&1); then
      fail "10: confluent-kafka-python as alice: $out"
    else
      spaces=$(for d in run/cluster-a/broker-*/e2e-alice-0; do pid_spaces "$d"; done | tr ',' '\n' | grep -v '^$' | sort -u | paste -sd,)
      if [ "$spaces" = 1 ]; then
        pass "10: confluent-kafka-python as alice (Write on e2e-alice, no IdempotentWrite): $out; its batches carry A's producer ids"
      else
        fail "10: alice's idempotent batches in e2e-alice: producer id spaces '$spaces', want 1"
      fi
    fi
  fi
fi

# ---- 11. SASL -----------------------------------------------------------------
# bob has a password and no certificate. Credentials and ACLs reach the
# brokers through the metadata, so the first uses retry for up to 30 s
# (each kcat bounded by -m or message.timeout.ms, and timeout).
# SASL_TOPIC's partition 0 holds what kcat produced, in order.
SASL_TOPIC=e2e-sasl
kcat_why() { # the first librdkafka error in a client's output (stdin), else its last line
  local o
  o=$(cat)
  grep -m1 -o -e '\(Failed to initialize SASL authentication\|SASL authentication error\|Disconnected\|Delivery failed[^:]*\|ERROR\): [^(]*[^ (]' <<<"$o" || tail -1 <<<"$o"
}
retry_for() { # retry_for SECONDS CMD...: runs CMD until it succeeds, 0.2 s apart, for up to SECONDS
  local end=$(($(date +%s) + $1))
  shift
  until "$@"; do
    [ "$(date +%s)" -lt $end ] || return 1
    sleep 0.2
  done
}
sasl_lists() { # sasl_lists MECH PW: bob's kcat -L on A lists exactly SASL_TOPIC
  meta=$(kcat_sasl 20 "$1" "$2" -b $KAFKA_A -L -m 5 2>&1) || return 1
  grep -q '^ 1 topics:' <<<"$meta" && grep -q "topic \"$SASL_TOPIC\" with 3 partitions" <<<"$meta"
}
sasl_produce() { # sasl_produce MECH PW VALUE: kcat -P as bob to SASL_TOPIC-0, output in $prod
  prod=$(echo "$3" | kcat_sasl 30 "$1" "$2" -b $KAFKA_A -P -t $SASL_TOPIC -p 0 -X acks=all -X message.timeout.ms=10000 2>&1)
}
sasl_reads() { # sasl_reads MECH PW LINES: bob reads exactly LINES from SASL_TOPIC-0
  got=$(kcat_sasl 20 "$1" "$2" -b $KAFKA_A -C -t $SASL_TOPIC -p 0 -o beginning -e -q -m 5 2>&1) && [ "$got" = "$3" ]
}
bob_pw="bob-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
(umask 077 && printf '%s\n' "$bob_pw" >"$SASL_PW_FILE")
if ! bin/twinctl --bootstrap $CTL_A topics create $SASL_TOPIC --partitions 3 --replication-factor 3 --config min.insync.replicas=2 >/dev/null; then
  fail "11: could not create $SASL_TOPIC"
elif ! setpw=$(bin/twinctl --bootstrap $CTL_A users set-password $SASL_USER --mechanism SCRAM-SHA-512 --password-file "$SASL_PW_FILE" 2>&1); then
  fail "11: twinctl users set-password $SASL_USER: $setpw"
elif ! grant=$(bin/twinctl --bootstrap $CTL_A acls add --allow-principal User:$SASL_USER --operation Write --operation Read --topic $SASL_TOPIC 2>&1); then
  fail "11: twinctl acls add for User:$SASL_USER: $grant"
else
  lines=
  for mech in SCRAM-SHA-512 SCRAM-SHA-256 PLAIN; do
    if [ $mech = SCRAM-SHA-256 ] &&
      ! setpw=$(bin/twinctl --bootstrap $CTL_A users set-password $SASL_USER --mechanism SCRAM-SHA-256 <"$SASL_PW_FILE" 2>&1); then
      fail "11: twinctl users set-password $SASL_USER --mechanism SCRAM-SHA-256: $setpw"
      continue
    fi
    t0=$(date +%s%N)
    if ! retry_for 30 sasl_lists $mech "$bob_pw"; then
      fail "11: $mech: bob's kcat -L (sasl_ssl, no certificate) does not list exactly $SASL_TOPIC within 30 s: $(kcat_why <<<"$meta")"
      continue
    fi
    took=$((($(date +%s%N) - t0) / 1000000))
    if ! retry_for 30 sasl_produce $mech "$bob_pw" "sasl-$mech"; then
      fail "11: $mech: bob's kcat produce to $SASL_TOPIC: $(kcat_why <<<"$prod")"
      continue
    fi
    lines+="${lines:+$'\n'}sasl-$mech"
    if retry_for 30 sasl_reads $mech "$bob_pw" "$lines"; then
      pass "11: $mech: bob's kcat (sasl_ssl, CA only) lists only $SASL_TOPIC (authenticated and listed within ${took} ms), produced sasl-$mech and reads $SASL_TOPIC-0 back: $(paste -sd, <<<"$lines")"
    else
      fail "11: $mech: bob's kcat consume of $SASL_TOPIC-0: $(tail -3 <<<"$got") (want $(paste -sd, <<<"$lines"))"
    fi
  done
  users=$(bin/twinctl --bootstrap $CTL_A users list $SASL_USER 2>&1)
  if grep -q "^$SASL_USER *SCRAM-SHA-512 " <<<"$users" && grep -q "^$SASL_USER *SCRAM-SHA-256 " <<<"$users"; then
    pass "11: twinctl users list $SASL_USER shows both SCRAM credentials"
  else
    fail "11: twinctl users list $SASL_USER: $users"
  fi
  if ! out=$(KAFKA_E2E_SASL_MECHANISM=SCRAM-SHA-512 KAFKA_E2E_SASL_USER=$SASL_USER KAFKA_E2E_SASL_PASSWORD_FILE=$SASL_PW_FILE \
    "$PY" scripts/kafka_e2e.py produce-read-back $KAFKA_A $SASL_TOPIC 500 2>&1); then
    fail "11: confluent-kafka-python as $SASL_USER: $(grep -m1 '^FAIL' <<<"$out") ($(kcat_why <<<"$out"))"
  else
    spaces=$(for d in run/cluster-a/broker-*/$SASL_TOPIC-*; do pid_spaces "$d"; done | tr ',' '\n' | grep -v '^$' | sort -u | paste -sd,)
    if [ "$spaces" = 1 ]; then
      pass "11: confluent-kafka-python: $out; its batches carry A's producer ids"
    else
      fail "11: $SASL_USER's idempotent batches in $SASL_TOPIC: producer id spaces '$spaces', want 1"
    fi
  fi
  # A wrong password: librdkafka reports the broker's SaslAuthenticate
  # error (SASL_AUTHENTICATION_FAILED) and gives up at -m.
  out=$(kcat_sasl 20 SCRAM-SHA-512 "not-$bob_pw" -b $KAFKA_A -L -m 3 2>&1)
  rc=$?
  if [ $rc != 0 ] && [ $rc != 124 ] && grep -q 'SASL authentication error: .*[Aa]uthentication failed' <<<"$out" &&
    ! grep -q -e 'brokers:' -e 'topic "' <<<"$out"; then
    pass "11: a wrong password is refused: exit $rc, $(grep -m1 -o 'SASL authentication error: [^(]*[^ (]' <<<"$out"), no metadata"
  else
    fail "11: kcat with a wrong password: exit $rc (want a SASL authentication error, not 0 or a timeout): $(kcat_why <<<"$out")"
  fi
  # Neither a certificate nor SASL: the TLS handshake succeeds, and asking
  # for bob's topic closes the connection.
  closes0=$(no_sasl_closes)
  kcat_unauthenticated no-cert -L -t $SASL_TOPIC
  closes=$(($(no_sasl_closes) - closes0))
  if [ $rc != 0 ] && [ $rc != 124 ] && grep -q 'Failed to acquire metadata' <<<"$out" &&
    ! grep -q -e 'brokers:' -e 'topic "' <<<"$out" && [ "$closes" -ge 1 ]; then
    pass "11: kcat over TLS with neither a certificate nor SASL gets no metadata for $SASL_TOPIC: exit $rc, $(grep -m1 -o 'Failed to acquire metadata: [^(]*[^ (]' <<<"$out"); broker 1 closed $closes connection(s): request before SASL authentication"
  else
    fail "11: kcat over TLS without a certificate or SASL: exit $rc, broker closes $closes: $(kcat_why <<<"$out")"
  fi
fi

log "$PASSED passed, ${#FAILED[@]} failed"
for f in "${FAILED[@]}"; do log "FAILED: $f"; done
[ ${#FAILED[@]} -eq 0 ]
