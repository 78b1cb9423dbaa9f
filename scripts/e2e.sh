#!/usr/bin/env bash
# e2e.sh (`make e2e`): end-to-end test of the docker-compose deployment.
#
# Builds static binaries and the FROM scratch image, starts both clusters
# with deploy/docker-compose.yml, then: topic on A, mirror A -> B (which
# creates the topic on B), produce on A with a broker killed mid-way,
# wait for B, fail over to B, produce on B, fail back (A mirrors B) with
# one network disconnect, fail over to A again, produce on A; then checks
# that both clusters hold identical records containing every acked one and
# that /metrics exposes twinlog_cluster_electable_leaders. The deployment
# is secured (mutual TLS, ACLs; certificates from scripts/gencerts in
# deploy/tls): set-up grants each cluster's daemons what mirroring needs at
# the other, and one check makes sure a plaintext client and a certificate
# without ACLs are refused. Always runs
# `compose down -v`. Exits 0 when every step passed, 1 otherwise; skips
# (exit 0) when no Docker engine answers.
#
# twinctl runs inside the brokers' containers (docker exec): the brokers
# advertise compose service names, which the host cannot resolve. It
# presents admin's certificate (a super user of both clusters).
#
# Env: E2E_PROJECT (compose project, default twinlog-e2e), E2E_MIRROR_TIMEOUT
# (seconds to wait for a mirror to catch up, default 60), E2E_KEEP=1 (leave
# the containers running for inspection), E2E_RECORDS (per phase, default 30).
set -uo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
  echo "e2e: SKIP: no Docker engine answers (\`docker info\` failed)"
  exit 0
fi
if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"
elif command -v docker-compose >/dev/null 2>&1; then COMPOSE=docker-compose
else echo "e2e: SKIP: neither \`docker compose\` nor docker-compose is installed"; exit 0
fi

PROJECT=${E2E_PROJECT:-twinlog-e2e}
MIRROR_TIMEOUT=${E2E_MIRROR_TIMEOUT:-60}
N=${E2E_RECORDS:-30}
TOPIC=e2e
PARTS=3
IMAGE=${TWINLOG_IMAGE:-twinlog:dev}
SRC_A=a-broker-1:9091,a-broker-2:9092,a-broker-3:9093
SRC_B=b-broker-1:9101,b-broker-2:9102,b-broker-3:9103
WORK=$(mktemp -d)
START=$(date +%s)
FAILED=()
PASSED=0

compose() { TWINLOG_IMAGE=$IMAGE $COMPOSE -p "$PROJECT" -f deploy/docker-compose.yml "$@"; }
# cid SERVICE: container id, filled in once after `up` by cache_cids
# (docker-compose v1 takes a second or more per invocation).
declare -A CIDS=()
cid() { if [ -n "${CIDS[$1]:-}" ]; then echo "${CIDS[$1]}"; else compose ps -q "$1"; fi; }
cache_cids() {
  local s
  for s in a-controller a-broker-1 a-broker-2 a-broker-3 b-controller b-broker-1 b-broker-2 b-broker-3; do
    CIDS[$s]=$(compose ps -q "$s")
  done
}
log() { printf '[e2e %4ss] %s\n' "$(( $(date +%s) - START ))" "$*"; }
pass() { PASSED=$((PASSED + 1)); log "PASS $*"; }
fail() { FAILED+=("$*"); log "FAIL $*"; }

