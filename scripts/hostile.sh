#!/usr/bin/env bash
# hostile.sh (`make hostile`): black-box check of issue 13's three headline
# cases against `make run`'s processes (both clusters as plain processes on
# loopback, no Docker), with the shipped twinctl and grpcurl (pinned in
# tools/go.mod) as a client nobody here wrote:
#
#   1. `mirrors create oops --source <A> orders` on B, where `orders` is a
#      local topic of B with records and A has no such topic: refused with
#      UNKNOWN_TOPIC_OR_PARTITION, no mirror left behind, B keeps every record.
#   2. A forged BumpLeaderEpoch (the leader's id and broker epoch are public)
#      with min_leader_epoch 2147483647, on A's non-mirror topic and on B's
#      mirror topic: refused, the leader epoch unchanged, produce and consume
#      still work.
#   3. `topics delete t2` on A while B mirrors t2: B's partition goes FAILED
#      with a reason, keeps every record on every replica through several
#      automatic retries without a leader epoch bump, and `mirrors stop`
#      makes it writable with all records.
#   4. Garbage on A's Kafka port (a frame of random bytes, a 2 GiB size
#      prefix, an unknown API key, a frame cut short): each closes only its own
#      connection (counted by reason in twinlog_kafka_connections_closed_total)
#      while a connection opened before them still gets ApiVersions answered.
#   5. Hostile admin requests on A's controller (issue 17's ACL and SCRAM
#      APIs, the failback preview): a 2000-byte ACL principal beside a valid
#      binding, a SCRAM credential of 2^31-1 iterations, a preview of 1001
#      topics and one of an unknown mirror without a source. Each bad part
#      is refused with its reason, the valid binding alone is stored, no
#      credential is, and the controller still serves.
#   6. Hostile group and internal-topic requests (issue 16's GroupService and
#      EnsureInternalTopic): an administrator's offset commit with a 10 KiB
#      metadata string beside a normal one (OFFSET_METADATA_TOO_LARGE for it
#      alone, the other committed), and a forged EnsureInternalTopic for a
#      topic that is not __consumer_offsets, with a broker's real epoch
#      (refused, nothing created).
#
# Exits 0 when every check passed, 1 otherwise. Needs bin/ (make bins),
# curl and jq. Data and logs in ./run (HOSTILE_KEEP=1 leaves the clusters
# running for inspection).
set -uo pipefail
cd "$(dirname "$0")/.."

T=bin/twinctl
CTL_A=127.0.0.1:9090
CTL_B=127.0.0.1:9100
BRK_A=127.0.0.1:9091
BRK_B=127.0.0.1:9101
METRICS_B=(127.0.0.1:9201 127.0.0.1:9202 127.0.0.1:9203)
GRPCURL=(go tool -modfile=tools/go.mod grpcurl -plaintext -max-time 10
  -import-path api/proto -proto twinlog/v1/controller.proto -proto twinlog/v1/admin.proto -proto twinlog/v1/mirror.proto
  -proto twinlog/v1/groups.proto)
START=$(date +%s)
FAILED=()
PASSED=0
RUNLOCAL_PID=

log() { printf '[hostile %4ss] %s\n' "$(($(date +%s) - START))" "$*"; }
pass() { PASSED=$((PASSED + 1)); log "PASS $*"; }
fail() { FAILED+=("$*"); log "FAIL $*"; }

cleanup() {
  if [ -n "$RUNLOCAL_PID" ] && [ "${HOSTILE_KEEP:-}" != 1 ]; then
    kill -TERM "$RUNLOCAL_PID" 2>/dev/null
    wait "$RUNLOCAL_PID" 2>/dev/null
  fi
}
trap cleanup EXIT

for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "hostile: $tool is required (apt-get install $tool)"; exit 1; }
done
# Build grpcurl before the clusters start: the first build takes minutes.
"${GRPCURL[@]}" -version >/dev/null 2>&1 || { echo "hostile: cannot build grpcurl (go tool -modfile=tools/go.mod grpcurl)"; exit 1; }

