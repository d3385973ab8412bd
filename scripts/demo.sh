#!/bin/sh
# The demo: a directory tree goes into a fresh embedded store and comes back
# identical. Usage: demo.sh PATH-TO-HG
set -eu
hg=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/hg-demo.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src=$(cd "$(dirname "$0")/.." && pwd)

step() { printf '\n== %s\n' "$*"; }

step "a fresh store"
cd "$work"
"$hg" init

step "the project's source tree goes in (hg put -r)"
mkdir tree
cp -R "$src/cas" "$src/cmd" "$src/README.md" tree/
ln -s README.md tree/LINK-TO-README
root=$("$hg" put -r --pin demo tree)
echo "root: $root"
"$hg" stat demo

step "and comes back out (hg get -o)"
"$hg" get demo -o copy
if diff -r tree copy >/dev/null && [ "$(readlink copy/LINK-TO-README)" = README.md ]; then
  echo "identical: $(find copy -type f | wc -l | tr -d ' ') files, symlink kept"
else
  echo "DIFFERENT"; diff -r tree copy; exit 1
fi

step "every block re-hashed (hg fsck)"
"$hg" fsck

step "what a stored file looks like (hg dag get)"
echo "hello, store" > note.txt
c=$("$hg" put note.txt)
"$hg" dag get "$c"

step "a Work Order: six Haygents, fan-out and fan-in, advancing only on accepted receipts (hg run)"
"$hg" run --run-id run-demo "$src/fixtures/workorders/pipeline.json"
"$hg" report run-demo

step "a Haygent proves an artifact round-trips through the store (hg haygent run)"
mkdir ws
head -c 3000000 /dev/urandom > ws/data.bin
"$hg" haygent run "$src/fixtures/haygents/roundtrip" --workspace ws --pin demo-run
"$hg" report demo-run

step "another machine checks the run from a bundle and the runner's public key alone (hg bundle export, hg verify --bundle)"
"$hg" bundle export run-demo -o run-demo.car
"$hg" key show > runner.pub
mkdir elsewhere
(cd elsewhere && HG_STORE="$work/elsewhere/no-store" "$hg" verify --bundle ../run-demo.car --keys ../runner.pub | tail -n 4)

step "and the same inputs do the same work again (hg replay)"
"$hg" replay demo-run

step "decisions are asked before anything runs (exit 5), then remembered for the task class (hg run, hg belief)"
set +e
"$hg" run "$src/fixtures/workorders/release.json" </dev/null
code=$?
set -e
[ "$code" = 5 ] || { echo "expected exit 5, got $code"; exit 1; }
echo '{"platform": "linux", "channel": "beta", "retention": 30}' > answers.json
"$hg" run --run-id run-release --answers answers.json "$src/fixtures/workorders/release.json"
"$hg" run --run-id run-hotfix "$src/fixtures/workorders/release-hotfix.json" </dev/null
"$hg" belief log release