cleanup() {
  rc=$?
  if [ "${E2E_KEEP:-}" = 1 ]; then
    log "E2E_KEEP=1: leaving project $PROJECT up (down: $COMPOSE -p $PROJECT -f deploy/docker-compose.yml down -v)"
  else
    log "compose down -v"
    compose down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# tA / tB: twinctl inside a-broker-1 / b-broker-1 (cluster network + interlink),
# as User:admin (deploy/tls is mounted at /etc/twinlog/tls).
TLS=/etc/twinlog/tls
tls_as() { echo --tls-ca "$TLS/ca.crt" --tls-cert "$TLS/$1.crt" --tls-key "$TLS/$1.key"; }
ADMIN=($(tls_as admin))
tA() { docker exec -i "$(cid a-broker-1)" /usr/local/bin/twinctl "${ADMIN[@]}" --bootstrap a-controller:9090 "$@"; }
tB() { docker exec -i "$(cid b-broker-1)" /usr/local/bin/twinctl "${ADMIN[@]}" --bootstrap b-controller:9100 "$@"; }
tAb() { docker exec -i "$(cid a-broker-1)" /usr/local/bin/twinctl "${ADMIN[@]}" --bootstrap a-broker-1:9091 "$@"; }
tBb() { docker exec -i "$(cid b-broker-1)" /usr/local/bin/twinctl "${ADMIN[@]}" --bootstrap b-broker-1:9101 "$@"; }

# grant_mirror AT FROM: cluster AT lets cluster FROM's daemons mirror from it
# (and sync group offsets), as make run does (docs/security.md): Read and
# DescribeConfigs on every topic, Describe on every group, Read on the
# Mirror named by FROM's cluster id.
grant_mirror() {
  local at=$1 from=$2 n res p=()
  for n in controller broker-1 broker-2 broker-3; do p+=(--allow-principal "User:cluster-$from-$n"); done
  for res in "--topic|*|Read" "--topic|*|DescribeConfigs" "--group|*|Describe" "--mirror|cluster-$from|Read"; do
    IFS='|' read -r kind name op <<<"$res"
    "t${at^^}" acls add "${p[@]}" "$kind" "$name" --operation "$op" || return 1
  done
}

# refused: without TLS a controller is unreachable, and with a certificate
# of the CA whose principal has no ACLs (User:intruder) a request is
# refused with AUTHORIZATION_FAILED.
refused() {
  local out
  if out=$(docker exec -i "$(cid a-broker-1)" /usr/local/bin/twinctl --bootstrap a-controller:9090 --timeout 10s topics list 2>&1); then
    echo "plaintext twinctl succeeded against a-controller:"; echo "$out"; return 1
  fi
  echo "plaintext: refused as expected: $(echo "$out" | tail -n 1)"
  if out=$(docker exec -i "$(cid a-broker-1)" /usr/local/bin/twinctl $(tls_as intruder) --bootstrap a-controller:9090 topics create intruder-topic --partitions 1 --replication-factor 1 2>&1); then
    echo "User:intruder created a topic:"; echo "$out"; return 1
  fi
  echo "intruder: $(echo "$out" | tail -n 1)"
  if ! grep -q AUTHORIZATION_FAILED <<<"$out"; then echo "no AUTHORIZATION_FAILED in the answer"; return 1; fi
}

# must: a set-up step without which nothing later means anything.
must() {
  local what=$1; shift
  if "$@" >"$WORK/out" 2>&1; then pass "$what"; else
    fail "$what"; sed 's/^/    /' "$WORK/out"; log "cannot continue"; exit 1
  fi
}
# step: a checked step; the run continues after a failure so later steps
# are exercised too, and the exit code is 1.
step() {
  local what=$1; shift
  if "$@" >"$WORK/out" 2>&1; then pass "$what"; return 0; fi
  fail "$what"; sed 's/^/    /' "$WORK/out" | tail -n 20; return 1
}

# produce PHASE CLUSTER FROM TO: records PHASE-i for i in [FROM,TO) spread
# over the partitions; acked values are appended to $WORK/acked.
produce() {
  local phase=$1 cluster=$2 from=$3 to=$4 i p
  for ((i = from; i < to; i++)); do
    p=$((i % PARTS))
    if "t${cluster}b" produce --topic "$TOPIC" --partition "$p" --acks all --retries 20 --request-timeout-ms 20000 --value "$phase-$i" >>"$WORK/produce.log" 2>&1; then
      echo "$p $phase-$i" >>"$WORK/acked"
    else
      echo "produce $phase-$i to $cluster partition $p failed" >&2
      return 1
    fi
  done
}

# dump CLUSTER: every partition's records (offset, leader epoch, timestamp,
# key, value) into $WORK/CLUSTER.txt.
dump() {
  local c=$1 p
  : >"$WORK/$c.txt"
  for ((p = 0; p < PARTS; p++)); do
    "t${c}b" consume --topic "$TOPIC" --partition "$p" --retries 5 | sed "s/^/$p\t/" >>"$WORK/$c.txt" || return 1
  done
}

# same: A and B hold identical records.
same() {
  dump A && dump B || return 1
  if ! cmp -s "$WORK/A.txt" "$WORK/B.txt"; then
    echo "A has $(wc -l <"$WORK/A.txt") records, B has $(wc -l <"$WORK/B.txt"); first difference:"
    diff "$WORK/A.txt" "$WORK/B.txt" | head -n 6
    return 1
  fi
}

# caught_up: wait up to MIRROR_TIMEOUT for same.
caught_up() {
  local deadline=$(( $(date +%s) + MIRROR_TIMEOUT ))
  until same >"$WORK/same.out" 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      cat "$WORK/same.out"; echo "not identical after ${MIRROR_TIMEOUT}s; mirror state:"
      tB mirrors describe a-to-b 2>&1 | head -n 6; tA mirrors describe b-to-a 2>&1 | head -n 6
      return 1
    fi
    sleep 2
  done
}

# no_loss: every acked value is in both clusters, in the partition it was acked in.
no_loss() {
  dump A && dump B || return 1
  local missing=0 p v
  while read -r p v; do
    for c in A B; do
      if ! awk -F'\t' -v p="$p" -v v="$v" '$1 == p && $6 == v { f = 1 } END { exit !f }' "$WORK/$c.txt"; then
        echo "acked $v (partition $p) missing on $c"; missing=$((missing + 1))
      fi
    done
  done <"$WORK/acked"
  echo "$(wc -l <"$WORK/acked") acked records checked, $missing missing"
  [ "$missing" = 0 ]
}

metric() { curl -sf "http://127.0.0.1:$1/metrics" | grep -E "^twinlog_cluster_electable_leaders(\{| )"; }

wait_healthy() { COMPOSE="$COMPOSE" COMPOSE_PROJECT="$PROJECT" ./scripts/compose-wait.sh "${1:-180}"; }

# --- set-up ---------------------------------------------------------------
log "compose: $COMPOSE, project $PROJECT, image $IMAGE"
compose down -v --remove-orphans >/dev/null 2>&1 || true
must "build static binaries and the scratch image" make --no-print-directory images TWINLOG_IMAGE="$IMAGE"
must "certificates in deploy/tls (scripts/gencerts)" make --no-print-directory certs
must "compose up both clusters" compose up -d
must "all 8 containers healthy" wait_healthy 180
log "$(tail -n 1 "$WORK/out")"
cache_cids

must "ACLs: A lets cluster B's daemons mirror from it" grant_mirror A b
must "ACLs: B lets cluster A's daemons mirror from it" grant_mirror B a
step "security: plaintext client refused, User:intruder gets AUTHORIZATION_FAILED" refused
topic_args=(topics create "$TOPIC" --partitions "$PARTS" --replication-factor 3 --config min.insync.replicas=2)
must "create topic $TOPIC on A" tA "${topic_args[@]}"
must "mirror a-to-b on B from A (creates $TOPIC on B with A's topic id, SPEC §6.1)" tB mirrors create a-to-b --source "$SRC_A" "$TOPIC"
must "min.insync.replicas=2 on B (local, not mirrored)" tB configs set --topic "$TOPIC" min.insync.replicas=2

# --- phase 1: produce on A, kill a broker mid-way --------------------------
step "produce $((N / 2)) records on A" produce p1 A 0 $((N / 2))
step "docker kill a-broker-2 mid-way" docker kill "$(cid a-broker-2)"
step "produce $((N - N / 2)) more on A with a-broker-2 down" produce p1 A $((N / 2)) "$N"
step "restart a-broker-2" docker start "$(cid a-broker-2)"
step "B mirrors A (identical records)" caught_up

# --- failover to B --------------------------------------------------------
step "fail over: B mirrors stop a-to-b (wait for catch-up)" tB mirrors stop a-to-b "$TOPIC" --wait-for-catch-up
step "produce $N records on B" produce p2 B 0 "$N"

# --- failback: A mirrors B, with one network disconnect --------------------
step "fail back: A mirrors create b-to-a from B" tA mirrors create b-to-a --source "$SRC_B" "$TOPIC"
step "docker network disconnect b-broker-3 from interlink" docker network disconnect "${PROJECT}_interlink" "$(cid b-broker-3)"
step "produce $((N / 2)) records on B while b-broker-3 is cut off" produce p2b B 0 $((N / 2))
sleep 5
step "docker network connect b-broker-3 to interlink" docker network connect --alias b-broker-3 "${PROJECT}_interlink" "$(cid b-broker-3)"
step "A mirrors B after failback (identical records)" caught_up

# --- fail over to A again -------------------------------------------------
step "fail over to A: A mirrors stop b-to-a (wait for catch-up)" tA mirrors stop b-to-a "$TOPIC" --wait-for-catch-up
step "B follows A again: B mirrors start a-to-b" tB mirrors start a-to-b "$TOPIC"
step "produce $N records on A" produce p3 A 0 "$N"
step "B mirrors A again (identical records)" caught_up

# --- final checks ---------------------------------------------------------
step "all 8 containers healthy at the end" wait_healthy 60
step "no acked record lost on either cluster" no_loss
log "$(tail -n 1 "$WORK/out")"
step "A controller /metrics has twinlog_cluster_electable_leaders" metric 9190
step "B controller /metrics has twinlog_cluster_electable_leaders" metric 9200

log "done in $(( $(date +%s) - START ))s: $PASSED passed, ${#FAILED[@]} failed"
if [ "${#FAILED[@]}" -gt 0 ]; then
  printf '  failed: %s\n' "${FAILED[@]}"
  exit 1
fi