mkdir -p run
# Plaintext: these cases probe the protocol rules, which hold with or
# without credentials; the secure setup is make run's default.
./bin/runlocal --insecure >run/hostile-runlocal.out 2>&1 &
RUNLOCAL_PID=$!
for _ in $(seq 1 120); do
  grep -q '^ready after' run/hostile-runlocal.out && break
  kill -0 "$RUNLOCAL_PID" 2>/dev/null || break
  sleep 1
done
if ! grep -q '^ready after' run/hostile-runlocal.out; then
  cat run/hostile-runlocal.out
  echo "hostile: make run did not become ready"
  exit 1
fi
log "both clusters ready (run/hostile-runlocal.out)"

# wait_for DESC SECONDS CMD...: run CMD every 0.2 s until it succeeds.
wait_for() {
  local desc=$1 secs=$2
  shift 2
  local deadline=$(($(date +%s) + secs))
  until "$@"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "timed out after ${secs}s waiting for $desc"
      return 1
    fi
    sleep 0.2
  done
}

# records BROKER TOPIC PARTITION: number of committed records a consumer reads.
records() {
  $T --bootstrap "$1" --json consume --topic "$2" --partition "$3" 2>/dev/null | jq -s 'length'
}
# leader_epoch CONTROLLER TOPIC PARTITION
leader_epoch() {
  $T --bootstrap "$1" --json topics describe "$2" | jq -r ".partitions[] | select(.partition == $3) | .leader_epoch"
}
# replica_leos TOPIC PARTITION: B's log end offset of the partition on every
# broker that hosts a replica (from its /metrics), space-separated.
replica_leos() {
  local out=() m v
  for m in "${METRICS_B[@]}"; do
    v=$(curl -sf "http://$m/metrics" |
      awk -v want="twinlog_partition_log_end_offset{partition=\"$2\",topic=\"$1\"}" '$1 == want {print $2}')
    [ -n "$v" ] && out+=("$v")
  done
  echo "${out[*]}"
}
mirror_partition() { # MIRROR TOPIC PARTITION: B's DescribeMirrors entry (JSON)
  $T --bootstrap $CTL_B --json mirrors describe "$1" 2>/dev/null |
    jq -c ".partitions[] | select(.topic == \"$2\" and .partition == $3)"
}

