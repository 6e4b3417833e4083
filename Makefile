# kubelb — see README.md. `make demo` runs the system locally, `make test` runs every test.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

K8S_VERSION            ?= 1.36.4
ETCD_VERSION           ?= 3.6.16
ENVOY_VERSION          ?= 1.40.0
HELM_VERSION           ?= v3.22.0
CONTROLLER_GEN_VERSION ?= v0.21.0
# The CNCF distribution registry (bin/registry) the image and chart tests push to, on loopback. Not named
# REGISTRY_VERSION: the registry reads REGISTRY_* variables of its environment as its configuration.
DISTRIBUTION_VERSION   ?= v3.1.2
# cert-manager's Certificate CRD (internal/certmanagercrds) is copied from this release.
CERT_MANAGER_VERSION   ?= v1.21.2
# Envoy Gateway's BackendTrafficPolicy, SecurityPolicy and ClientTrafficPolicy CRDs (internal/envoygatewaycrds) are copied from this release.
ENVOY_GATEWAY_VERSION  ?= v1.9.1
export K8S_VERSION ETCD_VERSION ENVOY_VERSION HELM_VERSION CONTROLLER_GEN_VERSION DISTRIBUTION_VERSION

BIN            := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen/$(CONTROLLER_GEN_VERSION)/controller-gen
HELM           := $(BIN)/helm/$(HELM_VERSION)/helm
ENVOY          := $(BIN)/envoy/$(ENVOY_VERSION)/envoy
ASSETS         := $(BIN)/k8s/$(K8S_VERSION)

GIT_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
GIT_COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE  ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X kubelb.dev/kubelb/internal/version.gitVersion=$(GIT_VERSION) \
	-X kubelb.dev/kubelb/internal/version.gitCommit=$(GIT_COMMIT) \
	-X kubelb.dev/kubelb/internal/version.buildDate=$(BUILD_DATE)

# Tests find the real components through these.
export KUBEBUILDER_ASSETS := $(ASSETS)
export KUBELB_ENVOY := $(ENVOY)
export KUBELB_HELM := $(HELM)
export KUBELB_REGISTRY := $(BIN)/registry/$(DISTRIBUTION_VERSION)/registry

TEST_TIMEOUT ?= 30m

.PHONY: build
build: ## Build bin/kubelb, bin/ccm and bin/kubectl-kubelb (the kubectl plugin).
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubelb ./cmd/kubelb
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ccm ./cmd/ccm
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-kubelb ./cmd/kubectl-kubelb

# Images (docs/images.md): <REGISTRY>/kubelb-manager:<IMAGE_TAG> and <REGISTRY>/kubelb-ccm:<IMAGE_TAG>
# for every platform of PLATFORMS. Every time in them is SOURCE_DATE_EPOCH (default: the
# commit's time), which also stamps the binaries' build date, so a rebuild gives the same
# digests. REGISTRY is host:port[/prefix]; PLAIN_HTTP=1 pushes over HTTP (loopback: HTTP after HTTPS).
# IMAGES_OUT is where the OCI layouts go; CA_BUNDLE is the images' /etc/ssl/certs/ca-certificates.crt.
REGISTRY          ?= ghcr.io/kubelb
IMAGE_TAG         ?= $(GIT_VERSION)
PLATFORMS         ?= linux/amd64,linux/arm64
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
PLAIN_HTTP        ?= 0
IMAGES_OUT        ?= $(BIN)/images
CA_BUNDLE         ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_LDFLAGS := -s -w -X kubelb.dev/kubelb/internal/version.gitVersion=$(GIT_VERSION) \
	-X kubelb.dev/kubelb/internal/version.gitCommit=$(GIT_COMMIT) \
	-X kubelb.dev/kubelb/internal/version.buildDate=$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
IMAGES_FLAGS = -out $(IMAGES_OUT) -ca-bundle $(CA_BUNDLE) -platforms $(PLATFORMS) -registry $(REGISTRY) -tag $(IMAGE_TAG) \
	-ldflags "$(IMAGE_LDFLAGS)" -version $(GIT_VERSION) -revision $(GIT_COMMIT) -source-date-epoch $(SOURCE_DATE_EPOCH)

