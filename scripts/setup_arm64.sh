#!/usr/bin/env bash
# Installs what the ARM64 cross build and its emulated tests need on Debian 12 x86-64 (run as root, or with
# sudo available; idempotent): the arm64 architecture in dpkg, the aarch64 cross compiler, qemu's user-mode
# emulator and the :arm64 -dev packages of the libraries libmact links (the Makefile's LDLIBS). They
# co-install with their amd64 versions (Debian multiarch: headers shared, libraries under
# /usr/lib/aarch64-linux-gnu). Then: make CROSS=aarch64-linux-gnu- && tests/test_arm64.sh
# libwebsockets-dev:arm64 does not co-install with the amd64 one (lws_config.h differs), so the server is
# not part of the cross build.
set -euo pipefail
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
      libc6:arm64 libcjson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libpng-dev:arm64
      libjpeg62-turbo-dev:arm64 zlib1g-dev:arm64 libzip-dev:arm64 libsnappy-dev:arm64 libzstd-dev:arm64
      libcairo2-dev:arm64   # the CLI links cairo (mact prune-analyze)
      libavformat-dev:arm64 libavcodec-dev:arm64 libswscale-dev:arm64 libavutil-dev:arm64)  # dataset videos
missing=()
for p in "${pkgs[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
