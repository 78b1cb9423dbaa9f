# twinlog build. Tools are Go modules pinned in tools/go.mod and run with `go tool`.
GO      ?= go
TOOL    := $(GO) tool -modfile=$(CURDIR)/tools/go.mod
PKGS    := ./...
FUZZTIME ?= 20s

.PHONY: all build bins test test-short sim bench fuzz e2e hostile kafka-e2e promcheck chaos lint proto proto-check tidy-check ci run clean

# Local binaries for `make run` (and for trying twinctl by hand).
BINS := brokerd controllerd twinctl

all: build

build:
	$(GO) build $(PKGS)

# test: every package with the race detector (the simulator's 50 default
# seeds included), then 200 single-cluster, 200 two-cluster, 200
# consumer-group and 200 + 100 idempotent-producer simulator seeds without
# -race (issue 7's CI floor; ~45 s; the regression seeds run in the first
# line).
test:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -timeout 10m ./internal/sim -run 'TestSimSeeds|TestTwoClusterSeeds|TestGroupSeeds|TestTwoClusterGroupSeeds|TestIdempotentSeeds|TestTwoClusterIdempotentSeeds' -sim.seeds=200 -sim.twoseeds=200 -sim.groupseeds=200 -sim.twogroupseeds=200 -sim.idemseeds=200 -sim.twoidemseeds=100

test-short:
	$(GO) test -short -count=1 $(PKGS)

proto:
	cd api/proto && $(TOOL) buf generate

proto-check: proto
	cd api/proto && $(TOOL) buf lint && $(TOOL) buf format -d --exit-code
	git diff --exit-code -- api/proto
	@test -z "$$(git status --porcelain -- api/proto)" || { git status --porcelain -- api/proto; echo "proto-check: generated files not committed"; exit 1; }

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet $(PKGS)
	$(TOOL) staticcheck $(PKGS)

tidy-check:
	$(GO) mod tidy -diff

ci: test proto-check lint tidy-check

clean:
	rm -rf bin run deploy/bin deploy/configs

bins:
	@mkdir -p bin
	$(GO) build -o bin/ $(addprefix ./cmd/,$(BINS)) ./scripts/runlocal

# run: cluster A and cluster B (controller + 3 brokers each, configs/cluster-{a,b})
# as plain processes, a demo topic mirrored A -> B; Ctrl-C stops them.
# Data and logs go to ./run (wiped at start; RUNFLAGS=--keep keeps it).
RUNFLAGS ?=
run: bins
	./bin/runlocal $(RUNFLAGS)

# bench runs the storage and controller benchmarks on the real disk (temp
# dirs), the mirror benchmarks (two in-process clusters: throughput and lag,
# failover for 1 and 100 partitions, failback after BENCH_FAILBACK_MB
# diverged), then twinbench against an in-process 3-broker cluster: as
# fast as it goes (over gRPC, then the same load through the Kafka
# listeners with franz-go), then a steady 2,000 records/s of one-record batches (what
# a producer with linger.ms=0 sends at that rate), then the machine's floor
# at that request rate (a bare gRPC echo: an acks=all produce needs two such
# round trips one after the other). Set TWINLOG_BENCH_RECOVERY_MB=1024 for
# the 1 GiB recovery figure.
BENCH_FAILBACK_MB ?= 100
TWINBENCH = $(GO) run ./cmd/twinbench --partitions 8 --rf 3 --min-isr 2 --acks -1 --record-size 1024
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./storage/... ./controller/...
	TWINLOG_BENCH_FAILBACK_MB=$(BENCH_FAILBACK_MB) $(GO) test -run '^$$' -bench Mirror -benchtime 1x ./broker/brokertest/
	$(GO) test -run '^$$' -bench GroupCommits -benchtime 1x ./broker/brokertest/
	$(TWINBENCH) --inprocess --duration 30s
	$(TWINBENCH) --inprocess --duration 30s --kafka
	$(TWINBENCH) --inprocess --duration 20s --rate 2000 --batch 1 --inflight 1
	$(TWINBENCH) --floor --duration 20s --rate 2000 --batch 1

