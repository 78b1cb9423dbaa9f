#!/usr/bin/env bash
# promcheck.sh (`make promcheck`): the alerting rules and the Grafana
# dashboard, checked by Prometheus's own tools and against the metrics the
# daemons really export (issue 18). No Docker.
#
# Static (promtool):
#   1. `promtool check rules` on deploy/prometheus/*.yml (not *_test.yml) and
#      `promtool check config deploy/prometheus.yml` (which loads them too).
#   2. `promtool test rules deploy/prometheus/*_test.yml`: input series ->
#      expected alerts, cases that must not fire included.
#   3. Every alert has `for` and a severity label, a test case where it fires
#      (with its runbook_url, so the rendered annotations are compared), and a
#      "### <alert>" section in docs/operations.md that runbook_url points at.
#   4. The dashboards (deploy/grafana/dashboards/*.json): valid JSON, unique
#      panel ids, the provisioned datasource, and every target's expr (and
#      every variable's label_values selector) parses with Prometheus's
#      parser: written as recording rules, template variables substituted
#      ($__rate_interval, $__range -> 1m; $cluster, $mirror, ... -> .*), and
#      run through `promtool check rules`.
# Live (bin/runlocal, as `make run`):
#   5. Scrape every daemon's /metrics (after one Kafka ApiVersions request per
#      cluster, so the Kafka request histogram has a series): each
#      twinlog_* name in the rules, their tests and the dashboards (and go_*,
#      process_* in the dashboards) must be a sample name of the scrape
#      (histograms: _bucket/_sum/_count); `promtool check metrics` lints each
#      scrape.
#   6. A real Prometheus (the same Debian package) scrapes the two clusters
#      every second with the labels of deploy/prometheus.yml and evaluates
#      alerts.yml: every rule must evaluate without error and none may fire
#      on the healthy clusters; every dashboard expression must execute, and
#      each label its legend names must be on the series it returns.
#
# promtool and prometheus come from Debian's `prometheus` package. When
# missing, the script fetches that package with `apt-get download` (apt-get
# update first with sudo if it must) and unpacks the two binaries into bin/:
# `apt-get install` would also start a Prometheus server on :9090 and a node
# exporter on :9100 where systemd runs, the ports of `make run`. It fails,
# never skips, if it cannot. Needs bin/ (make bins), curl and jq (both
# installed with apt-get when missing).
# Exits 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."

