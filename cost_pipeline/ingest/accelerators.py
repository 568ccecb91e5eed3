"""Instance type → accelerator count (GPUs, Trainium/Inferentia chips, Gaudi/Qualcomm cards).

The built-in table covers AWS's accelerated families (EC2 and SageMaker, whose `ml.` prefix
is stripped before lookup; the retired g2 too), Azure's N-series sizes (the retired NC v1,
NCv2, ND v1 and NV v1 too, which older bills name), and the GCP machine types
whose name does not end in their GPU count (`a2-highgpu-8g`-style names are read from the
`-<N>g` suffix by the GCP and FOCUS normalizations); `accelerators:` in the config extends or
overrides it, its keys in any case.
"""

from __future__ import annotations

import re

ACCELERATOR_TYPE = re.compile(r"^(p|g|gr|trn|inf|dl)\d")


def _family(prefix: str, sizes: dict[str, int]) -> dict[str, int]:
    return {f"{prefix}.{size}": count for size, count in sizes.items()}


_ONE = {s: 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")}

BUILTIN: dict[str, int] = {
    **_family("p2", {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}),
    **_family("p3", {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8,
    "p4de.24xlarge": 8,
    "p5.4xlarge": 1,
    "p5.48xlarge": 8,
    "p5e.48xlarge": 8,
    "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8,
    "p6-b300.48xlarge": 8,
    "p6e-gb200.36xlarge": 4,
    "p6e-gb300.36xlarge": 4,
    **_family("g2", {"2xlarge": 1, "8xlarge": 4}),   # retired (GRID K520)
    **_family("g3", {"4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    "g3s.xlarge": 1,
    **_family("g4dn", {**_ONE, "12xlarge": 4, "metal": 8}),
    **_family("g4ad", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    **_family("g5", {**_ONE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    **_family("g5g", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 2,
                      "metal": 2}),
    **_family("g6", {**_ONE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    **_family("g6e", {**_ONE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    **_family("g6f", {"large": 1, "xlarge": 1, "2xlarge": 1, "4xlarge": 1}),
    **_family("gr6", {"4xlarge": 1, "8xlarge": 1}),
    **_family("trn1", {"2xlarge": 1, "32xlarge": 16}),
    "trn1n.32xlarge": 16,
    "trn2.3xlarge": 1,
    "trn2.48xlarge": 16,
    "trn2u.48xlarge": 16,
    **_family("inf1", {"xlarge": 1, "2xlarge": 1, "6xlarge": 4, "24xlarge": 16}),
    **_family("inf2", {"xlarge": 1, "8xlarge": 1, "24xlarge": 6, "48xlarge": 12}),
    "dl1.24xlarge": 8,
    "dl2q.24xlarge": 8,
    # GCP G2 (NVIDIA L4)
    **{f"g2-standard-{cpus}": 1 for cpus in (4, 8, 12, 16, 32)},
    "g2-standard-24": 2,
    "g2-standard-48": 4,
    "g2-standard-96": 8,
    # Azure N-series VM sizes (FOCUS files name them; matched case-insensitively there)
    **{f"Standard_{size}": count for size, count in {
        "NC6s_v3": 1, "NC12s_v3": 2, "NC24s_v3": 4, "NC24rs_v3": 4,
        "NC4as_T4_v3": 1, "NC8as_T4_v3": 1, "NC16as_T4_v3": 1, "NC64as_T4_v3": 4,
        "NC24ads_A100_v4": 1, "NC48ads_A100_v4": 2, "NC96ads_A100_v4": 4,
        "NC40ads_H100_v5": 1, "NC80adis_H100_v5": 2, "NCC40ads_H100_v5": 1,
        "ND40rs_v2": 8, "ND96asr_v4": 8, "ND96amsr_A100_v4": 8, "ND96isr_H100_v5": 8,
        "ND96isr_H200_v5": 8, "ND96isr_MI300X_v5": 8, "ND128isr_NDR_GB200_v6": 4,
        "NV12s_v3": 1, "NV24s_v3": 2, "NV48s_v3": 4, "NV36ads_A10_v5": 1,
        "NV36adms_A10_v5": 1, "NV72ads_A10_v5": 2,
        # retired sizes, still in older bills: NC v1 (K80), NCv2 (P100), ND v1 (P40), NV v1
        # (M60)
        "NC6": 1, "NC12": 2, "NC24": 4, "NC24r": 4,
        "NC6s_v2": 1, "NC12s_v2": 2, "NC24s_v2": 4, "NC24rs_v2": 4,
        "ND6s": 1, "ND12s": 2, "ND24s": 4, "ND24rs": 4,
        "NV6": 1, "NV12": 2, "NV24": 4,
    }.items()},
}


def accelerator_table(extra: dict[str, int] | None = None) -> dict[str, int]:
    """The built-in table extended (and overridden) by the config's `accelerators:`, keyed
    by the lower-case type.

    A type is one type in any case: the FOCUS reader matches Azure's `Standard_NC…` sizes in
    any case, and the bills spell AWS and GCP types in lower case. A config key naming a
    built-in type in other letters (`standard_nc24ads_a100_v4`) replaces its count; kept
    beside it, it matched the same lines twice.
    """
    table = {instance_type.lower(): count for instance_type, count in BUILTIN.items()}
    for instance_type, count in (extra or {}).items():
        table[instance_type.lower().removeprefix("ml.")] = int(count)
    return table
