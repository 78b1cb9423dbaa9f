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

.PHONY: images compose-up compose-down compose-monitoring deploy-bins

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
compose-up: images
	$(COMPOSE_CMD) up -d
	COMPOSE="$(COMPOSE)" COMPOSE_PROJECT=$(COMPOSE_PROJECT) ./scripts/compose-wait.sh

compose-monitoring: images
	$(COMPOSE_CMD) --profile monitoring up -d
	COMPOSE="$(COMPOSE)" COMPOSE_PROJECT=$(COMPOSE_PROJECT) ./scripts/compose-wait.sh

compose-down:
	$(COMPOSE_CMD) --profile monitoring down -v
