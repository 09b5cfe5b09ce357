#!/usr/bin/env bash
# The install tree: `cmake --install` puts the programs, the shipped data, the headers
# and the exported targets under a prefix; the installed axplan finds its data there
# (also after the tree is moved); a project outside configures with find_package(axonn)
# against it and ranks a model through the library.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
BUILD=$1 SRC=$2
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); echo "PASS $1"; }
bad() { fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/out" 2>/dev/null | tail -20; }

cmake --install "$BUILD" --prefix "$T/prefix" >"$T/out" 2>&1 && ok "cmake --install" || bad "cmake --install"
missing=""
for f in bin/axplan share/axonn/model_zoo/models/gpt-20b.json share/axonn/topology/clusters/perlmutter.json \
         include/axonn/planner/planner.hpp include/axonn/common/error.hpp lib/cmake/axonn/axonnConfig.cmake \
         lib/cmake/axonn/axonnTargets.cmake lib/libaxonn_planner.a; do
  [ -e "$T/prefix/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "installed files" || { echo "missing:$missing" >"$T/out"; bad "installed files"; }

# A model that exists only in the install tree, found by name: the data come from the
# prefix, not from the source tree.
cp "$T/prefix/share/axonn/model_zoo/models/gpt-tiny.json" "$T/prefix/share/axonn/model_zoo/models/only-installed.json"
"$T/prefix/bin/axplan" rank --model only-installed --topology perlmutter --gpus 4 --batch-seqs 8 >"$T/out" 2>&1 \
  && grep -q "gpt-tiny on 4 GPUs of perlmutter" "$T/out" && ok "installed axplan finds its data by name" \
  || bad "installed axplan finds its data by name"
mv "$T/prefix" "$T/moved"
"$T/moved/bin/axplan" rank --model only-installed --topology perlmutter --gpus 4 --batch-seqs 8 >"$T/out" 2>&1 \
  && ok "a moved install tree still finds its data" || bad "a moved install tree still finds its data"
mv "$T/moved" "$T/prefix"

# find_package(axonn) from a project outside.
if cmake -S "$SRC/tests/consumer" -B "$T/consumer" -DCMAKE_PREFIX_PATH="$T/prefix" -DCMAKE_BUILD_TYPE=Release >"$T/out" 2>&1 \
   && cmake --build "$T/consumer" -j 2 >>"$T/out" 2>&1; then
  ok "consumer configures and builds with find_package(axonn)"
  "$T/consumer/rank_gpt20b" >"$T/out" 2>&1 && grep -q "best of" "$T/out" && ok "consumer ranks GPT-20B: $(cat "$T/out")" \
    || bad "consumer ranks GPT-20B"
else
  bad "consumer configures and builds with find_package(axonn)"
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
