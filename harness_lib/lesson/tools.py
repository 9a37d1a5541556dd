"""课程层 `tools`：笔记本里标了 `# harness_lib: save tools` 的格子，按笔记本和格子的顺序拼在一起。

每个名字由哪本笔记本定义：

- `ToolRegistry`、`ToolFailed`、`Workspace`、`MAX_READ_CHARS`、`MAX_GLOB_RESULTS`、`string_arg`、`make_file_tools`：06_five_tools《06 预告：同一个循环，五个工具（原文开头的下篇预告）》。

每段代码前的 `# %%` 注释写明它来自哪本笔记本的第几格（从 0 数起）。
本文件由 `make lesson`（`python scripts/export_lesson.py`）从这些标记格子生成，不要手改：
要改就改笔记本里的格子，再重新生成。
"""


# %% notebooks/06_five_tools.ipynb 第 8 格
import re
from pathlib import Path

from harness_lib.support.runner import run_bash
from harness_lib.lesson.loop import ToolDenied, ToolInputError


class ToolRegistry:
    """注册表：工具定义（给模型看）和处理函数（给循环调）登记在同一处。"""

    def __init__(self):
        self._entries = {}  # 工具名 → (工具定义, 处理函数)

    def register(self, name, description, parameters):
        """装饰器：把下面的处理函数连同它的工具定义一起登记，函数本身原样返回。"""
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValueError(f"工具名 {name!r} 只能由字母、数字、下划线、连字符组成，最长 64 个字符")
        if name in self._entries:
            raise ValueError(f"工具 {name!r} 已经登记过了")

        def decorator(handler):
            schema = {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            }
            self._entries[name] = (schema, handler)
            return handler

        return decorator

    @property
    def tools(self):
        """交给模型的 `tools`：工具定义的列表，顺序就是登记的顺序。"""
        return [schema for schema, _ in self._entries.values()]

    @property
    def handlers(self):
        """交给循环的分发表：工具名 → 处理函数。"""
        return {name: handler for name, (_, handler) in self._entries.items()}

    def __len__(self):
        return len(self._entries)

    def __contains__(self, name):
        return name in self._entries


# %% notebooks/06_five_tools.ipynb 第 40 格
class ToolFailed(Exception):
    """参数没问题、也允许执行，但处理函数没做成，例如文件不存在（工具结果失败）。"""


class Workspace:
    """工作区：文件工具只能读写 root 里面的东西。"""

    def __init__(self, root):
        # 根目录本身先解析一次：它若经过符号链接（例如 macOS 的 /tmp），比较时两边一致
        self.root = Path(root).resolve()

    def resolve(self, path):
        """把模型给的路径变成工作区里的绝对路径；指到工作区外面就抛 ToolDenied。"""
        if not isinstance(path, str) or not path.strip():
            raise ToolInputError("path 应当是非空字符串")
        if "\x00" in path:
            raise ToolInputError("path 里不能有空字符")
        # 相对路径接在 root 后面；绝对路径会整个替换 root，下面的检查照样拦得住
        try:
            target = (self.root / path).resolve()
        except (OSError, RuntimeError) as exc:
            raise ToolFailed(f"解析路径 {path!r} 失败：{exc}") from None
        # resolve() 已经消掉了 `..` 并跟随了符号链接，剩下的只需看它是否还在 root 之内
        if not target.is_relative_to(self.root):
            raise ToolDenied(f"路径 {path!r} 指向工作区外面，拒绝访问")
        return target

    def relative(self, target):
        """工作区里的绝对路径 → 给模型看的相对路径（用 / 分隔）。"""
        return Path(target).relative_to(self.root).as_posix()


# %% notebooks/06_five_tools.ipynb 第 41 格
MAX_READ_CHARS = 50_000  # read_file 最多返回的字符数
MAX_GLOB_RESULTS = 200  # glob 最多列出的条目数


def string_arg(args, key, *, allow_empty=False):
    """从参数 dict 里取一个字符串参数；缺了、类型不对、不该为空却为空，都抛 ToolInputError。"""
    if key not in args:
        raise ToolInputError(f"缺少必填参数 {key}")
    value = args[key]
    if not isinstance(value, str):
        raise ToolInputError(f"{key} 应当是字符串，实际是 {type(value).__name__}")
    if not allow_empty and not value:
        raise ToolInputError(f"{key} 不能为空")
    return value


