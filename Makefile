# make test: everything CI runs. Emulators that live outside Go are installed
# into tools/ from their lockfiles first; Go ones run in process.
GO ?= go

.PHONY: test vet fmt-check

test: fmt-check vet
	$(GO) test -race -timeout 30m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
