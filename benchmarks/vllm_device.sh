#!/usr/bin/env bash
# vLLM 0.26 and Ray on the lent GPU machine, in three `run` calls made back to back (a warm machine keeps /tmp
# for 30 s after a call). Built here first (git-ignored folders; see ../shared/device/VLLM.md):
#   bash ../shared/device/make_vllm_parts.sh .vc1 .vc2
#   bash ../shared/device/make_device_site.sh .device-site "ray[serve,data]==2.60.0" \
#        pydantic==2.14.4 starlette==1.10.0 fastapi==0.136.3     # the same versions as .vc2's wheels
#   bash benchmarks/vllm_device.sh verl      # verl and what it imports, no resolver (it backtracked > 25 min)
# Then on the GPU machine:
#   call 1, carry [".vc1"]:          bash benchmarks/vllm_device.sh part1
#   call 2, carry [".vc2"]:          bash benchmarks/vllm_device.sh part2
#   call 3+, carry [".device-site"]: bash benchmarks/vllm_device.sh run 'python3 -m pytest -m gpu ...'
# A call that finds an earlier part missing exits 3: the machine was recycled, start again at call 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
case "${1:?verl | part1 | part2 | run CMD}" in
  verl)
    w=$(mktemp -d); t=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
      -d "$w" verl==0.9.1 codetiming==1.4.0 omegaconf==2.3.0 tensordict==0.10.0 pyvers==0.2.3 dill==0.4.1 \
      datasets==5.2.0 multiprocess==0.70.19 orjson==3.13.0 importlib_metadata zipp
    for f in "$w"/*.whl; do unzip -q -o "$f" -d "$t"; done
    # omegaconf pins the antlr4 runtime 4.9.3, which has no wheel: its source package is pure Python, so the
    # package folder is taken from it (the host's own antlr4, if any, may be another version)
    s=$(mktemp -d)
    python3 -m pip download -q --no-deps --no-binary=:all: -d "$s" antlr4-python3-runtime==4.9.3
    tar -C "$s" -xzf "$s"/antlr4-python3-runtime-4.9.3.tar.gz
    cp -r "$s"/antlr4-python3-runtime-4.9.3/src/antlr4 "$t"/ && rm -rf "$s"
    mkdir -p .device-site && tar -C "$t" -cf - . | xz -T0 -6 > .device-site/verl.tar.xz && rm -rf "$w" "$t"
    ls -la .device-site ;;
  part1) mkdir -p /tmp/site/vllm && xz -T0 -dc .vc1/_C_stable_libtorch.abi3.so.xz > /tmp/site/vllm/_C_stable_libtorch.abi3.so
         df -h /dev/shm /tmp | tail -2; echo "part 1 in /tmp/site" ;;
  part2) bash .vc2/install_vllm_parts.sh 2 ;;
  run)
    [ -f /tmp/site/vllm/_C_stable_libtorch.abi3.so ] && [ -f /tmp/site/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so ] \
      || { echo "vLLM parts missing: the machine was recycled, run part1 and part2 again"; exit 3; }
    if [ ! -f /tmp/raysite/.stamp ] || ! cmp -s /tmp/raysite/.stamp <(md5sum .device-site/site.tar.xz); then
      rm -rf /tmp/raysite && mkdir -p /tmp/raysite && tar -C /tmp/raysite -xJf .device-site/site.tar.xz \
        && tar -C /tmp/raysite -xJf .device-site/verl.tar.xz && md5sum .device-site/site.tar.xz > /tmp/raysite/.stamp
    fi
    export PYTHONPATH="$PWD:/tmp/site:/tmp/raysite"
    shift; bash -c "$*" ;;
esac