def make_file_tools(root):
    """在 root 这个工作区上登记五个工具，返回注册表。"""
    workspace = Workspace(root)
    registry = ToolRegistry()

    @registry.register(
        "bash",
        "在工作区目录里执行一条 shell 命令，返回合并后的标准输出和标准错误。",
        {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "要执行的完整命令行"}},
            "required": ["command"],
        },
    )
    def bash(args):
        # 黑名单在处理函数之前查：execute_tool_call 调用 check_permission（04）
        command = string_arg(args, "command")
        # cwd 只是起点，不是围墙：命令照样可以 cd 出去
        return run_bash(command, cwd=workspace.root)

    @registry.register(
        "read_file",
        "读取工作区里的一个文本文件，返回全文。",
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "相对工作区的文件路径"}},
            "required": ["path"],
        },
    )
    def read_file(args):
        target = workspace.resolve(string_arg(args, "path"))
        if not target.is_file():
            raise ToolFailed(f"{args['path']} 不存在或不是文件")
        text = target.read_bytes().decode("utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            return text[:MAX_READ_CHARS] + f"\n…[文件共 {len(text)} 个字符，只返回了前 {MAX_READ_CHARS} 个]"
        return text if text else "（空文件）"

    @registry.register(
        "write_file",
        "把 content 整个写进工作区里的一个文件：不存在就新建（连同上级目录），存在就覆盖。",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "相对工作区的文件路径"},
                "content": {"type": "string", "description": "文件的完整新内容"},
            },
            "required": ["path", "content"],
        },
    )
    def write_file(args):
        target = workspace.resolve(string_arg(args, "path"))
        content = string_arg(args, "content", allow_empty=True)
        if target.is_dir():
            raise ToolFailed(f"{args['path']} 是目录，不能当文件写")
        target.parent.mkdir(parents=True, exist_ok=True)
        # 按字节写，换行符原样保留，不随操作系统改变
        target.write_bytes(content.encode("utf-8"))
        return f"已写入 {workspace.relative(target)}：{len(content)} 个字符"

    @registry.register(
        "edit_file",
        "在工作区里的一个文件中，把 old_string 换成 new_string。"
        "old_string 必须与原文逐字一致，并且在文件里恰好出现一次。",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "相对工作区的文件路径"},
                "old_string": {"type": "string", "description": "要被替换的原文，逐字复制"},
                "new_string": {"type": "string", "description": "替换后的新文字，可以为空"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    )
    def edit_file(args):
        target = workspace.resolve(string_arg(args, "path"))
        old = string_arg(args, "old_string")
        new = string_arg(args, "new_string", allow_empty=True)
        if old == new:
            raise ToolInputError("old_string 与 new_string 相同，什么也不会改变")
        if not target.is_file():
            raise ToolFailed(f"{args['path']} 不存在或不是文件")
        try:
            text = target.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailed(f"{args['path']} 不是 UTF-8 文本，不能编辑") from None
        first = text.find(old)
        if first < 0:
            raise ToolFailed(f"在 {args['path']} 里找不到 old_string；先用 read_file 看原文，再逐字复制")
        # 从第一处的下一个字符接着找：重叠的出现也算第二处
        if text.find(old, first + 1) >= 0:
            raise ToolFailed(f"old_string 在 {args['path']} 里出现了不止一次；多带几行上下文，让它只出现一次")
        target.write_bytes((text[:first] + new + text[first + len(old):]).encode("utf-8"))
        return f"已修改 {workspace.relative(target)}：替换了 1 处"

    @registry.register(
        "glob",
        "按通配符模式列出工作区里的文件和目录，例如 `*.py`、`**/*.txt`；目录以 / 结尾。",
        {
            "type": "object",
            "properties": {"pattern": {"type": "string", "description": "相对工作区的通配符模式"}},
            "required": ["pattern"],
        },
    )
    def glob(args):
        pattern = string_arg(args, "pattern")
        if Path(pattern).is_absolute() or Path(pattern).drive or pattern.startswith(("/", "\\")):
            raise ToolDenied(f"模式 {pattern!r} 是绝对路径；只能在工作区里按相对模式查找")
        if ".." in re.split(r"[/\\]", pattern):
            raise ToolDenied(f"模式 {pattern!r} 含有 ..，会走出工作区")
        try:
            matches = list(workspace.root.glob(pattern))
        except (ValueError, NotImplementedError, IndexError) as exc:
            raise ToolInputError(f"模式 {pattern!r} 不合法：{exc}") from None
        found, outside = [], 0
        for path in matches:
            # 经过符号链接指到外面的结果不列出来，只计个数
            if not path.resolve().is_relative_to(workspace.root):
                outside += 1
                continue
            name = workspace.relative(path)
            found.append(name + "/" if path.is_dir() and name != "." else name)
        found.sort()
        lines = found[:MAX_GLOB_RESULTS] or ["（没有匹配的文件）"]
        if len(found) > MAX_GLOB_RESULTS:
            lines.append(f"…[共 {len(found)} 条，只列出前 {MAX_GLOB_RESULTS} 条]")
        if outside:
            lines.append(f"[另有 {outside} 条结果经符号链接指向工作区外，已略去]")
        return "\n".join(lines)

    return registry
