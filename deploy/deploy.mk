# deploy.mk: docker targets for the two-cluster setup. Include from the top
# Makefile (`include deploy/deploy.mk`) or run `make -f deploy/deploy.mk images`.
# Static binaries are built on the host (no registry for a builder image) and
# copied into a FROM scratch image.

GO            ?= go
DOCKER        ?= docker
COMPOSE       ?= $(DOCKER) compose
TWINLOG_IMAGE ?= twinlog:dev
DEPLOY_DIR    := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
DEPLOY_BINS   := brokerd controllerd twinctl

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

compose-up: images
	TWINLOG_IMAGE=$(TWINLOG_IMAGE) $(COMPOSE) -f $(DEPLOY_DIR)/docker-compose.yml up -d --wait

compose-monitoring: images
	TWINLOG_IMAGE=$(TWINLOG_IMAGE) $(COMPOSE) -f $(DEPLOY_DIR)/docker-compose.yml --profile monitoring up -d --wait

compose-down:
	TWINLOG_IMAGE=$(TWINLOG_IMAGE) $(COMPOSE) -f $(DEPLOY_DIR)/docker-compose.yml --profile monitoring down -v
