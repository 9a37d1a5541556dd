"""别人的私有名字：登记在这里，每个只用在一个文件里，新版本去掉它时这里先失败，并说出要改哪个文件。

openai SDK 和 IPython 的下划线名字不在它们的兼容承诺里，一个小版本就可能改掉。本项目只在没有公开办法的地方用，
下面每一行写着：名字、用在哪个文件、为什么没有公开的办法。`make test-latest` 每周在最新版本上跑这些测试。
"""

import re

import httpx2
import openai
import pytest
from IPython.core.interactiveshell import InteractiveShell
from openai._models import FinalRequestOptions

from conftest import ROOT
from harness_lib.models.wire import OfflineClient, json_response

# (名字在源码里的样子, 用在哪个文件, 为什么没有公开的办法)
REGISTRY = [
    (r"\._client\b", "harness_lib/models/record.py",
     "录制器要把录音线路接在任意一个 openai.OpenAI 自己的 httpx 客户端前面；SDK 没有公开取出它的办法"),
    (r"\b_prepare_options\b", "harness_lib/ui/clients.py",
     "PresetClient 要改每一个请求（预设字段、max_completion_tokens、reasoning_effort）；SDK 没有公开的请求钩子"),
    (r"\._showtraceback\b", "harness_lib/ui/switch.py",
     "显示一份已经打码的现成调用栈；IPython 公开的 showtraceback 会重新生成、不打码"),
]
SHIPPED = ["harness_lib", "scripts", "coursework", "benchmarks", "notebooks"]


def _fix(name: str, path: str, why: str) -> str:
    return (f"装上的版本里没有 {name} 了（openai {openai.__version__}）。去改 {path}：{why}。"
            f"先找有没有新的公开办法；没有就换成新版本里对应的名字，并更新 tests/test_private_surfaces.py 的登记。")


def test_the_sdk_still_keeps_its_http_client_in_private_client():
    client = openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")
    try:
        inner = getattr(client, "_client", None)
        assert isinstance(inner, httpx2.Client), _fix("OpenAI()._client", *REGISTRY[0][1:])
    finally:
        client.close()


def test_the_sdk_still_calls_prepare_options_once_per_request_with_the_fields_we_change():
    seen = []

    class Watching(OfflineClient):
        def _prepare_options(self, options):
            options = super()._prepare_options(options)
            seen.append({field: getattr(options, field) for field in ("method", "url", "json_data", "extra_json")})
            return options

    done = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "好"}}]}
    client = Watching(lambda request: json_response(200, done))
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "?"}])
    except AttributeError as exc:
        pytest.fail(_fix(f"FinalRequestOptions 的字段（{exc}）", *REGISTRY[1][1:]))
    finally:
        client.close()
    assert len(seen) == 1, _fix("OpenAI._prepare_options（每个请求调用一次）", *REGISTRY[1][1:])
    assert seen[0]["method"] == "post" and seen[0]["url"] == "/chat/completions"
    assert seen[0]["json_data"]["model"] == "m"
    assert "model_copy" in dir(FinalRequestOptions), _fix("FinalRequestOptions.model_copy", *REGISTRY[1][1:])


def test_ipython_still_has_the_showtraceback_step_a_kernel_overrides():
    assert callable(getattr(InteractiveShell, "_showtraceback", None)), _fix(
        "InteractiveShell._showtraceback", *REGISTRY[2][1:])


@pytest.mark.parametrize("pattern, path, why", REGISTRY, ids=[row[1] for row in REGISTRY])
def test_each_private_name_is_used_in_its_registered_file_only(pattern, path, why):
    where = set()
    for top in SHIPPED:
        for file in (ROOT / top).rglob("*"):
            if file.suffix in {".py", ".ipynb"} and re.search(pattern, file.read_text(encoding="utf-8")):
                where.add(file.relative_to(ROOT).as_posix())
    assert where == {path}, (
        f"私有名字 {pattern} 应当只出现在 {path}（{why}），现在出现在 {sorted(where)}。"
        f"能用公开的办法就换掉；确实没有，就在 tests/test_private_surfaces.py 登记一行")
