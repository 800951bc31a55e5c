#!/bin/bash
# mrcheck-prolog's textfile read by the real thing (docs/prometheus.md): Debian's prometheus-node-exporter with only
# its textfile collector, on a free loopback port, scraped over HTTP; `promtool check metrics` on the file; the
# alert rules through `promtool check rules` and `promtool test rules`; a directory node_exporter cannot read gives
# mrcheck-prolog one line. No Slurm. About 2 s. Needs prometheus-node-exporter, prometheus (promtool), curl.
set -u
src=${MRCHECK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MRCHECK_BUILD_DIR:-$src/build}
prolog=$build/prolog/mrcheck-prolog
[[ -x $prolog ]] || { echo "SKIP: $prolog not built"; exit 77; }
for b in prometheus-node-exporter promtool curl python3; do
  command -v "$b" >/dev/null || { echo "SKIP: $b not installed (scripts/install-deps.sh)"; exit 77; }
done
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
exporter=""
cleanup() {
  [[ -n $exporter ]] && kill "$exporter" 2>/dev/null && wait "$exporter" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
chmod 0755 "$tmp"
mkdir -m 0755 "$tmp/textfile"
mkdir -m 0700 "$tmp/state"
prom=$tmp/textfile/mrcheck.prom

# A node with an HCA whose firmware is too old and a GPU: every family of the file.
SLURM_JOB_ID=4242 "$prolog" --dry-run --mode prolog --root "$src/tests/fixtures/matrix_hca_fw_old" --node n1 \
  --state-dir "$tmp/state" --textfile "$prom" 2>"$tmp/err"
[[ -s $prom ]] && ok "textfile written" || { bad "no textfile: $(cat "$tmp/err")"; exit 1; }
lint=$(promtool check metrics <"$prom" 2>&1)
[[ $? == 0 && -z $lint ]] && ok "promtool check metrics: clean" || bad "promtool check metrics: $lint"

# node_exporter as its own user where it exists (as Debian runs it), on a port the kernel picks free.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as=()
id prometheus >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && as=(setpriv --reuid=prometheus --regid=prometheus --clear-groups --)
"${as[@]}" prometheus-node-exporter --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
  --collector.textfile --collector.textfile.directory="$tmp/textfile" >"$tmp/exporter.log" 2>&1 &
exporter=$!
metrics=""
for _ in $(seq 1 50); do
  metrics=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null) && [[ -n $metrics ]] && break
  sleep 0.1
done
[[ -n $metrics ]] && ok "node_exporter serves /metrics on 127.0.0.1:$port" || bad "no /metrics: $(tail -3 "$tmp/exporter.log")"
want=(
  'mrcheck_check_status{check="hca_fw"} 2'
  'mrcheck_check_state{check="hca_fw",state="fail"} 1'
  'mrcheck_status 2'
  'mrcheck_run_info{hpc_job="4242",mode="prolog",node="n1"} 1'
  'mrcheck_rdma_device_info{board_id="MT_0000000838",device="mlx5_0",driver="",family="mlx5",firmware_version="28.33.0800",hca_type="MT4129"} 1'
  'node_textfile_scrape_error 0'
)
for w in "${want[@]}"; do
  grep -qxF -- "$w" <<<"$metrics" && ok "scraped: $w" || bad "not scraped: $w"
done
grep -q '^mrcheck_build_info{slurm_version="[^"]*",version="[0-9.]*"} 1$' <<<"$metrics" && ok "scraped: mrcheck_build_info" ||
  bad "no mrcheck_build_info"
grep -q '^mrcheck_rdma_port_info{device="mlx5_0",.*port="1",.*state="ACTIVE"' <<<"$metrics" && ok "scraped: port state" ||
  bad "no mrcheck_rdma_port_info: $(grep rdma_port <<<"$metrics")"

# The GPU fixture, with the driver's information file of its GPU (as /proc/driver/nvidia/gpus/BDF/information
# reads on an H200 node): DCGM-exporter's labels.
cp -a "$src/tests/fixtures/gpu_h200" "$tmp/gpu"
mkdir -p "$tmp/gpu/proc/driver/nvidia/gpus/0000:00:06.0"
printf 'Model: \t\t NVIDIA H200\nIRQ:   \t\t 45\nGPU UUID: \t GPU-8c1f3f2e-5b7a-4c1d-9e0f-123456789abc\nVideo BIOS: \t 96.00.af.00.01\n' \
  >"$tmp/gpu/proc/driver/nvidia/gpus/0000:00:06.0/information"
"$prolog" --dry-run --mode healthcheck --root "$tmp/gpu" --node n1 --state-dir "$tmp/state" --textfile "$prom" 2>/dev/null
grep -qx 'mrcheck_gpu_info{gpu="0",UUID="GPU-8c1f3f2e-5b7a-4c1d-9e0f-123456789abc",pci_bus_id="00000000:00:06.0"} 1' "$prom" &&
  ok "gpu_info with gpu, UUID, pci_bus_id as DCGM-exporter writes them" || bad "gpu_info: $(grep gpu_info "$prom")"
grep -q '^mrcheck_run_info{mode="healthcheck",node="n1"} 1$' "$prom" && ok "no hpc_job outside a job" ||
  bad "run_info: $(grep run_info "$prom")"
lint=$(promtool check metrics <"$prom" 2>&1)
[[ $? == 0 && -z $lint ]] && ok "promtool check metrics (GPU node): clean" || bad "promtool (GPU node): $lint"

# The alert rules.
out=$(promtool check rules "$src/etc/prometheus/mrcheck-alerts.yml" 2>&1) && ok "promtool check rules" || bad "check rules: $out"
out=$(cd "$src/tests/ecosystem" && promtool test rules mrcheck-alerts.test.yml 2>&1) && ok "promtool test rules" ||
  bad "test rules: $out"

# A textfile directory others cannot read: written, and exactly one line says node_exporter cannot read it.
if [[ $(id -u) == 0 ]]; then
  chmod 0700 "$tmp/textfile"
  "$prolog" --dry-run --mode healthcheck --root "$src/tests/fixtures/matrix_aligned" --node n1 \
    --state-dir "$tmp/state" --textfile "$prom" 2>"$tmp/err"
  n=$(grep -c 'cannot read it' "$tmp/err")
  [[ $n == 1 ]] && ok "unreadable directory: one line: $(grep 'cannot read it' "$tmp/err")" || bad "unreadable: $(cat "$tmp/err")"
  if ((${#as[@]})); then
    scrape=$(curl -fsS "http://127.0.0.1:$port/metrics")
    grep -qx 'node_textfile_scrape_error 1' <<<"$scrape" && ok "and node_exporter reports node_textfile_scrape_error 1" ||
      bad "node_exporter: $(grep scrape_error <<<"$scrape")"
  fi
fi
echo "prometheus_test: $fails failed"
((fails == 0))
