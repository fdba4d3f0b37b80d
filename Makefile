# buyflow — build, test and lint. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
FUNCTIONS := $(notdir $(patsubst %/,%,$(dir $(wildcard functions/*/main.go))))
TOOLS     := $(CURDIR)/.tools
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)
FUZZTIME  ?=
MAX_BOOTSTRAP_BYTES := 12582912
LAMBDA_FLAGS := -trimpath -buildvcs=false -tags lambda.norpc -ldflags "-s -w"

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z0-9%-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# ---------------------------------------------------------------- build

.PHONY: build
build: $(addprefix build-,$(FUNCTIONS)) ## every functions/* -> bin/<name>/bootstrap (linux/arm64)
	@for f in $(FUNCTIONS); do \
	  size=$$(stat -c %s bin/$$f/bootstrap); \
	  awk -v f="$$f" -v s="$$size" 'BEGIN { printf "  bin/%-12s bootstrap %6.2f MB\n", f, s/1048576 }'; \
	  if [ "$$size" -gt $(MAX_BOOTSTRAP_BYTES) ]; then echo "bin/$$f/bootstrap is over 12 MB" >&2; exit 1; fi; \
	done

build-%:
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build $(LAMBDA_FLAGS) -o bin/$*/bootstrap ./functions/$*

# ---------------------------------------------------------------- local stack (no AWS, no Docker)

HOST_BIN := bin/host

.PHONY: build-host
build-host: ## every functions/* -> bin/host/<name>/bootstrap for this machine (the local stack runs them)
	@for f in $(FUNCTIONS); do CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags lambda.norpc -o $(HOST_BIN)/$$f/bootstrap ./functions/$$f || exit 1; done

# The local stack runs as a built binary, not through `go run`: go run exits 1 when it is
# interrupted whatever the program returns, so Ctrl-C would read as a failure. The binary exits 0
# once it has stopped everything, and make reports no error.
LOCAL_STACK := bin/buyflow-local

.PHONY: build-local
build-local:
	$(GO) build -trimpath -buildvcs=false -o $(LOCAL_STACK) ./cmd/buyflow-local

.PHONY: local
local: build-host build-local node_modules/.installed ## THE MAIN JOB: local stack + a demo media buy through every stage; Ctrl-C stops it
	$(LOCAL_STACK) --bin $(HOST_BIN) --demo

.PHONY: local-campaign
local-campaign: build-host build-local node_modules/.installed ## the local stack + a demo campaign across three simulated sellers; Ctrl-C stops it
	$(LOCAL_STACK) --bin $(HOST_BIN) --campaign

.PHONY: local-serve
local-serve: build-host build-local node_modules/.installed ## the local stack without the demo
	$(LOCAL_STACK) --bin $(HOST_BIN)

.PHONY: soak-memory
soak-memory: build-host build-local node_modules/.installed ## 200 buys through the local stack; prints each process's RSS every 50 buys and the growth per buy
	$(GO) build -trimpath -buildvcs=false -o bin/buyflow ./cmd/buyflow
	scripts/soak-memory.sh 200 50 4

.PHONY: e2e
e2e: build-host node_modules/.installed ## end-to-end suites over HTTP (local stack, and with an official-SDK seller; BUYFLOW_E2E_ENDPOINT=<url> for LocalStack/AWS)
	BUYFLOW_E2E=1 BUYFLOW_NODE_TESTS=1 BUYFLOW_E2E_BIN=$(CURDIR)/$(HOST_BIN) $(GO) test -count=1 -timeout 15m ./e2e/... ./internal/devstack

.PHONY: bench-local
bench-local: build-host node_modules/.installed ## webhook-to-resume latency, sweep detection latency, cold starts alone, on the local stack
	BUYFLOW_E2E=1 BUYFLOW_E2E_BIN=$(CURDIR)/$(HOST_BIN) $(GO) test -run '^$$' -bench . -benchtime 50x ./e2e/waiting

.PHONY: localstack-deploy
localstack-deploy: deps build ## deploy the CDK app to LocalStack (needs Docker, LocalStack and LOCALSTACK_AUTH_TOKEN)
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 npx --no-install cdklocal bootstrap
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 npx --no-install cdklocal deploy --require-approval never -c buyflow:dev=true

# ---------------------------------------------------------------- test

# The Node tools the tests use (the official AdCP SDK as an interop peer, the ASL interpreter,
# the CDK CLI), installed exactly as package-lock.json pins them.
node_modules/.installed: package.json package-lock.json | node
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Node.js 20+ and npm (Debian's packages; root installs them). make test-unit needs neither.
.PHONY: node
node:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's nodejs and npm for the Node-backed tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	  else \
	    echo "make test needs Node.js 20+ and npm on PATH: install them (Debian: apt-get install nodejs npm) and run make test again" >&2; exit 1; \
	  fi; \
	fi

# Headless Chromium for the approval page's browser test (Debian's package; root installs it).
CHROMIUM := /usr/bin/chromium

.PHONY: chromium
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium for the browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "the browser test needs Chromium at $(CHROMIUM): install it (Debian: apt-get install chromium) and run make test again" >&2; exit 1; \
	  fi; \
	fi

.PHONY: deps
deps: node_modules/.installed chromium ## install the pinned Go modules, Node tools and Chromium
	$(GO) mod download

# cfn-lint lints every synthesized template variant (infra/cfnlint_test.go). It is a Python tool
# that make cannot install offline (PyPI), so make test skips the lint with one line where it is
# missing, and .ci/run requires it (BUYFLOW_CFN_LINT=1 turns that skip into a failure).
CFN_LINT_VERSION := 1.51.0

.PHONY: cfn-lint
cfn-lint: ## check that cfn-lint $(CFN_LINT_VERSION) is on PATH (pip install cfn-lint==$(CFN_LINT_VERSION))
	@v=$$(cfn-lint --version 2>/dev/null) || { echo "cfn-lint is not on PATH: pip install cfn-lint==$(CFN_LINT_VERSION)" >&2; exit 1; }; \
	if [ "$$v" != "cfn-lint $(CFN_LINT_VERSION)" ]; then echo "$$v is installed; the template lint was reviewed with $(CFN_LINT_VERSION): pip install cfn-lint==$(CFN_LINT_VERSION)" >&2; exit 1; fi; \
	echo "$$v"

.PHONY: test
# The suites that start the local stack (e2e, stagepaths, the local stack's own test) run the
# host bootstraps build-host makes once, instead of each linking all of them again. The packages
# that start the stack run in a go test of their own beside the rest (scripts/go-test.sh).
test: deps build-host ## the whole suite: unit, adapter, contract, interop, workflow, browser and end-to-end tests, cfn-lint, fuzzing, build
	@command -v cfn-lint >/dev/null || echo "make test: cfn-lint is not on PATH, so the template lint is skipped (pip install cfn-lint==$(CFN_LINT_VERSION); .ci/run requires it)"
	BUYFLOW_NODE_TESTS=1 BUYFLOW_E2E=1 BUYFLOW_BROWSER_TESTS=1 BUYFLOW_E2E_BIN=$(CURDIR)/$(HOST_BIN) GO=$(GO) scripts/go-test.sh -race -count=1 -timeout 45m
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory build

.PHONY: test-unit
test-unit: ## the fast layer only: go test ./... without the Node-backed tests
	$(GO) test -race ./...

# The upstream AdCP reference material the schemas and test vectors were copied from; nothing
# else in the build, the tests or the local stack reads it.
UPSTREAM ?= ../shared

.PHONY: vendor-check
vendor-check: ## check the vendored AdCP schemas, test vectors and buyer storyboards against UPSTREAM (default ../shared)
	scripts/vendor-check.sh $(UPSTREAM)

.PHONY: fuzz
fuzz: ## run every Fuzz target for its execution count, or FUZZTIME (e.g. 30s, 1000000x), each (scripts/fuzz.sh)
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

.PHONY: bench
bench: deps ## benchmarks, printed as tables (cost, transitions, sweep); make bench-local for the local stack's
	$(GO) test -run '^$$' -bench . -benchmem ./...

# ---------------------------------------------------------------- deploy (CDK)

CDK := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 npx --no-install cdk

.PHONY: synth
synth: deps ## cdk synth (cdk.json builds the Lambdas and bin/infra first)
	$(CDK) synth -q

.PHONY: synth-check
synth-check: deps ## synth offline with placeholder bootstraps, without building the Lambdas
	d=$$(mktemp -d); for f in $(FUNCTIONS); do mkdir -p $$d/$$f; echo x > $$d/$$f/bootstrap; done; \
	$(CDK) synth -q --build "go build -o bin/infra ./infra" -c buyflow:assetRoot=$$d; rm -rf $$d

.PHONY: diff
diff: deps ## cdk diff against the deployed stack
	$(CDK) diff

.PHONY: deploy
deploy: deps ## cdk deploy (asks before widening IAM)
	$(CDK) deploy --require-approval broadening

# ---------------------------------------------------------------- lint

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(TOOLS)/golangci-lint $@

.PHONY: lint
lint: $(GOLANGCI_LINT) tidy-check deadcode ## gofmt, go vet, golangci-lint (pinned), go mod tidy drift, dead code
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "not gofmt-formatted:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

.PHONY: deadcode
deadcode: ## fail on functions no program reaches unless scripts/deadcode-kept.txt says why they stay
	GO=$(GO) scripts/deadcode.sh

.PHONY: tidy-check
tidy-check: ## fail if go.mod/go.sum are not tidy
	$(GO) mod tidy -diff

.PHONY: clean
clean: ## remove build outputs
	rm -rf bin cdk.out