# ---- 1. mirrors create over a local topic the source does not have --------
$T --bootstrap $CTL_B topics create orders --partitions 1 --replication-factor 3 >/dev/null
printf 'o1\no2\no3\n' | $T --bootstrap $BRK_B produce --topic orders >/dev/null
# (Predicates, not `test "$(…)"`: wait_for re-runs its command, and a
# command substitution in its arguments is expanded only once.)
orders_readable() { [ "$(records $BRK_B orders 0)" = 3 ]; }
orders_leos() { [ "$(replica_leos orders 0)" = "3 3 3" ]; }
wait_for "3 records in B's orders" 20 orders_readable
out=$($T --bootstrap $CTL_B mirrors create oops --source $BRK_A orders 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -qiE "UNKNOWN_TOPIC_OR_PARTITION|unknown topic or partition" <<<"$out"; then
  pass "1: mirrors create of a topic A lacks is refused (exit $rc: $(head -1 <<<"$out"))"
else
  fail "1: mirrors create of a topic A lacks: exit $rc, output: $out"
fi
if $T --bootstrap $CTL_B mirrors describe oops >/dev/null 2>&1; then
  fail "1: mirror oops exists after a refused create"
else
  pass "1: no mirror oops left behind"
fi
# Brokers export log end offsets with their metrics every few ticks.
wait_for "B's orders replica LEOs 3 3 3" 10 orders_leos
n=$(records $BRK_B orders 0)
leos=$(replica_leos orders 0)
if [ "$n" = 3 ] && [ "$leos" = "3 3 3" ]; then
  pass "1: B's orders keeps its 3 records (LEO $leos)"
else
  fail "1: B's orders: $n records readable, replica LEOs '$leos' (want 3, '3 3 3')"
fi

# ---- 2. forged BumpLeaderEpoch with min_leader_epoch MaxInt32 -------------
# forge CONTROLLER BROKER TOPIC: ask for LE 2147483647 on partition 0 as its
# leader; prints the error code the controller answered (NONE if none).
forge() {
  local ctl=$1 topic=$3 desc leader le bepoch resp
  desc=$($T --bootstrap "$ctl" --json topics describe "$topic" | jq -c '.partitions[] | select(.partition == 0)')
  leader=$(jq -r .leader <<<"$desc")
  le=$(jq -r .leader_epoch <<<"$desc")
  bepoch=$($T --bootstrap "$ctl" --json brokers list | jq -r "select(.id == $leader) | .broker_epoch")
  resp=$("${GRPCURL[@]}" -d "{\"broker_id\": $leader, \"broker_epoch\": $bepoch, \"topic\": \"$topic\",
    \"partition\": 0, \"leader_epoch\": $le, \"min_leader_epoch\": 2147483647, \"truncation_offset\": -1}" \
    "$ctl" twinlog.v1.ControllerService/BumpLeaderEpoch 2>&1) || { echo "RPC_FAILED: $resp"; return; }
  jq -r '.error // "ERROR_CODE_NONE"' <<<"$resp"
}
for target in "A demo $CTL_A $BRK_A" "B demo $CTL_B $BRK_B"; do
  read -r cl topic ctl brk <<<"$target"
  before=$(leader_epoch "$ctl" "$topic" 0)
  code=$(forge "$ctl" "$brk" "$topic")
  after=$(leader_epoch "$ctl" "$topic" 0)
  if [ "$code" != ERROR_CODE_NONE ] && [ "$after" = "$before" ]; then
    pass "2: forged bump to 2147483647 on $cl's $topic-0 refused ($code), LE stays $before"
  else
    fail "2: forged bump on $cl's $topic-0 answered $code, LE $before -> $after"
  fi
done
if $T --bootstrap $BRK_A produce --topic demo --partition 0 --value after-forge >/dev/null 2>&1 &&
  $T --bootstrap $BRK_A --json consume --topic demo --partition 0 | jq -e 'select(.value == "after-forge")' >/dev/null; then
  pass "2: produce and consume on A's demo-0 still work"
else
  fail "2: produce/consume on A's demo-0 failed after the forged bump"
fi

# ---- 3. topics delete on the source while B mirrors the topic -------------
$T --bootstrap $CTL_A topics create t2 --partitions 1 --replication-factor 3 >/dev/null
printf 'r1\nr2\nr3\n' | $T --bootstrap $BRK_A produce --topic t2 >/dev/null
$T --bootstrap $CTL_B mirrors start a-to-b t2 >/dev/null
caught_up() { [ "$(mirror_partition a-to-b t2 0 | jq -r '.high_watermark // 0')" = 3 ]; }
if wait_for "B to mirror t2's 3 records" 30 caught_up; then
  pass "3: B mirrors t2 (HW 3)"
else
  fail "3: B did not mirror t2: $(mirror_partition a-to-b t2 0)"
fi
le_before=$(leader_epoch $CTL_B t2 0)
$T --bootstrap $CTL_A topics delete t2 >/dev/null
failed_retried() {
  local p
  p=$(mirror_partition a-to-b t2 0)
  [ "$(jq -r .state <<<"$p")" = FAILED ] && [ "$(jq -r '.retry_count // 0' <<<"$p")" -ge 3 ]
}
if wait_for "B's t2 to fail and retry 3 times" 60 failed_retried; then
  pass "3: B's t2 FAILED and retried: $(mirror_partition a-to-b t2 0 | jq -c '{state, retry_count, last_error}')"
else
  fail "3: B's t2 after the delete: $(mirror_partition a-to-b t2 0)"
fi
le_after=$(leader_epoch $CTL_B t2 0)
leos=$(replica_leos t2 0)
n=$(records $BRK_B t2 0)
if [ "$le_after" = "$le_before" ] && [ "$leos" = "3 3 3" ] && [ "$n" = 3 ]; then
  pass "3: B's t2 keeps 3 records on every replica (LEO $leos), LE stays $le_before"
else
  fail "3: B's t2: LE $le_before -> $le_after, replica LEOs '$leos', $n records readable (want 3 3 3, 3)"
fi
if [ -n "$(mirror_partition a-to-b t2 0 | jq -r '.last_error // empty')" ]; then
  pass "3: mirrors describe says why"
else
  fail "3: mirrors describe gives no last_error"
fi
$T --bootstrap $CTL_B mirrors stop a-to-b t2 >/dev/null
writable() { $T --bootstrap $BRK_B produce --topic t2 --value on-b >/dev/null 2>&1; }
if wait_for "B's t2 to become writable" 30 writable && [ "$(records $BRK_B t2 0)" = 4 ]; then
  pass "3: after mirrors stop B's t2 is writable and holds 4 records"
else
  fail "3: after mirrors stop: $(records $BRK_B t2 0) records, $(mirror_partition a-to-b t2 0)"
fi

# ---- 4. garbage on the Kafka port -------------------------------------------
KAFKA_A=(127.0.0.1 9291)
METRICS_A1=127.0.0.1:9191
# ApiVersions v0, correlation id 7, null client id: size 10, then the header.
APIVERSIONS='\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff'
closed_total() {
  curl -s "http://$METRICS_A1/metrics" |
    awk -v r="$1" '$1 == "twinlog_kafka_connections_closed_total{reason=\""r"\"}" {print $2}'
}
# answered FD: the next response on FD carries correlation id 7 (after
# its 4-byte size).
answered() {
  local got
  got=$(timeout 5 head -c 8 <&"$1" | od -An -tx1 | tr -d ' \n')
  [ "${got:8:8}" = 00000007 ]
}
# closes FD: the broker closed it (EOF within 5 s).
closes() { timeout 5 cat <&"$1" >/dev/null; }
before_oversized=$(closed_total oversized)
before_malformed=$(closed_total malformed)
exec 5<>"/dev/tcp/${KAFKA_A[0]}/${KAFKA_A[1]}" # a client already connected
ok=1
exec 6<>"/dev/tcp/${KAFKA_A[0]}/${KAFKA_A[1]}"
# A 256-byte frame of random bytes after an API key no Kafka API has.
{ printf '\x00\x00\x01\x00\xde\xad'; head -c 254 /dev/urandom; } >&6 2>/dev/null
closes 6 || { ok=; log "random bytes: connection not closed"; }
exec 6>&-
exec 6<>"/dev/tcp/${KAFKA_A[0]}/${KAFKA_A[1]}"
printf '\x7f\xff\xff\xff' >&6
closes 6 || { ok=; log "2 GiB size prefix: connection not closed"; }
exec 6>&-
exec 6<>"/dev/tcp/${KAFKA_A[0]}/${KAFKA_A[1]}"
printf '\x00\x00\x00\x0a\x7f\x00\x00\x00\x00\x00\x00\x01\xff\xff' >&6 # api key 32512
closes 6 || { ok=; log "unknown API key: connection not closed"; }
exec 6>&-
exec 6<>"/dev/tcp/${KAFKA_A[0]}/${KAFKA_A[1]}"
printf '\x00\x00\x00\x40\x00\x12' >&6 # 64 bytes announced, 2 sent
exec 6>&- # the broker sees EOF mid-frame
printf "$APIVERSIONS" >&5
if [ -n "$ok" ] && answered 5; then
  pass "4: random bytes, a 2 GiB size prefix and an unknown API key each closed their connection; an open client's ApiVersions still answered"
else
  fail "4: garbage on the Kafka port: a connection stayed open or the open client got no answer"
fi
exec 5>&-
after_oversized=$(closed_total oversized)
after_malformed=$(closed_total malformed)
if [ "${after_oversized:-0}" -gt "${before_oversized:-0}" ] && [ "${after_malformed:-0}" -gt "${before_malformed:-0}" ]; then
  pass "4: twinlog_kafka_connections_closed_total counted them (oversized ${before_oversized:-0} -> $after_oversized, malformed ${before_malformed:-0} -> $after_malformed)"
else
  fail "4: twinlog_kafka_connections_closed_total: oversized '${before_oversized}' -> '${after_oversized}', malformed '${before_malformed}' -> '${after_malformed}'"
fi
if $T --bootstrap $BRK_A produce --topic demo --value after-garbage >/dev/null 2>&1; then
  pass "4: broker 1 of A still serves after the garbage"
else
  fail "4: produce to A after the garbage failed"
fi

# ---- 5. hostile ACL, SCRAM and preview requests on A's controller ---------
long=$(head -c 2000 /dev/zero | tr '\0' x)
resp=$("${GRPCURL[@]}" -d "{\"creations\": [
    {\"resource_type\": \"ACL_RESOURCE_TYPE_TOPIC\", \"resource_name\": \"demo\", \"pattern_type\": \"ACL_PATTERN_TYPE_LITERAL\",
     \"principal\": \"User:$long\", \"host\": \"*\", \"operation\": \"ACL_OPERATION_READ\", \"permission\": \"ACL_PERMISSION_ALLOW\"},
    {\"resource_type\": \"ACL_RESOURCE_TYPE_TOPIC\", \"resource_name\": \"demo\", \"pattern_type\": \"ACL_PATTERN_TYPE_LITERAL\",
     \"principal\": \"User:hostile-ok\", \"host\": \"*\", \"operation\": \"ACL_OPERATION_READ\", \"permission\": \"ACL_PERMISSION_ALLOW\"}]}" \
  $CTL_A twinlog.v1.AdminService/CreateAcls 2>&1)
first=$(jq -r '.results[0].error // "ERROR_CODE_NONE"' <<<"$resp" 2>/dev/null)
second=$(jq -r '.results[1].error // "ERROR_CODE_NONE"' <<<"$resp" 2>/dev/null)
stored=$("${GRPCURL[@]}" -d '{"filter": {"resource_type": "ACL_RESOURCE_TYPE_ANY", "pattern_type": "ACL_PATTERN_TYPE_ANY",
    "operation": "ACL_OPERATION_ANY", "permission": "ACL_PERMISSION_ANY"}}' $CTL_A twinlog.v1.AdminService/DescribeAcls 2>&1 |
  jq -r '[.acls[]? | .principal | select(startswith("User:hostile-ok") or (length > 1000))] | length' 2>/dev/null)
if [ "$first" = ERROR_CODE_INVALID_REQUEST ] && [ "$second" = ERROR_CODE_NONE ] && [ "$stored" = 1 ]; then
  pass "5: a 2000-byte ACL principal refused ($(jq -r '.results[0].errorMessage' <<<"$resp" | cut -c1-80)), the valid binding beside it stored alone"
else
  fail "5: CreateAcls with a 2000-byte principal: results $first/$second, $stored stored ($resp)"
fi
resp=$("${GRPCURL[@]}" -d '{"upsertions": [{"name": "hostile", "mechanism": "SCRAM_MECHANISM_SCRAM_SHA_256",
    "iterations": 2147483647, "salt": "c2FsdA==", "salted_password": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}]}' \
  $CTL_A twinlog.v1.AdminService/AlterUserScramCredentials 2>&1)
