#!/bin/sh
# The demo: a fresh store; a Work Order that does real work on a real tree
# (a Go module's failing tests repaired, then vetted, built and tested
# again); that work checked on another store from a bundle alone and
# replayed; and a Work Order's decisions asked once, then known for its
# task class. Usage: demo.sh PATH-TO-HG
set -eu
hg=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/hg-demo.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src=$(cd "$(dirname "$0")/.." && pwd)

step() { printf '\n== %s\n' "$*"; }
# say explains a term or what just happened, indented under the output.
say() { printf '   > %s\n' "$*"; }

step "a fresh store (hg init)"
cd "$work"
"$hg" init
say "everything hg keeps (files, trees, evidence, receipts) is a block named by the hash of its bytes (a CID)."

step "a directory tree goes in and comes back identical (hg put -r, hg get -o)"
mkdir tree
cp -R "$src/cas" "$src/cmd" "$src/README.md" tree/
ln -s README.md tree/LINK-TO-README
root=$("$hg" put -r --pin demo tree)
echo "root: $root"
"$hg" get demo -o copy
if diff -r tree copy >/dev/null && [ "$(readlink copy/LINK-TO-README)" = README.md ]; then
  echo "identical: $(find copy -type f | wc -l | tr -d ' ') files, symlink kept"
else
  echo "DIFFERENT"; diff -r tree copy; exit 1
fi
"$hg" fsck | tail -n 1

step "real work: a Go module whose tests fail"
sh "$src/scripts/unpack.sh" "$src/fixtures/workspaces/calc.txtar" calc
cat calc/factor.go
grep -n 'want' calc/calc_test.go | head -n 1
"$hg" put -r --pin calc-src calc >/dev/null
say "Factor is 3 and the tests want Double(x) = 2x. The module is stored and pinned as \"calc-src\"."

step "a Work Order: three Haygents, each starting from the tree the one before it left"
cat "$src/fixtures/workorders/calc-repair.json"
say "Haygent: a package of steps, permissions and gates that does one job and proves it."
say "fix (gotest) runs the tests and repairs factor.go; build (gobuild) vets it and builds package.a;"
say "check (gocheck) runs the tests again, with the archive there."
say "{\"from\": \"fix\"}: build starts from the tree fix's accepted receipt names, and from nothing else."

step "run it (hg run --out): each node advances only on a receipt the scheduler verified itself"
"$hg" run --run-id run-calc --adapter "script:$src/fixtures/scripts/gotest-fix.json" --out fixed \
  "$src/fixtures/workorders/calc-repair.json"
ls fixed/check
cat fixed/check/factor.go
say "slot: the one place a model may propose values; here a scripted adapter proposes factor 2."
say "every command ran confined (namespaces, Landlock, no network), and could write only what its grants allow."

step "what happened, from the ledger alone (hg report)"
"$hg" report run-calc
"$hg" report run-calc/fix | awk '/^steps/ { p = 1 } /^artifacts/ { p = 0 } p && !/^ *\|/ && !/last 10 lines/'
say "receipt: the signed record of one Haygent run, built from its chain of steps and evidence."
say "gate: a check over that evidence (TEST_PASS: tests ran, none failed); PASS only when every gate holds."

step "the same trees again: nothing runs (the memo cache)"
"$hg" run --run-id run-calc-again --adapter "script:$src/fixtures/scripts/gotest-fix.json" \
  "$src/fixtures/workorders/calc-repair.json" 2>/dev/null
"$hg" status run-calc-again
say "memo cache: an accepted receipt is reused for the same package, input, permissions and starting tree."

step "another machine checks the work from a bundle and the runner's public key alone (hg bundle export, hg verify --bundle)"
"$hg" bundle export run-calc -o run-calc.car
"$hg" key show > runner.pub
mkdir elsewhere
(cd elsewhere && HG_STORE="$work/elsewhere/no-store" "$hg" verify --bundle ../run-calc.car --keys ../runner.pub | tail -n 5)
say "each node's receipt is verified, and the tree it started from rebuilt from the stored trees."

step "on a second store: the final tree comes out the same, and the work replays (hg bundle import, hg get RUN/NODE, hg replay)"
(
  export HG_STORE="$work/second"
  "$hg" init >/dev/null
  "$hg" bundle import --pin calc-run run-calc.car
  "$hg" key trust runner.pub
  "$hg" get calc-run/check -o check-again
  diff -r fixed/check check-again && echo "the final tree is identical: $(ls check-again | tr '\n' ' ')"
  "$hg" replay calc-run
)
say "replay: the same package, input and tree, with the recorded slot answers, do the same work."

step "decisions are asked before anything runs, then remembered for the task class (hg run, hg belief)"
set +e
"$hg" run "$src/fixtures/workorders/release.json" </dev/null 2>questions.err
code=$?
set -e
[ "$code" = 5 ] || { echo "expected exit 5, got $code"; cat questions.err; exit 1; }
say "exit 5 is expected: hg needs answers, and ran nothing. It said so on stderr:"
sed 's/^hg: error: /     /' questions.err
echo '{"platform": "linux", "channel": "beta", "retention": 30}' > answers.json
"$hg" run --run-id run-release --answers answers.json "$src/fixtures/workorders/release.json"
"$hg" run --run-id run-hotfix "$src/fixtures/workorders/release-hotfix.json" </dev/null
"$hg" belief log release
say "belief log: the answers given for a task class (release); the hotfix, of the same class, asked nothing."

step "try next"
cat <<EOF
   The demo's store is gone with it. To do the same in a store you keep, from the repository:
     export HG_STORE=/tmp/hg-store && bin/hg init
     sh scripts/unpack.sh fixtures/workspaces/calc.txtar /tmp/calc && bin/hg put -r --pin calc-src /tmp/calc
     bin/hg run --adapter script:fixtures/scripts/gotest-fix.json --out /tmp/out fixtures/workorders/calc-repair.json
   then, with the run id it prints:
     bin/hg runs                        # every run of the store
     bin/hg report RUN/fix              # one node's receipt, step by step
     bin/hg logs RUN fix                # the output of fix's commands
     bin/hg get RUN/fix -o /tmp/fixed   # any node's final tree
     bin/hg dag dot RUN | dot -Tsvg > run.svg
   Then write a Work Order of your own beside fixtures/workorders/calc-repair.json (Haygent paths are
   relative to the file; the Haygents are under fixtures/haygents),
   or read README.md (Use), SPEC.md (6. Work Orders and the scheduler) and docs/workorders.md.
EOF
