#!/usr/bin/env bash
# 装上缺少的 Debian 软件包：scripts/apt-install.sh 命令名=包名 ...（命令已经有了就跳过）。
# make test 用它装评分沙盒要的 bubblewrap；不是 root 时用 sudo。
set -euo pipefail
missing=()
for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null 2>&1 || missing+=("${pair#*=}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