code=$(jq -r '.results[0].error // "ERROR_CODE_NONE"' <<<"$resp" 2>/dev/null)
users=$("${GRPCURL[@]}" -d '{}' $CTL_A twinlog.v1.AdminService/DescribeUserScramCredentials 2>&1 |
  jq -r '[.results[]? | select(.user == "hostile")] | length' 2>/dev/null)
if [ "$code" = ERROR_CODE_UNACCEPTABLE_CREDENTIAL ] && [ "$users" = 0 ]; then
  pass "5: a SCRAM credential of 2^31-1 iterations refused ($code), no credential stored"
else
  fail "5: AlterUserScramCredentials with 2^31-1 iterations: $code, $users stored ($resp)"
fi
topics=$(seq 1 1001 | jq -R . | jq -sc .)
many=$("${GRPCURL[@]}" -d "{\"mirror\": \"m\", \"source_bootstrap\": [\"$BRK_B\"], \"topics\": $topics}" \
  $CTL_A twinlog.v1.MirrorService/PreviewMirrorTruncation 2>&1)
nosrc=$("${GRPCURL[@]}" -d '{"mirror": "no-such-mirror", "topics": ["demo"]}' \
  $CTL_A twinlog.v1.MirrorService/PreviewMirrorTruncation 2>&1)
