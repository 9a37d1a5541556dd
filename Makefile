# 两条命令：make lab（打开 JupyterLab）与 make test（跑全部测试）。
# Windows 没有 make，README 里有同样步骤的普通命令写法。

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS ?= dev
# 以 root 运行时 JupyterLab 需要 --allow-root
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test test-unit test-notebooks test-browser bench release autograde clean venv

venv: $(STAMP)

# venv 缺失、解释器坏掉，或 pyproject.toml 比上次安装新，都会重新安装。
$(STAMP): pyproject.toml
	@if ! $(PY) -c "import sys" >/dev/null 2>&1; then \
		echo "创建虚拟环境 $(VENV) ..."; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	@echo "$(EXTRAS)" > $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) notebooks/00_setup.ipynb

test: $(STAMP)
	$(PY) -m pytest -m "not browser"

test-browser:
	$(MAKE) EXTRAS=dev,browser venv
	$(PY) -m pytest -m browser

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
