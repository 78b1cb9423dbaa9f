#!/usr/bin/env bash
# compose-wait.sh: wait until every twinlog container of the compose project
# reports healthy (works with docker-compose v1, which has no `up --wait`).
#   COMPOSE="docker-compose" COMPOSE_PROJECT=twinlog scripts/compose-wait.sh [TIMEOUT_S]
set -euo pipefail
cd "$(dirname "$0")/.."
COMPOSE=${COMPOSE:-docker-compose}
COMPOSE_PROJECT=${COMPOSE_PROJECT:-twinlog}
timeout=${1:-120}
# The daemons run mutual TLS with deploy/tls (scripts/gencerts, make certs):
# without it they cannot start.
if [ ! -f deploy/tls/ca.crt ]; then
  echo "compose-wait: deploy/tls/ca.crt missing: run \`make certs\` (scripts/gencerts) and recreate the containers" >&2
fi
services="a-controller a-broker-1 a-broker-2 a-broker-3 b-controller b-broker-1 b-broker-2 b-broker-3"
start=$(date +%s)
while :; do
  bad=""
  for s in $services; do
    id=$($COMPOSE -p "$COMPOSE_PROJECT" -f deploy/docker-compose.yml ps -q "$s" 2>/dev/null || true)
    st=$( [ -n "$id" ] && docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id" 2>/dev/null || echo missing)
    [ "$st" = healthy ] || bad="$bad $s=$st"
  done
  [ -z "$bad" ] && { echo "all 8 containers healthy after $(( $(date +%s) - start ))s"; exit 0; }
  if [ $(( $(date +%s) - start )) -ge "$timeout" ]; then
    echo "compose-wait: not healthy after ${timeout}s:$bad" >&2
    echo "compose-wait: see \`docker logs\` of those containers (TLS: deploy/tls from make certs, mounted at /etc/twinlog/tls)" >&2
    exit 1
  fi
  sleep 2
done