if grep -q "InvalidArgument" <<<"$many" && grep -q "at most 1000" <<<"$many" &&
  grep -q "InvalidArgument" <<<"$nosrc" && grep -q "give the source's addresses" <<<"$nosrc"; then
  pass "5: a preview of 1001 topics and one of an unknown mirror without a source refused with InvalidArgument and the reason"
else
  fail "5: PreviewMirrorTruncation: 1001 topics -> $(head -c 200 <<<"$many"); unknown mirror -> $(head -c 200 <<<"$nosrc")"
fi
if $T --bootstrap $CTL_A topics list >/dev/null 2>&1; then
  pass "5: A's controller still serves"
else
  fail "5: A's controller stopped answering after the hostile admin requests"
fi

# ---- 6. hostile group commits and internal-topic requests ------------------
coord=$("${GRPCURL[@]}" -d '{"group_id": "hostile-g"}' $BRK_A twinlog.v1.GroupService/FindCoordinator 2>&1)
for _ in $(seq 1 20); do # the first FindCoordinator creates __consumer_offsets
  [ "$(jq -r '.error // "ERROR_CODE_NONE"' <<<"$coord" 2>/dev/null)" = ERROR_CODE_NONE ] && [ -n "$(jq -r '.host // empty' <<<"$coord" 2>/dev/null)" ] && break
  sleep 0.5
  coord=$("${GRPCURL[@]}" -d '{"group_id": "hostile-g"}' $BRK_A twinlog.v1.GroupService/FindCoordinator 2>&1)
