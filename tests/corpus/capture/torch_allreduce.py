# Two-rank torch.distributed all-reduce for the real-log captures (tests/corpus/capture/gpu_logs.sh).
# MODE (environment):
#   ok       init, all-reduce, check the sum, destroy
#   hostid   the same, each rank with its own NCCL_HOSTID (two "nodes" on one GPU: NET transport, no HCA here)
#   fill     fill the GPU's free memory before NCCL's init
#   oom      a healthy NCCL run, then a tensor larger than the GPU (torch's OutOfMemoryError, outside NCCL)
#   timeout  rank 1 never joins the all-reduce: rank 0's collective times out after 15 s (torch's watchdog)
#   peer_exit  rank 1 exits after init, before the all-reduce: rank 0 loses its peer
import datetime
import os
import time
import torch
import torch.distributed as dist

mode = os.environ.get("MODE", "ok")
rank = int(os.environ["RANK"])
if mode in ("hostid", "fill", "oom", "timeout", "peer_exit"):
    os.environ["NCCL_HOSTID"] = f"capture-rank{rank}"
torch.cuda.set_device(0)
hog = None
if mode == "fill":
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(free - (8 << 20), dtype=torch.uint8, device="cuda")
timeout = datetime.timedelta(seconds=15 if mode == "timeout" else 600)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0), timeout=timeout)
if mode == "peer_exit" and rank == 1:
    os._exit(3)
if mode == "timeout" and rank == 1:
    time.sleep(60)
    os._exit(0)
x = torch.ones(1 << 20, device="cuda") * (rank + 1)
dist.all_reduce(x)
torch.cuda.synchronize()
assert float(x[0]) == 3.0, float(x[0])
print(f"rank {rank}: all_reduce ok ({float(x[0])})", flush=True)
if mode == "oom":
    y = torch.empty(1 << 46, dtype=torch.uint8, device="cuda")
dist.destroy_process_group()
