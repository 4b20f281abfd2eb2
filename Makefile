# make test: everything CI runs. Emulators that live outside Go are installed
# into tools/ from their lockfiles first; Go ones run in process.
GO ?= go

.PHONY: test vet fmt-check tools fuzz

# The adapters are modules of their own, so that the core does not pull in
# pebble or thanos objstore; each is tested against the core beside it.
MODULES := . adapters/pebble adapters/objstore

test: fmt-check vet tools
	@set -e; for m in $(MODULES); do \
		echo "test $$m"; (cd $$m && $(GO) test -race -timeout 30m ./...); \
	done
	$(MAKE) fuzz

# Each decoder of what we store runs under the fuzzer briefly (its seeds run
# with the tests too): pack indexes, quorum acceptor states, commit-log
# frames and segment names.
FUZZTIME ?= 5s
FUZZ_TARGETS := ./tiered/internal/packlog:FuzzReadPackIndex ./quorum:FuzzParseState \
	./commitlog:FuzzDecodeFrames ./commitlog:FuzzSegmentNames

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Emulators from npm (Azurite), pinned by tools/package-lock.json and installed
# into tools/node_modules, never globally. npm writes node_modules/.package-lock.json
# on every install, so it is newer than the lockfile exactly when the install is
# up to date.
TOOLS_STAMP := tools/node_modules/.package-lock.json

tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund
	@touch $@