.PHONY: images
images: ## Build the kubelb-manager and kubelb-ccm images (PLATFORMS) as OCI layouts in bin/images/; print digests and sizes.
	go run ./hack/images $(IMAGES_FLAGS)

.PHONY: images-push
images-push: ## Build the images and push them with their SBOMs: make images-push REGISTRY=host:port[/prefix].
	go run ./hack/images $(IMAGES_FLAGS) -push $(if $(filter 1,$(PLAIN_HTTP)),-plain-http)

# Charts: `helm package` (version from Chart.yaml unless CHART_VERSION is set; appVersion, the
# default image tag, is IMAGE_TAG) and `helm push` to oci://REGISTRY/charts.
CHART_VERSION ?=
CHARTS_OUT    ?= $(BIN)/charts
CHARTS        := kubelb-manager kubelb-ccm
LOOPBACK_REGISTRY := $(filter localhost:% 127.% [::1]:%,$(REGISTRY))

.PHONY: charts-push
charts-push: ## Package charts/kubelb-{manager,ccm} and push them to oci://REGISTRY/charts (helm; PLAIN_HTTP=1 or a loopback registry: over HTTP).
	test -x $(HELM) || hack/tools.sh helm
	@mkdir -p $(CHARTS_OUT)
	for c in $(CHARTS); do \
	  $(HELM) package charts/$$c -d $(CHARTS_OUT) --app-version $(IMAGE_TAG) $(if $(CHART_VERSION),--version $(CHART_VERSION)) >/dev/null; \
	  v=$(or $(CHART_VERSION),$$(sed -n 's/^version: *//p' charts/$$c/Chart.yaml)); \
	  $(HELM) push $(CHARTS_OUT)/$$c-$$v.tgz oci://$(REGISTRY)/charts $(if $(or $(filter 1,$(PLAIN_HTTP)),$(LOOPBACK_REGISTRY)),--plain-http); \
	done

.PHONY: tools
tools: ## Build or download every real component the tests use into bin/ (cached by version).
	hack/tools.sh all
	hack/tools.sh prometheus
	hack/tools.sh nftables
	hack/tools.sh nodes

