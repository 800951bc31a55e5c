#!/bin/bash
# The core's layers as docs/DESIGN.md ("Layers of the core") draws them, held against the code:
#   - every folder of src/ and every header of include/mrcheck/ is in exactly one layer of the table;
#   - a file of a layer (src/<folder>/*, or a public header of that layer) includes only headers of its own
#     layer and of the layers it uses, directly or through them: never one above it or beside it;
#   - the front ends (cli/, prolog/, spank/) include no private header of src/;
#   - src/CMakeLists.txt builds each layer from the table's folders and links exactly the table's "uses".
# Then it checks itself: the same tree with one upward include added must fail.
# With BUILD_DIR, the same table against the objects (ctest `layers_objects`): every symbol a layer's archive
# leaves undefined and another layer's archive defines must be defined in a layer it uses. An include check cannot
# see a header of one layer declaring a function that a layer above defines; the linker's view can.
# usage: tests/unit/layers_test.sh SOURCE_DIR [BUILD_DIR]        exit 0 pass, 1 fail
set -uo pipefail
src=${1:?usage: layers_test.sh SOURCE_DIR [BUILD_DIR]}
build=${2:-}

# read_table ROOT: the table of docs/DESIGN.md into the caller's locals (order, target_layer, dirs_of, layer_of_dir,
# uses, layer_of_header, allowed: what each layer may use, itself included); prints a problem and returns 1 if any.
read_table() {
  local root=$1 bad=0
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
  return $bad
}

