#!/usr/bin/env bash
# CI's caches, as a hosted CI keeps them between runs (actions/cache, rust-cache): .ci/run
# sources this in a fresh clone so the clone's build and data folders are links into
# PT2WEB_CI_CACHE (default ~/.cache/pt2web/ci), which outlives the clone:
#   target/       -> $cache/target        cargo's fingerprints decide what rebuilds: the
#   fuzz/target/  -> $cache/fuzz-target   registry dependencies are reused, the workspace's
#                                         own crates rebuild from the clone's sources
#   .venv/        -> $cache/venv-<hash of tests/requirements.txt>
#   .cache/       -> $cache/data-<hash of the generators>: the real models, OpInfo samples,
#                    corpus and tiny LMs that scripts/build_models.sh writes; a change to one of
#                    its generators (or common.py), to build_models.sh or to the pinned Python
#                    packages gives a new key, so everything is generated again from PyTorch
#                    (gen_fixtures.py and gen_op_cases.py, which change with every op case,
#                    are left out of the key: build_models.sh's own stamps apply, as on a
#                    developer's machine)
# An older venv or data folder is removed when its key changes; a target folder past 20 GB is
# emptied. On a new machine every cache is cold and the same scripts build everything
# (about 70 min on 2 cores); warm, CI skips the dependency builds and the model generation.
# PT2WEB_CI_CACHE=0 turns this off.
set -euo pipefail

ci_cache=${PT2WEB_CI_CACHE:-$HOME/.cache/pt2web/ci}
if [ "$ci_cache" = 0 ]; then
  echo "CI caches: off (PT2WEB_CI_CACHE=0)"
  return 0 2>/dev/null || exit 0
fi
mkdir -p "$ci_cache"

hash_of() { cat "$@" | sha256sum | cut -c1-16; }
venv_key=$(hash_of tests/requirements.txt)
data_key=$(hash_of tests/requirements.txt scripts/build_models.sh tests/fixgen/common.py \
  tests/fixgen/gen_models.py tests/fixgen/gen_similarity.py tests/fixgen/gen_lm.py \
  tests/fixgen/gen_opinfo.py tests/fixgen/gen_corpus.py)

# link NAME DIR: make NAME (absent in a fresh clone) a link to DIR, reporting warm or cold.
link() {
  local name=$1 dir=$2 state=cold
  if [ -e "$name" ] && [ ! -L "$name" ]; then
    echo "CI caches: $name exists in the clone, left as it is"
    return 0
  fi
  [ -n "$(ls -A "$dir" 2>/dev/null)" ] && state=warm
  mkdir -p "$dir"
  rm -f "$name"
  ln -s "$dir" "$name"
  echo "CI caches: $name -> $dir ($state)"
}

# Stale keys go first, to bound the disk.
for d in "$ci_cache"/venv-* "$ci_cache"/data-*; do
  [ -d "$d" ] || continue
  case "$d" in
    "$ci_cache/venv-$venv_key" | "$ci_cache/data-$data_key") ;;
    *) echo "CI caches: removing stale $d"; rm -rf "$d" ;;
  esac
done
for d in "$ci_cache/target" "$ci_cache/fuzz-target"; do
  if [ -d "$d" ] && [ "$(du -s --block-size=1G "$d" | cut -f1)" -gt 20 ]; then
    echo "CI caches: $d is past 20 GB, emptied"
    rm -rf "$d"
  fi
done

link target "$ci_cache/target"
link fuzz/target "$ci_cache/fuzz-target"
# The venv is made at its cache path (its scripts' #! lines name that path, not the clone's);
# scripts/setup.sh then finds .venv/bin/python and installs into it.
link .venv "$ci_cache/venv-$venv_key"
[ -x "$ci_cache/venv-$venv_key/bin/python" ] || python3 -m venv "$ci_cache/venv-$venv_key"
link .cache "$ci_cache/data-$data_key"
