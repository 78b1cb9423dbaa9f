# deploy.mk: docker targets for the two-cluster setup, included by the top
# Makefile. Static binaries are built on the host (no registry for a builder
# image) and copied into a FROM scratch image.

GO            ?= go
DOCKER        ?= docker
TWINLOG_IMAGE ?= twinlog:dev
DEPLOY_DIR    := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
DEPLOY_BINS   := brokerd controllerd twinctl
# Compose v2 plugin ("docker compose") if present, else docker-compose v1.
COMPOSE       ?= $(shell $(DOCKER) compose version >/dev/null 2>&1 && echo "$(DOCKER) compose" || echo docker-compose)
COMPOSE_PROJECT ?= twinlog
COMPOSE_CMD    = TWINLOG_IMAGE=$(TWINLOG_IMAGE) $(COMPOSE) -p $(COMPOSE_PROJECT) -f $(DEPLOY_DIR)/docker-compose.yml

.PHONY: images compose-up compose-down compose-monitoring compose-acls deploy-bins certs

# certs: the CA and the daemons', admin's and intruder's certificates in
# deploy/tls (scripts/gencerts), mounted read-only into every container.
# Idempotent: existing valid material is kept (running containers keep
# trusting it); `go run ./scripts/gencerts --force` makes a new CA (then
# recreate the containers: compose-down, compose-up).
TLS_DIR := $(DEPLOY_DIR)/tls
certs:
	$(GO) run ./scripts/gencerts --dir $(TLS_DIR)

deploy-bins:
	@mkdir -p $(DEPLOY_DIR)/bin
	@for b in $(DEPLOY_BINS); do \
		echo "building $$b (static)"; \
		CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w' -o $(DEPLOY_DIR)/bin/$$b ./cmd/$$b || exit 1; \
	done
	@rm -rf $(DEPLOY_DIR)/configs && cp -R configs/docker $(DEPLOY_DIR)/configs

images: deploy-bins
	$(DOCKER) build -t $(TWINLOG_IMAGE) -f $(DEPLOY_DIR)/Dockerfile $(DEPLOY_DIR)

# `up --wait` is compose v2 only; scripts/compose-wait.sh polls the
# healthchecks with either version.
compose-up: images certs
	$(COMPOSE_CMD) up -d
	COMPOSE="$(COMPOSE)" COMPOSE_PROJECT=$(COMPOSE_PROJECT) ./scripts/compose-wait.sh
	@$(MAKE) --no-print-directory compose-acls

compose-monitoring: images certs
	$(COMPOSE_CMD) --profile monitoring up -d
	COMPOSE="$(COMPOSE)" COMPOSE_PROJECT=$(COMPOSE_PROJECT) ./scripts/compose-wait.sh
	@$(MAKE) --no-print-directory compose-acls

# compose-acls: each cluster lets the other's daemons mirror from it, as
# make run does (docs/security.md): Read and DescribeConfigs on every
# topic, Describe on every group, Read on the Mirror named by the other
# cluster's id. twinctl runs in a broker container as User:admin. ACLs live
# in the metadata (the volumes): compose-down -v forgets them.
ADMIN_TLS := --tls-ca /etc/twinlog/tls/ca.crt --tls-cert /etc/twinlog/tls/admin.crt --tls-key /etc/twinlog/tls/admin.key
compose-acls:
	@for g in "a b" "b a"; do set -- $$g; at=$$1; from=$$2; \
		ctl=$$at-controller:$$( [ $$at = a ] && echo 9090 || echo 9100 ); \
		id=$$($(COMPOSE_CMD) ps -q $$at-broker-1); \
		p=""; for n in controller broker-1 broker-2 broker-3; do p="$$p --allow-principal User:cluster-$$from-$$n"; done; \
		for res in "--topic * --operation Read" "--topic * --operation DescribeConfigs" "--group * --operation Describe" "--mirror cluster-$$from --operation Read"; do \
			set -f; $(DOCKER) exec $$id /usr/local/bin/twinctl $(ADMIN_TLS) --bootstrap $$ctl acls add $$p $$res >/dev/null || exit 1; set +f; \
		done; echo "cluster $$at: cluster $$from's daemons may mirror from it (ACLs)"; \
	done

compose-down:
	$(COMPOSE_CMD) --profile monitoring down -v

# helm-check: issue 18's Helm chart (deploy/helm/twinlog), checked without a
# Kubernetes cluster by deploy/helm/chartcheck, a module of its own (Helm
# v4's SDK and k8s.io/api stay out of the main go.mod): `helm lint --strict`
# with the helm CLI pinned as a tool in that go.mod, then its tests (lint and
# render every testdata/values-*.yaml with Helm's SDK, decode every object
# strictly into its k8s.io/api type, cross-check probes, selectors, service
# names, the daemons' configs through internal/config, and TLS mounts; the
# 3-controller values must fail on the schema). Modules are downloaded first
# (a no-op once cached); the checks then run with GOPROXY=off, so a warm
# machine needs no network.
HELM_CHECK_DIR := $(DEPLOY_DIR)/helm/chartcheck
HELM_GO        := GOFLAGS='-mod=readonly -buildvcs=false' $(GO)
.PHONY: helm-check
helm-check:
	cd $(HELM_CHECK_DIR) && $(HELM_GO) mod download
	cd $(HELM_CHECK_DIR) && GOPROXY=off $(HELM_GO) tool helm lint --strict ../twinlog
	cd $(HELM_CHECK_DIR) && GOPROXY=off $(HELM_GO) test -count=1 ./...