# sim runs the deterministic simulator over SEEDS single-cluster seeds,
# TWOSEEDS two-cluster seeds (mirroring, failovers, failbacks; TWOFAULTMS of
# faults each, 0 = the test's default of 8 s), GROUPSEEDS single-cluster
# seeds with consumer groups and TWOGROUPSEEDS two-cluster seeds whose
# groups follow failovers through the mirror's offset sync; IDEMSEEDS and
# TWOIDEMSEEDS single- and two-cluster seeds with idempotent producers. The
# defaults take about 2 + 2 + 1 + 1 + 1 + 1 minutes on 2 cores.
SEEDS ?= 2000
TWOSEEDS ?= 500
TWOFAULTMS ?= 0
GROUPSEEDS ?= 2000
TWOGROUPSEEDS ?= 1000
IDEMSEEDS ?= 2000
TWOIDEMSEEDS ?= 500
sim:
	$(GO) test ./internal/sim -run 'TestSimSeeds|TestTwoClusterSeeds|TestGroupSeeds|TestTwoClusterGroupSeeds|TestIdempotentSeeds|TestTwoClusterIdempotentSeeds' -count=1 -timeout 60m -sim.seeds=$(SEEDS) -sim.twoseeds=$(TWOSEEDS) -sim.twofaultms=$(TWOFAULTMS) -sim.groupseeds=$(GROUPSEEDS) -sim.twogroupseeds=$(TWOGROUPSEEDS) -sim.idemseeds=$(IDEMSEEDS) -sim.twoidemseeds=$(TWOIDEMSEEDS)

# e2e: docker-compose end-to-end test of both clusters, mirroring, failover
# and failback (scripts/e2e.sh). Skips when no Docker engine answers.
e2e:
	./scripts/e2e.sh

# hostile: issue 13's black-box cases against `make run`'s processes (no
# Docker): a mirror create over a local topic the source lacks, a forged
# BumpLeaderEpoch to MaxInt32, and a topic deleted on the source while the
# other cluster mirrors it (scripts/hostile.sh); about a minute.
hostile: bins
	./scripts/hostile.sh

# kafka-e2e: kcat and confluent-kafka-python (Debian packages, installed
# when missing) against make run's secure processes (scripts/kafka-e2e.sh, ~60 s).
kafka-e2e: bins
	./scripts/kafka-e2e.sh

# promcheck: issue 18's alerting rules (deploy/prometheus) and Grafana
# dashboard (deploy/grafana), checked by Prometheus's own tools: promtool
# check rules/config, the rules' unit tests (promtool test rules), every
# dashboard expression through the parser; then against make run's
# processes: every metric name they use must be in the daemons' scrape, and a
# real Prometheus must evaluate every rule (none firing on the healthy
# clusters) and every dashboard query (scripts/promcheck.sh, ~30 s; promtool
# and prometheus from Debian's prometheus package, fetched with apt-get when
# missing, a failure if they cannot be).
promcheck: bins
	./scripts/promcheck.sh

# chaos: issue 7's history checker on the docker-compose deployment, both
# clusters (scripts/chaos.sh: docker kill/restart of brokers and controllers,
# network disconnects and cross-cluster cuts, failovers and failbacks at
# seeded moments for CHAOS_DURATION, default 60s; CHAOS_SEED replays the
# schedule; history in run/chaos-history.jsonl, re-check it with
# `go run ./cmd/twinchaos check FILE`). Skips when no Docker engine answers.
# Not part of `make ci`.
chaos:
	./scripts/chaos.sh

include deploy/deploy.mk

# fuzz runs every fuzz target (every `func Fuzz` in a _test.go file) for
# FUZZTIME each.
FUZZ_TARGETS = $(shell grep -rn --include='*_test.go' '^func Fuzz' . | sed -E 's|^\./(.*)/[^/]*_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*).*|./\1:\2|' | sort)
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

