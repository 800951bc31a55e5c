#!/bin/sh
# Replays a fuzz target over its seed corpus, each input once, no fuzzing (ctest label `fuzz`).
# Usage: replay.sh TARGET CORPUS_DIR
set -eu
target=$1
corpus=$2
set -- "$corpus"/*
if [ ! -e "$1" ]; then
  echo "mrcheck: fuzz replay: no seeds in $corpus" >&2
  exit 1
fi
exec "$target" -rss_limit_mb=2048 -timeout=30 "$@" </dev/null
