#!/usr/bin/env python3
"""Predicted all-reduce time and scaling efficiency for data-parallel training (docs/DISTRIBUTED.md).

Ring-equivalent all-reduce of S bytes over N ranks, per 8 MB bucket: 2(N-1)/N * S/bw + 2(N-1)*latency.
Network numbers are typical effective values (assumptions, not measurements); single-rank step times
are the ones docs/BENCHMARKS.md reports for the 2-core benchmark machine. Prints markdown tables.
"""
import math

NETS = {"1 GbE (118 MB/s, 50 µs)": (0.118e9, 50e-6), "10 GbE (1.18 GB/s, 20 µs)": (1.18e9, 20e-6),
        "25 GbE (2.95 GB/s, 15 µs)": (2.95e9, 15e-6), "InfiniBand HDR100 (12 GB/s, 1.5 µs)": (12.0e9, 1.5e-6)}
BUCKET = 8 << 20
# parameters (tfm_gpt_init / tfm_mt_transformer_create params.total) and seconds per single-rank step
GPT = (809856 * 4, 40.4e-3)          # 4x128, block 64, vocab 65; 24.75 it/s at 2 threads
MT = (9217157 * 4, 244e-3)           # Multi30k d_model 256, 3+3, FFN 512, vocab 8018/6277; 244 ms/step


def t_allreduce(S, N, bw, lat):
    return 2 * (N - 1) / N * S / bw + math.ceil(S / BUCKET) * 2 * (N - 1) * lat


def table(title, S, t_step, ranks, strong):
    print(f"\n{title}\n")
    print("| network | " + " | ".join(f"N={n}" for n in ranks) + " |")
    print("| --- | " + " | ".join("---:" for _ in ranks) + " |")
    for net, (bw, lat) in NETS.items():
        cells = []
        for n in ranks:
            t = t_allreduce(S, n, bw, lat)
            c = t_step / n if strong else t_step
            cells.append(f"{t * 1e3:.1f} ms, {c / (c + t) * 100:.0f}%")
        print(f"| {net} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    table("GPT, weak scaling", *GPT, [2, 4, 8, 16, 32, 64], False)
    table("GPT, strong scaling (global batch 12: N must divide 12)", *GPT, [2, 3, 4, 6, 12], True)
    table("Transformer (Multi30k), weak scaling", *MT, [2, 4, 8, 16, 32, 64], False)
    table("Transformer (Multi30k), strong scaling (global batch 64)", *MT, [2, 4, 8, 16, 32, 64], True)
