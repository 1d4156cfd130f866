#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what ccl needs to build, test and benchmark on Debian 12, idempotently: packages
# already present are not touched, so a second run is quick and needs no network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libucx-dev ucx-utils
  openmpi-bin libopenmpi-dev
  libgloo-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang clang-format libclang-rt-dev
  iproute2 procps xz-utils
  # the reference trainer (examples/transformer): BLAS on OpenMP, flags, its data and plots
  libopenblas-openmp-dev libcli11-dev bible-kjv python3-numpy python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