.PHONY: generate
generate: ## Regenerate deepcopy, CRDs (config/ and charts/), RBAC and the Gateway API CRD copies.
	hack/tools.sh controller-gen
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=kubelb paths=./internal/manager/... output:rbac:artifacts:config=config/rbac
	@# The address providers' rights, for the kustomize components (config/components/*).
	$(CONTROLLER_GEN) rbac:roleName=kubelb-node-ip paths=./internal/nodeip/... output:rbac:artifacts:config=config/components/node-ip
	$(CONTROLLER_GEN) rbac:roleName=kubelb-ipam paths=./internal/ipam/... output:rbac:artifacts:config=config/components/ipam
	@# The manager chart renders its RBAC from this same file (templates/rbac.yaml): one source.
	mkdir -p charts/kubelb-manager/rbac && cp config/rbac/role.yaml charts/kubelb-manager/rbac/role.yaml
	for chart in charts/*/; do if [ -d $$chart/crds ]; then cp config/crd/bases/*.yaml $$chart/crds/; fi; done
	@# The module must be in the cache before `go list` can name its folder (a cold cache).
	go mod download sigs.k8s.io/gateway-api
	gw=$$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api); test -n "$$gw" || { echo "gateway-api module not found"; exit 1; }; \
	  rm -f internal/gatewaycrds/standard/*.yaml internal/gatewaycrds/experimental/*.yaml; \
	  for ch in standard experimental; do \
	    install -m 0644 $$gw/config/crd/$$ch/gateway.networking*.yaml internal/gatewaycrds/$$ch/; done
	@# cert-manager is not a dependency of kubelb's code: its module is only downloaded.
	cm=$$(go mod download -json github.com/cert-manager/cert-manager@$(CERT_MANAGER_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$cm" || { echo "cert-manager module not found"; exit 1; }; \
	  install -m 0644 $$cm/deploy/crds/cert-manager.io_certificates.yaml internal/certmanagercrds/
	@# Envoy Gateway is not a dependency of kubelb's code either: its module is only downloaded.
	eg=$$(go mod download -json github.com/envoyproxy/gateway@$(ENVOY_GATEWAY_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$eg" || { echo "Envoy Gateway module not found"; exit 1; }; \
	  for k in backendtrafficpolicies securitypolicies clienttrafficpolicies; do \
	    install -m 0644 $$eg/charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_$$k.yaml internal/envoygatewaycrds/; done
	go test ./internal/metricsdoc -run TestReferenceUpToDate -update >/dev/null
	go test ./internal/conditiondoc -run TestReferenceUpToDate -update >/dev/null

GENERATED := api/v1alpha1 config charts internal/gatewaycrds internal/certmanagercrds internal/envoygatewaycrds docs/metrics.md docs/conditions.md

.PHONY: verify
verify: ## Fail when generated files are stale (deepcopy, CRDs, chart CRDs, RBAC, metrics and conditions references).
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	  for p in $(GENERATED); do mkdir -p $$tmp/$$(dirname $$p); cp -r $$p $$tmp/$$p; done; \
	  $(MAKE) --no-print-directory generate >/dev/null; \
	  for p in $(GENERATED); do diff -r $$tmp/$$p $$p >/dev/null || \
	    { echo "generated files under $$p were stale: 'make generate' rewrote them; review and commit"; exit 1; }; done

.PHONY: test
test: tools verify ## Run every test, as CI does.
	go vet ./...
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...

.PHONY: conformance
conformance: tools ## Run the Gateway API conformance suite (also part of `make test`; standard channel, then the experimental channel's few tests) and rewrite its reports in docs/conformance/.
	KUBELB_CONFORMANCE_REPORT=$(CURDIR)/docs/conformance/gateway-api-v1.6.3-report.yaml \
	KUBELB_CONFORMANCE_EXPERIMENTAL_REPORT=$(CURDIR)/docs/conformance/gateway-api-v1.6.3-experimental-report.yaml \
	  go test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestGatewayAPIConformance$$' ./e2e/conformance/

# SOAK_DURATION is the churn of `make soak` (the short form in `make test` churns 75 s). The
# test's timeout is the churn plus 15 minutes of set-up and checks (Go durations add up:
# "30m15m" is 45 minutes).
SOAK_DURATION ?= 10m

.PHONY: soak
soak: tools ## Run only the soak (issue 13), churning for SOAK_DURATION (default 10m): make soak SOAK_DURATION=30m.
	SOAK_DURATION=$(SOAK_DURATION) go test -count=1 -v -timeout $(SOAK_DURATION)15m -run '^TestSoak$$' ./e2e/faults/

# The sizes `make bench` runs the harness (e2e/bench) at: every N of BENCH_N across every T of
# BENCH_T (N < T skipped), e.g. `make bench BENCH_N=100,1000 BENCH_T=1`. How long each size
# takes is in docs/benchmarks.md; the whole matrix takes hours on 2 cores. BENCH_ENVOY=0 runs
# without a real Envoy; BENCH_QUIET, BENCH_CHURN_RATE and BENCH_CHURN_DURATION tune the
# workloads; BENCH_OUT is where the JSON results go.
BENCH_N              ?= 100,1000,10000
BENCH_T              ?= 1,10,100
BENCH_ENVOY          ?= 1
BENCH_QUIET          ?= 60s
BENCH_CHURN_RATE     ?= 5
BENCH_CHURN_DURATION ?= 60s
BENCH_OUT            ?= $(CURDIR)/docs/benchmarks
BENCH_TIMEOUT        ?= 6h

.PHONY: bench
bench: bench-micro bench-harness ## Run the Go benchmarks and the harness (BENCH_N, BENCH_T: see docs/benchmarks.md), then plot.

.PHONY: bench-micro
bench-micro: ## Run the Go benchmarks (all but the harness).
	go test -run '^$$' -bench . -benchmem $$(go list ./... | grep -v '/e2e/bench')

.PHONY: bench-harness
bench-harness: tools ## Run the harness at BENCH_N × BENCH_T, write docs/benchmarks/n<N>-t<T>.json and redraw the plots.
	BENCH_N=$(BENCH_N) BENCH_T=$(BENCH_T) BENCH_ENVOY=$(BENCH_ENVOY) BENCH_QUIET=$(BENCH_QUIET) \
	  BENCH_CHURN_RATE=$(BENCH_CHURN_RATE) BENCH_CHURN_DURATION=$(BENCH_CHURN_DURATION) BENCH_OUT=$(BENCH_OUT) \
	  go test -count=1 -v -run '^$$' -bench '^BenchmarkHarness$$' -benchtime 1x -timeout $(BENCH_TIMEOUT) ./e2e/bench/
	$(MAKE) --no-print-directory bench-plot

.PHONY: bench-plot
bench-plot: ## Redraw docs/benchmarks' PNG plots and docs/benchmarks.md's tables from the JSON results.
	go run ./e2e/bench/cmd/plot -doc docs/benchmarks.md $(BENCH_OUT)

.PHONY: bench-largest
bench-largest: ## Translate the largest tenant the CRDs and default limits allow, at 1/4, 1/2 and 1 of its size (time, allocations, peak RSS; part of `make bench`).
	go test -run '^$$' -bench '^BenchmarkLargestTenant$$' -benchmem ./internal/xds/

# The kubectl plugin's release archives (docs/kubectl-kubelb.md): PLUGIN_OUT/kubectl-kubelb_<os>_<arch>.tar.gz
# for each of PLUGIN_PLATFORMS, cross-compiled with CGO off (stamped with SOURCE_DATE_EPOCH, as the
# images: a rebuild gives the same sums), SHA256SUMS, and the krew manifest config/krew/kubelb.yaml
# with the version, the archives' URLs under PLUGIN_URL and their sums filled in.
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
PLUGIN_OUT       ?= $(BIN)/plugin
PLUGIN_URL       ?= https://github.com/kubelb/kubelb/releases/download/$(GIT_VERSION)

.PHONY: plugin-archives
plugin-archives: ## Build the kubectl-kubelb release archives (linux, darwin; amd64, arm64) in bin/plugin/ with SHA256SUMS and the krew manifest.
	rm -rf $(PLUGIN_OUT) && mkdir -p $(PLUGIN_OUT)
	sed -e 's|@VERSION@|$(GIT_VERSION)|g' -e 's|@URL@|$(PLUGIN_URL)|g' config/krew/kubelb.yaml > $(PLUGIN_OUT)/kubelb.yaml
	for p in $(PLUGIN_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=kubectl-kubelb_$${os}_$${arch}; dir=$(PLUGIN_OUT)/$$name; \
		mkdir -p $$dir; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(IMAGE_LDFLAGS)" -o $$dir/kubectl-kubelb ./cmd/kubectl-kubelb; \
		tar -C $$dir --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) -cf - kubectl-kubelb | gzip -9n > $$dir.tar.gz; \
		rm -rf $$dir; \
		sum=$$(sha256sum $$dir.tar.gz | cut -d' ' -f1); \
		sed -i "s|@SHA256_$${os}_$${arch}@|$$sum|" $(PLUGIN_OUT)/kubelb.yaml; \
	done
	cd $(PLUGIN_OUT) && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS
	! grep -n '@[A-Z0-9_a-z]*@' $(PLUGIN_OUT)/kubelb.yaml

.PHONY: demo
demo: tools ## Start hub, tenant, manager, ccm and Envoy locally and send a request through Envoy.
	go build -o $(BIN)/demo ./e2e/demo
	$(BIN)/demo

.PHONY: clean
clean:
	rm -rf $(BIN)/kubelb $(BIN)/ccm $(BIN)/kubectl-kubelb $(BIN)/images $(BIN)/charts $(BIN)/plugin

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
