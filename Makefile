# The two commands a newcomer needs:  make demo   (run)   and   make test   (tests).
# Everything else is a building block. Python deps go into .venv; Kubernetes binaries into a
# cache outside the repo (see hack/kube/README.md).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: test test-older test-matrix support-table mismatch unit lint format demo serve venv schema crd docs docs-serve clean constraints release

# The Kubernetes minor the control plane runs (e2e tests, demo): KUBE_VERSION=1.34 make test.
# Empty means the newest supported one; the list is SUPPORTED_MINORS in extender/kube/versions.py.
KUBE_VERSION ?=
export KUBE_VERSION

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP)

## make test: lint and format check, then every test (unit, golden wire, property, the docs site's
## strict build and generated pages (tests/unit/test_docs.py), e2e on the
## newest minor, or KUBE_VERSION's): the tests that measure time, then the rest on TEST_WORKERS
## workers (hack/run_phases.py, tests/parallel.py; TEST_WORKERS=0: one run in one process); its e2e
## outcome goes to $(E2E_RESULTS); the time it took is printed last (and in test-logs/timings.jsonl)
E2E_RESULTS ?= test-logs/matrix/e2e-make-test.json
TEST_WORKERS ?= 4
test: lint
	@$(PY) hack/timed.py "make test" -- env E2E_RESULTS=$(E2E_RESULTS) $(PY) hack/run_phases.py $(TEST_WORKERS)

## make test-older: the version-sensitive e2e scenarios on every minor but the newest (after
## make test, which ran the newest), OLDER_JOBS minors at once (their modules share one machine
## lock, tests/parallel.py); the support table takes the newest's row from make test
OLDER_JOBS ?= 3
test-older: $(STAMP)
	@$(PY) hack/timed.py "make test-older" -- \
	  $(PY) hack/matrix.py run --minors older --newest-from $(E2E_RESULTS) --jobs $(OLDER_JOBS)

## make test-matrix: lint, then e2e scenarios on every supported Kubernetes minor (newest first: all of
## them there, the version-sensitive ones, hack/matrix.py EVERY_MINOR, on the others);
## writes test-logs/matrix/matrix.json and prints the support table (docs/install/versions.md)
test-matrix: lint
	$(PY) hack/matrix.py run

## make support-table: rewrite the support table in docs/install/versions.md from the last test-matrix run
support-table: $(STAMP)
	$(PY) hack/matrix.py table --page docs/install/versions.md

## make mismatch: the newest kube-scheduler against the oldest supported kube-apiserver (the result in
## docs/install/versions.md)
mismatch: $(STAMP)
	$(PY) hack/mismatch.py

## make lint: ruff's checks and its formatter in check mode (configured in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check extender tests benchmarks hack
	$(VENV)/bin/ruff format --check extender tests benchmarks hack

## make format: apply ruff's fixes and formatting
format: $(STAMP)
	$(VENV)/bin/ruff check --fix extender tests benchmarks hack
	$(VENV)/bin/ruff format extender tests benchmarks hack

## make unit: the fast tests only
unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

## make demo: a local control plane (pinned upstream binaries) with the extender and a sample StatefulSet
demo: $(STAMP)
	$(PY) -m extender dev up

## make release: the release tagged on HEAD (git tag v<version>, a clean tree; before tagging,
## python hack/release.py prepare <version> sets every place that names it): dist/ gets the image
## (OCI archive), the packaged chart, the image's SBOM and THIRD_PARTY_NOTICES, and SHA256SUMS.
## make release DEV=1: any tree, as a dev version (<version>-dev.g<commit>). Needs root (buildah,
## and the SBOM reads the image's own python). Pushing: docs/install/release.md
release: $(STAMP)
	$(PY) hack/release.py $(if $(DEV),--dev)

## make serve: the extender alone, against $$KUBECONFIG
serve: $(STAMP)
	$(PY) -m extender serve

schema: $(STAMP)
	@$(PY) -m extender schema

## make docs: the documentation site: the reference pages generated from the code (docs/reference/
## policy.md, cli.md, metrics.md; commit them), then a strict build into site/ (a broken link fails)
docs: $(STAMP)
	$(PY) hack/docs/generate.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site/

## make docs-serve: the same site on http://127.0.0.1:8000, rebuilt as you edit
docs-serve: $(STAMP)
	$(PY) hack/docs/generate.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

## make crd: regenerate deploy/base/crd.yaml and crd-zonerotation.yaml from the models
crd: $(STAMP)
	@$(PY) -m extender crd > deploy/base/crd.yaml
	@$(PY) -m extender crd --kind ZoneRotation > deploy/base/crd-zonerotation.yaml

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

## make constraints: re-pin every dependency from a fresh install of the package
constraints:
	rm -rf /tmp/placement-extender-pin && $(PYTHON) -m venv /tmp/placement-extender-pin
	/tmp/placement-extender-pin/bin/pip install --quiet '.[test]'
	{ echo "# Pinned versions of every dependency (runtime and test), used by the Makefile, CI and the"; \
	  echo "# Dockerfile: pip install -c constraints.txt . Regenerate with: make constraints"; \
	  /tmp/placement-extender-pin/bin/pip freeze --exclude placement-extender; } > constraints.txt