done
caddr="$(jq -r .host <<<"$coord" 2>/dev/null):$(jq -r .port <<<"$coord" 2>/dev/null)"
big=$(head -c 10240 /dev/zero | tr '\0' m)
resp=$("${GRPCURL[@]}" -d "{\"group_id\": \"hostile-g\", \"offsets\": [
    {\"topic\": \"demo\", \"partition\": 0, \"offset\": 1, \"leader_epoch\": -1, \"metadata\": \"$big\"},
    {\"topic\": \"demo\", \"partition\": 1, \"offset\": 1, \"leader_epoch\": -1}]}" \
  "$caddr" twinlog.v1.GroupService/CommitOffsets 2>&1)
c0=$(jq -r '.results[0].error // "ERROR_CODE_NONE"' <<<"$resp" 2>/dev/null)
c1=$(jq -r '.results[1].error // "ERROR_CODE_NONE"' <<<"$resp" 2>/dev/null)
fetched=$("${GRPCURL[@]}" -d '{"group_id": "hostile-g"}' "$caddr" twinlog.v1.GroupService/FetchOffsets 2>&1 |
  jq -c '[.offsets[]? | select(.offset != null and (.offset | tonumber) >= 0) | [.partition // 0, (.offset | tonumber)]] | sort' 2>/dev/null)
if [ "$c0" = ERROR_CODE_OFFSET_METADATA_TOO_LARGE ] && [ "$c1" = ERROR_CODE_NONE ] && [ "$fetched" = '[[1,1]]' ]; then
  pass "6: a commit with 10 KiB of metadata refused (OFFSET_METADATA_TOO_LARGE) for that partition alone; the other committed"
else
  fail "6: CommitOffsets at $caddr: $c0/$c1, fetched $fetched ($(head -c 300 <<<"$resp"))"
fi
b1=$($T --bootstrap $CTL_A --json brokers list | jq -r 'select(.id == 1) | .broker_epoch')
resp=$("${GRPCURL[@]}" -d "{\"broker_id\": 1, \"broker_epoch\": $b1, \"topic\": \"evil\"}" \
  $CTL_A twinlog.v1.ControllerService/EnsureInternalTopic 2>&1)
code=$(jq -r '.error // "ERROR_CODE_NONE"' <<<"$resp" 2>/dev/null)
if [ "$code" != ERROR_CODE_NONE ] && ! $T --bootstrap $CTL_A topics list 2>/dev/null | grep -qw evil; then
  pass "6: a forged EnsureInternalTopic for topic evil refused ($code), nothing created"
else
  fail "6: EnsureInternalTopic evil: $resp; topics: $($T --bootstrap $CTL_A topics list 2>&1 | tr '\n' ' ')"
fi

log "$PASSED passed, ${#FAILED[@]} failed"
for f in "${FAILED[@]}"; do log "  failed: $f"; done
[ ${#FAILED[@]} -eq 0 ]
