#!/usr/bin/env python3
"""Writes a large synthetic NCCL job log: 64 ranks on 8 hosts interleaved, srun -l prefixes, INFO lines of
every kind NCCL 2.2x prints, a failure every ~20k lines, a few 1 MiB lines and some binary noise. The
content is synthetic; its line formats are the real ones from tests/corpus/nccl_logs."""
import argparse
import random

p = argparse.ArgumentParser()
p.add_argument("--size-mib", type=int, default=1024)
p.add_argument("--out", required=True)
a = p.parse_args()

rnd = random.Random(8)
target = a.size_mib << 20
hosts = [f"gpu{n:03d}" for n in range(8)]
info = [
    "NCCL INFO Channel {c:02d}/32 : {r}[{r}] -> {n}[{n}] [send] via NET/IB/{d}/GDRDMA",
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:10.0.{h}.1<0>",
    "NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "NCCL INFO threadThresholds 8/8/64 | 512/8/64 | 512 | 512",
    "NCCL INFO transport/net_ib.cc:{c} -> 2",
    "NCCL INFO comm 0x55d5{c:04x} rank {r} nRanks 64 nNodes 8 localRanks 8 localRank {d} MNNVL 0",
    "NCCL INFO DMA-BUF is available on GPU device {d}",
]
fail = [
    "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
    "misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory",
    "transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.3.1<41233> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
]
written = 0
line_no = 0
with open(a.out, "wb", buffering=1 << 20) as out:
    chunk = []
    while written < target:
        line_no += 1
        r = rnd.randrange(64)
        h = hosts[r // 8]
        pid = 10000 + r
        if line_no % 20011 == 0:
            body = rnd.choice(fail)
        else:
            body = rnd.choice(info).format(c=rnd.randrange(32), r=r, n=(r + 1) % 64, d=r % 8, h=r // 8)
        s = f"{r}: {h}:{pid}:{pid + 7} [{r % 8}] {body}\n"
        if line_no % 1000003 == 0:
            s = "x" * (1 << 20) + "\n"  # an over-long line (progress bar, base64 blob)
        if line_no % 500009 == 0:
            s = bytes(rnd.randrange(256) for _ in range(200)).decode("latin-1") + "\n"
        b = s.encode("latin-1")
        chunk.append(b)
        written += len(b)
        if len(chunk) >= 4096:
            out.write(b"".join(chunk))
            chunk.clear()
    out.write(b"".join(chunk))
print(f"mrcheck: bench: wrote {written} bytes, {line_no} lines to {a.out}")