RULES_DIR=deploy/prometheus
PROM_CONFIG=deploy/prometheus.yml
DASHBOARDS=(deploy/grafana/dashboards/*.json)
DATASOURCE_UID=twinlog-prom
OPS_DOC=docs/operations.md
PROM_PORT=${PROMCHECK_PROM_PORT:-19095}
WORK=run/promcheck
START=$(date +%s)
FAILED=()
PASSED=0
RUNLOCAL_PID=
PROM_PID=

log() { printf '[promcheck %3ss] %s\n' "$(($(date +%s) - START))" "$*"; }
pass() { PASSED=$((PASSED + 1)); log "PASS $*"; }
fail() { FAILED+=("$*"); log "FAIL $*"; }
indent() { sed 's/^/      /'; }

cleanup() {
  if [ -n "$PROM_PID" ]; then
    kill -TERM "$PROM_PID" 2>/dev/null
    wait "$PROM_PID" 2>/dev/null
  fi
  if [ -n "$RUNLOCAL_PID" ]; then
    kill -TERM "$RUNLOCAL_PID" 2>/dev/null
    wait "$RUNLOCAL_PID" 2>/dev/null
  fi
}
trap cleanup EXIT

# ---- tools -------------------------------------------------------------------
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
for t in curl jq openssl; do
  if ! command -v $t >/dev/null; then
    log "installing $t (apt-get)"
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $t; } >/dev/null 2>&1
    command -v $t >/dev/null || { echo "promcheck: $t is required and could not be installed"; exit 1; }
  fi
done
find_tool() { # name -> path: $PROMTOOL/$PROMETHEUS, else PATH, else bin/ (fetched before)
  local var=${1^^}
  if [ -n "${!var:-}" ]; then echo "${!var}"; elif command -v "$1"; then :; elif [ -x "bin/$1" ]; then echo "bin/$1"; fi
}
PROMTOOL=$(find_tool promtool)
PROMETHEUS=$(find_tool prometheus)
if [ -z "$PROMTOOL" ] || [ -z "$PROMETHEUS" ]; then
  log "fetching promtool and prometheus (apt-get download prometheus)"
  dl=$(mktemp -d)
  (cd "$dl" && { apt-get download prometheus || { $SUDO apt-get update -qq && apt-get download prometheus; }; } >/dev/null 2>&1 &&
    dpkg-deb -x prometheus_*.deb x) &&
    mkdir -p bin && cp "$dl/x/usr/bin/promtool" "$dl/x/usr/bin/prometheus" bin/
  rm -rf "$dl"
  PROMTOOL=$(find_tool promtool)
  PROMETHEUS=$(find_tool prometheus)
  if [ -z "$PROMTOOL" ] || [ -z "$PROMETHEUS" ]; then
    echo "promcheck: promtool and prometheus (Debian package prometheus) are required and could not be fetched"
    exit 1
  fi
fi
log "tools: $("$PROMTOOL" --version 2>&1 | head -1) ($PROMTOOL), $PROMETHEUS"
rm -rf "$WORK"
mkdir -p "$WORK"

RULE_FILES=()
TEST_FILES=()
for f in "$RULES_DIR"/*.yml; do
  case $f in *_test.yml) TEST_FILES+=("$f") ;; *) RULE_FILES+=("$f") ;; esac
done
[ ${#RULE_FILES[@]} -gt 0 ] || { echo "promcheck: no rules in $RULES_DIR"; exit 1; }
[ ${#TEST_FILES[@]} -gt 0 ] || { echo "promcheck: no *_test.yml in $RULES_DIR"; exit 1; }

# ---- 1. rules and config parse ------------------------------------------------
if out=$("$PROMTOOL" check rules "${RULE_FILES[@]}" 2>&1); then
  pass "1: promtool check rules ${RULE_FILES[*]} ($(grep -o '[0-9]* rules found' <<<"$out" | paste -sd, -))"
else
  fail "1: promtool check rules"
  indent <<<"$out"
fi
if out=$("$PROMTOOL" check config "$PROM_CONFIG" 2>&1); then
  pass "1: promtool check config $PROM_CONFIG (loads its rule_files)"
else
  fail "1: promtool check config $PROM_CONFIG"
  indent <<<"$out"
fi

# ---- 2. rule unit tests ---------------------------------------------------------
if out=$("$PROMTOOL" test rules "${TEST_FILES[@]}" 2>&1); then
  pass "2: promtool test rules ${TEST_FILES[*]}"
else
  fail "2: promtool test rules"
  grep -v '^[[:space:]]*$' <<<"$out" | uniq | indent
fi

# ---- 3. every alert: for, severity, a firing test, a runbook section --------------
# Blocks from one "- alert:" line to the next (rules files are written one
# key per line, as alerts.yml is).
ALERTS=$(awk '
  function flush() { if (name != "") print name, hasfor, hassev }
  /^[[:space:]]*- (alert|record):/ { flush(); name = ($2 == "alert:") ? $3 : ""; hasfor = 0; hassev = 0; next }
  /^[[:space:]]*for:/ { hasfor = 1 }
  /^[[:space:]]*severity:/ { hassev = 1 }
  END { flush() }' "${RULE_FILES[@]}")
bad=()
while read -r name hasfor hassev; do
  [ -n "$name" ] || continue
  anchor=$(tr '[:upper:]' '[:lower:]' <<<"$name")
  [ "$hasfor" = 1 ] || bad+=("$name: no for")
  [ "$hassev" = 1 ] || bad+=("$name: no severity label")
  grep -q "runbook_url: \"$OPS_DOC#$anchor\"" "${RULE_FILES[@]}" || bad+=("$name: runbook_url is not \"$OPS_DOC#$anchor\"")
  # An expected alert's annotations include its runbook_url: a case where it fires.
  grep -q "runbook_url: \"$OPS_DOC#$anchor\"" "${TEST_FILES[@]}" || bad+=("$name: no test case where it fires")
  grep -q "^### $name\$" "$OPS_DOC" || bad+=("$name: no \"### $name\" section in $OPS_DOC")
done <<<"$ALERTS"
nalerts=$(grep -c . <<<"$ALERTS")
if [ ${#bad[@]} -eq 0 ] && [ "$nalerts" -gt 0 ]; then
  pass "3: $nalerts alerts each have for, severity, a firing test case and a section in $OPS_DOC"
else
  fail "3: alert structure"
  printf '%s\n' "${bad[@]}" | indent
fi

# ---- 4. dashboards: JSON, ids, datasource, every expression parses ----------------
# $WORK/exprs.jsonl: one object per expression: file, id (panel id, or
# var_<name> for a variable's label_values selector), ref, legend, expr, and
# q, the expr with Grafana's variables replaced by values the parser (and a
# query) accepts.
JQ_SUBST='def subst: gsub("\\$\\{?__(interval|range)_ms\\}?"; "60000") | gsub("\\$\\{?__range_s\\}?"; "60")
  | gsub("\\$\\{?__(rate_interval|interval|range)\\}?"; "1m")
  | gsub("\\$\\{[A-Za-z0-9_]+(:[a-z]+)?\\}"; ".*") | gsub("\\$[A-Za-z_][A-Za-z0-9_]*"; ".*") | gsub("\\[\\[[A-Za-z0-9_]+\\]\\]"; ".*");'
: >"$WORK/exprs.jsonl"
dash_ok=1
for d in "${DASHBOARDS[@]}"; do
  if ! jq empty "$d" 2>"$WORK/jq.err"; then
    fail "4: $d is not valid JSON: $(cat "$WORK/jq.err")"
    dash_ok=0
    continue
  fi
  dup=$(jq -r '[.. | objects | select(has("gridPos")) | .id] | group_by(.) | map(select(length > 1) | .[0]) | .[]' "$d")
  [ -z "$dup" ] || { fail "4: $d: duplicate panel ids: $dup"; dash_ok=0; }
  wrongds=$(jq -r --arg uid "$DATASOURCE_UID" '.. | objects | select(has("datasource") and (.datasource | type) == "object" and .datasource.uid != $uid) | "\(.title // .refId // .name): \(.datasource.uid)"' "$d")
  [ -z "$wrongds" ] || { fail "4: $d: datasource uid other than $DATASOURCE_UID: $wrongds"; dash_ok=0; }
  noexpr=$(jq -r '.. | objects | select(has("targets")) | . as $p | .targets[] | select((.expr // "") == "") | "panel \($p.id) \($p.title) target \(.refId)"' "$d")
  [ -z "$noexpr" ] || { fail "4: $d: targets without expr: $noexpr"; dash_ok=0; }
  jq -c --arg f "$d" "$JQ_SUBST"'
    (.. | objects | select(has("targets")) | . as $p | .targets[] | select((.expr // "") != "") |
      {file: $f, id: ($p.id | tostring), ref: .refId, legend: (.legendFormat // ""), expr: .expr}),
    (.templating.list[]? | select(.type == "query") | (if (.query | type) == "object" then .query.query else .query end) as $q |
      ($q | capture("^label_values\\((?<sel>.+),[^,]+\\)$") // {sel: null}) as $m | select($m.sel != null) |
      {file: $f, id: ("var_" + .name), ref: "q", legend: "", expr: $m.sel})
    | .q = (.expr | subst)' "$d" >>"$WORK/exprs.jsonl"
done
nexpr=$(grep -c . "$WORK/exprs.jsonl")
jq -s '{groups: [{name: "dashboard-expressions", rules: map({
    record: "dashboard:\(.file | split("/") | last | rtrimstr(".json") | gsub("[^A-Za-z0-9_]"; "_")):panel_\(.id)_\(.ref)",
    expr: .q})}]}' "$WORK/exprs.jsonl" >"$WORK/dashboard-rules.json"
if out=$("$PROMTOOL" check rules "$WORK/dashboard-rules.json" 2>&1) && [ "$nexpr" -gt 0 ]; then
  [ $dash_ok = 1 ] && pass "4: ${#DASHBOARDS[@]} dashboard(s): valid JSON, unique ids, datasource $DATASOURCE_UID; all $nexpr expressions parse (promtool check rules $WORK/dashboard-rules.json)"
else
  fail "4: dashboard expressions do not parse ($nexpr found; record names are dashboard:<file>:panel_<id>_<refId>)"
  indent <<<"$out"
fi

# ---- 5. a real scrape of make run ------------------------------------------------
[ -x bin/runlocal ] || { echo "promcheck: bin/runlocal missing (make bins)"; exit 1; }
./bin/runlocal >"$WORK/runlocal.out" 2>&1 &
RUNLOCAL_PID=$!
for _ in $(seq 1 120); do
  grep -q '^ready after' "$WORK/runlocal.out" && break
  kill -0 "$RUNLOCAL_PID" 2>/dev/null || break
  sleep 0.5
done
if ! grep -q '^ready after' "$WORK/runlocal.out"; then
  cat "$WORK/runlocal.out"
  echo "promcheck: make run did not become ready (another make run, or something on its ports 9090-9303?)"
  exit 1
fi
log "both clusters ready ($WORK/runlocal.out)"
# NODE GRPC KAFKA METRICS LOG, e.g. cluster-a/broker-1 127.0.0.1:9091 127.0.0.1:9291 http://127.0.0.1:9191/metrics ...
NODES=$(awk '$4 ~ /^http:\/\/.*\/metrics$/ { print $1, $3, $4 }' "$WORK/runlocal.out")

# B's controller exports the mirror's offset-sync series once its first
# sync ran (within a second of the mirror's creation): wait for it (bounded)
# so that the scrape below holds them.
ctl_b=$(awk '$1 == "cluster-b/controller" { print $3 }' <<<"$NODES")
for _ in $(seq 1 60); do
  curl -sf --max-time 2 "$ctl_b" | grep -q '^twinlog_mirror_offset_sync_timestamp_seconds' && break
  sleep 0.5
done

# One ApiVersions v0 request per cluster's first broker: size 10, key 18,
# version 0, correlation id 1, null client id, over TLS with make run's
# operator certificate (openssl s_client; the listener requires a client
# certificate). s_client reads the answer until the timeout ends it.
TLS=run/tls
for kafka in $(awk '$2 != "-" { split($1, n, "/"); if (!seen[n[1]]++) print $2 }' <<<"$NODES"); do
  printf '\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff' |
    timeout 2 openssl s_client -quiet -connect "$kafka" -CAfile "$TLS/ca.crt" -cert "$TLS/admin.crt" -key "$TLS/admin.key" >/dev/null 2>&1 || true
done

: >"$WORK/names.txt"
nscraped=0
while read -r node _ url; do
  f="$WORK/scrape-$(tr / - <<<"$node").txt"
  if ! curl -sf --max-time 5 "$url" >"$f"; then
    fail "5: scrape $node $url"
    continue
  fi
  nscraped=$((nscraped + 1))
  grep -v '^#' "$f" | sed -E 's/[{ ].*//' | grep . >>"$WORK/names.txt"
  if ! out=$("$PROMTOOL" check metrics <"$f" 2>&1); then
    fail "5: promtool check metrics $node ($url)"
    indent <<<"$out"
  fi
done <<<"$NODES"
sort -u -o "$WORK/names.txt" "$WORK/names.txt"
if [ "$nscraped" -eq 8 ]; then
  pass "5: scraped 8 daemons: $(grep -c '^twinlog_' "$WORK/names.txt") twinlog_* sample names ($WORK/scrape-*.txt), promtool check metrics clean"
else
  fail "5: scraped $nscraped of 8 daemons"
fi
# Names used: twinlog_* anywhere in the rules and their tests; twinlog_*,
# go_*, process_* in the dashboards' expressions.
{
  grep -HoE '\btwinlog_[a-zA-Z0-9_]+' "${RULE_FILES[@]}" "${TEST_FILES[@]}"
  jq -r '.expr as $e | ($e | [scan("\\b(?:twinlog|go|process)_[a-zA-Z0-9_]+")] | unique[]) as $n | "\(.file) panel \(.id)/\(.ref):\($n)"' "$WORK/exprs.jsonl"
} | sort -u >"$WORK/used.txt"
missing=$(while IFS= read -r line; do
  grep -qxF "${line##*:}" "$WORK/names.txt" || echo "$line"
done <"$WORK/used.txt")
if [ -z "$missing" ] && [ -s "$WORK/used.txt" ]; then
  pass "5: all $(sed 's/.*://' "$WORK/used.txt" | sort -u | wc -l) metric names of the rules, their tests and the dashboards are in the scrape"
else
  fail "5: metric names not in the scrape of make run (where: name):"
  indent <<<"$missing"
fi

# ---- 6. a real Prometheus evaluates the rules and the dashboard --------------------
if ss -ltn 2>/dev/null | grep -q ":$PROM_PORT "; then
  fail "6: port $PROM_PORT is taken (set PROMCHECK_PROM_PORT)"
else
  {
    printf 'global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files:\n'
    for r in "${RULE_FILES[@]}"; do printf '  - %s\n' "$PWD/$r"; done
    printf 'scrape_configs:\n'
    # The jobs and labels of deploy/prometheus.yml, on make run's addresses:
    # job twinlog-<role>-<a|b>, labels cluster and role.
    awk '{ split($1, n, "/"); c = n[1]; r = n[2]; sub(/-[0-9]+$/, "", r)
           h = $3; sub(/^http:\/\//, "", h); sub(/\/metrics$/, "", h)
           j = "twinlog-" r "-" substr(c, 9)
           t[j] = t[j] (t[j] == "" ? "" : ", ") "\"" h "\""; lab[j] = "{cluster: " c ", role: " r "}" }
         END { for (j in t) printf "  - job_name: %s\n    static_configs: [{targets: [%s], labels: %s}]\n", j, t[j], lab[j] }' <<<"$NODES"
  } >"$WORK/prometheus.yml"
  "$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
  PROM_PID=$!
  API="http://127.0.0.1:$PROM_PORT/api/v1"
  query() { curl -s --max-time 10 "$API/query" --data-urlencode "query=$1"; }
  # Every target up, then a few more scrapes so rates have samples.
  up=0
  for _ in $(seq 1 40); do
    kill -0 "$PROM_PID" 2>/dev/null || break
    up=$(query 'count(up == 1)' | jq -r '.data.result[0].value[1] // 0' 2>/dev/null)
    [ "${up:-0}" = 8 ] && break
    sleep 0.5
  done
  [ "${up:-0}" = 8 ] && sleep 4
  if ! kill -0 "$PROM_PID" 2>/dev/null; then
    fail "6: Prometheus exited ($WORK/prometheus.log)"
    tail -5 "$WORK/prometheus.log" | indent
    PROM_PID=
  elif [ "${up:-0}" != 8 ]; then
    fail "6: Prometheus scraped $up of 8 targets ($WORK/prometheus.log)"
    tail -5 "$WORK/prometheus.log" | indent
  else
    rules=$(curl -s --max-time 10 "$API/rules")
    nrules=$(jq '[.data.groups[].rules[]] | length' <<<"$rules")
    errs=$(jq -r '.data.groups[].rules[] | select(.health != "ok") | "\(.name): \(.health) \(.lastError // "")"' <<<"$rules")
    firing=$(jq -r '.data.groups[].rules[] | .alerts[]? | select(.state == "firing") | "\(.labels.alertname) \(.labels | del(.alertname) | tostring)"' <<<"$rules")
    if [ -n "$errs" ] || [ "$nrules" = 0 ]; then
      fail "6: rules that do not evaluate on live metrics ($nrules loaded):"
      indent <<<"$errs"
    elif [ -n "$firing" ]; then
      fail "6: alerts firing on the healthy make run:"
      indent <<<"$firing"
    else
      pass "6: Prometheus evaluated all $nrules rules on the live clusters: no error, none firing"
    fi
    bad=()
    empty=0
    while IFS= read -r t; do
      res=$(query "$(jq -r .q <<<"$t")")
      # "empty", or one line per problem: an error, a legend label the series lack.
      out=$(jq -rn --argjson t "$t" --arg res "$res" '
        ($res | try fromjson catch {status: "error", error: $res}) as $r |
        "\($t.file) panel \($t.id)/\($t.ref)" as $w |
        if $r.status != "success" then "\($w): \($r.error)"
        elif ($r.data.result | length) == 0 then "empty"
        else [$t.legend | scan("\\{\\{ *([A-Za-z_][A-Za-z0-9_]*) *\\}\\}") | .[0]] | unique[] as $l |
          select($r.data.result | all(.metric | has($l)) | not) |
          "\($w): legend names {{\($l)}}, which its series do not carry"
        end')
      if [ "$out" = empty ]; then
        empty=$((empty + 1))
      elif [ -n "$out" ]; then
        bad+=("$out")
      fi
    done <"$WORK/exprs.jsonl"
    if [ ${#bad[@]} -eq 0 ]; then
      pass "6: all $nexpr dashboard expressions execute; legends name labels their series carry ($empty return nothing on a healthy, idle make run)"
    else
      fail "6: dashboard expressions on the live clusters:"
      printf '%s\n' "${bad[@]}" | indent
    fi
  fi
fi

log "$PASSED passed, ${#FAILED[@]} failed"
if [ ${#FAILED[@]} -gt 0 ]; then
  printf '  FAIL %s\n' "${FAILED[@]}"
  exit 1
fi
