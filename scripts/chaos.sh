#!/usr/bin/env bash
# chaos.sh (`make chaos`): the issue-7 history checker on the docker-compose
# deployment, both clusters. Builds the static binaries, the FROM scratch
# image and the static twinchaos driver, starts both clusters (own
# project), runs `twinchaos run`: seeded faults on both clusters (docker
# kill/restart of brokers and controllers, network disconnects, cross-
# cluster link cuts) while a client container on both cluster networks
# runs acks=all producers on the writable cluster, consumers on both, and
# at seeded moments fails the mirror over (planned or not) and back
# (docs/operations.md); after healing, a final failback if needed and the
# catch-up, it checks the history (cmd/twinchaos/check.go), writes it to
# $CHAOS_OUT and prints a summary. Always runs `compose down -v`. Exit 0
# when the history is clean, 1 on a violation (or when the client or the
# final catch-up did not finish), 2 on set-up failure; skips (exit 0)
# without Docker. `twinchaos check FILE` re-checks a history.
#
# The deployment is secured (mutual TLS and ACLs, deploy/README.md): the
# certificates come from scripts/gencerts (deploy/tls), each cluster grants
# the other's daemons what mirroring needs (make compose-acls), and the
# client container presents admin's certificate (twinchaos run --tls-dir),
# its metadata observers cluster-X-broker--1's (granted ClusterAction below).
#
# Env: CHAOS_PROJECT (default twinlog-chaos), CHAOS_DURATION (default 60s),
# CHAOS_SEED (default time-based, printed), CHAOS_OUT (default
# run/chaos-history.jsonl), CHAOS_KEEP=1 (leave the containers up).
set -uo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
  echo "chaos: SKIP: no Docker engine answers (\`docker info\` failed)"
  exit 0
fi
if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"
elif command -v docker-compose >/dev/null 2>&1; then COMPOSE=docker-compose
else echo "chaos: SKIP: neither \`docker compose\` nor docker-compose is installed"; exit 0
fi

PROJECT=${CHAOS_PROJECT:-twinlog-chaos}
IMAGE=${TWINLOG_IMAGE:-twinlog:dev}
compose() { TWINLOG_IMAGE=$IMAGE $COMPOSE -p "$PROJECT" -f deploy/docker-compose.yml "$@"; }

cleanup() {
  rc=$?
  if [ "${CHAOS_KEEP:-}" = 1 ]; then
    echo "chaos: CHAOS_KEEP=1: leaving project $PROJECT up"
  else
    echo "chaos: compose down -v"
    docker rm -f -v "$PROJECT-chaos-client" >/dev/null 2>&1 || true
    compose down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

compose down -v --remove-orphans >/dev/null 2>&1 || true
make --no-print-directory images TWINLOG_IMAGE="$IMAGE" || exit 2
make --no-print-directory certs || exit 2
CGO_ENABLED=0 GOOS=linux go build -trimpath -o deploy/bin/twinchaos ./cmd/twinchaos || exit 2
compose up -d || exit 2
COMPOSE="$COMPOSE" COMPOSE_PROJECT="$PROJECT" ./scripts/compose-wait.sh 180 || exit 2
make --no-print-directory compose-acls COMPOSE="$COMPOSE" COMPOSE_PROJECT="$PROJECT" TWINLOG_IMAGE="$IMAGE" || exit 2
# twinchaos's metadata observer fetches each controller's metadata as broker
# -1 (FetchMetadata, broker_id -1): with broker.principal.template only
# User:cluster-X-broker--1 may, and it needs ClusterAction on the cluster
# (its certificate comes from scripts/gencerts; only chaos grants it).
for c in a b; do
  port=$([ $c = a ] && echo 9090 || echo 9100)
  docker exec "$(compose ps -q $c-broker-1)" /usr/local/bin/twinctl \
    --tls-ca /etc/twinlog/tls/ca.crt --tls-cert /etc/twinlog/tls/admin.crt --tls-key /etc/twinlog/tls/admin.key \
    --bootstrap $c-controller:$port acls add --allow-principal "User:cluster-$c-broker--1" --operation ClusterAction --cluster || exit 2
done

args=(run --project "$PROJECT" --image "$IMAGE" --binary deploy/bin/twinchaos
  --duration "${CHAOS_DURATION:-60s}" --out "${CHAOS_OUT:-run/chaos-history.jsonl}" --tls-dir deploy/tls)
[ -n "${CHAOS_SEED:-}" ] && args+=(--seed "$CHAOS_SEED")
./deploy/bin/twinchaos "${args[@]}"