# check_tree ROOT: prints one line per problem; returns 1 if any.
check_tree() {
  local root=$1 bad=0
  local -A layer_of_dir=() layer_of_header=() uses=() allowed=() target_layer=() dirs_of=()
  local -a order=()
  local line layer name
  read_table "$root" || bad=1
  ((${#order[@]} > 0)) || return 1
  # Every folder and public header has its layer.
  # Folders by their path below src/ (explain/causes is a folder of its own, not part of explain); those that
  # hold sources.
  local -a src_dirs=()
  mapfile -t src_dirs < <(find "$root/src" -mindepth 2 -maxdepth 3 -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.c' \) \
    -printf '%h\n' | sed "s|^$root/src/||" | sort -u)
  for name in "${src_dirs[@]}"; do
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
  for dir in "${src_dirs[@]}"; do
    for file in "$root/src/$dir"/*.cpp "$root/src/$dir"/*.h "$root/src/$dir"/*.c; do
      [[ -e $file && -n ${layer_of_dir[$dir]:-} ]] && layer_of_file[$file]=${layer_of_dir[$dir]}
    done
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
    elif [[ $inc =~ ^\"([a-z_/]+)/ ]]; then
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

# check_objects ROOT BUILD [PRETEND]: each layer archive's undefined symbols against the layers that define them
# (strong definitions only: an inline function or a template is emitted, weak, wherever it is used). PRETEND
# "LAYER USED" drops USED from what LAYER may use, for the self-check. Prints one line per layer pair.
check_objects() {
  local root=$1 build=$2 pretend=${3:-} bad=0
  local -A layer_of_dir=() layer_of_header=() uses=() allowed=() target_layer=() dirs_of=()
  local -a order=()
  local t a layer
  read_table "$root" >/dev/null || return 1
  if [[ -n $pretend ]]; then
    allowed[${pretend% *}]=${allowed[${pretend% *}]/ ${pretend#* } / }
  fi
  for t in "${!target_layer[@]}"; do
    a=$build/src/lib$t.a
    [[ -f $a ]] || { echo "$a: missing (build the core first)"; return 1; }
    layer=${target_layer[$t]}
    # "D layer symbol" for strong definitions, "U layer symbol" for undefined references.
    nm -g --defined-only -P "$a" 2>/dev/null | awk -v l="$layer" 'NF >= 2 && $2 ~ /^[TDBR]$/ {print "D", l, $1}'
    nm -u -P "$a" 2>/dev/null | awk -v l="$layer" 'NF >= 2 && $2 == "U" {print "U", l, $1}'
  done >"$tmp/symbols"
  for layer in "${order[@]}"; do echo "A $layer ${allowed[$layer]}"; done >"$tmp/allowed"
  awk '$1 == "A" {for (i = 3; i <= NF; i++) ok[$2 " " $i] = 1; next}
       $1 == "D" {if (!($3 in def)) def[$3] = $2; next}
       $1 == "U" && ($3 in def) && def[$3] != $2 && !(($2 " " def[$3]) in ok) {
         k = $2 " " def[$3]; if (!(k in n)) first[k] = $3; n[k]++ }
       END {for (k in n) {split(k, p, " "); printf "%s %s %d %s\n", p[1], p[2], n[k], first[k]}}' \
    "$tmp/allowed" "$tmp/symbols" | sort >"$tmp/upward"
  while read -r layer to n sym; do
    echo "layer $layer uses $n symbol(s) that layer $to defines, which it may not use (e.g. $(c++filt "$sym"))"
    bad=1
  done <"$tmp/upward"
  return $bad
}

# check_declarations ROOT BUILD: every function a layer's archive defines (strong, in namespace mrcheck) and a
# public header declares is declared in a header of that layer: a header of a lower layer declaring it would let
# that layer's code call up (and make its reader look for the code in the wrong folder). A declaration is a line
# of include/mrcheck/*.h, outside a comment, that names the function followed by "(".
check_declarations() {
  local root=$1 build=$2 bad=0
  local -A layer_of_dir=() layer_of_header=() uses=() allowed=() target_layer=() dirs_of=()
  local -a order=()
  local t layer q name h own others outer
  local -a where
  read_table "$root" >/dev/null || return 1
  for t in "${!target_layer[@]}"; do
    nm -g --defined-only -P "$build/src/lib$t.a" 2>/dev/null | awk '$2 == "T" {print $1}' | c++filt | sed 's/\[abi:[a-z0-9]*\]//g' |
      grep -o '^mrcheck::[A-Za-z_0-9:]*(' | sed "s/($//; s/^/${target_layer[$t]} /"
  done | sort -u >"$tmp/defined"
  while read -r layer q; do
    name=${q##*::}
    own=0 others='' where=()
    # A member function: the headers that define its class; a free function: those that declare its name.
    outer=${q%::*}
    outer=${outer##*::}
    [[ $q == mrcheck::*::* ]] && mapfile -t where < <(grep -lE "^(struct|class) $outer\b" "$root"/include/mrcheck/*.h)
    ((${#where[@]})) || mapfile -t where < <(grep -lE "^[^/]*[^A-Za-z0-9_:.>]$name\(" "$root"/include/mrcheck/*.h)
    for h in "${where[@]}"; do
      h=${h##*/}
      if [[ ${layer_of_header[$h]:-} == "$layer" ]]; then own=1; else others+=" $h (${layer_of_header[$h]:-no layer})"; fi
    done
    if [[ -n $others ]] && ((own == 0)); then
      echo "$q: defined in layer $layer, declared in$others"
      bad=1
    fi
  done <"$tmp/defined"
  return $bad
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== the tree"
out=$(check_tree "$src")
rc=$?
[[ -n $out ]] && echo "$out"
((rc == 0)) && echo "layers: every include goes down or stays in its layer"

# The check itself must catch an upward include: a copy of the tree where util/ includes the step engine.
echo "== self-check: util/ including <mrcheck/step.h> must fail"
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

[[ -n $build ]] || exit $rc
echo "== the objects ($build/src/libmrcheck_*.a)"
objs=$(check_objects "$src" "$build")
orc=$?
[[ -n $objs ]] && echo "$objs"
((orc == 0)) && echo "layers: every symbol a layer needs from another is defined in a layer it uses"
((orc == 0)) || rc=1
echo "== the declarations: each function in a header of the layer that defines it"
decl=$(check_declarations "$src" "$build")
drc=$?
[[ -n $decl ]] && echo "$decl"
((drc == 0)) && echo "layers: every function is declared in a header of the layer that defines it"
((drc == 0)) || rc=1
# The declaration check must catch a function declared only in another layer's header: in the copy of the tree,
# check_hugepages (defined in the checks layer) declared in matrix.h (rules) instead of checks.h.
echo "== self-check: a checks function declared only in the rules layer's matrix.h must be reported"
decl_line=$(grep -m1 '^check_result check_hugepages(' "$tmp/include/mrcheck/checks.h")
sed -i '/^check_result check_hugepages(/d' "$tmp/include/mrcheck/checks.h"
printf '%s\n' "$decl_line" >>"$tmp/include/mrcheck/matrix.h"
self=$(check_declarations "$tmp" "$build")
if [[ $? -ne 0 && $self == *"mrcheck::check_hugepages: defined in layer checks, declared in matrix.h (rules)"* ]]; then
  echo "self-check: caught ($self)"
else
  echo "self-check FAILED: the misplaced declaration was not reported (got: ${self:-nothing})"
  rc=1
fi
# The object check must catch a use the table does not allow: checks without probes must report checks -> probes.
echo "== self-check: the checks layer, pretended not to use probes, must be reported"
self=$(check_objects "$src" "$build" "checks probes")
if [[ $? -ne 0 && $self == *"layer checks uses"*"that layer probes defines"* ]]; then
  echo "self-check: caught ($(head -n1 <<<"$self"))"
else
  echo "self-check FAILED: a use of probes by checks was not reported (got: ${self:-nothing})"
  rc=1
fi
exit $rc
