#!/usr/bin/env bash
# memadapt under memgang (issue: schedulers and adaptive applications):
# the C CG solver (crates/memadapt/examples/c/cg.c) beside a memory hog in
# a pool that cannot hold both, in core (`incore`: the kernel or memgang
# pages its matrix) and adaptive (`mema`: it keeps what memgang's allowance
# file says it may, the rest in its data file), under cosched (both run;
# the allowance is the pool less the hog) and gang so/ao/ai (they take
# turns; the CG may use the pool while it runs). Prints one table: makespan,
# overhead against batch, the CG's own time, swap traffic.
#   sudo bench/memadapt_memgang.sh [OUT_DIR]     N=90 P=12 ITERS=400
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup memadapt_memgang "${1:-}"
cargo build --release -p memadapt --quiet
out=$(cd "$out" && pwd)
N=${N:-90} P=${P:-12} ITERS=${ITERS:-400} QUANTUM=${QUANTUM:-10s}
mkdir -p "$out/work"
cg=$out/work/cg
cc -std=c99 -O2 -I crates/memadapt/include crates/memadapt/examples/c/cg.c \
  target/release/libmemadapt.a -lpthread -ldl -lm -o "$cg"
"$cg" create "$out/work/a.panels" "$N" "$P" > /dev/null
sync "$out/work/a.panels"
matrix=$(stat -c %s "$out/work/a.panels")
vectors=$((5 * 8 * N * N * N))
footprint=$((matrix + vectors))
# The pool holds the CG with 30% to spare, not the CG and the hog.
pool_mib=$((footprint * 13 / 10 >> 20))
hog_mib=$((pool_mib * 7 / 10))
echo "CG footprint $((footprint >> 20)) MiB (matrix $((matrix >> 20)) MiB), pool $pool_mib MiB, hog $hog_mib MiB" |
  tee "$out/sizes.txt"
wl=$PWD/target/release/memgang-workload
runs=()
for mode in incore mema; do
  for policy in cosched gang; do
    name=$mode-$policy
    cat > "$out/$name.toml" <<TOML
name = "cg-$mode-with-hog"
pool_memory = "${pool_mib}M"
quantum = "$QUANTUM"
switch = "so/ao/ai"
[[job]]
name = "cg"
# Exit 1 is "stopped at --iterations before converging": what is asked.
command = ["sh", "-c", "\"\$0\" \"\$@\"; test \$? -le 1", "$cg", "$mode", "$out/work/a.panels", "--iterations", "$ITERS", "--tol", "0"]
memory = "$((footprint >> 20))M"
[[job]]
name = "hog"
command = ["$wl", "--mib", "$hog_mib", "--pattern", "seq", "--iterations", "${HOG_ITERS:-150}", "--compute", "4"]
memory = "${hog_mib}M"
TOML
    dd if="$out/work/a.panels" iflag=nocache count=0 status=none
    step "$name"
    "$bin" run "$out/$name.toml" --policy "$policy" --json "$out/$name.json" --logs "$out/logs/$name" >/dev/null
    runs+=("$out/$name.json")
  done
done
python3 - "$out" "${runs[@]}" <<'PY' | tee "$out/table.md"
import json, sys
out, files = sys.argv[1], sys.argv[2:]
print(open(f"{out}/sizes.txt").read().strip() + "\n")
import re
print("| CG | policy | makespan (s) | overhead vs batch | batch (s) | CG completion (s) | CG major faults | swap in / out (pages) | CG residual | failed |")
print("|---|---|---|---|---|---|---|---|---|---|")
for f in files:
    r = json.load(open(f))
    cg = r["jobs"][0]
    mode = r["experiment"].split("-")[1]
    ov = r["switching_overhead"]
    failed = sum(1 for j in r["jobs"] if j["exit_code"] != 0)
    # The solver's own check: the same iterations give the same residual.
    m = re.findall(r"residual ([0-9.e+-]+)", open(cg["log_dir"] + "/stdout").read())
    res = m[-1] if m else "?"
    print(f"| {mode} | {r['policy']}{' ' + r['switch'] if r['policy'] == 'gang' else ''} | {r['makespan_s']:.1f} | "
          f"{'-' if ov is None else f'{ov * 100:.1f}%'} | {r['batch_makespan_s'] or 0:.1f} | {cg['completion_s']:.1f} | "
          f"{cg['major_faults']} | {r['swap_in_pages']} / {r['swap_out_pages']} | {res} | {failed} |")
PY
printf 'machine: %s CPUs, Linux %s\n' "$(nproc)" "$(uname -r)" >> "$out/table.md"
rm -f "$out/work/a.panels"
echo "results in $out"
