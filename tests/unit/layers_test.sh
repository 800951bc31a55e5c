#!/bin/bash
# The core's layers as docs/DESIGN.md ("Layers of the core") draws them, held against the code:
#   - every folder of src/ and every header of include/mrcheck/ is in exactly one layer of the table;
#   - a file of a layer (src/<folder>/*, or a public header of that layer) includes only headers of its own
#     layer and of the layers it uses, directly or through them: never one above it or beside it;
#   - the front ends (cli/, prolog/, spank/) include no private header of src/;
#   - src/CMakeLists.txt builds each layer from the table's folders and links exactly the table's "uses".
# Then it checks itself: the same tree with one upward include added must fail.
# usage: tests/unit/layers_test.sh SOURCE_DIR        exit 0 pass, 1 fail
set -uo pipefail
src=${1:?usage: layers_test.sh SOURCE_DIR}

# check_tree ROOT: prints one line per problem; returns 1 if any.
check_tree() {
  local root=$1 bad=0
  local -A layer_of_dir=() layer_of_header=() uses=() allowed=() target_layer=() dirs_of=()
  local -a order=()
  local line layer target folders use headers name
  # The table: | layer | target | folders | uses | public headers | what |
  while IFS= read -r line; do
    IFS='|' read -r _ layer target folders use headers _ <<<"$line"
    layer=$(tr -d ' ' <<<"$layer")
    [[ -z $layer || $layer == layer || $layer == ---* ]] && continue
    order+=("$layer")
    target_layer[$(tr -d ' `' <<<"$target")]=$layer
    dirs_of[$layer]=$(grep -o '`[^`]*`' <<<"$folders" | tr -d '`' | tr '\n' ' ')
    for name in ${dirs_of[$layer]}; do layer_of_dir[$name]=$layer; done
    uses[$layer]=$(tr ',' ' ' <<<"$use" | tr -d '-')
    for name in $(grep -o '`[^`]*`' <<<"$headers" | tr -d '`'); do layer_of_header[$name]=$layer; done
  done < <(awk '/^### Layers of the core/ {on=1; next} on && /^\|/ {print; seen=1; next} on && seen && !/^\|/ {exit}' \
             "$root/docs/DESIGN.md")
  if ((${#order[@]} == 0)); then
    echo "docs/DESIGN.md: no table under '### Layers of the core'"
    return 1
  fi
  # What each layer may include: itself and every layer it uses, transitively (the table lists bottom first).
  for layer in "${order[@]}"; do
    allowed[$layer]=" $layer "
    for name in ${uses[$layer]}; do
      [[ -n ${allowed[$name]:-} ]] || { echo "docs/DESIGN.md: layer $layer uses '$name', which is not a layer below it"; bad=1; continue; }
      allowed[$layer]+="${allowed[$name]} "
    done
  done
  # Every folder and public header has its layer.
  for name in "$root"/src/*/; do
    name=$(basename "$name")
    [[ -n ${layer_of_dir[$name]:-} ]] || { echo "src/$name/: in no layer of docs/DESIGN.md"; bad=1; }
  done
  for name in "$root"/include/mrcheck/*.h "$root"/include/mrcheck/*.h.in; do
    [[ -e $name ]] || continue
    name=$(basename "$name" .in)
    [[ -n ${layer_of_header[$name]:-} ]] || { echo "include/mrcheck/$name: in no layer of docs/DESIGN.md"; bad=1; }
  done
  # Every include of every file, in one grep, against what the file's layer may use ("front": the front ends,
  # which may include any public header but no private one of src/).
  local -A layer_of_file=()
  local file dir n inc h d from to
  for file in "$root"/src/*/*.cpp "$root"/src/*/*.h "$root"/src/*/*.c; do
    [[ -e $file ]] || continue
    dir=${file%/*}
    dir=${dir##*/}
    [[ -n ${layer_of_dir[$dir]:-} ]] && layer_of_file[$file]=${layer_of_dir[$dir]}
  done
  for file in "$root"/include/mrcheck/*.h; do
    name=${file##*/}
    [[ -n ${layer_of_header[$name]:-} ]] && layer_of_file[$file]=${layer_of_header[$name]}
  done
  for file in "$root"/cli/*.cpp "$root"/cli/*.h "$root"/prolog/*.cpp "$root"/prolog/*.h "$root"/spank/*.cpp "$root"/spank/*.h; do
    [[ -e $file ]] && layer_of_file[$file]=front
  done
  while IFS= read -r line; do
    file=${line%%:*}
    line=${line#*:}
    n=${line%%:*}
    inc=${line#*:}
    inc=${inc#"${inc%%[!	 ]*}"}
    inc=${inc#\#}
    inc=${inc#"${inc%%[!	 ]*}"}
    inc=${inc#include}
    inc=${inc#"${inc%%[!	 ]*}"}
    from=${layer_of_file[$file]}
    where=${file#"$root"/}:$n
    if [[ $inc =~ ^\<mrcheck/([^>]+)\> ]]; then
      h=${BASH_REMATCH[1]}
      to=${layer_of_header[$h]:-}
      if [[ -z $to ]]; then
        echo "$where: <mrcheck/$h> is in no layer"
        bad=1
      elif [[ $from != front && ${allowed[$from]} != *" $to "* ]]; then
        echo "$where: layer $from includes <mrcheck/$h> of layer $to (it uses only:${allowed[$from]})"
        bad=1
      fi
    elif [[ $inc =~ ^\"\.\./ ]]; then
      echo "$where: includes $inc: reach other folders through include/mrcheck/ or their own path"
      bad=1
    elif [[ $inc =~ ^\"([a-z_]+)/ ]]; then
      d=${BASH_REMATCH[1]}
      [[ -n ${layer_of_dir[$d]:-} ]] || continue
      if [[ $from == front ]]; then
        echo "$where: a front end includes $inc, a private header of src/$d/"
        bad=1
      elif [[ ${allowed[$from]} != *" ${layer_of_dir[$d]} "* ]]; then
        echo "$where: layer $from includes $inc of layer ${layer_of_dir[$d]}"
        bad=1
      fi
    fi
  done < <(grep -nH '^[[:space:]]*#[[:space:]]*include' "${!layer_of_file[@]}")
  # The build: mrcheck_layer(TARGET DIRS ... DEPS ...) as the table says.
  local cm=$root/src/CMakeLists.txt seen=" " t rest dirs deps want where
  while IFS= read -r line; do
    line=$(sed -E 's/^mrcheck_layer\(//; s/\).*//' <<<"$line")
    t=${line%% *}
    layer=${target_layer[$t]:-}
    [[ -n $layer ]] || { echo "src/CMakeLists.txt: layer target $t is not in docs/DESIGN.md"; bad=1; continue; }
    seen+="$layer "
    dirs=$(sed -nE 's/.*DIRS ([^)]*)/\1/p' <<<"$line" | sed 's/ DEPS.*//')
    deps=$(sed -nE 's/.* DEPS (.*)/\1/p' <<<"$line")
    [[ $(tr ' ' '\n' <<<"$dirs" | grep . | sort) == $(tr ' ' '\n' <<<"${dirs_of[$layer]}" | grep . | sort) ]] ||
      { echo "src/CMakeLists.txt: $t builds folders '$dirs', docs/DESIGN.md says '${dirs_of[$layer]}'"; bad=1; }
    want=""
    for name in ${uses[$layer]}; do
      for rest in "${!target_layer[@]}"; do [[ ${target_layer[$rest]} == "$name" ]] && want+="$rest "; done
    done
    [[ $(tr ' ' '\n' <<<"$deps" | grep . | sort) == $(tr ' ' '\n' <<<"$want" | grep . | sort) ]] ||
      { echo "src/CMakeLists.txt: $t links '$deps', docs/DESIGN.md says it uses '${uses[$layer]}' ($want)"; bad=1; }
  done < <(grep -E '^mrcheck_layer\(' "$cm" | sed -E 's/[[:space:]]+/ /g')
  for layer in "${order[@]}"; do
    [[ $seen == *" $layer "* ]] || { echo "src/CMakeLists.txt: no mrcheck_layer for layer $layer"; bad=1; }
  done
  return $bad
}

echo "== the tree"
out=$(check_tree "$src")
rc=$?
[[ -n $out ]] && echo "$out"
((rc == 0)) && echo "layers: every include goes down or stays in its layer"

# The check itself must catch an upward include: a copy of the tree where util/ includes the step engine.
echo "== self-check: util/ including <mrcheck/step.h> must fail"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs"
cp -r "$src/src" "$src/include" "$src/cli" "$src/prolog" "$src/spank" "$tmp/" && cp "$src/docs/DESIGN.md" "$tmp/docs/"
victim=$(ls "$tmp"/src/util/*.cpp | head -n1)
printf '#include <mrcheck/step.h>\n' >>"$victim"
self=$(check_tree "$tmp")
if [[ $? -ne 0 && $self == *"layer base includes <mrcheck/step.h> of layer step"* ]]; then
  echo "self-check: caught ($self)"
else
  echo "self-check FAILED: the upward include was not reported (got: ${self:-nothing})"
  rc=1
fi
exit $rc
